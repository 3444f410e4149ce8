"""PC sampling's views: the text report (hottest kernels, then their hottest lines), and a
self-contained HTML page of a kernel's source and SASS annotated with samples."""

import os

from .. import cli
from ..analysis.pcsample import count_coverage
from .html import CSS, document
from .topdown import short

SOURCE_TAGS = {"sass_metrics": "sass", "counters": "ctr", "unavailable": "-"}


def top_reasons(stalls, n=3):
    return ", ".join(f"{r} {100 * s:.0f}%" for r, s in list(stalls.items())[:n]) or "-"


def coverage_lines(kernels):
    """The report's plain statement of which kernels have per-line counts ([] where no kernel has
    counts of either kind: no SASS metrics run, no warp pass)."""
    cov = count_coverage(kernels)
    if not cov["per_line"] and not cov["per_kernel_only"]:
        return []

    def names(ks):
        text = ", ".join(short(k, 40) for k in ks[:12]) + (f", ... ({len(ks)} in all)" if len(ks) > 12 else "")
        return text or "none"

    out = ["", f"Per-line instruction counts and warp efficiency (SASS metrics): {len(cov['per_line'])} of "
               f"{len(kernels)} kernels: {names(cov['per_line'])}"]
    if cov["per_kernel_only"]:
        out.append(f"Per-kernel counts only, no per-line figures (warp pass counters): {names(cov['per_kernel_only'])}")
    if cov["none"]:
        out.append(f"No instruction counts: {names(cov['none'])}")
    return out


def fixed_costs_line(context):
    """The sampled run's fixed costs (the library's end record), or "" for an older raw file."""
    parts = []
    if context.get("enable_s") is not None:
        wait = context.get("enable_wait_s")
        parts.append(f"enable {context['enable_s']:.3f} s" + (
            f" ({context.get('pc_enable')}: the first launch waited {wait:.3f} s)" if wait is not None else
            f" ({context['pc_enable']})" if context.get("pc_enable") else ""))
    for key, what in (("first_launch_s", "first launch"), ("exit_drain_s", "drain at exit"), ("disable_s", "disable")):
        if context.get(key) is not None:
            parts.append(f"{what} {context[key]:.3f} s")
    return "PC sampling's fixed costs: " + ", ".join(parts) if parts else ""


def text_report(kernels, context, top=5, lines=8):
    out = []
    if "period_log2" in context:
        out.append(f"PC sampling: {context.get('total_samples', 0)} samples, {context.get('dropped_samples', 0)} dropped; "
                   f"period 2^{context['period_log2']} cycles, continuous collection; {context.get('device', '')}")
    head = (f"{'kernel':<60} {'samples':>9} {'share':>6} {'warps need/have':>15} {'warp eff':>8} {'src':>4} {'inst':>10}"
            "  top stalls")
    out += ["", "Kernels, hottest first:", head, "-" * len(head)]
    for k in kernels:
        lat, ke = k["latency"], k.get("efficiency", {})
        need = f"{lat['warps_needed']:.1f}" if lat.get("warps_needed") else "-"
        have = f"{lat['warps_available']:.1f}" if lat.get("warps_available") is not None else "-"
        eff = f"{ke['warp_efficiency']:.3f}" if ke.get("warp_efficiency") is not None else "-"
        inst = f"{ke['inst_executed']:.3g}" if ke.get("inst_executed") is not None else "-"
        src = SOURCE_TAGS.get(ke.get("source"), "-")
        out.append(f"{short(k['kernel'], 60):<60} {k['samples']:>9} {100 * k['time_share']:>5.1f}% {need + '/' + have:>15} "
                   f"{eff:>8} {src:>4} {inst:>10}  {top_reasons(k['stalls'])}")
    if any(k.get("efficiency", {}).get("source") == "counters" for k in kernels):
        out.append("(warp eff src: sass = CUPTI's SASS metrics, per instruction; ctr = per-kernel counters "
                   "(libarchbench_topdown.so, warp set) where the SASS metrics have no records; line figures "
                   "only from SASS metrics)")
    for k in kernels[:top]:
        if not k["samples"] and not k.get("sass"):
            continue
        out += ["", f"{k['kernel']}: hottest lines"]
        for l in k["lines"][:lines]:
            where = f"{os.path.basename(l['file']) or '?'}:{l['line']}"
            eff = l.get("sass", {}).get("warp_efficiency")
            src = l.get("source")
            out.append(f"  {where:<24} {100 * l['share']:>5.1f}%  {top_reasons(l['stalls']):<48} "
                       f"{'eff ' + format(eff, '.2f') if eff is not None else '':<9} {('| ' + src) if src else ''}")
    if context.get("sass_strategy"):
        n_missing = len(context.get("sass_missing", []))
        target = f", target {context['sass_target']}" if context.get("sass_target") else ""
        n = context.get("sass_runs")
        runs = (f", {n} run{'s' if n != 1 else ''}" + (f" in {context['sass_s']:.3f} s" if "sass_s" in context else "")
                if n else "")
        out += ["", f"SASS metrics (strategy {context['sass_strategy']}{target}{runs}): counts for "
                    f"{context.get('sass_counted', 0)} of {context.get('sass_counted', 0) + n_missing} "
                    f"{'launched' if context.get('sass_functions') is None else 'chosen'} functions, "
                    f"{len(context.get('sass_flush_log', []))} flushes"]
    out += coverage_lines(kernels)
    if context.get("problems"):
        out += ["", "Problems:"] + [f"  {p}" for p in context["problems"]]
    if "overhead" in context:
        out += ["", f"wall time: native {context['native_s']:.3f} s, sampled {context['sampled_s']:.3f} s, "
                    f"overhead {context['overhead']:.2f}x" +
                (f"; SASS metrics {'runs' if context.get('sass_runs', 1) > 1 else 'run'} {context['sass_s']:.3f} s"
                 if "sass_s" in context else "")]
    if fixed_costs_line(context):
        out.append(fixed_costs_line(context))
    return "\n".join(out)


