"""The roofline charts (matplotlib, else plain SVG): the models' chart, the energy roofline, the
three charts from measured traffic; and the console report."""

import math

from ..analysis import traffic
from ..analysis.roofline import ACCEPT, KNEE, TEXTBOOK_KEY, TYPES, flops_series, place, size
from ..cli import html as escape, si
from . import charts

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def chart_lines(model, bw, precision):
    """The lines of the roofline chart: (kind, label, value, style) with kind 'bw' or 'peak'."""
    lines = []
    compute = model["orm"]["compute"].get(precision, {})
    for slot, text in (("fma", "FMA"), ("no_fma", "no FMA")):
        if slot in compute:
            v = compute[slot]["value"]
            lines.append(("peak", f"{precision} {text} {si(v, 'FLOP/s')}", v, "solid"))
    for lv in model["carm"]["levels"]:
        rng = f" ({lv['range']})" if "range" in lv else ""
        src = f" [{lv['source']}]" if lv.get("source") else ""
        lines.append(("bw", f"{lv['name']}{rng} {si(lv['value'], 'B/s')}{src}", lv["value"], "solid"))
    dm = model["orm"]["device_memory"]
    triad = bw["memory"].get("triad")
    if triad and dm and dm.get("source") != "memory/*/triad":
        lines.append(("bw", f"triad {si(triad['value'], 'B/s')}", triad["value"], "dotted"))
    tb = model["textbook"]
    if tb:
        p = tb["peaks"]
        key = TEXTBOOK_KEY.get(precision)
        if key in p:
            lines.append(("peak", f"textbook {precision} {si(p[key], 'FLOP/s')}", p[key], "dashed"))
        for bwk, text in (("dram", "device memory"), ("shared", "L1/shared")):
            if bwk in p:
                lines.append(("bw", f"textbook {text} {si(p[bwk], 'B/s')}", p[bwk], "dashed"))
    return lines


def limits(xs, ys):
    """Axis limits covering the values, in whole decades with some margin."""
    xs, ys = [v for v in xs if v and v > 0], [v for v in ys if v and v > 0]
    xlim = (10 ** math.floor(math.log10(min(xs, default=0.01) / 2)), 10 ** math.ceil(math.log10(max(xs, default=100) * 2)))
    ylim = (10 ** math.floor(math.log10(min(ys, default=1e9) / 2)), 10 ** math.ceil(math.log10(max(ys, default=1e12) * 2)))
    return xlim, ylim


def chart_frame(model, bw, points, precision):
    """The chart's lines and its (x, y) limits: every point, every ceiling and every ridge shows."""
    lines = chart_lines(model, bw, precision)
    peaks = [v for k, _, v, s in lines if k == "peak"]
    bws = [v for k, _, v, s in lines if k == "bw"]
    top = max(peaks, default=None)
    xs = [p["ai"] for p in points] + [top / b for b in bws if top] + [0.05, 50]
    ys = [p["flop_per_s"] for p in points] + peaks + [b * 0.05 for b in bws]
    xlim, ylim = limits(xs, ys)
    return lines, xlim, ylim


def svg_ceilings(ax, lines):
    """The chart's ceilings as SVG elements, each labelled on its line."""
    out = []
    bws = [v for k, _, v, s in lines if k == "bw"]
    top = max((v for k, _, v, s in lines if k == "peak"), default=None)
    dash = {"solid": "", "dashed": ' stroke-dasharray="8,5"', "dotted": ' stroke-dasharray="2,4"'}
    xmin, xmax = 10 ** ax.xl[0], 10 ** ax.xl[1]
    angle = ax.slope_deg()
    label_y = 10 ** ax.yl[0]
    for i, (kind, label, value, style) in enumerate(lines):
        color = "#777" if style == "dashed" else ("#333" if kind == "peak" else COLORS[i % len(COLORS)])
        if kind == "peak":
            start = value / max(bv for k, _, bv, s in lines if k == "bw") if bws else xmin
            start = max(start, xmin)
            py = ax.y(value)
            out.append(f'<line x1="{ax.x(start):.1f}" y1="{py:.1f}" x2="{ax.x(xmax):.1f}" y2="{py:.1f}" '
                       f'stroke="{color}" stroke-width="2"{dash[style]}/>')
            out.append(f'<text x="{ax.x(xmax) - 4:.1f}" y="{py - 4:.1f}" text-anchor="end" fill="{color}">'
                       f'{escape(label)}</text>')
        else:
            end = min(xmax, (top / value) if top else xmax)
            start = max(xmin, label_y / value)
            if start >= end:
                continue
            out.append(f'<line x1="{ax.x(start):.1f}" y1="{ax.y(value * start):.1f}" x2="{ax.x(end):.1f}" '
                       f'y2="{ax.y(value * end):.1f}" stroke="{color}" stroke-width="2"{dash[style]}/>')
            lx = start * 10 ** (0.15 * (math.log10(end) - math.log10(start)))
            px, py = ax.x(lx), ax.y(value * lx) - 5
            out.append(f'<text x="{px:.1f}" y="{py:.1f}" fill="{color}" '
                       f'transform="rotate({angle:.1f} {px:.1f} {py:.1f})">{escape(label)}</text>')
    return out


