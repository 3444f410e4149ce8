"""Roofline models of one device from archbench results (reads JSON, never re-measures).

Usage: archbench_roofline.py RESULTS [RESULTS ...] [--precision float|double|half] [--tolerance 0.15]
                             [--svg FILE] [--png FILE] [--energy-svg FILE] [--json FILE]
                             [--peak NAME=VALUE ...] [--cache-level NAME] [--title TEXT]

RESULTS are results files or folders (every *.json below); all must be of the same context
"device" (else exit 2). Each benchmark's value is the median over its repetitions: the "median"
aggregate rows when present, else the median of the iteration rows.

Ceilings:
  compute    per type (int, float, double, half, bfloat): with FMA = max over widths of
             compute/*/mad/<type><width>, without FMA = max of compute/*/add|mul/<type><width>
             (flop_per_s; op_per_s for int); compute/cuda/mma|wgmma/<t> are listed as tensor
             ceilings (console and JSON only).
  levels     cache/<be>/read/bytes:N (and rmw, as a second curve): a plateau is a maximal run of
             at least 2 consecutive working sets whose byte_per_s all lie within --tolerance
             (relative) of the run's median; the longest such run is taken first, then the
             longest in what is left on either side. Plateaus from the smallest working set up are
             L1, L2, ...; the last one, when it reaches past the context's cache_bytes (or when
             cache_bytes is unknown), is device memory. A level's ceiling is its plateau's median.
  local      local/*/read/stride:1 (byte_per_s), the shared/local memory ceiling.
  memory     memory/*/triad|copy|add/... (best byte_per_s). Device memory is the cache family's
             device-memory plateau when there is one, else triad; both are reported.
Models: ORM (device memory and compute peaks) and CARM (one bandwidth ceiling per level), with
ridge points (peak / bandwidth, FLOP/byte); the textbook roofline from published peaks of known
devices (matched by a substring of the device name; --peak fp32|fp64|fp16|dram|shared=VALUE, in
FLOP/s or B/s, SI suffixes k M G T P allowed, overrides or supplies them).
Roof check: every flops/<be>/<dram|cache>/<type>/flops:N point (AI = flop_per_s / byte_per_s) is
compared with roof(AI) = min(FMA peak of its type, bandwidth x AI), dram points against device
memory, cache points against the last cache level before device memory (--cache-level picks
another, e.g. L1); acceptance: attained within 10% of the roof on both sides of the ridge, the
knee (points within 4x of the ridge's AI) reported but not judged; also per source (dram, cache).

Options:
  --precision    the compute ceilings drawn (default float)
  --tolerance    plateau tolerance, relative (default 0.15)
  --svg FILE     roofline chart (default roofline.svg); always written: with matplotlib where
                 importable, else the plain SVG (charts.py; ARCHBENCH_CHARTS=svg forces it)
  --png FILE     the same chart as PNG with matplotlib when importable (default: the SVG's name
                 with .png); says so when it cannot be written
  --energy-svg   energy roofline (flop_per_joule against AI) when energy counters exist
  --json FILE    ceilings, models, ridges, textbook peaks and the roof check as JSON
  --title TEXT   chart title
Measured traffic (archbench --traffic): where benchmarks carry traffic_* and exec_* counters, three
more charts beside --svg, <stem>-dram (ORM: intensity over measured DRAM bytes), <stem>-l1 (CARM:
over L1 and shared bytes) and <stem>-hierarchical (a point per measured level, joined), SVG and PNG;
y is executed FLOP/s. --program -- PROGRAM ARGS places any CUDA program's kernels (program.py).
Exit: 0 done, 2 bad input (malformed file, files of several devices, bad option).
"""

import argparse
import json
import math
import os
import re
import statistics
import sys
from .cli import html as escape

from . import charts, cli, traffic
from .charts import si

from . import results as ar
from .results import median_of

TOOL = "archbench_roofline"
TYPES = ("int", "float", "double", "half", "bfloat")
PRECISIONS = ("float", "double", "half")
TEXTBOOK_KEY = {"float": "fp32", "double": "fp64", "half": "fp16"}
ACCEPT = 0.10  # the roof check's acceptance: within 10% of the roof
# Points within this factor of the ridge (the two octaves either side of it) are the knee, where
# a kernel must keep both the memory and the FMA pipes busy at once and attained performance
# falls below both ceilings on any real machine: they are reported, not judged; the acceptance
# is about the two arms of the roof.
KNEE = 4.0
SI = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
# Published peaks (FLOP/s, B/s) of known devices, keyed by a substring of the context's device
# name: textbook.json beside this file, which archbench's summary screen reads too.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "textbook.json"), encoding="utf-8") as _f:
    TEXTBOOK = tuple((d["match"], d["source"], d["peaks"]) for d in json.load(_f)["devices"])
