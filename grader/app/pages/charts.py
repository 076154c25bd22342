"""Charts drawn on the server as inline SVG, so they show without JavaScript (static/web.js only adds a hover readout).

Presentation attributes, not style="": the pages' Content-Security-Policy allows no inline styles.
"""
import json
import math

from markupsafe import Markup, escape

PAD = {"left": 56, "right": 18, "top": 30, "bottom": 46}


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi], about `count` of them (steps of 1, 2, 2.5 or 5 times a power of ten)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if (hi - lo) / (m * magnitude) <= count)
    first = math.floor(lo / step + 1e-9) * step
    ticks, value = [], first
    while value <= hi + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < hi - 1e-12:
        ticks.append(round(value, 10))
    return ticks


def fmt(value: float) -> str:
    """A short label: 3 significant digits, no trailing zeros."""
    return f"{value:.3g}" if abs(value) < 1e4 else f"{value:.0f}"


def _svg(width: int, height: int, title: str, desc: str, kind: str, extra: str = "") -> str:
    return (f'<svg class="chart chart-{kind}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" role="img" data-chart="{kind}"{extra}>'
            f"<title>{escape(title)}</title><desc>{escape(desc)}</desc>")


def line_chart(points: list[tuple[float, float]], *, title: str, x_label: str, y_label: str,
               baseline: float | None = None, baseline_label: str = "", width: int = 900, height: int = 300) -> Markup:
    """A line through (x, y) points, with an optional dashed horizontal baseline; each point has a hover title."""
    points = [(float(x), float(y)) for x, y in points if math.isfinite(x) and math.isfinite(y)]
    if not points:
        return Markup(_svg(width, 60, title, "no data", "line")
                      + f'<text x="8" y="34" class="empty">{escape(title)}: no data</text></svg>')
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    top = max(ys + ([baseline] if baseline is not None else []))
    yticks = nice_ticks(min(0.0, min(ys)), top * 1.04 if top > 0 else 1.0)
    xticks = nice_ticks(0.0, max(xs) if max(xs) > 0 else 1.0, 6)
    x0, x1, y0, y1 = xticks[0], xticks[-1], yticks[0], yticks[-1]
    left, right = PAD["left"], width - PAD["right"]
    up, down = PAD["top"], height - PAD["bottom"]

    def sx(x):
        return left + (x - x0) / (x1 - x0) * (right - left)

    def sy(y):
        return down - (y - y0) / (y1 - y0) * (down - up)
    desc = (f"{len(points)} points from {x_label} {fmt(xs[0])} to {fmt(xs[-1])}; {y_label} from {fmt(ys[0])} "
            f"to {fmt(ys[-1])}" + (f"; {baseline_label} {fmt(baseline)}" if baseline is not None else ""))
    data = json.dumps([[round(sx(x), 1), round(sy(y), 1), fmt(x), fmt(y)] for x, y in points])
    out = [_svg(width, height, title, desc, "line", f' data-points="{escape(data)}" data-x-label="{escape(x_label)}"'
                f' data-y-label="{escape(y_label)}"')]
    out.append(f'<text x="{left}" y="18" class="chart-title">{escape(title)}</text>')
    for t in yticks:
        out.append(f'<line x1="{left}" x2="{right}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" class="grid"/>'
                   f'<text x="{left - 6}" y="{sy(t) + 4:.1f}" text-anchor="end" class="tick">{fmt(t)}</text>')
    for t in xticks:
        out.append(f'<line x1="{sx(t):.1f}" x2="{sx(t):.1f}" y1="{down}" y2="{down + 4}" class="axis"/>'
                   f'<text x="{sx(t):.1f}" y="{down + 17}" text-anchor="middle" class="tick">{fmt(t)}</text>')
    out.append(f'<line x1="{left}" x2="{right}" y1="{down}" y2="{down}" class="axis"/>'
               f'<line x1="{left}" x2="{left}" y1="{up}" y2="{down}" class="axis"/>')
    out.append(f'<text x="{(left + right) / 2:.0f}" y="{height - 8}" text-anchor="middle" class="label">'
               f'{escape(x_label)}</text>'
               f'<text x="14" y="{(up + down) / 2:.0f}" text-anchor="middle" class="label" '
               f'transform="rotate(-90 14 {(up + down) / 2:.0f})">{escape(y_label)}</text>')
    if baseline is not None and math.isfinite(baseline):
        out.append(f'<line x1="{left}" x2="{right}" y1="{sy(baseline):.1f}" y2="{sy(baseline):.1f}" '
                   f'class="baseline" stroke-dasharray="6 4"/>'
                   f'<text x="{right - 4}" y="{sy(baseline) - 6:.1f}" text-anchor="end" class="baseline-label">'
                   f'{escape(baseline_label)} {fmt(baseline)}</text>')
    path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in points)
    out.append(f'<polyline points="{path}" class="series" fill="none"/>')
    for x, y in points:
        out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="5" class="hit" fill-opacity="0">'
                   f'<title>{escape(x_label)} {fmt(x)}: {escape(y_label)} {fmt(y)}</title></circle>')
    out.append("</svg>")
    return Markup("".join(out))


