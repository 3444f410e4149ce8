"""Merge the results of several archbench runs (devices of a node, or MPI ranks) into one file.

Usage: archbench_merge.py --manifest FILE -o MERGED.json [--report REPORT.json]
       archbench_merge.py RUN.json... -o MERGED.json [--report REPORT.json]

The manifest (written by `archbench --device=all` and by the MPI launcher) has one line per
run, tab-separated: exit status, JSON file, file holding the run's last output lines, then
key=value tags (host, rank, device, device_selector). Every benchmark entry of a run gets its
tags (and its context's host and device when the tags lack them); the merged context keeps the
first good run's context and lists every run under "runs", failed ones with their status and
output tail: a run that failed is reported, never fatal. With --report, the variability report
(tools/archbench_variability.py) is written there and printed. Exit: 0 every run merged, 1 some
run failed, 2 bad input. Standard library only.
"""

import argparse
import json
import sys

from .. import cli
from ..analysis import variability as av
from ..analysis.merge import merge
from ..records import results as ar
from ..records.manifest import read_manifest
from ..records.results import unit_of
from ..render import variability as rv


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("runs", nargs="*", help="results files to merge (each a run that succeeded)")
    p.add_argument("--manifest", help="manifest of runs (see the usage above)")
    p.add_argument("-o", "--output", required=True, help="merged JSON file to write")
    p.add_argument("--report", help="also write the variability report (JSON) there")
    return p.parse_args(argv)


def main(argv=None):
    """The command line; returns the exit code (1 a failed run, 2 bad input or an unwritable output)."""
    return cli.run("archbench_merge", run, argv)


def run(argv):
    args = parse_args(argv)
    runs = read_manifest(args.manifest) if args.manifest else []
    for path in args.runs:  # named as runs that succeeded: a file that cannot be read is bad input
        ar.read_results(path)
    runs += [{"status": 0, "json": path, "tail": "", "tags": {}} for path in args.runs]
    if not runs:
        raise ar.InputError("nothing to merge: give results files or --manifest")
    merged = merge(runs)
    cli.write_file(args.output, json.dumps(merged, indent=1))
    ctx = merged["context"]
    for r in ctx["runs"]:
        if r.get("failed"):
            print(f"archbench_merge: failed: {unit_of(r)} (exit {r['status']}): {r.get('error', '')}".rstrip(": "),
                  file=sys.stderr)
    print(f"archbench_merge: {ctx['merged_runs'] - ctx['failed_runs']} of {ctx['merged_runs']} runs merged into "
          f"{args.output}", file=sys.stderr)
    if args.report:
        report = av.variability(merged)
        cli.write_file(args.report, json.dumps(report, indent=1))
        print(rv.render(report))
    return 1 if ctx["failed_runs"] else 0

