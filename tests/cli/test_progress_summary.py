"""The console's one line per step: a clean line names its top reject reasons, the analysis line what it counted."""

from __future__ import annotations

import dagster as dg

from corpus_dagster.cli.progress_display import counts_summary, top_reasons
from corpus_dagster.defs.common import table


def clean_metadata(kept: int, reasons: dict[str, int]) -> dict[str, object]:
    counts = table(["outcome", "documents"], [["kept", kept], *[[f"dropped: {k}", v] for k, v in reasons.items()]])
    return {"kept": dg.MetadataValue.int(kept), "rejected": dg.MetadataValue.int(sum(reasons.values())),
            "counts": counts}


def test_clean_line_names_the_top_reasons_largest_first() -> None:
    meta = clean_metadata(40, {"repetition_dup_5gram": 9, "gopher_alpha_words": 277, "lang": 0, "symbol_soup": 2})
    assert counts_summary(meta) == "40 kept, 288 rejected: gopher_alpha_words 277, repetition_dup_5gram 9, symbol_soup 2"


def test_more_reasons_than_shown_are_counted() -> None:
    meta = clean_metadata(1, {"a": 4, "b": 3, "c": 2, "d": 1, "e": 1})
    assert top_reasons(meta) == "a 4, b 3, c 2, +2 more"


def test_nothing_rejected_names_no_reason() -> None:
    assert counts_summary(clean_metadata(5, {})) == "5 kept, 0 rejected"


def test_analysis_line_says_what_it_counted() -> None:
    meta = {"clean_documents_measured": dg.MetadataValue.int(872), "with_exact_duplicates": dg.MetadataValue.int(141),
            "with_near_duplicates": dg.MetadataValue.int(200)}
    assert counts_summary(meta) == ("872 clean documents measured (before dedup), 141 with exact duplicates, "
                                    "200 with near duplicates")
