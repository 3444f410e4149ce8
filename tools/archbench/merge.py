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
import os
import sys

from . import cli
from . import results as ar
from . import variability as av
from .results import unit_of


def read_manifest(path):
    """The runs a manifest lists: [{status, json, tail, tags}]; raises InputError."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.rstrip("\n") for line in f if line.strip()]
    except OSError as e:
        raise ar.InputError(f"{path}: cannot read: {e.strerror or e}") from None
    runs = []
    for n, line in enumerate(lines, 1):
        fields = line.split("\t")
        if len(fields) < 3 or not fields[0].lstrip("-").isdigit():
            raise ar.InputError(f"{path}: line {n}: expected 'status<TAB>json<TAB>tail[<TAB>key=value...]'")
        tags = dict(f.split("=", 1) for f in fields[3:] if "=" in f)
        tail = ""
        if fields[2] and os.path.exists(fields[2]):
            with open(fields[2], encoding="utf-8", errors="replace") as f:
                tail = f.read()
        runs.append({"status": int(fields[0]), "json": fields[1], "tail": tail, "tags": tags})
    return runs


def merge(runs):
    """One results document from runs [{status, json, tail, tags}]; a run whose JSON is missing
    or malformed counts as failed (its reason kept) and the others are merged."""
    context, benchmarks, listed = None, [], []
    for run in runs:
        record = dict(run["tags"], status=run["status"])
        try:
            # Google Benchmark creates the file before it runs anything: empty means no results.
            written = run["json"] and os.path.exists(run["json"]) and os.path.getsize(run["json"]) > 0
            ctx, entries = ar.read_results(run["json"]) if written else (None, None)
        except ar.InputError as e:
            ctx, entries = None, None
            record["error"] = str(e)
        if ctx is not None:
            record.setdefault("host", ctx.get("host", ""))
            record.setdefault("device", ctx.get("device", ""))
            record.setdefault("device_selector", ctx.get("device_selector", ""))
            record["context"] = ctx
            if context is None:
                context = dict(ctx)
            for entry in entries:
                tagged = dict(entry)
                tagged.update({k: v for k, v in record.items() if k not in ("status", "context", "error")})
                benchmarks.append(tagged)
        if run["status"] != 0 or ctx is None:
            record["failed"] = True
            record["output_tail"] = run["tail"]
            if ctx is None and "error" not in record:
                record["error"] = "no results file: the run failed before writing it"
        listed.append(record)
    context = context or {}
    context["merged_runs"] = len(listed)
    context["failed_runs"] = sum(1 for r in listed if r.get("failed"))
    context["runs"] = listed
    return {"context": context, "benchmarks": benchmarks}


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
    ar.write_file(args.output, json.dumps(merged, indent=1))
    ctx = merged["context"]
    for r in ctx["runs"]:
        if r.get("failed"):
            print(f"archbench_merge: failed: {unit_of(r)} (exit {r['status']}): {r.get('error', '')}".rstrip(": "),
                  file=sys.stderr)
    print(f"archbench_merge: {ctx['merged_runs'] - ctx['failed_runs']} of {ctx['merged_runs']} runs merged into "
          f"{args.output}", file=sys.stderr)
    if args.report:
        report = av.variability(merged)
        ar.write_file(args.report, json.dumps(report, indent=1))
        print(av.render(report))
    return 1 if ctx["failed_runs"] else 0

