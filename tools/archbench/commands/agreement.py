"""Measured traffic (archbench --traffic): the bytes each launch moved at each level and the
operations it executed by precision, checked against the cost model (the agreement table) and
turned into roofline points (archbench_roofline.py draws them; archbench_program.py places any CUDA program).

  python3 -m archbench agreement RESULTS [RESULTS ...] [--json FILE]

The agreement table, for every benchmark with traffic counters: executed flops of the benchmark's
own precision (SASS counts, FMA as two, tensor-path ops) against the cost model's flops, exact, or
the difference counted exactly (the dot's reduction, EXTRA) or with the known reason it cannot be
(fp16 counted in a kernel of another precision, or of none outside the half families, are the
compiler's HFMA2 moves, shown apart); and, where the family streams every byte from device memory once, DRAM bytes (read + write)
against the cost model's bytes within 5%. Anything else that disagrees is a FINDING: the kernel
or the model is wrong. Exit 0 when printed (findings included), 2 on bad input.
"""
import argparse
import json
import sys

from .. import cli
from ..analysis.traffic import DRAM_TOLERANCE, agreement, measured
from ..render.traffic import text_table

TOOL = "archbench_agreement"


def main(argv=None):
    return cli.run(TOOL, run, argv)


def run(argv):
    ap = argparse.ArgumentParser(description="The cost model checked by the hardware: executed flops and DRAM "
                                             "bytes (archbench --traffic) against each benchmark's cost.")
    ap.add_argument("results", nargs="+", metavar="RESULTS", help="results files or folders")
    ap.add_argument("--json", metavar="FILE", help="write the table as JSON here")
    a = ap.parse_args(argv)
    context, rows = measured(a.results)
    if not rows:
        raise cli.InputError(f"{', '.join(a.results)}: no benchmark has traffic counters (run archbench with "
                             f"--traffic on a CUDA GPU; the context's traffic says why a run has none: "
                             f"{context.get('traffic', 'not recorded')})")
    table, summary = agreement(rows)
    sys.stdout.write(f"agreement of the cost model with the hardware on {context.get('device', '?')} "
                     f"({len(table)} benchmarks; traffic counters: {context.get('traffic', '?')})\n")
    sys.stdout.write(text_table(table, summary))
    if context.get("traffic_missing") not in (None, "none"):
        print(f"not measured on this chip: {context['traffic_missing']}")
    if a.json:
        cli.write_file(a.json, json.dumps({"device": context.get("device"), "traffic": context.get("traffic"),
                                          "tolerance": DRAM_TOLERANCE, "rows": table, "summary": summary},
                                         indent=1) + "\n")
    return 0
