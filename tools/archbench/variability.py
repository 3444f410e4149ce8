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
import statistics
import sys

from . import cli
from . import results as ar
from .results import unit_of
from .stats import MAD_FLOOR, outliers

MAIN_METRICS = ("byte_per_s", "flop_per_s", "op_per_s", "call_per_s", "ns_per_access", "real_time")


def per_unit(merged):
    """{benchmark: {unit label: (metric, value)}}, the value a median over repetitions."""
    groups = {}
    for entry in merged["benchmarks"]:
        groups.setdefault(unit_of(entry), []).append(entry)
    out = {}
    for unit, entries in groups.items():
        benches = {}
        ar.add_entries(benches, entries)
        for name, bench in benches.items():
            for metric in MAIN_METRICS:
                values = ar.values_of(bench, metric)
                if values:
                    out.setdefault(name, {})[unit] = (metric, statistics.median(values))
                    break
    return out


def variability(merged, threshold=3.5, min_share=0.25):
    """The report (a dict) for a merged results document."""
    if not isinstance(merged, dict) or not isinstance(merged.get("benchmarks"), list):
        raise ar.InputError("not a merged results document (needs a \"benchmarks\" list)")
    benches, tested, slow_on = [], {}, {}
    units = per_unit(merged)
    for name, by_unit in sorted(units.items()):
        if len(by_unit) < 2:
            continue
        metric = next(iter(by_unit.values()))[0]
        values = {u: v for u, (m, v) in by_unit.items() if m == metric}
        xs = sorted(values.values())
        row = {"name": name, "metric": metric, "gpus": len(xs), "min": xs[0], "median": statistics.median(xs),
               "max": xs[-1], "outliers": []}
        if len(values) >= 3:
            for unit in values:
                tested[unit] = tested.get(unit, 0) + 1
            for unit, z in sorted(outliers(values, threshold).items()):
                slow = (z < 0) == ar.is_higher_better(metric)
                row["outliers"].append({"gpu": unit, "value": values[unit], "z": round(z, 2),
                                        "ratio_to_median": values[unit] / row["median"] if row["median"] else None,
                                        "slow": slow})
                if slow:
                    slow_on.setdefault(unit, []).append(name)
        benches.append(row)
    slow_gpus = []
    for unit, names in sorted(slow_on.items()):
        share = len(names) / tested[unit]
        if share >= min_share and (len(names) >= 2 or tested[unit] == 1):
            slow_gpus.append({"gpu": unit, "slow_on": len(names), "tested": tested[unit], "share": round(share, 3),
                              "evidence": [dict(o, name=b["name"], metric=b["metric"], median=b["median"]) for b in benches
                                           for o in b["outliers"] if o["gpu"] == unit and o["slow"]]})
    runs = merged.get("context", {}).get("runs", [])
    hosts = {}
    for r in runs:
        if not r.get("failed"):
            hosts.setdefault(str(r.get("host", "")), []).append(unit_of(r))
    flagged = {g["gpu"] for g in slow_gpus}
    slow_nodes = [h for h, units in sorted(hosts.items()) if len(hosts) > 1 and units and set(units) <= flagged]
    return {"threshold": threshold, "min_share": min_share, "mad_floor": MAD_FLOOR,
            "gpus": sorted({u for b in units.values() for u in b}),
            "per_benchmark": benches, "slow_gpus": slow_gpus, "slow_nodes": slow_nodes,
            "failed_runs": [{"gpu": unit_of(r), "status": r.get("status"), "error": r.get("error", ""),
                             "output_tail": r.get("output_tail", "")} for r in runs if r.get("failed")]}


def fmt(metric, v):
    """A figure with its unit, as the console shows it."""
    if metric == "real_time":
        return f"{v / 1e3:.4g} us"
    if metric.startswith("ns_per_"):
        return f"{v:.4g} ns"
    unit = {"byte": "GB", "flop": "GFLOP", "op": "Gop", "call": "Gcall"}.get(metric.split("_per_")[0], "G?")
    return f"{v / 1e9:.4g} {unit}/s"


def render(report):
    """The report as console text."""
    lines = [f"Variability over {len(report['gpus'])} devices: " + ", ".join(report["gpus"])]
    rows = report["per_benchmark"]
    if rows:
        width = max(len(b["name"]) for b in rows)
        lines.append(f"{'benchmark':<{width}}  {'gpus':>4}  {'min':>16}  {'median':>16}  {'max':>16}  outliers")
        for b in rows:
            outs = ", ".join(f"{o['gpu']} ({'slow' if o['slow'] else 'fast'}, z={o['z']})" for o in b["outliers"])
            lines.append(f"{b['name']:<{width}}  {b['gpus']:>4}  {fmt(b['metric'], b['min']):>16}  "
                         f"{fmt(b['metric'], b['median']):>16}  {fmt(b['metric'], b['max']):>16}  {outs}")
    else:
        lines.append("no benchmark was measured on two GPUs or more")
    for g in report["slow_gpus"]:
        lines.append(f"SLOW GPU: {g['gpu']}: a slow outlier on {g['slow_on']} of {g['tested']} benchmarks")
        for e in g["evidence"][:10]:
            lines.append(f"  {e['name']}: {fmt(e['metric'], e['value'])} against a median of "
                         f"{fmt(e['metric'], e['median'])} (x{e['ratio_to_median']:.3f}, z={e['z']})")
    for h in report["slow_nodes"]:
        lines.append(f"SLOW NODE: {h}: every GPU of it is slow")
    if not report["slow_gpus"]:
        lines.append("no slow GPU (tested where three GPUs or more ran a benchmark)")
    for r in report["failed_runs"]:
        lines.append(f"FAILED: {r['gpu']} (exit {r['status']}) {r['error']}".rstrip())
        lines.extend("  | " + t for t in r["output_tail"].strip().splitlines()[-5:])
    return "\n".join(lines)


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
        ar.write_file(args.json, json.dumps(report, indent=1))
    if report["slow_gpus"]:
        return cli.EXIT_SLOW_GPU
    return cli.EXIT_FAILED if report["failed_runs"] else cli.EXIT_OK


def main(argv=None):
    """The command line; returns the exit code (4 a slow GPU, 1 a failed run, 2 bad input)."""
    return cli.run("archbench_variability", run, argv)

