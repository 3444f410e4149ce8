"""TopDown level 1 over a CUDA program's run (seed 004 section 5.3, the evolution view), one pass and
no replay: the program runs unchanged while CUPTI's PM sampling reads the GPU's counters every
interval (libarchbench_pmsampling.so, tools/analysis/pmsampling/inject.cpp).

  archbench_topdown.py --timeline [options] -- PROGRAM [ARGS...]   run PROGRAM sampled
  archbench_topdown.py --timeline [options] --report RAW.jsonl     analyse an earlier run's file

The program runs natively (wall time), then sampled; the overhead is the ratio of the two wall
times, taken apart from the library's own timings. PM sampling counts the whole device, whichever
process runs on it, so by default (--start before) a process of the tool's own, archbench_pmsampler,
enables, configures and starts the sampling before the program is started, decodes beside it, and
stops once it has exited; the program carries only the library's kernel records
(CUDA_INJECTION64_PATH, ARCHBENCH_PM_START=outside). Samples from before the program started or
after it ended are left out. Work of other processes on the same device in the meantime is counted
too, as it always is with PM sampling. Where the sampler cannot start (several visible devices and
no --device, a start refused), the library samples inside the program, as --start early does: where
the process sees one device the sampling starts ahead of the program's context, else on the first
context's device; the first launch waits for the start (0-0.1 s on an H100 with the chip's counter
set cached) so that no kernel goes unsampled; with --no-wait the launches go on and the kernels that
ran before the start are counted as unsampled. CUPTI takes 40-100 us to decode a sample, so a busy
run of more than about half a second at the default 100 us outgrows the counter-data image; the
records then decoded carry no time of their own, are left out and counted. archbench_pmsampler
then restarts at ten times the interval (up to 1 ms; about 0.45 s without samples on an H100, said);
inside the program nothing restarts. The report warns how much of the run the samples cover:
--interval-us 1000 from the start for such runs.
The library samples the counters TopDown level 1 needs that fit in one pass and says which level-1
quantities that allows and what is approximated: retire, divergence, and frontend and backend
where every stall reason is counted; where only some are (with the active warps), frontend or
backend holds those (a lower bound) and stall_other the rest; else stall. By CUPTI 13.0's host API
no chip samples a stall reason in one pass (GA102, AD102, GH100, GB100, GB202: each needs 2 by
itself), so stall it is; --stall-split TOPDOWN.json
shares each kernel's stall out between frontend and backend as a kernel-replay TopDown of the same
program found (archbench_topdown.py --json; an approximation, said: the split is that run's, per
kernel, not this run's). Every fraction below is a part of IPC_MAX (4 warp-instructions a cycle per
SM) and they add up to 1. They come from the counters summed over the samples in question, so that
busier samples weigh more:

  run       every sample of the run (the whole device, whatever ran);
  kernel    the samples overlapping each kernel's GPU time (CUPTI's kernel records), each sample's
            counters in proportion to the overlap; concurrent kernels share their samples'
            counters. Without kernel records (PM sampling can silence them) the launches are
            marked on the chart by host time and no kernel gets fractions of its own.

The text gives the sampling interval and the samples count, the run's and each kernel's level 1
(--by-invocation: each launch, the evolution of seed 004 figure 5.5); --json writes all of it with
every sample's fractions; -o CHART.png|svg draws the evolution: the level-1 fractions stacked over
the run's time, kernels marked under them (matplotlib, else a plain SVG). Exit status: the
program's own, or death by its signal (2 for a bad option or a malformed file).
"""
import argparse
import bisect
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

from . import charts, cli, topdown
from .cli import InputError
from .cli import html as escape

IPC_MAX = 4.0
ORDER = ["retire", "divergence", "frontend", "backend", "stall_other", "stall"]
COLORS = {"retire": "#2ca02c", "divergence": "#9467bd", "frontend": "#1f77b4", "backend": "#d62728",
          "stall_other": "#ff7f0e", "stall": "#ff7f0e", "idle": "#dddddd"}
KERNEL_COLORS = ["#8c564b", "#e377c2", "#bcbd22", "#17becf", "#393b79", "#637939", "#843c39", "#7b4173"]  # not level 1's
FRONTEND_CLASSES, BACKEND_CLASSES = ("fetch", "decode"), ("memory", "core")
TYPES = ("process", "injection", "config", "base_metrics", "clock", "name", "launch", "wait", "host", "kernel",
         "sample", "error", "end", "exit", "interval")
SHARED = ("process", "injection", "clock", "end", "error", "wait")  # written by the program's library and the sampler's
SAMPLER_READY_S = 60  # at most this long for archbench_pmsampler to start (an uncached chip searches its counters)
CHART_POINTS = 3000  # samples drawn at most (more are merged)
CLOCK_TOLERANCE_NS = 1e9  # a sample clock within this of a known clock at the start is that clock
COVERAGE_WARN = 0.8  # samples covering less of the run are warned of (healthy runs: 0.90-1.00 on an H100)


class BadFile(topdown.BadFile):
    """A raw file that is not the PM-sampling library's records."""


def check_record(r):
    t = r["type"]
    if t == "sample":
        int(r["start"]), int(r["end"]), [float(v) if v is not None else None for v in r["values"]]
    elif t == "kernel":
        int(r["start"]), int(r["end"]), str(r["name"])
    elif t == "launch":
        int(r["host_ns"])
    elif t == "config":
        list(r["metrics"]), dict(r["roles"]), list(r["level1"]), int(r["interval_ns"])
    elif t == "clock":
        int(r["mono_ns"]), int(r["cupti_ns"]), int(r["realtime_ns"])
    elif t == "exit":
        int(r["start_ns"]), int(r["end_ns"])
    elif t == "interval":
        int(r["interval_ns"]), int(r["host_ns"]), int(r["gap_ns"])


def load(path):
    """The raw records, by type; a malformed line is an error naming the file and line."""
    try:
        return topdown.read_records(path, TYPES, check_record, "PM sampling", "libarchbench_pmsampling.so")
    except topdown.BadFile as e:
        raise BadFile(str(e)) from None


def by_role(recs):
    """(the program's records, the sampler's). Where archbench_pmsampler sampled the device (--start
    before), the records both libraries write (SHARED) are told apart by the sampler's "role"; the
    others are one side's only. Else both are the same records."""
    if not any(r.get("role") == "sampler" for r in recs["process"]):
        return recs, recs
    prog, samp = dict(recs), dict(recs)
    for t in SHARED:
        prog[t] = [r for r in recs[t] if r.get("role") != "sampler"]
        samp[t] = [r for r in recs[t] if r.get("role") == "sampler"]
    return prog, samp


# ------------------------------------------------------------------------------ the arithmetic

def counters_of(values, metrics, roles):
    """A sample's values as {role: value}: cycles, executed, issued, thread, stall_<reason> (the
    library's roles of its metrics; a role collected twice is summed; other counters are left)."""
    c = {}
    for m, v in zip(metrics, values):
        role = roles.get(m, "other")
        if role != "other" and v is not None:
            c[role] = c.get(role, 0.0) + float(v)
    return c


def add_into(into, counters, scale=1.0):
    for k, v in counters.items():
        into[k] = into.get(k, 0.0) + v * scale


