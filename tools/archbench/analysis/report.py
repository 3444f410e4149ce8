"""The report's data: the runs read (a row per benchmark, the median of each counter), which rows
each chart takes and what it shows (CHARTS: family, title, which rows, kind of chart, caption), the
headline figures, and the seeds' tables beside ours. Drawing is render/report.py's."""

import os
import re
import statistics
from dataclasses import dataclass, field

from ..records import results as ar
from ..records.published import SEEDS
from . import roofline
from .topdown import LEVEL1, LEVEL2

GB_FIELDS = {"family_index", "per_family_instance_index", "repetitions", "repetition_index", "threads",
             "iterations", "cpu_time"}
RATES = ("flop_per_s", "op_per_s", "byte_per_s", "call_per_s")
METRIC_LABEL = {"flop_per_s": ("throughput", "FLOP/s"), "op_per_s": ("throughput", "op/s"),
                "byte_per_s": ("bandwidth", "B/s"), "call_per_s": ("calls", "calls/s"),
                "ns_per_access": ("latency", "ns/access"), "cycles_per_access": ("latency", "cycles/access"),
                "real_time": ("time per launch", "s"), "watt": ("power", "W"), "joule": ("energy", "J"),
                "flop_per_joule": ("efficiency", "FLOP/J"), "byte_per_joule": ("efficiency", "B/J"),
                "slowdown": ("slowdown", "x"), "speedup": ("speedup", "x")}
# TopDown's level 1 with the backend split into its level-2 parts (memory and core bound).
TOPDOWN_PARTS = [p for p in LEVEL1 if p != "backend"] + [p for p in LEVEL2 if p.endswith("_bound")]
FACTS = ("device", "device_type", "device_vendor", "platform", "platform_version", "driver_version",
         "runtime_version", "kernel_language", "arch", "compute_units", "max_clock_mhz", "global_mem_bytes",
         "local_mem_bytes", "cache_bytes", "fp64", "fp16", "bf16", "images", "host_unified_memory",
         "energy_meter", "host", "date", "archbench_version", "sweep", "filter", "converted_from_schema")
SIZE_AXES = ("bytes", "square", "array")  # axes that are sizes in bytes


@dataclass
class Row:
    """One benchmark of one run: its axes and the median of each of its counters."""
    name: str
    run: int
    axes: dict
    values: dict
    error: str = ""


@dataclass
class Run:
    """The files of one run, merged."""
    arg: str
    files: list
    context: dict                  # the first file's value of each key
    facts: dict                    # key -> every distinct value over the run's files
    rows: list
    benches: dict
    cache_bytes: dict
    label: str = ""


def rows_of(entries, run):
    """One Row per benchmark: the median of every counter over the median aggregates, else over the
    iteration rows (real_time in ns); failed benchmarks carry their error."""
    per = {}
    for e in entries:
        r = per.setdefault(ar.base_name(e), {"axes": e.get("axes") or {}, "it": {}, "med": {}, "error": ""})
        if e.get("error_occurred"):
            r["error"] = r["error"] or str(e.get("error_message") or "error_occurred")
            continue
        kind = e.get("run_type", "iteration")
        target = r["it"] if kind == "iteration" else r["med"] if e.get("aggregate_name") == "median" else None
        if target is None:
            continue
        for key, value in e.items():
            value = ar.number(value)
            if value is None or key in GB_FIELDS or key.endswith("_err"):
                continue
            if key == "real_time":
                value *= ar.TIME_TO_NS.get(e.get("time_unit", "ns"), 1.0)
            target.setdefault(key, []).append(value)
    return [Row(name, run, r["axes"], {k: statistics.median(r["med"].get(k) or r["it"][k])
                                       for k in set(r["it"]) | set(r["med"])}, r["error"])
            for name, r in per.items()]


def read_run(arg, index):
    """A RUN argument: a file, a folder, or files joined by commas."""
    parts = [arg] if os.path.exists(arg) else [p for p in arg.split(",") if p]
    files = [f for p in parts for f in ar.result_files(p)]
    context, facts, entries, benches, cache_bytes = {}, {}, [], {}, {}
    for file in files:
        ctx, es = ar.read_results(file)
        for key, value in ctx.items():
            context.setdefault(key, value)
            if value not in facts.setdefault(key, []):
                facts[key].append(value)
        cb = ar.number(ar.to_float(ctx.get("cache_bytes")))
        if cb:
            backend = str(ctx.get("backend", ""))
            cache_bytes[backend] = max(cache_bytes.get(backend, 0.0), cb)
        entries += es
        ar.add_entries(benches, es, energy=True)
    return Run(arg, files, context, facts, rows_of(entries, index), benches, cache_bytes)


