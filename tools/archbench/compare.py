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
import math
import os
import re
import statistics
import sys

from . import cli
from .cli import EXIT_OK, EXIT_REGRESSION, InputError, md, term
from .results import cost_of, is_higher_better, load_side, values_of, values_of_keys, write_file
from .stats import mann_whitney_p, min_p, relative_spread

CONTEXT_KEYS = ("device", "driver_version", "runtime_version", "platform_version", "backend", "host",
                "archbench_version")


VERDICTS = ("regression", "improvement", "undecided", "unchanged")  # worst first
COST_TOLERANCE = 0.01  # relative: a recovered (schema 1) cost is a rate x a time


RUNS_FOR_NOISE = 3  # repeated runs from which the run-to-run spread is a noise model of its own


def noise_of(metric, sides):
    """(relative noise, largest run-to-run swing): the largest spread of any side's repetitions or
    of the per-file medians of a side of several runs (BASE as a folder of runs, the --noise runs),
    and the largest ratio between those medians less one, where a side holds RUNS_FOR_NOISE runs
    or more (else None: the noise across runs is not known)."""
    spreads, swing = [0.0], None
    for bench in sides:
        runs = bench.runs.get(metric) or []
        spreads += [relative_spread(bench.samples.get(metric) or []), relative_spread(runs)]
        spreads += bench.cvs.get(metric) or []
        if len(runs) >= RUNS_FOR_NOISE and min(runs) > 0:
            swing = max(swing or 0.0, max(runs) / min(runs) - 1)
    return max(spreads), swing


def compare_metric(metric, base, new, args, noise_bench=None):
    """One metric's comparison: a dict with medians, change, p-value, noise band and verdict."""
    xs, ys = values_of(base, metric), values_of(new, metric)
    mb, mn = statistics.median(xs), statistics.median(ys)
    change = (mn - mb) / abs(mb)
    size = abs(math.log(mn / mb)) if mn > 0 and mb > 0 else math.inf  # times and rates alike
    noise, swing = noise_of(metric, [b for b in (base, new, noise_bench) if b is not None])
    across = swing is not None
    band = max(args.min_effect, args.noise_factor * noise, swing or 0.0)
    powered = len(xs) >= 2 and len(ys) >= 2 and min_p(len(xs), len(ys)) < args.alpha
    p = mann_whitney_p(xs, ys) if len(xs) >= 2 and len(ys) >= 2 else None
    if size <= math.log1p(band) + 1e-12:  # a swing the noise record holds is inside it, rounding aside
        verdict, why = "unchanged", "inside the noise"
    elif across or (powered and p < args.alpha) or size > math.log1p(max(args.huge_factor * band, args.huge_min)):
        worse = change < 0 if is_higher_better(metric) else change > 0
        verdict = "regression" if worse else "improvement"
        why = ("beyond the run-to-run noise" if across else f"p < {args.alpha:g}" if powered and p < args.alpha
               else "huge change, few repetitions")
    else:
        verdict = "undecided"
        why = "not significant" if powered else "not enough repetitions to tell"
    return {"metric": metric, "base": mb, "new": mn, "change": change, "p": p, "verdict": verdict, "why": why,
            "band": band, "n": (len(xs), len(ys))}


def invalid_time(bench, side):
    """Why a side's times cannot be compared (none finite, or zero or negative), or ""."""
    times = values_of(bench, "real_time")
    if not times:
        return f"{side}: no finite time (NaN or missing)"
    if min(times) <= 0:
        return f"{side}: a time of {min(times):g} ns"
    return ""


def comparable_cost(cost):
    """A cost in the terms both schemas have: bytes read and written as one total (a schema-1
    file knows only byte_per_s), zero amounts left out (a schema-2 cost lists every field)."""
    c = dict(cost)
    if "bytes_read" in c or "bytes_written" in c:
        c["bytes"] = c.get("bytes", 0) + c.pop("bytes_read", 0) + c.pop("bytes_written", 0)
    return {k: v for k, v in c.items() if v}


def definition_change(base, new):
    """How the work per launch changed (a changed benchmark definition or cost model), or ""."""
    cb, cn = comparable_cost(cost_of(base)), comparable_cost(cost_of(new))
    changed = [k for k in sorted(set(cb) | set(cn))
               if k not in cb or k not in cn or abs(cb[k] - cn[k]) > COST_TOLERANCE * max(abs(cb[k]), abs(cn[k]))]
    return ", ".join(f"{k} {cb.get(k, 'none'):.6g} -> {cn.get(k, 'none'):.6g}"
                     if k in cb and k in cn else f"{k} {'added' if k in cn else 'removed'}" for k in changed)


