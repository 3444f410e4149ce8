#!/usr/bin/env python3
"""Every analysis tool on framework programs (label gpu): PyTorch (autocast training through cuDNN and
cuBLAS, a CUDA graph, a side stream joined by an event, a Triton kernel) and JAX (jit, scan, XLA's
device-memory preallocation), each run natively and under trace, TopDown, the timeline and PC
sampling. Each tool must keep the program's output and exit status and print its report within its
overhead (wall time of the whole command over the native run): trace 1.2x, TopDown 3x, timeline
1.3x, PC sampling 1.5x. Then TopDown's sampled default against every launch profiled, on
archbench_td_kernels' argument-dependent kernel (one grid, 1 to 32 divergent paths): each kernel's
fractions within 0.02.

Skips (77) with the reason where there is no CUDA device or a framework is missing; writes one JSON a
program (device, driver, date, versions, and per tool: times, exit statuses, whether the output was
identical, what was profiled or sampled and its share of GPU time, the report's top rows with short
names) and topdown-fidelity.json under --out.
Usage: frameworks_gpu.py --tools DIR --td-kernels PROG [--out DIR] [--only torch|jax]
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import gpu  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = {"torch": os.path.join(HERE, "torch_program.py"), "jax": os.path.join(HERE, "jax_program.py")}
LIMITS = {"trace": 1.2, "topdown": 3.0, "timeline": 1.3, "pcsample": 1.5}


def timed(cmd, env=None, timeout=900):
    t = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    return p, time.monotonic() - t


def tool_cmd(tools, tool, out, name):
    """The tool's command line, each in its one-run mode (the native run is this script's own)."""
    py = [sys.executable, os.path.join(tools, f"archbench_{tool}.py")]
    j = os.path.join(out, f"{name}-{tool}.json")
    if tool == "trace":
        return py + ["run", "--api", "cuda", "--out", os.path.join(out, f"{name}-trace"),
                     "--log", os.path.join(out, f"{name}-trace.txt")], os.path.join(out, f"{name}-trace", "summary.json")
    if tool == "topdown":
        return py + ["--no-native", "--json", j], j
    if tool == "timeline":
        return py + ["--no-native", "--json", j], j
    return py + ["--json", j], j  # pcsample: one sampled run by default


def top_rows(tool, doc):
    """(what was profiled or sampled, its share of the GPU time, the report's top rows by short name)."""
    from archbench.analysis.names import short_names
    if tool == "trace":
        rows = doc.get("kernels", [])
        labels = short_names(r["name"] for r in rows)
        return ({"kernels": sum(r["count"] for r in rows), "busy_share": doc["device_busy_ns"] / doc["span_ns"]},
                [{"kernel": labels[r["name"]], "share": round(r["share"], 4)} for r in rows[:5]])
    rows = doc.get("kernels", [])
    labels = short_names(r.get("kernel") for r in rows)
    if tool == "topdown":
        c = doc["context"]
        covered = sum(r["time_share"] for r in rows if r.get("profiled"))
        return ({"launches_profiled": c.get("launches_profiled"), "launches_unprofiled": c.get("launches_unprofiled"),
                 "profiled_time_share": round(covered, 4), "errors": c.get("errors", [])},
                [{"kernel": labels[r["kernel"]], "time_share": round(r["time_share"], 4),
                  **{k: r.get(k) for k in ("retire", "divergence", "frontend", "backend")}} for r in rows[:5]])
    if tool == "timeline":
        return ({"samples": len(doc.get("samples", [])), "kernels": len(rows)},
                [{"kernel": labels[r["kernel"]], "launches": r.get("launches"), "retire": r.get("retire")} for r in rows[:5]])
    c = doc["context"]
    return ({"samples": c.get("total_samples"), "dropped": c.get("dropped_samples"), "kernels": len(rows)},
            [{"kernel": labels[r["kernel"]], "samples": r.get("samples"), "share": round(r.get("time_share", 0), 4)}
             for r in rows[:5]])


def versions(python):
    out = {}
    for m in ("torch", "triton", "jax", "jaxlib"):
        p = subprocess.run([python, "-c", f"import {m}; print({m}.__version__)"], capture_output=True, text=True)
        out[m] = p.stdout.strip() if p.returncode == 0 else None
    return out


def device_facts():
    p = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                       capture_output=True, text=True)
    name, _, driver = (p.stdout.splitlines() or [","])[0].partition(",")
    return name.strip(), driver.strip()


