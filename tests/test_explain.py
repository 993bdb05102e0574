"""Explain this document: the journey read from stage outputs (CLI and the UI job), nothing rerun."""

import json

import dagster as dg
import pytest

from corpus_dagster.cli.explain import main
from corpus_dagster.core.records import RECORD
from corpus_dagster.defs import build_definitions
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.runner import materialize_global, materialize_sources
from corpus_dagster.explain import DocumentNotFound, explain


@pytest.fixture(scope="module")
def corpus_built(tmp_path_factory):
    from corpus_factory import write_setup

    setup_dir = write_setup(tmp_path_factory.mktemp("explain"))
    alpha = setup_dir.parent / "sources" / "alpha.jsonl"
    rows = [json.loads(x) for x in alpha.read_text().splitlines()]
    rows[3]["text"] += " Mail jean.roy@fastmail.fr about the copper bridge."
    rows.append({"text": rows[5]["text"], "link": "https://a.example/twin"})  # an exact twin of alpha:5
    rows.append({"text": "#### $$$$ %%%% ^^^^ &&&& **** @@@@ !!!! ???? ~~~~ " * 5, "link": "https://a.example/soup"})
    alpha.write_text("".join(json.dumps(r) + "\n" for r in rows))
    corpus = CorpusConfig(config_path=str(setup_dir))
    with dg.instance_for_test() as instance:
        materialize_sources(corpus, instance)
        materialize_global(corpus, instance)
    resolved, layout = corpus.load()
    return corpus, resolved, layout, len(rows)


def _alpha_id(layout, k: int) -> str:
    import polars as pl

    from corpus_dagster.clean.driver import clean_doc_files

    first = pl.read_parquet(clean_doc_files(layout, "alpha")[0], columns=["id"])["id"][0]
    width = len(first.rsplit(":", 1)[1])
    return f"alpha:{k:0{width}d}"


def test_a_kept_document_has_every_step(corpus_built):
    _corpus, resolved, layout, _n = corpus_built
    answer = explain(layout, resolved, _alpha_id(layout, 3))
    steps = answer["steps"]
    assert steps["ingest"]["status"] == "fetched" and steps["ingest"]["line"] == 4
    assert steps["clean"]["status"] == "kept"
    assert steps["dedup"]["status"] == "kept" and steps["dedup"]["decontamination"] == "no hit"
    assert steps["scrub"]["by_type"] == {"EMAIL": 1}
    assert steps["shards"]["status"] == "published" and steps["shards"]["shard"].startswith("shard-")
    assert steps["tokens"]["status"] == "tokenized" and steps["tokens"]["n_tokens"] > 0
    assert steps["tokens"]["split"] == steps["shards"]["split"]


def test_an_exact_twin_names_the_kept_id_and_a_url_finds_it(corpus_built):
    _corpus, resolved, layout, n = corpus_built
    twin = explain(layout, resolved, "https://a.example/twin")
    assert twin["id"] == _alpha_id(layout, n - 2)
    # the smallest id in byte order is kept ("alpha:40" < "alpha:5"); the other names it
    kept, dropped = sorted([twin["id"], _alpha_id(layout, 5)])
    answer = explain(layout, resolved, dropped)
    assert answer["steps"]["dedup"]["status"] == "dropped" and answer["steps"]["dedup"]["reason"] == "exact"
    assert answer["steps"]["dedup"]["kept_id"] == kept
    assert answer["steps"]["shards"]["status"] == "not published"
    assert explain(layout, resolved, kept)["steps"]["shards"]["status"] == "published"


def test_a_rejected_document_says_rule_value_and_threshold(corpus_built):
    _corpus, resolved, layout, _n = corpus_built
    clean = explain(layout, resolved, "https://a.example/soup")["steps"]["clean"]
    assert clean["status"] == "rejected" and clean["reason"] and clean["value"] is not None and "=" in clean["threshold"]


def test_explain_reads_only_and_unknown_ids_are_named(corpus_built):
    _corpus, resolved, layout, _n = corpus_built
    records = sorted(layout.root.glob(f"**/{RECORD}"))
    before = {p: p.stat().st_mtime_ns for p in records}
    explain(layout, resolved, _alpha_id(layout, 0))
    assert {p: p.stat().st_mtime_ns for p in records} == before
    with pytest.raises(DocumentNotFound, match="https://nowhere"):
        explain(layout, resolved, "https://nowhere")


def test_cli_and_ui_job_print_the_journey(corpus_built, capsys):
    corpus, _resolved, layout, _n = corpus_built
    doc = _alpha_id(layout, 3)
    assert main([doc, "--config", corpus.config_path]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"document {doc}") and "scrub   scrubbed" in out
    assert main(["nope:1", "--config", corpus.config_path]) == 2
    job = build_definitions(corpus).resolve_job_def("explain_document_job")
    result = job.execute_in_process(run_config={"ops": {"explain_document": {"config": {"document": doc}}}},
                                    resources={"corpus": corpus})
    assert result.success
    (mat,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    assert mat.event_specific_data.metadata["document"].value == doc
