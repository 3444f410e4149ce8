"""Comparing two result sets: per benchmark and metric the change of medians against a noise band
(the repetitions' spread, and the run-to-run spread of repeated runs where known), the U test,
and a verdict: regression, improvement, undecided or unchanged; a changed definition (cost per
launch) or an invalid time is never a regression. The method is the compare command's
(commands/compare.py)."""

import math
import re
import statistics
import types

from ..records.results import cost_of, is_higher_better, values_of, values_of_keys
from .stats import mann_whitney_p, min_p, relative_spread

CONTEXT_KEYS = ("device", "driver_version", "runtime_version", "platform_version", "backend", "host",
                "archbench_version")


VERDICTS = ("regression", "improvement", "undecided", "unchanged")  # worst first
COST_TOLERANCE = 0.01  # relative: a recovered (schema 1) cost is a rate x a time


RUNS_FOR_NOISE = 3  # repeated runs from which the run-to-run spread is a noise model of its own


DEFAULTS = {"alpha": 0.05, "min_effect": 0.05, "noise_factor": 3.0, "huge_factor": 3.0, "huge_min": 0.5,
            "filter": None, "across_devices": False}  # the settings of compare() (the command's options)


def settings(**given):
    """The settings compare() takes: DEFAULTS with the given ones."""
    return types.SimpleNamespace(**dict(DEFAULTS, **given))


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
    if args.across_devices and verdict in ("regression", "improvement"):  # a device's change is no regression
        verdict, why = "undecided", f"devices differ ({'slower' if verdict == 'regression' else 'faster'})"
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


def devices_differ(base_ctx, new_ctx):
    """(BASE's devices, NEW's devices) as text where the sides are not of the same device models, else None."""
    b, n = (sorted({str(d) for d in ctx.get("device", [])}) for ctx in (base_ctx, new_ctx))
    return None if b == n else (", ".join(b) or "(none)", ", ".join(n) or "(none)")


def context_diff(base_ctx, new_ctx):
    """[(key, base value, new value)] for the context keys that differ."""
    out = []
    for key in CONTEXT_KEYS:
        b, n = base_ctx.get(key, []), new_ctx.get(key, [])
        if sorted(map(str, b)) != sorted(map(str, n)):
            out.append((key, ", ".join(map(str, b)) or "(none)", ", ".join(map(str, n)) or "(none)"))
    return out
