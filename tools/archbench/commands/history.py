"""Headline archbench figures of one device across driver/runtime versions.

Usage: archbench_history.py [--device MODEL] [--results DIR] [--format console|markdown]
                            [--plot FILE.svg]

Reads every results JSON under DIR (default results/), keeps the runs of one device model (the
context's "device": MODEL exactly, case aside, or the only model whose name contains MODEL; two
models never mix), groups them by (driver_version, runtime_version,
archbench_version: a change of the benchmarks themselves is a confound like a driver's) and
prints one row per group, sorted by run date: best compute rate per type (median over the
repetitions, max over benchmarks; flop_per_s, or op_per_s for int), best byte_per_s of
memory/*/triad, memory/*/copy and all memory/, and the median ns_per_access of latency/ at
the smallest and largest working set. --plot writes an SVG chart. Standard library only.
"""

import argparse
import sys

from .. import cli
from ..analysis.history import collect
from ..records import results as ar
from ..render import charts
from ..render.history import draw_chart, render, svg_chart


def parse_args(argv):
    """The command line."""
    p = argparse.ArgumentParser(description="Headline archbench figures of one device per driver/runtime version.")
    p.add_argument("--device", metavar="MODEL",
                   help="the context's device model, or a part of its name that one model alone has "
                        "(needed when the results hold several devices)")
    p.add_argument("--results", metavar="DIR", default="results", help="folder of results JSON (default results/)")
    p.add_argument("--format", choices=("console", "markdown"), default="console", help="table format")
    p.add_argument("--plot", metavar="FILE.svg|FILE.png",
                   help="also write line charts of the headline figures (matplotlib, else plain SVG)")
    return p.parse_args(argv)


def run(argv):
    """Print the history table; returns the exit code or raises InputError."""
    args = parse_args(argv)
    device, groups = collect(args.results, args.device)
    sys.stdout.write(render(groups, args.format == "markdown"))
    if args.plot:
        why = charts.write(args.plot, lambda axis: draw_chart(axis, groups, device), lambda: svg_chart(groups, device))
        if why:
            raise ar.InputError(why)
    return 0


def main(argv=None):
    """The command line; returns the exit code (2 on bad input)."""
    return cli.run("archbench_history", run, argv)

