#!/usr/bin/env python3
"""Regression check, as CI runs it: a short suite with repetitions on the default device is
compared (1) with the baseline recorded under results/ for the same device and driver: what a
busy machine cannot fake is asserted (the same benchmarks, the same cost per launch, something
compared), the timings are shown but not judged (a parallel build on a 2-core machine slows
this suite 2-5x, which no threshold can tell from a regression); (2) with itself (no false
alarm); (3) with the same kernels built with -cl-opt-disable, a deliberately slowed build (25x
and more) that must be flagged: the gate for timings. Exit 77 (skipped) without an OpenCL
device, and when no baseline matches the device and driver (the slowed build still checked:
a failure there is a failure).
Usage: regression.py ARCHBENCH COMPARE_PY RESULTS_ROOT"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

ARCHBENCH, COMPARE, RESULTS = sys.argv[1:4]
# Benchmarks that are steady on a shared CPU: compute-bound, stream and two latency points.
CI_FILTER = (r"^(compute/opencl/mad/(float|double)(4|16)|memory/opencl/(triad|copy)/double|"
             r"latency/opencl/chase/bytes:(4096|1048576))$")
# A change must be this large (relative change of medians) to fail CI against a baseline that
# another machine of the same kind recorded: run-to-run swings of tens of percent are normal
# on a shared 2-core VM, a lost optimisation or a debug build is several times slower.
BASELINE_MIN_EFFECT = "1.0"
failures = []
no_baseline = False


def archbench(out, filt=CI_FILTER, env=None):
    e = dict(os.environ, **(env or {}))
    p = subprocess.run([ARCHBENCH, "--benchmark_filter=" + filt, "--benchmark_repetitions=5",
                        "--benchmark_min_time=0.05", "--benchmark_out=" + out], capture_output=True, text=True, env=e)
    if p.returncode != 0:
        print(p.stdout[-2000:] + p.stderr[-2000:])
    return p.returncode


def compare(base, new, *extra):
    p = subprocess.run([sys.executable, COMPARE, base, new, *extra], capture_output=True, text=True)
    print(p.stdout + p.stderr)
    return p.returncode, p.stdout


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what + "\n")
    if not cond:
        failures.append(what)


if subprocess.run([ARCHBENCH, "--list-devices"], capture_output=True).returncode != 0:
    print("SKIPPED: no OpenCL device")
    sys.exit(77)

with tempfile.TemporaryDirectory() as tmp:
    new = os.path.join(tmp, "ci.json")
    expect(archbench(new) == 0, "the CI suite ran")
    ctx = json.load(open(new))["context"]

    baselines = [f for f in glob.glob(os.path.join(RESULTS, "*", "*", "opencl-ci.json"))
                 if (lambda c: c.get("device") == ctx["device"] and c.get("driver_version") == ctx["driver_version"])(
                     json.load(open(f))["context"])]
    if baselines:
        print("== against the recorded baseline %s (min effect %s)" % (baselines[0], BASELINE_MIN_EFFECT))
        rc, out = compare(baselines[0], new, "--min-effect", BASELINE_MIN_EFFECT)
        expect(rc in (0, 3), "the baseline and this run were compared (exit %d; 2 means nothing was)" % rc)
        counts = dict((k, int(v)) for v, k in re.findall(r"(\d+) (definition|missing|new)", out))
        expect(counts.get("definition", 1) == 0 and counts.get("missing", 1) == 0 and counts.get("new", 1) == 0,
               "the same benchmarks with the same cost per launch as the baseline (%s); a changed definition "
               "needs a new baseline: archbench --record=opencl-ci" % counts)
        print("== the timings above are shown, not judged: a busy machine fakes them (the slowed build below is the gate)\n")
    else:
        no_baseline = True
        print("== no baseline recorded for %s, driver %s, under %s: record one with\n"
              "   archbench --record=opencl-ci --benchmark_filter='%s'\n" % (ctx["device"], ctx["driver_version"],
                                                                           RESULTS, CI_FILTER))

    print("== the run against itself")
    rc, _ = compare(new, new)
    expect(rc == 0, "a run compared with itself shows no regression")

    print("== a deliberately slowed build (-cl-opt-disable) of the compute kernels")
    slow = os.path.join(tmp, "slow.json")
    archbench(slow, r"^compute/opencl/mad/(float|double)(4|16)$", {"ARCHBENCH_CL_OPTIONS": "-cl-opt-disable"})
    rc, out = compare(new, slow, "--filter", "^compute/")
    expect(rc == 3 and "compute/opencl/mad/float16" in out, "the slowed kernels are flagged as regressions (exit 3)")

if failures:
    print("regression check: %d failed: %s" % (len(failures), "; ".join(failures)))
    sys.exit(1)
if no_baseline:
    print("regression check: SKIPPED the comparison with a baseline (none recorded for this device and driver); "
          "the slowed build was caught")
    sys.exit(77)
print("regression check: all passed")
