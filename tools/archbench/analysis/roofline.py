"""Roofline models of one device from its results: the compute ceilings, the bandwidth ceilings
(cache-family plateaus, local memory, memory/*), the ORM, CARM and textbook models with their
ridge points, the flops family's roof check, and measured launches placed by their traffic. The
method is the roofline command's (commands/roofline.py)."""

import bisect
import re
import statistics

from ..records import results as ar
from ..records.published import TEXTBOOK
from ..records.results import median_of
from . import traffic

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
PEAK_NAMES = ("fp32", "fp64", "fp16", "dram", "shared")


def size(nbytes):
    """A working-set size in KiB/MiB/GiB."""
    for unit, scale in (("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes:g} B"


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


LOOK_AHEAD = 3  # points a run may take in a row that fit only together (see find_plateaus)


def find_plateaus(values, tolerance):
    """Plateaus of a curve as (start, end) index pairs (end exclusive), in order.

    A plateau is a run of at least 2 consecutive points all within tolerance (relative) of the run's
    median. The longest run is taken first (the leftmost among equals, with every other run of that
    length that overlaps none taken), then the same is done in what is left between them, so a
    transition point between two levels is not a level.

    One sweep per range, O(n log n): the runs of the starts are found with two pointers (a start's
    run is extended while it fits again within LOOK_AHEAD more points, as a short run's median moves
    with noise; a start whose run would end before the current end lies in a longer run and cannot
    be the longest), the window kept sorted so that its median, minimum and maximum are at hand.
    Taking all the longest runs of a range at once keeps the ranges few: n points of equal runs are
    one sweep, not n/2 nested ones."""
    def fits(window):
        n = len(window)
        m = (window[(n - 1) // 2] + window[n // 2]) / 2
        return m > 0 and window[-1] - m <= tolerance * m and m - window[0] <= tolerance * m

    def longest(lo, hi):
        """The runs of the largest length in [lo, hi) that overlap none to their left."""
        best, window, end = [], [], lo  # window: values[start:end], sorted
        for start in range(lo, hi - 1):
            if start > lo:
                del window[bisect.bisect_left(window, values[start - 1])]
            while end < start + 2:
                bisect.insort(window, values[end])
                end += 1
            if not fits(window):
                continue
            while end < hi:
                added = []
                for v in values[end:min(hi, end + 1 + LOOK_AHEAD)]:
                    bisect.insort(window, v)
                    added.append(v)
                    if fits(window):
                        break
                else:
                    for v in added:
                        del window[bisect.bisect_left(window, v)]
                    break
                end += len(added)
            if not best or end - start > best[0][1] - best[0][0]:
                best = [(start, end)]
            elif end - start == best[0][1] - best[0][0] and start >= best[-1][1]:
                best.append((start, end))
        return best

    plateaus, ranges = [], [(0, len(values))]
    while ranges:
        lo, hi = ranges.pop()
        runs = longest(lo, hi)
        if runs:
            plateaus += runs
            ranges += zip([lo] + [e for _, e in runs], [s for s, _ in runs] + [hi])
    return sorted(plateaus)


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


def parse_peak(text):
    """NAME=VALUE of --peak, VALUE with an optional SI suffix: (NAME, value), or ValueError saying why."""
    m = re.fullmatch(r"(\w+)=([0-9.eE+-]+)\s*([kKMGTP]?)", text.strip())
    if not m or m.group(1) not in PEAK_NAMES:
        raise ValueError(f"--peak {text!r}: want NAME=VALUE with NAME one of "
                         f"{', '.join(PEAK_NAMES)} (e.g. fp32=66.9T, dram=3352e9)")
    try:
        value = float(m.group(2)) * SI[m.group(3)]
    except ValueError:
        raise ValueError(f"--peak {text!r}: {m.group(2)!r} is not a number") from None
    if not value > 0:
        raise ValueError(f"--peak {text!r}: must be positive")
    return m.group(1), value
