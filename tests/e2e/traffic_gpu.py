#!/usr/bin/env python3
"""Measured traffic on a real GPU (ctest e2e/traffic_gpu, label gpu): archbench --traffic over
kernels of known traffic, and the agreement table of the compute and memory families.

  - a stream over 1 GiB arrays (memory/cuda/copy/double): reads and writes at L1, L2 and DRAM
    each within 5% of the bytes it moves (the cost model's);
  - a reuse kernel over 64 KiB (cache/cuda/read/bytes:65536, each work-group re-reading its window
    from L1): L1 reads within 5% of the bytes it asks for, L2 and DRAM within 5% of them (only the
    compulsory misses reach past L1);
  - the agreement table (tools/archbench_agreement.py) of compute and memory benchmarks: no
    FINDING (executed flops exact or explained, DRAM bytes within 5% where the family streams);
  - the clock meter, which reads the SMs' cycles through the same counters: the clock of the float
    FMA peaks is at most the device's maximum, and the rate at it at most what an SM issues.

Exit 77 (skip, with the reason) where there is no CUDA device or its counters cannot be read.
--out DIR keeps every file written.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import gpu  # noqa: E402

FILTER = ("^(memory/cuda/(copy|mul|add|triad|dot)/double|cache/cuda/read/bytes:65536|"
          "compute/cuda/(add|mul|mad)/(float|double)4?|flops/cuda/dram/(float|double)/flops:(1|8|64))$")
STREAM, REUSE = "memory/cuda/copy/double", "cache/cuda/read/bytes:65536"
TOLERANCE = 0.05


def within(measured, known):
    return known > 0 and abs(measured / known - 1) <= TOLERANCE


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--archbench", required=True)
    ap.add_argument("--tools", default=gpu.TOOLS, help="the repository's tools/ folder")
    ap.add_argument("--out", help="keep the files here")
    a = ap.parse_args()
    out = gpu.out_dir(a.out, "archbench-traffic-")
    run = os.path.join(out, "traffic.json")
    cmd = [a.archbench, "--device=cuda", "--traffic", "--topdown=0", "--benchmark_repetitions=1",
           "--benchmark_min_time=0.05", f"--benchmark_filter={FILTER}", f"--benchmark_out={run}",
           "--benchmark_out_format=json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    print(p.stdout[-4000:], p.stderr[-4000:], sep="\n")
    if gpu.no_device(p) or (p.returncode == 2 and "device" in p.stderr):  # 2: --device=cuda matched nothing
        gpu.skip()
    if not os.path.exists(run):
        raise SystemExit(f"FAIL: {' '.join(cmd)} exited with {p.returncode} and wrote no results")
    sys.path.insert(0, a.tools)
    from archbench import traffic as tf
    context, rows = tf.measured([run])
    if not rows:
        gpu.skip(f"no traffic counters: {context.get('traffic')}")
    by = {r["name"]: r for r in rows}
    failures = []

    def check(what, measured, known):
        ok = within(measured, known)
        print(f"{'ok  ' if ok else 'FAIL'} {what}: measured {measured:.6g} B, known {known:.6g} B "
              f"({measured / known if known else float('nan'):.4f})")
        if not ok:
            failures.append(what)

    s = by.get(STREAM)
    if s is None:
        failures.append(f"{STREAM} did not run")
    else:
        read, written = s["cost"]["bytes_read"], s["cost"]["bytes_written"]
        print(f"{STREAM}: {read / 2 ** 30:g} GiB read, {written / 2 ** 30:g} GiB written per launch")
        for level in ("l1", "l2", "dram"):
            check(f"stream {level} reads", s["counters"].get(f"traffic_{level}_read_bytes", 0.0), read)
            check(f"stream {level} writes", s["counters"].get(f"traffic_{level}_write_bytes", 0.0), written)
    r = by.get(REUSE)
    if r is None:
        failures.append(f"{REUSE} did not run")
    else:
        asked = r["cost"]["bytes_read"]
        c = r["counters"]
        check("reuse L1 reads", c.get("traffic_l1_read_bytes", 0.0), asked)
        for level in ("l2", "dram"):
            past = c.get(f"traffic_{level}_read_bytes", 0.0) + c.get(f"traffic_{level}_write_bytes", 0.0)
            ok = past <= TOLERANCE * asked
            print(f"{'ok  ' if ok else 'FAIL'} reuse {level} traffic {past:.6g} B is {past / asked:.4%} of the "
                  f"{asked:.6g} B read from L1 (at most {TOLERANCE:.0%}: compulsory misses only)")
            if not ok:
                failures.append(f"reuse {level}")
    # The clock meter (fixtures/meters/clock_meter.cpp) counts SM cycles where these counters can be
    # read. A count too high would pass the maximum clock; one too low would put the float FMA
    # rate above 256 flops an SM-cycle (128 FP32 lanes: the widest NVIDIA SM).
    with open(run) as f:
        doc = json.load(f)
    ctx = doc["context"]
    if "SM cycles counted" not in ctx.get("clock_meter", ""):
        failures.append(f"the clock meter counts no SM cycles: {ctx.get('clock_meter')}")
    top, sms = float(ctx["max_clock_mhz"]), float(ctx["compute_units"])
    seen = set()
    for e in doc["benchmarks"]:
        name = e.get("run_name", "")
        if e.get("run_type") != "iteration" or not name.startswith("compute/cuda/mad/float") or name in seen:
            continue
        seen.add(name)
        mhz = e.get("clock_mhz", 0.0)
        per_cycle = e["flop_per_s"] / (sms * mhz * 1e6) if mhz else float("inf")
        ok = 0 < mhz <= top * 1.005 and per_cycle <= 256
        print(f"{'ok  ' if ok else 'FAIL'} clock {name}: {mhz:.1f} MHz counted (NVML {e.get('clock_nvml_mhz', 0):.0f}, "
              f"maximum {top:.0f}), {per_cycle:.1f} flops an SM-cycle (at most 256)")
        if not ok:
            failures.append(f"clock of {name}")
    if not seen:
        failures.append("no compute/cuda/mad/float row to check the clock of")
    table, summary = tf.agreement(rows)
    text = tf.text_table(table, summary)
    print(text)
    with open(os.path.join(out, "agreement.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(out, "agreement.json"), "w") as f:
        json.dump({"rows": table, "summary": summary}, f, indent=1)
    failures += [f"agreement: {t['benchmark']}" for t in table if "FINDING" in (t["flops_verdict"], t["dram_verdict"])]
    if failures:
        print("FAILED: " + "; ".join(failures))
        return 1
    print("traffic_gpu: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
