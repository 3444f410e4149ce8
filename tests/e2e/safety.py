#!/usr/bin/env python3
"""Nothing lost, nothing false (issues 23 and 40): runs the archbench binary as a careless user
would and checks that a results file is never lost, truncated or silently replaced, and that the
exit status tells the truth: stdout closed early or full, bad knob values, output paths that
cannot work (refused at start), symbolic links (written through), a filter that is not a regex. On the default device (ARCHBENCH_DEVICE picks another); exit 77
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


def one_line(err):
    """archbench's message lines on stderr (the progress lines left out)."""
    return [l for l in err.strip().splitlines() if not re.match(r"\[\d+/\d+\]", l)]


def with_stdout(stdout, args, env=None):
    """Runs with `stdout` an open file or descriptor; (exit status, stderr)."""
    p = subprocess.run([BIN] + args, stdout=stdout, stderr=subprocess.PIPE, text=True,
                       env=dict(os.environ, **(env or {})), timeout=600)
    return p.returncode, p.stderr


def closed_stdout(args, env=None):
    """Runs with stdout a pipe whose reader has gone, as `| head -1` leaves it once head exits:
    every write to it fails (SIGPIPE, EPIPE), whatever the size of the output."""
    r, w = os.pipe()
    os.close(r)
    try:
        return with_stdout(w, args, env)
    finally:
        os.close(w)


def results_in(path):
    """The benchmark entries of the results file at `path`; None where it is missing or not whole."""
    try:
        return json.load(open(path))["benchmarks"]
    except (OSError, ValueError, KeyError):
        return None