def compare(base, new, args, noise=None):
    """Compare every benchmark of both sides (noise: name -> Bench of repeated runs); the report dict."""
    pattern = re.compile(args.filter) if args.filter else None
    names = sorted(set(base) | set(new))
    if pattern:
        names = [n for n in names if pattern.search(n)]
    report = {k: [] for k in VERDICTS + ("definition", "invalid", "missing", "new", "skipped")}
    for name in names:
        b, n = base.get(name), new.get(name)
        if b is None:
            report["new"].append(name)
        elif n is None:
            report["missing"].append(name)
        elif b.error or n.error:
            report["skipped"].append((name, b.error, n.error))
        elif invalid_time(b, "base") or invalid_time(n, "new"):
            report["invalid"].append((name, "; ".join(filter(None, (invalid_time(b, "base"), invalid_time(n, "new"))))))
        elif definition_change(b, n):
            report["definition"].append((name, definition_change(b, n)))
        else:
            metrics = ["real_time"] + sorted(m for m in set(values_of_keys(b)) & set(values_of_keys(n))
                                             if m != "real_time")
            rows = [compare_metric(m, b, n, args, (noise or {}).get(name)) for m in metrics
                    if values_of(b, m) and values_of(n, m) and statistics.median(values_of(b, m))]
            verdicts = {r["verdict"] for r in rows}
            report[next(v for v in VERDICTS if v in verdicts)].append((name, rows))
    for key, sign in (("regression", -1), ("improvement", 1)):  # largest effect first
        report[key].sort(key=lambda item: sign * max_effect(item[1], key))
    return report


def compared(report):
    """How many benchmarks got a verdict from their measurements."""
    return sum(len(report[k]) for k in VERDICTS)


def max_effect(rows, verdict):
    """The largest absolute change among a benchmark's metrics with the given verdict."""
    return -max((abs(r["change"]) for r in rows if r["verdict"] == verdict), default=0.0)


def context_diff(base_ctx, new_ctx):
    """[(key, base value, new value)] for the context keys that differ."""
    out = []
    for key in CONTEXT_KEYS:
        b, n = base_ctx.get(key, []), new_ctx.get(key, [])
        if sorted(map(str, b)) != sorted(map(str, n)):
            out.append((key, ", ".join(map(str, b)) or "(none)", ", ".join(map(str, n)) or "(none)"))
    return out


