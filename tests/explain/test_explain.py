"""Explain this document: the journey read from stage outputs (CLI and the UI job), nothing rerun; each stage
says what it did, and the journey stops where the document left the pipeline."""

import json
import random
import subprocess
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import dagster as dg
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from corpus_dagster.cli.explain import main
from corpus_dagster.core.records import RECORD
from corpus_dagster.core.settings import CleanSettings
from corpus_dagster.defs import build_definitions
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.runner import materialize_global, materialize_sources
from corpus_dagster.explain.journey import DocumentNotFound, explain, render

N_DELTA = 6  # documents of the Parquet source


@pytest.fixture(scope="module")
def corpus_built(tmp_path_factory):
    from corpus_factory import document, write_setup

    setup_dir = write_setup(tmp_path_factory.mktemp("explain"))
    alpha = setup_dir.parent / "sources" / "alpha.jsonl"
    rows = [json.loads(x) for x in alpha.read_text().splitlines()]
    rows[3]["text"] += " Mail jean.roy@fastmail.fr about the copper bridge."
    rows.append({"text": rows[5]["text"], "link": "https://a.example/twin"})  # an exact twin of alpha:5
    rows.append({"text": "#### $$$$ %%%% ^^^^ &&&& **** @@@@ !!!! ???? ~~~~ " * 5, "link": "https://a.example/soup"})
    rows.append({"text": "Too short to keep here.", "link": "https://a.example/short"})  # 5 words < min_words
    words = rows[7]["text"].split()  # a near duplicate of alpha:7: its last three words changed
    rows.append({"text": " ".join(words[:-3] + ["lantern", "orbit", "meadow"]), "link": "https://a.example/near"})
    alpha.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rng = random.Random(7)
    delta = setup_dir.parent / "sources" / "delta.parquet"
    pq.write_table(pa.table({"text": [document(rng) for _ in range(N_DELTA)],
                             "link": [f"https://d.example/{i}" for i in range(N_DELTA)]}), delta)
    ledger = setup_dir.parent / "artifacts" / "corpus" / "LEDGER.jsonl"
    with ledger.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps({"source_id": "delta", "urls": [f"file://{delta}"], "format": "parquet",
                             "url_field": "link", "license_spdx": "CC0-1.0"}) + "\n")
    corpus = CorpusConfig(config_path=str(setup_dir))
    with dg.instance_for_test() as instance:
        materialize_sources(corpus, instance)
        materialize_global(corpus, instance)
    settings, layout = corpus.load()
    return corpus, settings, layout, len(rows)


def _paths(answer):
    return [v for step in answer["steps"].values() for k, v in step.items()
            if k in ("file", "raw_part", "shard", "counts_file") and v is not None]


def test_a_kept_document_has_every_step_and_its_own_file_and_line(corpus_built):
    _corpus, settings, layout, _n = corpus_built
    answer = explain(layout, settings, "alpha:3")
    steps = answer["steps"]
    assert list(steps) == ["ingest", "clean", "dedup", "scrub", "shards", "tokens", "release"]
    # the default buckets start at 1,024 tokens: a short document reaches the corpus, not the release
    assert steps["release"]["status"] == "missing" and answer["left_at"] == "release"
    ingest = steps["ingest"]
    assert ingest["status"] == "fetched" and Path(ingest["file"]).name == "alpha.jsonl" and ingest["line"] == 4
    assert "*" not in ingest["summary"] and ingest["summary"].startswith(f"fetched from {ingest['file']} line 4")
    assert steps["clean"]["status"] == "kept"
    assert steps["dedup"]["status"] == "kept" and "cluster=None" not in render(answer)
    assert steps["scrub"]["by_type"] == {"EMAIL": 1}
    assert steps["shards"]["status"] == "published" and Path(steps["shards"]["shard"]).name.startswith("shard-")
    assert steps["tokens"]["status"] == "tokenized" and steps["tokens"]["n_tokens"] > 0
    assert steps["tokens"]["split"] == steps["shards"]["split"]


def test_the_own_file_of_a_glob_source_and_a_parquet_row(corpus_built):
    _corpus, settings, layout, _n = corpus_built
    gamma = explain(layout, settings, "gamma:4")["steps"]["ingest"]
    assert Path(gamma["file"]).name == "doc04.txt"  # the source is a glob of text files, one document each
    beta = explain(layout, settings, "beta:2")["steps"]["ingest"]  # no url field: the raw url names file and line
    assert Path(beta["file"]).name == "beta.jsonl.zst" and beta["line"] == 3
    delta = explain(layout, settings, "delta:4")["steps"]["ingest"]  # a url field: found by reading the file
    assert Path(delta["file"]).name == "delta.parquet" and delta["row"] == 4 and "line" not in delta
    assert delta["url"] == "https://d.example/4" and f"{delta['file']} row 4" in delta["summary"]


