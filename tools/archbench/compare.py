"""Compare two sets of archbench (Google Benchmark JSON) results and flag regressions.

Usage: archbench_compare.py BASE NEW [--alpha 0.05] [--min-effect 0.05] [--noise-factor 2.0]
                            [--markdown FILE] [--format console|markdown] [--filter REGEX]

BASE and NEW are result files or folders (every *.json below, merged). A metric changed
significantly when the two-sided Mann-Whitney U test over the repetitions gives p < alpha,
the relative change of medians exceeds --min-effect, and it exceeds noise-factor times the
larger coefficient of variation of the two sides. Exit: 0 no regression, 1 regression,
2 bad input. Standard library only.
"""

import argparse
import math
import re
import statistics
import sys

from .results import InputError, is_higher_better, load_side, values_of, values_of_keys, write_file
from .stats import cv_of, mann_whitney_p

CONTEXT_KEYS = ("device", "driver_version", "runtime_version", "platform_version", "backend", "host",
                "archbench_version")


def compare_metric(metric, base, new, args):
    """One metric's comparison: a dict with medians, change, p-value, verdict and no-stats flag."""
    xs, ys = values_of(base, metric), values_of(new, metric)
    mb, mn = statistics.median(xs), statistics.median(ys)
    if mb:
        change = (mn - mb) / abs(mb)
    else:
        change = 0.0 if mn == mb else math.copysign(math.inf, mn - mb)
    no_stats = len(xs) < 2 or len(ys) < 2
    p = None if no_stats else mann_whitney_p(xs, ys)
    noise = args.noise_factor * max(cv_of(base, metric), cv_of(new, metric))
    significant = (no_stats or p < args.alpha) and abs(change) > args.min_effect and abs(change) > noise
    verdict = "unchanged"
    if significant:
        worse = change < 0 if is_higher_better(metric) else change > 0
        verdict = "regression" if worse else "improvement"
    return {"metric": metric, "base": mb, "new": mn, "change": change, "p": p, "verdict": verdict,
            "no_stats": no_stats, "n": (len(xs), len(ys))}


def compare(base, new, args):
    """Compare every benchmark of both sides; returns the report dict."""
    pattern = re.compile(args.filter) if args.filter else None
    names = sorted(set(base) | set(new))
    if pattern:
        names = [n for n in names if pattern.search(n)]
    report = {"regression": [], "improvement": [], "unchanged": [], "missing": [], "new": [], "skipped": []}
    for name in names:
        b, n = base.get(name), new.get(name)
        if b is None:
            report["new"].append(name)
        elif n is None:
            report["missing"].append(name)
        elif b.error or n.error:
            report["skipped"].append((name, b.error, n.error))
        else:
            metrics = ["real_time"] + sorted(m for m in set(values_of_keys(b)) & set(values_of_keys(n))
                                             if m != "real_time")
            rows = [compare_metric(m, b, n, args) for m in metrics
                    if values_of(b, m) and values_of(n, m)]
            verdicts = {r["verdict"] for r in rows}
            verdict = next((v for v in ("regression", "improvement") if v in verdicts), "unchanged")
            report[verdict].append((name, rows))
    for key, sign in (("regression", -1), ("improvement", 1)):  # largest effect first
        report[key].sort(key=lambda item: sign * max_effect(item[1], key))
    return report


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
    change = "n/a" if math.isinf(r["change"]) else f"{r['change'] * 100:+.1f}%"
    p = "-" if r["p"] is None else f"{r['p']:.3g}"
    verdict = r["verdict"] + (" (no-stats)" if r["no_stats"] else "")
    return [name, r["metric"], fmt_value(r["metric"], r["base"]), fmt_value(r["metric"], r["new"]), change, p,
            verdict]


HEADER = ["benchmark", "metric", "base median", "new median", "change", "p-value", "verdict"]


def table_rows(report):
    """The rows of the main table: regressions first, then improvements."""
    return [fmt_row(name, r) for key in ("regression", "improvement") for name, rows in report[key] for r in rows]


def underpowered(report, alpha):
    """Names whose repetition counts make p < alpha unreachable for the exact U test."""
    out = []
    for key in ("regression", "improvement", "unchanged"):
        for name, rows in report[key]:
            n1, n2 = rows[0]["n"] if rows else (0, 0)
            if n1 >= 2 and n2 >= 2 and 2 / math.comb(n1 + n2, n1) >= alpha:
                out.append(name)
    return out


