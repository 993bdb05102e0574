"""Choose the review sample and say what to show beside each chosen document (pure: no files, no dagster).

Sampling: every candidate document belongs to one group (source_id, stratum, reason). Its rank is a 64-bit
mix of the seed, the group and the document number of its id (`<source_id>:<k>`), so the sample depends
only on the seed and on which documents are candidates, never on file order, batch size or worker count.
Each group keeps its `per_stratum` lowest ranks; the kept running set is all that stays in memory while
candidate tables stream in. Output rows are ordered by source, stratum, reason and then id (byte order).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl

from corpus_dagster.clean.outputs import find_reason
from corpus_dagster.core.settings import CleanSettings, DedupSettings, PiiSettings

# Strata in page order: clean drops (reason = clean reason code), dedup drops (exact, near, decontaminated),
# PII redactions (reason = PII type) and documents that pass everything (reason "kept").
STRATA = ("clean", "dedup", "pii", "kept")
KEPT = "kept"
GROUP = ["source_id", "stratum", "reason"]
# What a candidate carries into the sample; texts are read later, for the chosen rows only.
CANDIDATE_SCHEMA: dict[str, Any] = {
    "source_id": pl.String,
    "stratum": pl.String,
    "reason": pl.String,
    "id": pl.String,
    "value": pl.Float64,
    "partner_id": pl.String,
    "jaccard": pl.Float64,
    "detail": pl.String,
    "file": pl.String,  # where the driver reads the document's text back (not an output column)
}
_DOC_NUMBER = r":(\d+)$"
_RANK = "_rank"


def candidates(columns: dict[str, Any], **constant: Any) -> pl.DataFrame:
    """A candidate frame in CANDIDATE_SCHEMA from column data plus constant columns; absent columns null."""
    height = len(next(iter(columns.values()))) if columns else 0
    data = {}
    for name, dtype in CANDIDATE_SCHEMA.items():
        if name in columns:
            data[name] = pl.Series(name, columns[name]).cast(dtype)
        else:
            data[name] = pl.Series(name, [constant.get(name)] * height, dtype=dtype)
    return pl.DataFrame(data)


def group_mix(seed: int, source_id: str, stratum: str, reason: str) -> int:
    """A 64-bit number of (seed, group): different groups rank the same document number differently."""
    body = "\x1f".join([str(seed), source_id, stratum, reason]).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(body, digest_size=8).digest(), "little")


def splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer over uint64 values (wrapping arithmetic): a fixed, well-mixed permutation."""
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def doc_numbers(ids: pl.Series) -> np.ndarray:
    """The document number k of every id `<source_id>:<k>` (ValueError naming an id of another shape)."""
    k = ids.str.extract(_DOC_NUMBER, 1)
    bad = k.is_null()
    if bad.any():
        raise ValueError(f"document id {ids.filter(bad)[0]!r} is not of the form <source_id>:<number>")
    return k.cast(pl.UInt64).to_numpy()


