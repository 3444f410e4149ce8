#!/usr/bin/env python3
"""Nothing lost, nothing false (issue 23): runs the archbench binary as a careless user would and
checks that a results file is never lost, truncated or silently replaced, and that the exit
status tells the truth. On the default device (ARCHBENCH_DEVICE picks another); exit 77
(skipped) without one. Never timing-based: a run is interrupted once its lock file exists and
it has reported its first benchmarks, with far more work left than the signal needs to arrive.

Usage: safety.py ARCHBENCH"""
import glob
import json
import os
import re
import signal
import subprocess
import sys
import tempfile

BIN = sys.argv[1]
failures = []
QUICK = ["--benchmark_min_time=0.01", "--benchmark_repetitions=1"]


def run(args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([BIN] + args, capture_output=True, text=True, env=e, timeout=600)
    return p.returncode, p.stdout, p.stderr


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def snapshot(folder):
    """Every file under `folder` with its bytes."""
    out = {}
    for path in glob.glob(os.path.join(folder, "**"), recursive=True):
        if os.path.isfile(path):
            out[os.path.relpath(path, folder)] = open(path, "rb").read()
    return out


def bad_input(args, what, needle, env=None):
    """A refused input: exit 2 with a message, not an abort (134) or a core dump."""
    rc, out, err = run(args, env)
    expect(rc == 2 and needle in err and "core dumped" not in err and "terminate called" not in err,
           "%s: exit 2 with a clear message (exit %d: %s)" % (what, rc, err.strip()[-200:]))


def interrupted_record(root, sig, suite_args, concurrent=None):
    """Starts a --record that has far more to do than it will be allowed, waits until it holds
    its lock and has finished one benchmark, optionally runs `concurrent` (a second run at the
    same output) meanwhile, then sends `sig`. Returns (exit status, the second run's result)."""
    e = dict(os.environ, ARCHBENCH_RESULTS_ROOT=root)
    # Many benchmarks, each at least half a second: about 10 s of work left after the first.
    p = subprocess.Popen([BIN] + suite_args + ["--benchmark_filter=^compute/%s/(add|mul)/" % BE,
                                               "--benchmark_min_time=0.5", "--benchmark_repetitions=1"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=e)
    target, second = None, None
    for line in p.stderr:
        m = re.search(r"JSON goes to (\S+)", line)
        if m:
            target = m.group(1)
        if re.match(r"\[\d+/\d+\]", line):
            break
    if target and os.path.exists(target + ".lock") and concurrent:
        second = run(concurrent, {"ARCHBENCH_RESULTS_ROOT": root})
    p.send_signal(sig)
    p.stderr.read()
    return p.wait(timeout=120), target, second


rc, out, err = run(["--list-devices"])
if rc != 0:
    print("SKIPPED: no device to run on:\n" + out + err)
    sys.exit(77)
rc, listed, _ = run(["--benchmark_list_tests"])
BE = listed.split("\n")[0].split("/")[1] if rc == 0 and "/" in listed else "opencl"
ONE = "--benchmark_filter=^compute/%s/add/int$" % BE

with tempfile.TemporaryDirectory() as root:
    # A first record: the baseline every later step must keep.
    rc, out, err = run(["--record=safety", ONE] + QUICK, {"ARCHBENCH_RESULTS_ROOT": root})
    m = re.search(r"JSON goes to (\S+)", err)
    base = m.group(1) if m else ""
    expect(rc == 0 and os.path.isfile(base), "a first --record writes its baseline (exit %d: %s)" % (rc, err[-300:]))
    if not os.path.isfile(base):
        sys.exit(1)
    folder = os.path.dirname(base)
    ctx = json.load(open(base))["context"]
    expect(ctx.get("filter") == "^compute/%s/add/int$" % BE and ctx.get("sweep") == "quick"
           and ctx.get("repetitions") == "1", "the context records filter, sweep and repetitions (%r, %r, %r)"
           % (ctx.get("filter"), ctx.get("sweep"), ctx.get("repetitions")))
    version = re.sub(r"[^A-Za-z0-9._]", "-", ctx["archbench_version"])

    # A filter typo: exit 2, nothing written, the baseline untouched.
    before = snapshot(folder)
    rc, out, err = run(["--record=safety", "--benchmark_filter=^no-such-benchmark$"], {"ARCHBENCH_RESULTS_ROOT": root})
    expect(rc == 2 and snapshot(folder) == before, "a filter that matches nothing: exit 2, the folder as it was")

    # SIGINT mid-run, with a second run aimed at the same file meanwhile: the second refuses at
    # start (exit 2, naming the first), the first dies of the signal, and the baseline, byte for
    # byte, is all that is left (no temporary, no lock).
    rc, target, second = interrupted_record(root, signal.SIGINT, ["--record=safety"],
                                            concurrent=["--record=safety", ONE] + QUICK)
    expect(target == base, "the interrupted run aimed at the baseline (%s)" % target)
    expect(second is not None and second[0] == 2 and "another archbench run" in second[2],
           "a second run at the same output refuses at start with exit 2 (%s)" % (second and second[2][-300:]))
    expect(rc == -signal.SIGINT, "SIGINT still kills the run (exit %s; the shell sees 130)" % rc)
    expect(snapshot(folder) == before, "after SIGINT: the baseline byte-identical, no temporary or lock left (%s)"
           % sorted(snapshot(folder)))
    rc, target, _ = interrupted_record(root, signal.SIGTERM, ["--record=safety"])
    expect(rc == -signal.SIGTERM and snapshot(folder) == before, "after SIGTERM: likewise (exit %s, %s)"
           % (rc, sorted(snapshot(folder))))

    # A complete --record over the baseline keeps the old one under its version's name, then
    # under a counter when that name is taken too.
    rc, out, err = run(["--record=safety", ONE] + QUICK, {"ARCHBENCH_RESULTS_ROOT": root})
    kept = os.path.join(folder, "safety-%s.json" % version)
    expect(rc == 0 and os.path.isfile(kept) and open(kept, "rb").read() == before[os.path.basename(base)]
           and "kept as " + kept in err, "--record over a baseline keeps the old one as %s" % os.path.basename(kept))
    replaced = open(base, "rb").read()
    rc, out, err = run(["--record=safety", ONE] + QUICK, {"ARCHBENCH_RESULTS_ROOT": root})
    kept2 = os.path.join(folder, "safety-%s-2.json" % version)
    expect(rc == 0 and os.path.isfile(kept2) and open(kept2, "rb").read() == replaced,
           "and the next one as %s" % os.path.basename(kept2))
    expect(not [f for f in os.listdir(folder) if ".tmp-" in f or f.endswith(".lock")], "no temporary or lock left")

with tempfile.TemporaryDirectory() as tmp:
    # Every kernel fails to build: each benchmark is a failure, not a skip, and the run exits 1.
    options = {"opencl": {"ARCHBENCH_CL_OPTIONS": "-Dfloat=( -Ddouble=("},
               "cuda": {"ARCHBENCH_CUDA_OPTIONS": "--no-such-nvrtc-option"}}[BE]
    out_json = os.path.join(tmp, "failed.json")
    rc, out, err = run(["--benchmark_filter=^(compute/BE/mad/float|memory/BE/copy/double)$".replace("BE", BE),
                        "--benchmark_out=" + out_json] + QUICK, options)
    rows = json.load(open(out_json))["benchmarks"] if os.path.exists(out_json) else []
    expect(rc == 1 and rows and all(r.get("error_occurred") and r["error_message"].startswith("error: ") for r in rows),
           "every kernel failing to build: each a failure (error: ...), exit 1 (exit %d)" % rc)
    expect("2 failed" in err, "the last line counts the failures (%s)" % err.strip().splitlines()[-1:])

    # A benchmark skipped for a feature the device lacks (fp16 on PoCL) is not a failure: exit 0.
    out_json = os.path.join(tmp, "skips.json")
    rc, out, err = run(["--benchmark_filter=^compute/%s/add/(half|int)$" % BE, "--benchmark_out=" + out_json] + QUICK)
    rows = json.load(open(out_json))["benchmarks"] if os.path.exists(out_json) else []
    half = [r for r in rows if "/half" in r["name"]]
    skipped = [r for r in half if r.get("error_occurred")]
    expect(rc == 0 and all(r["error_message"].startswith("skipped: ") for r in skipped),
           "a run whose only misses are the device's missing features exits 0 (exit %d, %d skipped)" % (rc, len(skipped)))

    # Bad input: exit 2 before anything runs, never an abort.
    bad_input(["--device=99999999999999999999999"], "a device index beyond any integer", "--device=")
    for v in ["-1", "0", "abc"]:
        bad_input(["--benchmark_repetitions=" + v, ONE], "--benchmark_repetitions=" + v, "--benchmark_repetitions")
    bad_input(["--benchmark_min_time=abc", ONE], "--benchmark_min_time=abc", "--benchmark_min_time")
    bad_input(["--benchmark_out=/proc/no/such.json", ONE] + QUICK, "an unwritable --benchmark_out", "/proc/no/such.json")
    bad_input(["--benchmark_out=" + tmp, ONE] + QUICK, "a folder as --benchmark_out", "is a folder")
    bad_input([ONE] + QUICK, "ARCHBENCH_DUMP_DIR that does not exist", "ARCHBENCH_DUMP_DIR",
              {"ARCHBENCH_DUMP_DIR": os.path.join(tmp, "missing")})
    # --device=all into a folder that cannot exist: an error, never "JSON in ..." (success).
    rc, out, err = run(["--device=all", "--benchmark_out=/proc/no/merged.json", ONE] + QUICK)
    expect(rc != 0 and "JSON in" not in err, "--device=all into an unwritable folder: exit %d, no success line" % rc)

if failures:
    print("safety: %d check(s) failed" % len(failures))
    sys.exit(1)
print("safety: all checks passed")
