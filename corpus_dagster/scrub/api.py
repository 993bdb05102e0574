"""PII scrub entry points: find, scrub and count typed PII in batches of texts, deterministically.

The lead's assets call `scrub_texts` per batch (in worker processes) and `find_pii_batch` for the blocking
"no detector fires on published shards" check. `cfg` is always the resolved `pii` section of the corpus
config (`load_config()["pii"]`): every threshold comes from the schema, none from here.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import phonenumbers
import polars as pl

from corpus_dagster.config import fill_defaults, load_schema
from corpus_dagster.scrub.cards import CARD_REGION, find_cards
from corpus_dagster.scrub.emails import EMAIL_REGIONS, find_emails
from corpus_dagster.scrub.ips import IP_REGIONS, find_ips
from corpus_dagster.scrub.keys import KEY_REGIONS, find_keys
from corpus_dagster.scrub.phones import find_phones, phone_regions
from corpus_dagster.scrub.prescreen import Regions, TextBatch, locate

PII_TYPES = ("emails", "phones", "cards", "ips", "keys")
"""Manifest `pii` keys, in manifest order."""

PLACEHOLDERS = {"emails": "<EMAIL>", "phones": "<PHONE>", "cards": "<CARD>", "ips": "<IP>", "keys": "<KEY>"}

# When two detectors claim overlapping text, the earlier type wins: a key block may hold anything, an
# address may hold digits, a card number may look like a phone number, an IP is never a phone.
PRIORITY = ("keys", "emails", "cards", "ips", "phones")

_PLACEHOLDER_RE = re.compile("|".join(re.escape(p) for p in PLACEHOLDERS.values()))
_TYPE_OF = {p: t for t, p in PLACEHOLDERS.items()}

Span = tuple[str, int, int]
Placed = list[tuple[str, int]]


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


@dataclass(frozen=True)
class _Plan:
    """A resolved `pii` section turned into region patterns (per type) and detector calls."""

    cfg: dict[str, Any]
    enabled: tuple[str, ...]
    patterns: dict[str, dict[str, str]]
    detectors: dict[str, Detector]

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


def _missing_keys(cfg: dict[str, Any], schema: dict[str, Any], prefix: str) -> list[str]:
    """Dotted paths of schema properties absent from cfg (an unresolved section)."""
    out: list[str] = []
    for key, sub in schema.get("properties", {}).items():
        if key not in cfg:
            out.append(prefix + key)
        elif sub.get("type") == "object" and isinstance(cfg[key], dict):
            out.extend(_missing_keys(cfg[key], sub, f"{prefix}{key}."))
    return out


@lru_cache(maxsize=32)
def _plan_from_json(cfg_json: str) -> _Plan:
    """Build (once per process and config) the detector plan of a resolved `pii` section."""
    cfg = json.loads(cfg_json)
    missing = _missing_keys(cfg, pii_schema(), "pii.")
    if missing:
        raise ValueError(
            f"pii config lacks {', '.join(missing)}: pass the resolved section (load_config()['pii'])"
        )
    region = cfg["phones"]["default_region"]
    if cfg["phones"]["enabled"] and region not in phonenumbers.SUPPORTED_REGIONS:
        raise ValueError(f"pii.phones.default_region {region!r} is not a region libphonenumber knows")
    ctx = cfg["context_chars"]
    detectors: dict[str, Detector] = {
        "emails": lambda t, r: find_emails(t, cfg["emails"], r),
        "phones": lambda t, r: find_phones(t, cfg["phones"], ctx, r),
        "cards": lambda t, r: find_cards(t, cfg["cards"], ctx, r),
        "ips": lambda t, r: find_ips(t, cfg["ips"], ctx, r),
        "keys": lambda t, r: find_keys(t, cfg["keys"], r),
    }
    patterns = {
        "emails": EMAIL_REGIONS,
        "phones": phone_regions(cfg["phones"]),
        "cards": {CARD_REGION: phone_regions(cfg["phones"])[CARD_REGION]},
        "ips": IP_REGIONS,
        "keys": KEY_REGIONS,
    }
    enabled = tuple(t for t in PRIORITY if cfg[t]["enabled"])
    return _Plan(cfg, enabled, {t: patterns[t] for t in enabled}, {t: detectors[t] for t in enabled})


def _plan(cfg: dict[str, Any]) -> _Plan:
    """The cached plan of a config dict (keyed by its canonical JSON)."""
    if not isinstance(cfg, dict):
        raise TypeError(f"pii config must be a dict (the resolved `pii` section), got {type(cfg).__name__}")
    return _plan_from_json(json.dumps(cfg, sort_keys=True))


def resolve_overlaps(spans: list[Span]) -> list[Span]:
    """Non-overlapping spans sorted by start: higher-priority types first, then earlier, then longer."""
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


def _regions_by_doc(batch: TextBatch, plan: _Plan) -> tuple[dict[int, _DocRegions], dict[int, str]]:
    """{text index: regions} for the texts with at least one region (in text order), and those texts as
    Python strings."""
    regions, strings = locate(batch, plan.all_patterns)
    by_doc: dict[int, _DocRegions] = {i: _DocRegions() for i in sorted(strings)}
    for name, per_doc in regions.items():
        for i, spans in per_doc.items():
            by_doc[i][name] = spans
    return by_doc, strings


def _detect(text: str, plan: _Plan, regions: dict[str, Regions]) -> list[Span]:
    """Resolved spans of every enabled type that has a region in this text."""
    spans: list[Span] = []
    for t in plan.enabled:
        if any(regions.get(name) for name in plan.patterns[t]):
            spans.extend((t, s, e) for s, e in plan.detectors[t](text, regions))
    return resolve_overlaps(spans) if len(spans) > 1 else spans


def find_pii_batch(texts: list[str] | pl.Series, cfg: dict[str, Any]) -> list[list[Span]]:
    """(type, start, end) of everything the scrub would redact, per text, sorted by start.

    The blocking shard check: every list must be empty for a published shard.
    """
    plan = _plan(cfg)
    batch = TextBatch(texts)
    out: list[list[Span]] = [[] for _ in range(len(batch))]
    by_doc, strings = _regions_by_doc(batch, plan)
    for i, regions in by_doc.items():
        out[i] = _detect(strings[i], plan, regions)
    return out


def find_pii(text: str, cfg: dict[str, Any]) -> list[Span]:
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
        size += len(PLACEHOLDERS[kind])
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


def scrub_text(text: str, cfg: dict[str, Any]) -> tuple[str, dict[str, int]]:
    """Scrub one text; return it with the placeholders inserted per type (see scrub_texts)."""
    outcome = scrub_texts([text], cfg)
    return outcome.text[0], {t: outcome.counts[t][0] for t in PII_TYPES}


# A re-check pass looks only at regions this close to a placeholder the previous pass inserted: text
# farther away did not change, and every detector's context (cue words, obfuscated addresses, candidate
# windows) reaches less far than this.
RECHECK_RADIUS = 512


def _near(regions: dict[str, Regions], placed: Placed) -> dict[str, Regions]:
    """The regions that start within RECHECK_RADIUS of a placeholder position."""
    marks = [pos for _, pos in placed]
    out = _DocRegions()
    for name, spans in regions.items():
        kept = []
        for s, e in spans:
            i = bisect_left(marks, s - RECHECK_RADIUS)
            if i < len(marks) and marks[i] <= e + RECHECK_RADIUS:
                kept.append((s, e))
        out[name] = kept
    return out


def _scrub_pass(
    batch: TextBatch, plan: _Plan, previous: list[Placed] | None = None
) -> dict[int, tuple[str, Placed, list[Span]]]:
    """One detection pass: {text index: (new text, placed placeholders, replaced spans)} for changed texts.

    With `previous` (a re-check pass) only regions near the placeholders placed before are examined.
    """
    out: dict[int, tuple[str, Placed, list[Span]]] = {}
    by_doc, strings = _regions_by_doc(batch, plan)
    for i, regions in by_doc.items():
        if previous is not None:
            regions = _near(regions, previous[i])
        spans = _detect(strings[i], plan, regions)
        if spans:
            out[i] = (*_apply(strings[i], spans), spans)
    return out


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


def scrub_texts(texts: list[str] | pl.Series, cfg: dict[str, Any]) -> ScrubOutcome:
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
    for _ in range(plan.cfg["max_passes"]):
        # Later passes re-check only the texts the previous pass changed, near what it changed.
        results = _scrub_pass(current, plan, previous)
        if not results:
            break
        changed = [todo[k] for k in sorted(results)]
        for k in sorted(results):
            i = todo[k]
            new, placed, spans = results[k]
            earlier = _shift(placed_by_doc.get(i, []), spans)
            placed_by_doc[i] = sorted(earlier + placed, key=lambda p: p[1])
            new_text[i] = new
        previous = [results[k][1] for k in sorted(results)]
        todo = changed
        current = TextBatch([new_text[i] for i in todo])
    counts = {t: [0] * n for t in PII_TYPES}
    redactions = [0] * n
    found: list[tuple[int, str, int]] = []
    seen_kinds: set[str] = set()
    limit = plan.cfg["max_examples"]
    for i in sorted(placed_by_doc):
        placed = placed_by_doc[i]
        redactions[i] = len(placed)
        for kind, pos in placed:
            counts[kind][i] += 1
            if len(found) < limit or kind not in seen_kinds:  # enough to pick from, and each type's first
                found.append((i, kind, pos))
                seen_kinds.add(kind)
    preexisting = dict.fromkeys(PII_TYPES, 0)
    if batch.series.str.contains(_PLACEHOLDER_RE.pattern).any():  # rare: one scan, then per type
        for kind in PII_TYPES:
            preexisting[kind] = int(batch.series.str.count_matches(PLACEHOLDERS[kind], literal=True).sum() or 0)
    examples = _pick_examples(found, new_text, limit, plan.cfg["example_chars"])
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
