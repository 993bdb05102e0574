"""Gopher repetition filter: every reason code at and over its threshold, and exact agreement of the
vectorized statistics with a plain per-document port of datatrove's algorithm on the same tokens."""

from __future__ import annotations

import dataclasses
import random
import re
from collections import Counter

import pytest

from corpus_dagster.clean.batch import DocBatch
from corpus_dagster.clean.filters import REPETITION
from corpus_dagster.clean.repetition import DUP_NGRAMS, TOP_NGRAMS, gopher_repetition
from corpus_dagster.core.config import load_settings
from corpus_dagster.core.settings import CleanRepetitionSettings

RATIO_KEYS = (["max_dup_para_ratio", "max_dup_para_char_ratio", "max_dup_line_ratio", "max_dup_line_char_ratio"]
              + [f"max_top_{n}gram_char_ratio" for n in TOP_NGRAMS]
              + [f"max_dup_{n}gram_char_ratio" for n in DUP_NGRAMS])
CODE_OF = {r.limits[0].key: r.code for r in REPETITION.reasons}


def cfg(**overrides: float | None) -> CleanRepetitionSettings:
    """The default repetition section with some thresholds replaced."""
    # on the typed section: a negative threshold (every document reports its value) is outside the schema
    return dataclasses.replace(load_settings(None).clean.repetition, **overrides)


def only(key: str, value: float) -> dict:
    """A repetition section where every rule but `key` is off."""
    return cfg(**{k: (value if k == key else None) for k in RATIO_KEYS})


def run(texts: list[str], section: CleanRepetitionSettings) -> list[tuple[str | None, float | None]]:
    v = gopher_repetition(DocBatch(texts), section)
    return [(r, None if r is None else float(x)) for r, x in zip(v.reason.tolist(), v.value.tolist(), strict=True)]


# ---------------------------------------------------------------- reference: datatrove's algorithm, literally


def reference(text: str, words: list[str]) -> dict[str, float]:
    """datatrove GopherRepetitionFilter statistics, per document, with our tokens as its words."""
    out: dict[str, float] = {}

    def dups(items: list[str]) -> tuple[int, int]:
        seen: set[str] = set()
        n = chars = 0
        for x in items:
            if x in seen:
                n += 1
                chars += len(x)
            else:
                seen.add(x)
        return n, chars

    paras = re.split(r"\n{2,}", text.strip())
    n, chars = dups(paras)
    out["max_dup_para_ratio"], out["max_dup_para_char_ratio"] = n / len(paras), chars / len(text)
    lines = re.split(r"\n+", text)
    n, chars = dups(lines)
    out["max_dup_line_ratio"], out["max_dup_line_char_ratio"] = n / len(lines), chars / len(text)
    for n in TOP_NGRAMS:
        grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
        top = Counter(grams).most_common(1)
        out[f"max_top_{n}gram_char_ratio"] = (len(" ".join(top[0][0])) * top[0][1] / len(text)) if top else 0.0
    for n in DUP_NGRAMS:
        seen: set[tuple[str, ...]] = set()
        idx = chars = 0
        while idx < len(words) - n + 1:
            gram = tuple(words[idx:idx + n])
            if gram in seen:
                chars += len("".join(gram))
                idx += n
            else:
                seen.add(gram)
                idx += 1
        out[f"max_dup_{n}gram_char_ratio"] = chars / len(text)
    return out


def random_docs(count: int, seed: int) -> list[str]:
    """Short documents from a tiny vocabulary: many repeated n-grams, lines and paragraphs."""
    rng = random.Random(seed)
    vocab = ["a", "bb", "ccc", "the", "of", "x1", "dd", "e.g.", "--z", "yy"]
    docs = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 12)):
            if parts and rng.random() < 0.25:
                parts.append(rng.choice(parts))  # a repeated line or paragraph
            else:
                parts.append(" ".join(rng.choice(vocab[: rng.randint(2, 10)]) for _ in range(rng.randint(1, 25))))
        docs.append("".join(p + rng.choice(["\n", "\n\n", " ", "\n\n\n"]) for p in parts))
    return docs


@pytest.mark.parametrize("key", RATIO_KEYS)
def test_statistics_equal_reference(key: str) -> None:
    docs = random_docs(300, seed=RATIO_KEYS.index(key))
    batch = DocBatch(docs)
    words = batch.words.to_list()
    got = run(docs, only(key, -1.0))  # a negative threshold makes every document report its value
    for text, toks, (reason, value) in zip(docs, words, got, strict=True):
        assert reason == CODE_OF[key]
        assert value == pytest.approx(reference(text, toks)[key], abs=1e-12), (key, text)


def test_greedy_skip_matches_reference_on_overlapping_repeats() -> None:
    # "a a a a a a ..." : every 5-gram repeats, datatrove counts one and skips five words each time
    text = " ".join(["a"] * 23)
    got = run([text], only("max_dup_5gram_char_ratio", -1.0))
    assert got[0][1] == pytest.approx(reference(text, text.split())["max_dup_5gram_char_ratio"])
    assert got[0][1] == pytest.approx(20 / len(text))  # hits at words 1, 6, 11, 16 -> 4 x 5 chars


