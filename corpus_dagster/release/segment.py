"""Cut a document longer than max_tokens into consecutive segments at natural breaks.

Breaks are tried in order of preference: paragraph breaks (blank lines), line breaks, sentence ends,
then any whitespace, so a cut never falls inside a word. Each segment is aimed at a bucket that still
needs documents from the document's source (a seeded choice); the segment's exact token count is then
measured, so a segment always lies in [min_tokens, max_tokens]. What is left after the last segment is
dropped (and counted by the caller).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from corpus_dagster.release.buckets import Buckets

BREAK_PATTERNS = (
    ("paragraph", re.compile(r"[ \t\r]*\n[ \t\r]*\n\s*")),
    ("line", re.compile(r"[ \t\r]*\n\s*")),
    ("sentence", re.compile(r"(?<=[.!?])[\"')\]]*\s+")),
    ("word", re.compile(r"\s+")),
)
# How often one segment is re-cut when its measured token count misses [min_tokens, max_tokens]
# (each retry rescales the characters-per-token estimate with the measured ratio).
MAX_ATTEMPTS = 4


@dataclass
class Segmentation:
    """Segments as (start, end) code-point spans of the parent text, their token counts, what was dropped."""

    spans: list[tuple[int, int]] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    dropped_chars: int = 0
    stop_reason: str = ""  # why segmentation stopped: max_segments, short_tail, no_room, no_break, done


# Characters a break can consist of: whitespace and the closing quotes/brackets a sentence break may
# take after its [.!?]. A scan that starts right after any other character sees the same matches from
# there on as a scan of the whole text (no match can be under way across that point).
_BREAK_CHARS = frozenset("\"')]")


class BreakIndex:
    """Break positions of one text: a break is (content end, start of the next segment).

    Only the part of the text a window needs is scanned, from the last character before the window that
    no break can contain: the word level alone is one match per word (millions in a long document), and a
    cut needs the few around its target."""

    def __init__(self, text: str):
        self.text = text

    def _is_break_char(self, i: int) -> bool:
        return self.text[i].isspace() or self.text[i] in _BREAK_CHARS

    def _scan_span(self, floor: int, limit: int) -> tuple[int, int]:
        """[start, stop) of the text to scan for the breaks whose content end lies in (floor, limit]: from
        the last character at or before `floor` no break can contain, to the first after `limit` (so a scan
        of that span finds those breaks, and their full extent, exactly as a scan of the whole text)."""
        n = len(self.text)
        start = max(0, min(floor, n))
        while start > 0 and self._is_break_char(start - 1):
            start -= 1
        stop = max(start, min(limit + 1, n))
        while stop < n and self._is_break_char(stop):
            stop += 1
        return start, stop

    def breaks(self, level: int, floor: int, limit: int) -> list[tuple[int, int]]:
        """Every break of `level` whose content end lies in (floor, limit], in text order."""
        found = []
        for m in BREAK_PATTERNS[level][1].finditer(self.text, *self._scan_span(floor, limit)):
            end = m.start()
            if end > limit:
                break
            if end > floor:
                found.append((end, m.end()))
        return found

    def best_break(self, windows: Sequence[tuple[int, int]], target: int) -> tuple[int, int] | None:
        """A break whose content end lies in a window (floor, limit]: of the two breaks next to `target`
        the nearer one in the window (the earlier of two as near), else the last one in the window. Levels
        come first: a paragraph break anywhere in any window beats a line break at the target; windows are
        tried in order."""
        for level in range(len(BREAK_PATTERNS)):
            for floor, limit in windows:
                found = self.breaks(level, floor, limit)
                if not found:
                    continue
                if target > limit:  # the break before the target is the window's last
                    return found[-1]
                if target <= floor:  # the break after the target is in the window only if none lies between
                    return found[-1] if self.breaks(level, target, floor) else found[0]
                return min(found, key=lambda b: (abs(b[0] - target), b[0]))
        return None


def segment_text(
    text: str,
    n_tokens: int,
    count_tokens: Callable[[str], int],
    buckets: Buckets,
    max_segments: int,
    room: Sequence[bool],
    rng: random.Random,
) -> Segmentation:
    """Segments of `text` (whose token count is `n_tokens`), each in a bucket with room (`room[k]`)."""
    out = Segmentation()
    index = BreakIndex(text)
    pos = len(text) - len(text.lstrip())
    cpt = len(text) / max(n_tokens, 1)  # characters per token, refined as segments are measured
    while True:
        if len(out.spans) >= max_segments:
            out.stop_reason = "max_segments"
            break
        rest = text[pos:].rstrip()
        if not rest:
            out.stop_reason = "done"
            break
        est_rest = n_tokens if pos == 0 else int(len(rest) / cpt)
        if est_rest < buckets.min_tokens:
            out.stop_reason = "short_tail"
            break
        eligible = [k for k in range(buckets.count) if room[k] and buckets.low(k) <= est_rest]
        if not eligible:
            out.stop_reason = "no_room"
            break
        k = eligible[rng.randrange(len(eligible))]
        low, high = buckets.low(k), buckets.high(k)
        if est_rest <= buckets.max_tokens:
            whole = count_tokens(rest)
            if buckets.min_tokens <= whole <= buckets.max_tokens:
                out.spans.append((pos, pos + len(rest)))
                out.tokens.append(whole)
                pos = len(text)
                continue
        target = (low + high) / 2
        cut = None
        for _ in range(MAX_ATTEMPTS):
            windows = [
                (pos + int((low - 0.5) * cpt), pos + int((high + 0.5) * cpt)),
                (pos + int(buckets.min_tokens * cpt), pos + int(buckets.max_tokens * cpt)),
            ]
            found = index.best_break(windows, pos + int(target * cpt))
            if found is None:
                break
            end, nxt = found
            t = count_tokens(text[pos:end])
            cpt = max((end - pos) / max(t, 1), 1e-3)
            if buckets.min_tokens <= t <= buckets.max_tokens:
                cut = (end, nxt, t)
                break
        if cut is None:
            out.stop_reason = "no_break"
            break
        end, nxt, t = cut
        out.spans.append((pos, end))
        out.tokens.append(t)
        pos = nxt
    out.dropped_chars = len(text[pos:].strip())
    return out
