import hashlib
import json

import pytest

from corpus_dagster.core.config import (
    EXECUTION_KEYS,
    config_sha256,
    fill_defaults,
    load_config,
    load_schema,
    resolve_config,
)
from corpus_dagster.core.errors import ConfigError


def test_empty_config_gets_every_default():
    resolved = load_config(None)
    assert resolved["dataset"] == "corpus"
    assert resolved["shard_rows"] == 10000
    assert resolved["paths"]["artifacts"] == "./artifacts"
    assert resolved["ingest"]["part_max_bytes"] == 64 * 1024 * 1024
    assert resolved["refresh"]["cron"] == "0 3 * * *"
    assert resolved["near_dup"]["num_perm"] == 128 and resolved["near_dup"]["bands"] is None


def _walk(schema, path="$"):
    if schema.get("type") == "object" and "properties" in schema:
        for key, sub in schema["properties"].items():
            yield f"{path}.{key}", sub
            yield from _walk(sub, f"{path}.{key}")


def _off_without_default(sub) -> bool:
    """A nullable key without a default: off until set, and left out of the resolved config (so adding one
    changes no config hash)."""
    return "null" in sub.get("type", []) and "default" not in sub


def test_every_schema_key_has_default_and_description():
    missing = [p for p, sub in _walk(load_schema("corpus-config.schema.json"))
               if ("default" not in sub and not _off_without_default(sub)) or not sub.get("description")]
    assert missing == []


def test_a_nullable_key_without_a_default_is_left_out_of_the_resolved_config():
    off = [p for p, sub in _walk(load_schema("corpus-config.schema.json")) if _off_without_default(sub)]
    resolved = resolve_config({})
    for path in off:
        *parents, key = path.split(".")[1:]
        section = resolved
        for name in parents:
            section = section[name]
        assert key not in section, path


def test_all_violations_reported_with_json_paths():
    with pytest.raises(ConfigError) as err:
        resolve_config({"shard_rows": 0, "val_permille": 2000, "paths": {"artifacts": 5}, "bogus": 1})
    text = str(err.value)
    for path in ("$.shard_rows", "$.val_permille", "$.paths.artifacts", "$: Additional properties"):
        assert path in text
    assert len(err.value.violations) == 4


def test_banding_must_fit_the_signatures_and_be_set_whole():
    with pytest.raises(ConfigError, match=r"bands x rows \(16 x 8\) exceeds num_perm \(100\)"):
        resolve_config({"near_dup": {"num_perm": 100, "bands": 16, "rows": 8}})
    with pytest.raises(ConfigError, match="set both bands and rows, or neither"):
        resolve_config({"near_dup": {"bands": 16}})
    assert resolve_config({"near_dup": {"num_perm": 100, "bands": 20, "rows": 5}})["near_dup"]["bands"] == 20


def test_config_sha256_is_canonical_json_without_execution_keys():
    resolved = load_config(None, {"dataset": "x"})
    body = {k: v for k, v in resolved.items() if k not in ("paths", "locks", "executor", "workers", "refresh", "progress", "analysis", "release", "review")}
    body["tokenize"] = {k: v for k, v in body["tokenize"].items()
                        if k not in ("engine", "threads_per_worker", "rebuild_check", "rebuild_check_batches")}
    body["publish"] = {k: v for k, v in body["publish"].items() if k not in ("rebuild_check_shards", "pii_check_docs", "pii_check_chars")}
    body["dedup"] = {k: v for k, v in body["dedup"].items() if k != "batch_bytes"}
    body["near_dup"] = {k: v for k, v in body["near_dup"].items()
                        if k not in ("batch_bytes", "verify_batch_shingles", "verify_chunk_pairs")}
    body["ingest"] = {k: v for k, v in body["ingest"].items() if k != "allowed_prefixes"}
    assert set(EXECUTION_KEYS) == {  # marked in the schema; this list is what a rebuild elsewhere may change
        "paths", "locks", "executor", "workers", "refresh", "progress", "tokenize.engine",
        "tokenize.threads_per_worker", "tokenize.rebuild_check", "tokenize.rebuild_check_batches",
        "publish.rebuild_check_shards", "publish.pii_check_docs", "publish.pii_check_chars", "dedup.batch_bytes",
        "near_dup.batch_bytes", "near_dup.verify_batch_shingles", "near_dup.verify_chunk_pairs",
        "release.rebuild_check", "release.rebuild_check_units", "analysis.batch_bytes",
        "analysis.verify_cluster_pairs", "analysis.verify_cluster_bytes", "ingest.allowed_prefixes"}
    canon = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    assert config_sha256(resolved) == hashlib.sha256(canon).hexdigest()
    other = load_config(None, {"dataset": "x", "workers": 4, "paths": {"artifacts": "/elsewhere"},
                               "tokenize": {"threads_per_worker": 3}, "executor": {"kind": "dask", "fan_out": 4}})
    assert config_sha256(other) == config_sha256(resolved)
    assert config_sha256(load_config(None, {"dataset": "y"})) != config_sha256(resolved)
    # downstream stages' settings never change the corpus manifest
    tuned = load_config(None, {"dataset": "x", "release": {"bucket_width": 64}, "analysis": {"pair_threshold": 0.75}})
    assert config_sha256(tuned) == config_sha256(resolved)


def test_yaml_file_and_unreadable_file(tmp_path):
    good = tmp_path / "c.yaml"
    good.write_text("dataset: abc\nshard_rows: 7\n")
    assert load_config(good)["shard_rows"] == 7
    bad = tmp_path / "bad.yaml"
    bad.write_text("dataset: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")


def test_fill_defaults_keeps_given_values():
    schema = load_schema("corpus-config.schema.json")
    out = fill_defaults({"ingest": {"part_max_docs": 3}}, schema)
    assert out["ingest"]["part_max_docs"] == 3
    assert out["ingest"]["part_max_bytes"] == 64 * 1024 * 1024


def test_config_reference_doc_in_sync_with_schema():
    from corpus_dagster.cli.docs_gen import DOC, render
    from corpus_dagster.core.config import load_schema

    load_schema.cache_clear()
    assert DOC.read_text(encoding="utf-8") == render(), "run `python -m corpus_dagster.cli.docs_gen`"
