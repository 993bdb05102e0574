"""Config keys that moved: read where they used to be, written where they live now, with a message.

Dedup and the analysis once had a near-duplicate engine each, with their own MinHash and banding keys;
they now share one graph configured in `near_dup`. A config written for the old layout keeps working:
each moved key is taken to its new place before validation (so the resolved config, its hash and every
stage key are those of the new layout), and a FutureWarning says what to write instead. Two old keys
that now mean one setting must agree; a moved key that also appears at its new place must agree with it.
"""

from __future__ import annotations

import copy
import warnings
from typing import Any

from corpus_dagster.core.errors import ConfigError

# (old section, old key) -> key in near_dup
MOVED = {
    ("dedup", "num_perm"): "num_perm",
    ("dedup", "seed"): "seed",
    ("dedup", "scheme"): "scheme",
    ("dedup", "shingle_size"): "shingle_size",
    ("dedup", "verify_batch_shingles"): "verify_batch_shingles",
    ("dedup", "verify_chunk_pairs"): "verify_chunk_pairs",
    ("dedup", "analysis_threshold"): "threshold",  # the lowest Jaccard of pairs.parquet
    ("analysis", "seed"): "seed",
    ("analysis", "scheme"): "scheme",
    ("analysis", "shingle_size"): "shingle_size",
    ("analysis", "verify_batch_shingles"): "verify_batch_shingles",
    ("analysis", "bands"): "bands",
    ("analysis", "rows"): "rows",
}
SECTION = "near_dup"


class DeprecatedKeyWarning(FutureWarning):
    """A config key that moved; the message names its new place."""


def migrate(raw: dict[str, Any], source: str) -> dict[str, Any]:
    """`raw` with every moved key at its new place (a copy when anything moved); warns once per key."""
    if not any(isinstance(raw.get(sec), dict) and key in raw[sec] for sec, key in (*MOVED, ("dedup", "bands"))):
        return raw
    out = copy.deepcopy(raw)
    target = out.setdefault(SECTION, {})
    if not isinstance(target, dict):
        return out  # the schema reports the wrong type
    given_new = dict(target)
    came_from: dict[str, str] = {}
    errors: list[str] = []
    where: list[tuple[str, ...]] = []
    notes: list[str] = []

    def put(key: str, value: Any, old: str, note: str | None = None) -> None:
        if key in given_new and given_new[key] != value:
            errors.append(f"$.{old}: moved to {SECTION}.{key}, which the config also sets to {given_new[key]!r}, "
                          f"not {value!r}; keep only {SECTION}.{key}")
            where.append(tuple(old.split(".")))
        elif key in came_from and target[key] != value:
            errors.append(f"$.{old}: {value!r} disagrees with {came_from[key]} ({target[key]!r}); dedup and the "
                          f"analysis now share one near-duplicate graph: set {SECTION}.{key} once")
            where.append(tuple(old.split(".")))
        else:
            target[key] = value
            came_from.setdefault(key, old)
            notes.append(note or f"{old} is now {SECTION}.{key}")

    for (sec, key), new in MOVED.items():
        section = out.get(sec)
        if isinstance(section, dict) and key in section:
            put(new, section.pop(key), f"{sec}.{key}")
    dedup = out.get("dedup")
    if isinstance(dedup, dict) and "bands" in dedup:  # rows were num_perm / bands
        bands = dedup.pop("bands")
        num_perm = target.get("num_perm", 128)
        if isinstance(bands, int) and bands > 0 and isinstance(num_perm, int):
            note = f"dedup.bands is now {SECTION}.bands, with {SECTION}.rows = num_perm / bands ({num_perm // bands})"
            put("bands", bands, "dedup.bands", note)
            put("rows", num_perm // bands, "dedup.bands", note)
    if errors:
        raise ConfigError(source, errors, where)
    for note in dict.fromkeys(notes):
        warnings.warn(f"{source}: {note}", DeprecatedKeyWarning, stacklevel=3)
    return out
