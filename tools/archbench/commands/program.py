"""Any CUDA program's kernels on the device's roofline, unchanged: their traffic
counted as archbench_topdown.py profiles (tools/analysis/README.md), each kernel's bound."""

import json
import os
import sys

from .. import cli
from ..analysis.program import kernel_rows, place, roof
from ..analysis.roofline import PRECISIONS, parse_peak
from ..analysis.topdown import end_summary
from ..cli import InputError, si
from ..records.raw import load_model, load_topdown
from ..render.program import table
from ..render.roofline import write_measured
from ..render.topdown import coverage, short
from ..run.topdown import profile
from . import options

TOOL = "archbench_program"
USAGE = """%(prog)s [options] -- PROGRAM [ARGS...]
       %(prog)s [options] --report RAW.jsonl"""


def main(argv=None, tool=TOOL, prog=None):
    """The command line; returns the exit code (the program's own; 2 on bad input). tool and prog
    name the command in messages and usage (roofline's --program alias)."""
    return cli.run(tool, lambda args: run(args, tool, prog), argv)


def run(argv, tool=TOOL, prog=None):
    ap = options.parser(prog, USAGE, __doc__)
    ap.add_argument("--roofline-json", metavar="FILE", help="the device's model (archbench_roofline --json)")
    ap.add_argument("--peak", action="append", type=parse_peak, default=[], metavar="NAME=VALUE",
                    help="a published peak, for the textbook roof")
    ap.add_argument("--precision", choices=PRECISIONS, default="float", metavar="PREC",
                    help="ceilings: " + ", ".join(PRECISIONS) + " (default float)")
    ap.add_argument("--svg", metavar="STEM", default="program-roofline", help="charts at STEM-dram, -l1, -hierarchical")
    ap.add_argument("--json", metavar="FILE", help="write the placements as JSON here")
    ap.add_argument("--title", metavar="TEXT", help="the charts' title")
    options.injection_options(ap)
    a, cmd = options.parse_injection(ap, argv)
    context, notes = {"sample": a.sample, "max_launches": a.max_launches}, []
    rc = profile(a, cmd, context, tool, metric_set="traffic") if cmd else 0
    raw = context.get("raw", a.report)
    recs = load_topdown(raw)
    prof = (recs["profiler"] or [{}])[0]
    device = prof.get("device_name", "")
    context.update(device=device, chip=prof.get("chip", ""), traffic_counters=prof.get("traffic_counters", ""),
                   traffic_missing=prof.get("traffic_missing", ""))
    if prof and prof.get("metric_set") != "traffic":
        raise InputError(f"{raw}: recorded with the {prof.get('metric_set', 'topdown')} metric set, not traffic")
    for e in recs["error"]:
        print(f"{tool}: not profiled: {e.get('reason')}", file=sys.stderr)
    rows, whole = kernel_rows(recs)
    if not rows:
        raise InputError(f"{raw}: no kernel launch was profiled")
    doc = load_model(a.roofline_json) if a.roofline_json else None
    model, peaks, ceilings, source = roof(doc, a.roofline_json, device, a.peak, notes)
    placed = place(rows + [whole], peaks, ceilings)
    print(f"kernels of {context.get('command', raw)} on the roofline of {device or 'the device'} "
          f"({source}: " + ", ".join(f"{k} {si(v, 'FLOP/s')}" for k, v in peaks.items()) + "; "
          + ", ".join(f"{k} {si(v, 'B/s')}" for k, v in ceilings.items()) + ")")
    print(table(placed))
    print("bound: the ceiling the kernel uses most (its precision's peak, or a level's bandwidth); of bound: "
          "attained / roof at its intensities (100% is on the roof)")
    for u in recs["unreplayable"]:
        print(f"not replayable, ran natively: {short(u['name'])}: {u['reason']}")
    context.update(end_summary(recs, a.sample))
    print(coverage([{"gpu_time_s": r["seconds"], "profiled": r["profiled"]} for r in rows], context))
    if context.get("traffic_missing"):
        print(f"not measured on this chip: {context['traffic_missing']}")
    if "overhead" in context:
        print(f"wall time: native {context['native_s']:.3f} s, profiled {context['profiled_s']:.3f} s, "
              f"overhead {context['overhead']:.1f}x")
    title = a.title or f"{os.path.basename(cmd[0]) if cmd else 'program'} on {device or 'the device'}"
    notes += write_measured(a.svg, model, rows, a.precision, title, names=True)
    for n in notes:
        print(f"note: {n}")
    if a.json:
        cli.write_file(a.json, json.dumps({"context": context, "roof": {"source": source, "peaks": peaks,
                                           "ceilings": ceilings}, "kernels": placed}, indent=1) + "\n")
    return rc
