"""How a clean filter is declared, and the one verdict and threshold text every declaration gets.

A filter module declares its filter next to the measurements its rules compare: each reason code names
what its recorded value measures and its limits, each `value <op> section.key` over one named measure.
`Filter.verdict` applies the declared limits in order (first match wins, a null key switches that limit
off), so no rule writes its own comparison; `Threshold` turns the same declaration into the text that
says which configured limit a recorded value broke (the Dagster metadata, the review page and explain).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from corpus_dagster.clean.verdict import Verdict

if TYPE_CHECKING:  # the batch loads the word tokenizer; a reader of thresholds needs none of it
    from corpus_dagster.clean.batch import DocBatch

OPS: dict[str, Callable[[Any, Any], Any]] = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


@dataclass(frozen=True)
class Limit:
    """One threshold test: a document is dropped when `measure <op> section.key` (a null key switches it off)."""

    op: str  # "<", "<=", ">" or ">="
    key: str  # config key (and settings field) in the filter's section
    measure: str = ""  # the measurement compared (a name the filter's Measures answers); for lang: none

    def holds(self, value: Any, threshold: Any) -> Any:
        """Where `value <op> threshold` (elementwise on an array)."""
        return OPS[self.op](value, threshold)


@dataclass(frozen=True)
class Reason:
    """One reason code: what its recorded value measures and the limits that record it."""

    code: str
    value: str  # what the rejects table's `value` holds for this code
    limits: tuple[Limit, ...]  # any one that holds drops the document, tried in this order; its measure is recorded
    # further keys the decision reads, in the order texts show them: a Limit must hold as well (then no one
    # threshold decides), a plain key parametrizes a measurement (word lists, line lengths)
    also: tuple[Limit | str, ...] = ()

    @property
    def requires(self) -> tuple[Limit, ...]:
        """The conditions that must hold beside one of `limits` for the code to be recorded."""
        return tuple(a for a in self.also if isinstance(a, Limit))

    @property
    def single(self) -> bool:
        """True when one threshold decides (no further condition must hold)."""
        return not self.requires

    @property
    def also_keys(self) -> tuple[str, ...]:
        """The keys of `also`, in order."""
        return tuple(a.key if isinstance(a, Limit) else a for a in self.also)

    @property
    def keys(self) -> tuple[str, ...]:
        """Every config key of the section this reason's decision reads."""
        return (*(limit.key for limit in self.limits), *self.also_keys)


class Measures:
    """The measurements a filter's limits compare, by name, for one batch: each is computed when a switched-on
    limit first asks for it (a subclass defines them as cached properties, or overrides `__getitem__`)."""

    def __init__(self, batch: DocBatch, cfg: Any, verdict: Verdict):
        self.batch = batch
        self.cfg = cfg
        self.verdict = verdict  # the verdict so far: a measurement may skip the documents already dropped

    def __getitem__(self, name: str) -> np.ndarray:
        return getattr(self, name)


@dataclass(frozen=True)
class Filter:
    """One filter: config section and manifest key `name`, its reason codes and what they measure."""

    name: str
    reasons: tuple[Reason, ...]  # in the order the verdict tries them
    measures: type[Measures] | None  # None for lang, which is decided from the language ID of the batch
    base: bool  # always in the manifest's `filters` (0 when it dropped nothing)
    enabled: bool  # the schema's default of `enabled`; every filter's `sources` defaults to null (every source)

    @property
    def codes(self) -> tuple[str, ...]:
        """This filter's reason codes, in the order the verdict tries them."""
        return tuple(r.code for r in self.reasons)

    def verdict(self, batch: DocBatch, cfg: Any) -> Verdict:
        """First declared limit that holds per document of `batch` under the filter's section `cfg`."""
        assert self.measures is not None, f"{self.name} is not decided by measurements"
        v = Verdict(len(batch))
        measured = self.measures(batch, cfg, v)
        for reason in self.reasons:
            for limit in reason.limits:
                threshold = getattr(cfg, limit.key)
                if threshold is None or not v.open.any():
                    continue
                value = measured[limit.measure]
                fired = limit.holds(value, threshold)
                for need in reason.requires:
                    fired = fired & need.holds(measured[need.measure], getattr(cfg, need.key))
                v.apply(reason.code, fired, value)
        return v


def rule(code: str, value: str, *limits: tuple[str, str, str], also: tuple[tuple[str, str, str] | str, ...] = ()) -> Reason:
    """A Reason from `(op, key, measure)` triples: the limits, then `also` (a triple there must hold too)."""
    return Reason(code, value, tuple(Limit(*lim) for lim in limits),
                  tuple(a if isinstance(a, str) else Limit(*a) for a in also))


def _show(value: Any, short_list: int = 8) -> str:
    """A config value as the threshold text shows it (a long list by its length)."""
    if isinstance(value, list | tuple):
        if len(value) > short_list:
            return f"[{len(value)} values]"
        return "[" + ", ".join(str(v) for v in value) + "]"
    return "null" if value is None else str(value)


@dataclass(frozen=True)
class Bound:
    """One switched-on limit of a reason with its configured value."""

    op: str
    key: str
    limit: Any  # the configured threshold
    config: str  # its config path, clean.<section>.<key>


@dataclass(frozen=True)
class Threshold:
    """What a reason code's recorded value was compared with under one config, read from its declaration."""

    reason: str
    section: str
    bounds: tuple[Bound, ...]  # the declared limits switched on (non-null), in the order tried
    also: tuple[tuple[str, Any], ...]  # the further keys of the decision and their values, in declared order
    single: bool

    @classmethod
    def of_reason(cls, section: str, reason: Reason, cfg: Any) -> Threshold:
        """The threshold of `reason` (declared by filter `section`) under that section's settings `cfg`."""
        bounds = tuple(Bound(lim.op, lim.key, getattr(cfg, lim.key), f"clean.{section}.{lim.key}")
                       for lim in reason.limits if getattr(cfg, lim.key) is not None)
        return cls(reason.code, section, bounds, tuple((k, getattr(cfg, k)) for k in reason.also_keys), reason.single)

    def broken(self, value: float | None) -> Bound | None:
        """The first switched-on limit `value` breaks (a code with several names the one that fired), else the
        first switched-on limit; None when every limit is switched off."""
        hit = [b for b in self.bounds if value is not None and OPS[b.op](value, b.limit)]
        return (hit or list(self.bounds) or [None])[0]

    def text(self) -> str:
        """The config keys and values the recorded value was compared with, as one line of text."""
        fired = [f"value {b.op} {b.config} = {_show(b.limit)}" for b in self.bounds]
        text = " or ".join(fired) if fired else "threshold switched off (null)"
        also = dict(self.also)
        if self.reason == "lang":
            return (f"dropped when the label is not in clean.lang.allowed = {_show(also['allowed'])} and {text}"
                    " (value = the label's score), or there is no language evidence (und)")
        if self.also:
            text += "; also depends on " + ", ".join(f"clean.{self.section}.{k} = {_show(v)}" for k, v in self.also)
            if not self.single:
                text = "no single threshold: " + text
        return text
