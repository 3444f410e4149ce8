"""The variability report (analysis/variability.py) as console text."""


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