# ---------------------------------------------------------------- one test per reason code

WORDS = [f"w{chr(97 + i % 26)}{chr(97 + i // 26)}" for i in range(600)]  # 600 distinct 3-letter words


def filler(count: int, start: int = 0) -> str:
    return " ".join(WORDS[start:start + count])


def pad_to(text: str, length: int, start: int = 300) -> str:
    """Append distinct words (then letters) so the text is exactly `length` characters long."""
    i = start
    while len(text) + 4 <= length:
        text += " " + WORDS[i]
        i += 1
    return text + "z" * (length - len(text))


def test_dup_para_ratio() -> None:
    uniq = [filler(30, 30 * i) for i in range(6)]
    inside = "\n\n".join(uniq + ["same"] * 4)  # 10 paragraphs, 3 repeat an earlier one: 0.3
    over = "\n\n".join(uniq + ["same"] * 5)  # 11 paragraphs, 4 repeats: 0.364
    assert run([inside, over], cfg()) == [(None, None), ("repetition_dup_para", pytest.approx(4 / 11))]


def test_dup_para_char_ratio() -> None:
    para = filler(10)  # 39 characters
    inside = pad_to(para + "\n\n" + filler(5, 100) + "\n\n" + para + "\n\n", 5 * len(para))  # 0.2
    over = pad_to(para + "\n\n" + filler(5, 100) + "\n\n" + para + "\n\n", 5 * len(para) - 1)
    section = only("max_dup_para_char_ratio", 0.2)
    assert run([inside, over], section) == [(None, None),
                                            ("repetition_dup_para_chars", pytest.approx(39 / 194))]


def test_dup_line_ratio() -> None:
    uniq = [filler(30, 30 * i) for i in range(6)]
    inside = "\n".join(uniq + ["same"] * 4)
    over = "\n".join(uniq + ["same"] * 5)
    assert run([inside, over], cfg()) == [(None, None), ("repetition_dup_line", pytest.approx(4 / 11))]


def test_dup_line_char_ratio() -> None:
    line = filler(10)
    inside = pad_to(line + "\n" + filler(5, 100) + "\n" + line + "\n", 5 * len(line))
    over = pad_to(line + "\n" + filler(5, 100) + "\n" + line + "\n", 5 * len(line) - 1)
    section = only("max_dup_line_char_ratio", 0.2)
    assert run([inside, over], section) == [(None, None),
                                            ("repetition_dup_line_chars", pytest.approx(39 / 194))]


@pytest.mark.parametrize(("n", "copies"), [(2, 5), (3, 9), (4, 4)])
def test_top_ngram(n: int, copies: int) -> None:
    key = f"max_top_{n}gram_char_ratio"
    limit = getattr(cfg(), key)
    gram = filler(n, 500)  # n distinct words: 4n - 1 characters
    body = " ".join([gram] * copies)  # every other n-gram occurs fewer times
    covered = copies * len(gram)
    length = round(covered / limit)
    assert covered / length == limit  # `copies` is chosen so the threshold is hit exactly
    inside, over = pad_to(body, length), pad_to(body, length - 1)
    assert run([inside, over], only(key, limit)) == [
        (None, None), (f"repetition_top_{n}gram", pytest.approx(covered / (length - 1)))]


@pytest.mark.parametrize(("n", "dup_chars"), [(5, 15), (6, 21), (7, 26), (8, 24), (9, 33), (10, 30)])
def test_dup_ngram(n: int, dup_chars: int) -> None:
    key = f"max_dup_{n}gram_char_ratio"
    limit = getattr(cfg(), key)
    phrase = filler(n - 1, 400) + " " + "q" * (dup_chars - 3 * (n - 1))  # n words, dup_chars characters
    body = phrase + " " + filler(2, 200) + " " + phrase  # the second copy is one duplicated n-gram
    length = round(dup_chars / limit)
    assert dup_chars / length == limit
    inside, over = pad_to(body, length), pad_to(body, length - 1)
    assert run([inside, over], only(key, limit)) == [
        (None, None), (f"repetition_dup_{n}gram", pytest.approx(dup_chars / (length - 1)))]


def test_first_match_order_and_null_switch() -> None:
    spam = "\n".join(["buy now buy now"] * 10)  # breaks line, paragraph-free, n-gram rules at once
    assert run([spam], cfg())[0][0] == "repetition_dup_line"
    assert run([spam], cfg(max_dup_line_ratio=None))[0][0] == "repetition_dup_line_chars"
    off = cfg(**dict.fromkeys(RATIO_KEYS))
    assert run([spam], off) == [(None, None)]


def test_prose_passes_with_defaults() -> None:
    prose = ("The quick brown fox jumps over the lazy dog while the farmer watches from his porch. "
             "Later that evening, rain fell on the fields and the river rose above its banks. ")
    prose += "Children ran home, laughing, their boots heavy with mud and their pockets full of stones."
    assert run([prose], cfg()) == [(None, None)]
