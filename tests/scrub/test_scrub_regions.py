"""Region location shortcuts give the regex's matches exactly: anchored patterns, carried regions, filters."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import numpy as np
import pytest
from settings_factory import pii_settings

from corpus_dagster.core.settings import PiiSettings
from corpus_dagster.scrub import api
from corpus_dagster.scrub.api import _plan
from corpus_dagster.scrub.carry import carry
from corpus_dagster.scrub.evaluate import load_labeled
from corpus_dagster.scrub.phones import WINDOWS, find_phones
from corpus_dagster.scrub.prescreen import TextBatch, candidate_regions, locate, windows
from corpus_dagster.scrub.recheck import Replaced
from corpus_dagster.scrub.spans import Matches, merged_windows

LABELED = Path(__file__).parents[1] / "data" / "pii" / "labeled.jsonl"
_ALPHABET = "0123456789abcdefxX:+( )-.@<>\n\té€\u2013PASuthor=_"


@pytest.fixture(scope="module")
def cfg() -> PiiSettings:
    return pii_settings()


def _texts(n: int, seed: int) -> list[str]:
    """Labeled texts glued together, and random strings dense in the characters the patterns read."""
    labeled = [d.text for d in load_labeled(LABELED)]
    rng = random.Random(seed)
    glued = [rng.choice([" ", "\n", "", "x", "é"]).join(rng.sample(labeled, rng.randint(2, 8))) for _ in range(n)]
    noise = ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 80))) for _ in range(n)]
    return glued + noise + ["", "@", ":", "+", "abc:", "+ 1", "+(", "\x01a@b\x02"]


def _same(a: Matches, b: Matches) -> bool:
    return all(np.array_equal(x, y) for x, y in ((a.doc, b.doc), (a.start, b.start), (a.end, b.end)))


def test_every_way_of_locating_finds_the_regex_matches(cfg: PiiSettings) -> None:
    # Markers for all; the plan's mix (anchor bytes, extract_all for the sparse ones); extract_all for all.
    plan = _plan(cfg)
    assert set(plan.anchored) == {"emails", "ips6", "phones_intl"}
    assert plan.sparse == {"keys_tok", "keys_cue", "emails_obf", "ips4"}
    batch = TextBatch(_texts(400, 1))
    slow = locate(batch, plan.all_patterns, plan.filters)
    for other in (plan.locate(batch), locate(batch, plan.all_patterns, plan.filters, sparse=frozenset(plan.all_patterns))):
        for name in plan.all_patterns:
            assert _same(other[name], slow[name]), name
            assert (other[name].look is None) == (slow[name].look is None), name
            assert slow[name].look is None or np.array_equal(other[name].look, slow[name].look), name


def test_offsets_are_characters_and_byte_filters_read_the_right_text(cfg: PiiSettings) -> None:
    # Non-ASCII texts get character offsets; a text holding a marker byte is located the slow way.
    assert candidate_regions(["é@x", "\x01 a@b", "ab", "€€ 1234567 €"], {"at": "@", "run": "[0-9]+"}) == {
        "at": {0: [(1, 2)], 1: [(3, 4)]}, "run": {3: [(3, 10)]}}
    plan = _plan(cfg)
    looked = locate(TextBatch(["x @@y", "a@b", "PASS: x\nAuthor: y\n  PASS: z"]), plan.all_patterns, plan.filters)
    assert looked["emails"].look.tolist() == [False, False, True]
    kw = looked["keys_kw"]
    assert kw.doc.tolist() == [2, 2, 2] and kw.look.tolist() == [False, False, True]


def test_carried_regions_equal_a_new_scan(cfg: PiiSettings) -> None:
    # After a pass replaces spans, the carried regions must be the regions of the new texts, and a carried
    # filter verdict may only keep more regions (next to a placeholder) than a fresh filter would.
    plan = _plan(cfg)
    batch = TextBatch(_texts(600, 2))
    results, found = api._scrub_pass(batch, plan)
    changed = {k: results[k][2] for k in sorted(results)}
    assert len(changed) > 300
    new = [results[k][0] for k in sorted(changed)]
    replaced = Replaced.of(changed, api._WIDTHS)
    got = carry(found, replaced, sorted(changed), TextBatch(new), plan.locate)
    ref = locate(TextBatch(new), plan.all_patterns, plan.filters)
    for name in plan.all_patterns:
        assert _same(got[name], ref[name]), name
        if ref[name].look is not None:
            assert (got[name].look | ~ref[name].look).all(), name


def test_batch_windows_equal_the_per_text_windows() -> None:
    rng = random.Random(4)
    for _ in range(300):
        sizes = np.asarray([rng.randint(0, 120) for _ in range(rng.randint(1, 6))], np.int64)
        parts = []
        for length in (None, 40):
            rows = sorted((d, s, s + rng.randint(1, 9)) for d in range(len(sizes)) if sizes[d]
                          for s in rng.sample(range(int(sizes[d])), min(int(sizes[d]), rng.randint(0, 4))))
            rows = [(d, s, min(e, int(sizes[d]))) for d, s, e in rows]
            doc, start, end = (np.asarray([r[i] for r in rows], np.int64) for i in range(3))
            parts.append((Matches(doc, start, end), length))
        got = merged_windows(parts, 6, 24, sizes).by_doc()
        for d in range(len(sizes)):
            spans = sorted([(s, e) for m, n in parts for s, e in zip(m.start[m.doc == d].tolist(),
                            (m.end[m.doc == d] if n is None else m.start[m.doc == d] + n).tolist(), strict=True)])
            assert got.get(d, []) == windows(spans, 6, 24, int(sizes[d])), d


def test_phone_windows_for_the_batch_find_what_each_text_would(cfg: PiiSettings) -> None:
    plan = _plan(cfg)
    texts = _texts(300, 5)
    batch = TextBatch(texts)
    by_doc = api._regions_by_doc(plan.locate(batch), plan, batch)
    for i, regions in by_doc.items():
        own = api._DocRegions({k: v for k, v in regions.items() if k != WINDOWS})
        assert find_phones(texts[i], plan.cfg.phones, plan.cfg.context_chars, regions) == \
            find_phones(texts[i], plan.cfg.phones, plan.cfg.context_chars, own), i


def test_byte_filters_only_spare_work(cfg: PiiSettings) -> None:
    # The regions the filters drop are ones their detector passes over: the same spans without them.
    plan = _plan(cfg)
    texts = _texts(300, 6) + ["PASS: password=Xk9#m2Lq7\nAuthor: a@b.io\n  PASS: pass=Zq8#k1Lw\nauthoriz: 1"]
    batch = TextBatch(texts)

    def spans(p: api._Plan) -> dict[int, list]:
        by_doc = api._regions_by_doc(p.locate(batch), p, batch)
        found = {i: api._detect(texts[i], p, regions) for i, regions in by_doc.items()}
        return {i: s for i, s in found.items() if s}

    assert spans(plan) == spans(dataclasses.replace(plan, filters={}))
    assert spans(plan)[len(texts) - 1]  # the keys after `PASS: ` inside the line and indented are found