def one_program(a, name, failures):
    prog = PROGRAMS[name]
    native, native_s = timed([a.python, prog])
    if native.returncode == gpu.SKIP:
        print(f"SKIP ({name}): {native.stdout.strip()}")
        return None
    if native.returncode != 0:
        failures.append(f"{name}: exits {native.returncode} natively: {native.stderr[-500:]}")
        return None
    device, driver = device_facts()
    doc = {"context": {"program": os.path.basename(prog), "device": device, "driver": driver,
                       "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                       "versions": versions(a.python), "native_s": round(native_s, 3), "native_rc": native.returncode},
           "tools": {}}
    for tool in a.tools_run:
        cmd, result = tool_cmd(a.tools, tool, a.out, name)
        p, s = timed(cmd + ["--", a.python, prog])
        with open(os.path.join(a.out, f"{name}-{tool}.log"), "w") as f:
            f.write(" ".join(cmd) + "\n" + p.stdout + "\n--- stderr ---\n" + p.stderr)
        same = p.stdout.startswith(native.stdout)  # the program's lines first, then the tool's report
        row = {"tool_s": round(s, 3), "overhead": round(s / native_s, 3), "limit": LIMITS[tool], "rc": p.returncode,
               "output_identical": same}
        try:
            with open(result) as f:
                row["coverage"], row["top"] = top_rows(tool, json.load(f))
        except (OSError, ValueError, KeyError) as e:
            row["coverage"], row["top"] = {"error": f"{type(e).__name__}: {e}"}, []
        doc["tools"][tool] = row
        print(f"{name} {tool}: {s:.2f} s against {native_s:.2f} s native ({s / native_s:.2f}x, limit {LIMITS[tool]}x), "
              f"rc {p.returncode}, output {'identical' if same else 'CHANGED'}; {row['coverage']}")
        if p.returncode != native.returncode:
            failures.append(f"{name} {tool}: exit status {p.returncode}, natively {native.returncode}")
        if not same:
            failures.append(f"{name} {tool}: the program's output changed")
        if s / native_s > LIMITS[tool]:
            failures.append(f"{name} {tool}: {s / native_s:.2f}x over its {LIMITS[tool]}x")
    with open(os.path.join(a.out, f"frameworks-{name}.json"), "w") as f:
        json.dump(doc, f, indent=1)
    return doc


def fidelity(a, failures):
    """TopDown's default (the first 2 launches of a shape, more where their GPU times differ) against
    --sample 0, per kernel."""
    docs = {}
    for label, extra in (("default", []), ("every", ["--sample", "0", "--budget", "0"])):
        j = os.path.join(a.out, f"td-{label}.json")
        gpu.run([sys.executable, os.path.join(a.tools, "archbench_topdown.py"), "--no-native", "--json", j] + extra
                + ["--", a.td_kernels], os.path.join(a.out, f"td-{label}.txt"))
        with open(j) as f:
            docs[label] = {k["kernel"]: k for k in json.load(f)["kernels"]}
    rows = []
    for kernel, every in docs["every"].items():
        d = docs["default"].get(kernel, {})
        diffs = {q: abs((d.get(q) or 0) - (every.get(q) or 0)) for q in ("retire", "divergence", "frontend", "backend")}
        rows.append({"kernel": kernel, "launches": every.get("launches"), "profiled_default": d.get("profiled"),
                     "default": {q: d.get(q) for q in diffs}, "every": {q: every.get(q) for q in diffs},
                     "max_diff": round(max(diffs.values()), 4)})
        print(f"fidelity {kernel}: max difference {max(diffs.values()):.3f} ({d.get('profiled')} of "
              f"{every.get('launches')} launches profiled by default)")
        if max(diffs.values()) > 0.02:
            failures.append(f"TopDown fidelity: {kernel}: {max(diffs.values()):.3f} from --sample 0 (limit 0.02)")
    device, driver = device_facts()
    with open(os.path.join(a.out, "topdown-fidelity.json"), "w") as f:
        json.dump({"context": {"program": "archbench_td_kernels", "device": device, "driver": driver,
                               "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")},
                   "kernels": rows}, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tools", default=gpu.TOOLS, help="the tools folder (archbench_*.py)")
    ap.add_argument("--td-kernels", help="archbench_td_kernels (the fidelity check; left out without it)")
    ap.add_argument("--out", help="results folder (default: a new temporary one)")
    ap.add_argument("--python", default=shutil.which("python3") or sys.executable,
                    help="the Python that runs the programs (default: python3 on the PATH, where torch and jax are)")
    ap.add_argument("--only", choices=sorted(PROGRAMS), action="append", help="this program only (again for more)")
    ap.add_argument("--tool", choices=sorted(LIMITS), action="append", dest="tools_run", help="this tool only (again)")
    a = ap.parse_args()
    a.out = gpu.out_dir(a.out, "frameworks-gpu-")
    a.tools_run = a.tools_run or ["trace", "topdown", "timeline", "pcsample"]
    sys.path.insert(0, a.tools)
    if not shutil.which("nvidia-smi") or subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode != 0:
        gpu.skip("no CUDA device (nvidia-smi is missing or lists no GPU)")
    failures, ran = [], 0
    for name in a.only or sorted(PROGRAMS):
        ran += one_program(a, name, failures) is not None
    if a.td_kernels:
        fidelity(a, failures)
    elif not ran:
        gpu.skip("neither torch nor jax is importable here")
    print(f"results in {a.out}")
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