def started(args, env=None):
    """Starts a run with far more to do than it will be allowed; returns it once it has reported
    its first benchmark (so it holds its lock)."""
    p = subprocess.Popen([BIN] + args + ["--benchmark_filter=^compute/%s/(add|mul)/" % BE, "--benchmark_min_time=0.5",
                                         "--benchmark_repetitions=1"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=dict(os.environ, **(env or {})))
    for line in p.stderr:
        if re.match(r"\[\d+/\d+\]", line):
            break
    return p


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

with tempfile.TemporaryDirectory() as tmp:
    # stdout closed early (`archbench --benchmark_format=json --benchmark_out=prev.json | head -1`):
    # the new results replace prev.json all the same, no lock is left, and the exit status is
    # 141 (the shell's for a pipe closed early), with one line saying so.
    prev = os.path.join(tmp, "prev.json")
    open(prev, "w").write("the previous results\n")
    rc, err = closed_stdout([ONE, "--benchmark_format=json", "--benchmark_out=" + prev] + QUICK)
    expect(rc == 141 and results_in(prev) and sorted(os.listdir(tmp)) == ["prev.json"] and "stdout was closed" in err,
           "stdout closed early (json): exit 141, the file written, no lock (exit %d, %s, %s)"
           % (rc, sorted(os.listdir(tmp)), one_line(err)[-1:]))
    # Without --benchmark_out the default results/local/ file lands the same way (console output).
    local = os.path.join(tmp, "local")
    rc, err = closed_stdout([ONE] + QUICK, {"ARCHBENCH_RESULTS_DIR": local})
    files = os.listdir(local) if os.path.isdir(local) else []
    expect(rc == 141 and len(files) == 1 and results_in(os.path.join(local, files[0])),
           "stdout closed early (console): exit 141, the default results file written, no lock (exit %d, %s)"
           % (rc, files))
    # A full stdout (> /dev/full) is a failed write: exit 1 with one line, the file written.
    full_out = os.path.join(tmp, "full.json")
    with open("/dev/full", "w") as full:
        rc, err = with_stdout(full, [ONE, "--benchmark_format=json", "--benchmark_out=" + full_out] + QUICK)
    expect(rc == 1 and results_in(full_out) and one_line(err)[-1:] == ["archbench: cannot write to stdout: No space left on device"],
           "stdout on /dev/full: exit 1, one line, the file written (exit %d, %s)" % (rc, one_line(err)[-2:]))

    # Every knob through one reader: a bad value exits 2 before anything runs, naming the knob
    # and what it accepts.
    for knob, value, accepts in [("ARCHBENCH_CHAINS", "abc", "2 to 16"), ("ARCHBENCH_CHAINS", "-99999999999999999999", "2 to 16"),
                                 ("ARCHBENCH_CHAINS", "3", "even"), ("ARCHBENCH_ENERGY", "yes", "0 or 1"),
                                 ("ARCHBENCH_TRAFFIC", "true", "0 or 1"), ("ARCHBENCH_TOPDOWN", "7", "0, 1, 2 or 3"),
                                 ("ARCHBENCH_SWEEP", "fast", "quick or full"), ("ARCHBENCH_WAVES", "0", "0.01 to 16"),
                                 ("ARCHBENCH_CLOCK_WINDOW_MS", "1e400", "1 to 60000"), ("ARCHBENCH_CUDA_ARCH", "sm90", "sm_"),
                                 ("ARCHBENCH_DUMP_DIR", os.path.join(tmp, "missing"), "a folder that exists"),
                                 ("BENCHMARK_FILTER", "(", "regular expression")]:
        rc, out, err = run([ONE, "--benchmark_out=" + os.path.join(tmp, "knob.json")] + QUICK, {knob: value})
        expect(rc == 2 and one_line(err) == ["archbench: %s must be %s" % (knob, err.split(" must be ")[-1].strip())]
               and accepts in err and "'%s'" % value in err and not os.path.exists(os.path.join(tmp, "knob.json")),
               "%s=%s: exit 2 before anything runs, one line naming it and what it accepts (exit %d: %s)"
               % (knob, value, rc, err.strip()[-200:]))
    # A good value is taken, and an empty one is as unset.
    out_json = os.path.join(tmp, "chains.json")
    rc, out, err = run([ONE, "--benchmark_out=" + out_json] + QUICK, {"ARCHBENCH_CHAINS": "4", "ARCHBENCH_ENERGY": ""})
    rows = results_in(out_json) or []
    expect(rc == 0 and rows and all(r["axes"]["chains"] == 4 for r in rows)
           and json.load(open(out_json))["context"]["chains_override"] == "4",
           "ARCHBENCH_CHAINS=4 measures with 4 chains, ARCHBENCH_ENERGY= (empty) is as unset (exit %d)" % rc)

    # A filter that is not a regular expression: one line (not a second, false "no benchmark
    # matched"), exit 2; a filter that matches nothing: one line too.
    rc, out, err = run(["--benchmark_filter=(", "--benchmark_out=" + os.path.join(tmp, "f.json")])
    expect(rc == 2 and len(one_line(err)) == 1 and "--benchmark_filter" in err and "matched" not in err,
           "an invalid filter regex: exit 2 with one line (%s)" % one_line(err))
    rc, out, err = run(["--benchmark_filter=^no-such$", "--benchmark_out=" + os.path.join(tmp, "f.json")])
    expect(rc == 2 and one_line(err) == ["archbench: no benchmark matched the filter"],
           "a filter that matches nothing: exit 2 with one line (%s)" % one_line(err))

    # Output paths checked whole at start: a name whose temporary (<name>.tmp-<pid>) would be
    # over the file system's 255 bytes is refused before anything runs, not after the suite.
    long_name = os.path.join(tmp, "x" * 245 + ".json")
    rc, out, err = run([ONE, "--benchmark_out=" + long_name] + QUICK)
    expect(rc == 2 and "over the folder's limit" in err and not re.search(r"\[\d+/\d+\]", err)
           and not [f for f in os.listdir(tmp) if f.startswith("xxx")],
           "an output whose temporary name is too long: exit 2 at start, nothing left (exit %d: %s)" % (rc, one_line(err)))
    # A symbolic link is written through: its target gets the results, the link stays a link,
    # and the lock is the target's (a second run at the target refuses while the first runs).
    links = os.path.join(tmp, "links")
    os.makedirs(os.path.join(links, "real"))
    target = os.path.join(links, "real", "results.json")
    open(target, "w").write("old\n")
    os.symlink(os.path.join("real", "results.json"), os.path.join(links, "link.json"))
    p = started(["--benchmark_out=" + os.path.join(links, "link.json")])
    locked = os.path.exists(target + ".lock") and not os.path.exists(os.path.join(links, "link.json.lock"))
    second = run([ONE, "--benchmark_out=" + target] + QUICK)
    p.send_signal(signal.SIGINT)
    p.stderr.read()
    p.wait(timeout=120)
    expect(locked and second[0] == 2 and "another archbench run" in second[2],
           "through a link, the target is locked: a second run at the target refuses (%s)" % second[2].strip()[-200:])
    expect(open(target).read() == "old\n" and os.path.islink(os.path.join(links, "link.json"))
           and sorted(os.listdir(os.path.join(links, "real"))) == ["results.json"],
           "after SIGINT through a link: the target as it was, the link a link, no lock or temporary")
    rc, out, err = run([ONE, "--benchmark_out=" + os.path.join(links, "link.json")] + QUICK)
    expect(rc == 0 and results_in(target) and os.path.islink(os.path.join(links, "link.json")),
           "a run through a link writes the target and keeps the link (exit %d)" % rc)
    os.symlink(os.path.join("real", "new.json"), os.path.join(links, "dangling.json"))
    rc, out, err = run([ONE, "--benchmark_out=" + os.path.join(links, "dangling.json")] + QUICK)
    expect(rc == 0 and results_in(os.path.join(links, "real", "new.json")),
           "a dangling link: the file it names is made (exit %d)" % rc)
    os.symlink("loop-b", os.path.join(links, "loop-a"))
    os.symlink("loop-a", os.path.join(links, "loop-b"))
    bad_input([ONE, "--benchmark_out=" + os.path.join(links, "loop-a")] + QUICK, "a loop of links as the output",
              "too many levels of symbolic links")
    # --record over a baseline whose kept name (<suite>-<its version>.json) would be too long:
    # refused at start, the baseline as it was (not a run that fails at the end).
    root = os.path.join(tmp, "root")
    suite = "s" * 230
    rc, out, err = run(["--record=" + suite, ONE] + QUICK, {"ARCHBENCH_RESULTS_ROOT": root})
    m = re.search(r"JSON goes to (\S+)", err)
    if m and os.path.isfile(m.group(1)):
        doc = json.load(open(m.group(1)))
        doc["context"]["archbench_version"] = "v" * 40
        json.dump(doc, open(m.group(1), "w"))
        before = snapshot(root)
        rc, out, err = run(["--record=" + suite, ONE] + QUICK, {"ARCHBENCH_RESULTS_ROOT": root})
        expect(rc == 2 and "over the folder's limit" in err and snapshot(root) == before,
               "--record whose kept name would be too long: exit 2 at start, the baseline as it was (exit %d: %s)"
               % (rc, one_line(err)[-1:]))
    else:
        expect(False, "a --record with a long suite name writes its baseline (exit %d: %s)" % (rc, err[-300:]))

if failures:
    print("safety: %d check(s) failed" % len(failures))
    sys.exit(1)
print("safety: all checks passed")
