"""The review sample: its strata, determinism, thresholds, PII windows, HTML escaping, and the asset."""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from pathlib import Path

import dagster as dg
import polars as pl
import pyarrow.parquet as pq
import pytest
from corpus_factory import document, write_setup

from corpus_dagster.clean.driver import run_clean_source
from corpus_dagster.clean.outputs import REASON_CODES, clean_doc_files
from corpus_dagster.core.config import load_settings
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.ledger import load_ledger
from corpus_dagster.core.settings import ReviewSettings
from corpus_dagster.dedup.driver import run_global_dedup
from corpus_dagster.dedup.outputs import dedup_tables
from corpus_dagster.defs import ASSETS
from corpus_dagster.defs.resources import CorpusConfig
from corpus_dagster.defs.review import review_sample
from corpus_dagster.defs.runner import materialize_sources
from corpus_dagster.ingest.driver import fetch_source
from corpus_dagster.review import driver
from corpus_dagster.review.html import render_page
from corpus_dagster.review.sample import (
    StratifiedSample,
    align_redactions,
    candidates,
    clean_threshold,
    pii_windows,
)
from corpus_dagster.scrub.api import PLACEHOLDERS
from corpus_dagster.scrub.driver import run_scrub

PER_STRATUM = 5
EXCERPT = 300
SCRIPT = "<script>alert(1)</script>"


# --- the sample logic ------------------------------------------------------------------------------------

def _groups() -> dict[tuple[str, str, str], list[str]]:
    """Candidate ids per group: sizes below, at and above PER_STRATUM, ids in no particular order."""
    rng = random.Random(3)
    sizes = {("a", "clean", "gopher_word_count"): 2, ("a", "clean", "repeated"): PER_STRATUM,
             ("a", "dedup", "near"): 40, ("b", "pii", "emails"): 1, ("b", "kept", "kept"): 300}
    out = {}
    for (src, stratum, reason), n in sizes.items():
        ks = rng.sample(range(10_000), n)
        out[(src, stratum, reason)] = [f"{src}:{k}" for k in ks]
    return out


def _sample(groups: dict, seed: int, chunk: int, reverse: bool = False) -> pl.DataFrame:
    sampler = StratifiedSample(PER_STRATUM, seed)
    for (src, stratum, reason), ids in groups.items():
        ids = ids[::-1] if reverse else ids
        for i in range(0, len(ids), chunk):
            sampler.add(candidates({"id": ids[i:i + chunk]}, source_id=src, stratum=stratum, reason=reason))
    return sampler.result(), sampler.strata()


def test_every_group_gets_min_n_available_rows_ordered_by_id() -> None:
    groups = _groups()
    chosen, strata = _sample(groups, seed=0, chunk=7)
    for key, ids in groups.items():
        rows = chosen.filter((pl.col("source_id") == key[0]) & (pl.col("stratum") == key[1]) & (pl.col("reason") == key[2]))
        assert rows.height == min(PER_STRATUM, len(ids)), key
        assert set(rows["id"]) <= set(ids)
        assert rows["id"].to_list() == sorted(rows["id"].to_list())
    assert [(g["source_id"], g["stratum"], g["reason"], g["available"], g["sampled"]) for g in strata] == [
        ("a", "clean", "gopher_word_count", 2, 2), ("a", "clean", "repeated", PER_STRATUM, PER_STRATUM),
        ("a", "dedup", "near", 40, PER_STRATUM), ("b", "pii", "emails", 1, 1), ("b", "kept", "kept", 300, PER_STRATUM),
    ]
    # page order: source, then strata in clean, dedup, pii, kept order
    assert chosen.select("source_id", "stratum").unique(maintain_order=True).rows() == [
        ("a", "clean"), ("a", "dedup"), ("b", "pii"), ("b", "kept")]


def test_sample_depends_on_seed_not_on_batching_or_order() -> None:
    groups = _groups()
    one, _ = _sample(groups, seed=0, chunk=7)
    assert one.equals(_sample(groups, seed=0, chunk=1000, reverse=True)[0])
    other, _ = _sample(groups, seed=1, chunk=7)
    big = pl.col("reason") == "kept"
    assert set(one.filter(big)["id"]) != set(other.filter(big)["id"])