class StratifiedSample:
    """The running sample: up to `per_stratum` lowest-ranked candidates per group, and every group's size."""

    def __init__(self, per_stratum: int, seed: int):
        if per_stratum < 1:
            raise ValueError(f"per_stratum must be at least 1, got {per_stratum}")
        self.per_stratum = per_stratum
        self.seed = seed
        self._best: pl.DataFrame | None = None
        self._available: dict[tuple[str, str, str], int] = {}

    def add(self, frame: pl.DataFrame) -> None:
        """Offer a batch of candidates (CANDIDATE_SCHEMA columns); keeps only the running top per group."""
        if frame.height == 0:
            return
        frame = frame.select([pl.col(c).cast(t) for c, t in CANDIDATE_SCHEMA.items()])
        groups = frame.select(GROUP).unique(maintain_order=True)
        mixes = [group_mix(self.seed, *row) for row in groups.iter_rows()]
        groups = groups.with_columns(pl.Series("_mix", mixes, dtype=pl.UInt64))
        frame = frame.join(groups, on=GROUP, how="left", maintain_order="left")
        rank = splitmix64(doc_numbers(frame["id"]) ^ frame["_mix"].to_numpy())
        frame = frame.drop("_mix").with_columns(pl.Series(_RANK, rank, dtype=pl.UInt64))
        for row in frame.group_by(GROUP).len().iter_rows():
            self._available[row[:3]] = self._available.get(row[:3], 0) + row[3]
        both = frame if self._best is None else pl.concat([self._best, frame])
        self._best = both.sort([*GROUP, _RANK, "id"]).filter(pl.int_range(pl.len()).over(GROUP) < self.per_stratum)

    def available(self) -> dict[tuple[str, str, str], int]:
        """Candidates offered per group (source_id, stratum, reason)."""
        return dict(self._available)

    def result(self, reason_order: Sequence[str] = ()) -> pl.DataFrame:
        """The chosen rows in page order: source, stratum (STRATA order), reason (given order first), id."""
        if self._best is None:
            return pl.DataFrame(schema=CANDIDATE_SCHEMA)
        return self._best.drop(_RANK).sort(
            [pl.col("source_id"), _order("stratum", STRATA), _order("reason", reason_order), pl.col("reason"),
             pl.col("id")]
        )

    def strata(self, reason_order: Sequence[str] = ()) -> list[dict[str, Any]]:
        """One entry per group in page order: source_id, stratum, reason, available, sampled."""
        sampled: dict[tuple[str, str, str], int] = {}
        if self._best is not None:
            sampled = {r[:3]: r[3] for r in self._best.group_by(GROUP).len().iter_rows()}
        rows = [{"source_id": s, "stratum": st, "reason": r, "available": n, "sampled": sampled.get((s, st, r), 0)}
                for (s, st, r), n in self._available.items()]
        return sorted(rows, key=lambda e: (e["source_id"], _index(STRATA, e["stratum"]),
                                           _index(reason_order, e["reason"]), e["reason"]))


def _index(order: Sequence[str], value: str) -> int:
    return order.index(value) if value in order else len(order)


def _order(column: str, order: Sequence[str]) -> pl.Expr:
    """A sort key: a value's position in `order`, values not in it after every listed one."""
    return pl.col(column).replace_strict(list(order), list(range(len(order))), default=len(order),
                                         return_dtype=pl.Int64)


# --- What a reviewer reads beside each document: the threshold the measured value was compared with ----------

_SHORT_LIST = 8  # list values (stop words, menu words) longer than this are shown by their length


def _show(value: Any) -> str:
    if isinstance(value, list | tuple):
        if len(value) > _SHORT_LIST:
            return f"[{len(value)} values]"
        return "[" + ", ".join(str(v) for v in value) + "]"
    return "null" if value is None else str(value)


def clean_threshold(reason: str, clean_cfg: CleanSettings) -> str:
    """The config key(s) and value(s) a clean reason code's measured value was compared with, as text, read
    from the filter's declaration (the recorded value is what its comparisons read)."""
    try:
        flt, declared = find_reason(reason)
    except ValueError:
        return f"no threshold known for reason code {reason!r}"
    section = flt.name
    cfg = getattr(clean_cfg, section)
    fired = [f"value {limit.op} clean.{section}.{limit.key} = {_show(getattr(cfg, limit.key))}"
             for limit in declared.limits if getattr(cfg, limit.key) is not None]
    text = " or ".join(fired) if fired else "threshold switched off (null)"
    if reason == "lang":
        return (f"dropped when the label is not in clean.lang.allowed = {_show(cfg.allowed)} and {text}"
                " (value = the label's score), or there is no language evidence (und)")
    if declared.also:
        extra = ", ".join(f"clean.{section}.{k} = {_show(getattr(cfg, k))}" for k in declared.also)
        text += f"; also depends on {extra}"
        if not declared.single:
            text = "no single threshold: " + text
    return text


def dedup_threshold(reason: str, dedup_cfg: DedupSettings) -> str:
    """What decided a dedup drop, as text."""
    if reason == "near":
        return (f"in a near-duplicate cluster joined by verified pairs at Jaccard >= dedup.jaccard_threshold = "
                f"{dedup_cfg.jaccard_threshold}; the cluster keeps its smallest id (jaccard shown: to it)")
    if reason == "exact":
        return "no threshold: the same clean text (SHA-256) as the kept partner, which has the smaller id"
    if reason == "decontaminated":
        return f"no threshold: shares a dedup.ngram = {dedup_cfg.ngram}-word n-gram with a protected set"
    return f"no threshold known for dedup reason {reason!r}"


def pii_threshold(kind: str, pii_cfg: PiiSettings) -> str:
    """What decides a redaction of one PII type, as text (value = redactions of that type in the document)."""
    return (f"no single threshold: pii.{kind} detector (pattern, validity, cue words within "
            f"pii.context_chars = {pii_cfg.context_chars}); value = redactions of this type")