def test_paths_are_normalized_and_relative_to_the_artifacts_root(corpus_built):
    _corpus, settings, layout, _n = corpus_built
    answer = explain(layout, settings, "alpha:3")
    inside = [answer["steps"][s][k] for s, k in (("ingest", "raw_part"), ("shards", "shard"), ("tokens", "counts_file"))]
    for path in inside:
        assert ".." not in Path(path).parts and not Path(path).is_absolute() and (layout.root / path).is_file(), path
    assert answer["steps"]["tokens"]["counts_file"].startswith("tokens/")
    source_file = answer["steps"]["ingest"]["file"]
    assert Path(source_file).is_absolute() and ".." not in Path(source_file).parts
    assert all(p in render(answer) for p in _paths(answer))


def test_a_rejected_document_stops_at_clean_with_rule_value_and_threshold(corpus_built):
    _corpus, settings, layout, _n = corpus_built
    answer = explain(layout, settings, "https://a.example/short")
    assert list(answer["steps"]) == ["ingest", "clean"] and answer["left_at"] == "clean"
    clean = answer["steps"]["clean"]
    min_words = settings.clean.gopher.min_words
    assert clean["status"] == "rejected" and clean["rule"] == "gopher_word_count"
    assert clean["value"] == 5 and clean["op"] == "<" and clean["threshold"] == min_words
    assert clean["summary"] == f"rejected by gopher_word_count: 5 < {min_words} (clean.gopher.min_words)"
    text = render(answer)
    assert "dedup   " not in text and "not reached: dedup, scrub, shards, tokens" in text
    soup = explain(layout, settings, "https://a.example/soup")["steps"]["clean"]
    assert soup["status"] == "rejected" and soup["summary"].startswith(f"rejected by {soup['rule']}: ")


def test_every_clean_reason_code_names_its_threshold(corpus_built):
    from corpus_dagster.clean.cleaner import REASON_CODES
    from corpus_dagster.clean.outputs import reason_threshold
    from corpus_dagster.explain.journey import rejection

    _corpus, settings, _layout, _n = corpus_built
    for code in REASON_CODES:
        explained = rejection(code, 0.5, settings.clean)
        if code == "lang" or reason_threshold(code, settings.clean).bounds:
            assert explained.get("config", "").startswith("clean."), code
        else:  # every limit of the code switched off (a threshold without a default): no key to name
            assert explained["summary"] == f"rejected by {code}: 0.5", code
    cfg = settings.clean.to_dict()
    cfg["gopher"]["max_words"] = 1000
    too_long = rejection("gopher_word_count", 1200, CleanSettings.from_dict(cfg))
    assert too_long["summary"] == "rejected by gopher_word_count: 1200 > 1000 (clean.gopher.max_words)"


def test_a_dedup_removed_document_names_its_kept_partner(corpus_built):
    _corpus, settings, layout, n = corpus_built
    twin = explain(layout, settings, "https://a.example/twin")
    assert twin["id"] == f"alpha:{n - 4}"
    # the smallest stable key is kept (alpha has a url_field: `alpha:https://a.example/5` < `.../twin`), not the
    # smallest positional id (`alpha:44` < `alpha:5` in byte order)
    kept, dropped = "alpha:5", twin["id"]
    answer = explain(layout, settings, dropped)
    dedup = answer["steps"]["dedup"]
    assert dedup["status"] == "removed" and dedup["reason"] == "exact" and dedup["kept_id"] == kept
    assert dedup["summary"] == f"removed by dedup as an exact duplicate of {kept}"
    assert list(answer["steps"]) == ["ingest", "clean", "dedup"] and answer["left_at"] == "dedup"
    assert explain(layout, settings, kept)["steps"]["shards"]["status"] == "published"

    near_id = explain(layout, settings, "https://a.example/near")["id"]
    kept, dropped = "alpha:7", near_id  # `.../7` < `.../near`
    near = explain(layout, settings, dropped)["steps"]["dedup"]
    assert near["reason"] == "near" and near["kept_id"] == kept and 0.7 <= near["jaccard"] < 1.0
    assert near["summary"] == f"removed by dedup as a near duplicate of {kept} (jaccard {round(near['jaccard'], 4)})"
    partner = explain(layout, settings, kept)["steps"]["dedup"]
    assert partner["status"] == "kept" and partner["cluster_min_id"] == kept and partner["cluster_size"] == 2


