#!/usr/bin/env python3
"""Roofline end to end on the default device (PoCL in CI): archbench runs the families a
roofline needs (cache, flops, the FMA peaks, local memory, triad) briefly, then
tools/archbench_roofline.py builds the models from that JSON alone and draws them. Checks: the
run wrote JSON with the cache and flops families, the tool exits 0, its model has compute
ceilings, at least one bandwidth level from the cache family's plateaus and a device-memory
ceiling, every flops point carries its roof ratio, and the SVG names the ceilings.
Usage: roofline_e2e.py ARCHBENCH ROOFLINE_TOOL. Exit 77 (skipped) without a device."""
import json
import os
import subprocess
import sys
import tempfile

BIN, TOOL = sys.argv[1], sys.argv[2]
failures = []


def expect(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


if subprocess.run([BIN, "--list-devices"], capture_output=True).returncode != 0:
    print("SKIPPED: no device for the roofline run")
    sys.exit(77)

with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "run.json")
    flt = r"^(cache/[a-z]+/(read|rmw)/.*|flops/[a-z]+/(dram|cache)/float/.*|compute/[a-z]+/(mad|add)/float(4|8)?|" \
          r"local/[a-z]+/read/stride:1|memory/[a-z]+/triad/(double|float))$"
    p = subprocess.run([BIN, "--benchmark_filter=" + flt, "--benchmark_repetitions=1", "--benchmark_min_time=0.02",
                        "--benchmark_out=" + out, "--benchmark_out_format=json"], capture_output=True, text=True,
                       timeout=1200)
    expect(p.returncode == 0, "archbench ran the roofline families (stderr: %s)" % p.stderr[-400:])
    names = [b["name"] for b in json.load(open(out))["benchmarks"]] if os.path.exists(out) else []
    expect(any(n.startswith("cache/") for n in names), "the cache family ran")
    expect(any(n.startswith("flops/") for n in names), "the flops family ran")
    svg, model = os.path.join(tmp, "roofline.svg"), os.path.join(tmp, "model.json")
    t = subprocess.run([sys.executable, TOOL, out, "--svg", svg, "--json", model], capture_output=True, text=True,
                       timeout=300)
    print(t.stdout[-3000:])
    expect(t.returncode == 0, "the roofline tool exits 0 (stderr: %s)" % t.stderr[-400:])
    if t.returncode == 0:
        m = json.load(open(model))
        text = json.dumps(m["compute"])
        expect("float" in text and "fma" in text.lower(), "the model has the float FMA ceiling")
        expect(len(m["bandwidth"]["levels"]) >= 1, "the cache family's plateaus gave at least one level")
        expect(bool(m["orm"]["device_memory"]), "the original roofline has a device-memory ceiling")
        flops_points = [b for b in names if b.startswith("flops/")]
        expect(len(m["roof_check"]) >= 1 and len(m["roof_check"]) >= len(flops_points) // 2,
               "the flops points are checked against the roof (%d of %d)" % (len(m["roof_check"]), len(flops_points)))
        drawn = open(svg).read()
        expect("<svg" in drawn and ("TFLOP/s" in drawn or "GFLOP/s" in drawn), "the SVG labels a compute ceiling")
        expect("B/s" in drawn, "the SVG labels a bandwidth ceiling")

if failures:
    print("roofline_e2e: %d check(s) failed" % len(failures))
    sys.exit(1)
print("roofline_e2e: all checks passed")