def level1(c, quantities, stall_class):
    """TopDown level 1 (design.md, seed 004 eqs. 4.2-4.7, fixtures/meters/topdown.cpp) from summed
    counters {role: value}, as fractions of IPC_MAX: the quantities the sampled set allows, and
    ipc; None where the SMs executed nothing. A counter not collected counts as nothing lost to it
    (no replay, every lane active). The stall (what retire and divergence leave of IPC_MAX) is
      - with every stall reason (frontend and backend): shared out as the reasons' counts are;
      - with some (stall_other among the quantities): each counted reason takes its share of the
        warps' cycles without an issue (active warp-cycles minus instructions issued), frontend
        and backend hold those, stall_other the rest (the library's level1, inject.cpp);
      - else one quantity, stall."""
    cycles, executed = c.get("cycles", 0.0), c.get("executed", 0.0)
    if cycles <= 0 or executed <= 0:
        return None
    ipc = executed / cycles
    issued = c.get("issued", executed)
    ipc_issued = issued / cycles
    efficiency = min(1.0, c.get("thread", executed * 32) / (executed * 32))
    retire, branch = ipc * efficiency, ipc * (1 - efficiency)
    replay = max(0.0, ipc_issued - ipc)
    stall = max(0.0, IPC_MAX - retire - branch - replay) / IPC_MAX
    front = sum(v for k, v in c.items() if k.startswith("stall_") and stall_class.get(k[6:]) in FRONTEND_CLASSES)
    back = sum(v for k, v in c.items() if k.startswith("stall_") and stall_class.get(k[6:]) in BACKEND_CLASSES)
    out = {"retire": retire / IPC_MAX}
    if "divergence" in quantities:
        out["divergence"] = (branch + replay) / IPC_MAX
    if "stall_other" in quantities:
        idle = c.get("warps", 0.0) - issued
        fs = front / idle if idle > 0 else 0.0
        bs = back / idle if idle > 0 else 0.0
        if fs + bs > 1:
            total = fs + bs
            fs, bs = fs / total, bs / total
        if "frontend" in quantities:
            out["frontend"] = stall * fs
        if "backend" in quantities:
            out["backend"] = stall * bs
        out["stall_other"] = stall - stall * fs - stall * bs
    elif "frontend" in quantities:
        out["frontend"] = stall * front / (front + back) if front + back > 0 else 0.0
        out["backend"] = stall * back / (front + back) if front + back > 0 else stall  # as topdown.cpp
    else:
        out["stall"] = stall
    out["ipc"] = ipc
    return out


def sample_clock(recs, first_ns):
    """(offset, how): the PM samples' timestamps + offset = the host's CLOCK_MONOTONIC. first_ns is
    the END of the first sample: CUPTI's first sample reaches back before the start, by 1.1 s after
    an uncached search on the H100, and ends as sampling starts. The GPU's clock is whichever known
    clock (CUPTI's timestamp, the host's real time) read at the start is within a second of it; else
    the first sample is taken to end as sampling starts."""
    start = next((c for c in recs["clock"] if c.get("when") == "start"), recs["clock"][0] if recs["clock"] else None)
    if start is None:
        return 0, "none (no clock record)"
    near = [(abs(first_ns - start[k]), k) for k in ("cupti_ns", "realtime_ns")
            if abs(first_ns - start[k]) < CLOCK_TOLERANCE_NS]
    if near:
        key = min(near)[1]
        return start["mono_ns"] - start[key], {"cupti_ns": "CUPTI timestamps", "realtime_ns": "host real time"}[key]
    return start["mono_ns"] - first_ns, "aligned at the start (the first sample ends as sampling starts)"


def overlaps(samples, ends, t0, t1):
    """(index, fraction of the sample) for each sample overlapping [t0, t1) (samples sorted by time)."""
    i = bisect.bisect_right(ends, t0)
    out = []
    while i < len(samples) and samples[i]["start_s"] < t1:
        s = samples[i]
        ov = min(t1, s["end_s"]) - max(t0, s["start_s"])
        if ov > 0 and s["end_s"] > s["start_s"]:
            out.append((i, ov / (s["end_s"] - s["start_s"])))
        i += 1
    return out


