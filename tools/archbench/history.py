"""Headline archbench figures of one device across driver/runtime versions.

Usage: archbench_history.py [--device SUBSTRING] [--results DIR] [--format console|markdown]
                            [--plot FILE.svg]

Reads every results JSON under DIR (default results/), keeps the runs whose context "device"
contains SUBSTRING (case-insensitive), groups them by (driver_version, runtime_version,
archbench_version: a change of the benchmarks themselves is a confound like a driver's) and
prints one row per group, sorted by run date: best compute rate per type (median over the
repetitions, max over benchmarks; flop_per_s, or op_per_s for int), best byte_per_s of
memory/*/triad, memory/*/copy and all memory/, and the median ns_per_access of latency/ at
the smallest and largest working set. --plot writes an SVG chart. Standard library only.
"""

import argparse
import math
import re
import statistics
import sys
from datetime import datetime
from .cli import html as escape

from . import charts, cli
from . import results as ar
from .cli import md

TYPES = ("int", "float", "double", "half")
SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024 ** 2, "mb": 1024 ** 2,
              "mib": 1024 ** 2, "g": 1024 ** 3, "gb": 1024 ** 3, "gib": 1024 ** 3}
SIZE_AXES = ("bytes", "size", "ws", "working_set", "workingset", "footprint", "buffer")
SIZE_RE = re.compile(r"(?:^|[:=])(\d+(?:\.\d+)?)([kmg]?i?b?)$", re.IGNORECASE)


def run_time(context):
    """The run's date as a POSIX timestamp (inf when missing or unparsable)."""
    try:
        return datetime.fromisoformat(str(context.get("date", ""))).timestamp()
    except (ValueError, OverflowError, OSError):
        return math.inf


def working_set(axes):
    """The working-set size in bytes of a latency benchmark (a size-like axis first, else the last
    number); a value may be a number of bytes or a text such as 4KiB."""
    values = [v for k, v in axes.items() if k not in ("family", "backend")]
    preferred = [v for k, v in axes.items() if k.lower() in SIZE_AXES]
    for value in reversed(preferred or values):
        if ar.number(value) is not None:
            return float(value)
        m = SIZE_RE.search(str(value))
        if m and m.group(2).lower() in SIZE_UNITS:
            return float(m.group(1)) * SIZE_UNITS[m.group(2).lower()]
    return None


def headline_columns():
    """The headline metrics, in display order: (key, label, higher is better)."""
    cols = [(f"compute/{t}", f"compute {t} (op/s)" if t == "int" else f"compute {t} (flop/s)", True)
            for t in TYPES]
    cols += [("memory/triad", "triad (B/s)", True), ("memory/copy", "copy (B/s)", True),
             ("memory/max", "memory max (B/s)", True),
             ("latency/smallest", "latency smallest ws (ns)", False),
             ("latency/largest", "latency largest ws (ns)", False)]
    return cols


def headlines(benches):
    """Headline figures of one group's merged benchmarks: key -> value."""
    out, latency = {}, {}

    def best(key, value):
        out[key] = max(out.get(key, value), value)

    for bench in benches.values():
        if bench.error:
            continue
        axes, family = bench.axes, bench.axes.get("family")
        med = {m: statistics.median(v) for m in ar.values_of_keys(bench) if (v := ar.values_of(bench, m))}
        if family == "compute":
            kind = axes.get("scalar")
            rate = med.get("flop_per_s", med.get("op_per_s"))
            if kind in TYPES and rate is not None:
                best(f"compute/{kind}", rate)
        elif family == "memory" and "byte_per_s" in med:
            best("memory/max", med["byte_per_s"])
            if axes.get("op") in ("triad", "copy"):
                best(f"memory/{axes['op']}", med["byte_per_s"])
        elif family == "latency" and "ns_per_access" in med:
            ws = working_set(axes)
            if ws is not None:
                latency.setdefault(ws, []).extend(ar.values_of(bench, "ns_per_access"))
    if latency:
        out["latency/smallest"] = statistics.median(latency[min(latency)])
        out["latency/largest"] = statistics.median(latency[max(latency)])
    return out


def collect(folder, device):
    """(device, groups of its runs: [(driver, runtime, archbench, first date, run count, headlines)] by date)."""
    files = ar.result_files(folder)
    runs, devices = [], set()
    for path in files:
        context, entries = ar.read_results(path)  # a broken file is an error: nothing silently left out
        devices.add(str(context.get("device", "")))
        runs.append((context, entries))
    if device is None:
        if len(devices) != 1:
            raise ar.InputError(f"{folder}: results for {len(devices)} devices; pick one with --device "
                                f"({', '.join(sorted(devices))})")
        device = devices.pop()
    groups = {}
    for context, entries in runs:
        if device.lower() not in str(context.get("device", "")).lower():
            continue
        key = (str(context.get("driver_version", "?")), str(context.get("runtime_version", "?")),
               str(context.get("archbench_version", "?")))
        g = groups.setdefault(key, {"date": math.inf, "label": "", "runs": 0, "benches": {}})
        when = run_time(context)
        if when <= g["date"]:
            g["date"], g["label"] = when, str(context.get("date", ""))[:10]
        g["runs"] += 1
        ar.add_entries(g["benches"], entries)
    if not groups:
        raise ar.InputError(f"{folder}: no results for a device matching {device!r} "
                            f"(devices: {', '.join(sorted(devices)) or 'none'})")
    ordered = sorted(groups.items(), key=lambda kv: (kv[1]["date"], kv[0]))
    return device, [(*key, g["label"], g["runs"], headlines(g["benches"])) for key, g in ordered]


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


def chart_columns(groups):
    """The headline metrics some version group has: (key, label, higher is better)."""
    return [c for c in headline_columns() if any(c[0] in g[-1] for g in groups)]


def group_label(g, groups):
    """The driver, with the runtime and the archbench version where those differ across groups."""
    return " / ".join([g[0]] + [g[k] for k in (1, 2) if len({r[k] for r in groups}) > 1])


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


def parse_args(argv):
    """The command line."""
    p = argparse.ArgumentParser(description="Headline archbench figures of one device per driver/runtime version.")
    p.add_argument("--device", metavar="SUBSTRING",
                   help="part of the context's device name (needed when the results hold several devices)")
    p.add_argument("--results", metavar="DIR", default="results", help="folder of results JSON (default results/)")
    p.add_argument("--format", choices=("console", "markdown"), default="console", help="table format")
    p.add_argument("--plot", metavar="FILE.svg|FILE.png",
                   help="also write line charts of the headline figures (matplotlib, else plain SVG)")
    return p.parse_args(argv)


def run(argv):
    """Print the history table; returns the exit code or raises InputError."""
    args = parse_args(argv)
    device, groups = collect(args.results, args.device)
    sys.stdout.write(render(groups, args.format == "markdown"))
    if args.plot:
        why = charts.write(args.plot, lambda axis: draw_chart(axis, groups, device), lambda: svg_chart(groups, device))
        if why:
            raise ar.InputError(why)
    return 0


def main(argv=None):
    """The command line; returns the exit code (2 on bad input)."""
    return cli.run("archbench_history", run, argv)

