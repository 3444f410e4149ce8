#!/usr/bin/env python3
"""The OpenCL tracer on programs nobody here wrote, and on small programs that sleep, fork, exec,
use threads and signals, exit from a thread,
exec themselves, die of a signal or leave a daemon behind: traced by `archbench_trace.py run`, each must exit
as it does untraced, print the same output (byte for byte, or for programs that print timings,
the same lines with their numbers masked) and yield a valid trace. Bad input (a program not
found, not executable, statically linked; an output folder that cannot be written) must give a
clear message and the program's own status. Statuses and outputs are compared, never wall
times, except the sleeps' (which may only be longer).

  corpus.py --tool tools/archbench_trace.py --lib LIB.so --behave archbench_trace_behave
            [--planted archbench_trace_planted] [--table DIR] [--repeat N]

--table DIR also writes DIR/corpus.json and DIR/README.md: per program, wall time untraced and
traced (medians of --repeat runs), status and output unchanged, and the planted idle gap measured
against its size (the host/device clock alignment). On a GPU machine, point the ICD loader at the
vendor's OpenCL (OCL_ICD_VENDORS=DIR holding nvidia.icd) and run the same command.

Exit 0 when every check passed, 1 otherwise (trace_e2e.py runs the checks in ctest analysis/trace/trace_e2e).
"""

import argparse
import datetime
import glob
import gzip
import json
import os
import platform
import re
import signal
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEBIAN_PYTHON = "/usr/bin/python3"  # python3-pyopencl's interpreter
failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        failures.append(what)
    return cond


def masked(text):
    """Lines with their numbers masked: what stays the same between two runs of a benchmark."""
    return re.sub(r"\d+(\.\d+)?", "#", text)


