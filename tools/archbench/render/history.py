"""The history (analysis/history.py) as a console or Markdown table, and as line charts
(matplotlib, else plain SVG)."""

import math

from ..analysis.history import chart_columns, group_label, headline_columns
from ..cli import html as escape, md
from . import charts


def fmt(value):
    """A headline value with an SI prefix."""
    if value is None:
        return "-"
    for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.4g} {prefix}"
    return f"{value:.4g}"


def render(groups, markdown):
    """The table as console text or GitHub Markdown."""
    cols = [c for c in headline_columns() if any(c[0] in g[-1] for g in groups)]
    header = ["driver_version", "runtime_version", "archbench", "date", "runs"] + [label for _, label, _ in cols]
    rows = [[drv, rt, ver, date, str(n)] + [fmt(h.get(key)) for key, _, _ in cols] for drv, rt, ver, date, n, h in groups]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * 4 + "---:|" * (len(header) - 4)]
        lines += ["| " + " | ".join(md(c) for c in row) + " |" for row in rows]
    else:
        widths = [max(len(r[i]) for r in rows + [header]) for i in range(len(header))]
        lines = ["  ".join(c.ljust(w) if i < 4 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip()
                 for row in [header] + rows]
    return "\n".join(lines) + "\n"


def draw_chart(axis, groups, device):
    """The small line charts on matplotlib: one panel per headline metric across the version groups."""
    cols = chart_columns(groups)
    fig = axis.figure
    axis.remove()
    per_row = min(3, max(1, len(cols)))
    panels = fig.subplots(max(1, math.ceil(len(cols) / per_row)), per_row, squeeze=False).flat
    fig.suptitle(f"archbench history: {device}")
    labels = [group_label(g, groups)[:32] for g in groups]
    for (key, label, higher), panel in zip(cols, panels):  # cols first: the unused panels stay in `panels`
        values = [g[-1].get(key) for g in groups]
        xs = [i for i, v in enumerate(values) if v is not None]
        panel.plot(xs, [values[i] for i in xs], marker="o", color="#1f77b4")
        panel.set_title(f"{label} ({'higher' if higher else 'lower'} is better)", fontsize=9)
        panel.set_xticks(range(len(groups)), labels, rotation=30, ha="right", fontsize=7)
    for panel in list(panels):
        panel.set_visible(False)
    fig.tight_layout()


def svg_chart(groups, device):
    """The plain SVG of the same charts (where matplotlib is not importable)."""
    cols = chart_columns(groups)
    pw, ph, per_row = 320, 200, 3
    ncols = min(per_row, max(1, len(cols)))
    width, height = ncols * pw + 20, 50 + max(1, math.ceil(len(cols) / per_row)) * (ph + 70)
    out = charts.svg_open(width, height) + [
        f'<text x="10" y="24" font-size="15">archbench history: {escape(device)}</text>']
    n = len(groups)
    for idx, (key, label, higher) in enumerate(cols):
        x0, y0 = 10 + (idx % per_row) * pw + 55, 50 + (idx // per_row) * (ph + 70) + 20
        w, h = pw - 75, ph - 40
        values = [g[-1].get(key) for g in groups]
        known = [v for v in values if v is not None]
        lo, hi = min(known), max(known)
        if hi == lo:
            lo, hi = lo * 0.9 if lo else -1, hi * 1.1 if hi else 1
        arrow = "higher is better" if higher else "lower is better"
        out.append(f'<text x="{x0 - 45}" y="{y0 - 8}" font-size="12">{escape(label)} ({arrow})</text>')
        out.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#999"/>')
        out.append(f'<text x="{x0 - 4}" y="{y0 + 10}" text-anchor="end">{escape(fmt(hi))}</text>')
        out.append(f'<text x="{x0 - 4}" y="{y0 + h}" text-anchor="end">{escape(fmt(lo))}</text>')

        def pos(i, v):
            x = x0 + (w * (i + 0.5) / n)
            return x, y0 + h - (v - lo) / (hi - lo) * h

        points = [pos(i, v) for i, v in enumerate(values) if v is not None]
        if len(points) > 1:
            out.append('<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="'
                       + " ".join(f"{x:.1f},{y:.1f}" for x, y in points) + '"/>')
        for x, y in points:
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="#1f77b4"/>')
        for i, g in enumerate(groups):
            x = x0 + w * (i + 0.5) / n
            text = escape(group_label(g, groups)[:32])
            out.append(f'<text x="{x:.1f}" y="{y0 + h + 12}" text-anchor="end" '
                       f'transform="rotate(-30 {x:.1f} {y0 + h + 12})">{text}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
