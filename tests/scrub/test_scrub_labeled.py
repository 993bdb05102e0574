"""The labeled set: precision/recall targets per type, each hard-negative family, and the evaluator."""

import json
from collections import defaultdict
from pathlib import Path

import pytest
from settings_factory import pii_settings

from corpus_dagster.core.settings import PiiSettings
from corpus_dagster.scrub.api import PII_TYPES, find_pii_batch, scrub_texts
from corpus_dagster.scrub.evaluate import (
    LabeledDoc,
    TypeScore,
    evaluate,
    load_labeled,
    parse_marked,
    score_doc,
)

LABELED = Path(__file__).parents[1] / "data" / "pii" / "labeled.jsonl"
TARGETS = {"emails": (0.99, 0.97), "phones": (0.99, 0.97), "cards": (0.99, 0.97), "ips": (0.99, 0.97),
           "keys": (0.99, 0.97)}  # (precision, recall) for every type


@pytest.fixture(scope="module")
def cfg() -> PiiSettings:
    return pii_settings()


@pytest.fixture(scope="module")
def docs() -> list[LabeledDoc]:
    return load_labeled(LABELED)


@pytest.fixture(scope="module")
def scores(docs: list[LabeledDoc], cfg: PiiSettings) -> dict[str, TypeScore]:
    return evaluate(docs, cfg)


def test_labeled_set_is_large_and_covers_every_type(docs: list[LabeledDoc]) -> None:
    gold = defaultdict(int)
    for doc in docs:
        for kind, _, _ in doc.spans:
            gold[kind] += 1
    assert all(gold[k] >= 150 for k in PII_TYPES), gold
    families = {d.family for d in docs if d.family.startswith("neg.")}
    for fam in ("versions", "dates", "isbns", "uuids", "git_shas", "hex_hashes", "coordinates", "prices",
                "phone_like_ids", "example_domains", "test_cards", "cued_non_phones", "cued_non_secrets"):
        assert f"neg.{fam}" in families


@pytest.mark.parametrize("kind", PII_TYPES)
def test_precision_and_recall_targets(kind: str, scores: dict[str, TypeScore]) -> None:
    p_target, r_target = TARGETS[kind]
    s = scores[kind]
    assert s.precision >= p_target, (kind, s.precision, s.errors[:5])
    assert s.recall >= r_target, (kind, s.recall, s.errors[:5])


def test_each_hard_negative_family_stays_almost_untouched(docs: list[LabeledDoc], cfg: PiiSettings) -> None:
    negatives = [d for d in docs if d.family.startswith("neg.")]
    found = find_pii_batch([d.text for d in negatives], cfg)
    per_family: dict[str, list[int]] = defaultdict(list)
    for doc, spans in zip(negatives, found, strict=True):
        per_family[doc.family].append(len(spans))
    for family, counts in per_family.items():
        # at most 5% of a family's texts may fire (the precision target); most families must be clean
        assert sum(1 for c in counts if c) <= 0.05 * len(counts), (family, counts)
    dirty = [f for f, c in per_family.items() if any(c)]
    assert dirty == ["neg.versions"], dirty  # the one documented miss: "it is 1.15.7.2"


def test_scrubbed_labeled_set_is_clean_and_stable(docs: list[LabeledDoc], cfg: PiiSettings) -> None:
    once = scrub_texts([d.text for d in docs], cfg)
    assert sum(len(s) for s in find_pii_batch(once.text, cfg)) == 0
    assert scrub_texts(once.text, cfg).text == once.text
    for doc, text in zip(docs, once.text, strict=True):  # every gold value is gone from the output
        if doc.family == "phone.uncovered_region":
            continue  # a national format of a region outside pii.phones.regions: the documented miss
        for _, start, end in doc.spans:
            value = doc.text[start:end]
            if len(value) >= 8:
                assert value not in text, (doc.family, value)


def test_parse_marked_and_errors(tmp_path: Path) -> None:
    text, spans = parse_marked("a ⟦emails|x@y.io⟧ b ⟦ips|8.8.4.4⟧")
    assert text == "a x@y.io b 8.8.4.4" and spans == (("emails", 2, 8), ("ips", 11, 18))
    with pytest.raises(ValueError, match="unknown PII type 'ssn'"):
        parse_marked("⟦ssn|123⟧")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"family": "x", "text": "ok"}) + "\n" + '{"text": "no family"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: bad labeled line"):
        load_labeled(bad)


def test_score_doc_counts_overlap_matches() -> None:
    doc = LabeledDoc("f", "call 202-555-0143 or x@y.io", (("phones", 5, 17), ("emails", 21, 27)))
    scores = {k: TypeScore() for k in PII_TYPES}
    score_doc(doc, [("phones", 5, 17), ("ips", 0, 4)], scores)
    assert (scores["phones"].tp, scores["phones"].exact) == (1, 1)
    assert scores["ips"].fp == 1 and scores["emails"].fn == 1
    assert scores["ips"].precision == 0.0 and scores["emails"].recall == 0.0
    assert TypeScore().precision == 1.0 and TypeScore().recall == 1.0
