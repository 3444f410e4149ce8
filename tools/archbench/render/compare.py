"""A comparison (analysis/compare.py) as console text or GitHub Markdown."""

from ..cli import md, term
from ..analysis.compare import VERDICTS
from ..records.results import is_higher_better


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
    c = {k: len(report[k]) for k in VERDICTS + tuple(key for key, _ in LISTS)}
    return (f"{c['regression']} regression(s), {c['improvement']} improvement(s), {c['unchanged']} unchanged, "
            f"{c['undecided']} undecided, {c['definition']} definition(s) changed, {c['invalid']} invalid, "
            f"{c['missing']} missing, {c['new']} new, {c['skipped']} skipped")


def render(report, diff, args, markdown):
    """The whole report as text (console or GitHub Markdown); every name and context value escaped."""
    esc = md if markdown else term
    lines = ["## archbench compare", "", f"**{title(report)}**", ""] if markdown else []
    if report.get("devices"):  # the first line: nothing below is a regression
        lines.insert(0, f"devices differ: BASE {esc(report['devices'][0])}, NEW {esc(report['devices'][1])}: "
                        f"compared across devices, no regression counted")
        lines.insert(1, "")
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
