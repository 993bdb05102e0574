"""Text repair: NUL and C0 control removal, newline normalization, mojibake repair, Unicode NFC.

One vectorized polars scan finds the few documents that need work (a control character, a carriage
return, or a mojibake byte pattern); only those go through Python, and only documents the pre-screen
flags go through ftfy, which is ~100x slower than the scan.
"""

from __future__ import annotations

import re
import unicodedata

import ftfy
import polars as pl

from corpus_dagster.core.settings import CleanRepairSettings

REPAIR_KINDS = ("nul", "control", "mojibake")

_CONTROL = re.compile(r"[\x01-\x08\x0b\x0c\x0e-\x1f]")  # C0 minus NUL, tab, newline, carriage return
_SURROGATE = re.compile(r"[\ud800-\udfff]")
# UTF-8 read as Latin-1 / cp1252: a lead-byte character (Â..ô) followed by a continuation-byte
# character (U+0080..U+00BF or what cp1252 maps 0x80..0x9F to), e.g. `â€™` for `’`.
_MOJIBAKE = (
    "[\u00c2-\u00f4][\u0080-\u00bf\u0152\u0153\u0160\u0161\u0178\u017d\u017e\u0192\u02c6\u02dc"
    "\u2013\u2014\u2018-\u201e\u2020-\u2022\u2026\u2030\u2039\u203a\u20ac\u2122]"
)
_NEEDS_WORK = r"[\x00-\x08\x0b\x0c\x0e-\x1f\r]|" + _MOJIBAKE
_MOJIBAKE_RE = re.compile(_MOJIBAKE)
# Only the encoding repairs: no quote uncurling, width folding, HTML unescaping or normalization,
# which would change correct text.
_FTFY = ftfy.TextFixerConfig(
    unescape_html=False, remove_terminal_escapes=False, fix_encoding=True, restore_byte_a0=True,
    replace_lossy_sequences=True, decode_inconsistent_utf8=True, fix_c1_controls=True,
    fix_latin_ligatures=False, fix_character_width=False, uncurl_quotes=False, fix_line_breaks=False,
    fix_surrogates=True, remove_control_chars=False, normalization=None, explain=False,
)


def _fix_surrogates(text: str) -> str:
    """Join surrogate pairs, replace lone surrogates with U+FFFD (they cannot be written as UTF-8)."""
    text = ftfy.fixes.fix_surrogates(text)
    return _SURROGATE.sub("\ufffd", text)


def _fix_mojibake(text: str) -> str:
    """ftfy's encoding repair on the lines that hold a non-ASCII character, the rest kept as they are.

    ftfy.fix_text fixes each line (up to and including its `\n`) on its own and returns an ASCII line
    unchanged under this config, so handing it only the non-ASCII lines gives the same text; a long
    changelog with a few accented names no longer pays ftfy's per-line cost on every line."""
    lines = text.split("\n")
    last = len(lines) - 1
    for i, line in enumerate(lines):
        if not line.isascii():
            fixed = ftfy.fix_text(line if i == last else line + "\n", _FTFY)
            lines[i] = fixed if i == last else fixed[:-1] if fixed.endswith("\n") else None  # type: ignore[assignment]
            if lines[i] is None:  # the fix removed the line's newline: give up the shortcut
                return ftfy.fix_text(text, _FTFY)
    return "\n".join(lines)


def repair_one(text: str, fix_mojibake: bool = True) -> tuple[str, list[str]]:
    """Repair one document; returns the text and the repairs it got, in REPAIR_KINDS order."""
    done: list[str] = []
    if "\x00" in text:
        text = text.replace("\x00", "")
        done.append("nul")
    if _CONTROL.search(text):
        text = _CONTROL.sub("", text)
        done.append("control")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.isascii():
        fixed = text
        if _SURROGATE.search(fixed):
            fixed = _fix_surrogates(fixed)
        if fix_mojibake and _MOJIBAKE_RE.search(fixed):
            fixed = _fix_mojibake(fixed)
        if fixed != text:
            done.append("mojibake")
            text = fixed
        if not unicodedata.is_normalized("NFC", text):
            text = unicodedata.normalize("NFC", text)
    return text, done


def repair_texts(texts: list[str], cfg: CleanRepairSettings) -> tuple[list[str], list[list[str]], pl.Series]:
    """Repair every document; returns texts, repairs per document and the repaired texts as a series."""
    fix_mojibake = bool(cfg.mojibake)
    out = list(texts)
    repairs: list[list[str]] = [[] for _ in texts]
    try:
        series = pl.Series("text", out, dtype=pl.String)
    except UnicodeEncodeError:  # lone surrogates: Rust strings must be valid UTF-8
        for i, text in enumerate(out):
            if not text.isascii() and _SURROGATE.search(text):
                out[i] = _fix_surrogates(text)
                repairs[i].append("mojibake")
        series = pl.Series("text", out, dtype=pl.String)
    flagged = series.str.contains(_NEEDS_WORK).to_numpy()
    changed: list[int] = []
    for i, text in enumerate(out):
        if flagged[i]:
            new, done = repair_one(text, fix_mojibake)
            repairs[i] = [k for k in REPAIR_KINDS if k in done or k in repairs[i]]
        elif not text.isascii() and not unicodedata.is_normalized("NFC", text):
            new = unicodedata.normalize("NFC", text)
        else:
            continue
        if new != text:
            out[i] = new
            changed.append(i)
    if changed:  # only the repaired texts are copied into the series again, not the whole batch
        series = series.scatter(changed, pl.Series([out[i] for i in changed], dtype=pl.String))
    return out, repairs, series
