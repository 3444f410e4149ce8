"""TopDown of any CUDA program, unchanged (seed 004): per kernel, time-weighted totals, and
launch by launch.

  archbench_topdown.py [options] -- PROGRAM [ARGS...]   run PROGRAM under the injection
  archbench_topdown.py [options] --report RAW.jsonl     analyse a file an earlier run wrote
  archbench_topdown.py --timeline [options] -- PROGRAM   level 1 over the run's time, one pass, no
                                                         replay (CUPTI PM sampling; --timeline --help)

The program runs twice: natively (wall time), then with libarchbench_topdown.so injected by
CUDA_INJECTION64_PATH (CUPTI's range profiler, each profiled launch one range replayed by CUPTI as
many passes as the counters need). By default the first 2 launches of each kernel and launch shape
(grid, block) are profiled (--sample; --sample 0 profiles every launch) while the replays stay
within the overhead budget (--budget), with no cap a kernel unless --max-launches gives one, and
the others run natively: their GPU time, from CUPTI's kernel activity records, weights the
profiled ones (a shape with no profiled launch counts with its kernel's nearest profiled shape),
so a kernel's fractions are its profiled launches' and the totals weight kernels by all their GPU
time. CUPTI's set-up is done on threads of the library while the program starts (--prepare).
A launch that cannot be replayed (an argument in host memory: the kernel may wait for a flag the
host sets later, and a replay cannot restore host memory) runs natively and is listed as such.
The overhead is the ratio of the two wall times. The TopDown
fractions (of IPC_MAX = 4 warp-instructions a cycle per SM) are computed by the library with the
very arithmetic of archbench's td_* counters (fixtures/meters/topdown.cpp); this script only weights
them by each launch's GPU time (gpu__time_duration) and prints them.

Levels: 1 retire, divergence, frontend, backend; 2 adds branch, replay, fetch, decode,
memory_bound, core_bound; 3 adds every stall reason (stall_<reason>) and issue_selected /
issue_not_selected. Exit status: the program's own (2 for a bad option or a malformed file).
"""
import argparse
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

from . import cli
from .cli import InputError
from .trace import find_lib as find_tracer_lib

LEVEL1 = ["retire", "divergence", "frontend", "backend"]
LEVEL2 = ["branch", "replay", "fetch", "decode", "memory_bound", "core_bound"]


class BadFile(InputError):
    """A raw file that is not the injection's records (the message names file and line)."""


def find_lib(given, name="libarchbench_topdown.so", variable="ARCHBENCH_TOPDOWN_LIB"):
    """An injection library (TopDown's unless named): --lib, the environment variable, else where
    the tracers' libraries are looked for (the bundle's lib/, the newest build*/lib)."""
    for c in (given, os.environ.get(variable)):
        if c and os.path.isfile(c):
            return os.path.abspath(c)
    found = find_tracer_lib(name, None, env=None)
    if found:
        return found
    target = name[len("lib"):-len(".so")]
    raise InputError(f"{name} not found (build the target {target}, or pass --lib / set {variable})")


def cupti_env(env):
    """The injection links libcupti: add the toolkit's CUPTI folders to the loader path."""
    dirs = [d for d in ("/usr/local/cuda/extras/CUPTI/lib64", "/usr/local/cuda/lib64") if os.path.isdir(d)]
    if dirs:
        env["LD_LIBRARY_PATH"] = ":".join(dirs + [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p])
    return env


def driver_version(pci_bus_id):
    """The NVIDIA driver's version for the GPU at `pci_bus_id`, as nvidia-smi says ("" without it)."""
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader", "-i", pci_bus_id],
                           capture_output=True, text=True, timeout=30)
        return p.stdout.strip() if p.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def timed_span(cmd, env):
    """(exit status, start and end on CLOCK_MONOTONIC in ns) of running cmd."""
    start = time.monotonic_ns()
    try:
        rc = subprocess.call(cmd, env=env)
    except FileNotFoundError:
        raise InputError(f"no such program: {cmd[0]}")
    return rc, start, time.monotonic_ns()


def timed(cmd, env):
    rc, start, end = timed_span(cmd, env)
    return rc, (end - start) * 1e-9