def analyse(recs):
    """The run's level 1, each kernel's and each launch's, every sample's fractions, the kernels'
    GPU times and the launches, all on one time axis (seconds since the process started)."""
    cfg = (recs["config"] or [None])[0]
    prog, samp = by_role(recs)
    ext = (recs["exit"] or [{}])[0]  # the command's: the program's span and exit status (--start before)
    proc = (prog["process"] or [{"start_ns": ext.get("start_ns", 0), "command": ext.get("command", "")}])[0]
    t_base = int(proc.get("start_ns", 0))
    context = {"command": proc.get("command", ""), "date": proc.get("date", "") or samp["process"][0].get("date", "")}
    if samp is not prog:
        context["sampler"] = "archbench_pmsampler (a process of its own, started before the program)"
    errors = [e.get("reason", "") for e in recs["error"]]
    if cfg is None:  # never started: whatever kernels the program ran went unsampled
        ran = [int(k["end"]) - int(k["start"]) for k in recs["kernel"] if int(k["end"]) > int(k["start"]) > 0]
        context["before_sampling"] = {"launches": len(ran), "gpu_time_s": sum(ran) * 1e-9, "gpu_share": 1.0}
        return {"context": context, "errors": errors, "quantities": [], "stall_class": {}, "samples": [], "kernels": [],
                "invocations": [], "launches": [], "total": None, "kernel_source": "none"}
    metrics, roles, quantities = cfg["metrics"], cfg["roles"], cfg["level1"]
    stall_class = cfg.get("stall_class", {})
    context.update({k: cfg.get(k) for k in ("chip", "device_name", "pci_bus_id", "interval_ns", "trigger", "decode_ms",
                                            "hw_buffer_bytes", "max_samples", "counter_data_bytes", "selection",
                                            "selection_trials", "setup_ns", "activity", "start", "split")})
    context.update(metrics=metrics, roles=roles, notes=cfg.get("notes", []),
                   approximations=cfg.get("approximations", []), not_collected=cfg.get("not_collected", {}))
    raw = sorted(recs["sample"], key=lambda s: int(s["start"]))
    offset, clock = sample_clock(samp, int(raw[0]["end"])) if raw else (0, "none (no sample)")
    context["sample_clock"] = clock
    # The sampler's samples from before the program started or after it ended are not its run's.
    p_end = next((int(e["end_ns"]) for e in prog["end"] if "end_ns" in e), int(ext.get("end_ns", 0)) or None)
    lo, hi = (t_base, p_end or float("inf")) if samp is not prog else (-float("inf"), float("inf"))
    samples, total, outside = [], {}, 0
    for r in raw:
        if int(r["end"]) + offset <= lo or int(r["start"]) + offset >= hi:
            outside += 1
            continue
        c = counters_of(r["values"], metrics, roles)
        add_into(total, c)
        samples.append({"start_s": (int(r["start"]) + offset - t_base) * 1e-9,
                        "end_s": (int(r["end"]) + offset - t_base) * 1e-9,
                        "counters": c, "level1": level1(c, quantities, stall_class), "recorded": r.get("level1")})
    if samp is not prog:
        context["samples_outside_program"] = outside
    context["interval_changes"] = [{"at_s": (int(r["host_ns"]) - t_base) * 1e-9, "interval_ns": int(r["interval_ns"]),
                                    "gap_s": int(r["gap_ns"]) * 1e-9, "why": r.get("why", ""),
                                    "error": r.get("error", "")} for r in recs["interval"]]
    ends = [s["end_s"] for s in samples]
    # Kernels: CUPTI's records (GPU time, CUPTI's clock) where delivered, else launches only.
    clocks = prog["clock"] or samp["clock"]
    k_off = (clocks[0]["mono_ns"] - clocks[0]["cupti_ns"]) if clocks else 0
    names = {n["id"]: n["name"] for n in recs["name"]}
    launches = [{"t_s": (int(l["host_ns"]) - t_base) * 1e-9,
                 "kernel": names.get(l.get("name"), "graph launch" if "graph" in l else "?")}
                for l in sorted(recs["launch"], key=lambda l: int(l["host_ns"]))]
    records = sorted((k for k in recs["kernel"] if int(k["end"]) > int(k["start"]) > 0), key=lambda k: int(k["start"]))
    by_name, invocations, seen = {}, [], {}
    for k in records:
        t0, t1 = (int(k["start"]) + k_off - t_base) * 1e-9, (int(k["end"]) + k_off - t_base) * 1e-9
        c, n = {}, 0.0
        for i, frac in overlaps(samples, ends, t0, t1):
            add_into(c, samples[i]["counters"], frac)
            n += frac
            on = samples[i].setdefault("kernels", {})
            on[k["name"]] = on.get(k["name"], 0.0) + frac
        agg = by_name.setdefault(k["name"], {"kernel": k["name"], "launches": 0, "gpu_time_s": 0.0, "samples": 0.0,
                                             "counters": {}})
        agg["launches"] += 1
        agg["gpu_time_s"] += t1 - t0
        agg["samples"] += n
        add_into(agg["counters"], c)
        inv = seen[k["name"]] = seen.get(k["name"], -1) + 1
        invocations.append({"kernel": k["name"], "invocation": inv, "start_s": t0, "end_s": t1, "samples": n,
                            **(level1(c, quantities, stall_class) or {})})
    gpu_total = sum(a["gpu_time_s"] for a in by_name.values())
    # Launches that ended before the sampling started (the library's start did not hold them back):
    # its start clock record, else the first sample (none: every kernel ran before it). Not the
    # first sample's own start: CUPTI's first sample reaches back before the start, counters 0.
    start = next((k for k in samp["clock"] if k.get("when") == "start"), None)
    first = ((int(start["mono_ns"]) - t_base) * 1e-9 if start and "mono_ns" in start
             else samples[0]["start_s"] if samples else float("inf"))
    before = [i["end_s"] - i["start_s"] for i in invocations if i["end_s"] <= first]
    context["before_sampling"] = {"launches": len(before), "gpu_time_s": sum(before),
                                  "gpu_share": sum(before) / gpu_total if gpu_total else 0.0}
    # How much of the time from the first sample (the program's start, where the sampler was there
    # first) to the program's end the samples cover: less where the sampling stopped early (another
    # tool took the performance monitors) or CUPTI's records lost their time (`empty`).
    w0 = samples[0]["start_s"] if samples else 0.0
    w0 = max(w0, 0.0) if samp is not prog else w0
    w1 = (p_end - t_base) * 1e-9 if p_end else (samples[-1]["end_s"] if samples else w0)
    if samples and w1 > w0:
        covered, reach = 0.0, w0  # the samples' union: a restart's first sample may overlap earlier ones
        for x in samples:
            a, b = max(x["start_s"], reach), min(x["end_s"], w1)
            if b > a:
                covered += b - a
                reach = b
        context["coverage"] = {"covered_s": covered, "window_s": w1 - w0, "share": covered / (w1 - w0),
                               "last_sample_s": samples[-1]["end_s"]}
    kernels = []
    for a in sorted(by_name.values(), key=lambda a: -a["gpu_time_s"]):
        row = dict(a)
        row["time_share"] = a["gpu_time_s"] / gpu_total if gpu_total else 0.0
        row.update(level1(a["counters"], quantities, stall_class) or {})
        kernels.append(row)
    if not records and launches:
        for name in sorted({l["kernel"] for l in launches}):
            kernels.append({"kernel": name, "launches": sum(1 for l in launches if l["kernel"] == name)})
    run_s = sum(s["end_s"] - s["start_s"] for s in samples)
    whole = {"kernel": "RUN (every sample)", "launches": len(records) or len(launches), "samples": float(len(samples)),
             "gpu_time_s": gpu_total, "sampled_s": run_s, **(level1(total, quantities, stall_class) or {})}
    end, p_end_rec = (samp["end"] or [{}])[0], (prog["end"] or [{}])[0]
    context["costs"] = library_costs(prog, samp)
    if samp is not prog:
        context["start"] = "before (" + context["sampler"] + ")"
        if "status" in ext:
            context["program_exit"] = ext["status"]
    context.update(samples=len(samples), active_samples=sum(1 for s in samples if s["level1"]),
                   lost=end.get("lost", 0), overflow=end.get("overflow", False), ended=end.get("why", ""),
                   empty=end.get("empty", 0),
                   trouble="; ".join(x for x in dict.fromkeys((end.get("trouble", ""), p_end_rec.get("trouble", ""))) if x),
                   kernel_records=len(records), launches=len(launches),
                   first_s=samples[0]["start_s"] if samples else None, last_s=samples[-1]["end_s"] if samples else None)
    return {"context": context, "errors": errors, "quantities": quantities, "stall_class": stall_class,
            "samples": samples, "total": whole,
            "kernels": kernels, "invocations": invocations, "launches": launches,
            "kernel_source": "CUPTI kernel records (GPU time)" if records else
            ("launches only (host time)" if launches else "none")}