KEPT_THRESHOLD = "passed every enabled clean rule and dedup; text as published (after the PII scrub)"


# --- Excerpts and PII windows ----------------------------------------------------------------------------

MARK_OPEN, MARK_CLOSE = "\u27e6", "\u27e7"  # ⟦ ⟧ around a placeholder and the text it replaced
_SPACE = re.compile(r"\s+")  # windows are one line: every run of whitespace becomes one space


def excerpt(text: str | None, limit: int) -> str | None:
    """The first `limit` characters of a text (the page shows how much more there is)."""
    return None if text is None else text[:limit]


def align_redactions(clean: str, scrubbed: str, placeholders: dict[str, str]) -> list[tuple[str, int, int, int]] | None:
    """(type, position in scrubbed, start, end in clean) of every placeholder in the scrubbed text.

    The scrub replaces spans by placeholders and changes nothing else, so the literal pieces between
    placeholders occur in the clean text in order; the replaced span is what lies between them. A
    placeholder already present in the clean text maps to itself. Each piece is matched at its first
    occurrence after a non-empty span (a piece that also occurs inside the span before it, such as one
    space between two phone numbers, can shift a window). None when the texts do not align.
    """
    kind_of = {p: k for k, p in placeholders.items()}
    pattern = re.compile("|".join(re.escape(p) for p in sorted(placeholders.values(), key=len, reverse=True)))
    marks = list(pattern.finditer(scrubbed))
    if not marks:
        return []
    head = scrubbed[: marks[0].start()]
    if not clean.startswith(head):
        return None
    out = []
    cursor = len(head)
    for i, m in enumerate(marks):
        last = i + 1 == len(marks)
        piece = scrubbed[m.end(): len(scrubbed) if last else marks[i + 1].start()]
        token = m.group()
        if clean.startswith(token, cursor) and (
            clean.endswith(piece) and len(clean) - len(piece) == cursor + len(token) if last
            else clean.startswith(piece, cursor + len(token))
        ):
            end = cursor + len(token)  # the placeholder was in the clean text already
        elif last:
            end = len(clean) - len(piece)
            if end <= cursor or not clean.endswith(piece):
                return None
        else:
            if not piece:
                return None  # two placeholders side by side: where one replaced span ends is unknown
            end = clean.find(piece, cursor + 1)
            if end < 0:
                return None
        out.append((kind_of[token], m.start(), cursor, end))
        cursor = end + len(piece)
    return out if cursor == len(clean) else None


def _one_line(text: str) -> str:
    return _SPACE.sub(" ", text)


def _window(text: str, start: int, end: int, context: int) -> str:
    """text[start:end] marked, with `context` characters each side, on one line."""
    lo, hi = max(0, start - context), min(len(text), end + context)
    left = ("…" if lo else "") + _one_line(text[lo:start])
    right = _one_line(text[end:hi]) + ("…" if hi < len(text) else "")
    return f"{left}{MARK_OPEN}{_one_line(text[start:end])}{MARK_CLOSE}{right}"


def pii_windows(
    clean: str, scrubbed: str, kind: str, placeholders: dict[str, str], context: int, limit: int
) -> tuple[list[str], list[str] | None, int]:
    """(scrubbed windows, clean windows or None, redactions of `kind`) around each redaction of one type.

    One line per redaction, the placeholder and the replaced text between ⟦ ⟧; windows are added while
    their characters stay within `limit` (at least one). Placeholders already in the clean text are not
    redactions and are left out. Clean windows are None when the texts do not align.
    """
    aligned = align_redactions(clean, scrubbed, placeholders)
    token = placeholders[kind]
    if aligned is None:
        positions = [m.start() for m in re.finditer(re.escape(token), scrubbed)]
        spans = [(p, None, None) for p in positions]
    else:
        spans = [(p, s, e) for k, p, s, e in aligned if k == kind and clean[s:e] != token]
    left: list[str] = []
    right: list[str] = []
    used = 0
    for pos, s, e in spans:
        a = _window(scrubbed, pos, pos + len(token), context)
        b = _window(clean, s, e, context) if s is not None else ""
        if left and used + len(a) + len(b) > limit:
            break
        left.append(a)
        right.append(b)
        used += len(a) + len(b)
    return left, (right if aligned is not None else None), len(spans)