def label_runs(runs):
    """A short unique label per run: device and backend, then driver, archbench version, date, index."""
    keys = ("device", "backend", "driver_version", "archbench_version", "date")
    for n in range(2, len(keys) + 1):  # a GPU of a node's run (nodeview.per_gpu) is named by its gpu
        labels = [" ".join(str(r.context.get(k, "?")) for k in keys[:n] if k != "backend" or "gpu" not in r.context)
                  + (f" {r.context['gpu']}" if "gpu" in r.context else "") for r in runs]
        if len(set(labels)) == len(labels):
            break
    else:
        labels = [f"{lab} #{i + 1}" for i, lab in enumerate(labels)]
    for run, lab in zip(runs, labels):
        run.label = lab


# ---------------------------------------------------------------- what a chart is made of

@dataclass
class Panel:
    """One axis of a chart, as data: series of (label, xs, ys), or bars over categories."""
    title: str = ""
    xlabel: str = ""
    ylabel: str = ""
    kind: str = "line"             # line, bars (horizontal, grouped), stacked (horizontal fractions)
    series: list = field(default_factory=list)      # line: (label, xs, ys); bars/stacked: (label, [v per category])
    categories: list = field(default_factory=list)
    logx: bool = False
    xbytes: bool = False           # x is a size in bytes (log 2, KiB/MiB ticks)
    logy: object = None            # None: log where the values span more than WIDE
    marks: list = field(default_factory=list)       # (x, text): a labelled vertical line
    refs: list = field(default_factory=list)        # (label, xs, ys): dashed reference lines


@dataclass
class Plot:
    """One chart: panels, or the arguments of another tool's chart: the roofline's (model, bw,
    points, precision, title), the energy roofline's (points, compute energy, title)."""
    title: str = ""
    panels: list = field(default_factory=list)
    roofline: tuple = ()
    energy: tuple = ()
    notes: list = field(default_factory=list)


@dataclass
class Chart:
    """An entry of CHARTS: which rows (family, axes that must be present, absent or have given
    values, a counter they must have) and the kind of chart drawn from them."""
    family: object                 # a family name, or None for every family
    title: str
    kind: object                   # kind(rows, page) -> [Plot]
    caption: str = ""
    where: dict = field(default_factory=dict)       # axis -> True (present), False (absent), or a tuple of values
    needs: str = ""                # a counter the rows must have
    claims: bool = True            # rows drawn here are not drawn again by the generic chart

    def takes(self, row):
        if self.family is not None and row.axes.get("family") != self.family:
            return False
        if self.needs and self.needs not in row.values:
            return False
        for axis, want in self.where.items():
            have = row.axes.get(axis)
            if want is True and have is None or want is False and have is not None:
                return False
            if isinstance(want, tuple) and have not in want:
                return False
        return True


# ---------------------------------------------------------------- kinds of chart

def metric_of(row, wanted=None):
    """The counter a chart shows of a row: wanted, else its first rate, else its latency, else its time."""
    if wanted:
        return wanted
    return next((m for m in RATES + ("ns_per_access", "cycles_per_access") if m in row.values), "real_time")


def value_label(metrics):
    """An axis label for the counters drawn: 'throughput (FLOP/s, op/s)'."""
    metrics = list(dict.fromkeys(metrics))
    if len(metrics) == 1:
        return y_label(metrics[0])
    whats = list(dict.fromkeys(METRIC_LABEL.get(m, (m, ""))[0] for m in metrics))
    return f"{' / '.join(whats)} ({', '.join(METRIC_LABEL.get(m, ('', m))[1] for m in metrics)})"


def series_label(row, keys, page):
    """A legend entry: the values of the series axes, with the backend and run where they vary."""
    parts = [roofline.size(row.axes[k]) if k in SIZE_AXES and as_number(row.axes[k]) else str(row.axes[k])
             for k in keys if row.axes.get(k) is not None]
    if page.backends > 1:
        parts.insert(0, str(row.axes.get("backend")))
    if len(page.runs) > 1:
        parts.append(f"[{page.runs[row.run].label}]")
    return " ".join(parts) or row.axes.get("family", "")


def y_label(metric):
    what, unit = METRIC_LABEL.get(metric, (metric, ""))
    return f"{what} ({unit})" if unit else what


def as_number(value):
    """An axis value as a number where it is one (a width, a size), else None."""
    return float(value) if ar.number(value) is not None else None