def test_an_id_without_a_document_number_is_refused() -> None:
    sampler = StratifiedSample(3, 0)
    with pytest.raises(ValueError, match="not of the form"):
        sampler.add(candidates({"id": ["a:1", "oops"]}, source_id="a", stratum="kept", reason="kept"))


def test_every_clean_reason_code_names_its_config_keys_and_values() -> None:
    overrides = {"clean": {"gopher": {"min_words": 77}, "repeated": {"max_repeated_char_ratio": 0.42}}}
    cfg = load_settings(None, overrides).clean
    assert "clean.gopher.min_words = 77" in clean_threshold("gopher_word_count", cfg)
    assert "value > clean.repeated.max_repeated_char_ratio = 0.42" == clean_threshold("repeated", cfg)
    assert clean_threshold("table_dump", cfg).startswith("no single threshold")
    assert "clean.lang.allowed = [en]" in clean_threshold("lang", cfg)
    for reason in REASON_CODES:
        assert "no threshold known" not in clean_threshold(reason, cfg)


def test_redactions_align_with_the_text_they_replaced() -> None:
    clean = "Mail ann@x.io or bob@y.io; call 030 632606. <EMAIL> was already there."
    scrubbed = "Mail <EMAIL> or <EMAIL>; call <PHONE>. <EMAIL> was already there."
    aligned = align_redactions(clean, scrubbed, PLACEHOLDERS)
    assert [(k, clean[s:e]) for k, _, s, e in aligned] == [
        ("emails", "ann@x.io"), ("emails", "bob@y.io"), ("phones", "030 632606"), ("emails", "<EMAIL>")]
    left, right, total = pii_windows(clean, scrubbed, "emails", PLACEHOLDERS, context=6, limit=1000)
    assert total == 2  # the placeholder already in the clean text is no redaction
    assert right == ["Mail \u27e6ann@x.io\u27e7 or bo…", "…io or \u27e6bob@y.io\u27e7; call…"]
    assert left == ["Mail \u27e6<EMAIL>\u27e7 or <E…", "…L> or \u27e6<EMAIL>\u27e7; call…"]
    assert align_redactions("something else", scrubbed, PLACEHOLDERS) is None
    assert align_redactions("at the end a@b.co", "at the end <EMAIL>", PLACEHOLDERS) == [("emails", 11, 11, 17)]


def _row(**over) -> dict:
    row = {"source_id": "s", "stratum": "clean", "reason": "gopher_word_count", "id": "s:1", "url": None,
           "value": 3.0, "threshold": "value < clean.gopher.min_words = 50", "partner_id": None, "jaccard": None,
           "detail": None, "text": None, "text_chars": None, "partner_text": None, "partner_chars": None}
    row.update(over)
    return row


def test_html_escapes_document_text_and_marks_cuts() -> None:
    rows = [
        _row(text=f"{SCRIPT} mail <EMAIL> & more", text_chars=5000, url='javascript:alert(1)"><script>x</script>'),
        _row(stratum="dedup", reason="near", id="s:2", partner_id="s:0", jaccard=0.91, text="<b>dropped</b>",
             text_chars=14, partner_text="<i>kept</i>", partner_chars=11, threshold="jaccard >= 0.8"),
        _row(stratum="pii", reason="emails", id="s:3", value=1.0, text=f"x \u27e6<EMAIL>\u27e7 {SCRIPT}",
             partner_text="x \u27e6a@b.io\u27e7 <img src=x onerror=alert(1)>", threshold="pii"),
    ]
    strata = [{"source_id": "s", "stratum": r["stratum"], "reason": r["reason"], "available": 9, "sampled": 1}
              for r in rows]
    page = render_page(rows, strata, "Review <sample>", ReviewSettings(seed=0, per_stratum=3))
    assert "<script" not in page and "<img" not in page and "<b>" not in page and "<i>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt; mail &lt;EMAIL&gt; &amp; more" in page
    assert "javascript:alert(1)&quot;&gt;&lt;script&gt;" in page
    assert "[… cut: 4,955 more characters of 5,000 not shown]" in page
    assert "<mark>&lt;EMAIL&gt;</mark>" in page and "<mark>a@b.io</mark>" in page
    assert "&lt;b&gt;dropped&lt;/b&gt;" in page and "&lt;i&gt;kept&lt;/i&gt;" in page
    assert 'href="#g1"' in page and 'id="g1"' in page  # the table of contents links every group
    assert "per_stratum = 3, pii_context_chars = " in page and "seed = 0" in page  # the sample's settings
    assert page == render_page(rows, strata, "Review <sample>", ReviewSettings(seed=0, per_stratum=3))


