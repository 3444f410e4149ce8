"""The agreement table (analysis/traffic.py) as console text."""

from ..analysis.traffic import MOVES
from ..cli import si


def text_table(table, summary):
    head = f"{'benchmark':52s} {'model flops':>12s} {'exec flops':>12s} {'flops':>10s} {'moves':>8s} " \
           f"{'model bytes':>12s} {'DRAM bytes':>12s} {'ratio':>6s} {'DRAM':>11s}"
    out = [head, "-" * len(head)]
    for t in table:
        ratio = f"{t['dram_ratio']:.3f}" if t["dram_ratio"] is not None else "-"
        out.append(f"{t['benchmark'][:52]:52s} {t['model_flops']:12.6g} "
                   f"{t['exec_flops'] if t['exec_flops'] is not None else float('nan'):12.6g} "
                   f"{t['flops_verdict']:>10s} {t.get('other_flops') or 0:8.3g} {t['model_bytes']:12.6g} "
                   f"{t['dram_bytes'] if t['dram_bytes'] is not None else float('nan'):12.6g} "
                   f"{ratio:>6s} {t['dram_verdict']:>11s}")
    reasons = sorted({t["flops_reason"] for t in table if t["flops_verdict"] in ("explained", "not measured")})
    out += [f"explained: {r}" for r in reasons]
    if any(t.get("other_flops") for t in table):
        out.append(f"moves: {MOVES}; exec flops are the benchmark's own precision's (column 'exec flops')")
    out += [f"FINDING: {t['benchmark']}: {t['flops_reason']}" for t in table if t["flops_verdict"] == "FINDING"]
    out += [f"FINDING: {t['benchmark']}: DRAM bytes {si(t['dram_bytes'], 'B')} against the model's "
            f"{si(t['model_bytes'], 'B')}" for t in table if t["dram_verdict"] == "FINDING"]
    for col, counts in summary.items():
        out.append(f"{col.split('_')[0]}: " + ", ".join(f"{n} {v}" for v, n in sorted(counts.items())))
    return "\n".join(out) + "\n"
