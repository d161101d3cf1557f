"""The health chart as inline SVG (no script, no image files). A diff's lines are classed
for colour by vicar.diffs."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from html import escape
from typing import NamedTuple


class Point(NamedTuple):
    at: datetime | None
    bound: float | None  # the autonomy rule's error bound when the gate was answered
    alone: bool  # the proxy answered it alone


WIDTH, HEIGHT, PAD = 600, 180, 28
WINDOW = 10  # the autonomy line is the share answered alone over the last WINDOW gates


def chart(points: Sequence[Point], target: float | None) -> str:
    """Autonomy (share of the last gates answered alone) and the error bound per gate, in
    time order, on one 0..1 axis; the target error dashed."""
    if not points:
        return ""
    n = len(points)

    def x(i: int) -> float:
        return PAD + (WIDTH - 2 * PAD) * (i / (n - 1) if n > 1 else 0.5)

    def y(v: float) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * max(0.0, min(1.0, v))

    share = []
    for i in range(n):
        window = points[max(0, i - WINDOW + 1) : i + 1]
        share.append(sum(p.alone for p in window) / len(window))
    autonomy = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(share))
    bounds = " ".join(f"{x(i):.1f},{y(p.bound):.1f}" for i, p in enumerate(points) if p.bound is not None)
    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
        f'aria-label="autonomy and error bound over {n} gates">',
        f'<line class="axis" x1="{PAD}" y1="{y(0):.1f}" x2="{WIDTH - PAD}" y2="{y(0):.1f}"/>',
        f'<line class="axis" x1="{PAD}" y1="{y(1):.1f}" x2="{PAD}" y2="{y(0):.1f}"/>',
        f'<text x="2" y="{y(1) + 4:.1f}">1</text><text x="2" y="{y(0) + 4:.1f}">0</text>',
    ]
    if target is not None:
        parts.append(f'<line class="target" x1="{PAD}" y1="{y(target):.1f}" x2="{WIDTH - PAD}" y2="{y(target):.1f}"/>')
    if bounds:
        parts.append(f'<polyline class="bound" points="{bounds}"/>')
    parts.append(f'<polyline class="autonomy" points="{autonomy}"/>')
    first, last = points[0].at, points[-1].at
    if first and last:
        parts.append(f'<text x="{PAD}" y="{HEIGHT - 6}">{escape(first.strftime("%Y-%m-%d"))}</text>')
        end = escape(last.strftime("%Y-%m-%d %H:%M"))
        parts.append(f'<text x="{WIDTH - PAD}" y="{HEIGHT - 6}" text-anchor="end">{end}</text>')
    parts.append("</svg>")
    return "".join(parts)
