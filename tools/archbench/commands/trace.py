"""Trace an unmodified OpenCL or CUDA program, then say where its host and
device waited on each other.

  %(prog)s run [options] -- PROGRAM [ARGS...]   trace, then report
  %(prog)s report RAW.jsonl... [options]        report on raw files

run writes the raw files, summary.json and trace.json.gz (for ui.perfetto.dev)
to ./archbench-trace and exits as the program did; `run --help`: its options."""

import argparse
import os
import shutil
import signal
import sys

from .. import cli
from ..analysis.names import relabel_trace
from ..analysis.trace import analyse, overhead
from ..records.trace import load, write_json
from ..render.trace import chrome_trace, print_summary, signal_name
from ..run.inject import CannotRun, timed
from ..run.trace import LIBS, dynamic_elf, run_traced, still_traced, symbolize, tracer_env, tracer_libs, writable
from . import options

TOOL = "archbench_trace"


def cmd_report(args):
    procs = load(args.raw)
    if not args.no_symbolize:
        symbolize(procs)
    summary = analyse(procs, args.top)
    print_summary(relabel_trace(summary, args.full_names))
    if args.json:
        write_json(args.json, summary, indent=1)
    if args.trace:
        write_json(args.trace, chrome_trace(procs))
    return 0


def cmd_run(args):
    """Runs the program traced; returns its exit status (shell convention: 127 not found, 126 not executable;
    a death by signal N as -N, which cli.run re-raises)."""
    log = sys.stderr
    if args.log:
        try:
            log = open(args.log, "a", encoding="utf-8")
        except OSError as e:
            raise cli.InputError(f"--log {args.log}: cannot write: {e.strerror or e}") from None
    say = lambda msg: print(f"archbench_trace.py: {msg}", file=log, flush=True)  # noqa: E731
    prog = args.program[0] if args.program else None
    if not prog:
        print("archbench_trace.py run: no program given (run -- PROGRAM ARGS...)", file=sys.stderr)
        return 2
    exe = shutil.which(prog) if os.sep not in prog else prog
    if not exe or not os.path.exists(exe):
        say(f"{prog}: program not found")
        return 127
    if not os.path.isfile(exe) or not os.access(exe, os.X_OK):
        say(f"{prog}: not an executable file")
        return 126
    apis = ["opencl", "cuda"] if args.api == "auto" else [args.api]
    libs = tracer_libs(apis, args.lib_dir)
    missing = [a for a in apis if not libs[a]]
    if args.api != "auto" and missing or not any(libs.values()):
        print(f"archbench_trace.py run: {', '.join(LIBS[a] for a in missing)} not found (give --lib-dir or "
              f"ARCHBENCH_TRACE_LIB_DIR; build it with cmake --build BUILD --target archbench_trace_{apis[0]})",
              file=sys.stderr)
        return 2
    cmd = [os.path.abspath(exe)] + args.program[1:]  # absolute: the report finds it to name frames
    traced = True
    if not dynamic_elf(exe):
        say(f"{prog} is statically linked: the tracers (LD_PRELOAD, CUDA injection) cannot enter it; "
            "it runs untraced")
        traced = False
    why = writable(args.out)
    if why:
        say(f"cannot write traces to {args.out} ({why}); the program runs untraced")
        traced = False
    try:
        if not traced:
            return timed(cmd, dict(os.environ), like_shell=True).rc
        repeat = args.repeat if args.overhead else 1
        rc, raw, times, untraced = run_traced(cmd, tracer_env(libs, args.out, args.rate), args.out, repeat,
                                              repeat if args.overhead else 0)
    except CannotRun as e:  # not a format the kernel runs, say: the shell's 126 (127: gone)
        say(f"{prog}: cannot run: {e.error.strerror or e.error}")
        return e.status
    raw = [f for f in raw if os.path.getsize(f)]  # opened, then killed before a record reached it (SIGKILL)
    how = f"was killed by {signal_name(-rc)} (signal {-rc})" if rc < 0 else f"exited {rc}"
    if rc < 0 and -rc in (signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT):
        how = f"crashed ({signal_name(-rc)}, signal {-rc}; the shell shows exit status {128 - rc})"
    say(f"the program {how} after {times[-1]:.3f} s traced; raw: {', '.join(raw) or 'none'}")
    cost = None
    if args.overhead:
        cost = overhead(untraced, times, args.repeat)
        say(f"overhead: untraced {cost['untraced_s']:.3f} s, traced {cost['traced_s']:.3f} s "
            f"(median of {args.repeat}): {cost['ratio']:.2f}x; fastest runs {cost['untraced_min_s']:.3f} s "
            f"and {cost['traced_min_s']:.3f} s: {cost['ratio_min']:.2f}x")
    left = still_traced(args.out)
    if left:  # a daemon: the program's process exited, a child it left goes on traced
        say(f"process{'es' if len(left) > 1 else ''} {', '.join(map(str, left))} that the program left running "
            f"still {'carry' if len(left) > 1 else 'carries'} the tracer: {'their' if len(left) > 1 else 'its'} records "
            f"go to {args.out} as {'they run' if len(left) > 1 else 'it runs'}; once ended: archbench_trace.py report "
            f"{args.out}/*.jsonl")
    if not raw:
        # Each process that makes an OpenCL call writes its file at that call, and so does CUDA's
        # at cuInit: no file means no call (the tracers said so on stderr if a file could not be opened).
        if not left:
            say("no trace: the program " + ("made no OpenCL/CUDA call" if rc >= 0 else
                                              "made no OpenCL/CUDA call before it ended") +
                ", or the tracer could not attach (its message above says why)")
        return rc
    if not args.no_report:
        procs = load(raw)
        symbolize(procs)
        summary = analyse(procs, args.top)
        summary["exit"] = {"status": rc if rc >= 0 else None, "signal": signal_name(-rc) if rc < 0 else None}
        if cost:
            summary["overhead"] = cost
        print_summary(relabel_trace(summary, args.full_names), log)
        if rc < 0:
            kept = ", ".join(f"{t} {n}" for t, n in summary["record_counts"].items() if t not in ("process", "path", "end"))
            say(f"the trace keeps what was recorded until the program ended (records: {kept or 'none'})")
        if len(procs) > 1 or any(p["process"].get("pid") != procs[0]["process"].get("pid") for p in procs):
            say(f"{len(procs)} processes traced; a process the program starts (fork, exec) is traced only if it "
                "calls OpenCL or CUDA itself")
        write_json(os.path.join(args.out, "summary.json"), summary, indent=1)
        write_json(os.path.join(args.out, "trace.json.gz"), chrome_trace(procs))
        say(f"{args.out}/summary.json, {args.out}/trace.json.gz (open in https://ui.perfetto.dev)")
    return rc


