"""The node health verdict (analysis/health.py) as console text: the failures first, named."""

from .variability import fmt


def _value(c):
    if c["ratio"] is None:
        return str(c["value"])
    metric = c["why"].split()[0]
    return f"{fmt(metric, c['value'])} (x{c['ratio']:.3f} of {fmt(metric, c['reference'])}, at least x{c['limit']:g})"


def render(v):
    lines = []
    for c in v["failed"]:
        lines.append(f"FAIL {c['subject']}: {c['figure']}: {_value(c)}: {c['why']}")
    for r in v["failed_runs"]:
        lines.append(f"FAIL {r['gpu']}: its run failed (exit {r['status']}) {r['error']}".rstrip())
    passed = [s for s in v["subjects"] if s not in v["failed_subjects"]]
    lines.append(f"{len(v['subjects'])} GPUs and links checked ({len(v['checks'])} checks): "
                 f"{len(v['failed_subjects'])} failed, {len(passed)} passed")
    for s in passed:
        lines.append(f"PASS {s}")
    return "\n".join(lines)


def render_ways(w):
    """Which figures differ between the two ways (analysis/health.ways), the ones beyond tolerance first."""
    t = w["wall_seconds"]
    lines = [f"every GPU at once: {t['concurrent'] or 0:.1f} s; one after another: {t['serial'] or 0:.1f} s"
             + (f" ({t['concurrent'] / t['serial']:.2f} of it)" if t["concurrent"] and t["serial"] else ""),
             f"figures at once over one after another (higher better; beyond {w['tolerance']:.0%} marked *):"]
    for r in sorted(w["per_benchmark"], key=lambda r: (not r["differs"], r["name"])):
        lines.append(f"  {'*' if r['differs'] else ' '} {r['name']:<56} x{r['median_ratio']:.3f} "
                     f"(x{r['min_ratio']:.3f} to x{r['max_ratio']:.3f} over {r['gpus']} GPUs)")
    return "\n".join(lines)
