#!/usr/bin/env python3
"""TopDown on a real GPU (ctest analysis/topdown/topdown_gpu, label gpu): the kernels of td_kernels.cu, whose
breakdown is known in advance, under tools/archbench_topdown.py.

  - an FMA chain retires at least 0.9 of IPC_MAX;
  - a streaming kernel is at least 0.8 Backend, Memory Bound its largest part;
  - Divergence grows with the number of divergent paths (1, 2, 4, ... 32);
  - the raw counter values agree with Nsight Compute's (ncu, --clock-control none) for the same
    kernels within 5% (instruction counts, active cycles and every stall reason holding at least
    5% of the stalls; the others are printed). Skipped, with the reason, where ncu is absent;
  - --timeline (CUPTI PM sampling, one pass; the stall shared out between frontend and backend as
    the kernel replay above found, --stall-split): samples are written, each active sample's
    level-1 fractions and the run's add up to 1, the library's per-sample fractions are the
    tool's, the wall times and the library's own costs are recorded (the overhead is printed, not
    judged), and where CUPTI delivers kernel records fma_chain retires more than stream_triad,
    stream_triad stalls at least 0.8 of IPC_MAX, and where warp efficiency is sampled fma_chain
    diverges at most 0.05 and divergent's divergence grows with its paths; the samples' counters
    over each kernel are printed beside the kernel replay's.

Exit 77 (skip) where there is no CUDA device. --out DIR keeps every file written.
"""
import argparse
import csv
import io
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "lib"))
import gpu  # noqa: E402


def run_topdown(tool, lib, prog, out):
    j = os.path.join(out, "td_kernels-topdown.json")
    raw = os.path.join(out, "td_kernels-topdown.raw.jsonl")
    # --sample 0: every launch profiled. By default only the first 2 launches of each kernel and
    # shape are, and the 6 divergent launches share one shape (the paths are an argument).
    cmd = [sys.executable, tool, "--level", "3", "--by-invocation", "--budget", "0", "--sample", "0", "--json", j,
           "--raw", raw, "--csv", os.path.join(out, "td_kernels-topdown.csv")]
    if lib:
        cmd += ["--lib", lib]
    gpu.run(cmd + ["--", prog], os.path.join(out, "td_kernels-topdown.txt"))
    with open(j) as f:
        return json.load(f), raw


def raw_metrics(raw):
    """First launch of each kernel: its raw counter values."""
    first = {}
    with open(raw) as f:
        for line in f:
            r = json.loads(line)
            if r["type"] == "kernel":
                first.setdefault(r["name"].split("(")[0], r["metrics"])
    return first


def ncu_metrics(prog, metrics, out):
    """ncu's values for the first launch of fma_chain and of stream_triad (each runs twice)."""
    ncu = shutil.which("ncu") or ("/usr/local/cuda/bin/ncu" if os.path.exists("/usr/local/cuda/bin/ncu") else None)
    if not ncu:
        return None, "ncu not found"
    cmd = [ncu, "--clock-control", "none", "--csv", "--page", "raw", "--print-units", "base",
           "--metrics", ",".join(metrics), "-k", "regex:fma_chain|stream_triad", "--launch-count", "4", prog]
    p = subprocess.run(cmd, capture_output=True, text=True)
    with open(os.path.join(out, "td_kernels-ncu.csv"), "w") as f:
        f.write(p.stdout + "\n--- stderr ---\n" + p.stderr)
    if p.returncode != 0:
        return None, f"ncu exited with {p.returncode}: {p.stderr.strip()[-400:]}"
    lines = [l for l in p.stdout.splitlines() if l.startswith('"')]
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    if len(rows) < 3:
        return None, "ncu printed no table"
    head, data = rows[0], rows[2:]  # the second row holds units
    name_col = head.index("Kernel Name")
    got = {}
    for r in data:
        k = r[name_col].split("(")[0]
        if k in got:
            continue
        vals = {}
        for m in metrics:
            if m in head:
                try:
                    vals[m] = float(r[head.index(m)].replace(",", ""))
                except ValueError:
                    pass
        got[k] = vals
    return got, ""


