"""The instructions of each kernel's timed loop, from its SASS.

Usage: python3 -m archbench sass DUMP... [--json FILE]

DUMP: files or folders of `cuobjdump -sass` listings (*.sass), as written beside the cubins that
ARCHBENCH_DUMP_DIR saves (a listing's <stem>.options, the kernel's NVRTC options, names its
specialisation: -DT=float -DW=4 ...). For every function, the innermost loops (a backward branch
and the instructions from its target to it) and, per loop, each opcode's count: what the loop
really issues per trip of its unrolled body, to set beside what the cost model counts (an FFMA is
one FMA of 32 lanes; IADD3, ISETP and BRA are the loop's own overhead). Exit 2 on bad input.
Standard library only.
"""

import argparse
import json

from .. import cli
from ..analysis.sass import analyse
from ..records.sass import listings


def run(argv):
    ap = argparse.ArgumentParser(prog="archbench sass", description=__doc__.split("\n\n")[0])
    ap.add_argument("dumps", nargs="+", help="cuobjdump -sass listings or folders of them")
    ap.add_argument("--json", help="also write the loops as JSON here")
    args = ap.parse_args(argv)
    rows = analyse(listings(args.dumps))
    for r in rows:
        ops = ", ".join(f"{k} {v}" for k, v in r["opcodes"].items())
        print(f"{r['function']} [{r['options']}] loop {r['loop'][0]}-{r['loop'][1]}: {r['instructions']} instructions: {ops}")
    if args.json:
        cli.write_file(args.json, json.dumps(rows, indent=1))
    return cli.EXIT_OK


def main(argv=None):
    """The command line; returns the exit code."""
    return cli.run("archbench sass", run, argv)