def sweep(x, metric=None, series=("op",), panel=None, xbytes=False, logx=True, logy=None, marks=None,
          xlabel=None, ideal=False):
    """Lines of a counter over a numeric axis x, one per series (the values of the series axes);
    panel: an axis (or a function of the axes) that splits the chart into panels; marks: a function
    (page) -> [(x, text)] of vertical lines (cache sizes, compute-unit multiples); ideal: a dashed
    line of linear scaling from the first point (speedup)."""
    def kind(rows, page):
        panels, used = {}, {}
        for row in rows:
            m = metric_of(row, metric)
            xv, yv = as_number(row.axes.get(x)), row.values.get(m)
            if xv is None or yv is None:
                continue
            key = str(panel(row.axes) if callable(panel) else row.axes.get(panel) if panel else "")
            panels.setdefault(key, {}).setdefault(series_label(row, series, page), []).append((xv, yv))
            used.setdefault(key, []).append(m)
        out = []
        for key, lines in panels.items():
            p = Panel(title=key, xlabel=xlabel or x, ylabel=value_label(used[key]), logx=logx, xbytes=xbytes,
                      logy=logy, marks=marks(page) if marks else [])
            for label, pts in lines.items():
                pts.sort()
                p.series.append((label, [a for a, _ in pts], [b for _, b in pts]))
                if ideal and pts:
                    x0, y0 = pts[0]
                    p.refs.append(("linear", [a for a, _ in pts], [y0 * a / x0 for a, _ in pts]))
            out.append(p)
        return [Plot(panels=out)] if out else []
    return kind


def bars(category, metric=None, series=(), panel=None, scale=1.0, unit=None, sort=False):
    """Horizontal bars of a counter per category (an axis, a tuple of axes, or a function of the
    axes), grouped by series; scale and unit convert the values (real_time in us)."""
    def cat_of(axes):
        if callable(category):
            return category(axes)
        keys = category if isinstance(category, tuple) else (category,)
        return " ".join(str(axes.get(k)) for k in keys if axes.get(k) is not None)

    def kind(rows, page):
        panels = {}
        for row in rows:
            m = metric_of(row, metric)
            v = row.values.get(m)
            if v is None:
                continue
            key = str(row.axes.get(panel, "")) if panel else ""
            p = panels.setdefault(key, {"cats": [], "vals": {}, "used": []})
            p["used"].append(m)
            cat = cat_of(row.axes) or row.name
            if cat not in p["cats"]:
                p["cats"].append(cat)
            label = series_label(row, series, page) if series or len(page.runs) > 1 else ""
            p["vals"].setdefault(label, {})[cat] = v * scale
        out = []
        for key, p in panels.items():
            cats = p["cats"]
            if sort:
                first = next(iter(p["vals"].values()))
                cats = sorted(cats, key=lambda c: -first.get(c, 0))
            label = value_label(p["used"])
            out.append(Panel(title=key, kind="bars", categories=cats,
                             xlabel=label if not unit else f"{label.split(' (')[0]} ({unit})",
                             series=[(label, [vals.get(c) for c in cats]) for label, vals in p["vals"].items()]))
        return [Plot(panels=out)] if out else []
    return kind


def topdown_bars(rows, page):
    """TopDown level 1 with the backend split (retire, divergence, frontend, memory bound, core
    bound), one stacked bar per family and operation (the mean of its benchmarks' fractions)."""
    plots = []
    for i, run in enumerate(page.runs):
        groups = {}
        for row in rows:
            if row.run == i:
                family = row.axes.get("family", "?")
                key = family if family == "builtins" else f"{family}/{row.axes.get('op', '')}"
                groups.setdefault(key, []).append(row)
        if not groups:
            continue
        cats = sorted(groups)
        series = [(part.replace("_", " "), [statistics.mean(r.values.get("td_" + part, 0.0) for r in groups[c])
                                            for c in cats]) for part in TOPDOWN_PARTS]
        labels = [f"{c} ({len(groups[c])})" for c in cats]
        plots.append(Plot(title=run.label if len(page.runs) > 1 else "", panels=[Panel(
            kind="stacked", categories=labels, series=series, xlabel="fraction of issue slots (IPC_MAX = 4 per SM)")]))
    return plots


