"""`python -m corpus_dagster.run` with its artifacts on an S3 server on 127.0.0.1 (moto's): keys planted in the
bucket, two writers at once, a store that is gone, a missing `[deploy]` extra."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("moto")
pytest.importorskip("s3fs")

from store_box import BUCKET, cli, client, finished, keys, s3_in_a_thread, store_config  # noqa: E402


@pytest.fixture(scope="module")
def s3():
    with s3_in_a_thread() as env:
        yield env


def _files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}


def test_planted_keys_write_nothing_outside_the_mirror_and_stay_in_the_store(s3, tmp_path):
    config, prefix = store_config(tmp_path, s3)
    target = tmp_path / "abs-target.txt"
    planted = [f"{prefix}/../escape-up.txt", f"{prefix}/corpus/../../../escape-climb.txt",
               f"{prefix}/{target}",  # `<prefix>//abs/path`: joined to the mirror, it replaced the base
               f"{prefix}/corpus\\raw\\backslash.txt"]
    s3_client = client(s3)
    for key in planted:
        s3_client.put_object(Bucket=BUCKET, Key=key, Body=b"planted: must never become a local file")
    before = _files_under(tmp_path)

    code, out, err = finished(cli(tmp_path, s3, "m1", config))
    assert code == 0, out[-3000:] + err[-3000:]
    (mirror,) = (tmp_path / "m1" / "mirror").iterdir()
    inside = (f"{mirror.relative_to(tmp_path).as_posix()}/", "m1/dagster_home/")
    written = {f for f in _files_under(tmp_path) - before if not f.startswith(inside)}
    assert written == set(), written  # nothing beside the mirror and the instance
    assert not target.exists()
    assert not [p for p in tmp_path.rglob("*") if "\\" in p.name or "escape" in p.name or "abs-target" in p.name]
    assert set(planted) <= keys(s3, prefix.rsplit("/", 1)[0])  # the run's pushes removed none of them
    warnings = [line for line in (out + err).splitlines() if "refused" in line]
    assert len(warnings) == 1 and warnings[0].startswith("run: warning: artifacts store s3://"), warnings
    for key in planted:
        assert repr(key[len(prefix) + 1:]) in warnings[0]


def test_two_runs_at_once_on_one_prefix_end_well_or_the_loser_heals_on_its_next_run(s3, tmp_path):
    config, prefix = store_config(tmp_path, s3)
    runs = {machine: cli(tmp_path, s3, machine, config) for machine in ("m1", "m2")}
    ended = {machine: finished(proc) for machine, proc in runs.items()}
    codes = sorted(code for code, _, _ in ended.values())
    assert codes in ([0, 0], [0, 3]), {m: (c, out[-2000:], err[-2000:]) for m, (c, out, err) in ended.items()}
    for machine, (code, out, err) in ended.items():
        if code == 3:
            errors = [line for line in err.splitlines() if line.startswith("run: error:")]
            assert any("another writer" in line and str(tmp_path / machine / "mirror") in line and "Rerun" in line
                       for line in errors), err[-3000:]
            code, out, err = finished(cli(tmp_path, s3, machine, config))
            assert code == 0, out[-3000:] + err[-3000:]