PEAK_NAMES = ("fp32", "fp64", "fp16", "dram", "shared")
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


def size(nbytes):
    """A working-set size in KiB/MiB/GiB."""
    for unit, scale in (("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes:g} B"


# ---------------------------------------------------------------- reading

def load(paths):
    """Read the files; returns (device, merged context, name -> Bench, files, backend -> cache_bytes)."""
    files, devices, context, benches, cache_bytes = [], {}, {}, {}, {}
    for path in paths:
        files += ar.result_files(path)
    for file in files:
        ctx, entries = ar.read_results(file)
        devices.setdefault(str(ctx.get("device", "")), []).append(file)
        for key, value in ctx.items():
            context.setdefault(key, value)
        cb = ar.number(ar.to_float(ctx.get("cache_bytes")))
        backend = str(ctx.get("backend", ""))
        if cb:
            cache_bytes[backend] = max(cache_bytes.get(backend, 0.0), cb)
        ar.add_entries(benches, entries, energy=True)
    if len(devices) != 1:
        raise ar.InputError("files of %d devices (%s): a roofline is of one device; give the files of one "
                            "device" % (len(devices), "; ".join(f"{d or '(none)'}: {', '.join(f)}"
                                                                  for d, f in sorted(devices.items()))))
    return next(iter(devices)), context, benches, files, cache_bytes


# ---------------------------------------------------------------- ceilings

def compute_peaks(benches):
    """(type -> {"fma": ceiling, "no_fma": ceiling}, tensor name -> ceiling) from the compute family."""
    peaks, tensor = {}, {}
    for name, bench in benches.items():
        axes = bench.axes
        if not plain_compute(axes):
            continue
        op, kind = axes.get("op"), str(axes["type"])
        if op in ("mma", "wgmma"):
            metric = "op_per_s" if kind.startswith("int") else "flop_per_s"
            value = median_of(bench, metric)
            key = f"{op}/{kind}"
            if value is not None and value > tensor.get(key, {}).get("value", 0):
                tensor[key] = ceiling(value, "OP/s" if metric == "op_per_s" else "FLOP/s", [name],
                                      "median over repetitions")
            continue
        kind = axes.get("scalar")
        if kind not in TYPES or op not in ("mad", "add", "mul"):
            continue
        metric = "op_per_s" if kind == "int" else "flop_per_s"
        value = median_of(bench, metric)
        if value is None:
            continue
        slot = "fma" if op == "mad" else "no_fma"
        cur = peaks.setdefault(kind, {}).get(slot)
        if cur is None or value > cur["value"]:
            peaks[kind][slot] = ceiling(value, "OP/s" if kind == "int" else "FLOP/s", [name],
                                        "max over widths (and backends) of the medians")
    return peaks, tensor


def plain_compute(axes):
    """True for a compute benchmark over op and type alone (no other axis of its name, such as
    groups; the axes that only describe it, scalar, width and chains, do not count)."""
    return axes.get("family") == "compute" and "op" in axes and "type" in axes \
        and not set(axes) - {"family", "backend", "op", "type", "scalar", "width", "chains"}


def ceiling(value, unit, sources, method, **extra):
    """One ceiling as reported in the JSON."""
    return {"value": value, "unit": unit, "benchmarks": sources, "method": method, **extra}


def find_plateaus(values, tolerance):
    """Plateaus of a curve as (start, end) index pairs (end exclusive), in order.

    A plateau is a run of at least 2 consecutive points all within tolerance (relative) of the run's
    median. The longest run is taken first (the leftmost among equals), then the same is done in
    what is left on either side, so a transition point between two levels is not a level."""
    def fits(lo, hi):
        m = statistics.median(values[lo:hi])
        return m > 0 and all(abs(v - m) <= tolerance * m for v in values[lo:hi])

    def search(lo, hi):
        best = None
        for i in range(lo, hi - 1):
            j = i + 2
            if not fits(i, j):
                continue
            end = j
            for k in range(j + 1, hi + 1):
                if fits(i, k):
                    end = k
            if best is None or end - i > best[1] - best[0]:
                best = (i, end)
        if best is None:
            return []
        return search(lo, best[0]) + [best] + search(best[1], hi)

    return search(0, len(values))


def cache_curves(benches):
    """(backend, op) -> [(working set, byte_per_s, name)] of the cache family, by working set."""
    curves = {}
    for name, bench in benches.items():
        axes = bench.axes
        if axes.get("family") != "cache" or axes.get("op") not in ("read", "rmw"):
            continue
        ws, value = ar.number(axes.get("bytes")), median_of(bench, "byte_per_s")
        if ws is not None and value is not None:
            curves.setdefault((axes["backend"], axes["op"]), []).append((int(ws), value, name))
    return {key: sorted(points) for key, points in curves.items()}


def levels_of(points, tolerance, llc):
    """The memory levels of one working-set curve: [{name, range_bytes, value, ...}], smallest first."""
    values = [v for _, v, _ in points]
    spans = find_plateaus(values, tolerance)
    levels = []
    for n, (lo, hi) in enumerate(spans):
        ws_lo, ws_hi = points[lo][0], points[hi - 1][0]
        last = n == len(spans) - 1
        is_dram = last and (not llc or ws_hi > llc)
        label = "device memory" if is_dram else f"L{n + 1}"
        levels.append(ceiling(statistics.median(values[lo:hi]), "B/s", [p[2] for p in points[lo:hi]],
                              f"median of the plateau ({hi - lo} working sets within "
                              f"{tolerance:.0%} of their median)",
                              name=label, range_bytes=[ws_lo, ws_hi],
                              range=f"{size(ws_lo)} - {size(ws_hi)}", device_memory=is_dram))
    return levels


def best_of(benches, family, ops, metric, stride1=False):
    """The best median of a metric over family/*/<op>/... (stride:1 only with stride1): a ceiling or None."""
    best = None
    for name, bench in benches.items():
        axes = bench.axes
        if axes.get("family") != family or axes.get("op") not in ops:
            continue
        if stride1 and {k: v for k, v in axes.items() if k not in ("family", "backend", "op")} != {"stride": 1}:
            continue
        value = median_of(bench, metric)
        if value is not None and (best is None or value > best["value"]):
            best = ceiling(value, "B/s", [name], "max over backends and types of the medians")
    return best


def bandwidths(benches, tolerance, cache_bytes, notes):
    """The bandwidth ceilings: cache levels (read and rmw curves), local, memory/*, device memory."""
    out = {"curves": {}, "levels": [], "local": None, "memory": {}, "device_memory": None}
    curves = cache_curves(benches)
    if not curves:
        notes.append("no cache family (cache/<be>/read/bytes:N) found: no per-level ceilings (CARM has "
                     "local memory and device memory only)")
    for (backend, op), points in sorted(curves.items()):
        llc = cache_bytes.get(backend) or max(cache_bytes.values(), default=0)
        levels = levels_of(points, tolerance, llc)
        out["curves"][f"cache/{backend}/{op}"] = {"points": [[ws, v] for ws, v, _ in points],
                                                   "cache_bytes": llc or None, "levels": levels}
        if not llc:
            notes.append(f"cache/{backend}/{op}: context cache_bytes unknown: the last plateau is taken "
                         f"as device memory")
        elif levels and not levels[-1]["device_memory"]:
            notes.append(f"cache/{backend}/{op}: no plateau reaches past the last-level cache "
                         f"({size(llc)}): no device-memory level from this curve")
        if len(points) >= 2 and len(levels) == 0:
            notes.append(f"cache/{backend}/{op}: no plateau within {tolerance:.0%}")
    reads = [(len(c["points"]), k) for k, c in out["curves"].items() if k.endswith("/read")]
    if reads:
        primary = max(reads)[1]
        out["primary"] = primary
        out["levels"] = out["curves"][primary]["levels"]
        if len(reads) > 1:
            notes.append(f"several cache read curves; the models use {primary} (the one with most points)")
    out["local"] = best_of(benches, "local", ("read",), "byte_per_s", stride1=True)
    if out["local"] is None:
        notes.append("no local/*/read/stride:1: no shared/local memory ceiling")
    for op in ("triad", "copy", "add"):
        found = best_of(benches, "memory", (op,), "byte_per_s")
        if found:
            out["memory"][op] = found
    dram = next((lv for lv in out["levels"] if lv["device_memory"]), None)
    triad = out["memory"].get("triad")
    if dram:
        out["device_memory"] = dict(dram, source="cache family plateau")
        if triad:
            out["device_memory"]["triad_ratio"] = triad["value"] / dram["value"]
    elif triad:
        out["device_memory"] = dict(triad, name="device memory", source="memory/*/triad")
        notes.append("device memory from memory/*/triad (no device-memory plateau of the cache family)")
    else:
        notes.append("no device-memory bandwidth (neither a cache-family plateau nor memory/*/triad)")
    return out


# ---------------------------------------------------------------- models

def ridge(peak, bandwidth):
    """The ridge point: the arithmetic intensity (FLOP/byte) where bandwidth x AI meets the peak."""
    return peak / bandwidth if peak and bandwidth else None


def roof(ai, peak, bandwidth):
    """The attainable FLOP/s at an arithmetic intensity."""
    return min(peak, bandwidth * ai)


def textbook_peaks(device, overrides, notes):
    """(source text, {name: value}) of the published peaks of a known device, with --peak overrides."""
    source, peaks = None, {}
    for key, text, values in TEXTBOOK:
        if key.lower() in device.lower():
            source, peaks = f"{text}, matched by '{key}'", dict(values)
            break
    if overrides:
        peaks.update(overrides)
        source = (source + "; " if source else "") + "--peak " + ", ".join(sorted(overrides))
    if not peaks:
        notes.append(f"no published peaks known for '{device}' (give them with --peak NAME=VALUE): "
                     f"no textbook roofline")
        return None
    return {"source": source, "peaks": peaks,
            "units": {k: "B/s" if k in ("dram", "shared") else "FLOP/s" for k in peaks}}


def models(device, compute, bw, textbook, tolerance):
    """The ORM, CARM and textbook models with their ridge points."""
    dram = bw["device_memory"]
    orm = {"device_memory": dram, "compute": {}, "ridges": {}}
    carm = {"levels": [], "ridges": {}}
    for kind in PRECISIONS + ("bfloat", "int"):
        if kind not in compute:
            continue
        orm["compute"][kind] = compute[kind]
        if dram:
            orm["ridges"][kind] = {slot: ridge(compute[kind][slot]["value"], dram["value"])
                                  for slot in ("fma", "no_fma") if slot in compute[kind]}
    levels = list(bw["levels"])
    if bw["local"]:
        levels.insert(0, dict(bw["local"], name="local/shared"))
    if dram and not any(lv.get("device_memory") for lv in levels):
        levels.append(dram)
    for lv in levels:
        carm["levels"].append(lv)
        carm["ridges"][lv["name"]] = {kind: ridge(compute[kind]["fma"]["value"], lv["value"])
                                      for kind in compute if "fma" in compute[kind]}
    tb = None
    if textbook:
        p = textbook["peaks"]
        tb = dict(textbook, ridges={})
        for kind, key in TEXTBOOK_KEY.items():
            if key in p:
                tb["ridges"][kind] = {bwk: ridge(p[key], p[bwk]) for bwk in ("dram", "shared") if bwk in p}
    return {"device": device, "tolerance": tolerance, "ridge_unit": "FLOP/byte",
            "ceiling_method": "compute: max over widths of the medians; levels: median of each plateau",
            "orm": orm, "carm": carm, "textbook": tb}


# ---------------------------------------------------------------- points and the roof check

def points_of(benches):
    """Every benchmark with both flop_per_s and byte_per_s: [{name, ai, flop_per_s, ...}]."""
    out = []
    for name, bench in sorted(benches.items()):
        f, b = median_of(bench, "flop_per_s"), median_of(bench, "byte_per_s")
        if f and b and f > 0 and b > 0:
            out.append({"name": name, "ai": f / b, "flop_per_s": f, "byte_per_s": b,
                        "flop_per_joule": median_of(bench, "flop_per_joule"), "axes": bench.axes})
    return out


def flops_series(points):
    """(source, type) -> the flops family's points, by arithmetic intensity."""
    series = {}
    for p in points:
        axes = p.get("axes") or ar.axes_of_name(p["name"])[0]  # a point given by its name only
        if axes.get("family") == "flops" and "source" in axes and "type" in axes:
            series.setdefault((axes["source"], axes["type"]), []).append(p)
    return {k: sorted(v, key=lambda p: p["ai"]) for k, v in sorted(series.items())}


def cache_level_for(bw, wanted, notes):
    """The level the flops cache points are checked against."""
    levels = [lv for lv in bw["levels"] if not lv["device_memory"]]
    if wanted:
        pick = next((lv for lv in levels + ([bw["local"]] if bw["local"] else [])
                     if lv.get("name", "local/shared").lower() == wanted.lower()), None)
        if pick is None:
            notes.append(f"--cache-level {wanted}: no such level (have: "
                         f"{', '.join(lv['name'] for lv in levels) or 'none'})")
        return pick
    return levels[-1] if levels else None


def roof_check(points, compute, bw, cache_level, notes):
    """attained / roof(AI) for every flops point; returns (rows, acceptance)."""
    rows = []
    for (source, kind), series in flops_series(points).items():
        peak = compute.get(kind, {}).get("fma")
        level = bw["device_memory"] if source == "dram" else cache_level
        for p in series:
            row = {"benchmark": p["name"], "source": source, "type": kind, "ai": p["ai"],
                   "attained": p["flop_per_s"], "roof": None, "ratio": None, "bound": None,
                   "ceiling": level.get("name", "local/shared") if level else None}
            if peak and level:
                r = roof(p["ai"], peak["value"], level["value"])
                ridge_ai = ridge(peak["value"], level["value"])
                row.update(roof=r, ratio=p["flop_per_s"] / r, knee=ridge_ai / KNEE < p["ai"] < ridge_ai * KNEE,
                           bound="memory" if p["ai"] < ridge_ai else "compute")
            rows.append(row)
        if not peak or not level:
            notes.append(f"flops {source}/{kind}: no " + ("FMA peak" if not peak else f"{source} bandwidth ceiling")
                         + ": not checked against the roof")
    def judge(judged):
        out = {}
        for side in ("memory", "compute"):
            checked = [r for r in judged if r["bound"] == side and not r.get("knee")]
            out[side + "_bound"] = {
                "points": len(checked),
                "within": sum(abs(r["ratio"] - 1) <= ACCEPT for r in checked),
                "worst_ratio": min((r["ratio"] for r in checked), key=lambda x: -abs(x - 1), default=None)}
        out["met"] = all(a["points"] and a["within"] == a["points"] for a in out.values()) if judged else None
        return out

    acceptance = judge(rows)
    acceptance["tolerance"] = ACCEPT
    acceptance["knee_factor"] = KNEE
    acceptance["knee_points"] = sum(bool(r.get("knee")) for r in rows)
    acceptance["by_source"] = {src: judge([r for r in rows if r["source"] == src])
                               for src in sorted({r["source"] for r in rows})}
    return rows, acceptance


# ---------------------------------------------------------------- charts

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


def compute_energy(benches):
    """Best flop_per_joule of compute/*/mad/<type><width> per type."""
    out = {}
    for name, bench in benches.items():
        if plain_compute(bench.axes) and bench.axes["op"] == "mad":
            kind = bench.axes.get("scalar")
            v = median_of(bench, "flop_per_joule")
            if v and kind in TYPES and v > out.get(kind, {}).get("value", 0):
                out[kind] = ceiling(v, "FLOP/J", [name], "max over widths of the medians")
    return out


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


def place(r):
    """traffic.placement of a measured row; a benchmark (a row with axes) by its own precision's
    flops, fp16 counted in one of another precision left out (the compiler's HFMA2 moves,
    traffic.MOVES: an int kernel is then not placed)."""
    axes = r.get("axes")
    prec = traffic.precision_of(axes) if axes else None
    counters = r["counters"]
    if axes and prec != "fp16":
        counters = {k: v for k, v in counters.items() if k != "exec_flops_fp16"}
    return traffic.placement(counters, r["seconds"], prec)


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


# ---------------------------------------------------------------- main

def parse_peak(text):
    """NAME=VALUE of --peak, VALUE with an optional SI suffix."""
    m = re.fullmatch(r"(\w+)=([0-9.eE+-]+)\s*([kKMGTP]?)", text.strip())
    if not m or m.group(1) not in PEAK_NAMES:
        raise argparse.ArgumentTypeError(f"--peak {text!r}: want NAME=VALUE with NAME one of "
                                         f"{', '.join(PEAK_NAMES)} (e.g. fp32=66.9T, dram=3352e9)")
    try:
        value = float(m.group(2)) * SI[m.group(3)]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--peak {text!r}: {m.group(2)!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"--peak {text!r}: must be positive")
    return m.group(1), value


def parse_args(argv):
    """The command line."""
    p = argparse.ArgumentParser(description="Roofline models (ORM, CARM, textbook) of one device from "
                                            "archbench results.")
    p.add_argument("results", nargs="+", metavar="RESULTS", help="results files or folders of one device")
    p.add_argument("--precision", choices=PRECISIONS, default="float", help="compute ceilings drawn (default float)")
    p.add_argument("--tolerance", type=float, default=0.15, help="plateau tolerance, relative (default 0.15)")
    p.add_argument("--svg", metavar="FILE", default="roofline.svg", help="roofline SVG (default roofline.svg)")
    p.add_argument("--png", metavar="FILE", help="roofline PNG (default: the SVG's name with .png)")
    p.add_argument("--energy-svg", metavar="FILE", help="energy roofline SVG (flop_per_joule against AI)")
    p.add_argument("--json", metavar="FILE", help="write the models, ceilings and roof check as JSON")
    p.add_argument("--peak", action="append", type=parse_peak, default=[], metavar="NAME=VALUE",
                   help="published peak: " + ", ".join(PEAK_NAMES) + " (FLOP/s or B/s; k M G T P suffixes)")
    p.add_argument("--cache-level", metavar="NAME", help="level for the flops cache points (default: last cache)")
    p.add_argument("--title", help="chart title")
    args = p.parse_args(argv)
    if not 0 < args.tolerance < 1:
        p.error("--tolerance must be between 0 and 1")
    return args


def main(argv=None):
    """The command line; returns the exit code (2 on bad input)."""
    return cli.run(TOOL, run, argv)


def run(argv):
    """Build the models, print them, write the charts and JSON; returns the exit code."""
    if "--program" in (argv[:argv.index("--")] if "--" in argv else argv):
        from . import program
        return program.run([a for a in argv if a != "--program"])
    args = parse_args(argv)
    notes = []
    device, context, benches, files, cache_bytes = load(args.results)
    compute, tensor = compute_peaks(benches)
    if not compute:
        notes.append("no compute family peaks (compute/*/mad|add|mul/<type><width>)")
    bw = bandwidths(benches, args.tolerance, cache_bytes, notes)
    textbook = textbook_peaks(device, dict(args.peak), notes)
    clock = context.get("max_clock_mhz")
    if textbook and clock and "1980" in textbook["source"] and str(clock) != "1980":
        notes.append(f"the textbook peaks are at 1980 MHz; the device reports max_clock_mhz {clock}")
    model = models(device, compute, bw, textbook, args.tolerance)
    points = points_of(benches)
    level = cache_level_for(bw, args.cache_level, notes)
    checks, acceptance = roof_check(points, compute, bw, level, notes)
    if args.precision not in compute:
        notes.append(f"no {args.precision} compute peak: the chart has no measured compute ceiling")
    _, measured = traffic.measured(args.results)
    title = args.title or f"roofline of {device} ({args.precision})"
    why = write_chart(args.svg, model, bw, points, args.precision,
                      title if measured else f"{title}; bytes from the cost model, {levels_note([])}")
    if why:
        raise ar.InputError(why)
    notes.append(f"wrote {args.svg}")
    png = args.png or os.path.splitext(args.svg)[0] + ".png"
    why = write_png(png, model, bw, points, args.precision, title)
    notes.append(f"no PNG written: {why}" if why else f"wrote {png}")
    if measured:
        notes += write_measured(os.path.splitext(args.svg)[0], model, measured, args.precision, title)
    else:
        notes.append("no traffic counters (archbench --traffic, CUDA GPUs): levels measured: none; points are "
                      "placed by the cost model's bytes, and no measured-traffic chart is drawn")
    energy = [p for p in points if p["flop_per_joule"]]
    if args.energy_svg:
        if energy:
            ar.write_file(args.energy_svg, energy_svg(points, compute_energy(benches),
                                                      f"energy roofline of {device}"))
            notes.append(f"wrote {args.energy_svg} ({len(energy)} points)")
        else:
            notes.append("no energy roofline: no benchmark has flop_per_joule with flop_per_s and byte_per_s")
    elif not energy:
        notes.append("no energy counters with flop_per_s and byte_per_s: no energy roofline")
    if args.json:
        doc = dict(model, files=files, precision=args.precision, compute=compute, tensor=tensor,
                   bandwidth=bw, points=points, roof_check=checks, acceptance=acceptance,
                   energy_compute=compute_energy(benches), notes=notes,
                   measured=[dict(name=r["name"], **place(r)) for r in measured])
        ar.write_file(args.json, json.dumps(doc, indent=1) + "\n")
        notes.append(f"wrote {args.json}")
    sys.stdout.write(report(device, files, compute, tensor, bw, model, checks, acceptance,
                            args.precision, args.tolerance, notes))
    return 0

