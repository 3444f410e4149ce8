"""The program command's table: each kernel's time, attained rate, intensities, bound and how far
below it."""

from ..cli import si
from .topdown import short


def table(placed):
    """The per-kernel table of the placed rows (analysis.program.place)."""
    head = f"{'kernel':44s} {'launches':>8s} {'time %':>7s} {'prec':>6s} {'FLOP/s':>11s} " \
           f"{'AI L1':>7s} {'AI L2':>7s} {'AI DRAM':>7s} {'bound':>10s} {'of bound':>8s}"
    out = [head, "-" * len(head)]
    for p in placed:
        name, use = p["bound"], p["of_bound"]
        ai = [f"{p['ai'][lv]:7.3g}" if lv in p["ai"] else f"{'-':>7s}" for lv in ("L1", "L2", "DRAM")]
        out.append(f"{short(p['kernel'], 44):44s} {p['launches']:>8} {100 * p['time_share']:>6.1f}% "
                   f"{p['precision'] or '-':>6s} {si(p['flop_per_s'], 'FLOP/s') if p['flop_per_s'] else '-':>11s} "
                   f"{' '.join(ai)} {name or '-':>10s} {f'{100 * use:.1f}%' if use is not None else '-':>8s}")
    return "\n".join(out)
