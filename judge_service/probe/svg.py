"""Small inline-SVG plots for the audit report, so the report needs no plotting library.

Each function returns an ``<svg>`` string: a dot-and-interval plot, a scatter
with an optional fitted line, a histogram and a strip plot.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

WIDTH, HEIGHT = 640, 320
LEFT, RIGHT, TOP, BOTTOM = 170, 20, 30, 45
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b")


class Scale:
    """A linear map from data to pixels, with a little padding and 'nice' ticks."""

    def __init__(self, low: float, high: float, out_low: float, out_high: float) -> None:
        if not (math.isfinite(low) and math.isfinite(high)):
            low, high = 0.0, 1.0
        if high - low < 1e-9:
            low, high = low - 0.5, high + 0.5
        pad = (high - low) * 0.05
        self.low, self.high = low - pad, high + pad
        self.out_low, self.out_high = out_low, out_high

    def __call__(self, value: float) -> float:
        frac = (value - self.low) / (self.high - self.low)
        return self.out_low + frac * (self.out_high - self.out_low)

    def ticks(self, count: int = 5) -> list[float]:
        raw = (self.high - self.low) / count
        step = 10 ** math.floor(math.log10(raw))
        for mult in (1, 2, 5, 10):
            if raw <= mult * step:
                step *= mult
                break
        first = math.ceil(self.low / step) * step
        return [first + k * step for k in range(count + 2) if first + k * step <= self.high]


def _frame(title: str, body: list[str], height: int = HEIGHT) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="11">'
        f'<text x="{WIDTH / 2}" y="16" text-anchor="middle" font-size="13">{escape(title)}</text>'
        + "".join(body)
        + "</svg>"
    )


def _x_axis(scale: Scale, y: float, label: str, height: int) -> list[str]:
    parts = [f'<line x1="{LEFT}" y1="{y}" x2="{WIDTH - RIGHT}" y2="{y}" stroke="#333"/>']
    for tick in scale.ticks():
        x = scale(tick)
        parts.append(f'<line x1="{x:.1f}" y1="{y}" x2="{x:.1f}" y2="{y + 4}" stroke="#333"/>')
        parts.append(f'<text x="{x:.1f}" y="{y + 15}" text-anchor="middle">{tick:g}</text>')
    parts.append(
        f'<text x="{(LEFT + WIDTH - RIGHT) / 2}" y="{height - 8}" text-anchor="middle">'
        f"{escape(label)}</text>"
    )
    return parts


def _y_axis(scale: Scale, label: str, height: int) -> list[str]:
    parts = [f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{height - BOTTOM}" stroke="#333"/>']
    for tick in scale.ticks():
        y = scale(tick)
        parts.append(f'<line x1="{LEFT - 4}" y1="{y:.1f}" x2="{LEFT}" y2="{y:.1f}" stroke="#333"/>')
        parts.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{tick:g}</text>')
    mid = (TOP + height - BOTTOM) / 2
    parts.append(
        f'<text x="{LEFT - 45}" y="{mid}" text-anchor="middle" '
        f'transform="rotate(-90 {LEFT - 45} {mid})">{escape(label)}</text>'
    )
    return parts


def interval_plot(
    rows: Sequence[tuple[str, float, float | None, float | None]], title: str, xlabel: str
) -> str:
    """One row per item: a dot at the estimate and a bar over its interval; a line at zero."""
    height = max(HEIGHT // 2, TOP + BOTTOM + 24 * len(rows))
    values = [v for _, m, lo, hi in rows for v in (m, lo, hi) if v is not None] + [0.0]
    x = Scale(min(values), max(values), LEFT, WIDTH - RIGHT)
    body = _x_axis(x, height - BOTTOM, xlabel, height)
    body.append(
        f'<line x1="{x(0):.1f}" y1="{TOP}" x2="{x(0):.1f}" y2="{height - BOTTOM}" '
        'stroke="#999" stroke-dasharray="3,3"/>'
    )
    for k, (name, mean, low, high) in enumerate(rows):
        y = TOP + 12 + 24 * k
        body.append(f'<text x="{LEFT - 8}" y="{y + 4}" text-anchor="end">{escape(name)}</text>')
        if low is not None and high is not None:
            body.append(
                f'<line x1="{x(low):.1f}" y1="{y}" x2="{x(high):.1f}" y2="{y}" '
                f'stroke="{COLORS[0]}" stroke-width="2"/>'
            )
        body.append(f'<circle cx="{x(mean):.1f}" cy="{y}" r="4" fill="{COLORS[0]}"/>')
    return _frame(title, body, height)


def scatter_plot(
    points: Sequence[tuple[float, float]],
    title: str,
    xlabel: str,
    ylabel: str,
    *,
    line: tuple[float, float] | None = None,
    jitter: float = 0.0,
) -> str:
    """Points (x jittered deterministically for discrete scores) and an optional y = a + b·x."""
    if not points:
        return _frame(title, ['<text x="320" y="160" text-anchor="middle">no data</text>'])
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    x = Scale(min(xs) - jitter, max(xs) + jitter, LEFT, WIDTH - RIGHT)
    y = Scale(min(ys), max(ys), HEIGHT - BOTTOM, TOP)
    body = _x_axis(x, HEIGHT - BOTTOM, xlabel, HEIGHT) + _y_axis(y, ylabel, HEIGHT)
    for k, (px, py) in enumerate(points):
        shift = jitter * (((k * 7919) % 101) / 50.0 - 1.0)
        body.append(
            f'<circle cx="{x(px + shift):.1f}" cy="{y(py):.1f}" r="2.5" '
            f'fill="{COLORS[0]}" fill-opacity="0.45"/>'
        )
    if line is not None:
        intercept, slope = line
        x0, x1 = min(xs), max(xs)
        body.append(
            f'<line x1="{x(x0):.1f}" y1="{y(intercept + slope * x0):.1f}" x2="{x(x1):.1f}" '
            f'y2="{y(intercept + slope * x1):.1f}" stroke="{COLORS[1]}" stroke-width="2"/>'
        )
    return _frame(title, body)


def histogram(
    series: Mapping[str, Sequence[float]], title: str, xlabel: str, *, bins: int = 20
) -> str:
    """Overlaid histograms (fractions of each series), one colour per series, with a legend."""
    values = [v for vs in series.values() for v in vs]
    if not values:
        return _frame(title, ['<text x="320" y="160" text-anchor="middle">no data</text>'])
    low, high = min(values), max(values)
    if high - low < 1e-9:
        high = low + 1.0
    width = (high - low) / bins
    x = Scale(low, high, LEFT, WIDTH - RIGHT)
    fractions: dict[str, list[float]] = {}
    for name, vs in series.items():
        counts = [0] * bins
        for v in vs:
            counts[min(bins - 1, int((v - low) / width))] += 1
        fractions[name] = [c / max(1, len(vs)) for c in counts]
    top = max(max(f) for f in fractions.values())
    y = Scale(0.0, top, HEIGHT - BOTTOM, TOP)
    body = _x_axis(x, HEIGHT - BOTTOM, xlabel, HEIGHT) + _y_axis(y, "fraction of traces", HEIGHT)
    for k, (name, fracs) in enumerate(fractions.items()):
        color = COLORS[k % len(COLORS)]
        for b, frac in enumerate(fracs):
            if frac == 0:
                continue
            left, right = x(low + b * width), x(low + (b + 1) * width)
            body.append(
                f'<rect x="{left:.1f}" y="{y(frac):.1f}" width="{max(1.0, right - left - 1):.1f}" '
                f'height="{y(0) - y(frac):.1f}" fill="{color}" fill-opacity="0.45"/>'
            )
        body.append(
            f'<rect x="{WIDTH - 160}" y="{TOP + 14 * k}" width="10" height="10" fill="{color}"/>'
            f'<text x="{WIDTH - 145}" y="{TOP + 9 + 14 * k}">{escape(name)}</text>'
        )
    return _frame(title, body)


def strip_plot(series: dict[str, Sequence[float]], title: str, ylabel: str) -> str:
    """Each series as a column of points (for the gate: final values, correct vs wrong)."""
    values = [v for vs in series.values() for v in vs]
    if not values:
        return _frame(title, ['<text x="320" y="160" text-anchor="middle">no data</text>'])
    y = Scale(min(values), max(values), HEIGHT - BOTTOM, TOP)
    body = _y_axis(y, ylabel, HEIGHT)
    step = (WIDTH - LEFT - RIGHT) / (len(series) + 1)
    for k, (name, vs) in enumerate(series.items()):
        center = LEFT + step * (k + 1)
        color = COLORS[k % len(COLORS)]
        body.append(
            f'<text x="{center:.1f}" y="{HEIGHT - BOTTOM + 18}" text-anchor="middle">'
            f"{escape(name)} (n={len(vs)})</text>"
        )
        for j, v in enumerate(vs):
            shift = 30 * (((j * 7919) % 101) / 50.0 - 1.0)
            body.append(
                f'<circle cx="{center + shift:.1f}" cy="{y(v):.1f}" r="3" fill="{color}" '
                'fill-opacity="0.6"/>'
            )
    return _frame(title, body)
