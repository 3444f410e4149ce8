"""Variability across the GPUs of a merged run (archbench --device=all, or the MPI launcher).

Usage: archbench_variability.py MERGED.json [--json REPORT.json] [--threshold 3.5] [--min-share 0.25]

For each benchmark measured on several GPUs: min, median and max of its main figure (the first
of byte_per_s, flop_per_s, op_per_s, call_per_s, ns_per_access, else real_time; per GPU the
median over its repetitions). With three GPUs or more, the outliers by the median absolute
deviation test: modified z = 0.6745 (x - median) / MAD beyond --threshold (Iglewicz and
Hoaglin's 3.5), MAD floored at 1% of the median so that a set of identical GPUs does not make
any difference an outlier (so an outlier is always more than about 5% off the median). A GPU
that is a slow outlier (a lower rate, a longer time) on at least --min-share of its tested
benchmarks (and two of them, where more than one was tested) is "a slow GPU", with the
evidence; a host all of whose GPUs are slow, where there are several hosts, is "a slow node".
Runs that failed are listed. Exit: 0 nothing flagged, 4 a slow GPU, 1 a failed run (and no slow GPU), 2 bad input
(including no benchmark measured on two GPUs).
Standard library only.
"""

import argparse
import json

from .. import cli
from ..analysis.variability import variability
from ..records import results as ar
from ..render.variability import render


def run(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("merged", help="merged results (tools/archbench_merge.py)")
    p.add_argument("--json", help="write the report as JSON there")
    p.add_argument("--threshold", type=float, default=3.5, help="modified z-score beyond which a GPU is an outlier")
    p.add_argument("--min-share", type=float, default=0.25,
                   help="share of its benchmarks on which a GPU must be a slow outlier to be flagged")
    args = p.parse_args(argv)
    ctx, entries = ar.read_results(args.merged)
    report = variability({"context": ctx, "benchmarks": entries}, args.threshold, args.min_share)
    if not report["per_benchmark"] and not report["failed_runs"]:
        raise ar.InputError(f"{args.merged}: no benchmark was measured on two GPUs or more: nothing was compared")
    print(render(report))
    if args.json:
        cli.write_file(args.json, json.dumps(report, indent=1))
    if report["slow_gpus"]:
        return cli.EXIT_SLOW_GPU
    return cli.EXIT_FAILED if report["failed_runs"] else cli.EXIT_OK


def main(argv=None):
    """The command line; returns the exit code (4 a slow GPU, 1 a failed run, 2 bad input)."""
    return cli.run("archbench_variability", run, argv)