def fmt_value(metric, v):
    """A metric value for display: times with a unit, rates with an SI prefix."""
    if metric == "real_time":
        for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
            if abs(v) >= scale:
                return f"{v / scale:.4g} {unit}"
        return f"{v:.4g} ns"
    if is_higher_better(metric):
        for prefix, scale in (("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
            if abs(v) >= scale:
                return f"{v / scale:.4g} {prefix}/s"
        return f"{v:.4g} /s"
    return f"{v:.4g}"


def fmt_row(name, r):
    """One table row as strings."""
    p = "-" if r["p"] is None else f"{r['p']:.3g}"
    verdict = LABELS[r["verdict"]] if r["verdict"] == "unchanged" else f"{LABELS[r['verdict']]} ({r['why']})"
    return [name, r["metric"], fmt_value(r["metric"], r["base"]), fmt_value(r["metric"], r["new"]),
            f"{r['change'] * 100:+.1f}%", f"{r['band'] * 100:.1f}%", p, verdict]


HEADER = ["benchmark", "metric", "base median", "new median", "change", "noise band", "p-value", "verdict"]
LABELS = {"regression": "regression", "improvement": "improvement", "undecided": "undecided",
          "unchanged": "unchanged"}
LISTS = (("definition", "definition changed (cost per launch differs: not compared)"),
         ("invalid", "invalid (no valid time: not compared)"),
         ("missing", "missing (in BASE, not in NEW)"), ("new", "new (in NEW, not in BASE)"),
         ("skipped", "skipped (error in either run)"))


def table_rows(report, esc):
    """The rows of the main table: regressions, improvements, then undecided metrics."""
    return [[esc(c) for c in fmt_row(name, r)] for key in ("regression", "improvement", "undecided")
            for name, rows in report[key] for r in rows if r["verdict"] != "unchanged"]


def title(report):
    """The one-line count of every outcome."""
    c = {k: len(v) for k, v in report.items()}
    return (f"{c['regression']} regression(s), {c['improvement']} improvement(s), {c['unchanged']} unchanged, "
            f"{c['undecided']} undecided, {c['definition']} definition(s) changed, {c['invalid']} invalid, "
            f"{c['missing']} missing, {c['new']} new, {c['skipped']} skipped")


def render(report, diff, args, markdown):
    """The whole report as text (console or GitHub Markdown); every name and context value escaped."""
    esc = md if markdown else term
    lines = ["## archbench compare", "", f"**{title(report)}**", ""] if markdown else []
    if diff:
        lines += ["### Contexts differ", ""] if markdown else ["contexts differ:"]
        lines += [f"- {md(key)}: {md(b)} -> {md(n)}" if markdown else f"  {term(key)}: {term(b)} -> {term(n)}"
                  for key, b, n in diff]
        lines.append("")
    rows = table_rows(report, esc)
    if rows:
        if markdown:
            lines += ["| " + " | ".join(HEADER) + " |", "|" + "---|" * 2 + "---:|" * 5 + "---|"]
            lines += ["| " + " | ".join(row) + " |" for row in rows]
        else:
            widths = [max(len(r[i]) for r in rows + [HEADER]) for i in range(len(HEADER))]
            right = {2, 3, 4, 5, 6}
            for row in [HEADER] + rows:
                lines.append("  ".join(c.rjust(w) if i in right else c.ljust(w)
                                       for i, (c, w) in enumerate(zip(row, widths))).rstrip())
        lines.append("")
    lines.append(f"{len(report['unchanged'])} benchmark(s) unchanged (inside their noise band).")
    if report.get("noise"):
        lines.append(esc(report["noise"]) + ".")
    weak = [name for name, rows in report["undecided"] if any(r["why"].startswith("not enough") for r in rows)]
    if weak:
        lines.append(f"{len(weak)} benchmark(s): not enough repetitions to tell (a change beyond the noise band "
                     f"that the U test cannot confirm at these repetition counts; run more "
                     f"--benchmark_repetitions), e.g. {esc(weak[0])}")
    for key, label in LISTS:
        if report[key]:
            lines += ["", f"### {label[0].upper()}{label[1:]}", ""] if markdown else ["", f"{label}:"]
            for item in report[key]:
                if key == "skipped":
                    name, be, ne = item
                    item = (name, "; ".join(f"{side}: {msg}" for side, msg in (("base", be), ("new", ne)) if msg))
                text = f"{esc(item[0])}: {esc(item[1])}" if isinstance(item, tuple) else esc(item)
                lines.append(f"- {text}" if markdown else f"  {text}")
    verdict = "REGRESSION" if report["regression"] else "no regression"
    lines += ["", f"**Result: {verdict}** ({title(report)})" if markdown else f"result: {verdict} ({title(report)})"]
    return "\n".join(lines) + "\n"


def parse_args(argv):
    """The command line."""
    p = argparse.ArgumentParser(description="Compare two archbench result sets (Google Benchmark JSON); "
                                            "exit 3 on a regression, 2 on bad input or nothing compared.")
    p.add_argument("base", metavar="BASE", help="results JSON file or folder (every *.json below)")
    p.add_argument("new", metavar="NEW", help="results JSON file or folder (every *.json below)")
    p.add_argument("--noise", metavar="RUNS", help="repeated runs of one build (a folder or file): their "
                                                   "run-to-run spread joins the noise model (default: the "
                                                   "compare-noise/ folder beside a BASE file, if any; '' for none)")
    p.add_argument("--alpha", type=float, default=0.05, help="U-test significance level (default 0.05)")
    p.add_argument("--min-effect", type=float, default=0.05,
                   help="smallest noise band: relative change of medians (default 0.05 = 5%%)")
    p.add_argument("--noise-factor", type=float, default=3.0,
                   help="the noise band is this times the relative noise (default 3)")
    p.add_argument("--huge-factor", type=float, default=3.0,
                   help="without enough repetitions for the U test, a change beyond this times the band "
                        "(and --huge-min) is still flagged (default 3)")
    p.add_argument("--huge-min", type=float, default=0.5, help="see --huge-factor (default 0.5 = 50%%)")
    p.add_argument("--markdown", metavar="FILE", help="also write the report as Markdown to FILE")
    p.add_argument("--format", choices=("console", "markdown"), default="console", help="stdout format")
    p.add_argument("--filter", metavar="REGEX", help="only benchmarks whose name matches REGEX (re.search)")
    p.add_argument("--debug", action="store_true", help="show the traceback of a failure")
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
    if args.noise is None:
        args.noise = noise_record(args.base)
    noise = load_side(args.noise)[1] if args.noise else None
    report = compare(base, new, args, noise)
    report["noise"] = (f"noise: the run-to-run spread of the runs in {args.noise} and of the repetitions"
                       if args.noise else "noise: the spread of the repetitions (and of BASE's runs, where it "
                       "holds several); no compare-noise/ runs beside BASE")
    diff = context_diff(base_ctx, new_ctx)
    sys.stdout.write(render(report, diff, args, args.format == "markdown"))
    if args.markdown:
        write_file(args.markdown, render(report, diff, args, True))
    if not compared(report):
        raise InputError(f"nothing was compared between {args.base} and {args.new}: "
                         f"{len(set(base) & set(new))} benchmark(s) in common, none with valid times of "
                         f"the same definition")
    if report["regression"]:
        return EXIT_REGRESSION
    if report["invalid"]:
        raise InputError(f"{len(report['invalid'])} benchmark(s) without a valid time, e.g. "
                         f"{report['invalid'][0][0]}: {report['invalid'][0][1]}")
    return EXIT_OK


def noise_record(base):
    """The repeated runs kept with a baseline file: compare-noise/ beside it (or holding it), or None."""
    folder = os.path.dirname(os.path.abspath(base))
    if os.path.basename(folder) != "compare-noise":
        folder = os.path.join(folder, "compare-noise")
    return folder if os.path.isfile(base) and os.path.isdir(folder) else None


def main(argv=None):
    """The command line; returns the exit code."""
    return cli.run("archbench_compare", run, argv)
