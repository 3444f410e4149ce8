"""One self-contained HTML page of archbench results: device facts, the headline table, a chart for
every family, the roofline, TopDown and energy, and with several runs the compare and history views.

Usage: archbench_report.py RUN [RUN ...] -o report.html [--format svg|png] [--title TEXT]

A RUN is a results file, a folder (every results *.json below it, merged), or several files joined
by commas (one run recorded in parts: cuda-quick.json,cuda-peaks.json). Files of schema 1 are
converted as every tool does. Each benchmark's value is its median over repetitions (the median
aggregate rows when present, else the median of the iteration rows); failed benchmarks are left
out of the charts and counted under their chart. With several runs, every chart draws each run
(its label in the legend), the headline and facts tables have a column per run, and the compare
view (archbench_compare's verdicts, the first run as the base) and the history view
(archbench_history's headline figures) are added.

The page holds everything it shows (charts as SVG or PNG data URIs, inline CSS, no script, nothing
fetched). Charts: matplotlib (Agg); where it is not importable the page is still written with its
tables, and each chart says why it is missing. Headline figures stand beside the device's
published limits where the roofline tool knows them (its textbook table). Seed tables: a seed's
published figures (seeds.json beside this file) beside the best median of the benchmarks
SEED_TABLES maps each row to, "not measured" where the run has none (seed 002 Table 4).

Charts are table-driven: CHARTS lists (family, title, which rows, kind of chart, caption); rows no
entry takes get a generic bar chart of their family. Exit: 0 written, 2 bad input (a malformed,
foreign or unreadable file, no benchmarks, an output that cannot be written), 1 internal error.
"""

import argparse
import os
import sys

from .. import cli
from ..analysis.nodeview import node_table, node_units, per_gpu
from ..analysis.report import Page, label_runs, read_run
from ..records import results as ar
from ..render import charts
from ..render.report import page_html

TOOL = "archbench_report"


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="One self-contained HTML page of archbench results: device facts, the headline table, a "
                    "chart for every family (roofline, TopDown, energy included), and with several runs the "
                    "compare and history views. Exit 0 written, 2 bad input.",
        epilog="A RUN is a results file, a folder (its *.json results, merged) or files joined by commas (one run "
               "recorded in parts). Several RUNs: each chart draws every run; the compare view takes the first "
               "as the base.")
    p.add_argument("runs", nargs="+", metavar="RUN", help="results file, folder, or FILE,FILE... of one run")
    p.add_argument("-o", "--output", required=True, metavar="FILE.html", help="the page to write")
    p.add_argument("--format", choices=("svg", "png"), default="svg", help="chart images (default svg)")
    p.add_argument("--title", help="page title (default: the runs' labels)")
    return p.parse_args(argv)


def run(argv):
    args = parse_args(argv)
    runs, nodes = [], []
    for arg in args.runs:  # a node's run (several GPUs) stands GPU by GPU: never a median over GPUs
        run = read_run(arg, len(runs))
        units = node_units(run)
        split = per_gpu(run, len(runs), units)
        nodes += [(run, node_table(run, units))] if len(split) > 1 else []
        runs += split
    if not any(r.rows for r in runs):
        raise ar.InputError(f"{', '.join(args.runs)}: no benchmarks in the results")
    label_runs(runs)
    page = Page(runs, len({r.axes.get("backend") for run in runs for r in run.rows}), nodes)
    if charts.pyplot()[0] is None:
        print(f"{TOOL}: warning: {charts.pyplot()[1]}: the page has tables only", file=sys.stderr)
    title = args.title or "archbench report: " + " vs ".join(r.label for r in runs)
    cli.write_file(args.output, page_html(page, args.format, title))
    print(f"wrote {args.output} ({os.path.getsize(args.output) / 1e6:.2f} MB, {len(runs)} run(s))")
    return 0


def main(argv=None):
    return cli.run(TOOL, run, argv)
