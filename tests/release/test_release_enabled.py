"""`release.enabled: false`: the release driver builds nothing and reads nothing (the asset reports it)."""

from corpus_dagster.core.layout import Layout
from corpus_dagster.release import driver


def test_a_disabled_release_builds_and_reads_nothing(tmp_path, make_settings):
    settings = make_settings({"paths": {"artifacts": str(tmp_path / "artifacts")}, "release": {"enabled": False}})
    layout = Layout.from_config(settings.resolved)
    said: list[str] = []
    # an empty root: a release that read its inputs would fail (no shards, no token streams)
    assert driver.run_release_stage(layout, settings, log=said.append) == {"enabled": False}
    assert said == ["release.enabled is false: nothing built"]
    assert not layout.stage("release").exists()
