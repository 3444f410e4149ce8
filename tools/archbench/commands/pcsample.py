"""Where a CUDA program's kernels stall, line by line (seed 003): one run under PC sampling (continuous
mode, kernels not serialised). --sass adds CUPTI's SASS metrics (executed instructions and warp
efficiency per line), a run a hot kernel. Knobs: ARCHBENCH_PC_* (tools/analysis/README.md)."""

import argparse
import json
import os
import sys

from .. import cli
from ..analysis.names import relabel
from ..analysis.pcsample import (analyse, annotate, context_of, count_coverage, sass_context, sass_plan, sass_records,
                                 warp_pass_needed)
from ..records.raw import load_pc, load_warp
from ..records.sources import Sources
from ..render.pcsample import html_report, text_report
from ..render.topdown import short
from ..run.pcsampling import (TOOL, beside, knobs, sampled_run, sass_code, sass_env, sass_runs, sass_strategy,
                              warp_pass)
from . import options

USAGE = "%(prog)s [options] (-- PROGRAM ... | --report RAW.jsonl)"


def kernels_option(v):
    """--sass-kernels: all, or a count N >= 1."""
    if v == "all":
        return v
    if not v.isdigit() or int(v) < 1:
        raise argparse.ArgumentTypeError("takes all or a count N >= 1")
    return int(v)


def main(argv=None):
    """The command line; returns the exit code (the program's own under sampling; 2 on bad input)."""
    return cli.run(TOOL, run, argv)


