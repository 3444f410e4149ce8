#!/usr/bin/env python3
"""The MPI launcher end to end: 2 ranks on this machine's loopback, then a rank that fails.

Usage: mpi_e2e.py ARCHBENCH_MPI MPIRUN [KEEP_DIR]

Both ranks run one quick benchmark on the default device (PoCL's CPU in CI, which the two
ranks share). Checks that the merged file holds both ranks' results tagged by host, rank and
device, with the variability report beside it; then that a rank given a device that does not
exist (ARCHBENCH_MPI_DEVICES) is reported in the merged file and the report, that the other
rank's results are still merged, and that the exit status is 1; and that an unwritable --out is
refused on every rank with exit 2 before anything runs. KEEP_DIR,
when given, receives the first run's merged file and report. Exit 77: no device here.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

FILTER = "--benchmark_filter=^launch/[a-z]+/empty/dispatch/items:1$"


def mpirun(mpi, launcher, out, env_extra):
    cmd = [mpi, "-np", "2", "--oversubscribe"]
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    # Loopback only (a container has no other network to count on); shared memory between the two.
    cmd += ["--mca", "btl", "self,vader,tcp", "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo"]
    cmd += [launcher, "--out=" + out, FILTER, "--benchmark_min_time=0.01", "--benchmark_repetitions=1"]
    env = dict(os.environ, **env_extra)
    env.pop("ARCHBENCH_DEVICE", None)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    print("$", " ".join(cmd), f"(exit {p.returncode})")
    print(p.stdout[-4000:], p.stderr[-2000:])
    return p


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def fail(message):
    print("FAIL:", message)
    sys.exit(1)


def main():
    launcher, mpi = sys.argv[1], sys.argv[2]
    keep = sys.argv[3] if len(sys.argv) > 3 else None
    archbench = os.path.join(os.path.dirname(launcher), "archbench")
    if subprocess.run([archbench, "--list-devices"], capture_output=True).returncode != 0:
        print("SKIPPED: no device for archbench here")
        return 77
    tmp = tempfile.mkdtemp(prefix="archbench-mpi-test-")
    try:
        out = os.path.join(tmp, "merged.json")
        p = mpirun(mpi, launcher, out, {})
        if p.returncode != 0:
            fail(f"two good ranks: exit {p.returncode}")
        merged = load(out)
        runs = merged["context"]["runs"]
        if sorted(r["rank"] for r in runs) != ["0", "1"] or any(r.get("failed") for r in runs):
            fail(f"expected ranks 0 and 1, both good: {runs}")
        for r in runs:
            if not r["host"] or not r["device_selector"] or not r["device"]:
                fail(f"a run lacks its host or device: {r}")
        ranks = {b["rank"] for b in merged["benchmarks"] if b.get("host") and b.get("device_selector")}
        if ranks != {"0", "1"}:
            fail(f"benchmark entries are not tagged by both ranks: {ranks}")
        report = load(os.path.join(tmp, "merged-variability.json"))
        if len(report["gpus"]) != 2 or not report["per_benchmark"] or report["failed_runs"]:
            fail(f"the report should cover both ranks' benchmark and no failure: {report}")
        if keep:
            os.makedirs(keep, exist_ok=True)
            for name in ("merged.json", "merged-variability.json"):
                shutil.copy(os.path.join(tmp, name), os.path.join(keep, name.replace("merged", "mpi-2ranks")))

        out = os.path.join(tmp, "failing.json")
        default = runs[0]["device_selector"]
        p = mpirun(mpi, launcher, out, {"ARCHBENCH_MPI_DEVICES": default + ",no-such-device"})
        if p.returncode != 1:
            fail(f"one failed rank should make the exit status 1, not {p.returncode}")
        merged = load(out)
        bad = [r for r in merged["context"]["runs"] if r.get("failed")]
        if len(bad) != 1 or bad[0]["rank"] != "1" or bad[0]["status"] != 2 or "no-such-device" not in bad[0]["output_tail"]:
            fail(f"rank 1 should be reported failed with its error: {merged['context']['runs']}")
        if {b["rank"] for b in merged["benchmarks"]} != {"0"}:
            fail("rank 0's results should still be merged")
        report = load(os.path.join(tmp, "failing-variability.json"))
        if [r["status"] for r in report["failed_runs"]] != [2]:
            fail(f"the report should list the failed rank: {report['failed_runs']}")
        # An output that cannot be written stops every rank before anything runs: bad input.
        p = mpirun(mpi, launcher, "/proc/no/such/merged.json", {})
        if p.returncode != 2 or "cannot write /proc/no/such/merged.json" not in p.stdout + p.stderr:
            fail(f"an unwritable --out should be refused with exit 2, not {p.returncode}")
        print("OK: 2 ranks merged and tagged; a failing rank reported, not fatal; an unwritable output refused")
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
