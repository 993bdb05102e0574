"""scrub_texts / find_pii contract: counts, examples, idempotence, determinism, errors."""

import re
from pathlib import Path

import polars as pl
import pytest
from settings_factory import pii_settings

from corpus_dagster.core.config import load_config
from corpus_dagster.core.settings import PiiSettings
from corpus_dagster.scrub.api import (
    PII_TYPES,
    PLACEHOLDERS,
    _plan,
    count_placeholders,
    find_pii,
    find_pii_batch,
    resolve_overlaps,
    scrub_texts,
)
from corpus_dagster.scrub.prescreen import candidate_regions, windows

TEXTS = [
    "Mail john.doe@acme.io or call +1 202 555 0143 from 52.14.200.7, card 4556 7375 8689 9855, "
    "key AKIAZ7VNQ3B2KX4MPLQW.",
    "nothing to see on 2023-01-15, version 1.2.3.4",
    "",
    "password=S3cr3tP@ss! and jane [at] acme [dot] io",
    "already scrubbed: <EMAIL> and <PHONE>",
]


@pytest.fixture(scope="module")
def cfg() -> PiiSettings:
    return pii_settings()


def test_defaults_come_from_the_schema(cfg: PiiSettings) -> None:
    assert cfg.to_dict() == load_config()["pii"] and cfg == PiiSettings()
    assert PII_TYPES == ("emails", "phones", "cards", "ips", "keys")
    assert set(PLACEHOLDERS) == set(PII_TYPES)


def test_outcome_shape_and_counts(cfg: PiiSettings) -> None:
    out = scrub_texts(TEXTS, cfg)
    assert out.text[0] == "Mail <EMAIL> or call <PHONE> from <IP>, card <CARD>, key <KEY>."
    assert out.text[1] == TEXTS[1] and out.text[2] == ""
    assert out.text[3] == "password=<KEY> and <EMAIL>"
    assert out.text[4] == TEXTS[4]
    assert {k: v[0] for k, v in out.counts.items()} == dict.fromkeys(PII_TYPES, 1)
    assert out.counts["emails"] == [1, 0, 0, 1, 0] and out.counts["keys"] == [1, 0, 0, 1, 0]
    assert out.redactions == [5, 0, 0, 2, 0]
    assert all(len(v) == len(TEXTS) for v in out.counts.values())
    assert out.preexisting == {"emails": 1, "phones": 1, "cards": 0, "ips": 0, "keys": 0}


def test_counts_equal_placeholders_in_output_minus_preexisting(cfg: PiiSettings) -> None:
    out = scrub_texts(TEXTS, cfg)
    in_output = {k: sum(count_placeholders(t)[k] for t in out.text) for k in PII_TYPES}
    inserted = {k: sum(out.counts[k]) for k in PII_TYPES}
    assert in_output == {k: inserted[k] + out.preexisting[k] for k in PII_TYPES}


def test_examples_show_placeholders_in_context(cfg: PiiSettings) -> None:
    out = scrub_texts(TEXTS, cfg)
    kinds = [k for _, k, _ in out.examples]
    assert sorted(set(kinds)) == sorted(PII_TYPES)  # the first of each type comes first
    for doc, kind, snippet in out.examples:
        assert PLACEHOLDERS[kind] in snippet and out.redactions[doc] > 0
        assert "\n" not in snippet and "@acme" not in snippet
    few = pii_settings({"max_examples": 2})
    assert len(scrub_texts(TEXTS, few).examples) == 2
    none = pii_settings({"max_examples": 0})
    assert scrub_texts(TEXTS, none).examples == []


def test_idempotent_and_clean_after_scrub(cfg: PiiSettings) -> None:
    once = scrub_texts(TEXTS, cfg)
    twice = scrub_texts(once.text, cfg)
    assert twice.text == once.text and sum(twice.redactions) == 0
    assert find_pii_batch(once.text, cfg) == [[] for _ in TEXTS]


def test_batch_boundaries_do_not_change_results(cfg: PiiSettings) -> None:
    texts = TEXTS * 7
    whole = scrub_texts(texts, cfg)
    parts = [scrub_texts(texts[i : i + 3], cfg) for i in range(0, len(texts), 3)]
    assert [t for p in parts for t in p.text] == whole.text
    for k in PII_TYPES:
        assert [c for p in parts for c in p.counts[k]] == whole.counts[k]


def test_find_pii_batch_equals_single_calls(cfg: PiiSettings) -> None:
    assert find_pii_batch(TEXTS, cfg) == [find_pii(t, cfg) for t in TEXTS]
    spans = find_pii(TEXTS[0], cfg)
    assert [k for k, _, _ in spans] == ["emails", "phones", "ips", "cards", "keys"]
    assert spans == sorted(spans, key=lambda s: s[1])


def test_overlaps_keep_the_higher_priority_type() -> None:
    spans = [("phones", 10, 20), ("cards", 8, 22), ("emails", 30, 40), ("ips", 35, 45), ("keys", 0, 5),
             ("emails", 3, 9)]
    assert resolve_overlaps(spans) == [("keys", 0, 5), ("cards", 8, 22), ("emails", 30, 40)]


def test_placeholders_are_never_matched(cfg: PiiSettings) -> None:
    text = " ".join(PLACEHOLDERS.values()) + " password=<KEY> token: <KEY> @<EMAIL> <IP>:8080"
    assert find_pii(text, cfg) == []