def histogram(values: list[float], max_value: float | None, *, title: str, bins: int = 10, width: int = 360,
              height: int = 200, x_label: str = "points", unit: str = "student") -> Markup:
    """Counts of values in equal bins from 0 to max_value (the last bin includes the maximum); each value one `unit`."""
    values = [float(v) for v in values if v is not None and math.isfinite(v)]
    top = float(max_value) if max_value else max(values, default=1.0) or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, max(0, int(v / top * bins)))] += 1
    left, right = PAD["left"] - 20, width - PAD["right"] + 6
    up, down = PAD["top"], height - PAD["bottom"] + 8
    yticks = nice_ticks(0, max(max(counts), 1) * 1.15, 4)  # headroom for the count above the tallest bar
    yticks = [t for t in yticks if t == int(t)]  # whole students only
    y1 = yticks[-1] or 1

    def sy(n):
        return down - n / y1 * (down - up)
    bar = (right - left) / bins
    desc = f"{len(values)} {unit}s; " + ", ".join(
        f"{fmt(i * top / bins)}-{fmt((i + 1) * top / bins)}: {n}" for i, n in enumerate(counts) if n)
    out = [_svg(width, height, title, desc, "histogram")]
    out.append(f'<text x="{left}" y="18" class="chart-title">{escape(title)}</text>')
    for t in yticks:
        out.append(f'<line x1="{left}" x2="{right}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" class="grid"/>'
                   f'<text x="{left - 5}" y="{sy(t) + 4:.1f}" text-anchor="end" class="tick">{fmt(t)}</text>')
    for i, n in enumerate(counts):
        lo, hi = i * top / bins, (i + 1) * top / bins
        x = left + i * bar
        label = f"{fmt(lo)}–{fmt(hi)} {x_label}: {n} {unit}{'s' * (n != 1)}"
        out.append(f'<g class="bin"><rect x="{x + 1:.1f}" y="{sy(n):.1f}" width="{bar - 2:.1f}" '
                   f'height="{down - sy(n):.1f}" class="bar"/>'
                   f'<rect x="{x:.1f}" y="{up}" width="{bar:.1f}" height="{down - up}" class="hit" fill-opacity="0">'
                   f'<title>{escape(label)}</title></rect>'
                   + (f'<text x="{x + bar / 2:.1f}" y="{sy(n) - 4:.1f}" text-anchor="middle" class="count">{n}</text>'
                      if n else "") + "</g>")
    for i in range(0, bins + 1, 2 if bins > 6 else 1):
        x = left + i * bar
        out.append(f'<text x="{x:.1f}" y="{down + 15}" text-anchor="middle" class="tick">{fmt(i * top / bins)}</text>')
    out.append(f'<line x1="{left}" x2="{right}" y1="{down}" y2="{down}" class="axis"/>')
    if not values:
        out.append(f'<text x="{(left + right) / 2:.0f}" y="{(up + down) / 2:.0f}" text-anchor="middle" '
                   f'class="empty">no graded submissions yet</text>')
    out.append("</svg>")
    return Markup("".join(out))


def loss_chart(metrics: dict) -> Markup | None:
    """The training check's loss curve (averages of `loss_curve_every` steps) with the unigram baseline."""
    curve = metrics.get("loss_curve") if isinstance(metrics, dict) else None
    if not isinstance(curve, list) or not curve:
        return None
    every = metrics.get("loss_curve_every") or 1
    steps = metrics.get("steps") or len(curve) * every
    points = [(min((i + 1) * every, steps), y) for i, y in enumerate(curve) if isinstance(y, (int, float))]
    baseline = metrics.get("baseline_loss")
    return line_chart(points, title="Training loss", x_label="step", y_label="loss",
                      baseline=baseline if isinstance(baseline, (int, float)) else None,
                      baseline_label="unigram baseline")


