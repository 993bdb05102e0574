"""The figures the UI shows agree with each other and with the files: checks and assets count the same things,
each table appears once, a reused build reports its own time, and wide tables put the key columns first."""

import dagster as dg
import pytest

from corpus_dagster.defs.analysis import report_preview
from corpus_dagster.defs.common import PREVIEW_CHARS
from corpus_dagster.defs.dedup import drops_table, pairs_table
from corpus_dagster.defs.publish import manifest_dedup
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.runner import check_results, materialize_global, materialize_sources


def _meta(instance: dg.DagsterInstance, key: str, partition: str | None = None, latest: int = 0) -> dict:
    flt = dg.AssetRecordsFilter(asset_key=dg.AssetKey(key), asset_partitions=[partition] if partition else None)
    records = instance.fetch_materializations(flt, limit=latest + 1).records
    return dict(records[latest].asset_materialization.metadata)


GLOBAL = ["dedup", "scrubbed", "shards", "manifest", "token_streams", "corpus_analysis"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two builds of a small corpus in one instance: the second reuses every stage's outputs."""
    from corpus_factory import write_setup

    setup = write_setup(tmp_path_factory.mktemp("figures"), shard_rows=45)  # three shards, under the sample of 4
    corpus = CorpusConfig(config_path=str(setup))
    with dg.instance_for_test() as instance:
        materialize_sources(corpus, instance)
        first = materialize_global(corpus, instance)
        built = {k: _meta(instance, k) for k in GLOBAL} | {"clean_documents": _meta(instance, "clean_documents", "alpha")}
        materialize_sources(corpus, instance, ["alpha"])
        materialize_global(corpus, instance)
        reused = {k: _meta(instance, k) for k in GLOBAL} | {"clean_documents": _meta(instance, "clean_documents", "alpha")}
        checks = {(a, name): meta for a, name, _passed, meta in check_results(first)}
        yield {"built": built, "reused": reused, "checks": checks}


def test_deterministic_rebuild_counts_the_shards_that_exist(runs):
    n_shards = runs["built"]["shards"]["n_shards"].value
    assert n_shards < 4  # the configured sample (rebuild_check_shards: 4) is larger than the corpus
    check = runs["checks"][("manifest", "deterministic_rebuild")]
    assert check["shards_rebuilt"] == n_shards and check["shards_total"] == n_shards


def test_token_check_and_asset_count_the_same_files(runs):
    meta = runs["built"]["token_streams"]
    check = runs["checks"][("token_streams", "token_counts_consistent")]
    assert check["files"] == meta["files"].value and check["streams"] == meta["streams"].value
    assert meta["files"].value == 2 * meta["streams"].value


def test_token_splits_appear_once(runs):
    for meta in (runs["built"]["token_streams"], runs["reused"]["token_streams"]):
        split_tables = [k for k, v in meta.items() if isinstance(v, (dg.TableMetadataValue, dg.MarkdownMetadataValue))
                        and "train" in str(getattr(v, "records", None) or getattr(v, "value", ""))]
        assert split_tables == ["split_counts"], split_tables


def test_manifest_dedup_is_a_table_not_json(runs):
    meta = runs["built"]["manifest"]
    assert isinstance(meta["dedup"], dg.TableMetadataValue)
    assert {r.data["dedup step"] for r in meta["dedup"].records} == {"exact_dropped", "near_dropped", "decontaminated"}
    assert "jaccard_threshold=" in meta["dedup_settings"].value
    assert not any(isinstance(v, dg.JsonMetadataValue) for v in meta.values())


def test_manifest_dedup_of_a_section():
    out = manifest_dedup({"exact_dropped": 3, "near_dropped": 2, "decontaminated": 0, "jaccard_threshold": 0.8,
                          "num_perm": 128})
    assert [r.data["documents dropped"] for r in out["dedup"].records] == [3, 2, 0]
    assert out["dedup_settings"] == "jaccard_threshold=0.8, num_perm=128"


def test_report_preview_ends_in_no_empty_heading(runs):
    text = runs["built"]["corpus_analysis"]["report_preview"].value
    assert "![" not in text and not text.rstrip().endswith("## Figures")
    preview = report_preview("# Report\n\n## Lengths\n\nx\n\n## Figures\n\n![a](a.png)\n\n![b](b.png)\n")
    assert preview == "# Report\n\n## Lengths\n\nx\n"
    assert "## Figures" in report_preview("## Figures\n\nsee the files\n")


def test_report_preview_cuts_at_a_line():
    text = "# R\n\n" + "".join(f"| row {i} | {i} |\n" for i in range(1000))
    preview = report_preview(text, limit=200)
    assert len(preview) < 300 and all(line.endswith("|") for line in preview.splitlines() if line.startswith("|"))


def test_example_pairs_say_where_they_stand_against_the_threshold():
    pairs = [{"id_a": "a:1", "id_b": "a:2", "jaccard": 0.7123}, {"id_a": "a:3", "id_b": "b:1", "jaccard": 0.8}]
    rows = [r.data for r in pairs_table(pairs, 0.8).records]
    assert rows[0]["vs threshold"] == "< 0.8: both kept" and rows[1]["vs threshold"] == ">= 0.8: near-duplicate pair"
    assert rows[0]["jaccard"] == 0.712


def test_example_pairs_in_the_ui_are_labelled(runs):
    meta = runs["built"]["dedup"]
    table = meta["example_pairs"]
    assert [c.name for c in table.schema.columns] == ["id_a", "id_b", "jaccard", "vs threshold"]
    threshold = meta["jaccard_threshold"].value
    for r in table.records:
        assert r.data["vs threshold"].startswith(">=" if r.data["jaccard"] >= threshold else "<")


def test_examples_keep_one_metadata_type(runs):
    for key in ("built", "reused"):
        examples = runs[key]["scrubbed"]["examples"]
        assert isinstance(examples, dg.TableMetadataValue) and len(examples.records) < 20  # the UI shows it inline


@pytest.mark.parametrize("asset", ["dedup", "shards", "token_streams", "clean_documents", "scrubbed"])
def test_a_reused_build_reports_its_own_seconds(runs, asset):
    built, reused = runs["built"][asset], runs["reused"][asset]
    assert reused["cached"].value is True
    assert isinstance(reused["seconds"], dg.FloatMetadataValue)
    if "built_seconds" in reused or asset != "token_streams":  # the token record keeps no build time
        assert reused["built_seconds"].value == built["seconds"].value
    assert "built_seconds" not in built


def test_drops_per_source_puts_dedup_right_after_the_source(runs):
    table = runs["built"]["dedup"]["drops_per_source"]
    names = [c.name for c in table.schema.columns]
    dedup = [n for n in names if n.startswith("dedup: ")]
    assert names[0] == "source" and names[1:1 + len(dedup)] == dedup and dedup
    assert names[1 + len(dedup):] == ["kept", "clean: dropped"]
    out = drops_table({"s": {"kept": 5, "clean: lang": 2, "clean: short": 1, "dedup: exact": 3}})
    assert out.records[0].data == {"source": "s", "dedup: decontaminated": 0, "dedup: exact": 3, "dedup: near": 0,
                                   "kept": 5, "clean: dropped": 3}


def test_previews_fit_and_say_how_long_a_cut_text_is(runs):
    for asset in ("clean_documents", "shards"):
        table = runs["built"][asset]["preview"]
        names = [c.name for c in table.schema.columns]
        assert names[0] == "id" and names[-1] == "preview" and "text" not in names and "url" not in names
        for r in table.records:
            assert len(r.data["preview"]) <= PREVIEW_CHARS
            if r.data["n_chars"] > PREVIEW_CHARS:
                assert r.data["preview"].endswith(f"… ({r.data['n_chars']:,} chars)")


def test_shards_and_clean_link_the_explain_launchpad_for_their_first_document(runs):
    from urllib.parse import parse_qs, urlparse

    import yaml

    from corpus_dagster.defs.explain_link import link_target

    for asset in ("shards", "clean_documents"):
        meta = runs["built"][asset]
        link = urlparse(link_target(meta["explain"]))
        assert link.path == "/locations/corpus_dagster.definitions/jobs/explain_document_job/playground/setup"
        config = yaml.safe_load(parse_qs(link.query)["config"][0])
        assert config["ops"]["explain_document"]["config"]["document"] == meta["preview"].records[0].data["id"]