def run_timeline(tool, pm_lib, prog, out, failures, replay_json=None, replay_first=None):
    """The time-resolved mode on the same program: the checks of the module's docstring. The
    kernel-replay run's JSON (replay_json) shares the stall out (--stall-split) and its first
    launches' raw counters (replay_first) are printed beside the samples' sums."""
    j = os.path.join(out, "td_kernels-timeline.json")
    raw = os.path.join(out, "td_kernels-timeline.raw.jsonl")
    cmd = [sys.executable, tool, "--timeline", "--by-invocation", "--json", j, "--raw", raw,
           "-o", os.path.join(out, "td_kernels-timeline.svg")] + (["--lib", pm_lib] if pm_lib else [])
    if replay_json and os.path.exists(replay_json):
        cmd += ["--stall-split", replay_json]
    p = subprocess.run(cmd + ["--", prog], capture_output=True, text=True)
    with open(os.path.join(out, "td_kernels-timeline.txt"), "w") as f:
        f.write(p.stdout + p.stderr)
    print("--- timeline ---", p.stdout, p.stderr, sep="\n")
    if p.returncode != 0 or not os.path.exists(j):
        failures.append(f"timeline: {' '.join(cmd)} exited with {p.returncode}")
        return
    with open(j) as f:
        tl = json.load(f)
    c, q = tl["context"], tl["quantities"]
    measured = tl.get("measured_quantities", q)
    active = [s for s in tl["samples"] if not s.get("idle")]
    print(f"timeline: {len(tl['samples'])} samples ({len(active)} active) every {c.get('interval_ns', 0) / 1e3:g} us; "
          f"level 1 from one pass: {measured} (shown: {q}); counters {c.get('metrics')}; kernels from "
          f"{tl['kernel_source']}")
    if not q or not active:
        failures.append(f"timeline: no active sample ({'; '.join(tl['errors']) or 'no error recorded'})")
        return
    bad = [s for s in active if abs(sum(s[k] for k in q) - 1) > 1e-3]
    if bad:
        failures.append(f"timeline: {len(bad)} samples whose level-1 fractions do not add up to 1, e.g. {bad[0]}")
    if abs(sum(tl["total"][k] for k in q) - 1) > 1e-3:
        failures.append(f"timeline: the run's fractions add up to {sum(tl['total'][k] for k in q)}")
    if "native_s" in c and "sampled_s" in c:
        k = c.get("costs") or {}
        print(f"timeline wall time: native {c['native_s']:.3f} s, sampled {c['sampled_s']:.3f} s, overhead "
              f"{c['sampled_s'] / c['native_s']:.2f}x (goal at most 1.3x; printed, not judged); the first launch "
              f"waited {k.get('first_launch_wait_s', 0):.3f} s, setup work {k.get('setup_s', 0):.3f} s "
              f"({c.get('start')}), exit {k.get('exit_s', 0):.3f} s")
    else:
        failures.append("timeline: the wall times (native_s, sampled_s) are not recorded")
    sys.path.insert(0, os.path.dirname(os.path.abspath(tool)))
    from archbench.analysis import timeline  # the library's per-sample fractions against the tool's arithmetic
    from archbench.records.raw import load_pm
    differ = [s for s in timeline.analyse(load_pm(raw))["samples"] if s["recorded"]
              and any(abs(s["recorded"][k] - s["level1"][k]) > 1e-6 for k in measured)]
    if differ:
        failures.append(f"timeline: {len(differ)} samples where the library and the tool differ, e.g. {differ[0]}")
    kernels = {k["kernel"].split("(")[0]: k for k in tl["kernels"]}
    fma, st = kernels.get("fma_chain", {}), kernels.get("stream_triad", {})
    if "retire" in fma and "retire" in st:
        print(f"timeline: fma_chain retire {fma['retire']:.3f} ({fma['samples']:.1f} samples), stream_triad retire "
              f"{st['retire']:.3f} ({st['samples']:.1f} samples)")
        if fma["retire"] <= st["retire"]:
            failures.append("timeline: fma_chain does not retire more than stream_triad")
        lost = sum(st.get(x, 0.0) for x in ("stall", "stall_other", "frontend", "backend"))
        print(f"timeline: stream_triad stalls {lost:.3f} of IPC_MAX (>= 0.8)")
        if lost < 0.8:
            failures.append(f"timeline: stream_triad stalls only {lost:.3f} of IPC_MAX")
    if "divergence" in measured and "thread" in (c.get("roles") or {}).values():
        if "divergence" in fma:
            print(f"timeline: fma_chain divergence {fma['divergence']:.3f} (<= 0.05: the warp-efficiency counter)")
            if fma["divergence"] > 0.05:
                failures.append(f"timeline: fma_chain diverges {fma['divergence']:.3f}: the thread-instruction counter "
                                "does not agree with the instruction counter")
        div = [r.get("divergence") for r in tl["invocations"] if r["kernel"].startswith("divergent")]
        print(f"timeline: divergent, paths 1..32: divergence {[round(d, 3) if d is not None else None for d in div]}")
        if len(div) == 6 and None not in div and div[-1] < div[0] + 0.3:
            failures.append(f"timeline: divergence does not grow with the paths: {div}")
    if replay_first:  # the samples' sums against the kernel replay's first launch (each kernel runs twice)
        names = {"cycles": "sm__cycles_active.sum", "executed": "sm__inst_executed.sum",
                 "issued": "sm__inst_issued.sum", "thread": "smsp__thread_inst_executed.sum"}
        for kname in ("fma_chain", "stream_triad"):
            got, ref = kernels.get(kname, {}).get("counters", {}), replay_first.get(kname, {})
            cells = [f"{role} {got[role] / (2 * ref[m]):.3f}" for role, m in names.items()
                     if role in got and ref.get(m)]
            print(f"timeline: {kname} samples' counters over the kernel replay's (2 launches): {', '.join(cells)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prog", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--lib")
    ap.add_argument("--pm-lib", help="libarchbench_pmsampling.so (default: where the tool looks)")
    ap.add_argument("--out")
    a = ap.parse_args()
    out = gpu.out_dir(a.out, "topdown-gpu-")
    gpu.find_gpu(a.prog)
    td, raw = run_topdown(a.tool, a.lib, a.prog, out)
    kernels = {k["kernel"].split("(")[0]: k for k in td["kernels"]}
    failures = []

    fma = kernels["fma_chain"]
    print(f"fma_chain: retire {fma['retire']:.3f} (>= 0.9)")
    if fma["retire"] < 0.9:
        failures.append(f"fma_chain retires {fma['retire']:.3f} < 0.9 of IPC_MAX")

    st = kernels["stream_triad"]
    parts = {c: st[c] for c in ("branch", "replay", "fetch", "decode", "memory_bound", "core_bound")}
    print(f"stream_triad: backend {st['backend']:.3f} (>= 0.8), parts {parts}")
    if st["backend"] < 0.8:
        failures.append(f"stream_triad backend {st['backend']:.3f} < 0.8")
    if max(parts, key=parts.get) != "memory_bound":
        failures.append(f"stream_triad: the largest part is {max(parts, key=parts.get)}, not memory_bound")

    div = [r["divergence"] for r in td["invocations"] if r["kernel"].startswith("divergent")]
    print(f"divergent, paths 1..32: divergence {[round(d, 3) for d in div]}")
    if len(div) != 6:
        failures.append(f"expected 6 divergent launches profiled (kernel replay, --sample 0), got {len(div)}")
    elif any(b < a - 0.01 for a, b in zip(div, div[1:])) or div[-1] < div[0] + 0.3:
        failures.append(f"divergence does not grow with the paths: {div}")

    ours = raw_metrics(raw)
    metrics = sorted(ours["fma_chain"])
    theirs, why = ncu_metrics(a.prog, metrics, out)
    comparison = {}
    if theirs is None:
        print(f"ncu comparison skipped: {why}")
    else:
        for k in ("fma_chain", "stream_triad"):
            mine = ours[k]
            stalls = sum(v for m, v in mine.items() if "issue_stalled" in m)
            for m in metrics:
                if m not in theirs.get(k, {}):
                    continue
                a_, b_ = mine[m], theirs[k][m]
                diff = abs(a_ - b_) / max(abs(b_), 1e-12) if (a_ or b_) else 0.0
                judged = m.startswith(("sm__inst", "smsp__thread_inst", "sm__cycles_active")) or (
                    "issue_stalled" in m and stalls and b_ >= 0.05 * stalls)
                comparison[f"{k} {m}"] = {"archbench": a_, "ncu": b_, "rel_diff": diff, "judged": bool(judged)}
                flag = "" if diff <= 0.05 else ("  <-- over 5%" if judged else "  (not judged: small)")
                print(f"  {k:13} {m:58} ours {a_:14.6g} ncu {b_:14.6g} {100 * diff:6.2f}%{flag}")
                if judged and diff > 0.05:
                    failures.append(f"{k} {m}: {a_:.6g} vs ncu {b_:.6g} ({100 * diff:.1f}%)")
        with open(os.path.join(out, "td_kernels-vs-ncu.json"), "w") as f:
            json.dump(comparison, f, indent=1)
    run_timeline(a.tool, a.pm_lib, a.prog, out, failures, os.path.join(out, "td_kernels-topdown.json"), ours)
    return gpu.verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