def library_costs(recs, sampler=None):
    """What the library's records say of its own time, in seconds: the setup's parts (on the
    library's thread unless it started at the first launch; in archbench_pmsampler's process where
    `sampler` holds its records), what the first launch waited, the library's load, the exit's
    parts and the decoding (the sampler's, with its exit, where it sampled)."""
    ns = 1e-9
    if sampler is not None and sampler is not recs:
        out, theirs = library_costs(recs), library_costs(sampler)
        for k in ("decode_s", "decode_max_s", "decodes", "set_aside"):
            if k in theirs:
                out[k] = theirs[k]
        if "exit_s" in theirs:
            out["sampler_exit_s"], out["sampler_exit_parts_s"] = theirs["exit_s"], theirs["exit_parts_s"]
        return out
    cfg, end = (recs["config"] or [{}])[0], (recs["end"] or [{}])[0]
    inj, wait = (recs["injection"] or [{}])[0], (recs["wait"] or [{}])[0]
    out = {}
    if "init_ns" in inj:
        out["injection_init_s"] = inj["init_ns"] * ns
    if "setup_ns" in cfg:
        out["setup_s"] = cfg["setup_ns"] * ns
    if isinstance(cfg.get("setup"), dict):
        out["setup_parts_s"] = {k[:-3] if k.endswith("_ns") else k: v * ns for k, v in cfg["setup"].items()}
    if "waited_ns" in wait or "first_launch_wait_ns" in end:
        out["first_launch_wait_s"] = wait.get("waited_ns", end.get("first_launch_wait_ns", 0)) * ns
        out["first_launch_trigger"] = wait.get("trigger", "")
    host = (recs["host"] or [{}])[0]
    if "since_start_ns" in host:
        out["host_object_s"] = host["since_start_ns"] * ns
        out["host_object_error"] = host.get("error", "")
    if isinstance(end.get("exit"), dict):
        parts = {k[:-3] if k.endswith("_ns") else k: v * ns for k, v in end["exit"].items()}
        out["exit_s"] = parts.pop("total", sum(parts.values()))
        out["exit_parts_s"] = parts
    if isinstance(end.get("decode"), dict):
        d = end["decode"]
        out["decode_s"] = d.get("total_ns", 0) * ns
        out["decode_max_s"] = d.get("max_ns", 0) * ns
        out["decodes"] = end.get("decodes", 0)
        out["set_aside"] = d.get("set_aside", 0)
    proc = (recs["process"] or [{}])[0]
    if "end_ns" in end and "start_ns" in proc:
        out["library_span_s"] = (int(end["end_ns"]) - int(proc["start_ns"])) * ns
    return out


def cost_lines(c):
    """The overhead taken apart: the sampled run's wall time against the native one's, and the
    library's own timings (library_costs; spawn_ns / exit_ns: the command's own clock, the same
    CLOCK_MONOTONIC as the library's)."""
    k = c.get("costs") or {}
    lines = []
    if "native_s" in c and "sampled_s" in c:
        lines.append(f"overhead: {c['sampled_s'] - c['native_s']:+.3f} s over the native run ({c['native_s']:.3f} s -> "
                     f"{c['sampled_s']:.3f} s, {c['sampled_s'] / c['native_s']:.2f}x); the library's own times:")
    elif k:
        lines.append("the library's own times:")
    if c.get("sampler"):
        return lines + sampler_cost_lines(c, k)
    if "spawn_ns" in c and c.get("process_start_ns"):
        lines.append(f"  {(c['process_start_ns'] - c['spawn_ns']) * 1e-9:.3f} s from the start until the program's "
                     "cuInit loaded the library (the native run has its own)")
    if "injection_init_s" in k:
        lines.append(f"  {k['injection_init_s']:.3f} s the library's initialisation (in the program's cuInit)")
    if "first_launch_wait_s" in k:
        how = c.get("start") or ""
        lines.append(f"  {k['first_launch_wait_s']:.3f} s the first launch waited for the sampling to start "
                     f"({how or k.get('first_launch_trigger', '')})")
    if "setup_s" in k:
        waits = ("cu_init", "waited_for_context")  # the library's thread waiting for the driver, for a context
        sp = k.get("setup_parts_s") or {}
        parts = ", ".join(f"{n} {v:.3f}" for n, v in sp.items() if v >= 0.0005 and n not in waits)
        waited = ", ".join(f"{n} {v:.3f}" for n, v in sp.items() if v >= 0.0005 and n in waits)
        lines.append(f"  {k['setup_s']:.3f} s the setup's work" + (" (on the library's thread, beside the program)"
                                                                    if not str(c.get("start", "")).startswith("sync")
                                                                    else "") + (f": {parts}" if parts else "")
                     + (f" (it also waited: {waited})" if waited else ""))
    if "host_object_s" in k:
        lines.append(f"  {k['host_object_s']:.3f} s building the host object that evaluates the samples (on a "
                     "thread of its own: the cached config image started the sampling without it"
                     + (f"; {k['set_aside']} samples decoded before it was there waited for it" if k.get("set_aside")
                        else "") + ")" + (f"; it failed: {k['host_object_error']}" if k.get("host_object_error") else ""))
    if "exit_s" in k:
        parts = ", ".join(f"{n} {v:.3f}" for n, v in (k.get("exit_parts_s") or {}).items() if v >= 0.0005)
        lines.append(f"  {k['exit_s']:.3f} s at the end" + (f": {parts}" if parts else ""))
    if "exit_ns" in c and c.get("end_ns"):
        lines.append(f"  {(c['exit_ns'] - c['end_ns']) * 1e-9:.3f} s from the end record until the program had exited "
                     "(CUDA's and CUPTI's teardown; the native run has its own)")
    if "decode_s" in k:
        lines.append(f"  {k['decode_s']:.3f} s decoding on the library's thread ({k.get('decodes', 0)} decodes, the "
                     f"longest {1e3 * k.get('decode_max_s', 0):.1f} ms)")
    return lines


def sampler_cost_lines(c, k):
    """cost_lines' times where archbench_pmsampler sampled: its setup and decoding ran in its own
    process, before and beside the program; the program carried the kernel records."""
    lines = []
    sp = {n: v for n, v in (k.get("setup_parts_s") or {}).items() if v >= 0.0005 and n != "cu_init"}
    if "sampler_ready_s" in c:
        lines.append(f"  {c['sampler_ready_s']:.3f} s archbench_pmsampler took to start sampling, before the program "
                     "started" + (f" (setup {k['setup_s']:.3f} s: " + ", ".join(f"{n} {v:.3f}" for n, v in sp.items())
                                   + ")" if "setup_s" in k else ""))
    if "injection_init_s" in k:
        lines.append(f"  {k['injection_init_s']:.3f} s the library's initialisation in the program (kernel records only)")
    if "exit_s" in k:
        lines.append(f"  {k['exit_s']:.3f} s at the program's end (the last kernel records)")
    if "decode_s" in k:
        lines.append(f"  {k['decode_s']:.3f} s decoding, in archbench_pmsampler's process ({k.get('decodes', 0)} decodes, "
                     f"the longest {1e3 * k.get('decode_max_s', 0):.1f} ms)")
    if "sampler_stop_s" in c:
        lines.append(f"  {c['sampler_stop_s']:.3f} s after the program had exited, archbench_pmsampler's last decode and end"
                     + (f" ({k['sampler_exit_s']:.3f} s of it its library's)" if "sampler_exit_s" in k else ""))
    if "samples_outside_program" in c:
        lines.append(f"  {c['samples_outside_program']} samples from before the program started or after it ended left out")
    return lines


