"""Seed 002 section 2.1's figure: the best rate of each geometry search, with its geometry.

Usage: archbench_search.py RESULTS [RESULTS ...]   (files or folders of archbench JSON)

archbench --sweep=full runs compute/<backend>/mad/<type>/search/items:I/group:G for work-items
I = 1024..524288 and work-group sizes G = 32..256, as the seed searched. This prints, for each
backend, op and type, the best median flop_per_s over every (I, G), and the I and G that
reached it, then the worst, so the spread of the search shows. Standard library only.
"""
import sys

from ..records import results as ar


def best_of_searches(benches):
    """{(backend, op, type): [(rate, items, group), ...] sorted best first} over the search benchmarks."""
    found = {}
    for bench in benches.values():
        axes = bench.axes or {}
        if axes.get("family") != "compute" or axes.get("study") != "search":
            continue
        rate = ar.median_of(bench, "flop_per_s") or ar.median_of(bench, "op_per_s")
        if rate is None:
            continue
        key = (str(axes.get("backend")), str(axes.get("op")), str(axes.get("type")))
        found.setdefault(key, []).append((rate, int(axes["items"]), int(axes["group"])))
    return {key: sorted(rows, reverse=True) for key, rows in found.items()}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    try:
        _, benches = ar.load_side(argv)
    except ar.InputError as e:
        print(f"archbench_search: {e}", file=sys.stderr)
        return 2
    best = best_of_searches(benches)
    if not best:
        print("archbench_search: no compute/.../search/ benchmark in " + " ".join(argv), file=sys.stderr)
        return 2
    print(f"{'benchmark':32} {'best GFLOP/s':>13} {'items':>7} {'group':>5} {'worst GFLOP/s':>14} {'points':>6}")
    for (backend, op, vtype), rows in sorted(best.items()):
        rate, items, group = rows[0]
        print(f"{f'compute/{backend}/{op}/{vtype}':32} {rate / 1e9:13.2f} {items:7d} {group:5d} "
              f"{rows[-1][0] / 1e9:14.2f} {len(rows):6d}")
    return 0

