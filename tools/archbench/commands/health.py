"""A node's health verdict for burn-in and a job's prologue: each GPU and link passed or failed.

Thresholds are data (tools/archbench/health.json).

Usage: archbench-health NODE.json [--peer PEER.json] [--serial SERIAL.json] [--json VERDICT.json] [--thresholds FILE]

NODE.json: archbench --device=all (every GPU at once) or archbench_mpi's merged run; PEER.json: the
peer family (ci/gpu-node.sh writes both). A GPU fails where a figure is below node_fraction of the
median of the node's GPUs of its model (never across models), or below the published peak's
fraction for its SKU, or where NVML says so (uncorrected ECC errors, retired or remapped rows,
hardware or thermal slowdown, a PCIe link narrower than its maximum, fewer NVLinks active than the
node's most); a link fails below link_fraction of its kind's median. --serial (the same suite run --serial): which
figures differ between every GPU at once and one after another, and by how much. Exit: 0 all
passed, 4 a GPU or link fell short (named with the figure), 1 a run failed, 2 bad input.
"""

import argparse
import json

from .. import cli
from ..analysis.health import verdict, ways
from ..records import results as ar
from ..records.published import TEXTBOOK, read_thresholds
from ..render.health import render, render_ways


def run(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], usage=__doc__.split("\n")[4][7:])
    p.add_argument("node", help="--device=all or archbench_mpi's merged results")
    p.add_argument("--peer", help="the peer family's results (its links are checked too)")
    p.add_argument("--serial", help="the same suite one GPU after another: the figures that differ from NODE's")
    p.add_argument("--json", help="write the verdict as JSON there")
    p.add_argument("--thresholds", help="thresholds file (default: the package's health.json)")
    a = p.parse_args(argv)
    ctx, entries = ar.read_results(a.node)
    peer = None
    if a.peer:
        pctx, pentries = ar.read_results(a.peer)
        peer = {"context": pctx, "benchmarks": pentries}
    v = verdict({"context": ctx, "benchmarks": entries}, read_thresholds(a.thresholds), TEXTBOOK, peer)
    node = ctx.get("node", {})
    v["context"] = dict({k: ctx.get(k) for k in ("device", "driver_version", "date", "host_name", "archbench_version")},
                        node_mode=node.get("mode"), device_count=node.get("device_count"), results=a.node)
    if not v["checks"] and not v["failed_runs"]:
        raise ar.InputError(f"{a.node}: nothing to check (no benchmark on two GPUs of one model, no NVML facts)")
    print(render(v))
    if a.serial:
        sctx, sentries = ar.read_results(a.serial)
        v["ways"] = ways({"context": ctx, "benchmarks": entries}, {"context": sctx, "benchmarks": sentries})
        print(render_ways(v["ways"]))
    if a.json:
        cli.write_file(a.json, json.dumps(v, indent=1))
    if v["failed"]:
        return cli.EXIT_SLOW_GPU
    return cli.EXIT_FAILED if v["failed_runs"] else cli.EXIT_OK


def main(argv=None):
    """The command line; returns the exit code (4 a GPU or link fell short, 1 a failed run, 2 bad input)."""
    return cli.run("archbench_health", run, argv)