# --- the stage on a generated corpus -----------------------------------------------------------------------

def _add_review_documents(root: Path) -> None:
    """Short documents (clean drops), an exact and a near copy, PII documents with markup in their text."""
    alpha = root / "sources" / "alpha.jsonl"
    recs = [json.loads(line) for line in alpha.read_text().splitlines()]
    rng = random.Random(5)
    extra = [{"text": f"Short note {i} about the river.", "link": f"https://a.example/short{i}"} for i in range(7)]
    extra.append({"text": recs[0]["text"], "link": "https://a.example/copy0"})
    words = recs[2]["text"].split()
    words[-3] = "zebra"
    extra.append({"text": " ".join(words), "link": "https://a.example/near2"})
    for i in range(3):
        extra.append({"text": f"{document(rng)} Contact jane{i}.doe@proton.me or call +44 121 234 00{i}9 for details. "
                      f"{SCRIPT} and <EMAIL> stay as text. {document(rng, 3)}", "link": f"https://a.example/pii{i}"})
    alpha.write_text("".join(json.dumps(r) + "\n" for r in recs + extra))


def _review_config(root: Path) -> Path:
    config = write_setup(root)
    _add_review_documents(root)
    with config.open("a") as f:
        f.write(f"review:\n  per_stratum: {PER_STRATUM}\n  excerpt_chars: {EXCERPT}\n")
    return config


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, Layout]:
    """A corpus cleaned, deduplicated and scrubbed through the drivers, and its review sample."""
    config = _review_config(tmp_path_factory.mktemp("review"))
    settings = load_settings(config)
    layout = Layout.from_config(settings.resolved)
    for source in load_ledger(layout.ledger):
        fetch_source(source, layout, settings.ingest)
        run_clean_source(layout, settings, source.source_id)
    run_global_dedup(layout, settings, ["alpha", "beta", "gamma"])
    run_scrub(layout, settings)
    stats = driver.run_review_stage(layout, settings)
    return {"settings": settings, "stats": stats}, layout


def _read(layout: Layout) -> pl.DataFrame:
    return pl.read_parquet(layout.review / driver.SAMPLE_FILE)


def test_sample_covers_every_source_and_rule(built) -> None:
    info, layout = built
    got = {(g["source_id"], g["stratum"], g["reason"]): (g["available"], g["sampled"]) for g in info["stats"]["strata"]}
    assert got == {
        ("alpha", "clean", "gopher_word_count"): (7, PER_STRATUM),
        ("alpha", "dedup", "exact"): (1, 1),
        ("alpha", "dedup", "near"): (1, 1),
        ("alpha", "pii", "emails"): (3, 3),
        ("alpha", "pii", "phones"): (3, 3),
        ("alpha", "kept", "kept"): (43, PER_STRATUM),
        ("beta", "kept", "kept"): (40, PER_STRATUM),
        ("gamma", "kept", "kept"): (12, PER_STRATUM),
    }
    sample = _read(layout)
    assert sample.height == info["stats"]["rows"] == sum(s for _, s in got.values())
    assert pq.read_schema(layout.review / driver.SAMPLE_FILE) == driver.REVIEW_SCHEMA
    drops = sample.filter(pl.col("stratum") == "clean")
    assert drops["value"].to_list() == [6.0] * PER_STRATUM  # the word count Gopher measured
    assert drops["threshold"].str.contains("clean.gopher.min_words = 50").all()
    assert drops["url"].str.starts_with("https://a.example/short").all()
    kept = sample.filter(pl.col("stratum") == "kept")
    assert (kept["text"].str.len_chars() <= EXCERPT).all() and (kept["text_chars"] > EXCERPT).all()


