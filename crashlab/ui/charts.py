"""Inline SVG plots for the web view: a sparkline (a signature's trend on the home page) and a
bar chart (crashes over time, uptime at crash). Made here, not by a plotting library: a page
must read without JavaScript and fetch nothing, and these two shapes are a few rectangles.

Every label is escaped (markupsafe); the numbers are formatted here."""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

#: bar chart geometry, in SVG user units (the page scales it to its width): the whole, the room
#: for the labels under the axis and for the maximum above the bars
WIDTH, HEIGHT, LABELS, TOP = 600, 160, 36, 16


def sparkline(counts: Sequence[int], width: int = 120, height: int = 24) -> Markup:
    """COUNTS (oldest first) as a polyline, the highest at the top; a flat line when all are 0."""
    top = max(counts, default=0) or 1
    step = width / max(len(counts) - 1, 1)
    points = " ".join(f"{i * step:.1f},{height - 2 - (height - 4) * c / top:.1f}"
                      for i, c in enumerate(counts))
    title = escape(", ".join(map(str, counts)))
    return Markup(f'<svg class="spark" role="img" width="{width}" height="{height}" '
                  f'viewBox="0 0 {width} {height}"><title>{title}</title>'
                  f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" '
                  f'points="{points}"/></svg>')


def bars(labels: Sequence[str], counts: Sequence[int], caption: str) -> Markup:
    """One bar per (label, count), each with its count as a tooltip; the first and last labels
    written under the axis, CAPTION as the chart's accessible title."""
    if len(labels) != len(counts):
        raise ValueError("one label per count")
    top = max(counts, default=0) or 1
    slot = WIDTH / max(len(counts), 1)
    plot = HEIGHT - LABELS  # the axis; bars rise from it at most to TOP
    rects = []
    for i, (label, count) in enumerate(zip(labels, counts, strict=True)):
        tall = (plot - TOP) * count / top
        rects.append(f'<rect class="bar" x="{i * slot + 1:.1f}" y="{plot - tall:.1f}" '
                     f'width="{max(slot - 2, 1):.1f}" height="{tall:.1f}">'
                     f'<title>{escape(label)}: {count}</title></rect>')
    ends = ""
    if labels:
        ends = (f'<text x="0" y="{HEIGHT - 20}">{escape(labels[0])}</text>'
                f'<text x="{WIDTH}" y="{HEIGHT - 20}" text-anchor="end">{escape(labels[-1])}'
                f'</text>')
    return Markup(f'<svg class="chart" role="img" viewBox="0 0 {WIDTH} {HEIGHT}">'
                  f'<title>{escape(caption)}</title>'
                  f'<text x="{WIDTH}" y="12" text-anchor="end">max {top}</text>'
                  f'<line x1="0" y1="{plot}" x2="{WIDTH}" y2="{plot}" stroke="#888"/>'
                  f'{"".join(rects)}{ends}</svg>')
