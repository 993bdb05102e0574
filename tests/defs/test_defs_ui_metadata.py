"""What a person sees in the UI: sortable tables, row counts and column schemas, previews, charts, escaped
placeholders, progress lines, one process per run."""

import base64
import json
import re
from pathlib import Path

import dagster as dg
import pytest

from corpus_dagster.core.progress import Progress
from corpus_dagster.defs import build_definitions
from corpus_dagster.defs.automation import build_corpus_job, ledger_sensor, refresh_schedule_for
from corpus_dagster.defs.common import md_table, table
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.runner import check_results, materialize_global, materialize_sources

PROJECT = Path(__file__).resolve().parents[2]


def _meta(instance: dg.DagsterInstance, key: str, partition: str | None = None) -> dict:
    flt = dg.AssetRecordsFilter(asset_key=dg.AssetKey(key), asset_partitions=[partition] if partition else None)
    return dict(instance.fetch_materializations(flt, limit=1).records[0].asset_materialization.metadata)


def _with_pii(setup_dir: Path) -> None:
    alpha = setup_dir.parent / "sources" / "alpha.jsonl"
    rows = [json.loads(x) for x in alpha.read_text().splitlines()]
    rows[0]["text"] += " Write to Jean-Sebastien Roy at jean.roy@fastmail.fr for the river garden market notes."
    alpha.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from corpus_factory import write_setup

    setup_dir = write_setup(tmp_path_factory.mktemp("ui"))
    _with_pii(setup_dir)
    corpus = CorpusConfig(config_path=str(setup_dir))
    with dg.instance_for_test() as instance:
        materialize_sources(corpus, instance)
        result = materialize_global(corpus, instance)
        keys = ["raw_documents", "clean_documents", "rejects", "minhash_signatures"]
        per_source = {k: _meta(instance, k, "alpha") for k in keys}
        glob = {k: _meta(instance, k) for k in ["dedup", "scrubbed", "shards", "manifest", "token_streams", "release"]}
        logs = [e.user_message for e in instance.all_logs(result.run_id) if e.user_message]
        glob["checks"] = {(a, name): meta for a, name, _passed, meta in check_results(result)}
        yield {**per_source, **glob}, logs


def _is_table(value) -> bool:
    return isinstance(value, dg.TableMetadataValue) and value.schema is not None and value.schema.columns


def test_counts_rejects_clusters_and_pii_are_sortable_tables(built):
    meta, _ = built
    assert _is_table(meta["clean_documents"]["counts"]) and _is_table(meta["rejects"]["by_reason"])
    assert _is_table(meta["dedup"]["drops_per_source"]) and _is_table(meta["dedup"]["largest_clusters"])
    assert _is_table(meta["scrubbed"]["pii_by_type"]) and _is_table(meta["raw_documents"]["counts"])
    pii = {r.data["type"]: r.data["placeholders"] for r in meta["scrubbed"]["pii_by_type"].records}
    assert pii["emails"] >= 1
    drops = {r.data["source"]: r.data for r in meta["dedup"]["drops_per_source"].records}
    assert set(drops) == {"alpha", "beta", "gamma"} and all(d["kept"] > 0 for d in drops.values())


def test_table_like_assets_carry_row_count_and_column_schema(built):
    meta, _ = built
    for key in ("clean_documents", "rejects", "shards"):
        assert "dagster/column_schema" in meta[key], key
    for key in ("raw_documents", "clean_documents", "rejects", "minhash_signatures", "dedup", "scrubbed", "shards", "token_streams"):
        assert isinstance(meta[key]["dagster/row_count"], dg.IntMetadataValue), key
    names = [c.name for c in meta["shards"]["dagster/column_schema"].schema.columns]
    assert names[:3] == ["id", "text", "source_id"]
    assert meta["shards"]["dagster/row_count"].value == meta["shards"]["n_docs"].value


def test_previews_cut_text_short_and_rejects_say_reason_value_threshold(built):
    meta, _ = built
    preview = meta["clean_documents"]["preview"].records
    assert 0 < len(preview) <= 10 and all(len(r.data["preview"]) <= 120 for r in preview)
    examples = meta["rejects"]["examples"]
    assert [c.name for c in examples.schema.columns] == ["id", "reason", "value", "threshold", "preview"]
    shards = meta["shards"]["preview"].records
    assert shards and shards[0].data["id"] < shards[-1].data["id"]


