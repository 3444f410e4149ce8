#!/usr/bin/env python3
"""End-to-end test of the OpenCL tracer: planted programs traced on the default OpenCL device
(PoCL in CI); the report must find each planted inefficiency with its evidence, the idle gap
must match the planted one within 10%, and every trace must be valid trace-event JSON.

  trace_e2e.py --planted archbench_trace_planted --lib libarchbench_trace_opencl.so
               --tool tools/archbench_trace.py [--archbench build/archbench]
               [--behave archbench_trace_behave]   (then also tests/analysis/trace/corpus.py's checks)

Exit 0 on success, 1 on a failed check, 77 (skip) without an OpenCL device.
"""

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

GAP_MS = 200.0
failures = []


def check(cond, what):
    print(("ok    " if cond else "FAIL  ") + what)
    if not cond:
        failures.append(what)


def trace_run(args, out, program, env=None):
    """Runs program under the tracer; returns (exit status, summary, trace events) or raises on no output."""
    # Every row of every ranking: on a busy machine a slow clBuildProgram may outrank a planted
    # function, and the checks look for the planted ones wherever they rank.
    cmd = [sys.executable, args.tool, "run", "--api", "opencl", "--lib-dir", os.path.dirname(args.lib),
           "--top", "1000", "--out", out, "--"] + program
    p = subprocess.run(cmd, env=dict(os.environ, **(env or {})), capture_output=True, text=True, timeout=300)
    print(p.stdout + p.stderr)
    summary_file = os.path.join(out, "summary.json")
    if not os.path.exists(summary_file):
        return p.returncode, None, None
    with open(summary_file) as f:
        summary = json.load(f)
    with gzip.open(os.path.join(out, "trace.json.gz"), "rt") as f:
        trace = json.load(f)  # valid gzip-compressed JSON, or this raises and the test fails
    return p.returncode, summary, trace


def check_trace(trace, name):
    """The trace-event format: required fields, non-negative durations, named tracks, device work on a device track."""
    events = trace.get("traceEvents") if isinstance(trace, dict) else None
    check(isinstance(events, list) and events, f"{name}: trace.json has a traceEvents list")
    events = events or []
    bad = [e for e in events if not all(k in e for k in ("ph", "ts", "pid", "tid", "name"))]
    check(not bad, f"{name}: every event has ph, ts, pid, tid, name ({len(bad)} without)")
    neg = [e for e in events if e.get("ph") == "X" and not (isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0)]
    check(not neg, f"{name}: every complete event has a non-negative duration ({len(neg)} not)")
    tracks = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    check(kernels and all(tracks.get(e["pid"], "").startswith("device") for e in kernels),
          f"{name}: {len(kernels)} kernels, each on a device queue track")
    check(any(e.get("cat") == "sync" for e in events), f"{name}: host synchronisations on host thread tracks")


