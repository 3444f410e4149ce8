#!/usr/bin/env python3
"""The CUDA tracer end to end: runs the planted CUDA program (tests/trace/cuda_planted.cu) under
libarchbench_trace_cuda.so, checks the raw records (tools/analysis/trace/FORMAT.md) against what the
program is known to do, then runs `archbench_trace.py report` on them and checks that its
summary names every planted inefficiency and the 200 ms gap.

Exit 0 when every check passes, 1 on a failed check, 77 (skip) when there is no CUDA device.
Usage: cuda_trace_e2e.py --planted BIN --lib LIB --tool archbench_trace.py [--out DIR] [--gap-ms 200]
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)
    return ok


def read_records(path):
    recs = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                recs.append(json.loads(line))
            except ValueError as e:
                check(False, f"{path}:{n} is JSON ({e})")
    return recs


def on_path(rec, name):
    return any(name in frame for frame in rec.get("path") or [])


def check_raw(recs, gap_ms):
    """What the tracer must have seen, straight from the records."""
    by = {}
    for r in recs:
        by.setdefault(r["type"], []).append(r)
    proc = by.get("process", [{}])[0]
    check(proc.get("api") == "cuda", "one process record, api cuda")
    check(any(d.get("used") for d in by.get("device", [])), "a device record marked used")
    kernels = by.get("kernel", [])
    names = {k["name"] for k in kernels}
    check(any("planted_add" in n for n in names) and "planted_scale" in names,
          f"kernels planted_add and planted_scale recorded (saw {sorted(names)})")
    check(all(k["queued_ns"] <= k["submit_ns"] <= k["start_ns"] < k["end_ns"] for k in kernels),
          "every kernel: queued <= submitted <= start < end")
    check(all(proc["start_ns"] <= k["start_ns"] and k["end_ns"] <= proc["end_ns"] for k in kernels),
          "kernel times inside the process's (one host clock)")
    check(all(k.get("path") and k.get("tid") for k in kernels), "every kernel has a call path and thread")
    # Round trip: the bytes of the D2H come back in a later H2D.
    copies = by.get("copy", [])
    d2h = {c["hash"] for c in copies if c["kind"] == "d2h" and c["hash"]}
    back = [c for c in copies if c["kind"] == "h2d" and c["hash"] in d2h]
    check(len(back) >= 1 and on_path(back[0], "planted_round_trip"),
          "round trip: an H2D carries the hash of an earlier D2H, from planted_round_trip")
    check(all(c["host_memory"] == "pageable" for c in copies if c["kind"] != "d2d"),
          "copies from std::vector are pageable")
    # Repeated JIT: one PTX loaded at least twice.
    builds = [b for b in by.get("build", []) if on_path(b, "planted_jit_twice")]
    check(len(builds) >= 2 and len({b["source_hash"] for b in builds}) == 1,
          f"repeated JIT: {len(builds)} module loads of one image from planted_jit_twice")
    check(all(b["end_ns"] > b["start_ns"] for b in builds), "module loads take time")
    # In-order: kernels of planted_in_order on the default stream, buffers disjoint.
    inorder = [k for k in kernels if on_path(k, "planted_in_order")]
    queues = {q["id"]: q for q in by.get("queue", [])}
    check(len(inorder) == 8 and all(queues.get(k["queue"], {}).get("default_stream") for k in inorder),
          f"8 kernels of planted_in_order on the default stream (saw {len(inorder)})")
    driver = [k for k in inorder if k["name"] == "planted_scale"]
    check(len(driver) == 4 and all(k["buffers"] is not None and len(k["buffers"]) == 2 for k in driver),
          "driver launches: both buffer arguments found")
    ids = [b["id"] for k in driver for b in (k["buffers"] or [])]
    check(len(ids) == 8 and len(set(ids)) == 8, "the 4 driver launches use 8 distinct buffers")
    # The gap: the device idles between the two kernels of planted_gap while the host sleeps.
    gk = sorted((k for k in kernels if on_path(k, "planted_gap")), key=lambda k: k["start_ns"])
    if check(len(gk) == 2, "two kernels from planted_gap"):
        idle = (gk[1]["start_ns"] - gk[0]["end_ns"]) / 1e6
        check(abs(idle - gap_ms) <= 0.1 * gap_ms, f"device idle between them {idle:.1f} ms, planted {gap_ms} ms (10%)")
        during = [s for s in by.get("sample", []) if gk[0]["end_ns"] < s["t_ns"] < gk[1]["start_ns"]]
        asleep = [s for s in during if on_path(s, "planted_sleep")]
        rate = proc.get("sample_rate_hz", 0)
        expect = rate * gap_ms / 1000
        check(expect > 0 and len(asleep) >= 0.5 * expect,
              f"{len(asleep)} samples in planted_sleep during the gap (about {expect:.0f} expected)")
    syncs = by.get("sync", [])
    check(any(s["kind"] == "device_sync" and on_path(s, "planted_gap") for s in syncs),
          "cudaDeviceSynchronize recorded as device_sync with its path")
    check(any(s["kind"] == "blocking_read" and on_path(s, "planted_round_trip") for s in syncs),
          "the synchronous D2H recorded as blocking_read")


def check_report(tool, raw, out, gap_ms):
    """The report's summary (tools/archbench_trace.py) must find each planted inefficiency and the gap."""
    summary = os.path.join(out, "summary.json")
    cmd = [sys.executable, tool, "report", raw, "--json", summary, "--trace", os.path.join(out, "trace.json"), "--top", "50"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    with open(os.path.join(out, "report.txt"), "w") as f:
        f.write(p.stdout + p.stderr)
    print(p.stdout)
    if not check(p.returncode == 0, f"{' '.join(cmd)} exits 0 (stderr: {p.stderr.strip()[-400:]})"):
        return
    with open(summary) as f:
        s = json.load(f)
    det = s.get("detectors", {})
    rt = det.get("redundant_round_trip", [])
    check(any("planted_round_trip" in json.dumps(r["written"]) for r in rt),
          f"redundant_round_trip: the H2D of planted_round_trip ({len(rt)} found)")
    jit = det.get("repeated_jit", [])
    check(any(r["count"] >= 2 and "planted_jit_twice" in json.dumps(r["paths"]) for r in jit),
          f"repeated_jit: the PTX loaded by planted_jit_twice ({[(r['count'], r['paths']) for r in jit]})")
    io = det.get("in_order_independent", [])
    check(any(r["independent_pairs"] >= 3 for r in io),
          f"in_order_independent: a queue with at least 3 independent pairs ({io})")
    na = det.get("kernel_params_not_aliased", [])
    check(any(r["name"] == "planted_scale" for r in na), f"kernel_params_not_aliased names planted_scale ({na})")
    check(any(d.get("used") for d in s.get("devices", [])), "the summary has a used device")
    # The device idles for the planted gap, and GPU_IDLE_CAUSE charges it to the sleep.
    gaps = [g for g in s.get("idle_gaps", []) if "planted_sleep" in json.dumps(g.get("host"))]
    if check(bool(gaps), "an idle gap whose host samples are in planted_sleep"):
        ms = gaps[0]["ns"] / 1e6
        check(abs(ms - gap_ms) <= 0.1 * gap_ms, f"that gap lasts {ms:.1f} ms, planted {gap_ms} ms (10%)")
    gi = s.get("gpu_idle_cause", {})
    rate = next((p.get("sample_rate_hz") for p in s.get("processes", []) if p.get("sample_rate_hz")), 0)
    asleep = sum(f["samples"] for f in gi.get("by_function", []) if "planted_sleep" in f["function"])
    ms = asleep * 1000 / rate if rate else 0
    check(abs(ms - gap_ms) <= 0.1 * gap_ms,
          f"GPU_IDLE_CAUSE charges planted_sleep {ms:.1f} ms ({asleep} samples), planted {gap_ms} ms (10%)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--planted", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--out", help="keep the files here (default: a temporary folder)")
    ap.add_argument("--gap-ms", type=float, default=200.0)
    a = ap.parse_args()
    for f in (a.planted, a.lib):
        if not os.path.exists(f):
            print(f"FAIL {f} does not exist")
            return 1
    out = a.out or tempfile.mkdtemp(prefix="cuda-trace-")
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ, CUDA_INJECTION64_PATH=os.path.abspath(a.lib), ARCHBENCH_TRACE_DIR=out)
    p = subprocess.run([a.planted, "all", str(a.gap_ms)], env=env, capture_output=True, text=True)
    if p.returncode == 77:
        print(p.stdout.strip() or "SKIP: no CUDA device")
        return 77
    print(p.stdout + p.stderr)
    check(p.returncode == 0, f"the planted program exits 0 under the tracer (exit {p.returncode})")
    raws = sorted(glob.glob(os.path.join(out, os.path.basename(a.planted) + "-*.jsonl")))
    if not check(len(raws) == 1, f"one raw trace in {out} (found {raws})"):
        return 1
    check_raw(read_records(raws[0]), a.gap_ms)
    if check(os.path.exists(a.tool), f"the analysis tool {a.tool} exists"):
        check_report(a.tool, raws[0], out, a.gap_ms)
    print(f"files in {out}")
    print(f"{len(failures)} check(s) failed" if failures else "every check passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