def energy_bars(rows, page):
    """Power and energy efficiency per benchmark (the meter's watt and *_per_joule counters)."""
    cats = [r for r in rows if "watt" in r.values]
    names = [series_label(r, (), page) + " " + r.name.split("/", 2)[-1] for r in cats]
    eff = [(m, [r.values.get(m) for r in cats]) for m in ("flop_per_joule", "byte_per_joule")
           if any(r.values.get(m) for r in cats)]
    panels = [Panel(title="power", kind="bars", categories=names, xlabel="power (W)",
                    series=[("", [r.values["watt"] for r in cats])])]
    for m, vals in eff:
        panels.append(Panel(title=METRIC_LABEL[m][1], kind="bars", categories=names,
                            xlabel=f"energy efficiency ({METRIC_LABEL[m][1]})", series=[("", vals)]))
    plots = [Plot(panels=panels)] if cats else []
    for run in page.runs:  # the roofline tool's energy roofline, where FLOP/J and AI are known
        points = [p for p in roofline.points_of(run.benches) if p["flop_per_joule"]]
        if points:
            plots.append(Plot(title=f"energy roofline {run.label}", energy=(
                points, roofline.compute_energy(run.benches), f"energy roofline of {run.context.get('device', '')}")))
    return plots


def roofline_plots(rows, page):
    """The roofline tool's chart for each run and precision it has compute peaks for."""
    plots = []
    for run in page.runs:
        if not any(r.run == page.runs.index(run) for r in rows):
            continue
        notes = []
        device = str(run.context.get("device", ""))
        compute, _ = roofline.compute_peaks(run.benches)
        bw = roofline.bandwidths(run.benches, 0.15, run.cache_bytes, notes)
        model = roofline.models(device, compute, bw, roofline.textbook_peaks(device, {}, notes), 0.15)
        points = roofline.points_of(run.benches)
        for precision in [p for p in roofline.PRECISIONS if p in compute] or ["float"]:
            title = f"roofline of {device} ({run.context.get('backend', '')}, {precision})"
            plots.append(Plot(title=f"{precision}" + (f" {run.label}" if len(page.runs) > 1 else ""),
                              roofline=(model, bw, points, precision, title), notes=list(notes)))
    return plots


# ---------------------------------------------------------------- marks from the context

def cache_marks(page):
    """The cache sizes the contexts give: a CPU device's caches (the host's, as Google Benchmark
    reads them) and every device's last-level cache (cache_bytes)."""
    marks = {}
    for run in page.runs:
        ctx = run.context
        if str(ctx.get("device_type", "")).lower() == "cpu" and isinstance(ctx.get("caches"), list):
            for c in ctx["caches"]:
                if isinstance(c, dict) and c.get("type") in ("Data", "Unified") and ar.number(c.get("size")):
                    marks.setdefault(float(c["size"]), f"L{c.get('level', '?')} {roofline.size(c['size'])}")
        for backend, cb in run.cache_bytes.items():
            marks.setdefault(cb, f"last-level cache {roofline.size(cb)}")
    return sorted(marks.items())


def unit_marks(page):
    """1, 2, 4 and 8 times the compute units (work-group counts where a wave fills the device)."""
    units = {int(u) for r in page.runs if (u := ar.number(ar.to_float(r.context.get("compute_units"))))}
    return [(u * k, f"{k}x {u} CUs" if k == 1 else f"{k}x") for u in sorted(units) for k in (1, 2, 4, 8)]


def bus_kind(axes):
    """The bus chart's panel: the direction or path of a transfer (its op less the memory kind)."""
    op = str(axes.get("op", ""))
    return op.rsplit("_", 1)[0] if "_" in op else op


# ---------------------------------------------------------------- the table of charts

SCALAR_OPS = ("add", "sub", "mul", "mad", "div")
STREAM_OPS = ("copy", "mul", "add", "triad", "dot")


def op_and_scalar(axes):
    """The work-group study's panel: operation and scalar type (mad float)."""
    return f"{axes.get('op')} {axes.get('scalar', '')}"


