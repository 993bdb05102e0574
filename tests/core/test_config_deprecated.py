"""Config keys that moved to `near_dup`: read at their old place with a message, resolved as the new layout."""

from __future__ import annotations

import warnings

import pytest

from corpus_dagster.core.config import config_sha256, load_config, resolve_config
from corpus_dagster.core.deprecated import MOVED, DeprecatedKeyWarning
from corpus_dagster.core.errors import ConfigError


def _resolve(raw: dict) -> tuple[dict, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resolved = resolve_config(raw, "old.yaml")
    return resolved, [str(w.message) for w in caught if issubclass(w.category, DeprecatedKeyWarning)]


@pytest.mark.parametrize(("section", "key"), sorted(MOVED))
def test_every_moved_key_lands_at_its_new_place_with_a_message(section: str, key: str) -> None:
    new = MOVED[(section, key)]
    value = {"num_perm": 64, "seed": 9, "scheme": "affine64", "shingle_size": 4, "verify_batch_shingles": 2048,
             "verify_chunk_pairs": 7, "threshold": 0.6, "bands": 12, "rows": 4}[new]
    raw = {"dataset": f"{section}-{key}", section: {key: value}}  # one raw config each: resolved once per process
    if new in ("bands", "rows"):  # the banding is set whole
        raw[section] = {"bands": 12, "rows": 4}
    resolved, messages = _resolve(raw)
    assert resolved["near_dup"][new] == value
    assert key not in resolved[section]
    assert f"old.yaml: {section}.{key} is now near_dup.{new}" in messages


def test_a_config_in_the_old_layout_hashes_as_the_same_config_in_the_new_one() -> None:
    old, messages = _resolve({"dedup": {"num_perm": 128, "seed": 1, "analysis_threshold": 0.7, "jaccard_threshold": 0.8},
                              "analysis": {"shingle_size": 5}})
    new, none = _resolve({"near_dup": {"num_perm": 128, "seed": 1, "threshold": 0.7, "shingle_size": 5},
                          "dedup": {"jaccard_threshold": 0.8}})
    assert old == new and config_sha256(old) == config_sha256(load_config(None)) and none == []
    assert len(messages) == 4


def test_old_dedup_bands_keep_their_rows() -> None:
    resolved, messages = _resolve({"dedup": {"num_perm": 64, "bands": 16}})
    assert (resolved["near_dup"]["bands"], resolved["near_dup"]["rows"]) == (16, 4)
    assert messages == ["old.yaml: dedup.num_perm is now near_dup.num_perm",
                        "old.yaml: dedup.bands is now near_dup.bands, with near_dup.rows = num_perm / bands (4)"]


def test_two_old_keys_that_now_mean_one_setting_must_agree() -> None:
    with pytest.raises(ConfigError, match=r"\$\.analysis\.shingle_size: 4 disagrees with dedup\.shingle_size \(5\)"):
        resolve_config({"dedup": {"shingle_size": 5}, "analysis": {"shingle_size": 4}})
    with pytest.raises(ConfigError, match=r"dedup\.bands: 8 disagrees with analysis\.rows \(5\)"):
        resolve_config({"dedup": {"bands": 16}, "analysis": {"bands": 25, "rows": 5}})
    agreed, _ = _resolve({"dedup": {"shingle_size": 4}, "analysis": {"shingle_size": 4}})
    assert agreed["near_dup"]["shingle_size"] == 4


def test_a_moved_key_that_disagrees_with_its_new_place_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"\$\.dedup\.seed: moved to near_dup\.seed, which the config also sets to 2"):
        resolve_config({"dedup": {"seed": 1}, "near_dup": {"seed": 2}})
    same, _ = _resolve({"dedup": {"seed": 2}, "near_dup": {"seed": 2}})
    assert same["near_dup"]["seed"] == 2


def test_a_file_in_the_old_layout_loads_with_its_message(tmp_path) -> None:
    path = tmp_path / "old.yaml"
    path.write_text("dataset: d\ndedup:\n  num_perm: 64\n")
    with pytest.warns(DeprecatedKeyWarning, match=r"old\.yaml: dedup\.num_perm is now near_dup\.num_perm"):
        resolved = load_config(path, {"dataset": "fresh-cache-entry"})
    assert resolved["near_dup"]["num_perm"] == 64


def test_the_cli_says_each_moved_key_once_on_a_warning_line(tmp_path, capsys) -> None:
    from corpus_dagster.cli.run import run_pipeline

    config = tmp_path / "old.yaml"
    config.write_text(f"dataset: cli-moved-keys\ndedup:\n  shingle_size: 5\npaths:\n  artifacts: {tmp_path / 'a'}\n")
    assert run_pipeline(str(config)) == 2  # no ledger: stops before any run, after reading the config
    err = capsys.readouterr().err.splitlines()
    assert err.count(f"run: warning: {config}: dedup.shingle_size is now near_dup.shingle_size") == 1
    assert not any("DeprecatedKeyWarning" in line for line in err) and any(line.startswith("run: error:") for line in err)
