"""TopDown level 1 over a CUDA program's run, one pass, no replay: CUPTI's PM
sampling reads the GPU's counters every interval (tools/analysis/README.md)."""

import json
import os
import sys

from .. import cli
from ..analysis.names import relabel_runs
from ..analysis.timeline import analyse, apply_stall_split, by_role
from ..records.raw import load_pm, stall_split_of
from ..render.timeline import cost_lines, json_doc, text_report, write_chart
from ..run.pmsampling import sample_run
from . import options

TOOL = "archbench_timeline"
USAGE = """%(prog)s [options] -- PROGRAM [ARGS...]
       %(prog)s [options] --report RAW.jsonl"""


def main(argv=None, tool=TOOL, prog=None):
    """The command line; returns the exit code (the program's own, or death by its signal; 2 on bad
    input). tool and prog name the command in messages and usage (topdown's --timeline alias)."""
    return cli.run(tool, lambda args: run(args, tool, prog), argv)


def run(argv, tool=TOOL, prog=None):
    ap = options.parser(prog, USAGE, __doc__)
    ap.add_argument("--json", metavar="FILE", help="write the analysis, every sample too, as JSON")
    ap.add_argument("-o", "--output", metavar="CHART", help="draw level 1 over time here (.png or .svg)")
    ap.add_argument("--title", metavar="TEXT", help="the chart's title")
    ap.add_argument("--by-invocation", action="store_true", help="also list each launch's level 1")
    ap.add_argument("--stall-split", metavar="TOPDOWN.json", help="share stall out as this TopDown JSON found")
    options.add_report(ap)
    ap.add_argument("--interval-us", type=float, default=100.0, metavar="US",
                    help="sampling interval (100; 1000 for runs > 0.5 s)")
    ap.add_argument("--device", type=int, metavar="N", help="the device to sample (with several)")
    ap.add_argument("--start", choices=("before", "early", "context", "launch", "sync"), metavar="WHEN",
                    help="before (default), early, context, launch, sync")
    ap.add_argument("--no-wait", action="store_true", help="the first launch does not wait for the start")
    ap.add_argument("--decode-ms", type=int, metavar="MS", help="time between two decodes (default 20)")
    ap.add_argument("--hw-buffer-mb", type=int, metavar="MB", help="CUPTI's hardware buffer for samples")
    ap.add_argument("--metrics", metavar="LIST", help="counters to sample, not the one-pass search")
    options.add_full_names(ap)
    options.add_native(ap)
    ap.add_argument("--lib", metavar="FILE", help="libarchbench_pmsampling.so's path")
    options.add_program(ap)
    a = ap.parse_args(argv)
    cmd = options.program_or_report(ap, a)
    if not a.interval_us > 0:
        ap.error("--interval-us takes a time > 0")
    run_context = {}
    rc = sample_run(a, cmd, run_context, tool) if cmd else 0
    if cmd and not os.path.exists(run_context["raw"]):
        print(f"{tool}: {cmd[0]} made no CUDA call (the library was never loaded): nothing was sampled",
              file=sys.stderr)
        return rc
    recs = load_pm(a.report or run_context["raw"])
    prog_recs, _ = by_role(recs)
    if cmd and not prog_recs["process"]:
        print(f"{tool}: {cmd[0]} made no CUDA call (the library was never loaded): its run had no kernel to show",
              file=sys.stderr)
    res = analyse(recs)
    res["context"].update(run_context)
    proc, end = (prog_recs["process"] or [{}])[0], (prog_recs["end"] or [{}])[0]
    res["context"].update(process_start_ns=proc.get("start_ns"), end_ns=end.get("end_ns"))
    if a.stall_split:
        if not apply_stall_split(res, stall_split_of(a.stall_split), a.stall_split):
            print(f"{tool}: --stall-split {a.stall_split}: nothing to share out (the run measured "
                  "frontend and backend, or no kernel of the file ran)", file=sys.stderr)
    for e in res["errors"]:
        print(f"{tool}: {e}", file=sys.stderr)
    shown = relabel_runs(res, a.full_names)
    print(text_report(shown, a.by_invocation))
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
        cli.write_file(a.json, json.dumps(json_doc(res), indent=1))
    if a.output:
        why = write_chart(a.output, shown, a.title)
        if why:
            raise cli.InputError(why)
    return rc