def test_duplicate_drops_carry_their_kept_partner(built) -> None:
    _, layout = built
    sample = _read(layout).filter(pl.col("stratum") == "dedup")
    dropped = pl.read_parquet(dedup_tables(layout)["dropped"])
    clean = pl.concat([pl.read_parquet(p, columns=["id", "text"]) for p in clean_doc_files(layout, "alpha")])
    text = dict(zip(clean["id"], clean["text"], strict=True))
    for row in sample.iter_rows(named=True):
        truth = dropped.filter(pl.col("id") == row["id"]).row(0, named=True)
        assert row["partner_id"] == truth["matched_id"] is not None
        assert row["text"] == text[row["id"]][:EXCERPT] and row["partner_text"] == text[row["partner_id"]][:EXCERPT]
    near = sample.filter(pl.col("reason") == "near").row(0, named=True)
    assert near["partner_id"] == "alpha:2" and near["jaccard"] >= 0.8 and near["value"] == near["jaccard"]
    assert "dedup.jaccard_threshold = 0.8" in near["threshold"]


def test_pii_rows_show_redactions_in_context(built) -> None:
    _, layout = built
    pii = _read(layout).filter(pl.col("stratum") == "pii")
    emails = pii.filter(pl.col("reason") == "emails")
    assert emails["value"].to_list() == [1.0, 1.0, 1.0]  # the <EMAIL> already in the text is no redaction
    for i, row in enumerate(emails.iter_rows(named=True)):
        assert "\u27e6<EMAIL>\u27e7" in row["text"] and f"\u27e6jane{i}.doe@proton.me\u27e7" in row["partner_text"]
    phones = pii.filter(pl.col("reason") == "phones").row(0, named=True)
    assert "\u27e6+44 121 234 0009\u27e7" in phones["partner_text"]
    page = (layout.review / driver.HTML_FILE).read_text(encoding="utf-8")
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<mark>jane0.doe@proton.me</mark>" in page and "<mark>&lt;EMAIL&gt;</mark>" in page


def test_same_seed_same_bytes_other_seed_other_sample(built) -> None:
    info, layout = built
    settings = info["settings"]
    files = [layout.review / driver.SAMPLE_FILE, layout.review / driver.HTML_FILE]
    first = [p.read_bytes() for p in files]
    assert driver.run_review_stage(layout, settings)["cached"] is True
    shutil.rmtree(layout.stage(driver.STAGE))
    shutil.rmtree(layout.review)
    again = driver.run_review_stage(layout, settings)
    assert again["cached"] is False and again["key"] == info["stats"]["key"]
    assert [p.read_bytes() for p in files] == first
    reseeded = dataclasses.replace(settings, review=dataclasses.replace(settings.review, seed=7))
    other = driver.run_review_stage(layout, reseeded)
    assert other["cached"] is False and other["key"] != info["stats"]["key"]
    kept = [set(_read(layout).filter(pl.col("stratum") == "kept")["id"])]
    driver.run_review_stage(layout, settings)
    kept.append(set(_read(layout).filter(pl.col("stratum") == "kept")["id"]))
    assert kept[0] != kept[1]
    assert [p.read_bytes() for p in files] == first
    off = dataclasses.replace(settings, review=dataclasses.replace(settings.review, enabled=False))
    assert driver.run_review_stage(layout, off)["enabled"] is False


def test_review_sample_asset_materializes_with_page_in_metadata(tmp_path: Path) -> None:
    corpus = CorpusConfig(config_path=str(_review_config(tmp_path)))
    assets = ASSETS if review_sample in ASSETS else [*ASSETS, review_sample]
    by_key = {k.to_user_string(): a for a in assets for k in a.keys}
    with dg.instance_for_test() as instance:
        materialize_sources(corpus, instance)
        result = dg.materialize(assets, selection=[by_key["dedup"], by_key["scrubbed"], review_sample],
                                instance=instance, resources={"corpus": corpus})
        assert result.success
        meta = result.asset_materializations_for_node("review_sample")[0].metadata
    page = Path(meta["page"].value)
    assert page == corpus.layout().review / driver.HTML_FILE and page.is_file()
    assert Path(meta["sample"].value).is_file()
    assert meta["rows"].value == 28 and meta["cached"].value is False
    assert "| alpha | pii | emails | 3 | 3 |" in meta["strata"].value