def test_explain_reads_only_and_unknown_ids_are_named(corpus_built):
    _corpus, settings, layout, n = corpus_built
    records = sorted(layout.root.glob(f"**/{RECORD}"))
    before = {p: p.stat().st_mtime_ns for p in records}
    explain(layout, settings, "alpha:0")
    assert {p: p.stat().st_mtime_ns for p in records} == before
    with pytest.raises(DocumentNotFound, match="https://nowhere"):
        explain(layout, settings, "https://nowhere")
    with pytest.raises(DocumentNotFound, match=rf"'alpha:{n}'.*positions 0\.\.{n - 1}"):
        explain(layout, settings, f"alpha:{n}")


@pytest.mark.parametrize(("doc", "names"), [
    ("alpha:99999", ["'alpha:99999'", "positions 0..43"]),
    ("zeta:1", ["'zeta:1'", "unknown source 'zeta'", "alpha, beta, gamma, delta"]),
    ("alpha:x", ["'alpha:x'", "<source_id>:<k>"]),
])
def test_cli_unknown_or_malformed_ids_exit_2_with_one_line(corpus_built, doc, names):
    corpus, _settings, _layout, n = corpus_built
    assert n == 44
    proc = subprocess.run([sys.executable, "-m", "corpus_dagster.explain", doc, "--config", corpus.config_path],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and all(s in lines[0] for s in names), proc.stderr


def test_cli_and_ui_job_print_the_journey(corpus_built, capsys):
    corpus, _settings, _layout, _n = corpus_built
    doc = "alpha:3"
    assert main([doc, "--config", corpus.config_path]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"document {doc}") and "  scrub   scrubbed: 1 redaction (EMAIL 1)" in out
    job = build_definitions(corpus).resolve_job_def("explain_document_job")
    result = job.execute_in_process(run_config={"ops": {"explain_document": {"config": {"document": doc}}}},
                                    resources={"corpus": corpus})
    assert result.success
    (out_event,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    assert out_event.event_specific_data.metadata["document"].value == doc


def _job_output(result):
    (out_event,) = [e for e in result.all_events if e.event_type_value == "STEP_OUTPUT"]
    return out_event.event_specific_data.metadata


def test_ui_job_runs_with_its_default_config(corpus_built):
    from corpus_dagster.publish.driver import published_shards

    corpus, _settings, layout, _n = corpus_built
    first = pl.read_parquet(published_shards(layout)[0], columns=["id"])["id"][0]
    job = build_definitions(corpus).resolve_job_def("explain_document_job")
    result = job.execute_in_process(resources={"corpus": corpus})  # no run config: nothing to type
    assert result.success
    meta = _job_output(result)
    assert meta["document"].value == first
    assert [row.data["stage"] for row in meta["journey"].value.records][:1] == ["ingest"]


def test_explain_link_opens_the_launchpad_with_the_id(corpus_built):
    from corpus_dagster.defs.explain_link import DEFAULT_LOCATION, explain_link, link_target

    corpus, _settings, _layout, _n = corpus_built
    link = explain_link("alpha:5")
    assert isinstance(link, dg.MarkdownMetadataValue)  # a short label: a url value shows the whole path
    assert link.value.startswith("[explain alpha:5](/locations/")
    parts = urlsplit(link_target(link))
    assert not parts.scheme and not parts.netloc and parts.path.startswith("/")
    assert parts.path == f"/locations/{DEFAULT_LOCATION}/jobs/explain_document_job/playground/setup"
    run_config = yaml.safe_load(parse_qs(parts.query)["config"][0])
    assert run_config == {"ops": {"explain_document": {"config": {"document": "alpha:5"}}}}
    job = build_definitions(corpus).resolve_job_def("explain_document_job")
    result = job.execute_in_process(run_config=run_config, resources={"corpus": corpus})
    assert result.success and _job_output(result)["document"].value == "alpha:5"
    assert _job_output(result)["left_at"].value == "release"  # kept by dedup, too short for the default buckets
    # the installed UI serves that route and reads its `config` query parameter as the run config YAML
    import dagster_webserver

    chunks = Path(dagster_webserver.__file__).parent / "webapp" / "build" / "_next" / "static" / "chunks"
    route = "/locations/:repoPath/jobs/:pipelinePath/playground/setup"
    bundles = [p.read_text(encoding="utf-8", errors="replace") for p in chunks.glob("*.js")]
    assert any(route in b and "runConfigYaml" in b and ".config" in b for b in bundles)

