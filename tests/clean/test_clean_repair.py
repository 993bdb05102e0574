"""Text repair: what is removed, what is recorded, and that ftfy only sees flagged documents."""

from __future__ import annotations

import unicodedata

import ftfy
import pytest

from corpus_dagster.clean import repair
from corpus_dagster.clean.repair import REPAIR_KINDS, repair_texts
from corpus_dagster.core.config import load_settings
from corpus_dagster.core.settings import CleanRepairSettings

ON = load_settings(None, {"clean": {"repair": {"mojibake": True}}}).clean.repair


def fix(texts: list[str], cfg: CleanRepairSettings = ON) -> tuple[list[str], list[list[str]]]:
    out, done, series = repair_texts(texts, cfg)
    assert series.to_list() == out
    return out, done


def test_nul_removed_and_recorded() -> None:
    assert fix(["ab\x00cd\x00"]) == (["abcd"], [["nul"]])


def test_c0_controls_removed_except_tab_newline() -> None:
    assert fix(["a\x07b\x1bc\td\ne\x7f"]) == (["abc\td\ne\x7f"], [["control"]])  # DEL is no C0 control


def test_repairs_listed_in_fixed_order() -> None:
    broken = "It’s here".encode().decode("cp1252")
    assert fix(["\x1b" + broken + "\x00"])[1] == [["nul", "control", "mojibake"]]
    assert REPAIR_KINDS == ("nul", "control", "mojibake")


def test_newlines_normalized_without_a_repair_record() -> None:
    assert fix(["a\r\nb\rc\n"]) == (["a\nb\nc\n"], [[]])


def test_mojibake_fixture_repaired_by_ftfy() -> None:
    good = "It’s ‘quoted’ — café déjà vu, naïve Ångström."
    broken = good.encode("utf-8").decode("cp1252")
    assert "â€™" in broken
    assert fix([broken]) == ([good], [["mojibake"]])


def test_mojibake_switch() -> None:
    broken = "It’s fine".encode().decode("cp1252")
    assert fix([broken], load_settings(None, {"clean": {"repair": {"mojibake": False}}}).clean.repair) == ([broken], [[]])


def test_correct_text_untouched_and_ftfy_not_called(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*args: object, **kwargs: object) -> str:
        raise AssertionError("ftfy called on a document the pre-screen should pass")

    monkeypatch.setattr(ftfy, "fix_text", boom)
    texts = ["plain ascii", "Ångström café déjà vu — naïve “quotes”", "中文段落。", "Привет, мир", ""]
    assert fix(texts) == (texts, [[]] * len(texts))


def test_nfc_last() -> None:
    decomposed = "cafe\u0301"
    out, done = fix([decomposed])
    assert out == ["café"] and unicodedata.is_normalized("NFC", out[0]) and done == [[]]


def test_lone_surrogate_replaced() -> None:
    assert fix(["a\ud800b", "ok"]) == (["a\ufffdb", "ok"], [["mojibake"], []])


def test_repair_one_matches_batch() -> None:
    texts = ["x\x00y", "a\r\nb", "It’s".encode().decode("cp1252"), "e\u0301"]
    out, done = fix(texts)
    assert [repair.repair_one(t) for t in texts] == list(zip(out, done, strict=True))


def test_series_holds_the_repaired_texts_in_place() -> None:
    # only the changed texts are written into the series again: each must land at its own position
    texts = ["ok", "x\x00y", "plain ascii", "e\u0301", "It’s".encode().decode("cp1252"), "last", "\x07bell"]
    out, _, series = repair_texts(texts * 3, ON)
    assert series.to_list() == out and out[1] == "xy" and out[3] == "é" and out[6] == "bell"
