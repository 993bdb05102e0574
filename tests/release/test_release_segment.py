"""Segmentation at paragraph, line, sentence and word breaks; segment count and room limits."""

import random

from corpus_dagster.release.buckets import Buckets
from corpus_dagster.release.segment import segment_text

BUCKETS = Buckets(min_tokens=20, max_tokens=60, width=10)  # 4 buckets: 20-29, 30-39, 40-49, 50-60
ROOM = [True] * BUCKETS.count


def words(s: str) -> int:
    """A stand-in tokenizer: one token per word."""
    return len(s.split())


def para(i: int, n: int = 9) -> str:
    return " ".join(f"w{i}x{j}" for j in range(n)) + "."


def run(text: str, max_segments: int = 6, room=ROOM, seed: int = 0):
    return segment_text(text, words(text), words, BUCKETS, max_segments, room, random.Random(seed))


def test_cuts_only_at_paragraph_breaks_when_there_are_some():
    text = "\n\n".join(para(i) for i in range(30))  # 270 words in paragraphs of 9
    seg = run(text)
    assert len(seg.spans) >= 2
    for (a, b), t in zip(seg.spans, seg.tokens, strict=True):
        assert BUCKETS.min_tokens <= t <= BUCKETS.max_tokens
        assert t == words(text[a:b])
        assert b == len(text) or text[b:b + 2] == "\n\n"  # content ends at a blank line
        assert a == 0 or text[a - 2:a] == "\n\n"


def test_falls_back_to_line_then_sentence_then_word_breaks():
    lines = "\n".join(para(i) for i in range(20))
    seg = run(lines)
    assert seg.spans and all(b == len(lines) or lines[b] == "\n" for _, b in seg.spans)
    sentences = " ".join(para(i) for i in range(20))
    seg = run(sentences)
    assert seg.spans and all(b == len(sentences) or sentences[b - 1] == "." for _, b in seg.spans)
    plain = " ".join(f"word{i}" for i in range(200))
    seg = run(plain)
    assert seg.spans and all(b == len(plain) or plain[b] == " " for _, b in seg.spans)


def test_no_break_means_no_segment():
    text = "x" * 5000
    seg = segment_text(text, 100, lambda s: max(1, len(s) // 50), BUCKETS, 6, ROOM, random.Random(0))
    assert seg.spans == [] and seg.stop_reason == "no_break" and seg.dropped_chars == 5000


def test_at_most_max_segments_and_the_tail_is_dropped():
    text = "\n\n".join(para(i) for i in range(100))  # 900 words
    seg = run(text, max_segments=2)
    assert len(seg.spans) == 2 and seg.stop_reason == "max_segments"
    assert seg.dropped_chars == len(text[seg.spans[-1][1]:].strip()) > 0
    assert seg.spans[0][1] < seg.spans[1][0]  # consecutive, not overlapping


def test_segments_aim_at_buckets_with_room():
    text = "\n\n".join(para(i) for i in range(100))
    only_top = [False, False, False, True]
    seg = run(text, room=only_top)
    assert seg.spans and all(BUCKETS.index([t])[0] >= 2 for t in seg.tokens)  # aimed at 50-60, measured >= 40
    assert run(text, room=[False] * 4).stop_reason == "no_room"


def test_seeded_choice_is_reproducible():
    text = "\n\n".join(para(i) for i in range(100))
    assert run(text, seed=5).spans == run(text, seed=5).spans
    assert any(run(text, seed=s).spans != run(text, seed=5).spans for s in range(6))


def _best_break_by_full_scan(text: str, windows, target: int):
    """The specification of BreakIndex.best_break: scan every level over the whole text, take the breaks
    next to the target that lie in a window (nearer first, earlier on a tie), else the window's last."""
    import bisect

    from corpus_dagster.release.segment import BREAK_PATTERNS

    for _name, pattern in BREAK_PATTERNS:
        matches = list(pattern.finditer(text))
        ends = [m.start() for m in matches]
        for floor, limit in windows:
            i = bisect.bisect_right(ends, target)
            near = [j for j in (i - 1, i) if 0 <= j < len(ends) and floor < ends[j] <= limit]
            if not near:
                j = bisect.bisect_right(ends, limit) - 1
                near = [j] if j >= 0 and ends[j] > floor else []
            if near:
                j = min(near, key=lambda j: (abs(ends[j] - target), j))
                return ends[j], matches[j].end()
    return None


def test_window_scans_find_the_break_a_whole_text_scan_finds() -> None:
    import random

    from corpus_dagster.release.segment import BreakIndex

    rng = random.Random(7)
    pieces = ["ab", "c", " ", "  ", "\n", "\n\n", " \n \n ", ".", "!", "?", '"', "'", ")", "]", "\t", "x.", '." ']
    for _ in range(400):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 200)))
        index, n = BreakIndex(text), len(text)
        for _ in range(20):
            floor, floor2 = rng.randint(-3, n + 3), rng.randint(0, n)
            windows = [(floor, floor + rng.randint(0, n // 2 + 1)), (floor2, floor2 + rng.randint(0, n + 1))]
            target = rng.randint(-3, n + 3)
            assert index.best_break(windows, target) == _best_break_by_full_scan(text, windows, target)
