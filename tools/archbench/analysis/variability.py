"""Variability across the GPUs of a merged run: per benchmark min, median and max of its main figure
over the GPUs, the outliers by the median absolute deviation test, the slow GPUs and slow nodes.
The method is the variability command's (commands/variability.py)."""

import statistics

from ..records import results as ar
from ..records.results import unit_of
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