def stacked_bars(rows: list[tuple[str, dict]], segments: list[tuple[str, str, str]], *, title: str,
                 width: int = 560, unit: str = "reports") -> Markup:
    """One horizontal bar per row, split into segments (key, label, colour) by share of the row's total; the row's
    label above its bar, the first segment's share at its end (e.g. each check's statuses, pass first)."""
    row_h, top, left, right = 40, 44, 8, width - 8
    height = top + row_h * max(len(rows), 1) + 6
    desc = "; ".join(f"{label}: " + ", ".join(f"{counts.get(key, 0)} {name}" for key, name, _ in segments)
                     for label, counts in rows)
    out = [_svg(width, height, title, desc or "no data", "stacked")]
    out.append(f'<text x="{left}" y="16" class="chart-title">{escape(title)}</text>')
    x = left
    for key, name, colour in segments:  # the legend
        out.append(f'<rect x="{x}" y="25" width="10" height="10" fill="{colour}"/>'
                   f'<text x="{x + 14}" y="34" class="tick">{escape(name)}</text>')
        x += 24 + 7 * len(name)
    if not rows:
        out.append(f'<text x="{left}" y="{top + 20}" class="empty">no graded submissions yet</text>')
    for i, (label, counts) in enumerate(rows):
        y = top + i * row_h
        total = sum(counts.get(key, 0) for key, _, _ in segments)
        first = counts.get(segments[0][0], 0) if segments else 0
        share = f"{first / total:.0%} {segments[0][1]} of {total}" if total else "no reports"
        out.append(f'<text x="{left}" y="{y + 12}" class="label">{escape(label)}</text>'
                   f'<text x="{right}" y="{y + 12}" text-anchor="end" class="tick">{escape(share)}</text>')
        out.append(f'<rect x="{left}" y="{y + 17}" width="{right - left}" height="14" class="track" fill="#eef0f4"/>')
        x = float(left)
        for key, name, colour in segments:
            n = counts.get(key, 0)
            if not n or not total:
                continue
            w = n / total * (right - left)
            out.append(f'<rect x="{x:.1f}" y="{y + 17}" width="{w:.1f}" height="14" fill="{colour}" class="segment">'
                       f'<title>{escape(label)}: {n} of {total} {unit} {escape(name)}</title></rect>')
            x += w
    out.append("</svg>")
    return Markup("".join(out))


def time_bars(rows: list[tuple[str, int]], *, title: str, y_label: str = "submissions", width: int = 900,
              height: int = 240) -> Markup:
    """Counts per time bucket as vertical bars, a label under every few bars (rows: (bucket label, count))."""
    if not rows:
        return Markup(_svg(width, 60, title, "no data", "time")
                      + f'<text x="8" y="34" class="empty">{escape(title)}: no data</text></svg>')
    left, right = PAD["left"], width - PAD["right"]
    up, down = PAD["top"], height - PAD["bottom"]
    most = max(max(n for _, n in rows), 1)
    yticks = [t for t in nice_ticks(0, most * 1.1, 4) if t == int(t)]
    if yticks[-1] <= most:  # headroom above the tallest bar
        yticks.append(yticks[-1] + (yticks[-1] - yticks[-2] if len(yticks) > 1 else 1))
    y1 = yticks[-1]

    def sy(n):
        return down - n / y1 * (down - up)
    bar = (right - left) / len(rows)
    every = max(1, math.ceil(len(rows) / 8))  # about eight labels, whatever the number of buckets
    busiest = max(rows, key=lambda r: r[1])
    desc = f"{len(rows)} buckets from {rows[0][0]} to {rows[-1][0]}; {sum(n for _, n in rows)} {y_label}; " \
           f"most: {busiest[1]} at {busiest[0]}"
    out = [_svg(width, height, title, desc, "time")]
    out.append(f'<text x="{left}" y="18" class="chart-title">{escape(title)}</text>')
    for t in yticks:
        out.append(f'<line x1="{left}" x2="{right}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" class="grid"/>'
                   f'<text x="{left - 6}" y="{sy(t) + 4:.1f}" text-anchor="end" class="tick">{fmt(t)}</text>')
    for i, (label, n) in enumerate(rows):
        x = left + i * bar
        out.append(f'<g class="bin"><rect x="{x + bar * 0.1:.1f}" y="{sy(n):.1f}" width="{max(bar * 0.8, 1):.1f}" '
                   f'height="{down - sy(n):.1f}" class="bar"/>'
                   f'<rect x="{x:.1f}" y="{up}" width="{bar:.1f}" height="{down - up}" class="hit" fill-opacity="0">'
                   f'<title>{escape(label)}: {n} {escape(y_label)}</title></rect></g>')
        if i % every == 0:
            out.append(f'<text x="{x + bar / 2:.1f}" y="{down + 15}" text-anchor="middle" class="tick">'
                       f'{escape(label)}</text>')
    out.append(f'<line x1="{left}" x2="{right}" y1="{down}" y2="{down}" class="axis"/>'
               f'<text x="14" y="{(up + down) / 2:.0f}" text-anchor="middle" class="label" '
               f'transform="rotate(-90 14 {(up + down) / 2:.0f})">{escape(y_label)}</text>')
    out.append("</svg>")
    return Markup("".join(out))
