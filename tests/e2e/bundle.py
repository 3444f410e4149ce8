#!/usr/bin/env python3
"""The bundle carries every tool and library (ci/bundle.sh): built into a temporary folder, then each
tool run from it as on a compute node: every injection library the build made is there, every
tools/archbench_*.py answers --help, and an OpenCL program (the bundled archbench on the default
device, PoCL in CI) traced from the bundle keeps its exit status and leaves a summary.
Skips (77) where no OpenCL device answers. The portable build is kept in BUILD/bundle-build between
runs (ci/bundle.sh's BUILD_DIR).
Usage: bundle.py BUILD_DIR
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The injection libraries and helpers a build makes, each copied by ci/bundle.sh where it was built.
LIBS = ("libarchbench_trace_opencl.so", "libarchbench_trace_cuda.so", "libarchbench_topdown.so",
        "libarchbench_pmsampling.so", "archbench_pmsampler", "libarchbench_pcsampling.so")


def main():
    build = os.path.abspath(sys.argv[1])
    failures = []
    with tempfile.TemporaryDirectory(prefix="archbench-bundle-") as d:
        dest = os.path.join(d, "bundle")
        env = dict(os.environ, BUILD_DIR=os.path.join(build, "bundle-build"), ARCHBENCH_BUNDLE_CUDA="node")
        p = subprocess.run([os.path.join(ROOT, "ci", "bundle.sh"), dest], cwd=ROOT, env=env, capture_output=True,
                           text=True)
        if p.returncode != 0:
            print(p.stdout[-3000:], p.stderr[-3000:])
            return f"FAIL: ci/bundle.sh exited {p.returncode}"
        made = {os.path.basename(f) for f in glob.glob(os.path.join(build, "bundle-build", "lib", "*"))}
        for lib in LIBS:
            if lib in made and not os.path.exists(os.path.join(dest, "lib", lib)):
                failures.append(f"the build made {lib} but the bundle does not carry it")
        tools = sorted(glob.glob(os.path.join(dest, "tools", "archbench_*.py")))
        if len(tools) < 15:
            failures.append(f"{len(tools)} tools in the bundle's tools/, 15 expected")
        for t in tools:
            h = subprocess.run([sys.executable, t, "--help"], capture_output=True, text=True, timeout=60)
            if h.returncode != 0 or "usage" not in h.stdout.lower():
                failures.append(f"{os.path.basename(t)} --help: exit {h.returncode}: {h.stderr.strip()[:200]}")
        lst = subprocess.run([os.path.join(dest, "run.sh"), "--list-devices"], capture_output=True, text=True)
        if lst.returncode != 0 or "opencl" not in lst.stdout.lower():
            if not failures:
                print(f"SKIP: no OpenCL device answers the bundle ({lst.stdout.strip()[:200]} {lst.stderr.strip()[:200]})")
                return 77
        else:
            out = os.path.join(d, "trace")
            t = subprocess.run([sys.executable, os.path.join(dest, "tools", "archbench_trace.py"), "run", "--api", "opencl",
                                "--out", out, "--", os.path.join(dest, "bin", "archbench"), "--device=opencl",
                                "--benchmark_filter=^launch/", "--benchmark_min_time=0.01",
                                "--benchmark_repetitions=1", f"--benchmark_out={os.path.join(d, 'run.json')}"],
                               capture_output=True, text=True, timeout=600)
            summary = os.path.join(out, "summary.json")
            if t.returncode != 0:
                failures.append(f"traced run from the bundle exited {t.returncode}: {t.stderr[-500:]}")
            elif not os.path.exists(summary):
                failures.append(f"traced run from the bundle left no summary: {t.stderr[-500:]}")
            else:
                with open(summary) as f:
                    kernels = sum(k["count"] for k in json.load(f)["kernels"])
                print(f"traced from the bundle: {kernels} kernels")
                if not kernels:
                    failures.append("the trace from the bundle holds no kernel")
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    r = main()
    if isinstance(r, str):
        print(r)
        r = 1
    sys.exit(r)