def run(argv, env=None, timeout=600):
    t = time.monotonic()
    p = subprocess.run(argv, env=env, capture_output=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr, time.monotonic() - t


def traced(args, argv, out, rate=1000, extra=(), env=None, log=None):
    log = log or out + ".log"
    if os.path.exists(log):
        os.remove(log)
    cmd = [sys.executable, args.tool, "run", "--api", getattr(args, "api", "opencl"), "--lib-dir", os.path.dirname(args.lib),
           "--rate", str(rate), "--out", out, "--log", log, *extra, "--"] + argv
    rc, so, se, t = run(cmd, env)
    text = open(log, encoding="utf-8", errors="replace").read() if os.path.exists(log) else ""
    summary = None
    if os.path.exists(os.path.join(out, "summary.json")):
        with open(os.path.join(out, "summary.json")) as f:
            summary = json.load(f)
    return rc, so, se, t, text, summary


def trace_valid(out):
    """The Perfetto trace parses and has events; the summary names at least one process."""
    try:
        with gzip.open(os.path.join(out, "trace.json.gz"), "rt") as f:
            events = json.load(f)["traceEvents"]
        with open(os.path.join(out, "summary.json")) as f:
            return bool(events) and bool(json.load(f)["processes"])
    except (OSError, ValueError, KeyError):
        return False


# Every signal whose default action ends a process and that a program can get (SIGPROF is the
# sampler's; SIGKILL and SIGSTOP cannot be caught): the trace keeps what was recorded, and the
# program dies of it traced as untraced.
KILLING_SIGNALS = ("SIGALRM", "SIGUSR1", "SIGUSR2", "SIGTERM", "SIGHUP", "SIGINT", "SIGQUIT", "SIGXCPU", "SIGXFSZ",
                   "SIGVTALRM")


def cases(args):
    """(name, argv, compare: 'exact' or 'masked', what the traced run must also show)."""
    b = args.behave
    out = []
    with open(args.lib, "rb") as f:
        sanitized = b"libasan.so" in f.read()
    if sanitized:  # ci/sanitizers.sh: an ASan tracer cannot be preloaded into programs built without ASan
        print("NOTE: the tracer is built with ASan: the programs from Debian packages are left out")
    elif shutil.which("clinfo"):
        out.append(("clinfo", ["clinfo"], "exact", {}))
    if not sanitized and shutil.which("clpeak"):
        out.append(("clpeak --kernel-latency", ["clpeak", "--kernel-latency"], "masked", {"kernels": True}))
    if not sanitized and os.path.exists(DEBIAN_PYTHON) and subprocess.run([DEBIAN_PYTHON, "-c", "import pyopencl, numpy"],
                                                       capture_output=True).returncode == 0:
        out.append(("pyopencl demo.py", [DEBIAN_PYTHON, os.path.join(HERE, "pyopencl_demo.py")], "exact", {"kernels": True}))
    elif not sanitized:
        print("NOTE: python3-pyopencl not installed: its example is left out (ci/deps.sh installs it)")
    out += [
        ("behave sleep (100 us sampling)", [b, "sleep"], "exact", {"rate": 10000, "rc": 0}),
        ("behave fork", [b, "fork"], "exact", {"processes": 1}),
        ("behave exec", [b, "exec"], "exact", {"processes": 1}),
        ("behave threads", [b, "threads"], "exact", {}),
        ("behave signals", [b, "signals"], "exact", {"log": "its own SIGPROF handler"}),
        ("behave thread-exit", [b, "thread-exit"], "exact", {"rc": 5, "complete": True}),
        ("behave _exit", [b, "_exit"], "exact", {"rc": 7, "complete": True}),
        # Under ASan the crash is the sanitizer's report, whose addresses differ run to run: stdout only.
        ("behave segv", [b, "segv"], "masked" if sanitized else "exact", {"crash": "crashed (SIGSEGV, signal 11", "copies": True}),
        # exec into another OpenCL program (itself: under its own name, so that the raw files' names
        # meet, and under another): one pid, two images, each with its records; the exit is the new image's.
        ("behave exec-self", [b, "exec-self"], "exact", {"rc": 5, "processes": 2, "copies_total": 8, "one_pid": True}),
        ("behave exec-other", [b, "exec-other"], "exact", {"rc": 5, "processes": 2, "copies_total": 8, "one_pid": True}),
        ("behave sigpipe", [b, "sigpipe"], "exact", {"signal": signal.SIGPIPE}),
        *[(f"behave die {name}", [b, "die", str(int(getattr(signal, name)))], "masked" if sanitized else "exact",
           {"signal": int(getattr(signal, name))}) for name in KILLING_SIGNALS],
        # The cap on records: what is left out is counted, every record (3 threads' copies and syncs).
        ("behave threads, 20 records at most", [b, "threads"], "exact",
         {"env": {"ARCHBENCH_TRACE_MAX_RECORDS": "20"}, "capped": "behave threads", "log": "records were dropped"}),
    ]
    if args.planted:
        out.append(("planted gap 200 ms", [args.planted, "gap", "200"], "masked", {"gap_ms": 200.0}))
    return out


# The records the cap (ARCHBENCH_TRACE_MAX_RECORDS) leaves out, counted per case traced uncapped.
CAPPED = ("queue", "buffer", "copy", "kernel", "sync", "build", "map")
RECORDED = {}


def sans_sanitizer(err):
    """stderr without the sanitizers' own lines ("==PID==..."), which name threads and pids that
    differ run to run (LeakSanitizer counts the tracer's sampler thread in a forked child)."""
    return b"".join(l for l in err.splitlines(keepends=True) if not re.match(rb"==\d+==", l))


def check_case(args, tmp, name, argv, compare, want):
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    native = [run(argv) for _ in range(args.repeat)]
    rc0, so0, se0, _ = native[0]
    if rc0 == 77:
        print(f"SKIP  {name}: no OpenCL device")
        return None
    env = dict(os.environ, **want["env"]) if "env" in want else None
    runs = [traced(args, argv, os.path.join(tmp, f"{slug}-{i}"), want.get("rate", 1000), env=env) for i in range(args.repeat)]
    rc, so, se, _, log, summary = runs[-1]
    out = os.path.join(tmp, f"{slug}-{args.repeat - 1}")
    same = (so == so0 and sans_sanitizer(se) == sans_sanitizer(se0)) if compare == "exact" else \
        (masked(so.decode(errors="replace")) == masked(so0.decode(errors="replace")))
    row = {"program": name, "command": " ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(argv)),
           "exit_native": rc0, "exit_traced": rc, "output_unchanged": same, "compared": compare,
           "wall_native_s": round(statistics.median(r[3] for r in native), 3),
           "wall_traced_s": round(statistics.median(r[3] for r in runs), 3), "trace_valid": trace_valid(out)}
    check(rc == rc0, f"{name}: exits {rc} traced, {rc0} untraced")
    check(same, f"{name}: stdout{' and stderr' if compare == 'exact' else ''} unchanged ({compare})")
    if not same:
        print(f"  untraced: {so0[-300:]!r} {se0[-300:]!r}\n  traced:   {so[-300:]!r} {se[-300:]!r}")
    check(row["trace_valid"], f"{name}: a valid trace (summary.json, trace.json.gz)")
    if "rc" in want:
        check(rc == want["rc"], f"{name}: exit {want['rc']} ({rc})")
    if "processes" in want and summary:
        check(len(summary["processes"]) == want["processes"],
              f"{name}: {want['processes']} traced process, no phantom child ({len(summary['processes'])})")
    if "log" in want:
        check(want["log"] in log, f"{name}: the report says '{want['log']}'")
    if "crash" in want and rc0 == -11:  # (under ASan the sanitizer reports and exits 1 instead)
        check(want["crash"] in log, f"{name}: the report says '{want['crash']}'")
    if want.get("complete") and summary:
        check(all(not p.get("ended") for p in summary["processes"]), f"{name}: the trace has its end record")
    if want.get("copies") and summary:
        check(sum(c["count"] for c in summary["copies"].values()) >= 3,
              f"{name}: the copies made before the crash are in the trace")
    if "copies_total" in want and summary:
        n = sum(c["count"] for c in summary["copies"].values())
        check(n == want["copies_total"], f"{name}: every copy of both images is in the trace ({n} of {want['copies_total']})")
    if want.get("one_pid") and summary:
        pids = {p.get("pid") for p in summary["processes"]}
        check(len(pids) == 1, f"{name}: one pid for both images ({sorted(pids)})")
    if "signal" in want and summary:
        # Where the runtime handles the signal itself (PoCL's LLVM: SIGTERM, SIGINT, SIGHUP, SIGUSR1/2,
        # SIGQUIT, SIGXCPU, SIGXFSZ), the tracer chains to its handler: the records reach the file
        # before it runs; one that raises the signal again itself leaves no end record.
        sig, p = want["signal"], summary["processes"][0]
        if rc0 == -sig:
            check(p.get("signal") == sig or (p.get("ended") and not p.get("truncated")),
                  f"{name}: the trace is flushed at the signal (" + (f"its end record names signal {sig})" if p.get("signal") == sig
                  else "the runtime's handler raised it again: no end record, no line cut off)" if not p.get("truncated")
                  else "its last line was cut off: not flushed)"))
        else:
            check(not p.get("ended"), f"{name}: the runtime's handler ends the program (exit {rc0}): the trace has its end record")
        counts = summary["record_counts"]
        check(counts.get("copy") == 6 and counts.get("sync") == 8,
              f"{name}: every record before the signal is kept (6 copies and 8 syncs: {counts.get('copy')}, {counts.get('sync')})")
    if "capped" in want and summary:
        full = RECORDED.get(want["capped"])
        kept = sum(n for t, n in summary["record_counts"].items() if t in CAPPED)
        dropped = sum(p.get("records_dropped") or 0 for p in summary["processes"])
        check(full is not None and dropped > 0 and kept + dropped == full,
              f"{name}: every record left out is counted ({kept} kept + {dropped} dropped = {full} recorded uncapped)")
    if want.get("kernels") and summary:
        check(bool(summary["kernels"]), f"{name}: kernels recorded")
    if "gap_ms" in want and summary:
        gap = summary["idle_gaps"][0]["ns"] / 1e6 if summary["idle_gaps"] else 0.0
        row["planted_gap_ms"], row["measured_gap_ms"] = want["gap_ms"], round(gap, 3)
        check(abs(gap - want["gap_ms"]) <= 0.1 * want["gap_ms"], f"{name}: idle gap {gap:.1f} ms (planted {want['gap_ms']:.0f})")
    if summary:
        RECORDED[name] = sum(n for t, n in summary["record_counts"].items() if t in CAPPED)
        row["records"] = summary["record_counts"]
        row["sampler"] = summary["processes"][0].get("sampler")
    return row


def static_program(tool):
    """A statically linked program of this system (ldconfig: Debian's, or Ubuntu's ldconfig.real), or
    None; told as `run` tells it (archbench.run.trace.dynamic_elf, beside the tool)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(tool)))
    from archbench.run.trace import dynamic_elf
    return next((p for p in ("/sbin/ldconfig", "/sbin/ldconfig.real", "/usr/sbin/ldconfig.real")
                 if os.path.isfile(p) and not dynamic_elf(p)), None)


def bad_input(args, tmp, argv):
    """`run` (with --api args.api) on bad input: each a clear message and the program's own status.
    argv: a dynamically linked program that runs here (for the unwritable output folder)."""
    rc, *_ , log, _ = traced(args, ["/nonexistent/program"], os.path.join(tmp, "nf"))
    check(rc == 127 and "not found" in log, f"not found: exit 127 with a message ({rc})")
    rc, *_, log, _ = traced(args, ["/etc/hostname"], os.path.join(tmp, "nx"))
    check(rc == 126 and ("not an executable" in log or "cannot run" in log), f"not executable: exit 126 with a message ({rc})")
    static = static_program(args.tool)
    if static:
        rc0, so0, _, _ = run([static, "--version"])
        rc, so, _, _, log, _ = traced(args, [static, "--version"], os.path.join(tmp, "static"))
        check(rc == rc0 and so == so0 and "statically linked" in log and "cannot enter it" in log,
              f"static binary {static}: runs untraced, the tracer says it cannot enter it, exit {rc} as untraced {rc0}")
    else:
        print("NOTE  no statically linked program on this system (ldconfig): that case is left out")
    rc0, so0, _, _ = run(argv)
    rc, so, se, _, log, _ = traced(args, argv, "/dev/null/trace", log=os.path.join(tmp, "unwritable.log"))
    check(rc == rc0 and so == so0 and "cannot write traces" in log,
          f"unwritable output folder: the program runs untraced with a message, exit {rc} as untraced {rc0}")


def bad_input_opencl(args, tmp):
    b = args.behave
    bad_input(args, tmp, [b, "threads"])
    env = dict(os.environ, LD_PRELOAD=args.lib, ARCHBENCH_TRACE_DIR=os.path.join(tmp, "missing", "dir"))
    rc, so, se, _ = run([b, "threads"], env)
    check(rc == 0 and so == b"threads done\n" and b"cannot write" in se,
          f"missing trace folder (tracer alone): the program runs on, the tracer says why ({rc})")


def terminated(args, tmp):
    """SIGTERM to `run` (a job scheduler's time limit): the program gets it, run waits for it, writes
    the summary of what was recorded and dies of the signal as the program did; no program is left."""
    out = os.path.join(tmp, "sigterm")
    log = out + ".log"
    cmd = [sys.executable, args.tool, "run", "--api", "opencl", "--lib-dir", os.path.dirname(args.lib), "--out", out,
           "--log", log, "--", args.behave, "wait"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = p.stdout.readline()  # the program is waiting
    p.send_signal(signal.SIGTERM)
    try:
        so, _ = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        so, _ = p.communicate()
    check(first == b"waiting\n" and p.returncode == -signal.SIGTERM,
          f"SIGTERM to run: it dies of SIGTERM as the program did ({p.returncode})")
    check(trace_valid(out), "SIGTERM to run: the summary and trace are written")
    left = [f for f in os.listdir(out) if f.endswith(".jsonl")] if os.path.isdir(out) else []
    pids = [int(m.group(1)) for f in left for m in [re.search(r"-(\d+)\.jsonl$", f)] if m]
    check(pids and not any(os.path.exists(f"/proc/{pid}") for pid in pids), f"SIGTERM to run: the program is not left running {pids}")


def daemon(args, tmp):
    """A program whose parent exits while the child it forked goes on: run says the child still
    carries the tracer, and the child's records arrive once it has run."""
    out = os.path.join(tmp, "daemon")
    rc, so, se, _, log, summary = traced(args, [args.behave, "daemon"], out)
    check(rc == 0 and so == b"parent exits\n", f"daemon: exits 0 as the parent did ({rc}, {so!r})")
    check("still carries the tracer" in log, "daemon: the report says the child still carries the tracer")
    deadline = time.monotonic() + 30
    child = []
    while time.monotonic() < deadline and not child:
        time.sleep(0.2)
        for f in glob.glob(os.path.join(out, "*.jsonl")):
            with open(f) as fh:
                recs = [json.loads(l) for l in fh if l.strip()]
            if summary and recs and recs[0].get("pid") not in {q.get("pid") for q in summary["processes"]} and \
                    any(r["type"] == "end" for r in recs):
                child = recs
    check(sum(r["type"] == "copy" for r in child) == 4, "daemon: the child's records are written after its parent exits")


def write_table(rows, folder):
    os.makedirs(folder, exist_ok=True)
    dev = subprocess.run(["clinfo", "-l"], capture_output=True, text=True).stdout.strip() if shutil.which("clinfo") else "?"
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "host": platform.node(),
            "kernel": platform.release(), "opencl_devices": dev, "ocl_icd_vendors": os.environ.get("OCL_ICD_VENDORS"),
            "git": subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()}
    with open(os.path.join(folder, "corpus.json"), "w") as f:
        json.dump({"meta": meta, "programs": rows}, f, indent=1)
    lines = ["# OpenCL tracer on a corpus of programs", "",
             f"Made by `tests/analysis/trace/corpus.py --table` on {meta['date']} ({meta['host']}, Linux {meta['kernel']}, "
             f"commit {meta['git']}). OpenCL devices (`clinfo -l`):", "", "```", dev, "```", "",
             "Wall times are medians of the runs; exit status and output are compared traced against untraced "
             "(`exact`: stdout and stderr byte for byte; `masked`: stdout with every number masked, for programs "
             "that print timings). The planted gap is archbench_trace_planted's host work between two kernels, "
             "measured as the device's idle gap on the host clock.", "",
             "Wall traced is the whole `archbench_trace.py run` (its Python start, the traced run, the report and "
             "trace.json.gz), so short programs show that fixed cost.", "",
             "| program | wall untraced s | wall traced s | ratio | exit untraced / traced | output unchanged | trace valid | planted gap ms / measured |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        gap = f"{r['planted_gap_ms']:.0f} / {r['measured_gap_ms']:.1f}" if "planted_gap_ms" in r else ""
        ratio = r["wall_traced_s"] / r["wall_native_s"] if r["wall_native_s"] else 0
        lines.append(f"| {r['program']} | {r['wall_native_s']:.3f} | {r['wall_traced_s']:.3f} | {ratio:.2f} | "
                     f"{r['exit_native']} / {r['exit_traced']} | {'yes' if r['output_unchanged'] else 'NO'} ({r['compared']}) | "
                     f"{'yes' if r['trace_valid'] else 'NO'} | {gap} |")
    samplers = sorted({r.get("sampler") for r in rows if r.get("sampler")})
    lines += ["", "Sampler: " + "; ".join(samplers), ""]
    with open(os.path.join(folder, "README.md"), "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {folder}/corpus.json and {folder}/README.md")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tool", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--behave", required=True)
    ap.add_argument("--planted")
    ap.add_argument("--table")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    return run_checks(args)


def run_checks(args):
    tmp = tempfile.mkdtemp(prefix="archbench-trace-corpus-")
    rows = [r for c in cases(args) for r in [check_case(args, tmp, *c)] if r]
    bad_input_opencl(args, tmp)
    terminated(args, tmp)
    daemon(args, tmp)
    if args.table:
        write_table(rows, args.table)
    print(f"corpus: {len(failures)} check(s) failed" if failures else "corpus: all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
