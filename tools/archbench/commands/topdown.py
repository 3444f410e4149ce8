"""TopDown of any CUDA program, unchanged (seed 004): per kernel, weighted by GPU
time, and launch by launch; CUPTI replays profiled launches (tools/analysis/README.md)."""

import csv
import io
import json
import sys

from .. import cli
from ..analysis.names import relabel, short_names
from ..analysis.topdown import analyse, end_summary
from ..records.raw import load_topdown
from ..render.topdown import coverage, short, table
from ..run.inject import driver_version
from ..run.topdown import profile
from . import options, timeline

TOOL = "archbench_topdown"
USAGE = """%(prog)s [options] -- PROGRAM [ARGS...]   profile PROGRAM
       %(prog)s [options] --report RAW.jsonl     earlier raw file
       %(prog)s --timeline ...                   archbench_timeline"""


def main(argv=None):
    """The command line; returns the exit code (the program's own; 2 on bad input). --timeline
    (before any "--") is the timeline command's alias."""
    argv = list(sys.argv[1:] if argv is None else argv)
    head = argv[:argv.index("--")] if "--" in argv else argv
    if "--timeline" in head:
        argv.remove("--timeline")
        return timeline.main(argv, "archbench_topdown --timeline", "archbench_topdown.py --timeline")
    return cli.run(TOOL, run, argv)


def run(argv):
    ap = options.parser(None, USAGE, __doc__)
    ap.add_argument("--level", type=int, choices=[1, 2, 3], default=1, help="TopDown level shown (default 1)")
    ap.add_argument("--by-invocation", action="store_true", help="also list every launch in order")
    ap.add_argument("--json", metavar="FILE", help="write the analysis as JSON here")
    ap.add_argument("--csv", metavar="FILE", help="write the tables as CSV here")
    options.injection_options(ap)
    a, cmd = options.parse_injection(ap, argv)
    context = {"level": a.level, "kernel_filter": a.kernel or "", "max_launches": a.max_launches, "sample": a.sample}
    rc = profile(a, cmd, context, TOOL) if cmd else 0
    recs = load_topdown(a.report or context["raw"])
    for p in recs["process"][:1]:
        context["date"] = p.get("date", "")
    for p in recs["profiler"][:1]:
        context.update({"chip": p["chip"], "passes": p["passes"], "metrics": p["metrics"],
                        "device": p.get("device_name", ""), "pci_bus_id": p.get("pci_bus_id", "")})
        if cmd and p.get("pci_bus_id"):
            context["driver_version"] = driver_version(p["pci_bus_id"])
    for e in recs["error"]:
        print(f"{TOOL}: not profiled: {e.get('reason')}", file=sys.stderr)
    if not recs["end"]:
        print(f"{TOOL}: the run has no end record (the program was killed or crashed): shown is what was recorded"
              + (", its last record cut off mid-write" if recs["cut"] else ""), file=sys.stderr)
    context.update(end_summary(recs, a.sample))
    context["unreplayable"] = [{"kernel": u["name"], "reason": u["reason"]} for u in recs["unreplayable"]]
    cols, kernels, total, invocations, failed = analyse(recs, a.level)

    print(f"TopDown level {a.level}, fractions of IPC_MAX (4 warp-instructions per SM per cycle), "
          f"weighted by GPU time" + (f"; chip {context['chip']}, {context['passes']} passes" if "chip" in context else ""))
    print(table(relabel(kernels, "kernel", a.full_names) + [total], cols))
    if "launches_profiled" in context:
        cap = f", at most {context['max_launches']} a kernel" if context.get("max_launches") else ""
        how = f"the first {context['sample']} of each kernel and shape{cap}" if context["sample"] else "every launch"
        if context.get("varied"):
            how += f", and {context['varied']} more of shapes whose launches' GPU times differ"
        print(f"{context['launches_profiled']} launches profiled ({how}), {context['launches_unprofiled']} run "
              f"natively; their time from {context.get('unprofiled_time') or 'their profiled mean'}")
    labels = {} if a.full_names else short_names([k["kernel"] for k in kernels] + [u["kernel"] for u in context["unreplayable"]])
    for u in context["unreplayable"]:
        print(f"not replayable, ran natively: {short(labels.get(u['kernel'], u['kernel']), 60)}: {u['reason']}")
    print(coverage(kernels, context))
    if a.by_invocation:
        print("\nBy launch:")
        rows = [dict(r, launches=r["invocation"], time_share=r["gpu_time_s"] / total["gpu_time_s"]
                     if total["gpu_time_s"] else 0.0) for r in invocations]
        print(table(relabel(rows, "kernel", a.full_names), cols).replace("launches", "  launch", 1))
    for k in failed:
        print(f"{TOOL}: {k['name']} launch {k['invocation']}: no TopDown ({k.get('error', '?')})", file=sys.stderr)
    if "overhead" in context:
        print(f"\nwall time: native {context['native_s']:.3f} s, profiled {context['profiled_s']:.3f} s, "
              f"overhead {context['overhead']:.1f}x")
    if a.json:
        cli.write_file(a.json, json.dumps({"context": context, "kernels": kernels, "total": total,
                                           "invocations": invocations}, indent=1))
    if a.csv:
        buf = io.StringIO(newline="")
        w = csv.writer(buf)
        w.writerow(["kernel", "launch", "launches", "gpu_time_s", "time_share"] + cols)
        for r in kernels + [total]:
            w.writerow([r["kernel"], "", r["launches"], r["gpu_time_s"], r["time_share"]] + [r.get(c) for c in cols])
        if a.by_invocation:
            for r in invocations:
                w.writerow([r["kernel"], r["invocation"], 1, r["gpu_time_s"], ""] + [r.get(c) for c in cols])
        cli.write_file(a.csv, buf.getvalue())
    return rc