def synthetic_unused(args, tmp):
    """One device on this platform: the unused-device check runs on a synthetic raw file instead."""
    raw = os.path.join(tmp, "synthetic-1.jsonl")
    recs = [{"type": "process", "api": "opencl", "pid": 1, "command": "synthetic", "start_ns": 0, "end_ns": 1000000},
            {"type": "device", "id": "d0", "name": "gpu A", "used": True},
            {"type": "device", "id": "d1", "name": "gpu B", "used": False}]
    with open(raw, "w") as f:
        f.write("\n".join(json.dumps(r) for r in recs) + "\n")
    out = os.path.join(tmp, "synthetic.json")
    subprocess.run([sys.executable, args.tool, "report", raw, "--json", out], check=True, capture_output=True)
    with open(out) as f:
        return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--planted", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--archbench", help="also trace a short archbench run")
    ap.add_argument("--behave", help="also run the corpus (tests/analysis/trace/corpus.py) with this archbench_trace_behave")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="archbench-trace-e2e-")

    # The gap's two timings (the idle gap within 10%, the blame within 20%) hold on an idle machine;
    # on a loaded 2-core one the scheduler can add 100 ms or more around the planted work (seen:
    # a 336 ms gap around 200 ms of planted work, with a parallel build beside the suite). Those
    # two are taken from the first of up to 3 runs that meets both; every other check holds on
    # every run, so a tracer that mismeasures fails every time.
    for attempt in range(1, 4):
        rc, s, trace = trace_run(args, os.path.join(tmp, f"gap{attempt}"), [args.planted, "gap", str(GAP_MS)])
        if rc == 77:
            print("SKIP: no OpenCL device")
            return 77
        check(rc == 0 and s is not None, "gap: traced run succeeded and was reported")
        if not s:
            break
        check_trace(trace, "gap")
        gap_ms = s["idle_gaps"][0]["ns"] / 1e6 if s["idle_gaps"] else 0
        host = s["idle_gaps"][0]["host"]["samples"] if s["idle_gaps"] else []
        check(host and "planted_host_work" in host[0]["path"],
              f"gap: the gap's most sampled host path is the planted work ({host[0]['path'] if host else 'none'})")
        check(s["cpu_idle"]["total_ns"] > 0 and s["cpu_idle"]["by_path"][0]["path"].startswith("finish"),
              "gap: CPU_IDLE is the program's clFinish")
        det = s["detectors"]
        check(not det["redundant_round_trip"] and not det["repeated_jit"] and not det["unused_devices"],
              "gap: no round trip, no repeated build, no unused device reported where none was planted")
        check(s["processes"][0]["clock"] in ("device+host timer", "aligned at enqueue"), "gap: the clock used is stated")
        funcs = {r["function"]: r["ns"] / 1e6 for r in s["gpu_idle_cause"]["by_function"]}
        blamed = next((v for k, v in funcs.items() if k.startswith("planted_host_work")), 0)
        gap_ok, blame_ok = abs(gap_ms - GAP_MS) <= 0.1 * GAP_MS, abs(blamed - GAP_MS) <= 0.2 * GAP_MS
        if (gap_ok and blame_ok) or attempt == 3:
            check(gap_ok, f"gap: longest device idle gap {gap_ms:.1f} ms within 10% of {GAP_MS:.0f} ms")
            check(blame_ok,
                  f"gap: GPU_IDLE_CAUSE blames planted_host_work for {blamed:.1f} ms, within 20% of {GAP_MS:.0f} ms (sampled at 1 kHz)")
            break
        print(f"again: gap {gap_ms:.1f} ms, blamed {blamed:.1f} ms against {GAP_MS:.0f} ms planted (run {attempt} of 3; "
              f"load average {os.getloadavg()[0]:.1f})")

    rc, s, trace = trace_run(args, os.path.join(tmp, "roundtrip"), [args.planted, "roundtrip"])
    check(rc == 0 and s is not None, "roundtrip: traced run succeeded")
    if s:
        check_trace(trace, "roundtrip")
        rt = s["detectors"]["redundant_round_trip"]
        check(len(rt) == 1 and rt[0]["bytes"] == 4 << 16 and rt[0]["read"]["buffer"] == rt[0]["written"]["buffer"],
              f"roundtrip: one redundant round trip of 262144 B on one buffer ({rt})")
        h2d = s["copies"].get("h2d pageable", {}).get("count")
        check(h2d == 2, f"roundtrip: two pageable h2d copies recorded ({h2d})")

    rc, s, _ = trace_run(args, os.path.join(tmp, "twice"), [args.planted, "twice"])
    check(rc == 0 and s is not None, "twice: traced run succeeded")
    if s:
        jit = s["detectors"]["repeated_jit"]
        check(len(jit) == 1 and jit[0]["count"] == 3 and len(jit[0]["contexts"]) == 2,
              f"twice: one source built 3 times in 2 contexts ({[(j['count'], j['contexts']) for j in jit]})")

    rc, s, _ = trace_run(args, os.path.join(tmp, "inorder"), [args.planted, "inorder"])
    check(rc == 0 and s is not None, "inorder: traced run succeeded")
    if s:
        io = s["detectors"]["in_order_independent"]
        check(len(io) == 1 and io[0]["independent_pairs"] == 5, f"inorder: 5 independent kernel pairs on one in-order queue ({io})")
        na = [k["name"] for k in s["detectors"]["kernel_params_not_aliased"]]
        check(na == ["axpy"], f"inorder: axpy's buffers never overlap, axpy_aliased's do ({na})")

    # Unused device: PoCL shows two devices when asked (POCL_DEVICES); other platforms as they are.
    rc, s, _ = trace_run(args, os.path.join(tmp, "unused"), [args.planted, "unused"])
    if rc == 77:
        rc, s, _ = trace_run(args, os.path.join(tmp, "unused2"), [args.planted, "unused"],
                             env={"POCL_DEVICES": "pthread pthread"})
    if rc == 0 and s:
        unused = s["detectors"]["unused_devices"]
        check(len(unused) >= 1 and any(d["used"] for d in s["devices"]),
              f"unused: {len(unused)} unused device(s) of {len(s['devices'])} found on the real platform")
    else:
        print("NOTE: only one OpenCL device here: the unused-device check runs on a SYNTHETIC raw file")
        unused = synthetic_unused(args, tmp)["detectors"]["unused_devices"]
        check([d["id"] for d in unused] == ["d1"], "unused (synthetic raw file): device d1 reported unused")

    if args.archbench:
        rc, s, trace = trace_run(args, os.path.join(tmp, "archbench"), [
            args.archbench, "--benchmark_filter=^launch/opencl/empty/dispatch/items:1$",
            "--benchmark_min_time=0.01", "--benchmark_repetitions=1", "--benchmark_out=" + os.path.join(tmp, "ab.json")])
        check(rc == 0 and s is not None and s["kernels"], "archbench: traced run succeeded with kernels recorded")
        if s:
            check_trace(trace, "archbench")

    corpus_failed = 0
    if args.behave:  # programs nobody here wrote, and ones that sleep, fork, exec, signal, crash
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import corpus
        corpus_failed = corpus.run_checks(argparse.Namespace(tool=args.tool, lib=args.lib, behave=args.behave,
                                                             planted=None, table=None, repeat=1))
    print(f"{len(failures)} check(s) failed" if failures else "all checks passed")
    return 1 if failures or corpus_failed else 0


if __name__ == "__main__":
    sys.exit(main())