CHARTS = [
    Chart("latency", "Latency staircase", sweep("bytes", "ns_per_access", xbytes=True, logy=False, marks=cache_marks,
                                                xlabel="working set"),
          "One work-item chasing a random cycle over the working set: ns per access, median of the repetitions; "
          "dashed lines: the cache sizes in the context.", needs="ns_per_access", where={"sm": False}),
    Chart("latency", "Load-to-use latency per SM", sweep("sm", "cycles_per_access", series=("bytes",), logx=False,
                                                         logy=False, xlabel="SM"),
          "The same chase on one chosen SM (CUDA): cycles per access on each SM, a line per working set; the "
          "L2's latency grows with the SM's distance to it (the lowest is the nearest SM's).",
          where={"op": ("chase_sm",)}, needs="cycles_per_access"),
    Chart("latency", "Pointer-chase load bandwidth", sweep("bytes", "byte_per_s", series=("op",), xbytes=True,
                                                          xlabel="working set"),
          "Many work-items chasing the same cycle from their own lines, as load bandwidth (seed 000 Fig. 6).",
          where={"op": ("chase_load",)}),
    Chart("compute", "Compute per type and width", sweep("width", series=("scalar",), panel="op",
                                                         xlabel="vector width"),
          "Peak arithmetic per operation, scalar type and vector width (seed 000 Table I, seed 002 §2.1).",
          where={"groups": False, "items": False, "op": SCALAR_OPS, "width": True}),
    Chart("compute", "Work-group study", sweep("groups", series=("type",), panel=op_and_scalar, marks=unit_marks,
                                               xlabel="work-groups"),
          "Throughput over the number of work-groups; dashed lines at multiples of the compute units "
          "(seed 000 Figs. 7-8).", where={"groups": True}),
    Chart("compute", "Work-group study: power", sweep("groups", "watt", series=("type",), panel=op_and_scalar,
                                                      logy=False, marks=unit_marks, xlabel="work-groups"),
          "Power over the same work-group axis, where the run had --energy (seed 000 Figs. 7-8 plot the "
          "iGPU's power beside its throughput).", where={"groups": True}, needs="watt", claims=False),
    Chart("compute", "Work-item and work-group search", sweep("items", series=("group",), panel="type",
                                                              xlabel="work-items"),
          "FLOPS over work-items x work-group size as seed 002 §2.1 searched; the best point is the peak "
          "(a line per work-group size).", where={"study": ("search",)}),
    Chart("compute", "Tensor cores and packed integer", bars(("op", "type")),
          "mma.sync, wgmma and dp4a throughput (CUDA).", where={"op": ("mma", "wgmma", "dp4a")}),
    Chart("memory", "Stream bandwidth", bars("op", "byte_per_s", series=("type",)),
          "BabelStream's kernels (copy, mul, add, triad, dot) over device memory, their byte counts.",
          where={"op": STREAM_OPS}),
    Chart("memory", "Stride sweep", sweep("stride", "byte_per_s", series=("op",), logx=False,
                                          xlabel="stride (elements)"),
          "Bandwidth over the access stride (seed 002 formula 1).", where={"op": ("stride_read", "stride_write")}),
    Chart("memory", "Row- and column-major access", sweep("bytes", "byte_per_s", series=("op", "array"), xbytes=True,
                                                          xlabel="bytes per work-item"),
          "Row- against column-major access by bytes per work-item (seed 002 §2.3.1).",
          where={"op": ("row_read", "row_write", "col_read", "col_write")}),
    Chart("memory", "Load/store per vector width", sweep("width", "byte_per_s", series=("op",), xlabel="vector width"),
          "Streaming load/store per vector width (a streaming kernel: seed 000 Fig. 9 reuses a cache-resident "
          "buffer instead).", where={"op": ("load_store",)}),
    Chart("memory", "Load/store with reuse", sweep("groups", "byte_per_s", series=("type",), marks=unit_marks,
                                                   xlabel="work-groups"),
          "Load/store per vector width with reuse inside the kernel over a cache-resident buffer, against the "
          "work-group count (seed 000 Fig. 9).", where={"op": ("load_store_reuse",)}),
    Chart("cache", "Cache bandwidth over working set", sweep("bytes", "byte_per_s", series=("op", "block"),
                                                             xbytes=True, marks=cache_marks, xlabel="working set"),
          "Read and read-modify-write bandwidth with reuse inside the kernel (seed 001 §4: kernel A, and B, C "
          "where measured: reuse by launches, through shared memory); dashed lines: the cache sizes in the "
          "context."),
    Chart("flops", "Flops per element", sweep("flops", "flop_per_s", series=("source", "type"),
                                              xlabel="FLOP per element loaded"),
          "The arithmetic-intensity sweep from device memory and from cache (seed 001 §5); the roofline below "
          "draws the same points against the ceilings."),
    Chart("parallelism", "Instruction- against thread-level parallelism", sweep("threads", "flop_per_s",
          series=("chains",), xlabel="work-items per compute unit"), "FMA throughput over work-items per compute "
          "unit, a line per number of independent chains a work-item runs (seed 001 §5.2)."),
    Chart("local", "Bank conflicts (local memory)", sweep("stride", "byte_per_s", series=("op",), logx=False,
                                                         xlabel="stride across the work-group (words)"),
          "Local (shared) memory bandwidth with a stride across the work-group: bank conflicts (seed 002 §2.3.2)."),
    Chart("constant", "Constant memory", sweep("stride", "byte_per_s", series=("op",), xlabel="stride (elements)"),
          "Chained reads of a constant array (seed 002 formula 2)."),
    Chart("divergence", "Divergence", sweep("paths", "flop_per_s", series=("op",), xlabel="paths per warp"),
          "The same work split into 1 to 32 paths chosen by the lane (seed 002 Fig. 8)."),
    Chart("divergence", "Divergence slowdown", sweep("paths", "slowdown", series=("op",), xlabel="paths per warp"),
          "Time over the one-path time of the same run (schema 2 relation 'slowdown').", needs="slowdown",
          claims=False),
    Chart("scalability", "Scalability", sweep("items", "byte_per_s", series=("op",), xlabel="work-items"),
          "Vector add over 64 MiB arrays with 1 to 2^24 work-items (seed 002 §2.5).", where={"items": True}),
    Chart("scalability", "Host-thread baseline", sweep("threads", series=("op",), xlabel="host threads"),
          "The same vector add by plain host threads, the baseline of seed 002 §2.5.", where={"threads": True}),
    Chart("scalability", "Speedup", sweep("items", "speedup", series=("op",), logy=True, ideal=True,
                                          xlabel="work-items"),
          "Speedup over one work-item, same run (schema 2 relation 'speedup'); dashed: linear scaling.",
          where={"items": True}, needs="speedup", claims=False),
    Chart("bus", "Host transfers by size and memory kind", sweep("bytes", "byte_per_s", series=("op",), panel=bus_kind,
                                                                 xbytes=True, xlabel="transfer size"),
          "Host to device and back: pageable, pinned, mapped (seed 002 §2.2); CUDA adds both ways at once and "
          "device-to-device copies.", where={"reuse": False}),
    Chart("bus", "Reuse of host data", sweep("reuse", "byte_per_s", series=("bytes",), panel="op", xlabel="reuse"),
          "Bandwidth over reuse per working set and memory kind (seed 001 §6).", where={"reuse": True}),
    Chart("image", "Image shapes", bars("shape", "byte_per_s", series=("op",)),
          "read_imagef / write_imagef bandwidth over shapes of one size (seed 002 §2.3.4).", where={"shape": True}),
    Chart("image", "Image sizes", sweep("square", "byte_per_s", series=("op",), xbytes=True,
                                        xlabel="square image size"),
          "Image bandwidth over square sizes (seed 002 §2.3.4).", where={"square": True}),
    Chart("builtins", "Builtins", bars("op", "call_per_s", series=("type",), sort=True),
          "Calls per second of the builtins of seed 002 Table 1 (chains of calls)."),
    Chart("launch", "Launch latency", bars(("op", "mode", "items"), "real_time", scale=1e-3, unit="us"),
          "Empty-kernel dispatch (device time per launch), round trip (host clock) and graph replay; "
          "time per launch in microseconds."),
    Chart(None, "Roofline", roofline_plots,
          "The roofline tool's chart (archbench_roofline.py): measured compute and bandwidth ceilings, textbook "
          "ceilings where the device is known, the flops sweep's points.", where={"family": ("compute", "cache",
                                                                                              "flops", "memory")},
          claims=False),
    Chart(None, "TopDown", topdown_bars,
          "TopDown (seed 004) from the td_* counters of a --topdown run: retire, divergence, frontend and the "
          "backend split into memory and core bound; one bar per family and operation (benchmarks in brackets).",
          needs="td_retire", claims=False),
    Chart(None, "Energy", energy_bars,
          "Power and energy efficiency of the benchmarks run with --energy (the meter is in the device facts).",
          needs="watt", claims=False),
]


