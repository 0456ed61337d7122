"""The charts of the corpus report (report.py), drawn as SVG text: horizontal bars and a histogram.

No JavaScript, nothing fetched: each chart is one inline `<svg>` whose bars are `<rect>`s with a
`<title>` (the exact figure, shown on hover). A bar's length is proportional to its count, the largest
count filling the chart's width, and the figure is written beside it: nothing is read off an axis.
Colours come from the report's CSS classes (`.kept`, `.dropped`, ...), so the SVG holds no style.
"""

from __future__ import annotations

from html import escape
from typing import NamedTuple

ROW = 22  # px per bar of a horizontal chart
LABEL = 240  # px for the labels left of the bars
WIDTH = 560  # px of the longest bar
VALUE = 160  # px for the figure right of the bars
HIST_WIDTH, HIST_HEIGHT, HIST_LEFT, HIST_BOTTOM = 960, 220, 70, 40  # px: the histogram's frame


class Segment(NamedTuple):
    """One piece of a bar: its count, the CSS class that colours it, and what it counts (tooltip)."""

    value: int
    css: str
    name: str = ""


class Row(NamedTuple):
    """One bar: its label, its segments (stacked left to right) and the text after it (default: the
    total, with thousands separators)."""

    label: str
    segments: tuple[Segment, ...]
    note: str = ""


class Series(NamedTuple):
    """One series of a histogram: a count per bucket, in the buckets' order."""

    name: str
    counts: tuple[int, ...]
    css: str


def bar_length(value: int, largest: int, width: int = WIDTH) -> float:
    """Pixels of a bar of `value` when `largest` fills `width` (0 when there is nothing to draw)."""
    return round(width * value / largest, 1) if largest > 0 else 0.0


def _px(value: float) -> str:
    return f"{value:.1f}".removesuffix(".0")


def _svg_open(width: int, height: int, label: str) -> str:
    return (
        f'<svg class="chart" role="img" aria-label="{escape(label)}" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">'
    )


def hbar_chart(rows: list[Row], label: str) -> str:
    """Horizontal bars, one row each, in the order given; a segment of 0 draws no rect."""
    largest = max((sum(s.value for s in row.segments) for row in rows), default=0)
    width, height = LABEL + WIDTH + VALUE, ROW * len(rows) + 4
    out = [_svg_open(width, height, label)]
    for i, row in enumerate(rows):
        y = i * ROW + 2
        out.append(
            f'<text class="label" x="{LABEL - 8}" y="{y + 15}" text-anchor="end">{escape(row.label)}</text>'
        )
        x = float(LABEL)
        for seg in row.segments:
            if seg.value <= 0:
                continue
            length = bar_length(seg.value, largest)
            tip = f"{row.label}: {seg.name + ' ' if seg.name else ''}{seg.value:,}"
            out.append(
                f'<rect class="{seg.css}" x="{_px(x)}" y="{y + 3}" width="{_px(length)}" height="{ROW - 6}">'
                f"<title>{escape(tip)}</title></rect>"
            )
            x += length
        note = row.note or f"{sum(s.value for s in row.segments):,}"
        out.append(f'<text class="value" x="{_px(x + 6)}" y="{y + 15}">{escape(note)}</text>')
    out.append("</svg>")
    return "".join(out)


def short_number(n: int) -> str:
    """A bucket's lower bound as an axis label: 512, 1K (1,024), 64K, 1M (1,048,576)."""
    if n >= 1 << 20:
        return f"{n >> 20}M"
    return f"{n >> 10}K" if n >= 1 << 10 else str(n)


def bucket_range(buckets: list[int], i: int, last_open: bool) -> str:
    """The characters bucket `i` holds: from its lower bound to the next bucket's, the last one to
    twice its bound, or without end when `last_open`."""
    lower = buckets[i]
    upper = buckets[i + 1] if i + 1 < len(buckets) else (None if last_open else max(1, 2 * lower))
    if upper is None:
        return f"{lower:,} characters or more"
    if upper - lower <= 1:
        return "1 character" if lower == 1 else f"{lower:,} characters"
    return f"{lower:,}–{upper - 1:,} characters"


def histogram(buckets: list[int], series: list[Series], label: str, last_open: bool) -> str:
    """Grouped vertical bars: one group per bucket (`buckets`: lower bounds, ascending; a bucket ends
    where the next begins, the last one at twice its bound unless `last_open`), one bar per series.
    Heights are proportional to the counts; the y axis is marked at 0, half and the largest count."""
    largest = max((c for s in series for c in s.counts), default=0)
    plot_w, plot_h = HIST_WIDTH - HIST_LEFT - 10, HIST_HEIGHT - HIST_BOTTOM - 10
    group = plot_w / max(1, len(buckets))
    bar = (group - 4) / max(1, len(series))
    base = 10 + plot_h
    out = [_svg_open(HIST_WIDTH, HIST_HEIGHT, label)]
    for tick in (0, largest // 2, largest) if largest else (0,):
        y = base - bar_length(tick, largest, plot_h)
        out.append(
            f'<line class="grid" x1="{HIST_LEFT}" x2="{HIST_WIDTH - 10}" y1="{_px(y)}" y2="{_px(y)}"/>'
        )
        out.append(
            f'<text class="tick" x="{HIST_LEFT - 6}" y="{_px(y + 4)}" text-anchor="end">{tick:,}</text>'
        )
    for i, lower in enumerate(buckets):
        x0 = HIST_LEFT + i * group + 2
        for j, s in enumerate(series):
            count = s.counts[i]
            if count <= 0:
                continue
            h = bar_length(count, largest, plot_h)
            tip = f"{s.name}, {bucket_range(buckets, i, last_open)}: {count:,} documents"
            out.append(
                f'<rect class="{s.css}" x="{_px(x0 + j * bar)}" y="{_px(base - h)}" width="{_px(bar)}" '
                f'height="{_px(h)}"><title>{escape(tip)}</title></rect>'
            )
        out.append(
            f'<text class="tick" x="{_px(x0 + (group - 4) / 2)}" y="{base + 16}" text-anchor="middle">'
            f"{short_number(lower)}</text>"
        )
    out.append(
        f'<text class="tick" x="{HIST_LEFT + plot_w / 2:.0f}" y="{HIST_HEIGHT - 4}" text-anchor="middle">'
        "characters per document (lower bound of the bucket; K = 1,024)</text>"
    )
    out.append("</svg>")
    return "".join(out)
