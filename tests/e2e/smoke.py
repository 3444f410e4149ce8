#!/usr/bin/env python3
"""Smoke test: runs the archbench binary briefly and checks the JSON it writes (names,
counters, context) and its answers to bad input, on the default device (ARCHBENCH_DEVICE picks
another; the backend, cuda or opencl, is read from the names it registers). Exit 77 (skipped)
without a device."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

BIN = sys.argv[1]
NAME = re.compile(r"^[a-z_0-9]+/(opencl|cuda)/[a-z_0-9]+/[a-z_0-9:]+(/[a-z_]+:\d+)?/manual_time$")
failures = []


def run(args, env=None, timeout=600):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([BIN] + args, capture_output=True, text=True, env=e, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


rc, out, err = run(["--list-devices"])
if rc != 0:
    print("SKIPPED: no device to smoke-test on:\n" + out + err)
    sys.exit(77)
expect("--device=" in out and "compute units" in out, "--list-devices shows selectors and facts")
rc, listed, err = run(["--benchmark_list_tests"])
BE = listed.split("\n")[0].split("/")[1] if rc == 0 and "/" in listed else "opencl"
print("backend under test: " + BE)

rc, out, err = run(["--help"])
expect(rc == 0 and "--list-devices" in out and "benchmark_filter" in out, "--help shows ours and Google Benchmark's flags")

# The default run (no filter): the headline first, in order (peak compute, stream, latency,
# host transfers, launch latency), then a point or two of the other families; a filter that
# names a family runs all of its quick sweep.
default = [n.split("/manual_time")[0] for n in listed.split()]
families = [n.split("/")[0] for n in default]
stream = [i for i, n in enumerate(default) if re.match(r"memory/[^/]+/(copy|mul|add|triad|dot)/", n)]
first = {f: families.index(f) for f in ("compute", "latency", "bus", "launch") if f in families}
expect(len(first) == 4 and stream and first["compute"] == 0 and first["compute"] < stream[0] < first["latency"]
       < first["bus"] < first["launch"], "the default run starts with compute, stream, latency, bus, launch")
head = set(families[:first.get("launch", 0) + 1])
expect(head <= {"compute", "memory", "latency", "bus", "launch"} and len(default) < 150,
       "the headline comes before every other family, %d benchmarks in all" % len(default))
rc, builtins, err = run(["--benchmark_list_tests", "--benchmark_filter=^builtins/"])
expect(rc == 0 and len(builtins.split()) > families.count("builtins") > 0,
       "a family filter runs its whole quick sweep (%d builtins, %d in the default run)"
       % (len(builtins.split()), families.count("builtins")))

with tempfile.TemporaryDirectory() as tmp:
    flt = r"^(compute/BE/mad/float4|compute/BE/add/int|memory/BE/triad/(double|float)|latency/BE/chase/bytes:1024)$".replace("BE", BE)
    rc, out, err = run(["--benchmark_filter=" + flt, "--benchmark_min_time=0.01", "--benchmark_repetitions=2"],
                       env={"ARCHBENCH_RESULTS_DIR": tmp})
    expect(rc == 0, "a filtered run exits 0 (stderr: %s)" % err[-500:])
    files = glob.glob(os.path.join(tmp, "archbench-*.json"))
    expect(len(files) == 1, "the run wrote one JSON under ARCHBENCH_RESULTS_DIR")
    # The compact console: one line a benchmark (its median), names without /manual_time.
    expect("median of 2" in out and "manual_time" not in out and out.count("compute/%s/mad/float4 " % BE) == 1,
           "the console shows one median line a benchmark")
    # The summary screen after the table: the headline figures and where the results went.
    summary = out[out.find("\nSummary: "):]
    expect(out.count("\nSummary: ") == 1 and "peak float (mad, float4)" in summary and "stream (triad/" in summary
           and "latency 1 KiB" in summary and files and ("results: " + files[0]) in summary,
           "the summary screen shows peak, stream, latency and the results file:\n" + summary)
    if files:
        doc = json.load(open(files[0]))
        ctx = doc["context"]
        for key in ["device", "platform", "driver_version", "runtime_version", "host", "archbench_version",
                    "backend", "compute_units", "date"]:
            expect(bool(ctx.get(key)), "context has %s (%r)" % (key, ctx.get(key)))
        # The context's versions are the OpenCL queries they name, as clinfo reads them for a
        # device of that name: driver_version is CL_DRIVER_VERSION, runtime_version CL_DEVICE_VERSION.
        clinfo = shutil.which("clinfo")
        if BE == "opencl" and clinfo:
            raw = subprocess.run([clinfo, "--raw"], capture_output=True, text=True).stdout
            devs = {}
            for m in re.finditer(r"^\[([^/\]]+)/(\d+)\]\s+(CL_\w+)\s+(.*)$", raw, re.M):
                devs.setdefault((m.group(1), m.group(2)), {})[m.group(3)] = m.group(4).strip()
            same = [d for d in devs.values() if d.get("CL_DEVICE_NAME") == ctx.get("device")]
            expect(bool(same), "clinfo lists a device named %r" % ctx.get("device"))
            if same:
                expect(ctx.get("driver_version") in {d.get("CL_DRIVER_VERSION") for d in same},
                       "driver_version %r is clinfo's CL_DRIVER_VERSION (%s)"
                       % (ctx.get("driver_version"), sorted({d.get("CL_DRIVER_VERSION") for d in same})))
                expect(ctx.get("runtime_version") in {d.get("CL_DEVICE_VERSION") for d in same},
                       "runtime_version %r is clinfo's CL_DEVICE_VERSION" % ctx.get("runtime_version"))
        else:
            print("skip driver_version against clinfo: %s" % ("not OpenCL" if BE != "opencl" else "no clinfo"))
        runs = [b for b in doc["benchmarks"] if b.get("run_type") == "iteration"]
        names = {b["name"] for b in runs}
        expect(len(names) >= 4, "at least four benchmarks ran: %s" % sorted(names))
        for b in runs:
            expect(NAME.match(b["name"]) is not None, "name follows family/backend/variant/axis: " + b["name"])
            expect(not b.get("error_occurred"), "%s ran (%s)" % (b["name"], b.get("error_message", "")))
        def counter(prefix, key):
            vals = [b.get(key, 0) for b in runs if b["name"].startswith(prefix)]
            return vals and all(v > 0 for v in vals)
        expect(counter("compute/%s/mad/float4" % BE, "flop_per_s"), "compute reports flop_per_s")
        expect(counter("compute/%s/add/int" % BE, "op_per_s"), "integer compute reports op_per_s")
        expect(counter("memory/%s/triad" % BE, "byte_per_s"), "triad reports byte_per_s")
        expect(counter("latency/%s/chase" % BE, "ns_per_access"), "latency reports ns_per_access")
        expect(any(b.get("aggregate_name") == "median" for b in doc["benchmarks"]), "JSON has median aggregates")
        # Schema 2: every entry's axes rebuild its name; cost per launch; the version in the context.
        expect(ctx.get("schema_version") == "2", "context has schema_version 2")
        expect(all(b["name_format"].format(**b["axes"]) == b["run_name"].split("/manual_time")[0]
                   for b in doc["benchmarks"]), "every entry's axes rebuild its name")
        expect(all(set(b["cost"]) >= {"flops", "int_ops", "bytes_read", "bytes_written", "accesses", "calls"}
                   for b in doc["benchmarks"]), "every entry has its cost per launch")

    # Google Benchmark's conventions: --benchmark_format decides stdout; a CSV for any filter.
    one = "--benchmark_filter=^(latency/BE/chase/bytes:1024|compute/BE/add/int)$".replace("BE", BE)
    rc, out, err = run([one, "--benchmark_min_time=0.01", "--benchmark_repetitions=1", "--benchmark_format=json",
                        "--benchmark_out=" + os.path.join(tmp, "x.csv"), "--benchmark_out_format=csv"])
    try:
        piped = json.loads(out)
    except ValueError:
        piped = {}
    expect(rc == 0 and len(piped.get("benchmarks", [])) == 2, "--benchmark_format=json writes the JSON on stdout")
    expect("Summary: " in err, "with --benchmark_format=json the summary goes to stderr")
    import csv
    lines = [l for l in open(os.path.join(tmp, "x.csv")) if not l.startswith("#")]
    rows = list(csv.DictReader(lines))
    expect(len(rows) == 2 and rows[0].get("axes.family") and "op_per_s" in rows[0] and "ns_per_access" in rows[0],
           "the CSV has every row and every family's columns, context as # lines")
    rc, out, err = run([one, "--benchmark_format=xml"])
    expect(rc == 2 and "console, json or csv" in err, "an unknown --benchmark_format is refused (exit 2)")

    # A kernel that fails to build: its benchmarks fail with the build log; the others run.
    # OpenCL: a -D value that breaks compute.cl only. CUDA: the workload's values are #defines
    # in the source (they would override a -D), so a bad NVRTC option breaks every benchmark
    # kernel; the run must still go on to the end and say why each failed.
    options = {"opencl": {"ARCHBENCH_CL_OPTIONS": "-DCHAINS=("},
               "cuda": {"ARCHBENCH_CUDA_OPTIONS": "--no-such-nvrtc-option"}}[BE]
    rc, out, err = run(["--benchmark_filter=^(compute/BE/mad/float|memory/BE/copy/(double|float))$".replace("BE", BE),
                        "--benchmark_min_time=0.01", "--benchmark_repetitions=1",
                        "--benchmark_out=" + os.path.join(tmp, "broken.json")], env=options)
    doc = json.load(open(os.path.join(tmp, "broken.json")))
    by = {b["name"].split("/manual_time")[0]: b for b in doc["benchmarks"]}
    broken = by.get("compute/%s/mad/float" % BE, {})
    expect(rc == 1, "a run with a kernel that fails to build exits 1 (the other benchmarks still ran)")
    expect(broken.get("error_occurred") and "build log" in broken.get("error_message", ""),
           "the broken kernel's benchmark fails with its build log")
    copy = [b for n, b in by.items() if n.startswith("memory/%s/copy/" % BE)]
    if BE == "opencl":
        expect(copy and all(not b.get("error_occurred") and b.get("byte_per_s", 0) > 0 for b in copy),
               "the other benchmarks still ran")
    else:
        expect(copy and all(b.get("error_occurred") and "build log" in b.get("error_message", "") for b in copy),
               "every benchmark was reached and failed with its build log")

# --device=all: each device in its own process, one JSON tagged by device, the report beside it.
with tempfile.TemporaryDirectory() as tmp:
    node = os.path.join(tmp, "node.json")
    rc, out, err = run(["--device=all", "--benchmark_filter=^memory/%s/triad/double$" % BE, "--benchmark_min_time=0.01",
                        "--benchmark_repetitions=1", "--benchmark_out=" + node])
    expect(rc == 0, "--device=all exits 0 (stderr: %s)" % err[-300:])
    doc = json.load(open(node)) if os.path.exists(node) else {"context": {}, "benchmarks": []}
    runs = doc["context"].get("runs", [])
    expect(runs and all(not r.get("failed") for r in runs), "--device=all: every device ran")
    expect(doc["benchmarks"] and all(b.get("device_selector") in [r["device_selector"] for r in runs]
                                     for b in doc["benchmarks"]), "--device=all: every entry tagged with its device")
    expect(runs and ("[%s] " % runs[0]["device_selector"]) in out, "--device=all: console lines say their device")
    # The variability report compares devices: beside the merged file where several ran.
    expect(os.path.exists(os.path.join(tmp, "node-variability.json")) == (len(runs) > 1),
           "--device=all: the variability report beside (where several devices ran)")
    expect(len(runs) > 1 or "nothing to compare" in err, "--device=all: one device says there is nothing to compare")
rc, out, err = run(["--device=all:no-such-kind"])
expect(rc == 2 and "no such device" in err, "--device=all with a filter no device matches: exit 2")
rc, out, err = run(["--device=no-such-device-xyz"])
expect(rc == 2 and "no device matches" in err and "--device=" in err, "an unknown device: exit 2, devices listed")
rc, out, err = run(["--device", "no-such-device-xyz"])
expect(rc == 2 and "no device matches" in err, "--device VALUE (the value as the next word) is --device=VALUE")
rc, out, err = run(["--benchmark_filter=x", "--device"])
expect(rc == 2 and "needs a value" in err, "--device without a value: exit 2, said")
rc, out, err = run(["--sweep=huge"])
expect(rc == 2 and "--sweep" in err, "a bad --sweep: exit 2")
rc, out, err = run(["--benchmark_filter=^nothing-matches-this$", "--benchmark_out=/dev/null"])
expect(rc == 2, "a filter that matches nothing: exit 2")
rc, out, err = run(["--bogus-flag"])
expect(rc == 2, "an unknown flag: exit 2")
if BE == "opencl":
    with tempfile.TemporaryDirectory() as empty:
        rc, out, err = run(["--benchmark_filter=compute"], env={"OCL_ICD_VENDORS": empty, "OPENCL_VENDOR_PATH": empty})
        # (with CUDA devices present archbench would run on them: the check is for OpenCL-only machines)
        if "cuda:" not in run(["--list-devices"])[1]:
            expect(rc == 1 and "no OpenCL platform" in err, "no OpenCL platform: a clear message, exit 1 (%r)" % err[-300:])

if failures:
    print("smoke: %d check(s) failed" % len(failures))
    sys.exit(1)
print("smoke: all checks passed")
