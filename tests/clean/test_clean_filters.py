"""The filter declarations: complete, consistent with the config schema and the verdicts, in pinned orders,
and the one source of the threshold texts the Dagster UI, the review and explain show."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from corpus_dagster.clean import filters, outputs
from corpus_dagster.clean.batch import DocBatch
from corpus_dagster.clean.cleaner import clean_texts
from corpus_dagster.clean.filters import (
    BASE_FILTER_KEYS,
    FILTER_KEYS,
    FILTERS,
    REASON_CODES,
    RULE_ORDER,
    Filter,
    Limit,
    Reason,
    filter_key,
    find_reason,
    threshold_text,
)
from corpus_dagster.clean.verdict import Verdict
from corpus_dagster.core.config import load_schema, load_settings
from corpus_dagster.core.settings import CleanSettings
from corpus_dagster.explain.journey import rejection
from corpus_dagster.publish import manifest
from corpus_dagster.review.sample import clean_threshold

CLEAN_SCHEMA = load_schema("corpus-config.schema.json")["properties"]["clean"]["properties"]
REASONS = [(f, r) for f in FILTERS for r in f.reasons]
FR = ("Le chat dort sur le canapé pendant que la pluie tombe doucement sur la ville. Les enfants rentrent de "
      "l'école et racontent leur journée à leurs parents, qui préparent le dîner dans la cuisine.")
# Texts every batch rule can measure: prose, and a short-line number table with menu lines.
TEXTS = [
    "The cat sat on the mat and the dog slept by the door while the rain fell on the quiet town. " * 6,
    "home\nabout\ncontact\nblog\nnews\n1 2\n3 4\n5 6\n7 8\n9 10\n11 12\n",
    "- one item\n- two items... \n- three items\n# heading\n" * 3,
]
# The smallest KenLM model (KenLM needs a bigram section): every word unknown, so any text has a perplexity.
TINY_ARPA = ("\\data\\\nngram 1=3\nngram 2=1\n\n\\1-grams:\n-1.0\t<unk>\t0\n-1.0\t<s>\t0\n-1.0\t</s>\t0\n\n"
             "\\2-grams:\n-1.0\t<s> </s>\n\n\\end\\\n")


def test_run_order_reason_codes_and_manifest_keys_are_pinned() -> None:
    assert RULE_ORDER == ("lang", "gopher", "repetition", "symbol_soup", "table_dump", "repeated", "nav_menu",
                          "non_english", "fineweb", "ppl")
    assert REASON_CODES == (
        "lang",
        "gopher_word_count", "gopher_mean_word_length", "gopher_symbol_ratio", "gopher_bullet_lines",
        "gopher_ellipsis_lines", "gopher_alpha_words", "gopher_stop_words",
        "repetition_dup_para", "repetition_dup_para_chars", "repetition_dup_line", "repetition_dup_line_chars",
        "repetition_top_2gram", "repetition_top_3gram", "repetition_top_4gram",
        "repetition_dup_5gram", "repetition_dup_6gram", "repetition_dup_7gram", "repetition_dup_8gram",
        "repetition_dup_9gram", "repetition_dup_10gram",
        "symbol_soup", "table_dump", "repeated", "nav_menu", "non_english",
        "fineweb_line_punct", "fineweb_short_lines", "fineweb_dup_line_chars", "fineweb_newline_ratio",
        "fineweb_long_line",
        "ppl",
    )
    assert FILTER_KEYS == ["lang", "gopher", "repetition", "ppl", "symbol_soup", "table_dump", "repeated",
                           "nav_menu", "non_english", "fineweb"]
    assert BASE_FILTER_KEYS == ("lang", "gopher", "repetition", "ppl")


def test_the_manifest_schema_requires_exactly_the_base_keys() -> None:
    filters_schema = load_schema("corpus-manifest.schema.json")["properties"]["filters"]
    assert filters_schema["required"] == list(BASE_FILTER_KEYS)


def test_other_stages_read_the_declarations_through_the_clean_read_face() -> None:
    assert outputs.REASON_CODES is REASON_CODES and outputs.FILTER_KEYS is FILTER_KEYS
    assert outputs.find_reason is filters.find_reason and outputs.filter_key is filters.filter_key
    assert outputs.threshold_text("gopher_word_count", CleanSettings()) == threshold_text("gopher_word_count", CleanSettings()) != ""
    assert manifest.BASE_FILTER_KEYS is outputs.BASE_FILTER_KEYS is BASE_FILTER_KEYS


def test_every_reason_code_belongs_to_exactly_one_filter() -> None:
    owners = {code: [f.name for f in FILTERS if code in f.codes] for code in REASON_CODES}
    assert all(len(names) == 1 for names in owners.values()), owners
    assert len(set(REASON_CODES)) == len(REASON_CODES)
    assert len({f.name for f in FILTERS}) == len(FILTERS)
    for f, r in REASONS:
        assert filter_key(r.code) == f.name and find_reason(r.code) == (f, r)
    with pytest.raises(ValueError, match="unknown clean reason code"):
        filter_key("gopher_bogus")


def test_every_filter_is_a_schema_section_with_the_declared_default_switch() -> None:
    assert set(CLEAN_SCHEMA) - {"repair"} == set(RULE_ORDER)
    for f in FILTERS:
        props = CLEAN_SCHEMA[f.name]["properties"]
        assert props["enabled"]["default"] is f.enabled, f.name
        assert props["sources"]["default"] is None, f.name


@pytest.mark.parametrize(("flt", "reason"), REASONS, ids=[r.code for _, r in REASONS])
def test_every_declared_key_is_in_the_schema_with_a_default(flt: Filter, reason: Reason) -> None:
    props = CLEAN_SCHEMA[flt.name]["properties"]
    assert reason.value and reason.limits
    for key in reason.keys:
        assert key in props and props[key].get("description"), (reason.code, key)
        # a default, or a threshold with none: switched off and left out of the resolved config
        assert "default" in props[key] or "null" in props[key]["type"], (reason.code, key)
    for limit in (*reason.limits, *reason.requires):
        assert limit.op in ("<", "<=", ">", ">=")
        types = props[limit.key]["type"]
        assert {"number", "integer"} & set(types if isinstance(types, list) else [types]), limit.key
    if len(flt.reasons) > 1:  # a filter of several rules switches each one off with a null threshold
        assert all("null" in props[limit.key]["type"] for limit in reason.limits), reason.code


def _fire_only(flt: Filter, reason: Reason, tmp_path: Path) -> Any:
    """The filter's default settings with `reason`'s thresholds set so that it fires on any value and every
    other reason of the filter switched off (values the schema would refuse, so set on the typed section)."""
    changes: dict[str, Any] = {limit.key: None for other in flt.reasons for limit in other.limits}
    changes |= {limit.key: 1e12 if limit.op in ("<", "<=") else -1.0 for limit in reason.limits}
    if flt.name == "ppl":
        pytest.importorskip("kenlm")
        model = tmp_path / "tiny.arpa"
        model.write_text(TINY_ARPA)
        changes["model_path"] = str(model)
    return dataclasses.replace(getattr(load_settings(None).clean, flt.name), **changes)


MEASURED = [(f, r) for f, r in REASONS if f.measures is not None]


@pytest.mark.parametrize(("flt", "reason"), MEASURED, ids=[r.code for _, r in MEASURED])
def test_each_verdict_records_the_declared_code_its_thresholds_decide(flt: Filter, reason: Reason,
                                                                    tmp_path: Path) -> None:
    section = _fire_only(flt, reason, tmp_path)
    verdict = flt.verdict(DocBatch(TEXTS), section)
    assert set(verdict.reason.tolist()) - {None} == {reason.code}


@pytest.mark.parametrize(("flt", "reason"), MEASURED, ids=[r.code for _, r in MEASURED])
def test_each_limit_records_the_measure_it_compares(flt: Filter, reason: Reason, tmp_path: Path) -> None:
    section = _fire_only(flt, reason, tmp_path)
    batch = DocBatch(TEXTS)
    verdict = flt.verdict(batch, section)
    measured = flt.measures(batch, section, Verdict(len(batch)))
    expected = measured[reason.limits[0].measure]
    hit = verdict.reason == reason.code
    assert hit.any()
    np.testing.assert_array_equal(verdict.value[hit], np.asarray(expected, dtype=np.float64)[hit])


def test_a_null_threshold_switches_its_limit_off_and_measures_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    gopher = filters.GOPHER
    section = load_settings(None, {"clean": {"gopher": {lim.key: None for r in gopher.reasons for lim in r.limits}}})
    asked: list[str] = []
    real = gopher.measures.__getitem__
    monkeypatch.setattr(gopher.measures, "__getitem__", lambda self, name: asked.append(name) or real(self, name))
    verdict = gopher.verdict(DocBatch(TEXTS), section.clean.gopher)
    assert verdict.reason.tolist() == [None] * len(TEXTS) and asked == []


def test_a_further_condition_must_hold_too() -> None:
    table_dump = filters.TABLE_DUMP
    assert not table_dump.reasons[0].single
    fires = {"min_numeric_word_ratio": -1.0, "min_short_line_ratio": -1.0, "min_lines": 0}  # below the schema's 0
    default = load_settings(None).clean.table_dump
    cfg = dataclasses.replace(default, **fires)
    assert set(table_dump.verdict(DocBatch(TEXTS), cfg).reason.tolist()) == {"table_dump"}
    cfg = dataclasses.replace(default, **{**fires, "min_lines": 10**6})
    assert set(table_dump.verdict(DocBatch(TEXTS), cfg).reason.tolist()) == {None}


def test_lang_is_decided_from_language_id() -> None:
    assert [f for f in FILTERS if f.measures is None] == [filters.LANG]
    only_lang = {f.name: {"enabled": f is filters.LANG} for f in FILTERS}
    cfg = load_settings(None, {"clean": only_lang}).clean
    assert clean_texts([FR], cfg, "s").reason == list(filters.LANG.codes)


@pytest.mark.parametrize(("flt", "reason"), REASONS, ids=[r.code for _, r in REASONS])
def test_threshold_texts_name_the_declared_keys_and_comparisons(flt: Filter, reason: Reason) -> None:
    values = {limit.key: 0.125 + i for i, limit in enumerate(reason.limits)}
    clean = load_settings(None).clean  # values the schema's integer keys refuse, so set on the typed sections
    typed = dataclasses.replace(clean, **{flt.name: dataclasses.replace(getattr(clean, flt.name), **values)})
    text = threshold_text(reason.code, typed)
    explained = rejection(reason.code, None, typed)
    assert clean_threshold(reason.code, typed) == text  # the review page shows the declarations' text
    for limit in reason.limits:
        assert f"value {limit.op} clean.{flt.name}.{limit.key} = {values[limit.key]}" in text
    first = reason.limits[0]
    assert explained["config"].startswith(f"clean.{flt.name}.{first.key}")
    if reason.code != "lang":
        assert explained["op"] == first.op and explained["threshold"] == values[first.key]
    keys_shown = set(re.findall(rf"clean\.{flt.name}\.(\w+)", text))
    assert keys_shown <= set(reason.keys), text  # nothing but the keys the reason's decision reads


def test_texts_follow_a_changed_declaration(monkeypatch: pytest.MonkeyPatch) -> None:
    gopher, word_count = find_reason("gopher_word_count")
    moved = Reason(word_count.code, word_count.value, (Limit(">=", "max_mean_word_length", "n_words"),))
    monkeypatch.setitem(filters._BY_CODE, word_count.code, (gopher, moved))
    typed = load_settings(None).clean
    assert threshold_text("gopher_word_count", typed) == "value >= clean.gopher.max_mean_word_length = 10"
    assert clean_threshold("gopher_word_count", typed) == "value >= clean.gopher.max_mean_word_length = 10"
    explained = rejection("gopher_word_count", 12.0, typed)
    assert explained["summary"] == "rejected by gopher_word_count: 12 >= 10 (clean.gopher.max_mean_word_length)"
