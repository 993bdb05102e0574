"""Helpers for the dedup and minhash tests: clean document files, planted near-duplicates, reference Jaccard."""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import fields
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from corpus_dagster.clean.driver import CLEAN_DOC_SCHEMA
from corpus_dagster.core import records
from corpus_dagster.core.config import load_config, load_settings
from corpus_dagster.core.layout import Layout
from corpus_dagster.core.records import StageRecord
from corpus_dagster.core.settings import DedupSettings, NearDupSettings
from corpus_dagster.dedup.corpus_dedup import DedupSource
from corpus_dagster.lib.text import words
from corpus_dagster.minhash.signatures import compute_signatures

NEAR_KEYS = {f.name for f in fields(NearDupSettings)}


def dedup_cfg(**overrides) -> DedupSettings:
    """The `dedup` section with overrides (validated by the real config loader)."""
    return load_settings(overrides={"dedup": overrides}).dedup


def configs(**overrides) -> tuple[dict, dict]:
    """The resolved (`dedup`, `near_dup`) sections, each override in the section that holds its key
    (batch_bytes in both); `bands` alone keeps rows = num_perm // bands."""
    near = {k: v for k, v in overrides.items() if k in NEAR_KEYS}
    dedup = {k: v for k, v in overrides.items() if k not in NEAR_KEYS or k == "batch_bytes"}
    if "bands" in near and "rows" not in near:
        near["rows"] = near.get("num_perm", 128) // near["bands"]
    resolved = load_config(overrides={"dedup": dedup, "near_dup": near})
    return resolved["dedup"], resolved["near_dup"]


def sections(**overrides) -> tuple[DedupSettings, NearDupSettings]:
    """`configs` as the typed sections the dedup logic takes."""
    dedup, near = configs(**overrides)
    settings = load_settings(overrides={"dedup": dedup, "near_dup": near})
    return settings.dedup, settings.near_dup


def write_clean_docs(
    path: Path, source_id: str, texts: list[str], row_group_size: int = 64, first_k: int = 0
) -> Path:
    """A clean document file (CLEAN_DOC_SCHEMA) holding `texts` as <source_id>:<k>."""
    n = len(texts)
    table = pa.table(
        {
            "id": [f"{source_id}:{first_k + k}" for k in range(n)],
            "text": texts,
            "source_id": [source_id] * n,
            "url": [f"https://example.org/{source_id}/{k}" for k in range(n)],
            "license_spdx": ["CC-BY-4.0"] * n,
            "lang": ["en"] * n,
            "n_chars": pa.array([len(t) for t in texts], pa.int32()),
            "sha256": pa.array([hashlib.sha256(t.encode()).digest() for t in texts], pa.binary(32)),
            "repairs": pa.array([[] for _ in texts], pa.list_(pa.string())),
            "lang_score": pa.array([0.99] * n, pa.float32()),
            "lang_sample_chars": pa.array([min(len(t), 1000) for t in texts], pa.int32()),
            "lang_label": ["en"] * n,
        },
        schema=CLEAN_DOC_SCHEMA,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def make_sources(
    root: Path, corpus: dict[str, list[str]], near: NearDupSettings | dict | None = None, workers: int = 1,
    files_per_source: int = 1
):
    """Write clean files and signature files (`near`: the near_dup section, None: its defaults) for
    {source_id: texts}; return the DedupSource list."""
    sources = []
    for sid, texts in corpus.items():
        files, step = [], max(1, -(-len(texts) // files_per_source))
        for i, start in enumerate(range(0, len(texts), step)):
            files.append(
                write_clean_docs(
                    root / "clean" / sid / f"docs-{i:05d}.parquet",
                    sid,
                    texts[start : start + step],
                    first_k=start,
                )
            )
        sig = root / "sig" / f"{sid}.parquet"
        typed = near if isinstance(near, NearDupSettings) else NearDupSettings.from_dict(near or {})
        compute_signatures(files, sig, typed, workers=workers)
        sources.append(DedupSource(sid, files, sig))
    return sources


VOCAB = [
    f"{a}{b}{c}" for a in "bcdfghklmnprstvz" for b in "aeiou" for c in ["", "n", "r", "s", "th", "x", "ll"]
]


def random_doc(rng: random.Random, n_words: int) -> str:
    """A document of random words from a 560-word vocabulary (unrelated documents share few 5-grams)."""
    return " ".join(rng.choice(VOCAB) for _ in range(n_words))


def mutate(rng: random.Random, text: str, n_edits: int) -> str:
    """Replace n_edits distinct random word positions with fresh words (never the same word)."""
    ws = text.split(" ")
    for pos in rng.sample(range(len(ws)), n_edits):
        ws[pos] = "q" + rng.choice(VOCAB)  # "q..." never occurs in a base document
    return " ".join(ws)


def shingle_set(text: str, k: int = 5) -> set[tuple[str, ...]]:
    """Reference shingle set of the normalized words (plain Python)."""
    ws = words(text)
    return {tuple(ws[i : i + k]) for i in range(len(ws) - k + 1)}


def true_jaccard(x: str, y: str, k: int = 5) -> float:
    """Reference Jaccard of two texts' shingle sets."""
    a, b = shingle_set(x, k), shingle_set(y, k)
    return len(a & b) / len(a | b) if a | b else 0.0


def plant_clean(layout: Layout, source_id: str, texts: list[str]) -> None:
    """A completed clean stage for one source: its document files (two, small row groups) and record."""
    folder = layout.stage("clean", source_id)
    key = hashlib.sha256(json.dumps(texts).encode()).hexdigest()[:16]
    half = len(texts) // 2
    names = [f"{key}/docs-00000.parquet", f"{key}/docs-00001.parquet"]
    write_clean_docs(folder / names[0], source_id, texts[:half], row_group_size=16)
    write_clean_docs(folder / names[1], source_id, texts[half:], row_group_size=16, first_k=half)
    records.commit(folder, StageRecord(
        stage="clean", key=key, code_version="test", inputs={}, settings={},
        outputs=records.describe_outputs(folder, names), files={"docs": names}, stats={"kept": len(texts)},
    ))
