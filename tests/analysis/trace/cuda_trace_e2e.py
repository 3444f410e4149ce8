#!/usr/bin/env python3
"""The CUDA tracer end to end.

First, with or without a GPU: `archbench_trace.py run --api cuda` on bad input (a program not
found, not executable, statically linked; an output folder that cannot be written), each a clear
message and the program's own exit status (tests/analysis/trace/corpus.py's checks).
Then, on a GPU:
- the planted CUDA program (tests/analysis/trace/cuda_planted.cu) under libarchbench_trace_cuda.so: the raw
  records (tools/analysis/trace/FORMAT.md) against what the program is known to do, then
  `archbench_trace.py report` on them: its summary names every planted inefficiency and the 200 ms gap;
- with --apis, tests/analysis/trace/cuda_apis.cu under `archbench_trace.py run`: what typical applications
  do (stream-ordered allocation and pools, streams and events across threads, captured and built
  graphs, managed memory, a second context, cuBLAS) keeps its exit status and stdout, and each
  kind of operation is in the trace; then its crash mode: the same death by SIGSEGV traced, the
  report says so, and the trace keeps the kernels that ran before it.

Exit 0 when every check passes, 1 on a failed check, 77 (skip) when there is no CUDA device and
the checks without one passed.
Usage: cuda_trace_e2e.py --planted BIN --lib LIB --tool archbench_trace.py [--apis BIN] [--out DIR] [--gap-ms 200]
"""
import argparse
import glob
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "lib")]
import corpus  # noqa: E402  (the `run` helpers and the bad-input checks, shared with the OpenCL tracer's test)
import gpu  # noqa: E402

failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    if not ok:
        failures.append(what)
    return ok


def read_records(path):
    """The records of a raw file, each call path given by its id resolved (FORMAT.md: path table)."""
    recs = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            try:
                recs.append(json.loads(line))
            except ValueError as e:
                check(False, f"{path}:{n} is JSON ({e})")
    table = {r["id"]: r["frames"] for r in recs if r.get("type") == "path"}
    for r in recs:
        if "path_id" in r:
            r["path"] = table.get(r["path_id"])
            check(r["path"] is not None, f"{path}: path_id {r['path_id']} has its path record")
    return recs


def by_type(recs):
    by = {}
    for r in recs:
        by.setdefault(r["type"], []).append(r)
    return by


def on_path(rec, name):
    return any(name in frame for frame in rec.get("path") or [])


def check_raw(recs, gap_ms):
    """What the tracer must have seen, straight from the records."""
    by = by_type(recs)
    proc = dict(by.get("process", [{}])[0], **(by.get("end") or [{}])[-1])
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


def raw_of(folder):
    """The records of the one raw trace a run left in `folder` (none: a failed check)."""
    raws = sorted(glob.glob(os.path.join(folder, "*.jsonl")))
    if not check(len(raws) == 1, f"one raw trace in {folder} (found {raws})"):
        return {}
    return by_type(read_records(raws[0]))


def ctx_of(queue):
    return queue.split("/")[0]


def check_apis(a, out):
    """tests/analysis/trace/cuda_apis.cu traced by `archbench_trace.py run`: same exit status and stdout as
    untraced, and every kind of operation it makes in the trace."""
    rc0, so0, se0, _ = corpus.run([a.apis])
    if not check(rc0 == 0, f"cuda_apis exits 0 untraced ({rc0}: {se0.decode(errors='replace')[-300:]})"):
        return
    rc, so, se, _, log, _ = corpus.traced(a, [a.apis], os.path.join(out, "apis"))
    print(so.decode(errors="replace") + log)
    check(rc == rc0 and so == so0, f"cuda_apis traced: exit {rc} and stdout as untraced (exit {rc0})")
    by = raw_of(os.path.join(out, "apis"))
    kernels, buffers = by.get("kernel", []), by.get("buffer", [])
    check(bool(by.get("end")), "the trace has its end record (the program exited)")

    def on(recs, fn):
        return [r for r in recs if on_path(r, fn)]

    def count(recs, fn, want, what):
        got = on(recs, fn)
        check(len(got) == want, f"{what}: {want} from {fn} (saw {len(got)})")
        return got

    count(kernels, "apis_async_alloc", 3, "kernels on stream-ordered allocations")
    pooled = [b for b in on(buffers, "apis_async_alloc") if b.get("memory") == "stream-ordered"]
    check(len(pooled) == 2 and any(b.get("pool") for b in pooled),
          f"cudaMallocAsync and cudaMallocFromPoolAsync: 2 stream-ordered buffers, a pool named ({pooled})")
    ks = count(kernels, "apis_thread_work", 3, "kernels of two threads")
    check(len({k["tid"] for k in ks}) == 2 and len({k["queue"] for k in ks}) == 2,
          f"they come from 2 threads on 2 streams ({sorted({(k['tid'], k['queue']) for k in ks})})")
    waits = [y for y in on(by.get("sync", []), "apis_thread_work") if y["kind"] == "event_sync"]
    check(len(waits) >= 1, f"cudaEventSynchronize recorded as event_sync ({len(waits)}, threads {sorted({y['tid'] for y in waits})})")
    ks = count(kernels, "apis_graph_capture", 15, "kernels of a captured graph launched 5 times")
    check(sum("apis_fill" in k["name"] for k in ks) == 5, "5 of them apis_fill, the graph's first node")
    count(kernels, "apis_graph_nodes", 6, "kernels of a graph built node by node, launched 3 times")
    count(by.get("memset", []), "apis_graph_nodes", 3, "its memset nodes")
    count(kernels, "apis_managed", 1, "kernel on managed memory")
    check(any(b.get("memory") == "managed" for b in on(buffers, "apis_managed")), "cudaMallocManaged: a managed buffer")
    ks = count(kernels, "apis_second_context", 3, "kernels of a second context")
    first = {ctx_of(k["queue"]) for k in on(kernels, "apis_async_alloc")}
    check(bool(ks) and {ctx_of(k["queue"]) for k in ks}.isdisjoint(first),
          f"the second context's kernels are on its own queues ({sorted({k['queue'] for k in ks})}, first: {sorted(first)})")
    if b"cublas: sgemm" in so:
        check(len(on(kernels, "apis_cublas")) >= 1, f"cublasSgemm's kernel ({[k['name'] for k in on(kernels, 'apis_cublas')]})")
    else:
        print("NOTE  cuda_apis was built without cuBLAS: its kernel is not looked for")
    check(all(k["start_ns"] < k["end_ns"] and k.get("tid") and k.get("path") for k in kernels),
          "every kernel: start < end, a thread and a call path")