def main(argv=None):
    """The command line; returns the exit code (the program's own for run; 2 on bad input)."""
    return cli.run(TOOL, run, argv)


def run(argv):
    ap = options.parser(None, "%(prog)s {run,report} ...", __doc__)
    sub = ap.add_subparsers(dest="cmd", required=True, metavar="{run,report}", prog=ap.prog)
    r = sub.add_parser("run", help="run a program under the tracer, then report",
                       usage="%(prog)s [options] -- PROGRAM [ARGS...]",
                       description="Trace PROGRAM (the OpenCL tracer preloaded, the CUDA tracer injected),\n"
                                   "then report on stderr; exit as the program did.",
                       formatter_class=options.formatter)
    r.add_argument("--out", default="archbench-trace", help="folder for raw files, summary.json, trace.json.gz")
    r.add_argument("--log", help="messages and report go here (default: stderr)")
    r.add_argument("--api", choices=("opencl", "cuda", "auto"), default="auto",
                   help="which tracer (auto: each one built)")
    r.add_argument("--rate", type=float, default=1000, metavar="HZ", help="samples per second per thread (0: none)")
    r.add_argument("--overhead", action="store_true", help="also run untraced and print the wall-time ratio")
    r.add_argument("--repeat", type=int, default=1, metavar="N", help="with --overhead: runs of each, medians compared")
    r.add_argument("--no-report", action="store_true", help="only write the raw files")
    r.add_argument("--top", type=int, default=10, metavar="N", help="rows per ranking (default 10)")
    r.add_argument("--lib-dir", help="folder holding the tracer libraries")
    options.add_full_names(r)
    r.add_argument("program", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p = sub.add_parser("report", help="analyse raw files", usage="%(prog)s RAW.jsonl... [options]",
                       description="The report on raw files (tools/analysis/trace/FORMAT.md) of any run.",
                       formatter_class=options.formatter)
    p.add_argument("raw", nargs="+", metavar="RAW.jsonl", help="raw files")
    p.add_argument("--json", help="write the summary here")
    p.add_argument("--trace", help="write the Chrome trace-event JSON here")
    p.add_argument("--top", type=int, default=10, metavar="N", help="rows per ranking (default 10)")
    p.add_argument("--no-symbolize", action="store_true", help="leave the program's frames as prog+0xOFFSET")
    options.add_full_names(p)
    args = ap.parse_args(argv)
    if args.cmd == "run":
        if args.program and args.program[0] == "--":
            args.program = args.program[1:]
        if args.repeat < 1:
            ap.error("--repeat must be at least 1")
        return cmd_run(args)
    return cmd_report(args)