def generic(family):
    """The chart of a family's rows no entry of CHARTS takes: a bar per benchmark."""
    return Chart(family, f"{family}: other benchmarks" if family in {c.family for c in CHARTS} else family,
                 bars(lambda axes: "/".join(str(v) for k, v in axes.items() if k not in ("family", "backend"))),
                 "A bar per benchmark (no chart of its own for these axes yet).")


def charts_of(page):
    """[(chart, plot, the rows drawn, the failed rows left out)] of every chart of the page: the
    entries of CHARTS, then a generic chart per family for the rows no entry claims."""
    out, claimed = [], set()
    rows = [r for run in page.runs for r in run.rows]
    families = list(dict.fromkeys(r.axes.get("family", "?") for r in rows))
    table = list(CHARTS)
    for chart in list(table):
        taken = [r for r in rows if chart.takes(r)]
        if chart.claims:
            claimed.update(id(r) for r in taken)
    table += [generic(f) for f in families if any(id(r) not in claimed and r.axes.get("family") == f
                                                  for r in rows)]
    for chart in table:
        generic_chart = chart not in CHARTS
        taken = [r for r in rows if chart.takes(r) and not (generic_chart and id(r) in claimed)]
        good = [r for r in taken if not r.error]
        failed = [r for r in taken if r.error]
        if not good:
            continue
        out += [(chart, plot, good, failed) for plot in chart.kind(good, page)]
    return out


