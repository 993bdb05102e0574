"""One report type for every check (shards, manifest, token streams, analysis, release)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

MAX_PROBLEMS = 20  # problems listed in a report; the count is always exact


@dataclass
class CheckReport:
    """The outcome of one check: passed when there are no problems; metadata says what was checked."""

    problems: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    n_problems: int = 0

    @property
    def passed(self) -> bool:
        return self.n_problems == 0

    def fail(self, problem: str) -> None:
        """Record one problem (listed up to MAX_PROBLEMS, always counted)."""
        self.n_problems += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(problem)

    def extend(self, problems: list[str]) -> CheckReport:
        """Record every problem of a list; returns self so checks can end with `return report.extend(...)`."""
        for p in problems:
            self.fail(p)
        return self


def report_of(problems: list[str], **metadata: Any) -> CheckReport:
    """A report from a list of problems and what was checked."""
    return CheckReport(metadata=dict(metadata)).extend(problems)


def sample_units(n: int, k: int, seed: str) -> list[int]:
    """k distinct unit indices out of n, drawn by a generator seeded from `seed` (sorted; all when k >= n).

    The seed is the caller's (a stage key, a run id): a new build checks other units, and a sample can be
    drawn again from its seed to reproduce a failure."""
    return sorted(sample_order(n, k, seed))


def sample_order(n: int, k: int, seed: str) -> list[int]:
    """The draw of `sample_units` in the order it was drawn (0..n-1 when k >= n): every prefix of it is
    itself a uniform sample, so a caller with a cost budget can stop early without biasing what it checks."""
    if k >= n:
        return list(range(n))
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(seed.encode("utf-8")).digest()[:8], "little"))
    return [int(i) for i in rng.choice(n, size=k, replace=False)]
