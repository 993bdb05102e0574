"""clean_texts: outcome shape, first-match order, switches and source scopes, batching, counts, schema."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from corpus_dagster.clean import cleaner
from corpus_dagster.clean.cleaner import (
    FILTER_KEYS,
    REASON_CODES,
    RULE_ORDER,
    clean_texts,
    filter_key,
    reason_counts,
)
from corpus_dagster.core.config import load_settings
from corpus_dagster.core.settings import CleanSettings

ROOT = Path(__file__).resolve().parents[2]
EN = ("The cat sleeps on the sofa while the rain falls softly on the city. The children come home from school "
      "and tell their parents about their day, and the parents listen with patience while they cook dinner. "
      "Later that evening, the whole family sits together at the table to share the meal and talk about the "
      "plans they have for the weekend, which include a long walk along the river with the dog.")
FR = ("Le chat dort sur le canapé pendant que la pluie tombe doucement sur la ville. Les enfants rentrent de "
      "l'école et racontent leur journée à leurs parents, qui préparent le dîner dans la cuisine.")
SHORT = "The cat sat on the mat and that was the end of it."


def cfg(overrides: dict | None = None) -> CleanSettings:
    return load_settings(None, {"clean": overrides or {}}).clean


def test_filter_keys_fixed_order() -> None:
    assert FILTER_KEYS == ["lang", "gopher", "repetition", "ppl", "symbol_soup", "table_dump", "repeated",
                           "nav_menu", "non_english", "fineweb"]
    assert set(RULE_ORDER) == set(FILTER_KEYS)


@pytest.mark.parametrize("code", REASON_CODES)
def test_every_reason_code_has_a_filter_key(code: str) -> None:
    key = filter_key(code)
    assert key in FILTER_KEYS
    assert code == key or code.startswith(key + "_")


def test_filter_key_examples_and_unknown() -> None:
    assert [filter_key(c) for c in ("gopher_word_count", "repetition_dup_5gram", "fineweb_short_lines", "lang",
                                    "ppl", "nav_menu")] == ["gopher", "repetition", "fineweb", "lang", "ppl",
                                                            "nav_menu"]
    for bad in ("gopher_bogus", "nope", ""):
        with pytest.raises(ValueError, match="unknown clean reason"):
            filter_key(bad)


def test_reason_codes_are_unique_and_in_rule_order() -> None:
    assert len(set(REASON_CODES)) == len(REASON_CODES)
    groups = [RULE_ORDER.index(filter_key(c)) for c in REASON_CODES]
    assert groups == sorted(groups)


def test_outcome_shape() -> None:
    texts = [EN, FR, "x\x00" + EN, SHORT]
    out = clean_texts(texts, cfg(), "src")
    assert len(out.text) == len(out.lang) == len(out.repairs) == len(out.reason) == len(out.value) == 4
    assert out.text[2] == "x" + EN and out.repairs[2] == ["nul"]
    assert out.reason == [None, "lang", None, "gopher_word_count"]
    assert out.value[0] is None and out.value[2] is None
    assert isinstance(out.value[1], float) and out.value[3] == 13.0


def test_first_match_follows_rule_order() -> None:
    short_fr = "Le chat dort."  # breaks lang and gopher: lang comes first
    assert clean_texts([short_fr], cfg(), "s").reason == ["lang"]
    assert clean_texts([short_fr], cfg({"lang": {"enabled": False}}), "s").reason == ["gopher_word_count"]


def test_rule_switch_and_source_scope() -> None:
    assert clean_texts([SHORT], cfg(), "src").reason == ["gopher_word_count"]
    assert clean_texts([SHORT], cfg({"gopher": {"enabled": False}}), "src").reason != ["gopher_word_count"]
    scoped = cfg({"gopher": {"sources": ["other"]}})
    assert clean_texts([SHORT], scoped, "src").reason != ["gopher_word_count"]
    assert clean_texts([SHORT], scoped, "other").reason == ["gopher_word_count"]
    assert cleaner.in_scope(cfg({"gopher": {"sources": []}}).gopher, "src") is False


def test_every_rule_can_be_switched_off() -> None:
    off = cfg({key: {"enabled": False} for key in RULE_ORDER})
    out = clean_texts(["", "!!!", FR, SHORT], off, "s")
    assert out.reason == [None] * 4
    assert out.lang[2] == "fr"  # language is still identified


def test_results_do_not_depend_on_batching_or_neighbours(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = [EN, FR, SHORT, "", EN + "\n" + EN, "a\nb\na\nb", "# # # #", "12 34\n" * 20] * 3
    c = cfg({"fineweb": {"enabled": True}})
    whole = clean_texts(texts, c, "s")
    monkeypatch.setattr(cleaner, "BATCH_DOCS", 4)
    batched = clean_texts(texts, c, "s")
    single = [clean_texts([t], c, "s") for t in texts]
    assert batched == whole
    monkeypatch.setattr(cleaner, "BATCH_DOCS", 8192)
    monkeypatch.setattr(cleaner, "BATCH_CHARS", 100)  # cut by characters, long documents alone
    assert clean_texts(texts, c, "s") == whole
    assert whole.reason == [o.reason[0] for o in single]
    assert whole.value == [o.value[0] for o in single]


def test_counts_helpers() -> None:
    reasons = [None, "lang", "gopher_word_count", "gopher_stop_words", "repetition_dup_line", "lang",
               "fineweb_line_punct"]
    assert reason_counts(reasons) == {"lang": 2, "gopher_word_count": 1, "gopher_stop_words": 1,
                                      "repetition_dup_line": 1, "fineweb_line_punct": 1}
    assert [filter_key(r) for r in reasons if r] == ["lang", "gopher", "gopher", "repetition", "lang", "fineweb"]


def test_reason_counts_match_outcome() -> None:
    texts = [EN, FR, SHORT, "", "{}{}{}{}" * 40, EN]
    out = clean_texts(texts, cfg(), "s")
    counts = reason_counts(out.reason)
    assert sum(counts.values()) == sum(r is not None for r in out.reason)
    assert counts["lang"] == out.reason.count("lang")


def _walk(schema: dict, path: str):
    for key, sub in schema.get("properties", {}).items():
        yield f"{path}.{key}", sub
        yield from _walk(sub, f"{path}.{key}")


def test_schema_clean_section_documents_every_key() -> None:
    schema = json.loads((ROOT / "schemas" / "corpus-config.schema.json").read_text())
    clean = schema["properties"]["clean"]
    for path, sub in _walk(clean, "clean"):
        assert "default" in sub or "null" in sub["type"], path  # a nullable threshold may have none: off
        assert sub.get("description"), path
    for key in RULE_ORDER:
        props = clean["properties"][key]["properties"]
        assert {"enabled", "sources"} <= set(props), key


def test_docs_list_every_reason_code() -> None:
    doc = (ROOT / "docs" / "clean.md").read_text()
    for code in REASON_CODES:
        assert f"`{code}`" in doc, code


def test_batch_bounds_cut_by_documents_and_by_characters() -> None:
    assert cleaner.batch_bounds([1, 1, 1, 1, 1], 2, 100) == [(0, 2), (2, 4), (4, 5)]
    assert cleaner.batch_bounds([5, 5, 50, 1, 1], 10, 10) == [(0, 2), (2, 3), (3, 5)]  # a long one alone
    assert cleaner.batch_bounds([], 2, 10) == []
