"""Perplexity filter: a hand-written ARPA model, a hand-computed perplexity, and the error paths."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from corpus_dagster.clean import ppl
from corpus_dagster.clean.batch import DocBatch
from corpus_dagster.clean.cleaner import clean_texts
from corpus_dagster.core.config import load_settings
from corpus_dagster.core.settings import CleanPplSettings

pytest.importorskip("kenlm")

# A bigram model: log10 probabilities and backoff weights.
ARPA = """
\\data\\
ngram 1=5
ngram 2=2

\\1-grams:
-2.0\t<unk>\t0
-1.0\t<s>\t-0.5
-0.5\t</s>\t0
-0.3\ta\t-0.2
-0.7\tb\t0

\\2-grams:
-0.1\t<s> a
-0.2\ta b

\\end\\
"""


@pytest.fixture
def model_path(tmp_path: Path) -> str:
    path = tmp_path / "tiny.arpa"
    path.write_text(ARPA.lstrip("\n"))
    ppl._MODELS.clear()
    return str(path)


def section(model_path: str | None, **overrides: object) -> CleanPplSettings:
    return load_settings(None, {"clean": {"ppl": {"enabled": True, "model_path": model_path, **overrides}}}).clean.ppl


def test_hand_computed_perplexity(model_path: str) -> None:
    # line "a b":  p(a|<s>) -0.1, p(b|a) -0.2, p(</s>|b) = bo(b) 0 + p(</s>) -0.5   -> -0.8 over 3 tokens
    # line "b a":  p(b|<s>) = bo(<s>) -0.5 + p(b) -0.7, p(a|b) = 0 + -0.3, p(</s>|a) = bo(a) -0.2 + -0.5 -> -2.2
    # document: 10 ** (3.0 / 6)
    model = ppl.load_model(model_path)
    assert model.score("a b", bos=True, eos=True) == pytest.approx(-0.8)
    assert ppl.doc_perplexity("A b\n\n  b   A  \n", model) == pytest.approx(10 ** 0.5)
    assert ppl.doc_perplexity("a b", model) == pytest.approx(10 ** (0.8 / 3))
    assert ppl.doc_perplexity("\n \n", model) is None


def test_normalization_is_switchable(model_path: str) -> None:
    model = ppl.load_model(model_path)
    assert ppl.normalize_line("  À  B 42 ") == "a b 00"
    assert ppl.doc_perplexity("A B", model, normalize=False) > ppl.doc_perplexity("A B", model)


def test_filter_drops_over_max(model_path: str) -> None:
    texts = ["a b\nb a", "a b"]
    v = ppl.perplexity_filter(DocBatch(texts), section(model_path, max_perplexity=3.0))
    assert v.reason.tolist() == ["ppl", None]
    assert v.value[0] == pytest.approx(10 ** 0.5)
    measured = float(v.value[0])  # KenLM stores float32 weights: close to, not exactly, 10 ** 0.5
    v = ppl.perplexity_filter(DocBatch(texts), section(model_path, max_perplexity=measured))
    assert v.reason.tolist() == [None, None]  # "over" the maximum, not at it


def test_off_by_default_and_reported_as_ppl(model_path: str) -> None:
    cfg = load_settings(None).clean
    assert cfg.ppl.enabled is False and cfg.ppl.model_path is None
    on = load_settings(None, {"clean": {"ppl": {"enabled": True, "model_path": model_path, "max_perplexity": 1.0},
                                        **{k: {"enabled": False} for k in (
                                            "lang", "gopher", "repetition", "symbol_soup", "table_dump",
                                            "repeated", "nav_menu", "non_english")}}}).clean
    out = clean_texts(["a b a b", "\n"], on, "src")
    assert out.reason == ["ppl", None]


def test_missing_model_path_is_a_clear_error() -> None:
    with pytest.raises(ppl.PerplexityModelError, match="model_path is not set"):
        ppl.perplexity_filter(DocBatch(["x"]), section(None))
    on = load_settings(None, {"clean": {"ppl": {"enabled": True}}}).clean
    with pytest.raises(ppl.PerplexityModelError, match="model_path is not set"):
        clean_texts([], on, "src")  # fails up front, even before any document reaches the rule
    assert clean_texts([], load_settings(None, {"clean": {"ppl": {"enabled": True, "sources": ["x"]}}}).clean, "src").reason == []  # out of scope: no model needed


def test_missing_model_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ppl.PerplexityModelError, match="not found: .*nope.arpa"):
        ppl.perplexity_filter(DocBatch(["x"]), section(str(tmp_path / "nope.arpa")))


def test_missing_kenlm_names_the_package(monkeypatch: pytest.MonkeyPatch, model_path: str) -> None:
    monkeypatch.setitem(sys.modules, "kenlm", None)  # import kenlm -> ImportError
    with pytest.raises(ppl.PerplexityModelError, match="pip install kenlm"):
        ppl.load_model(model_path)