@dataclass
class Page:
    runs: list
    backends: int = 1
    nodes: list = field(default_factory=list)  # (run, nodeview.node_table) of each run of several GPUs, also in runs GPU by GPU


def headline(run):
    """[(group, label, value, unit, limit or None)]: the figures people come for."""
    out, notes = [], []
    device = str(run.context.get("device", ""))
    tb = roofline.textbook_peaks(device, {}, notes)
    limit = (tb or {}).get("peaks", {})
    compute, tensor = roofline.compute_peaks(run.benches)
    for kind in roofline.TYPES:
        for slot, text in (("fma", "FMA"), ("no_fma", "no FMA")):
            c = compute.get(kind, {}).get(slot)
            if c:
                lim = limit.get(roofline.TEXTBOOK_KEY.get(kind)) if slot == "fma" else None
                out.append(("peak compute", f"{kind} {text}", c["value"], c["unit"], lim))
    for key, c in sorted(tensor.items()):
        out.append(("peak compute", f"tensor {key}", c["value"], c["unit"], None))
    for op in STREAM_OPS:
        c = roofline.best_of(run.benches, "memory", (op,), "byte_per_s")
        if c:
            out.append(("stream bandwidth", op, c["value"], "B/s", limit.get("dram")))
    local = roofline.best_of(run.benches, "local", ("read",), "byte_per_s", stride1=True)
    if local:
        out.append(("bandwidth", "local/shared memory", local["value"], "B/s", limit.get("shared")))
    bw = roofline.bandwidths(run.benches, 0.15, run.cache_bytes, notes)
    for lv in bw["levels"]:
        out.append(("bandwidth", f"cache plateau {lv['name']} ({lv['range']})", lv["value"], "B/s",
                    limit.get("dram") if lv.get("device_memory") else None))
    curves = {}
    for row in run.rows:
        if row.axes.get("family") == "latency" and not row.error and "ns_per_access" in row.values \
                and as_number(row.axes.get("bytes")):
            curves.setdefault(f"{row.axes.get('backend')}/{row.axes.get('op')}", []).append(
                (as_number(row.axes["bytes"]), row.values["ns_per_access"]))
    for key, pts in sorted(curves.items()):
        pts.sort()
        for n, (lo, hi) in enumerate(roofline.find_plateaus([v for _, v in pts], 0.15)):
            out.append(("latency", f"level {n + 1} ({roofline.size(pts[lo][0])} - {roofline.size(pts[hi - 1][0])})"
                        + ("" if len(curves) == 1 else f" {key}"),
                        statistics.median(v for _, v in pts[lo:hi]), "ns", None))
    transfers = {}
    for row in run.rows:
        if row.axes.get("family") == "bus" and "reuse" not in row.axes and not row.error \
                and row.values.get("byte_per_s"):
            op = str(row.axes.get("op"))
            transfers[op] = max(transfers.get(op, 0.0), row.values["byte_per_s"])
    for op, v in sorted(transfers.items()):
        out.append(("host transfers (best over sizes)", op.replace("_", " "), v, "B/s", None))
    for row in run.rows:
        if row.axes.get("family") == "launch" and not row.error and "real_time" in row.values:
            out.append(("launch latency", " ".join(str(row.axes.get(k, "")) for k in ("op", "mode", "items")
                                                   if k in row.axes), row.values["real_time"], "us", None))
    return out, tb


# ---------------------------------------------------------------- seeds' tables beside ours

@dataclass
class SeedRow:
    """Which of our benchmarks answers a row of a seed's table: names matching pattern (the backend
    is any), the best (largest) median of counter over them, sizes limited to bytes (lo, hi) where
    given; what: the rule in words, shown in the table."""
    pattern: str
    counter: str
    what: str
    bytes: tuple = ()