def test_timings_are_seconds_floats_and_sizes_are_bytes(built):
    meta, _ = built
    for key in ("raw_documents", "clean_documents", "minhash_signatures", "dedup", "scrubbed", "shards", "token_streams"):
        assert isinstance(meta[key]["seconds"], dg.FloatMetadataValue), key
        assert not any(k in ("elapsed", "elapsed_s", "duration", "time_s") for k in meta[key]), key
    assert isinstance(meta["shards"]["bytes"], dg.IntMetadataValue) and re.search(r"(B|KiB|MiB)$", meta["shards"]["size"].value)


def test_charts_are_png_images_in_markdown(built):
    meta, _ = built
    for key, field in (("dedup", "charts"), ("shards", "length_histogram"), ("clean_documents", "kept_and_dropped_chart")):
        text = meta[key][field].value
        images = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)\)", text)
        assert images, key
        assert base64.b64decode(images[0])[:8] == b"\x89PNG\r\n\x1a\n"
    assert text.count("![") == 1 and "near-duplicate cluster sizes" in meta["dedup"]["charts"].value


def test_pii_placeholders_stay_visible_in_markdown(built):
    meta, _ = built
    examples = meta["scrubbed"]["examples"]  # a table: the UI shows its cells as plain text
    assert _is_table(examples) and any("<EMAIL>" in r.data["context"] for r in examples.records)
    assert "&lt;EMAIL&gt;" in md_table(["t"], [["<EMAIL>"]]).value


def test_progress_lines_reach_the_run_log(built):
    _, logs = built
    assert any(m.startswith("scrub:") and "documents" in m and "done" in m for m in logs)
    assert any(m.startswith("dedup:") and "MB" in m for m in logs)


def test_progress_reports_rate_and_eta_every_interval():
    lines: list[str] = []
    now = [0.0]
    progress = Progress(lines.append, "scrub", total_docs=100, interval_s=5, clock=lambda: now[0])
    now[0] = 2
    progress.update(10, 1_000_000)
    assert lines == []  # under the interval: nothing yet
    now[0] = 6
    progress.update(20, 2_000_000)
    assert len(lines) == 1 and "30/100 documents (30%)" in lines[0] and "3.0 MB" in lines[0] and "ETA 14 s" in lines[0]


def test_table_types_columns_from_values():
    value = table(["name", "n", "share", "ok"], [["a", 1, 0.5, True]])
    assert [c.type for c in value.schema.columns] == ["string", "int", "float", "bool"]


def test_sensors_schedule_and_jobs_have_descriptions_and_runs_are_one_process():
    defs = build_definitions(CorpusConfig(config_path=str(PROJECT / "configs" / "demo.yaml")))
    assert ledger_sensor.description and refresh_schedule_for("0 3 * * *", "UTC").description
    assert defs.resolve_sensor_def("corpus_automation").description
    for name in ("ingest_sources", "build_corpus"):
        assert defs.resolve_job_def(name).description
    assert defs.resolve_job_def(build_corpus_job.name).executor_def.name == "in_process"


def test_check_metadata_says_what_was_checked_and_how_much(built):
    meta, _ = built
    n_docs = meta["shards"]["n_docs"].value
    for name in ("ids_sorted", "hashes_match_text", "no_pii_in_shards"):
        check = meta["checks"][("shards", name)]
        assert check["rows_checked"] == n_docs and check["files_checked"] >= 1 and check["bytes_checked"] > 0, name
        assert check["checked"].startswith("shard-")


def test_clean_documents_opens_with_the_corpus_table_and_the_reasons(built):
    meta, _ = built
    clean = meta["clean_documents"]
    assert list(clean)[:2] == ["corpus_kept_and_rejected", "reasons"]  # the UI shows metadata in this order
    rows = {r.data["source"]: r.data for r in clean["corpus_kept_and_rejected"].records}
    assert rows["all sources"]["kept"] == sum(r["kept"] for sid, r in rows.items() if sid != "all sources")
    assert rows["alpha"]["kept"] == clean["kept"].value and rows["alpha"]["rejected"] == clean["rejected"].value
    reasons = [r.data["documents"] for r in clean["reasons"].records]
    assert reasons == sorted(reasons, reverse=True) and sum(reasons) == clean["rejected"].value


def test_release_renders_its_card_as_markdown_first(built):
    meta, _ = built
    release = meta["release"]
    card = release["card_rendered"]
    assert list(release)[0] == "card_rendered" and isinstance(card, dg.MarkdownMetadataValue)
    assert card.value.lstrip().startswith("# ") and "## Dataset Summary" in card.value
    assert "pretty_name:" not in card.value and "](assets/" not in card.value  # no front matter, no dead images