def roofline_svg(model, bw, points, precision, title):
    """The roofline chart as SVG text."""
    lines, xlim, ylim = chart_frame(model, bw, points, precision)
    ax = charts.LogLog(xlim, ylim)
    width, height = ax.x0 + ax.w + 40, ax.y0 + ax.h + 60
    out = charts.svg_open(width, height)
    out += ax.frame("arithmetic intensity (FLOP/byte)", "FLOP/s", title)
    out += svg_ceilings(ax, lines)
    series = flops_series(points)
    in_series = {p["name"] for s in series.values() for p in s}
    for i, ((source, kind), pts) in enumerate(series.items()):
        color = COLORS[(i + 3) % len(COLORS)]
        out.append(f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="'
                   + " ".join(f"{ax.x(p['ai']):.1f},{ax.y(p['flop_per_s']):.1f}" for p in pts) + '"/>')
        for p in pts:
            out.append(f'<circle cx="{ax.x(p["ai"]):.1f}" cy="{ax.y(p["flop_per_s"]):.1f}" r="3.5" '
                       f'fill="{color}"><title>{escape(p["name"])}</title></circle>')
        last = pts[-1]
        out.append(f'<text x="{ax.x(last["ai"]) + 6:.1f}" y="{ax.y(last["flop_per_s"]) + 12:.1f}" fill="{color}">'
                   f'flops {escape(source)}/{escape(kind)}</text>')
    for p in points:
        if p["name"] not in in_series:
            out.append(f'<circle cx="{ax.x(p["ai"]):.1f}" cy="{ax.y(p["flop_per_s"]):.1f}" r="3" fill="none" '
                       f'stroke="#555"><title>{escape(p["name"])}</title></circle>')
    out.append(f'<text x="{ax.x0}" y="{ax.y0 + ax.h + 55}" fill="#555">solid: measured ceilings (compute: max '
               f'over widths; levels: plateau medians); dashed: textbook; dotted: triad; points: benchmarks '
               f'with flop_per_s and byte_per_s</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def energy_svg(points, compute_energy, title):
    """Energy roofline: flop_per_joule against arithmetic intensity, as SVG text."""
    pts = [p for p in points if p["flop_per_joule"]]
    xs = [p["ai"] for p in pts]
    ys = [p["flop_per_joule"] for p in pts] + [c["value"] for c in compute_energy.values()]
    ax = charts.LogLog(*limits(xs, ys))
    width, height = ax.x0 + ax.w + 40, ax.y0 + ax.h + 60
    out = charts.svg_open(width, height)
    out += ax.frame("arithmetic intensity (FLOP/byte)", "FLOP/J", title)
    for i, (kind, c) in enumerate(sorted(compute_energy.items())):
        py = ax.y(c["value"])
        out.append(f'<line x1="{ax.x0}" y1="{py:.1f}" x2="{ax.x0 + ax.w}" y2="{py:.1f}" stroke="#333" '
                   f'stroke-dasharray="6,3"/>')
        out.append(f'<text x="{ax.x0 + ax.w - 4}" y="{py - 4:.1f}" text-anchor="end">{escape(kind)} mad '
                   f'{escape(si(c["value"], "FLOP/J"))}</text>')
    for p in pts:
        px, py = ax.x(p["ai"]), ax.y(p["flop_per_joule"])
        out.append(f'<circle cx="{px:.1f}" cy="{py:.1f}" r="3.5" fill="#1f77b4"><title>{escape(p["name"])}</title>'
                   f'</circle>')
        out.append(f'<text x="{px + 5:.1f}" y="{py - 5:.1f}" font-size="9">{escape(p["name"].split("/")[2] if p["name"].count("/") >= 2 else p["name"])}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_chart(path, model, bw, points, precision, title):
    """The roofline chart at path (PNG or SVG by its name) with matplotlib where importable, else an
    SVG with the plain writer (charts.write); returns None, or why it was not written."""
    return charts.write(path, lambda axis: draw(axis, model, bw, points, precision, title),
                        lambda: roofline_svg(model, bw, points, precision, title))


def write_png(path, model, bw, points, precision, title):
    """The roofline chart as PNG with matplotlib; returns None, or why it was not written."""
    return charts.write(path, lambda axis: draw(axis, model, bw, points, precision, title))


def draw(axis, model, bw, points, precision, title):
    """The roofline chart on a matplotlib axis."""
    lines, xlim, ylim = chart_frame(model, bw, points, precision)
    bws = [v for k, _, v, s in lines if k == "bw"]
    top = max((v for k, _, v, s in lines if k == "peak"), default=None)
    axis.set_xscale("log")
    axis.set_yscale("log")
    styles = {"solid": "-", "dashed": "--", "dotted": ":"}
    for kind, label, value, style in lines:
        if kind == "peak":
            start = value / max(bws) if bws else xlim[0]
            axis.plot([max(start, xlim[0]), xlim[1]], [value, value], styles[style], label=label)
        else:
            end = min(xlim[1], top / value) if top else xlim[1]
            start = max(xlim[0], ylim[0] / value)
            if start < end:
                axis.plot([start, end], [value * start, value * end], styles[style], label=label)
    for (source, kind), pts in flops_series(points).items():
        axis.plot([p["ai"] for p in pts], [p["flop_per_s"] for p in pts], "o-", ms=4, label=f"flops {source}/{kind}")
    names = {p["name"] for s in flops_series(points).values() for p in s}
    others = [p for p in points if p["name"] not in names]
    if others:
        axis.plot([p["ai"] for p in others], [p["flop_per_s"] for p in others], "o", mfc="none", color="#555",
                  label="other benchmarks")
    axis.set_xlim(*xlim)
    axis.set_ylim(*ylim)
    axis.set_xlabel("arithmetic intensity (FLOP/byte)")
    axis.set_ylabel("FLOP/s")
    axis.set_title(title)
    axis.grid(True, which="major", alpha=0.3)
    axis.legend(fontsize=7, loc="lower right")

# ---------------------------------------------------------------- measured traffic (archbench --traffic)

PREC_COLORS = {"fp64": "#d62728", "fp32": "#1f77b4", "fp16": "#2ca02c", "tensor": "#9467bd"}
LEVEL_MARKERS = {"L1": "o", "L2": "s", "DRAM": "^"}
SVG_MARKERS = {"L1": "circle", "L2": "rect", "DRAM": "triangle"}
# The three charts from measured traffic: (file suffix, what it is, the levels of its points).
MEASURED_CHARTS = (("dram", "original roofline, intensity from measured DRAM traffic", ("DRAM",)),
                   ("l1", "cache-aware roofline, intensity from measured L1 traffic", ("L1",)),
                   ("hierarchical", "hierarchical roofline, one point per measured level, joined",
                    ("L1", "L2", "DRAM")))


def short_name(name, width=40):
    """A point's label: a kernel's function name without its parameters (the table has them)."""
    if "(" in name:
        name = name[:name.index("(")]
    if name.startswith("void "):
        name = name[5:]
    return name[:width]


def measured_series(rows, levels):
    """Chart series of measured launches: [{name, precision, share, points: [(level, ai, FLOP/s)]}]
    on `levels`; and how many rows could not be placed (no flops executed, or no bytes there)."""
    series, skipped = [], 0
    for r in rows:
        p = place(r)
        pts = [(lv, p["ai"][lv], p["flop_per_s"]) for lv in levels if lv in p["ai"] and p["flop_per_s"]]
        if pts:
            series.append({"name": r["name"], "precision": p["precision"], "share": r.get("share"), "points": pts})
        else:
            skipped += 1
    return series, skipped


def measured_lines(model, precision, levels):
    """The ceilings of a measured chart: the compute peaks of its precision, and the bandwidths of
    its levels (device memory only, for the original model), empirical solid, textbook dashed."""
    bw = {"memory": {}}
    lines = chart_lines(model, bw, precision)
    if levels == ("DRAM",):
        lines = [ln for ln in lines if ln[0] == "peak" or "device memory" in ln[1]]
    return lines


def levels_note(rows):
    """Which levels the run measured: the levels the chart can place points by."""
    have = sorted({lv for r in rows for lv in traffic.level_bytes(r["counters"])},
                  key=[lv for lv, _ in traffic.LEVELS].index)
    return "levels measured: " + (", ".join(have) if have else "none")


def measured_frame(lines, series):
    peaks = [v for k, _, v, s in lines if k == "peak"]
    bws = [v for k, _, v, s in lines if k == "bw"]
    top = max(peaks, default=None)
    xs = [ai for s in series for _, ai, _ in s["points"]] + [top / b for b in bws if top] + [0.05, 50]
    ys = [y for s in series for _, _, y in s["points"]] + peaks + [b * 0.05 for b in bws]
    return limits(xs, ys)


def draw_measured(axis, lines, series, precision, title, note, names):
    """A measured chart on a matplotlib axis: ceilings labelled on their lines, a colour per
    precision (points of another precision than the chart's hollow), a marker per level."""
    xlim, ylim = measured_frame(lines, series)
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlim(*xlim)
    axis.set_ylim(*ylim)
    bws = [v for k, _, v, s in lines if k == "bw"]
    top = max((v for k, _, v, s in lines if k == "peak"), default=None)
    styles = {"solid": "-", "dashed": "--", "dotted": ":"}
    for i, (kind, label, value, style) in enumerate(lines):
        color = "#777" if style == "dashed" else ("#333" if kind == "peak" else COLORS[i % len(COLORS)])
        if kind == "peak":
            start = max(value / max(bws), xlim[0]) if bws else xlim[0]
            axis.plot([start, xlim[1]], [value, value], styles[style], color=color, lw=1.5)
            # Textbook labels at the left end, measured ones at the right, so that close ceilings stay legible.
            axis.text(start * 1.1 if style == "dashed" else xlim[1] / 1.1, value * 1.04, label, fontsize=7,
                      ha="left" if style == "dashed" else "right", va="bottom", color=color)
            continue
        end, start = min(xlim[1], top / value) if top else xlim[1], max(xlim[0], ylim[0] / value)
        if start >= end:
            continue
        axis.plot([start, end], [value * start, value * end], styles[style], color=color, lw=1.5)
        lx = start * (end / start) ** (0.1 if style == "dashed" else 0.45)
        (x1, y1), (x2, y2) = axis.transData.transform([(lx, value * lx), (lx * 10, value * lx * 10)])
        axis.text(lx, value * lx * 1.15, label, fontsize=7, color=color, ha="left", va="bottom",
                  rotation=math.degrees(math.atan2(y2 - y1, x2 - x1)), rotation_mode="anchor")
    own = TEXTBOOK_KEY.get(precision)
    for s in series:
        color = PREC_COLORS.get(s["precision"], "#777")
        xs, ys = [p[1] for p in s["points"]], [p[2] for p in s["points"]]
        if len(xs) > 1:
            axis.plot(xs, ys, "-", color=color, lw=0.8, alpha=0.6)
        for level, x, y in s["points"]:
            axis.plot([x], [y], LEVEL_MARKERS[level], color=color, ms=4 + 8 * (s["share"] or 0),
                      mfc=color if s["precision"] == own else "none")
        if names:
            axis.annotate(short_name(s["name"]), (xs[0], ys[0]), fontsize=6, xytext=(4, 4), textcoords="offset points")
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], ls="", marker="o", color=c, mfc=c if p == own else "none",
                      label=p + (" (this chart's peaks)" if p == own else " (hollow: its own peak is elsewhere)"))
               for p, c in PREC_COLORS.items() if any(s["precision"] == p for s in series)]
    handles += [Line2D([], [], ls="", marker=m, color="#555", label=lv) for lv, m in LEVEL_MARKERS.items()
                if any(p[0] == lv for s in series for p in s["points"])]
    if handles:
        axis.legend(handles=handles, fontsize=7, loc="lower right")
    axis.set_xlabel("arithmetic intensity (FLOP/byte, measured)")
    axis.set_ylabel("FLOP/s (executed)")
    axis.set_title(title, fontsize=10)
    axis.text(0.01, 0.99, note, transform=axis.transAxes, fontsize=7, va="top", color="#555")
    axis.grid(True, which="major", alpha=0.3)


