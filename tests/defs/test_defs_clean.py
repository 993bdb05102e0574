"""The clean asset's metadata: rows the read face picked, shaped into tables with the declarations' threshold text."""

from corpus_dagster.clean import outputs as clean_outputs
from corpus_dagster.core.config import load_settings
from corpus_dagster.defs import clean as clean_defs


def test_rejected_preview_sorts_the_read_face_examples_by_reason_and_shows_the_threshold_text(monkeypatch):
    examples = [{"id": f"s:{i}", "reason": ["repeated", "gopher_word_count"][i % 2], "value": 0.5 + i, "text": "x y"}
                for i in range(4)]
    monkeypatch.setattr(clean_outputs, "reject_examples", lambda layout, sid, reasons=None: examples)
    clean = load_settings(None).clean
    preview = clean_defs.rejected_preview(None, "s", clean, {"repeated": 2, "gopher_word_count": 2})
    rows = [r.data for r in preview.records]
    assert [(r["reason"], r["id"]) for r in rows] == [("gopher_word_count", "s:1"), ("gopher_word_count", "s:3"),
                                                     ("repeated", "s:0"), ("repeated", "s:2")]
    assert rows[0]["threshold"] == clean_outputs.threshold_text("gopher_word_count", clean)
    assert rows[0]["threshold"] == "value < clean.gopher.min_words = 50"
    assert rows[2]["threshold"] == "value > clean.repeated.max_repeated_char_ratio = 0.5"
