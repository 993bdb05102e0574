"""Figure helpers shared by the stages that draw: exact tick labels, a unit chosen from the data, distinct colours.

Matplotlib is imported inside the functions that need it, so importing this module stays cheap for stages
that never draw. The functions take matplotlib objects (an Axis) rather than creating figures.
"""

from __future__ import annotations

from typing import Any

# Largest first: the first divisor not above the peak puts the axis numbers between 1 and 1000.
_UNIT_PREFIXES = ((1_000_000_000, "B"), (1_000_000, "M"), (1_000, "k"))

Colour = tuple[float, ...]


def count_label(n: int) -> str:
    """A count as an exact label with thousands separators (`1,152`), never rounded to `1k`."""
    return f"{int(n):,}"


def count_unit(peak: float, noun: str) -> tuple[int, str]:
    """The divisor and unit name (`tokens`, `k tokens`, `M tokens`, `B tokens`) that put `peak` between
    1 and 1000 in that unit, so the axis numbers stay readable and the label says what they count."""
    for divisor, prefix in _UNIT_PREFIXES:
        if abs(peak) >= divisor:
            return divisor, f"{prefix} {noun}"
    return 1, noun


def integer_ticks(axis: Any) -> None:
    """Whole-number ticks labelled exactly with thousands separators: counts of documents have no
    fractions, and an offset or `1e6` corner label would hide the real values."""
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))
    axis.set_major_formatter(FuncFormatter(lambda v, _pos: count_label(round(v))))


def plain_ticks(axis: Any) -> None:
    """Tick labels as plain decimals (as many places as the tick spacing needs, no offset, no scientific
    notation), for an axis already in a chosen unit or in percent."""
    from matplotlib.ticker import ScalarFormatter

    fmt = ScalarFormatter(useOffset=False)
    fmt.set_scientific(False)
    axis.set_major_formatter(fmt)


def distinct_colours(n: int) -> list[Colour]:
    """`n` different colours in a fixed order, one per category, never reused: tab10 first (matplotlib's
    default cycle, so up to 10 categories look as before), then tab20's light shades, tab20b and tab20c
    (60 in all); past that, `n` evenly spaced points of the turbo colour map."""
    import matplotlib

    maps = matplotlib.colormaps
    tab20 = list(maps["tab20"].colors)
    palette = tab20[::2] + tab20[1::2]
    for name in ("tab20b", "tab20c"):
        shades = maps[name].colors  # 5 hues x 4 shades: all hues in one shade before the next shade
        palette += [shades[hue * 4 + shade] for shade in range(4) for hue in range(5)]
    if n <= len(palette):
        return [tuple(c) for c in palette[:n]]
    turbo = maps["turbo"]
    return [tuple(turbo(i / (n - 1))) for i in range(n)]