def render(report, diff, args, markdown):
    """The whole report as text (console or GitHub Markdown)."""
    lines = []
    counts = {k: len(v) for k, v in report.items()}
    title = (f"{counts['regression']} regression(s), {counts['improvement']} improvement(s), "
             f"{counts['unchanged']} unchanged, {counts['missing']} missing, {counts['new']} new, "
             f"{counts['skipped']} skipped")
    if markdown:
        lines += ["## archbench compare", "", f"**{title}**", ""]
    if diff:
        lines.append("### Contexts differ" if markdown else "contexts differ:")
        if markdown:
            lines.append("")
        for key, b, n in diff:
            lines.append(f"- `{key}`: {md(b)} -> {md(n)}" if markdown else f"  {key}: {b} -> {n}")
        lines.append("")
    rows = table_rows(report)
    if rows:
        if markdown:
            lines += ["| " + " | ".join(HEADER) + " |", "|" + "---|" * 2 + "---:|" * 4 + "---|"]
            lines += ["| " + " | ".join(md(c) for c in row) + " |" for row in rows]
        else:
            widths = [max(len(r[i]) for r in rows + [HEADER]) for i in range(len(HEADER))]
            right = {2, 3, 4, 5}
            for row in [HEADER] + rows:
                lines.append("  ".join(c.rjust(w) if i in right else c.ljust(w)
                                       for i, (c, w) in enumerate(zip(row, widths))).rstrip())
        lines.append("")
    lines.append(f"{counts['unchanged']} benchmark(s) unchanged.")
    weak = underpowered(report, args.alpha)
    if weak:
        lines.append(f"note: {len(weak)} benchmark(s) have too few repetitions for the U test to reach "
                     f"p < {args.alpha:g} (run more repetitions), e.g. {weak[0]}")
    for key, label in (("missing", "missing (in BASE, not in NEW)"), ("new", "new (in NEW, not in BASE)")):
        if report[key]:
            lines += ["", f"### {label[0].upper()}{label[1:]}" if markdown else f"{label}:"]
            if markdown:
                lines.append("")
            lines += [f"- `{n}`" if markdown else f"  {n}" for n in report[key]]
    if report["skipped"]:
        lines += ["", "### Skipped (error in either run)" if markdown else "skipped (error in either run):"]
        if markdown:
            lines.append("")
        for name, be, ne in report["skipped"]:
            why = "; ".join(f"{side}: {msg}" for side, msg in (("base", be), ("new", ne)) if msg)
            lines.append(f"- `{name}`: {md(why)}" if markdown else f"  {name}: {why}")
    verdict = "REGRESSION" if report["regression"] else "no regression"
    lines += ["", f"**Result: {verdict}** ({title})" if markdown else f"result: {verdict} ({title})"]
    return "\n".join(lines) + "\n"


def md(text):
    """Text made safe for a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def parse_args(argv):
    """The command line."""
    p = argparse.ArgumentParser(description="Compare two archbench result sets (Google Benchmark JSON); "
                                            "exit 1 on a regression, 2 on bad input.")
    p.add_argument("base", metavar="BASE", help="results JSON file or folder (every *.json below)")
    p.add_argument("new", metavar="NEW", help="results JSON file or folder (every *.json below)")
    p.add_argument("--alpha", type=float, default=0.05, help="U-test significance level (default 0.05)")
    p.add_argument("--min-effect", type=float, default=0.05,
                   help="minimum relative change of medians (default 0.05 = 5%%)")
    p.add_argument("--noise-factor", type=float, default=2.0,
                   help="change must exceed this times the larger CV of the runs (default 2.0)")
    p.add_argument("--markdown", metavar="FILE", help="also write the report as Markdown to FILE")
    p.add_argument("--format", choices=("console", "markdown"), default="console", help="stdout format")
    p.add_argument("--filter", metavar="REGEX", help="only benchmarks whose name matches REGEX (re.search)")
    return p.parse_args(argv)


def main(argv=None):
    """Run the comparison; returns the exit code."""
    args = parse_args(argv)
    try:
        if args.filter:
            try:
                re.compile(args.filter)
            except re.error as e:
                raise InputError(f"--filter: bad regular expression: {e}") from None
        base_ctx, base = load_side(args.base)
        new_ctx, new = load_side(args.new)
        report = compare(base, new, args)
        diff = context_diff(base_ctx, new_ctx)
        sys.stdout.write(render(report, diff, args, args.format == "markdown"))
        if args.markdown:
            write_file(args.markdown, render(report, diff, args, True))
    except InputError as e:
        print(f"archbench_compare: error: {e}", file=sys.stderr)
        return 2
    return 1 if report["regression"] else 0