def test_all_disabled_changes_nothing(cfg: PiiSettings) -> None:
    off = pii_settings({kind: {"enabled": False} for kind in PII_TYPES})
    out = scrub_texts(TEXTS, off)
    assert out.text == TEXTS and sum(out.redactions) == 0


def test_recheck_pass_catches_what_a_single_pass_leaves() -> None:
    cfg = pii_settings()
    plan = _plan(cfg)
    # A pass that only sees phones leaves the e-mail; the re-check (max_passes=2) must find it near
    # the placeholder, while max_passes=1 must not look again.
    text = "call 202-555-0143 or john@acme.io"
    original = dict(plan.detectors)
    calls = {"n": 0}

    def phones_then_all(t, regions):
        calls["n"] += 1
        return original["emails"](t, regions) if calls["n"] > 1 else []

    plan.detectors["emails"] = phones_then_all
    try:
        first = scrub_texts([text], cfg)
    finally:
        plan.detectors.update(original)
    assert first.text == ["call <PHONE> or <EMAIL>"] and first.redactions == [2]
    one = pii_settings({"max_passes": 1})
    one_plan = _plan(one)
    one_plan.detectors["emails"] = lambda t, r: []
    try:
        assert scrub_texts([text], one).text == ["call <PHONE> or john@acme.io"]
    finally:
        one_plan.detectors.update(original)


def test_lone_surrogates_are_scrubbed_with_aligned_offsets(cfg: PiiSettings) -> None:
    text = "bad \ud800 byte then john@acme.io"
    assert scrub_texts([text], cfg).text == ["bad \ud800 byte then <EMAIL>"]


def test_errors_name_the_problem(cfg: PiiSettings) -> None:
    with pytest.raises(TypeError, match=r"texts\[1\] is NoneType"):
        scrub_texts(["ok", None], cfg)
    with pytest.raises(TypeError, match="text is int"):
        find_pii(3, cfg)
    with pytest.raises(TypeError, match=r"must be PiiSettings \(Settings.pii\), got dict"):
        scrub_texts(["x"], cfg.to_dict())  # the dict form is not a config
    with pytest.raises(TypeError, match="must be PiiSettings"):
        scrub_texts(["x"], None)
    assert scrub_texts([], cfg).text == []


def test_region_patterns_are_context_free_and_locate_exactly(cfg: PiiSettings) -> None:
    plan = _plan(cfg)
    for name, pattern in plan.all_patterns.items():
        assert not re.search(r"\(\?<?[=!]|\\b|\^|\$", pattern), name
        pl.Series(["probe"]).str.extract_all(pattern)  # compiles in the Rust engine
    regions = candidate_regions(["x @ y @", "none", "a@b"], {"at": "@"})
    assert regions == {"at": {0: [(2, 3), (6, 7)], 2: [(1, 2)]}}
    assert windows([(5, 6), (8, 9), (40, 41)], 2, 2, 42) == [(3, 11), (38, 42)]


def test_polars_series_in_gives_series_out(cfg: PiiSettings) -> None:
    series = pl.Series("text", TEXTS)
    out = scrub_texts(series, cfg)
    listed = scrub_texts(TEXTS, cfg)
    assert isinstance(out.text, pl.Series) and out.text.to_list() == listed.text
    assert series.to_list() == TEXTS  # the input is not modified
    assert out.counts == listed.counts and out.preexisting == listed.preexisting
    assert find_pii_batch(series, cfg) == find_pii_batch(TEXTS, cfg)
    with pytest.raises(TypeError, match=r"texts\[1\] is None"):
        scrub_texts(pl.Series(["a", None]), cfg)
    with pytest.raises(TypeError, match="Int64 Series"):
        scrub_texts(pl.Series([1, 2]), cfg)


def test_region_patterns_are_sealed_against_placeholders(cfg: PiiSettings) -> None:
    from corpus_dagster.scrub.api import _placeholder_sealed

    assert _plan(cfg).sealed  # the re-check skips texts with nothing left near a placeholder
    for pattern in ("a.b", "[^x]", r"\W+", "[ -~]", "<x", r"\x3c", r"\p{S}", "EMAIL", "[A-Z]{3}", r"\bfoo", "^x"):
        assert not _placeholder_sealed(pattern), pattern
    for pattern in (r"\.", "[.]", r"[0-9 \t.\-/()]{8,}", r"[\s\d]+@"):
        assert _placeholder_sealed(pattern), pattern


def test_skipping_rechecks_changes_nothing(cfg: PiiSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    # Texts packed with PII next to PII and cue words, scrubbed with the skip and with every changed text
    # re-checked: the outputs must be equal, for two and three passes.
    import random

    from corpus_dagster.scrub import api
    from corpus_dagster.scrub.evaluate import load_labeled

    labeled = [d.text for d in load_labeled(Path(__file__).parents[1] / "data" / "pii" / "labeled.jsonl")]
    rng = random.Random(7)
    texts = [rng.choice([" ", "\n", ""]).join(rng.sample(labeled, rng.randint(2, 10))) for _ in range(600)]
    for passes in (2, 3):
        deep = pii_settings({"max_passes": passes})
        skipped = scrub_texts(texts, deep)
        with monkeypatch.context() as m:
            m.setattr(api, "_needs_recheck", lambda located, replaced: set(replaced.docs.tolist()))
            full = scrub_texts(texts, deep)
        assert skipped.text == full.text and skipped.counts == full.counts
        assert skipped.redactions == full.redactions and skipped.examples == full.examples
