"""Precision and recall of the detectors on a labeled set, where gold spans are marked inline.

A labeled line is JSON `{"family": ..., "text": ...}` whose text marks each gold PII span as
`⟦type|value⟧` (U+27E6/U+27E7, which real text almost never holds). A predicted span is a true positive
when it overlaps an unmatched gold span of the same type; every other prediction is a false positive and
every unmatched gold span a false negative. `exact` counts true positives with identical boundaries.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from corpus_dagster.core.settings import PiiSettings
from corpus_dagster.scrub.api import PII_TYPES, Span, find_pii_batch

_MARK = re.compile(r"⟦(?P<type>[a-z]+)\|(?P<value>.*?)⟧", re.S)


@dataclass(frozen=True)
class LabeledDoc:
    """One labeled text: plain text, gold spans, and the family it was written to test."""

    family: str
    text: str
    spans: tuple[Span, ...]


@dataclass
class TypeScore:
    """Counts for one PII type over a labeled set."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    exact: int = 0
    errors: list[tuple[str, str, str]] = field(default_factory=list)

    @property
    def precision(self) -> float:
        """tp / (tp + fp); 1.0 when nothing was predicted."""
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0

    @property
    def recall(self) -> float:
        """tp / (tp + fn); 1.0 when there was nothing to find."""
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0


def parse_marked(marked: str) -> tuple[str, tuple[Span, ...]]:
    """Strip `⟦type|value⟧` marks; return the plain text and the gold (type, start, end) spans."""
    parts: list[str] = []
    spans: list[Span] = []
    pos = 0
    size = 0
    for m in _MARK.finditer(marked):
        kind = m.group("type")
        if kind not in PII_TYPES:
            raise ValueError(f"unknown PII type {kind!r} in labeled text: {marked[:80]!r}")
        before = marked[pos : m.start()]
        parts.append(before)
        size += len(before)
        value = m.group("value")
        spans.append((kind, size, size + len(value)))
        parts.append(value)
        size += len(value)
        pos = m.end()
    parts.append(marked[pos:])
    return "".join(parts), tuple(spans)


def load_labeled(path: str | Path) -> list[LabeledDoc]:
    """Read a labeled JSONL file; errors name the file and line."""
    docs: list[LabeledDoc] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                text, spans = parse_marked(row["text"])
                docs.append(LabeledDoc(row["family"], text, spans))
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{path}:{lineno}: bad labeled line: {exc}") from exc
    return docs


def score_doc(doc: LabeledDoc, predicted: list[Span], scores: dict[str, TypeScore]) -> None:
    """Add one document's matches and errors to per-type scores."""
    unmatched = list(doc.spans)
    for kind, start, end in predicted:
        hit = next((g for g in unmatched if g[0] == kind and g[1] < end and start < g[2]), None)
        if hit is None:
            scores[kind].fp += 1
            scores[kind].errors.append(("fp", doc.family, doc.text[max(0, start - 30) : end + 30]))
            continue
        unmatched.remove(hit)
        scores[kind].tp += 1
        scores[kind].exact += (hit[1], hit[2]) == (start, end)
    for kind, start, end in unmatched:
        scores[kind].fn += 1
        scores[kind].errors.append(("fn", doc.family, doc.text[max(0, start - 30) : end + 30]))


def evaluate(docs: list[LabeledDoc], cfg: PiiSettings) -> dict[str, TypeScore]:
    """Per-type precision/recall counts of find_pii over labeled documents."""
    scores = {t: TypeScore() for t in PII_TYPES}
    for doc, predicted in zip(docs, find_pii_batch([d.text for d in docs], cfg), strict=True):
        score_doc(doc, predicted, scores)
    return scores