def check_crash(a, out):
    """cuda_apis crash (3 kernels, then SIGSEGV) under `archbench_trace.py run`: the same death,
    the report says so, the trace keeps the kernels and ends with the signal."""
    argv = [a.apis, "crash"]
    rc0, so0, _, _ = corpus.run(argv)
    check(rc0 == -11, f"cuda_apis crash dies of SIGSEGV untraced (status {rc0})")
    rc, so, _, _, log, summary = corpus.traced(a, argv, os.path.join(out, "crash"))
    print(log)
    check(rc == rc0 and so == so0, f"traced: the same death (status {rc}, untraced {rc0}) and stdout")
    check("crashed (SIGSEGV, signal 11" in log and "the trace keeps what was recorded" in log,
          "the report says the program crashed (SIGSEGV, signal 11) and that the trace keeps what was recorded")
    by = raw_of(os.path.join(out, "crash"))
    ks = [k for k in by.get("kernel", []) if on_path(k, "apis_crash")]
    check(len(ks) == 3, f"the 3 kernels before the crash are in the trace ({len(ks)})")
    check([e.get("signal") for e in by.get("end", [])] == [11], f"the trace ends with the signal ({by.get('end')})")
    check(bool(summary) and sum(k["count"] for k in summary["kernels"]) >= 3, "the summary counts them")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--planted", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--apis", help="tests/analysis/trace/cuda_apis.cu's program: also trace it, and its crash")
    ap.add_argument("--out", help="keep the files here (default: a temporary folder)")
    ap.add_argument("--gap-ms", type=float, default=200.0)
    a = ap.parse_args()
    a.api = "cuda"  # for corpus.traced and corpus.bad_input
    for f in (a.planted, a.lib, a.apis):
        if f and not os.path.exists(f):
            print(f"FAIL {f} does not exist")
            return 1
    out = gpu.out_dir(a.out, "cuda-trace-")
    # Without a GPU too: bad input to `run --api cuda`.
    corpus.bad_input(a, out, [a.apis, "async"] if a.apis else [a.planted, "roundtrip"])
    failures.extend(corpus.failures)
    env = dict(os.environ, CUDA_INJECTION64_PATH=os.path.abspath(a.lib), ARCHBENCH_TRACE_DIR=out)
    p = subprocess.run([a.planted, "all", str(a.gap_ms)], env=env, capture_output=True, text=True)
    if p.returncode == gpu.SKIP:
        print(p.stdout.strip() or "SKIP: no CUDA device")
        print(f"{len(failures)} check(s) without a GPU failed" if failures else "the checks without a GPU passed")
        return 1 if failures else gpu.SKIP
    print(p.stdout + p.stderr)
    check(p.returncode == 0, f"the planted program exits 0 under the tracer (exit {p.returncode})")
    raws = sorted(glob.glob(os.path.join(out, os.path.basename(a.planted) + "-*.jsonl")))
    if check(len(raws) == 1, f"one raw trace in {out} (found {raws})"):
        check_raw(read_records(raws[0]), a.gap_ms)
        if check(os.path.exists(a.tool), f"the analysis tool {a.tool} exists"):
            check_report(a.tool, raws[0], out, a.gap_ms)
    if a.apis:
        check_apis(a, out)
        check_crash(a, out)
    print(f"files in {out}")
    print(f"{len(failures)} check(s) failed" if failures else "every check passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
