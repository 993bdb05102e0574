"""PII scrub entry points: find, scrub and count typed PII in batches of texts, deterministically.

The scrub driver calls `scrub_texts` per file (in worker processes); the publish checks call `find_pii_batch`
for the blocking "no detector fires on published shards" check, and the evaluation scores it against labels. `cfg` is always the `pii` section of the corpus
settings (`Settings.pii`): every threshold comes from the schema, none from here.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import numpy as np
import phonenumbers
import polars as pl

from corpus_dagster.core.config import fill_defaults, load_schema
from corpus_dagster.core.settings import PiiSettings
from corpus_dagster.scrub import recheck
from corpus_dagster.scrub.cards import CARD_REGION, find_cards
from corpus_dagster.scrub.carry import carry
from corpus_dagster.scrub.emails import (
    EMAIL_ANCHORED,
    EMAIL_REGION_FILTERS,
    EMAIL_REGIONS,
    EMAIL_SPARSE,
    find_emails,
)
from corpus_dagster.scrub.ips import IP_ANCHORED, IP_REGIONS, IP_SPARSE, find_ips
from corpus_dagster.scrub.keys import KEY_REGION_FILTERS, KEY_REGIONS, KEY_SPARSE, find_keys
from corpus_dagster.scrub.phones import PHONE_ANCHORED, WINDOWS, find_phones, phone_regions, phone_windows
from corpus_dagster.scrub.prescreen import Anchored, TextBatch, locate
from corpus_dagster.scrub.recheck import Placed
from corpus_dagster.scrub.spans import Matches, RegionFilter, Regions

PII_TYPES = ("emails", "phones", "cards", "ips", "keys")
"""Manifest `pii` keys, in manifest order."""

PLACEHOLDERS = {"emails": "<EMAIL>", "phones": "<PHONE>", "cards": "<CARD>", "ips": "<IP>", "keys": "<KEY>"}

# When two detectors claim overlapping text, the earlier type wins: a key block may hold anything, an
# address may hold digits, a card number may look like a phone number, an IP is never a phone.
PRIORITY = ("keys", "emails", "cards", "ips", "phones")

_WIDTHS = {t: len(p) for t, p in PLACEHOLDERS.items()}
_PLACEHOLDER_RE = re.compile("|".join(re.escape(p) for p in PLACEHOLDERS.values()))
_TYPE_OF = {p: t for t, p in PLACEHOLDERS.items()}

Span = tuple[str, int, int]


@dataclass
class ScrubOutcome:
    """What scrubbing a batch did; lists are aligned with the input texts."""

    text: list[str] | pl.Series
    counts: dict[str, list[int]]
    redactions: list[int]
    examples: list[tuple[int, str, str]]
    preexisting: dict[str, int] = field(default_factory=dict)
    """Placeholder strings already present in the input (not inserted by this scrub), per type."""


Detector = Callable[[str, dict[str, Regions]], list[tuple[int, int]]]
Derived = Callable[[dict[str, Matches], np.ndarray], Matches | None]


@dataclass(frozen=True)
class _Plan:
    """A resolved `pii` section turned into region patterns (per type) and detector calls."""

    cfg: PiiSettings
    enabled: tuple[str, ...]
    patterns: dict[str, dict[str, str]]
    detectors: dict[str, Detector]
    sealed: bool = False
    """Whether no region pattern can match a placeholder character (see _placeholder_sealed): then a text
    needs a re-check only where a region survives near what a pass replaced (_needs_recheck)."""
    users: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """{region pattern name: the enabled types that read it}, in PRIORITY order."""
    filters: dict[str, RegionFilter] = field(default_factory=dict)
    """{region pattern name: which of its matches its one detector may look at}: a byte test on the text
    around each match that drops only matches the detector would pass over whatever else the text holds.
    Detection only: the re-check decision (recheck.needs_recheck) reads every match."""
    anchored: dict[str, Anchored] = field(default_factory=dict)
    """{region pattern name: how to find its matches from one anchor byte} (prescreen.Anchored)."""
    sparse: frozenset[str] = frozenset()
    """Region patterns with few matches in most text (prescreen.locate)."""
    derived: dict[str, Derived] = field(default_factory=dict)
    """{name: regions computed for the whole batch from the regions a pass looks at} (text lengths given),
    handed to the detectors under that name: phones.phone_windows."""

    def locate(self, batch: TextBatch, names: set[str] | None = None) -> dict[str, Matches]:
        """Every region match of the enabled types in the batch (of the patterns `names` only, if given)."""
        patterns = {n: p for n, p in self.all_patterns.items() if names is None or n in names}
        return locate(batch, patterns, self.filters, self.anchored, self.sparse)

    @property
    def all_patterns(self) -> dict[str, str]:
        """Every region pattern of the enabled types, by pattern name."""
        return {name: p for t in self.enabled for name, p in self.patterns[t].items()}


def pii_schema() -> dict[str, Any]:
    """The `pii` section of schemas/corpus-config.schema.json."""
    return load_schema("corpus-config.schema.json")["properties"]["pii"]


def default_pii_config() -> dict[str, Any]:
    """The `pii` section with every schema default filled in (what an empty corpus config resolves to)."""
    return fill_defaults({}, pii_schema())


@lru_cache(maxsize=32)
def _plan_of(cfg: PiiSettings) -> _Plan:
    """Build (once per process and `pii` section: a frozen section is its own cache key) the detector plan."""
    region = cfg.phones.default_region
    if cfg.phones.enabled and region not in phonenumbers.SUPPORTED_REGIONS:
        raise ValueError(f"pii.phones.default_region {region!r} is not a region libphonenumber knows")
    ctx = cfg.context_chars
    detectors: dict[str, Detector] = {
        "emails": lambda t, r: find_emails(t, cfg.emails, r),
        "phones": lambda t, r: find_phones(t, cfg.phones, ctx, r),
        "cards": lambda t, r: find_cards(t, cfg.cards, ctx, r),
        "ips": lambda t, r: find_ips(t, cfg.ips, ctx, r),
        "keys": lambda t, r: find_keys(t, cfg.keys, r),
    }
    patterns = {
        "emails": EMAIL_REGIONS,
        "phones": phone_regions(cfg.phones),
        "cards": {CARD_REGION: phone_regions(cfg.phones)[CARD_REGION]},
        "ips": IP_REGIONS,
        "keys": KEY_REGIONS,
    }
    enabled = tuple(t for t in PRIORITY if getattr(cfg, t).enabled)
    used = {t: patterns[t] for t in enabled}
    sealed = all(_placeholder_sealed(p) for per_type in used.values() for p in per_type.values())
    users = {name: tuple(t for t in enabled if name in used[t]) for t in enabled for name in used[t]}
    filters = {name: f for t, per_type in (("emails", EMAIL_REGION_FILTERS), ("keys", KEY_REGION_FILTERS))
               if t in enabled for name, f in per_type.items()}
    shared = [name for name in filters if len(users[name]) != 1]
    if shared:  # a filter speaks for one detector: a pattern read by two would need both to agree
        raise RuntimeError(f"region filters on shared patterns {shared}")
    anchored = {name: a for name, a in {**EMAIL_ANCHORED, **IP_ANCHORED, **PHONE_ANCHORED}.items() if name in users}
    sparse = (EMAIL_SPARSE | IP_SPARSE | KEY_SPARSE) & set(users)
    derived: dict[str, Derived] = {}
    if "phones" in enabled:
        derived[WINDOWS] = lambda found, sizes: phone_windows(found, sizes, cfg.phones)
    return _Plan(cfg, enabled, used, {t: detectors[t] for t in enabled}, sealed, users, filters, anchored,
                 frozenset(sparse), derived)


_SEAL = frozenset(map(ord, "<>"))


def _consumes_seal(items: Any) -> bool:
    """Whether a parsed regex (re._parser items) has an element that can match `<` or `>`."""
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            if av in _SEAL:
                return True
        elif name == "IN":
            for sub_op, sub_av in av:
                sub = str(sub_op)
                if sub == "NEGATE" or (sub == "LITERAL" and sub_av in _SEAL):
                    return True
                if sub == "RANGE" and any(sub_av[0] <= c <= sub_av[1] for c in _SEAL):
                    return True
                if sub == "CATEGORY" and "NOT" in str(sub_av):
                    return True
        elif name in ("SUBPATTERN", "MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT", "ATOMIC_GROUP", "BRANCH"):
            parts = av[1] if name == "BRANCH" else [av[-1]]
            if any(_consumes_seal(part) for part in parts):
                return True
        else:  # ANY, NOT_LITERAL, CATEGORY outside a class, anchors, word boundaries, look-arounds: be safe
            return True
    return False


def _placeholder_sealed(pattern: str) -> bool:
    """True when no match of the region pattern can include `<` or `>` or lie inside a placeholder's letters.

    Then a placeholder splits a text into pieces that the region pass scans exactly as it did before the
    replacement, except where an old region ran into replaced text (see _needs_recheck). Read with Python's
    regex parser (the region patterns use the syntax both engines share); anything it cannot read, or any
    element that might match `<` or `>` (negated classes, `.`, ranges over them), says no.
    """
    try:
        if _consumes_seal(re._parser.parse(pattern)):  # type: ignore[attr-defined]
            return False
    except Exception:  # noqa: BLE001 - unreadable here: not provably sealed
        return False
    return not any(re.search(pattern, p) for p in PLACEHOLDERS.values())


def _plan(cfg: PiiSettings) -> _Plan:
    """The cached plan of a `pii` section."""
    if not isinstance(cfg, PiiSettings):
        raise TypeError(f"pii config must be PiiSettings (Settings.pii), got {type(cfg).__name__}")
    return _plan_of(cfg)


def resolve_overlaps(spans: list[Span]) -> list[Span]:
    """Non-overlapping spans sorted by start: higher-priority types first, then earlier, then longer."""
    if len({kind for kind, _, _ in spans}) == 1 and all(s < e for _, s, e in spans):
        # one type (a changelog's addresses): in start order, a span stays if it starts after the last kept
        # one ends; the same spans the general walk below keeps, without its list inserts
        out: list[Span] = []
        last = -1
        for span in sorted(spans, key=lambda s: (s[1], s[1] - s[2])):
            if span[1] >= last:
                out.append(span)
                last = span[2]
        return out
    rank = {t: i for i, t in enumerate(PRIORITY)}
    starts: list[int] = []
    kept: list[Span] = []
    for span in sorted(spans, key=lambda s: (rank[s[0]], s[1], s[1] - s[2])):
        _, start, end = span
        i = bisect_left(starts, start)
        if i > 0 and kept[i - 1][2] > start:
            continue
        if i < len(kept) and kept[i][1] < end:
            continue
        starts.insert(i, start)
        kept.insert(i, span)
    return kept


class _DocRegions(dict):
    """{pattern name: spans} of one text, holding only the names that matched; others read as []."""

    def __missing__(self, name: str) -> Regions:
        return []


def _regions_by_doc(located: dict[str, Matches], plan: _Plan, batch: TextBatch,
                    previous: list[Placed] | None = None) -> dict[int, _DocRegions]:
    """{text index: regions} for the texts with at least one region the detectors look at, in text order.

    With `previous` (a re-check pass: the placeholders the last pass inserted, per text) only regions within
    RECHECK_RADIUS of one of them count.
    """
    by_doc: dict[int, _DocRegions] = {}
    marks = recheck.mark_keys(previous) if previous is not None else None
    looked: dict[str, Matches] = {}
    for name, found in located.items():
        keep = recheck.near_mask(found, marks) if marks is not None else None
        if found.look is not None:
            keep = found.look if keep is None else keep & found.look
        looked[name] = found if keep is None else found.take(keep)
    if plan.derived and any(len(m) for m in looked.values()):
        sizes = batch.sizes()
        for name, derive in plan.derived.items():
            extra = derive(looked, sizes)
            if extra is not None:
                looked[name] = extra
    for name, found in looked.items():
        for i, spans in found.by_doc().items():
            by_doc.setdefault(i, _DocRegions())[name] = spans
    return dict(sorted(by_doc.items()))


def _detect(text: str, plan: _Plan, regions: dict[str, Regions]) -> list[Span]:
    """Resolved spans of every enabled type that has a region in this text."""
    spans: list[Span] = []
    flagged = {t for name, found in regions.items() if found for t in plan.users.get(name, ())}
    for t in plan.enabled:
        if t in flagged:
            spans.extend((t, s, e) for s, e in plan.detectors[t](text, regions))
    return resolve_overlaps(spans) if len(spans) > 1 else spans


def find_pii_batch(texts: list[str] | pl.Series, cfg: PiiSettings) -> list[list[Span]]:
    """(type, start, end) of everything the scrub would redact, per text, sorted by start.

    The blocking shard check: every list must be empty for a published shard.
    """
    plan = _plan(cfg)
    batch = TextBatch(texts)
    out: list[list[Span]] = [[] for _ in range(len(batch))]
    by_doc = _regions_by_doc(plan.locate(batch), plan, batch)
    strings = batch.originals(list(by_doc))
    for i, regions in by_doc.items():
        out[i] = _detect(strings[i], plan, regions)
    return out


def find_pii(text: str, cfg: PiiSettings) -> list[Span]:
    """(type, start, end) of everything the scrub would redact in text, sorted by start."""
    if not isinstance(text, str):
        raise TypeError(f"text is {type(text).__name__}, expected str")
    return find_pii_batch([text], cfg)[0]


def _apply(text: str, spans: list[Span]) -> tuple[str, list[tuple[str, int]]]:
    """Replace spans (sorted, disjoint) by placeholders; return the new text and (type, position) of each."""
    parts: list[str] = []
    placed: list[tuple[str, int]] = []
    pos = 0
    size = 0
    for kind, start, end in spans:
        parts.append(text[pos:start])
        size += start - pos
        placed.append((kind, size))
        parts.append(PLACEHOLDERS[kind])
        size += _WIDTHS[kind]
        pos = end
    parts.append(text[pos:])
    return "".join(parts), placed


def _shift(placed: Placed, spans: list[Span]) -> Placed:
    """Positions of earlier placeholders after a later pass replaced `spans` (none of which overlap them)."""
    out = []
    for kind, pos in placed:
        delta = sum(len(PLACEHOLDERS[k]) - (e - s) for k, s, e in spans if e <= pos)
        out.append((kind, pos + delta))
    return out


def scrub_text(text: str, cfg: PiiSettings) -> tuple[str, dict[str, int]]:
    """Scrub one text; return it with the placeholders inserted per type (see scrub_texts)."""
    outcome = scrub_texts([text], cfg)
    return outcome.text[0], {t: outcome.counts[t][0] for t in PII_TYPES}


def _scrub_pass(
    batch: TextBatch, plan: _Plan, previous: list[Placed] | None = None, located: dict[str, Matches] | None = None
) -> tuple[dict[int, tuple[str, Placed, list[Span]]], dict[str, Matches]]:
    """One detection pass: {text index: (new text, placed placeholders, replaced spans)} for changed texts,
    and every region match of the batch's texts before this pass (`located`, when already known).

    With `previous` (a re-check pass) only regions near the placeholders placed before are examined.
    """
    out: dict[int, tuple[str, Placed, list[Span]]] = {}
    if located is None:
        located = plan.locate(batch)
    by_doc = _regions_by_doc(located, plan, batch, previous)
    strings = batch.originals(list(by_doc))
    for i, regions in by_doc.items():
        spans = _detect(strings[i], plan, regions)
        if spans:
            out[i] = (*_apply(strings[i], spans), spans)
    return out, located


def _needs_recheck(located: dict[str, Matches], replaced: recheck.Replaced) -> set[int]:
    """The changed texts a re-check pass could find anything in (recheck.needs_recheck; sealed plans only)."""
    return recheck.needs_recheck(located, replaced)


def _example(text: str, kind: str, pos: int, width: int) -> str:
    """The placeholder at pos with `width` characters of scrubbed context each side, on one line."""
    lo = max(0, pos - width)
    hi = min(len(text), pos + len(PLACEHOLDERS[kind]) + width)
    snippet = " ".join(text[lo:hi].split())
    return ("…" if lo else "") + snippet + ("…" if hi < len(text) else "")


def _pick_examples(
    found: list[tuple[int, str, int]], texts: dict[int, str], limit: int, width: int
) -> list[tuple[int, str, str]]:
    """Up to `limit` examples: the first placeholder of each type (type order), then the next in doc order."""
    chosen: list[tuple[int, str, int]] = []
    for kind in PII_TYPES:
        first = next((f for f in found if f[1] == kind), None)
        if first is not None:
            chosen.append(first)
    chosen = chosen[:limit]
    if len(chosen) < limit:
        taken = set(chosen)
        chosen += [f for f in found if f not in taken][: limit - len(chosen)]
    chosen.sort(key=lambda f: (f[0], f[2]))
    return [(i, kind, _example(texts[i], kind, pos, width)) for i, kind, pos in chosen]


def count_placeholders(text: str) -> dict[str, int]:
    """Placeholders of each type present in text (for checking manifest counts against shards)."""
    counts = dict.fromkeys(PII_TYPES, 0)
    for m in _PLACEHOLDER_RE.finditer(text):
        counts[_TYPE_OF[m.group()]] += 1
    return counts


def scrub_texts(texts: list[str] | pl.Series, cfg: PiiSettings) -> ScrubOutcome:
    """Replace every detected PII span with its typed placeholder; counts per type and document.

    Deterministic (no randomness, no dependence on batch boundaries except which examples are shown) and
    idempotent: scrubbing the output again changes nothing, and find_pii on the output is empty. A polars
    String Series in gives a Series out (`ScrubOutcome.text`), sparing a copy of every text each way.
    """
    plan = _plan(cfg)
    batch = TextBatch(texts)
    n = len(batch)
    new_text: dict[int, str] = {}
    placed_by_doc: dict[int, list[tuple[str, int]]] = {}
    todo = list(range(n))
    current = batch
    previous: list[Placed] | None = None
    located: dict[str, Matches] | None = None
    for pass_no in range(1, plan.cfg.max_passes + 1):
        # Later passes re-check only the texts the previous pass changed, near what it changed.
        results, matches = _scrub_pass(current, plan, previous, located)
        if not results:
            break
        for k in sorted(results):
            i = todo[k]
            new, placed, spans = results[k]
            earlier = _shift(placed_by_doc.get(i, []), spans)
            placed_by_doc[i] = sorted(earlier + placed, key=lambda p: p[1])
            new_text[i] = new
        if pass_no == plan.cfg.max_passes:
            break
        # Only changed texts where something is left near a new placeholder can change again.
        replaced = recheck.Replaced.of({k: results[k][2] for k in results}, _WIDTHS)
        again = sorted(_needs_recheck(matches, replaced) if plan.sealed else results)
        if not again:
            break
        previous = [results[k][1] for k in again]
        todo = [todo[k] for k in again]
        current = TextBatch([new_text[i] for i in todo])
        # Sealed patterns: the new texts' regions follow from the old ones (carry.py), no second scan.
        located = carry(matches, replaced, again, current, plan.locate) if plan.sealed else None
    counts = {t: [0] * n for t in PII_TYPES}
    redactions = [0] * n
    found: list[tuple[int, str, int]] = []
    seen_kinds: set[str] = set()
    limit = plan.cfg.max_examples
    for i in sorted(placed_by_doc):
        placed = placed_by_doc[i]
        redactions[i] = len(placed)
        for kind, pos in placed:
            counts[kind][i] += 1
            if len(found) < limit or kind not in seen_kinds:  # enough to pick from, and each type's first
                found.append((i, kind, pos))
                seen_kinds.add(kind)
    preexisting = dict.fromkeys(PII_TYPES, 0)
    holding = batch.series.str.contains(_PLACEHOLDER_RE.pattern)
    if holding.any():  # rare: one scan of the batch, then per type over the texts that hold one
        held = batch.series.filter(holding)
        for kind in PII_TYPES:
            preexisting[kind] = int(held.str.count_matches(PLACEHOLDERS[kind], literal=True).sum() or 0)
    examples = _pick_examples(found, new_text, limit, plan.cfg.example_chars)
    changed_idx = sorted(new_text)
    if isinstance(texts, pl.Series):
        out: list[str] | pl.Series = texts.clone()
        if changed_idx:
            out = out.scatter(changed_idx, pl.Series([new_text[i] for i in changed_idx], dtype=pl.String))
    else:
        out = list(texts)
        for i in changed_idx:
            out[i] = new_text[i]
    return ScrubOutcome(out, counts, redactions, examples, preexisting)