def html_report(kernels, context, top=5):
    """A self-contained page: per kernel its summary, annotated source lines and SASS."""
    e = cli.html
    css = CSS + "\n.bar{display:inline-block;height:9px;background:#c33;vertical-align:middle}pre{margin:0}" \
                "td.src{font-family:monospace;white-space:pre}"
    body = [f"<h1>Where kernels stall: {e(context.get('command', ''))}</h1>",
            f"<p class=note>{e(context.get('device', ''))}; {context.get('total_samples', 0)} samples, period "
            f"2^{e(context.get('period_log2', '?'))} cycles; overhead {e(format(context['overhead'], '.2f') + 'x' if 'overhead' in context else 'not measured')}</p>",
            "<table><tr><th>kernel</th><th>samples</th><th>share</th><th>top stalls</th><th>warps needed</th>"
            "<th>warps held</th><th>warp efficiency</th><th>instructions</th></tr>"]
    for k in kernels:
        lat, ke = k["latency"], k.get("efficiency", {})
        body.append(f"<tr><td>{e(short(k['kernel'], 90))}</td><td class=n>{k['samples']}</td>"
                    f"<td class=n>{100 * k['time_share']:.1f}%</td><td>{e(top_reasons(k['stalls']))}</td>"
                    f"<td class=n>{e(format(lat['warps_needed'], '.1f') if lat.get('warps_needed') else '-')}</td>"
                    f"<td class=n>{e(format(lat['warps_available'], '.1f') if lat.get('warps_available') is not None else '-')}</td>"
                    f"<td class=n>{e(format(ke['warp_efficiency'], '.3f') + ' (' + ke['source'] + ')' if ke.get('warp_efficiency') is not None else '-')}</td>"
                    f"<td class=n>{e(format(ke['inst_executed'], '.3g') if ke.get('inst_executed') is not None else '-')}</td></tr>")
    body.append("</table>")
    for i, k in enumerate(kernels[:top]):
        body.append(f"<section class=chart><h2 id=k{i}>{e(short(k['kernel'], 120))}</h2>")
        lat = k["latency"]
        if lat.get("latency_bound"):
            body.append("<p class=note>latency-bound reasons (share of samples / uncovered): " + e(", ".join(
                f"{r} {100 * v['share']:.1f}%/{100 * v['uncovered_share']:.1f}%" for r, v in lat["latency_bound"].items())) + "</p>")
        body.append("<h3>Source lines</h3><table><tr><th>file:line</th><th>samples</th><th>stalls</th>"
                    "<th>warp eff.</th><th>source</th></tr>")
        for l in sorted(k["lines"], key=lambda l: (l["file"], l["line"])):
            eff = l.get("sass", {}).get("warp_efficiency")
            body.append(f"<tr><td>{e(os.path.basename(l['file']) or '?')}:{l['line']}</td>"
                        f"<td class=n><span class=bar style='width:{int(60 * l['share'])}px'></span> {100 * l['share']:.1f}%</td>"
                        f"<td>{e(top_reasons(l['stalls']))}</td><td class=n>{e(format(eff, '.2f') if eff is not None else '')}</td>"
                        f"<td class=src>{e(l.get('source') or '')}</td></tr>")
        body.append("</table><h3>SASS</h3><table><tr><th>offset</th><th>line</th><th>samples</th><th>stalls</th>"
                    "<th>executed</th><th>warp eff.</th><th>instruction</th></tr>")
        for p in k["pcs"]:
            s = p.get("sass", {})
            body.append(f"<tr><td class=n>{p['pc']:#06x}</td><td class=n>{p['line'] or ''}</td>"
                        f"<td class=n><span class=bar style='width:{int(60 * p['share'])}px'></span> {p['samples']}</td>"
                        f"<td>{e(top_reasons(p['stalls']))}</td><td class=n>{e(s.get('inst_executed', ''))}</td>"
                        f"<td class=n>{e(format(s['warp_efficiency'], '.2f') if s.get('warp_efficiency') is not None else '')}</td>"
                        f"<td class=src>{e(p.get('sass_text') or '')}</td></tr>")
        body.append("</table></section>")
    return document("archbench PC sampling", body, css)
