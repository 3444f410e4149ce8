"""Compare two sets of archbench (Google Benchmark JSON) results and flag regressions.

Usage: archbench_compare.py BASE NEW [--noise RUNS] [--alpha 0.05] [--min-effect 0.05] [--noise-factor 3]
                            [--huge-factor 3] [--huge-min 0.5] [--markdown FILE] [--format console|markdown]
                            [--filter REGEX]

BASE and NEW are result files or folders (every *.json below, merged). The noise model, per
metric, on a log scale (times and rates alike): the noise is the largest relative spread known,
exp(stdev(log x)) - 1, of each side's repetitions and of the per-run medians of repeated runs of
one build: BASE's files when it is a folder of runs, and the noise record (--noise RUNS; by default
the compare-noise/ folder beside a BASE file, e.g. two or more runs recorded with the baseline).
The noise band is max(--min-effect, --noise-factor x noise, the largest ratio between the recorded
runs' medians less one). A change of medians inside the band is "unchanged". Outside it: with a
record of RUNS_FOR_NOISE runs or more, a regression or an improvement; without one, only where the
two-sided Mann-Whitney U test over the repetitions gives p < alpha, or the change is huge (beyond
--huge-factor x the band and --huge-min); otherwise "not enough repetitions to tell" (or "not
significant" where the test could decide). A benchmark whose cost per launch differs between the
sides is "definition changed", never a regression; a zero or missing (NaN) time is an error for
that benchmark. Exit: 0 no regression, 3 regression found, 2 bad input (including nothing
compared, or a benchmark without a valid time and no regression), 1 an internal error. Standard
library only.
"""

import argparse
import re
import sys

from .. import cli
from ..analysis.compare import DEFAULTS, compare, compared, context_diff, devices_differ
from ..cli import EXIT_OK, EXIT_REGRESSION, InputError
from ..records.results import load_side, noise_record
from ..render.compare import render


def parse_args(argv):
    """The command line."""
    p = argparse.ArgumentParser(usage="%(prog)s BASE NEW [--markdown FILE] [--format F] [--filter REGEX] "
                                      "[noise options]",
                                description="Compare two archbench result sets: exit 3 on a regression, 2 on bad "
                                            "input or nothing compared.",
                                epilog="The noise model and the verdicts: tools/README.md.")
    p.add_argument("base", metavar="BASE", help="results JSON file or folder (every *.json below)")
    p.add_argument("new", metavar="NEW", help="results JSON file or folder (every *.json below)")
    p.add_argument("--markdown", metavar="FILE", help="also write the report as Markdown to FILE")
    p.add_argument("--format", choices=("console", "markdown"), default="console", metavar="F",
                   help="stdout: console (default) or markdown")
    p.add_argument("--filter", metavar="REGEX", help="only benchmarks whose name matches REGEX (re.search)")
    p.add_argument("--across-devices", action="store_true",
                   help="compare files of different devices: the changes are shown, no regression counted")
    p.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    noise = p.add_argument_group("noise options")
    noise.add_argument("--noise", metavar="RUNS", help="repeated runs of one build (default: compare-noise/ "
                                                       "beside BASE; '' for none)")
    noise.add_argument("--alpha", type=float, default=DEFAULTS["alpha"], metavar="P",
                       help="U-test significance level (0.05)")
    noise.add_argument("--min-effect", type=float, default=DEFAULTS["min_effect"], metavar="X",
                       help="smallest noise band, relative (0.05)")
    noise.add_argument("--noise-factor", type=float, default=DEFAULTS["noise_factor"], metavar="K",
                       help="noise band = K x the relative noise (3)")
    noise.add_argument("--huge-factor", type=float, default=DEFAULTS["huge_factor"], metavar="K",
                       help="few repetitions: flag a change beyond K x the band (3)")
    noise.add_argument("--huge-min", type=float, default=DEFAULTS["huge_min"], metavar="X",
                       help="... and beyond X, relative (0.5)")
    return p.parse_args(argv)


def run(argv):
    """Run the comparison; returns the exit code or raises InputError."""
    args = parse_args(argv)
    if args.filter:
        try:
            re.compile(args.filter)
        except re.error as e:
            raise InputError(f"--filter: bad regular expression: {e}") from None
    base_ctx, base = load_side(args.base)
    new_ctx, new = load_side(args.new)
    devices = devices_differ(base_ctx, new_ctx)
    if devices and not args.across_devices:
        raise InputError(f"the devices differ: BASE {args.base} is of {devices[0]}, NEW {args.new} of {devices[1]}; "
                         f"compare runs of one device (--across-devices shows the changes, no regression counted)")
    if args.noise is None:
        args.noise = noise_record(args.base)
    noise = load_side(args.noise)[1] if args.noise else None
    report = compare(base, new, args, noise)
    if devices:
        report["devices"] = devices
    report["noise"] = (f"noise: the run-to-run spread of the runs in {args.noise} and of the repetitions"
                       if args.noise else "noise: the spread of the repetitions (and of BASE's runs, where it "
                       "holds several); no compare-noise/ runs beside BASE")
    diff = context_diff(base_ctx, new_ctx)
    sys.stdout.write(render(report, diff, args, args.format == "markdown"))
    if not compared(report):
        raise InputError(f"nothing was compared between {args.base} and {args.new}: "
                         f"{len(set(base) & set(new))} benchmark(s) in common, none with valid times of "
                         f"the same definition")
    if report["invalid"] and not report["regression"]:
        raise InputError(f"{len(report['invalid'])} benchmark(s) without a valid time, e.g. "
                         f"{report['invalid'][0][0]}: {report['invalid'][0][1]}")
    if args.markdown:  # only a run that is not refused replaces the file (exit 2 leaves it)
        cli.write_file(args.markdown, render(report, diff, args, True))
    return EXIT_REGRESSION if report["regression"] else EXIT_OK


def main(argv=None):
    """The command line; returns the exit code."""
    return cli.run("archbench_compare", run, argv)