def run(argv):
    ap = options.parser(None, USAGE, __doc__)
    ap.add_argument("--json", metavar="FILE", help="write the analysis as JSON here")
    ap.add_argument("--html", metavar="FILE", help="write the annotated source and SASS page")
    ap.add_argument("--top", type=int, default=5, metavar="N", help="kernels shown line by line (default 5)")
    ap.add_argument("--lines", type=int, default=8, metavar="N", help="lines shown per kernel (default 8)")
    ap.add_argument("--source-dir", action="append", default=[], metavar="DIR", help="look for source files here too")
    options.add_report(ap)
    ap.add_argument("--sass-report", action="append", metavar="SASS.jsonl", help="with --report: a SASS run's file (again)")
    ap.add_argument("--warp-report", metavar="RAW.jsonl", help="with --report: the warp pass's file")
    ap.add_argument("--overhead", action="store_true", help="run the program natively first: the overhead figure")
    ap.add_argument("--no-native", action="store_true", help=argparse.SUPPRESS)  # the default now
    ap.add_argument("--timeout", type=float, default=0, metavar="S",
                    help="stop each run after S seconds (0: the sampled run never; a --sass run at 3x its time, 30 s at least)")
    ap.add_argument("--sass", action="store_true", help="also count SASS metrics per line: a run per hot kernel")
    ap.add_argument("--no-sass", action="store_true", help=argparse.SUPPRESS)  # the default now
    ap.add_argument("--sass-kernels", type=kernels_option, metavar="N|all",
                    help="with --sass: kernels counted, a run each (default: --top)")
    ap.add_argument("--sass-target", metavar="N|NAME", help="the kernel the target strategy counts")
    ap.add_argument("--sass-range", choices=("function", "one"), help=argparse.SUPPRESS)  # older name: function, once
    ap.add_argument("--warp-pass", choices=("auto", "always", "never"), default="auto", metavar="WHEN",
                    help="counters' warp efficiency: auto, always, never")
    ap.add_argument("--period", type=int, default=None, metavar="LOG2", help="period 2^LOG2 cycles (5..31; 0: CUPTI's)")
    ap.add_argument("--hw-buffer-mb", type=int, default=32, metavar="MB", help="hardware buffer (default 32; 0: CUPTI's)")
    ap.add_argument("--worker-sleep-ms", type=int, default=20, metavar="MS", help="CUPTI's decoder's sleep (default 20)")
    options.add_full_names(ap)
    ap.add_argument("--lib", metavar="FILE", help="libarchbench_pcsampling.so's path")
    ap.add_argument("--topdown-lib", metavar="FILE", help="libarchbench_topdown.so's path (warp pass)")
    options.add_program(ap)
    a = ap.parse_args(argv)
    vars(a).update(knobs())
    a.no_native = not a.overhead
    a.no_sass = not (a.sass or a.sass_kernels or a.sass_target)
    cmd = options.program_or_report(ap, a)
    if a.period is not None and a.period and not 5 <= a.period <= 31:
        ap.error("--period takes 5..31 (log2 of cycles)")
    if a.sass_target and a.sass_strategy != "target":
        ap.error("--sass-target goes with ARCHBENCH_PC_SASS_STRATEGY=target")
    if a.sass_kernels and a.sass_strategy != "each":
        ap.error("--sass-kernels goes with ARCHBENCH_PC_SASS_STRATEGY=each (the default)")
    context = {"period_asked": a.period}
    rc = 0
    raw, sass_files, chosen = a.report, [(None, p) for p in a.sass_report or []], None
    if cmd:
        rc, raw, env = sampled_run(a, cmd, context)
        if not a.no_sass:
            env = sass_env(a, env)
            if sass_strategy(a) == "each":
                plan = sass_plan(load_pc(raw), None if a.sass_kernels == "all" else a.sass_kernels or a.top) \
                    if os.path.exists(raw) else []
                chosen, context["sass_runs"] = [fn for fn, _ in plan], len(plan)
                runs = [(fn, beside(raw, f"sass.{k}"), f"SASS metrics run {k}/{len(plan)}: {short(name, 60)}")
                        for k, (fn, name) in enumerate(plan, 1)]
                if not plan:
                    print(f"{TOOL}: no kernel functions to count in SASS metrics runs", file=sys.stderr)
            else:
                runs = [(None, beside(raw, "sass"), "SASS metrics run")]
            sass_files = sass_runs(a, cmd, env, runs, context)
            context["sass_raw"] = [f for _, f in sass_files]
        context["raw"] = raw
    missing_files = [p for _, p in sass_files if not os.path.exists(p)]
    if missing_files:
        context.setdefault("problems", []).append("SASS metrics: no such file: " + ", ".join(missing_files))
    sass_recs = sass_records([(fn, p) for fn, p in sass_files if os.path.exists(p)], chosen)
    if cmd:
        sass_missing = warp_pass_needed(a, sass_recs)
        if sass_missing is not None:
            warp_raw = beside(raw, "warp")
            warp_rc = warp_pass(a, cmd, warp_raw, sass_missing, context)
            if warp_rc != 0:
                print(f"{TOOL}: the program exited with {warp_rc} in the warp pass", file=sys.stderr)
            a.warp_report = warp_raw
        if not os.path.exists(raw):  # the injection never started: no CUDA, or no driver
            print(f"{TOOL}: no records: the program started no CUDA context under sampling", file=sys.stderr)
            return rc or cli.EXIT_BAD_INPUT
    recs = load_pc(raw)
    for p in recs["process"][:1]:
        context["date"] = p.get("date", "")
        context.setdefault("command", p.get("command", ""))
    context_of(recs, context, say=lambda text: print(f"{TOOL}: {text}", file=sys.stderr))
    if sass_recs:
        sass_context(sass_recs, context)
    warp = None
    if a.warp_report and os.path.exists(a.warp_report):
        warp, warp_recs = load_warp(a.warp_report)
        context["warp_raw"] = a.warp_report
        for e in warp_recs["error"]:
            context.setdefault("problems", []).append(f"warp pass: {e.get('reason', '')}")
        if not warp:
            context.setdefault("problems", []).append("warp pass: no kernel records with warp counters")
    elif a.warp_report:
        context.setdefault("problems", []).append(f"warp pass: no records ({a.warp_report} missing)")
    kernels = analyse(recs, sass_recs, warp)
    context["counts"] = count_coverage(kernels)
    annotate(kernels, sass_code(recs) if a.html else {}, Sources(a.source_dir))
    print(text_report(relabel(kernels, "kernel", a.full_names), context, a.top, a.lines))
    if a.json:
        cli.write_file(a.json, json.dumps({"context": context, "kernels": kernels}, indent=1))
    if a.html:
        cli.write_file(a.html, html_report(kernels, context, a.top))
    return rc