def stall_split_of(path):
    """{kernel name: frontend's share of the stall} from a kernel-replay TopDown's JSON
    (archbench_topdown.py --json): each kernel's frontend / (frontend + backend)."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        rows = doc["kernels"]
        out = {}
        for r in rows:
            fe, be = float(r.get("frontend", 0) or 0), float(r.get("backend", 0) or 0)
            if fe + be > 0:
                out[str(r["kernel"])] = fe / (fe + be)
        return out
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"--stall-split {path}: not a kernel-replay TopDown JSON (archbench_topdown.py --json): {e}")


def share_for(name, split):
    """The frontend share for kernel `name`: its own, else that of the one kernel of its base name."""
    if name in split:
        return split[name]
    base = name.split("(")[0]
    same = [v for k, v in split.items() if k.split("(")[0] == base]
    return same[0] if len(same) == 1 else None


def apply_stall_split(res, split, source):
    """Shares each stall out between frontend and backend as the kernel-replay TopDown `split`
    found for its kernel: a kernel's (and a launch's) stall at its kernel's share; a sample's at
    its kernels' shares weighted by their overlap; the run's at the samples' (weighted by their
    active cycles). What no kernel of the file accounts for stays stall."""
    q = res["quantities"]
    if "stall" not in q or not split:
        return False
    used = {}

    def split_row(row, name):
        if not isinstance(row.get("stall"), float):
            return
        r = share_for(name, split)
        if r is None:
            return
        used[name] = r
        st = row["stall"]
        row.update(frontend=st * r, backend=st * (1 - r), stall=0.0)

    for row in res["kernels"]:
        split_row(row, row["kernel"])
    for row in res["invocations"]:
        split_row(row, row["kernel"])
    weights = {"frontend": 0.0, "backend": 0.0, "stall": 0.0}
    for smp in res["samples"]:
        l1 = smp["level1"]
        if not l1:
            continue
        st, on = l1["stall"], smp.get("kernels", {})
        total = sum(on.values())
        fe = be = 0.0
        for name, w in on.items():
            r = share_for(name, split)
            if r is not None and total > 0:
                used[name] = r
                fe += st * r * w / total
                be += st * (1 - r) * w / total
        l1.update(frontend=fe, backend=be, stall=st - fe - be)
        cyc = smp["counters"].get("cycles", 0.0)
        for key in weights:
            weights[key] += cyc * l1[key]
    t = res["total"]
    if isinstance(t.get("stall"), float):
        sw = sum(weights.values())
        st = t["stall"]
        for key in ("frontend", "backend"):
            t[key] = st * weights[key] / sw if sw > 0 else 0.0
        t["stall"] = st - t["frontend"] - t["backend"]
    rest = max([abs(r.get("stall", 0.0)) for r in res["kernels"] + res["invocations"] + [t]
                if isinstance(r.get("stall"), float)] +
               [abs(smp["level1"]["stall"]) for smp in res["samples"] if smp["level1"]] + [0.0])
    keep_stall = rest > 1e-9
    if not keep_stall:
        for r in res["kernels"] + res["invocations"] + [t] + [smp["level1"] for smp in res["samples"] if smp["level1"]]:
            r.pop("stall", None)
    res["measured_quantities"] = list(q)
    res["quantities"] = [x for x in q if x != "stall"] + ["frontend", "backend"] + (["stall"] if keep_stall else [])
    res["context"]["stall_split"] = {
        "source": source, "kernels": used,
        "approximation": "frontend and backend: the stall this run measured, shared out kernel by kernel as the "
                         f"kernel-replay TopDown in {source} found (its frontend / (frontend + backend)); not measured "
                         "in this run" + ("; stall: what no kernel of that file accounts for" if keep_stall else "")}
    return True


# ------------------------------------------------------------------------------ text and JSON

def table(rows, quantities, first="kernel"):
    cols = quantities
    head = (f"{first:<44} {'launches':>8} {'GPU time':>10} {'samples':>8} "
            + " ".join(f"{c[:10]:>10}" for c in cols))
    out = [head, "-" * len(head)]
    for r in rows:
        t = f"{r['gpu_time_s'] * 1e3:8.3f} ms" if r.get("gpu_time_s") else f"{'-':>10}"
        n = f"{r['samples']:8.1f}" if "samples" in r else f"{'-':>8}"
        vals = " ".join(f"{r[c]:>10.3f}" if isinstance(r.get(c), float) else f"{'-':>10}" for c in cols)
        out.append(f"{topdown.short(str(r[first]), 44):<44} {r.get('launches', 0):>8} {t} {n} {vals}")
    return "\n".join(out)


def text_report(res, by_invocation=False):
    c, q = res["context"], res["quantities"]
    lines = []
    if not q:
        b = c.get("before_sampling") or {}
        if b.get("launches") and not res["errors"]:
            return (f"no PM sampling took place: the program's {b['launches']} kernels ({1e3 * b['gpu_time_s']:.3f} ms) "
                    "ran, and it exited, before the sampling had started (0.3 s after the library loaded on an H100, more "
                    "on a chip's first run, which searches its counters); without --no-wait the first launch waits for it")
        return "no PM sampling took place" + (": " + "; ".join(res["errors"]) if res["errors"] else
                                              " (the program launched no kernel)")
    span = (c["last_s"] - c["first_s"]) if c["samples"] else 0.0
    lines.append(f"TopDown level 1 over time: CUPTI PM sampling (one pass, no replay) on {c.get('device_name') or '?'}"
                 f" ({c.get('chip')}); fractions of IPC_MAX (4 warp-instructions per SM per cycle)")
    lines.append(f"sampling interval {c['interval_ns'] / 1e3:g} us ({c.get('trigger')}): {c['samples']} samples over "
                 f"{span:.3f} s, {c['active_samples']} with instructions executed"
                 + (f"; {c['lost']} lost" if c.get("lost") else "")
                 + ("; the hardware buffer overflowed" if c.get("overflow") else "")
                 + (f"; {c['empty']} records without time of their own left out" if c.get("empty") else ""))
    for ch in c.get("interval_changes") or []:
        lines.append(f"  from {ch['at_s']:.3f} s every {ch['interval_ns'] / 1e3:g} us: {ch['why']}; restarted after "
                     f"{1e3 * ch['gap_s']:.0f} ms without samples" + (f" (it failed: {ch['error']})" if ch["error"] else ""))
    cov = c.get("coverage") or {}
    if cov and cov["share"] < COVERAGE_WARN:
        lines.append(f"  warning: the samples cover {cov['covered_s']:.3f} s of the {cov['window_s']:.3f} s from the first "
                     f"sample to the program's end ({100 * cov['share']:.0f}%; the last ends at {cov['last_sample_s']:.3f} s): "
                     "the level 1 shown is of that part only (another tool using the GPU's performance monitors, such "
                     "as a second timeline or Nsight, stops the sampling)")
        if c.get("empty"):
            lines.append("  CUPTI decodes about one sample per 100 us, so a busy run longer than about half a second "
                         "outgrows the counter-data image, and the records decoded into a full image carry no time "
                         "of their own" + ("; the sampler restarted slower (above)" if c.get("interval_changes") else "")
                         + ": sample less often from the start (--interval-us 1000 covered 98% of a 5.5 s run on an "
                         "H100) or give the image room (ARCHBENCH_PM_MAX_SAMPLES=16384 covered all of it, with 760 MB "
                         "of host memory and 5 s of decoding after the program)")
    measured = res.get("measured_quantities", q)
    lines.append(f"level 1 from one pass: {', '.join(measured)} ({len(c['metrics'])} counters: "
                 f"{', '.join(c['metrics'])}; chosen by {c.get('selection')})")
    for n in c.get("notes", []):
        lines.append(f"  note: {n}")
    for n in c.get("approximations", []):
        lines.append(f"  approximated: {n}")
    if c.get("stall_split"):
        lines.append(f"  approximated: {c['stall_split']['approximation']}")
    if c.get("not_collected"):
        lines.append("  not in the pass: " + ", ".join(sorted(c["not_collected"])))
    lines.append(f"kernels from: {res['kernel_source']}; sample times: {c.get('sample_clock')}")
    b = c.get("before_sampling") or {}
    if b.get("launches"):
        lines.append(f"  before the sampling started: {b['launches']} launches ({1e3 * b['gpu_time_s']:.3f} ms, "
                     f"{100 * b['gpu_share']:.1f}% of the kernels' GPU time) ran unsampled (--no-wait: the launches "
                     "did not wait for the start)")
    if c.get("trouble"):
        lines.append(f"  at the end: {c['trouble']}")
    lines.append("")
    lines.append(table(res["kernels"] + [res["total"]], q))
    if by_invocation and res["invocations"]:
        lines.append("\nBy launch (seed 004 figure 5.5):")
        rows = [dict(r, kernel=f"{topdown.short(r['kernel'], 36)} #{r['invocation']}", launches=1,
                     gpu_time_s=r["end_s"] - r["start_s"]) for r in res["invocations"]]
        lines.append(table(rows, q))
    return "\n".join(lines)


def json_doc(res):
    doc = {k: res[k] for k in ("context", "errors", "quantities", "total", "kernels", "invocations", "launches",
                               "kernel_source")}
    doc["measured_quantities"] = res.get("measured_quantities", res["quantities"])
    doc["samples"] = [{"start_s": s["start_s"], "end_s": s["end_s"], **(s["level1"] or {"idle": True})}
                      for s in res["samples"]]
    return doc


# ------------------------------------------------------------------------------ the chart

def chart_samples(res, limit=CHART_POINTS):
    """The samples as drawn: at most `limit`, consecutive ones merged (their counters summed) where
    there are more; a stall shared out by --stall-split is merged weighting each sample by its
    active cycles."""
    samples = res["samples"]
    step = -(-len(samples) // limit) if samples else 1
    if step <= 1:
        return samples
    measured = res.get("measured_quantities", res["quantities"])
    extra = [k for k in res["quantities"] if k not in measured or k == "stall"] if "measured_quantities" in res else []
    out = []
    for i in range(0, len(samples), step):
        group, c = samples[i:i + step], {}
        for s in group:
            add_into(c, s["counters"])
        l1 = level1(c, measured, res["stall_class"])
        if l1 and extra:
            w = {k: sum(s["counters"].get("cycles", 0.0) * (s["level1"] or {}).get(k, 0.0) for s in group)
                 for k in extra}
            st, total = l1.pop("stall", 0.0), sum(w.values())
            l1.update({k: st * v / total if total > 0 else 0.0 for k, v in w.items()})
        out.append({"start_s": group[0]["start_s"], "end_s": group[-1]["end_s"], "level1": l1})
    return out


def series(samples, quantities):
    """(x edges, {quantity: [value per sample]}, idle per sample) for a step chart."""
    q = [k for k in ORDER if k in quantities]
    xs = [s["start_s"] for s in samples]
    ys = {k: [(s["level1"] or {}).get(k, 0.0) for s in samples] for k in q}
    idle = [0.0 if s["level1"] else 1.0 for s in samples]
    return xs, ys, idle


def kernel_spans(res):
    """{kernel: [(start_s, end_s)]} of the kernel records, the kernels by GPU time first."""
    spans = {}
    for r in res["invocations"]:
        spans.setdefault(r["kernel"], []).append((r["start_s"], r["end_s"]))
    order = [k["kernel"] for k in res["kernels"] if k["kernel"] in spans]
    return {k: spans[k] for k in order}


def title_of(res, title):
    c = res["context"]
    return title or (f"TopDown level 1 over time: {os.path.basename(c.get('command', '').split(' ')[0]) or 'program'} "
                     f"on {c.get('device_name') or 'the GPU'} (PM sampling every {c['interval_ns'] / 1e3:g} us)")


def draw(axis, res, title=None):
    samples = chart_samples(res)
    xs, ys, idle = series(samples, res["quantities"])
    if not xs:
        axis.text(0.5, 0.5, "no samples", ha="center")
        return
    ends = [s["end_s"] for s in samples]
    x = xs + [ends[-1]]
    low = [0.0] * len(xs)
    for k, v in list(ys.items()) + [("idle", idle)]:
        high = [a + b for a, b in zip(low, v)]
        axis.fill_between(x, low + low[-1:], high + high[-1:], step="post", color=COLORS[k], linewidth=0,
                          label="idle (no instruction)" if k == "idle" else k)
        low = high
    spans = kernel_spans(res)
    for n, (name, sp) in enumerate(spans.items()):
        color = KERNEL_COLORS[n] if n < len(KERNEL_COLORS) else "#999999"
        axis.broken_barh([(a, b - a) for a, b in sp], (-0.11, 0.08), color=color,
                         label=f"kernel {topdown.short(name, 40)}" if n < len(KERNEL_COLORS) else None)
    if not spans and res["launches"]:
        axis.vlines([l["t_s"] for l in res["launches"]], -0.11, -0.03, color="#555555", linewidth=0.5,
                    label="kernel launches (host time)")
    axis.set_xlim(x[0], x[-1])
    marked = bool(spans or res["launches"])
    axis.set_ylim(-0.13 if marked else 0, 1.0)
    axis.set_yticks(([-0.07] if marked else []) + [0, 0.25, 0.5, 0.75, 1.0])
    axis.set_yticklabels((["kernels"] if marked else []) + ["0", "0.25", "0.5", "0.75", "1"])
    axis.set_xlabel("time since the program started (s)")
    axis.set_ylabel("fraction of IPC_MAX")
    axis.set_title(title_of(res, title), fontsize=10)
    axis.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    axis.figure.tight_layout()


def plain_svg(res, title=None):
    """The same chart as plain SVG (standard library only)."""
    x0, y0, w, h = 70, 50, 760, 380
    out = charts.svg_open(x0 + w + 260, y0 + h + 110)
    out.append(f'<text x="{x0}" y="28" font-size="14">{escape(title_of(res, title))}</text>')
    samples = chart_samples(res)
    xs, ys, idle = series(samples, res["quantities"])
    if not xs:
        return "\n".join(out + ['<text x="100" y="100">no samples</text>', "</svg>"]) + "\n"
    t0, t1 = xs[0], samples[-1]["end_s"]
    span = (t1 - t0) or 1.0

    def px(t):
        return x0 + (t - t0) / span * w

    def py(v):
        return y0 + h - v * h

    ends = [s["end_s"] for s in samples]
    low = [0.0] * len(xs)
    legend = []
    for k, v in list(ys.items()) + [("idle", idle)]:
        high = [a + b for a, b in zip(low, v)]
        top = [f"{px(a):.1f},{py(hv):.1f} {px(b):.1f},{py(hv):.1f}" for a, b, hv in zip(xs, ends, high)]
        bottom = [f"{px(b):.1f},{py(lv):.1f} {px(a):.1f},{py(lv):.1f}" for a, b, lv in reversed(list(zip(xs, ends, low)))]
        out.append(f'<polygon fill="{COLORS[k]}" stroke="none" points="{" ".join(top + bottom)}"/>')
        legend.append((COLORS[k], "idle (no instruction)" if k == "idle" else k))
        low = high
    out.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#999"/>')
    for v in (0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<text x="{x0 - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for i in range(6):
        t = t0 + span * i / 5
        out.append(f'<text x="{px(t):.1f}" y="{y0 + h + 52}" text-anchor="middle">{t:.3g}</text>')
    out.append(f'<text x="{x0 + w / 2}" y="{y0 + h + 72}" text-anchor="middle">time since the program started (s)</text>')
    out.append(f'<text x="18" y="{y0 + h / 2}" text-anchor="middle" transform="rotate(-90 18 {y0 + h / 2})">'
               f'fraction of IPC_MAX</text>')
    spans = kernel_spans(res)
    for n, (name, sp) in enumerate(spans.items()):
        color = KERNEL_COLORS[n] if n < len(KERNEL_COLORS) else "#999999"
        for a, b in sp:
            out.append(f'<rect x="{px(a):.1f}" y="{y0 + h + 8}" width="{max(px(b) - px(a), 0.5):.1f}" height="14" '
                       f'fill="{color}"/>')
        if n < len(KERNEL_COLORS):
            legend.append((color, f"kernel {topdown.short(name, 34)}"))
    if not spans:
        for l in res["launches"]:
            out.append(f'<line x1="{px(l["t_s"]):.1f}" y1="{y0 + h + 8}" x2="{px(l["t_s"]):.1f}" y2="{y0 + h + 22}" '
                       f'stroke="#555"/>')
        if res["launches"]:
            legend.append(("#555555", "kernel launches (host time)"))
    for i, (color, label) in enumerate(legend):
        ly = y0 + 10 + 18 * i
        out.append(f'<rect x="{x0 + w + 15}" y="{ly - 9}" width="12" height="12" fill="{color}"/>')
        out.append(f'<text x="{x0 + w + 32}" y="{ly + 1}">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_chart(path, res, title=None):
    """The evolution chart at path (PNG or SVG; matplotlib, else plain SVG): None, or why not."""
    return charts.write(path, lambda axis: draw(axis, res, title), lambda: plain_svg(res, title))


# ------------------------------------------------------------------------------ the command

def find_lib(given):
    return topdown.find_lib(given, name="libarchbench_pmsampling.so", variable="ARCHBENCH_PM_LIB")


def timed(cmd, env):
    """(exit status, wall seconds, start and end on CLOCK_MONOTONIC in ns: the library's clock)."""
    rc, start, end = topdown.timed_span(cmd, env)
    return rc, (end - start) * 1e-9, start, end


def find_sampler(lib):
    """archbench_pmsampler's command: ARCHBENCH_PM_SAMPLER (words), else beside the library."""
    given = os.environ.get("ARCHBENCH_PM_SAMPLER")
    if given:
        return shlex.split(given)
    path = os.path.join(os.path.dirname(lib), "archbench_pmsampler")
    return [path] if os.access(path, os.X_OK) else None


class Sampler:
    """archbench_pmsampler started with the library (ARCHBENCH_PM_ROLE=sampler) and waited for until
    its config record says it samples; stop() closes its input, waits for its end record and puts
    its records after the program's in `raw`. Its own session: a Ctrl-C reaches the program and the
    command, and the command's stop (or its death) ends the sampler by its input."""

    def __init__(self, command, env, raw):
        self.path, self.log = raw + ".sampler", raw + ".sampler.log"
        self.t0 = time.monotonic_ns()
        with open(self.log, "w") as log:
            self.proc = subprocess.Popen(command, env=dict(env, ARCHBENCH_PM_OUT=self.path), stdin=subprocess.PIPE,
                                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def why_not(self):
        with open(self.log, errors="replace") as f:
            said = " ".join(line.strip() for line in f if line.strip())
        return said or f"it exited with {self.proc.returncode}"

    def ready(self, limit_s=SAMPLER_READY_S):
        """None once the sampling runs, else why it does not (the sampler then stopped)."""
        seen = 0
        while True:
            try:
                with open(self.path, "rb") as f:
                    f.seek(seen)
                    chunk = f.read()
                cut = chunk.rfind(b"\n") + 1
                seen += cut
                for line in chunk[:cut].splitlines():
                    if b'"type":"config"' in line:
                        self.ready_s = (time.monotonic_ns() - self.t0) * 1e-9
                        return None
                    if b'"type":"error"' in line:
                        self.stop(keep=False)
                        try:
                            return json.loads(line).get("reason", "an error record")
                        except ValueError:
                            return line.decode(errors="replace")
            except FileNotFoundError:
                pass
            if self.proc.poll() is not None:
                why = self.why_not()
                self.stop(keep=False)
                return why
            if time.monotonic_ns() - self.t0 > limit_s * 1e9:
                self.stop(keep=False)
                return f"it did not start within {limit_s} s"
            time.sleep(0.005)

    def stop(self, raw=None, keep=True):
        """Ends the sampler; with keep, appends its records to `raw` (its own file and log go); the
        seconds it took."""
        t = time.monotonic_ns()
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            print("archbench_topdown --timeline: archbench_pmsampler did not end within 60 s and was killed: its last "
                  "samples may be missing", file=sys.stderr)
        if keep and raw and os.path.exists(self.path):
            with open(raw, "ab") as out, open(self.path, "rb") as f:
                shutil.copyfileobj(f, out)
        for p in (self.path, self.log):
            if os.path.exists(p):
                os.remove(p)
        return (time.monotonic_ns() - t) * 1e-9


def sample_run(a, cmd, context):
    """The program natively (wall time; not with --no-native), then under the PM-sampling library;
    the times, the overhead and the raw file's path go in context; returns the sampled run's exit
    status. By default (--start before) archbench_pmsampler samples the device from its own process,
    started before the program, whose library then only records kernels; where it cannot (no
    sampler, several devices and no --device, a start refused), the library samples inside the
    program (early), as said."""
    lib = find_lib(a.lib)
    if shutil.which(cmd[0]) is None and not os.path.isfile(cmd[0]):
        raise InputError(f"no such program: {cmd[0]}")
    raw = a.raw or os.path.join(tempfile.mkdtemp(prefix="archbench-timeline-"), "raw.jsonl")
    context["command"] = " ".join(cmd)
    if not a.no_native:
        native_rc, context["native_s"] = topdown.timed(cmd, dict(os.environ))
        if native_rc != 0:
            print(f"archbench_topdown --timeline: the program exited with {native_rc} natively", file=sys.stderr)
    env = topdown.cupti_env(dict(os.environ))
    env.update({"CUDA_INJECTION64_PATH": lib, "ARCHBENCH_PM_OUT": raw, "ARCHBENCH_PM_INTERVAL_US": repr(a.interval_us)})
    for opt, var in ((a.decode_ms, "ARCHBENCH_PM_DECODE_MS"), (a.hw_buffer_mb, "ARCHBENCH_PM_HW_BUFFER_MB"),
                     (a.metrics, "ARCHBENCH_PM_METRICS"), (0 if a.no_wait else None, "ARCHBENCH_PM_WAIT_S"),
                     (a.device, "ARCHBENCH_PM_DEVICE")):
        if opt is not None:
            env[var] = str(opt)
    start, sampler = a.start or "before", None
    if start == "before":
        command = find_sampler(lib)
        why = None if command else f"no archbench_pmsampler beside {lib}"
        if command:
            sampler = Sampler(command, dict(env, ARCHBENCH_PM_ROLE="sampler", ARCHBENCH_PM_START="early"), raw)
            why = sampler.ready()
        if why:
            sampler, start = None, "early"
            context["start_fallback"] = f"not sampled from a process of its own ({why}): sampled inside the program"
            print(f"archbench_topdown --timeline: {context['start_fallback']}", file=sys.stderr)
        else:
            context["sampler_ready_s"] = sampler.ready_s
            start = "outside"
    env["ARCHBENCH_PM_START"] = start
    if os.path.exists(raw):
        os.remove(raw)  # an earlier run's: the program's library writes it anew, the sampler's are appended
    try:
        rc, context["sampled_s"], context["spawn_ns"], context["exit_ns"] = timed(cmd, env)
    finally:
        if sampler:
            context["sampler_stop_s"] = sampler.stop(raw)
    if sampler:
        with open(raw, "a", encoding="utf-8") as f:
            f.write(json.dumps({"type": "exit", "status": rc, "start_ns": context["spawn_ns"],
                                "end_ns": context["exit_ns"], "command": context["command"]}) + "\n")
    if context.get("native_s"):
        context["overhead"] = context["sampled_s"] / context["native_s"]
    context["raw"] = raw
    if rc != 0:
        print(f"archbench_topdown --timeline: the program exited with {rc} under sampling", file=sys.stderr)
    return rc


def run(argv):
    ap = argparse.ArgumentParser(prog="archbench_topdown.py --timeline", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--interval-us", type=float, default=100.0,
                    help="sampling interval in microseconds (default 100). CUPTI takes 40-100 us to decode a sample "
                         "(in archbench_pmsampler's process, or inside the program on the library's thread), so on a "
                         "busy run of more than about half a second the decoding falls behind: the sampler then "
                         "restarts at ten times the interval after a gap (0.45 s on an H100; ARCHBENCH_PM_SLOW_DOWN=0: "
                         "not), and the report says how much of the run the samples cover. 1000 for such runs (98%% "
                         "of a 5.5 s run on an H100, no gap)")
    ap.add_argument("--decode-ms", type=int, help="time between two decodes of the hardware buffer (default 20)")
    ap.add_argument("--hw-buffer-mb", type=int,
                    help="CUPTI's hardware buffer for samples (default: 512 MB in archbench_pmsampler; inside the "
                         "program 8 decode periods' samples, 32 to 512 MB)")
    ap.add_argument("--start", choices=("before", "early", "context", "launch", "sync"),
                    help="where and when the sampling starts: before (default: a process of its own, "
                         "archbench_pmsampler, samples the device from before the program starts until it has "
                         "exited, and the program's process only records its kernels; where the sampler cannot "
                         "start, early), or inside the program: early (prepared as the library loads and "
                         "started at once where the process sees one device, ahead of the program's context; "
                         "else as context), context (started on the first context's device), launch (the "
                         "device part at the first launch) or sync (everything at the first launch); inside, "
                         "the first launch waits for the start")
    ap.add_argument("--device", type=int, metavar="N",
                    help="the device to sample (CUDA's ordinal, as the program sees it); needed for --start before "
                         "where several devices are visible (else it samples inside the program, on its first "
                         "context's device)")
    ap.add_argument("--no-wait", action="store_true",
                    help="the program's launches do not wait for the sampling to start (by default the first one "
                         "waits for what is left of it, up to 0.1 s on an H100): the kernels that ran before the "
                         "start are counted as unsampled")
    ap.add_argument("--stall-split", metavar="TOPDOWN.json",
                    help="share each kernel's stall out between frontend and backend as this kernel-replay TopDown "
                         "(archbench_topdown.py --json) of the same program found (an approximation, said)")
    ap.add_argument("--metrics", help="comma-separated counters to sample instead of the library's one-pass search")
    ap.add_argument("--by-invocation", action="store_true", help="also list each launch's level 1 (seed 004 fig. 5.5)")
    ap.add_argument("--json", help="write the analysis, every sample's fractions included, as JSON here")
    ap.add_argument("-o", "--output", metavar="CHART.png|svg", help="draw the evolution chart here")
    ap.add_argument("--title", help="the chart's title")
    ap.add_argument("--raw", help="keep the library's raw records here (default: a temporary file)")
    ap.add_argument("--no-native", action="store_true", help="skip the native run (no overhead figure)")
    ap.add_argument("--lib", help="path of libarchbench_pmsampling.so")
    ap.add_argument("--report", help="analyse this raw file instead of running a program")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS...]")
    a = ap.parse_args(argv)
    cmd = topdown.program_or_report(ap, a)
    if not a.interval_us > 0:
        ap.error("--interval-us takes a time > 0")
    run_context = {}
    rc = sample_run(a, cmd, run_context) if cmd else 0
    if cmd and not os.path.exists(run_context["raw"]):
        print(f"archbench_topdown --timeline: {cmd[0]} made no CUDA call (the library was never loaded): nothing was "
              "sampled", file=sys.stderr)
        return rc
    recs = load(a.report or run_context["raw"])
    prog, _ = by_role(recs)
    if cmd and not prog["process"]:
        print(f"archbench_topdown --timeline: {cmd[0]} made no CUDA call (the library was never loaded): its run "
              "had no kernel to show", file=sys.stderr)
    res = analyse(recs)
    res["context"].update(run_context)
    proc, end = (prog["process"] or [{}])[0], (prog["end"] or [{}])[0]
    res["context"].update(process_start_ns=proc.get("start_ns"), end_ns=end.get("end_ns"))
    if a.stall_split:
        if not apply_stall_split(res, stall_split_of(a.stall_split), a.stall_split):
            print(f"archbench_topdown --timeline: --stall-split {a.stall_split}: nothing to share out (the run measured "
                  "frontend and backend, or no kernel of the file ran)", file=sys.stderr)
    for e in res["errors"]:
        print(f"archbench_topdown --timeline: {e}", file=sys.stderr)
    print(text_report(res, a.by_invocation))
    c = res["context"]
    if "overhead" in c:
        wait = None if c.get("sampler") else (c.get("costs") or {}).get("first_launch_wait_s")
        print(f"\nwall time: native {c['native_s']:.3f} s, sampled {c['sampled_s']:.3f} s, overhead {c['overhead']:.2f}x"
              + (f" (the first launch waited {wait:.3f} s for the start)" if wait is not None else ""))
    elif "sampled_s" in c:
        print(f"\nwall time: sampled {c['sampled_s']:.3f} s")
    for line in cost_lines(c):
        print(line)
    if not recs["end"] and recs["config"]:
        print("the run ended without an end record (it crashed or was killed): shown is what was recorded until then")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(json_doc(res), f, indent=1)
    if a.output:
        why = write_chart(a.output, res, a.title)
        if why:
            raise InputError(why)
    return rc


def main(argv=None):
    return cli.run("archbench_topdown --timeline", run, argv)