def measured_svg(lines, series, precision, title, note, names):
    """The same chart as plain SVG text."""
    ax = charts.LogLog(*measured_frame(lines, series))
    out = charts.svg_open(ax.x0 + ax.w + 40, ax.y0 + ax.h + 60)
    out += ax.frame("arithmetic intensity (FLOP/byte, measured)", "FLOP/s (executed)", title)
    out += svg_ceilings(ax, lines)
    own = TEXTBOOK_KEY.get(precision)
    for s in series:
        color = PREC_COLORS.get(s["precision"], "#777")
        fill = color if s["precision"] == own else "none"
        pts = [(ax.x(x), ax.y(y), level) for level, x, y in s["points"]]
        if len(pts) > 1:
            out.append(f'<polyline fill="none" stroke="{color}" stroke-width="0.8" points="'
                       + " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in pts) + '"/>')
        for x, y, level in pts:
            shape = {"circle": f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5"',
                     "rect": f'<rect x="{x - 3:.1f}" y="{y - 3:.1f}" width="6" height="6"',
                     "triangle": f'<polygon points="{x:.1f},{y - 4:.1f} {x - 4:.1f},{y + 3:.1f} {x + 4:.1f},{y + 3:.1f}"'}
            out.append(f'{shape[SVG_MARKERS[level]]} fill="{fill}" stroke="{color}">'
                       f'<title>{escape(s["name"])} {level} ({escape(s["precision"])})</title>'
                       + ("</circle>" if level == "L1" else "</rect>" if level == "L2" else "</polygon>"))
        if names:
            out.append(f'<text x="{pts[0][0] + 5:.1f}" y="{pts[0][1] - 5:.1f}" font-size="9">{escape(short_name(s["name"]))}</text>')
    legend = "; ".join(f"{p}: {c}" for p, c in PREC_COLORS.items() if any(s["precision"] == p for s in series))
    out.append(f'<text x="{ax.x0 + 4}" y="{ax.y0 + 14}" fill="#555">{escape(note)}</text>')
    out.append(f'<text x="{ax.x0}" y="{ax.y0 + ax.h + 55}" fill="#555">colours by precision ({escape(legend)}; '
               f'hollow: not {escape(own or precision)}); markers: circle L1, square L2, triangle DRAM; '
               f'solid: empirical ceilings, dashed: textbook</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_measured(stem, model, rows, precision, title, names=False):
    """The three charts from measured traffic, SVG and PNG, at <stem>-<dram|l1|hierarchical>;
    returns notes (what was written, what could not be placed)."""
    notes, note = [], levels_note(rows)
    for suffix, what, levels in MEASURED_CHARTS:
        series, skipped = measured_series(rows, levels)
        lines = measured_lines(model, precision, levels)
        text = f"{note}; {skipped} not placed (no flops executed, or no bytes at the level)" if skipped else note
        chart_title = f"{title}: {what}"
        for ext in ("svg", "png"):
            path = f"{stem}-{suffix}.{ext}"
            why = charts.write(path, lambda axis: draw_measured(axis, lines, series, precision, chart_title, text, names),
                               (lambda: measured_svg(lines, series, precision, chart_title, text, names))
                               if ext == "svg" else None)
            notes.append(f"no {path}: {why}" if why else f"wrote {path} ({len(series)} points)")
    return notes


# ---------------------------------------------------------------- console

def report(device, files, compute, tensor, bw, model, checks, acceptance, precision, tolerance, notes):
    """The console text: what was found and how."""
    out = [f"roofline of {device} from {len(files)} file(s); values are medians over repetitions"]
    out.append("compute peaks (max over widths of the medians):")
    for kind in TYPES:
        if kind in compute:
            c = compute[kind]
            cells = [f"{text} {si(c[slot]['value'], c[slot]['unit'])} ({c[slot]['benchmarks'][0]})"
                     for slot, text in (("fma", "FMA"), ("no_fma", "no FMA")) if slot in c]
            out.append(f"  {kind:7s} " + "; ".join(cells))
    if not compute:
        out.append("  none (no compute/*/mad|add|mul rows)")
    if tensor:
        out.append("tensor ceilings (not in the models): " + "; ".join(
            f"{k} {si(v['value'], v['unit'])}" for k, v in sorted(tensor.items())))
    out.append(f"bandwidth levels (plateaus of the cache family, tolerance {tolerance:.0%}; a level's "
               f"ceiling is its plateau's median):")
    for key, curve in bw["curves"].items():
        llc = curve["cache_bytes"]
        out.append(f"  {key}: {len(curve['points'])} working sets, last-level cache "
                   f"{size(llc) if llc else 'unknown'}")
        for lv in curve["levels"]:
            out.append(f"    {lv['name']:14s} {lv['range']:22s} {si(lv['value'], 'B/s'):>12s}  "
                       f"({len(lv['benchmarks'])} points)")
    if not bw["curves"]:
        out.append("  none: no cache family found")
    if bw["local"]:
        out.append(f"local/shared memory: {si(bw['local']['value'], 'B/s')} ({bw['local']['benchmarks'][0]})")
    for op, c in bw["memory"].items():
        out.append(f"memory {op}: {si(c['value'], 'B/s')} ({c['benchmarks'][0]})")
    dm = bw["device_memory"]
    if dm:
        extra = f"; triad/plateau = {dm['triad_ratio']:.2f}" if "triad_ratio" in dm else ""
        out.append(f"device memory ceiling: {si(dm['value'], 'B/s')} from {dm['source']}{extra}")
    orm = model["orm"]
    if precision in orm["ridges"]:
        r = orm["ridges"][precision]
        out.append(f"ORM ({precision}): ridge " + ", ".join(
            f"{'FMA' if k == 'fma' else 'no FMA'} {v:.3g} FLOP/byte" for k, v in r.items() if v))
    if model["carm"]["ridges"]:
        out.append(f"CARM ridges ({precision} FMA, FLOP/byte): " + ", ".join(
            f"{name} {r[precision]:.3g}" for name, r in model["carm"]["ridges"].items() if r.get(precision)))
    tb = model["textbook"]
    if tb:
        out.append(f"textbook ({tb['source']}): " + ", ".join(
            f"{k} {si(v, tb['units'][k])}" for k, v in tb["peaks"].items()))
        if precision in tb["ridges"]:
            out.append("  textbook ridges (FLOP/byte): " + ", ".join(
                f"{k} {v:.3g}" for k, v in tb["ridges"][precision].items() if v))
    if checks:
        out.append(f"roof check of the flops sweep (attained / roof(AI); acceptance: within "
                   f"{ACCEPT:.0%} on both sides of the ridge, the knee (AI within {KNEE:g}x of the "
                   f"ridge, marked *) reported but not judged):")
        out.append(f"  {'benchmark':44s} {'AI':>8s} {'attained':>12s} {'roof':>12s} {'ratio':>6s}  bound/ceiling")
        for r in checks:
            ratio = f"{r['ratio']:.2f}" if r["ratio"] is not None else "-"
            out.append(f"  {r['benchmark'][:44]:44s} {r['ai']:8.3g} {si(r['attained'], 'FLOP/s'):>12s} "
                       f"{si(r['roof'], 'FLOP/s'):>12s} {ratio:>6s}  {r['bound'] or '-'}/{r['ceiling'] or '-'}"
                       + (" *" if r.get("knee") else ""))
        for source, a in [("all", acceptance)] + list(acceptance["by_source"].items()):
            sides = ", ".join(f"{side.replace('_', '-')} {a[side]['within']}/{a[side]['points']} within {ACCEPT:.0%}"
                              for side in ("memory_bound", "compute_bound"))
            out.append(f"  {source}: {sides}: {'met' if a['met'] else 'NOT met'}")
        out.append(f"  acceptance: {'met' if acceptance['met'] else 'NOT met'} ({acceptance['knee_points']} knee points not judged)")
    else:
        out.append("roof check: no flops family points (flops/<be>/<dram|cache>/<type>/flops:N)")
    out += [f"note: {n}" for n in notes]
    return "\n".join(out) + "\n"