def read_records(path, types, check, what, library):
    """An injection library's raw file (JSON lines) as {type: [records]}, every type of `types`
    present; check(record) raises ValueError, KeyError, TypeError or AttributeError on a
    malformed one, and BadFile names the file and line; a file with no process record was not
    written by `library`."""
    recs = {t: [] for t in types}
    for no, line in enumerate(cli.read_lines(path), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            recs.setdefault(r["type"], []).append(r)
            check(r)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise BadFile(f"{path}:{no}: not a {what} record ({e})")
    if not recs["process"]:
        raise BadFile(f"{path}: no process record: not written by {library}")
    return recs


def check_record(r):
    if r["type"] == "kernel":
        float(r["duration_ns"]), r["name"], dict(r["topdown"])
    if r["type"] == "shape":
        int(r["launches"]), r["name"], float(r.get("unprofiled_ns", 0))


def load(path):
    """The raw records, by type; a malformed line is an error naming the file and line."""
    return read_records(path, ("process", "profiler", "kernel", "error", "end", "shape", "unreplayable"), check_record,
                        "TopDown", "libarchbench_topdown.so")


def level3_columns(kernels):
    names = set()
    for k in kernels:
        names.update(n[3:] for n in k["topdown"] if n.startswith("td_stall_") or n.startswith("td_issue_"))
    return sorted(names)


def shape_key(r):
    return (r.get("mangled", r["name"]), tuple(r.get("grid", [])), tuple(r.get("block", [])))


def launch_weights(recs, key="topdown"):
    """Each profiled launch's weight: the GPU time it stands for (launches with `key` values:
    topdown, or traffic from archbench_roofline.py --program). Without shape records (every
    launch profiled, or an older file) its own duration; with them, its shape's whole GPU time
    (profiled durations plus the unprofiled launches' activity time, or where those records are
    missing the shape's profiled mean for each) shared among the shape's profiled launches. A
    shape of a profiled kernel with no profiled launch (over the budget or --max-launches: the
    sizes or block sizes of a sweep, say) stands with the kernel's profiled shape nearest to it
    (grid and block sizes, on a log scale), whose launches behave most like it, rather than with
    none.
    Returns (weights by seq, per-kernel totals {name: (launches, gpu_ns)})."""
    launches = [k for k in recs["kernel"] if k.get(key)]
    if not recs.get("shape"):
        totals = {}
        for k in launches:
            n, t = totals.get(k["name"], (0, 0.0))
            totals[k["name"]] = (n + 1, t + float(k["duration_ns"]))
        return {k["seq"]: float(k["duration_ns"]) for k in launches}, totals
    by_shape = {}
    for k in launches:
        by_shape.setdefault(shape_key(k), []).append(k)
    weights, totals, shape_ns = {}, {}, {}
    for sh in recs["shape"]:
        ks = by_shape.get(shape_key(sh), [])
        profiled_ns = sum(float(k["duration_ns"]) for k in ks)
        others = int(sh["launches"]) - len(ks)
        if "unprofiled_ns" in sh and int(sh.get("unprofiled_records", 0)) >= others:
            rest = float(sh["unprofiled_ns"])
        else:  # no activity records: the profiled mean for each launch not profiled
            rest = others * (profiled_ns / len(ks)) if ks else float(sh.get("unprofiled_ns", 0.0))
        shape_ns[shape_key(sh)] = profiled_ns + rest
        n, t = totals.get(sh["name"], (0, 0.0))
        totals[sh["name"]] = (n + int(sh["launches"]), t + profiled_ns + rest)
    stands_for = {shape: ns for shape, ns in shape_ns.items() if shape in by_shape}
    for shape, ns in shape_ns.items():
        near = [p for p in stands_for if p[0] == shape[0]]
        if shape not in by_shape and near:
            stands_for[min(near, key=lambda p: distance(p, shape))] += ns
    for shape, ns in stands_for.items():
        for k in by_shape[shape]:
            weights[k["seq"]] = ns / len(by_shape[shape])
    return weights, totals


def distance(a, b):
    """How far apart two launch shapes (shape_key) are: the log ratios of their grid sizes and of
    their block sizes, added."""
    def size(dims):
        return math.prod(max(int(v), 1) for v in dims)
    return abs(math.log(size(a[1]) / size(b[1]))) + abs(math.log(size(a[2]) / size(b[2])))


def weighted(launches, cols, weights):
    """Each column's mean over launches weighted by the GPU time each stands for (plain mean if
    no time)."""
    total = sum(weights.get(k["seq"], 0.0) for k in launches)
    out = {}
    for c in cols:
        vals = [(weights.get(k["seq"], 0.0), k["topdown"].get("td_" + c)) for k in launches]
        vals = [(w, v) for w, v in vals if v is not None]
        if not vals:
            continue
        if total > 0:
            out[c] = sum(w * v for w, v in vals) / sum(w for w, _ in vals)
        else:
            out[c] = sum(v for _, v in vals) / len(vals)
    return out


def analyse(recs, level):
    launches = [k for k in recs["kernel"] if k["topdown"]]
    cols = LEVEL1 + (LEVEL2 if level >= 2 else []) + (level3_columns(launches) if level >= 3 else [])
    weights, totals = launch_weights(recs)
    total_ns = sum(t for _, t in totals.values())
    by_name = {}
    for k in launches:
        by_name.setdefault(k["name"], []).append(k)
    kernels = []
    for name, (n, t) in totals.items():
        ks = by_name.get(name, [])
        kernels.append({"kernel": name, "launches": n, "profiled": len(ks), "gpu_time_s": t * 1e-9,
                        "time_share": t / total_ns if total_ns else 0.0, **weighted(ks, cols, weights)})
    kernels.sort(key=lambda r: -r["gpu_time_s"])
    total = {"kernel": "TOTAL (time-weighted)", "launches": sum(n for n, _ in totals.values()),
             "profiled": len(launches), "gpu_time_s": total_ns * 1e-9,
             "time_share": 1.0 if launches else 0.0, **weighted(launches, cols, weights)}
    invocations = [{"seq": k["seq"], "kernel": k["name"], "invocation": k["invocation"],
                    "gpu_time_s": float(k["duration_ns"]) * 1e-9, "grid": k.get("grid", []),
                    "block": k.get("block", []), **{c: k["topdown"].get("td_" + c) for c in cols}}
                   for k in sorted(launches, key=lambda k: k["seq"])]
    failed = [k for k in recs["kernel"] if not k["topdown"]]
    return cols, kernels, total, invocations, failed


def end_summary(recs, a):
    """The injection's end record as context entries (none if the program did not end normally)."""
    for e in recs["end"][:1]:
        return {"launches_profiled": e["profiled"], "launches_unprofiled": e["unprofiled"],
                "launches_unreplayable": e.get("unreplayable", 0),
                "unprofiled_time": e.get("unprofiled_time", ""), "sample": e.get("sample", a.sample),
                "budget": e.get("budget", 0), "over_budget": e.get("over_budget", 0),
                "cost_s": {k: e[k + "_s"] for k in ("setup", "replay", "decode") if k + "_s" in e},
                "prepare_s": e.get("prepare_s", -1), "prepare_wait_s": e.get("prepare_wait_s", 0),
                "enable_ahead_s": e.get("enable_ahead_s", -1), "enable_ahead": e.get("enable_ahead", "")}
    return {}


def coverage(kernels, context):
    """What share of the GPU time the profiled kernels hold, the kernels left unprofiled by the
    overhead budget, and where profiling's time went."""
    total = sum(k["gpu_time_s"] for k in kernels)
    missing = [k for k in kernels if not k["profiled"]]
    lines = [f"profiled kernels: {len(kernels) - len(missing)} of {len(kernels)}, "
             f"{100 * (1 - sum(k['gpu_time_s'] for k in missing) / total) if total else 0:.1f}% of the GPU time"]
    if context.get("over_budget"):
        lines.append(f"{context['over_budget']} launches ran natively over the overhead budget (--budget "
                     f"{context['budget']:g}: replays at most {context['budget']:g}x the program's own time); "
                     f"{len(missing)} kernels have no profiled launch; --budget 0 profiles them all, and "
                     "--timeline gives every kernel's retire, divergence and stall in one pass, without replay")
    cost = context.get("cost_s")
    if cost:
        lines.append("profiling's time: " + ", ".join(f"{k} {v:.2f} s" for k, v in cost.items()))
    if context.get("prepare_s", -1) >= 0:
        enable = context.get("enable_ahead_s", -1)
        lines.append(f"CUPTI's host set-up made ahead on the library's threads beside the program: "
                     f"{context['prepare_s']:.2f} s" + (f", its enable on the first context {enable:.2f} s" if enable >= 0
                                                       else f" (enable on the first context: "
                                                            f"{context.get('enable_ahead') or 'not done'})") +
                     f"; the first profiled launch waited {context.get('prepare_wait_s', 0):.2f} s for them "
                     "(in set-up above)")
    return "\n".join(lines)


def short(name, width=48):
    return name if len(name) <= width else name[:width - 3] + "..."


def table(rows, cols, first="kernel"):
    head = f"{first:<48} {'launches':>8} {'time %':>7} " + " ".join(f"{c[:11]:>11}" for c in cols)
    lines = [head, "-" * len(head)]
    for r in rows:
        vals = " ".join(f"{r[c]:>11.3f}" if isinstance(r.get(c), float) else f"{'-':>11}" for c in cols)
        lines.append(f"{short(str(r[first])):<48} {r['launches']:>8} {100 * r['time_share']:>6.1f}% {vals}")
    return "\n".join(lines)


def main(argv=None):
    """The command line; returns the exit code (the program's own; 2 on bad input). --timeline
    (before any "--") is the time-resolved mode of tools/archbench/timeline.py."""
    argv = list(sys.argv[1:] if argv is None else argv)
    head = argv[:argv.index("--")] if "--" in argv else argv
    if "--timeline" in head:
        from . import timeline
        argv.remove("--timeline")
        return timeline.main(argv)
    return cli.run("archbench_topdown", run, argv)


def injection_options(ap):
    """The options of a command that runs a program under the injection (this one, and
    archbench_roofline.py --program): filter, sampling, raw file, library, and the program."""
    ap.add_argument("--kernel", help="profile only kernels whose name (demangled or mangled) matches this regex")
    ap.add_argument("--sample", type=int, default=2, metavar="N",
                    help="profile the first N launches of each kernel and launch shape; the others run "
                         "natively and count by their GPU time (default 2; 0: every launch)")
    ap.add_argument("--max-launches", type=int, default=0,
                    help="profile at most N launches of each kernel over all its shapes; later ones run natively "
                         "and count by their GPU time, with their nearest profiled shape (default 0: no limit; "
                         "the --budget bounds the cost)")
    ap.add_argument("--budget", type=float, default=1.0, metavar="X",
                    help="replays may take at most X seconds for each second the program has run so far; a "
                         "launch over it runs natively and counts by its GPU time, and a later launch of its "
                         "shape is profiled when the budget allows (default 1: about 2x the native time plus "
                         "CUPTI's set-up; 0: no limit, every launch the sampling picks is profiled)")
    ap.add_argument("--prepare", choices=("ahead", "launch"), default="ahead",
                    help="when CUPTI's set-up (the chip's host object and the counter set's configuration, "
                         "0.1-0.5 s, and the range profiler's enable and first session on the context, about "
                         "0.3 s) is done: "
                         "ahead (default), on threads of the library from its load and from the program's first "
                         "context, while the program makes its data; launch: at the first profiled launch")
    ap.add_argument("--raw", help="keep the injection's raw records here (default: a temporary file)")
    ap.add_argument("--no-native", action="store_true", help="skip the native run (no overhead figure)")
    ap.add_argument("--lib", help="path of libarchbench_topdown.so")
    ap.add_argument("--report", help="analyse this raw file instead of running a program")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- PROGRAM [ARGS...]")


def program_or_report(ap, a):
    """The program's command line from a.command (after "--"), [] with --report; exactly one of them."""
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if bool(cmd) == bool(a.report):
        ap.error("give either -- PROGRAM [ARGS...] or --report RAW.jsonl")
    return cmd


def parse_injection(ap, argv):
    """(options, the program's command line, [] with --report), checked."""
    a = ap.parse_args(argv)
    cmd = program_or_report(ap, a)
    if a.sample < 0 or a.max_launches < 0:
        ap.error("--sample and --max-launches take a count >= 0")
    if a.budget < 0:
        ap.error("--budget takes a ratio >= 0 (0: no limit)")
    return a, cmd


def profile(a, cmd, context, tool, metric_set=""):
    """Runs the program natively (wall time; not with --no-native), then under the injection with
    the options' filter and sampling (and ARCHBENCH_TOPDOWN_METRICS=metric_set); puts the times, the
    overhead and the raw file's path in context; returns the profiled run's exit status."""
    lib = find_lib(a.lib)
    if shutil.which(cmd[0]) is None and not os.path.isfile(cmd[0]):
        raise InputError(f"no such program: {cmd[0]}")
    raw = a.raw or os.path.join(tempfile.mkdtemp(prefix="archbench-topdown-"), "raw.jsonl")
    context["command"] = " ".join(cmd)
    if not a.no_native:
        native_rc, native_s = timed(cmd, dict(os.environ))
        context["native_s"] = native_s
        if native_rc != 0:
            print(f"{tool}: the program exited with {native_rc} natively", file=sys.stderr)
    env = cupti_env(dict(os.environ))
    env.update({"CUDA_INJECTION64_PATH": lib, "ARCHBENCH_TOPDOWN_OUT": raw,
                "ARCHBENCH_TOPDOWN_KERNEL": a.kernel or "", "ARCHBENCH_TOPDOWN_MAX": str(a.max_launches),
                "ARCHBENCH_TOPDOWN_SAMPLE": str(a.sample), "ARCHBENCH_TOPDOWN_METRICS": metric_set,
                "ARCHBENCH_TOPDOWN_BUDGET": str(a.budget),
                "ARCHBENCH_TOPDOWN_PREPARE": "1" if a.prepare == "ahead" else "0"})
    rc, profiled_s = timed(cmd, env)
    context["profiled_s"] = profiled_s
    if "native_s" in context and context["native_s"] > 0:
        context["overhead"] = profiled_s / context["native_s"]
    context["raw"] = raw
    if rc != 0:
        print(f"{tool}: the program exited with {rc} under profiling", file=sys.stderr)
    return rc


def run(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--level", type=int, choices=[1, 2, 3], default=1, help="TopDown level shown (default 1)")
    ap.add_argument("--by-invocation", action="store_true", help="also list every launch in order (seed 004 5.3)")
    ap.add_argument("--json", help="write the analysis as JSON here")
    ap.add_argument("--csv", help="write the per-kernel table (and with --by-invocation, launches) as CSV here")
    injection_options(ap)
    a, cmd = parse_injection(ap, argv)
    context = {"level": a.level, "kernel_filter": a.kernel or "", "max_launches": a.max_launches, "sample": a.sample}
    rc = profile(a, cmd, context, "archbench_topdown") if cmd else 0
    recs = load(a.report or context["raw"])
    for p in recs["process"][:1]:
        context["date"] = p.get("date", "")
    for p in recs["profiler"][:1]:
        context.update({"chip": p["chip"], "passes": p["passes"], "metrics": p["metrics"],
                        "device": p.get("device_name", ""), "pci_bus_id": p.get("pci_bus_id", "")})
        if cmd and p.get("pci_bus_id"):
            context["driver_version"] = driver_version(p["pci_bus_id"])
    for e in recs["error"]:
        print(f"archbench_topdown: not profiled: {e.get('reason')}", file=sys.stderr)
    context.update(end_summary(recs, a))
    context["unreplayable"] = [{"kernel": u["name"], "reason": u["reason"]} for u in recs["unreplayable"]]
    cols, kernels, total, invocations, failed = analyse(recs, a.level)

    print(f"TopDown level {a.level}, fractions of IPC_MAX (4 warp-instructions per SM per cycle), "
          f"weighted by GPU time" + (f"; chip {context['chip']}, {context['passes']} passes" if "chip" in context else ""))
    print(table(kernels + [total], cols))
    if "launches_profiled" in context:
        cap = f", at most {context['max_launches']} a kernel" if context.get("max_launches") else ""
        how = f"the first {context['sample']} of each kernel and shape{cap}" if context["sample"] else "every launch"
        print(f"{context['launches_profiled']} launches profiled ({how}), {context['launches_unprofiled']} run "
              f"natively; their time from {context.get('unprofiled_time') or 'their profiled mean'}")
    for u in context["unreplayable"]:
        print(f"not replayable, ran natively: {short(u['kernel'])}: {u['reason']}")
    print(coverage(kernels, context))
    if a.by_invocation:
        print("\nBy launch:")
        rows = [dict(r, launches=r["invocation"], time_share=r["gpu_time_s"] / total["gpu_time_s"]
                     if total["gpu_time_s"] else 0.0) for r in invocations]
        print(table(rows, cols).replace("launches", "  launch", 1))
    for k in failed:
        print(f"archbench_topdown: {k['name']} launch {k['invocation']}: no TopDown ({k.get('error', '?')})",
              file=sys.stderr)
    if "overhead" in context:
        print(f"\nwall time: native {context['native_s']:.3f} s, profiled {context['profiled_s']:.3f} s, "
              f"overhead {context['overhead']:.1f}x")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"context": context, "kernels": kernels, "total": total, "invocations": invocations},
                      f, indent=1)
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["kernel", "launch", "launches", "gpu_time_s", "time_share"] + cols)
            for r in kernels + [total]:
                w.writerow([r["kernel"], "", r["launches"], r["gpu_time_s"], r["time_share"]] + [r.get(c) for c in cols])
            if a.by_invocation:
                for r in invocations:
                    w.writerow([r["kernel"], r["invocation"], 1, r["gpu_time_s"], ""] + [r.get(c) for c in cols])
    return rc

