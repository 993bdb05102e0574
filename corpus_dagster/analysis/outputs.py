"""The files an analysis publishes in its out dir, how their names are cut, and how its tables are written.

One place for the names, so the steps that write them, the runner that checks them and the graph's
verification that reads them never spell a file twice. `CODE_VERSION` is the version of the code that
writes these bytes: it enters the run key and the stage key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from corpus_dagster.core.atomic import atomic_path
from corpus_dagster.core.parquet import ParquetSettings, write_parquet
from corpus_dagster.core.settings import AnalysisSettings

CODE_VERSION = "5"  # raised whenever the same inputs and settings would give other output bytes
# Analysis tables: written whole, one row group unless a size is given (fixed settings, same bytes every run).
ANALYSIS_PARQUET = ParquetSettings(compression_level=3, use_dictionary=False, write_statistics=False)
GROUPS_FILE = "duplicate_groups.jsonl"
VIEWS_FILE = "duplication_views"
RATES_FILE = "duplicate_rate_by_length.parquet"
LENGTHS_FILE = "token_lengths"
HISTOGRAM_FILE = "token_length_histogram.parquet"
DOC_COUNTS_FILE = "doc_token_counts.parquet"
FIGURES_DIR = "figures"
REPORT_FILE = "REPORT.md"
NEAR_DUP_DIR = "near_dup"  # the duplicate tables as a dataset folder with its own card (README.md)


def tag(threshold: float) -> str:
    """File tag of a threshold: 0.7 -> t70, 0.85 -> t85."""
    return f"t{round(threshold * 100):02d}"


def duplicates_dir_name(cfg: AnalysisSettings) -> str:
    """doc_duplicates_t70 for pair_threshold 0.7."""
    return f"doc_duplicates_{tag(cfg.pair_threshold)}"


def cluster_file(threshold: float) -> str:
    """near_dup_clusters_t90.jsonl for 0.9."""
    return f"near_dup_clusters_{tag(threshold)}.jsonl"


def write_json(path: Path, value: Any) -> None:
    """Indented, key-sorted JSON, written atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


def write_table(table: pa.Table, path: Path, row_group: int | None = None) -> None:
    """An analysis table under ANALYSIS_PARQUET, in row groups of `row_group` rows (default: one)."""
    n = table.num_rows
    step = row_group or max(n, 1)
    write_parquet(table, path, ANALYSIS_PARQUET, row_groups=[*range(0, n, step), n] if n else [0, 0])


def save_npy(path: Path, array: np.ndarray) -> None:
    """An intermediate array, written atomically."""
    with atomic_path(path) as tmp:
        np.save(tmp, array)