MIB = 1 << 20
# seed 002 Table 4's rows (the keys of seeds.json) -> our benchmarks.
SEED_TABLES = {
    "seed002_table4": {
        "bus_htod": SeedRow(r"^bus/[^/]+/to_device_pinned/bytes:\d+$", "byte_per_s",
                            "bus/*/to_device_pinned, best of 4 to 64 MiB", (4 * MIB, 64 * MIB)),
        "bus_dtoh": SeedRow(r"^bus/[^/]+/to_host_pinned/bytes:\d+$", "byte_per_s",
                            "bus/*/to_host_pinned, best of 4 to 64 MiB", (4 * MIB, 64 * MIB)),
        "maxflops": SeedRow(r"^compute/[^/]+/mad/float(2|4|8|16)?(/.*)?$", "flop_per_s",
                            "compute/*/mad/float*, best of widths, work-group counts and the search"),
        "global_read": SeedRow(r"^memory/[^/]+/stride_read/stride:1$", "byte_per_s", "memory/*/stride_read/stride:1"),
        "global_write": SeedRow(r"^memory/[^/]+/stride_write/stride:1$", "byte_per_s",
                                "memory/*/stride_write/stride:1"),
        "local_read": SeedRow(r"^local/[^/]+/read/stride:1$", "byte_per_s", "local/*/read/stride:1"),
        "local_write": SeedRow(r"^local/[^/]+/write/stride:1$", "byte_per_s", "local/*/write/stride:1"),
    },
}
SEED_CAPTIONS = {  # key -> (anchor, title, caption: the seed, its table, what differs)
    "seed002_table4": (
        "seed-002-table-4", "Seed 002 Table 4: our figures beside the seed's SHOC comparison",
        "Seed 002 (Yan, Shi, Wang, Yang: An OpenCL micro-benchmark suite for GPUs and CPUs), Table 4: its "
        "benchmarks' figures beside SHOC's on a GeForce GTX 460 SE and a Radeon HD 6850 (PCIe 2.0, 2012), and "
        "ours from the runs of this page, in the seed's units. What differs: the hardware (ours is the device in "
        "the facts, and the backend of the run: CUDA's figures are not OpenCL's); bus speed is our pinned host "
        "memory (SHOC's default; the seed copied plain host buffers with clEnqueueRead/WriteBuffer, our "
        "to_*_pageable) and the best of the seed's sizes, 4 to 64 MiB; MaxFlops is single precision, the best "
        "mad (fma) float over vector widths, work-group counts and, where run (--sweep=full), the seed's search "
        "over work-items x work-group size (SHOC's MaxFlops: the best of its arithmetic chains); global memory is "
        "stride 1 of the seed's formula 1 (coalesced, as SHOC's coalesced read and write), whose 128 accesses per "
        "work-item, 32768 words apart, overlap between work-items and cover at most work-items + 127 x 32768 "
        "words: 17 MiB with the H100's 270,336 work-items, 1 MiB with PoCL's 2,048, so a cache serves them "
        "(on the H100 its 50 MB L2: the figure is above HBM3's 3.35 TB/s) where the seed's GPUs, with caches "
        "under 1 MiB, read device memory; local memory is stride 1 of the bank-conflict benchmark (no "
        "conflict). Ours are medians over repetitions, the seed's and SHOC's single figures as printed."),
}


def seed_value(run, spec):
    """(best median, its benchmark name, failed count) of a run's rows that answer a SeedRow."""
    best, name, failed = None, "", 0
    for row in run.rows:
        if not re.match(spec.pattern, row.name):
            continue
        if spec.bytes and not spec.bytes[0] <= (as_number(row.axes.get("bytes")) or 0) <= spec.bytes[1]:
            continue
        if row.error:
            failed += 1
            continue
        v = row.values.get(spec.counter)
        if v is not None and (best is None or v > best):
            best, name = v, row.name
    return best, name, failed


def seed_number(value):
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def seed_table(page, key):
    """(header, rows) of a seed's table with our figures of each run: the seed's numbers per suite and
    device, the rule that finds ours, and ours (the best median, the benchmark it came from) in the
    seed's unit; 'not measured' where no benchmark of the run answers the row."""
    seed, rules = SEEDS[key], SEED_TABLES[key]
    suites = list(seed["rows"][0]["values"])
    header = ["metric", "unit"] + [f"{name}: {dev}" for s, name in zip(suites, seed["suites"])
                                   for dev in seed["devices"]] + ["ours: benchmark (best median)"] + \
        [f"ours: {r.label}" for r in page.runs]
    rows = []
    for srow in seed["rows"]:
        spec = rules.get(srow["key"])
        cells = [srow["metric"], srow["unit"]] + [f"{v:g}" for s in suites for v in srow["values"][s]]
        cells.append(spec.what if spec else "no archbench benchmark")
        for run in page.runs:
            value, name, failed = seed_value(run, spec) if spec else (None, "", 0)
            if value is None:
                cells.append("not measured" + (f" ({failed} failed)" if failed else ""))
            else:
                cells.append(f"{seed_number(value / srow['scale'])} ({name})")
        rows.append(cells)
    return header, rows
