"""The peer family's results as matrices: rows the source GPU, columns the destination.

Usage: archbench_peer.py RESULTS... [--json MATRIX.json] [--all-sizes]

RESULTS are results files or folders (archbench --device=all's merged file holds every ordered
pair). For each variant (ce_read, ce_write, ce_nop2p_read, ce_nop2p_write, sm_read, sm_write,
ce_bidir, sm_bidir; latency) and size, the median over repetitions: GB/s (1000-based, the
bytes moved: both directions together for *_bidir) or, for latency, microseconds per access.
The console shows the largest size of each variant (every size with --all-sizes); --json
writes them all. Exit 2 on bad input or when there is no peer result. Standard library only.
"""

import argparse
import json

from .. import cli
from ..analysis.peer import matrices
from ..records import results as ar
from ..render.peer import render


def run(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results", nargs="+", help="results files or folders")
    p.add_argument("--json", help="write every matrix as JSON there")
    p.add_argument("--all-sizes", action="store_true", help="print every size, not only the largest")
    args = p.parse_args(argv)
    found = matrices(args.results)
    if not found:
        raise ar.InputError("no peer/cuda/... results in " + " ".join(args.results))
    largest = {}
    for variant, size in found:
        largest[variant] = max(size, largest.get(variant, 0))
    for key in sorted(found):
        if args.all_sizes or key[1] == largest[key[0]]:
            print(render(key, found[key]) + "\n")
    if args.json:
        doc = [{"variant": v, "bytes": b, "unit": m["unit"],
                "cells": [{"src": s, "dst": d, "value": x} for (s, d), x in sorted(m["cells"].items())]}
               for (v, b), m in sorted(found.items())]
        cli.write_file(args.json, json.dumps(doc, indent=1))
    return 0


def main(argv=None):
    """The command line; returns the exit code (2 on bad input)."""
    return cli.run("archbench_peer", run, argv)

