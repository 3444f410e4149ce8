"""The timeline's views: the text report (level 1 of the run, the kernels and launches, what the
sampling covered and cost), the JSON document, and the evolution chart (matplotlib, else plain SVG)."""

import os

from ..cli import html as escape
from ..analysis.timeline import add_into, level1
from .charts import svg_open, write
from .topdown import short

ORDER = ["retire", "divergence", "frontend", "backend", "stall_other", "stall"]
COLORS = {"retire": "#2ca02c", "divergence": "#9467bd", "frontend": "#1f77b4", "backend": "#d62728",
          "stall_other": "#ff7f0e", "stall": "#ff7f0e", "idle": "#dddddd"}
KERNEL_COLORS = ["#8c564b", "#e377c2", "#bcbd22", "#17becf", "#393b79", "#637939", "#843c39", "#7b4173"]  # not level 1's
CHART_POINTS = 3000  # samples drawn at most (more are merged)
COVERAGE_WARN = 0.8  # samples covering less of the run are warned of (healthy runs: 0.90-1.00 on an H100)


def cost_lines(c):
    """The overhead taken apart: the sampled run's wall time against the native one's, and the
    library's own timings (library_costs; spawn_ns / exit_ns: the command's own clock, the same
    CLOCK_MONOTONIC as the library's)."""
    k = c.get("costs") or {}
    lines = []
    if "native_s" in c and "sampled_s" in c:
        lines.append(f"overhead: {c['sampled_s'] - c['native_s']:+.3f} s over the native run ({c['native_s']:.3f} s -> "
                     f"{c['sampled_s']:.3f} s, {c['sampled_s'] / c['native_s']:.2f}x); the library's own times:")
    elif k:
        lines.append("the library's own times:")
    if c.get("sampler"):
        return lines + sampler_cost_lines(c, k)
    if "spawn_ns" in c and c.get("process_start_ns"):
        lines.append(f"  {(c['process_start_ns'] - c['spawn_ns']) * 1e-9:.3f} s from the start until the program's "
                     "cuInit loaded the library (the native run has its own)")
    if "injection_init_s" in k:
        lines.append(f"  {k['injection_init_s']:.3f} s the library's initialisation (in the program's cuInit)")
    if "first_launch_wait_s" in k:
        how = c.get("start") or ""
        lines.append(f"  {k['first_launch_wait_s']:.3f} s the first launch waited for the sampling to start "
                     f"({how or k.get('first_launch_trigger', '')})")
    if "setup_s" in k:
        waits = ("cu_init", "waited_for_context")  # the library's thread waiting for the driver, for a context
        sp = k.get("setup_parts_s") or {}
        parts = ", ".join(f"{n} {v:.3f}" for n, v in sp.items() if v >= 0.0005 and n not in waits)
        waited = ", ".join(f"{n} {v:.3f}" for n, v in sp.items() if v >= 0.0005 and n in waits)
        lines.append(f"  {k['setup_s']:.3f} s the setup's work" + (" (on the library's thread, beside the program)"
                                                                    if not str(c.get("start", "")).startswith("sync")
                                                                    else "") + (f": {parts}" if parts else "")
                     + (f" (it also waited: {waited})" if waited else ""))
    if "host_object_s" in k:
        lines.append(f"  {k['host_object_s']:.3f} s building the host object that evaluates the samples (on a "
                     "thread of its own: the cached config image started the sampling without it"
                     + (f"; {k['set_aside']} samples decoded before it was there waited for it" if k.get("set_aside")
                        else "") + ")" + (f"; it failed: {k['host_object_error']}" if k.get("host_object_error") else ""))
    if "exit_s" in k:
        parts = ", ".join(f"{n} {v:.3f}" for n, v in (k.get("exit_parts_s") or {}).items() if v >= 0.0005)
        lines.append(f"  {k['exit_s']:.3f} s at the end" + (f": {parts}" if parts else ""))
    if "exit_ns" in c and c.get("end_ns"):
        lines.append(f"  {(c['exit_ns'] - c['end_ns']) * 1e-9:.3f} s from the end record until the program had exited "
                     "(CUDA's and CUPTI's teardown; the native run has its own)")
    if "decode_s" in k:
        lines.append(f"  {k['decode_s']:.3f} s decoding on the library's thread ({k.get('decodes', 0)} decodes, the "
                     f"longest {1e3 * k.get('decode_max_s', 0):.1f} ms)")
    return lines


def sampler_cost_lines(c, k):
    """cost_lines' times where archbench_pmsampler sampled: its setup and decoding ran in its own
    process, before and beside the program; the program carried the kernel records."""
    lines = []
    sp = {n: v for n, v in (k.get("setup_parts_s") or {}).items() if v >= 0.0005 and n != "cu_init"}
    if "sampler_ready_s" in c:
        lines.append(f"  {c['sampler_ready_s']:.3f} s archbench_pmsampler took to start sampling, before the program "
                     "started" + (f" (setup {k['setup_s']:.3f} s: " + ", ".join(f"{n} {v:.3f}" for n, v in sp.items())
                                   + ")" if "setup_s" in k else ""))
    if "injection_init_s" in k:
        lines.append(f"  {k['injection_init_s']:.3f} s the library's initialisation in the program (kernel records only)")
    if "exit_s" in k:
        lines.append(f"  {k['exit_s']:.3f} s at the program's end (the last kernel records)")
    if "decode_s" in k:
        lines.append(f"  {k['decode_s']:.3f} s decoding, in archbench_pmsampler's process ({k.get('decodes', 0)} decodes, "
                     f"the longest {1e3 * k.get('decode_max_s', 0):.1f} ms)")
    if "sampler_stop_s" in c:
        lines.append(f"  {c['sampler_stop_s']:.3f} s after the program had exited, archbench_pmsampler's last decode and end"
                     + (f" ({k['sampler_exit_s']:.3f} s of it its library's)" if "sampler_exit_s" in k else ""))
    if "samples_outside_program" in c:
        lines.append(f"  {c['samples_outside_program']} samples from before the program started or after it ended left out")
    return lines

# ------------------------------------------------------------------------------ text and JSON

def table(rows, quantities, first="kernel"):
    cols = quantities
    head = (f"{first:<44} {'launches':>8} {'GPU time':>10} {'samples':>8} "
            + " ".join(f"{c[:10]:>10}" for c in cols))
    out = [head, "-" * len(head)]
    for r in rows:
        t = f"{r['gpu_time_s'] * 1e3:8.3f} ms" if r.get("gpu_time_s") else f"{'-':>10}"
        n = f"{r['samples']:8.1f}" if "samples" in r else f"{'-':>8}"
        vals = " ".join(f"{r[c]:>10.3f}" if isinstance(r.get(c), float) else f"{'-':>10}" for c in cols)
        out.append(f"{short(str(r[first]), 44):<44} {r.get('launches', 0):>8} {t} {n} {vals}")
    return "\n".join(out)


def text_report(res, by_invocation=False):
    c, q = res["context"], res["quantities"]
    lines = []
    if not q:
        b = c.get("before_sampling") or {}
        if b.get("launches") and not res["errors"]:
            return (f"no PM sampling took place: the program's {b['launches']} kernels ({1e3 * b['gpu_time_s']:.3f} ms) "
                    "ran, and it exited, before the sampling had started (0.3 s after the library loaded on an H100, more "
                    "on a chip's first run, which searches its counters); without --no-wait the first launch waits for it")
        return "no PM sampling took place" + (": " + "; ".join(res["errors"]) if res["errors"] else
                                              " (the program launched no kernel)")
    span = (c["last_s"] - c["first_s"]) if c["samples"] else 0.0
    lines.append(f"TopDown level 1 over time: CUPTI PM sampling (one pass, no replay) on {c.get('device_name') or '?'}"
                 f" ({c.get('chip')}); fractions of IPC_MAX (4 warp-instructions per SM per cycle)")
    lines.append(f"sampling interval {c['interval_ns'] / 1e3:g} us ({c.get('trigger')}): {c['samples']} samples over "
                 f"{span:.3f} s, {c['active_samples']} with instructions executed"
                 + (f"; {c['lost']} lost" if c.get("lost") else "")
                 + ("; the hardware buffer overflowed" if c.get("overflow") else "")
                 + (f"; {c['empty']} records without time of their own left out" if c.get("empty") else ""))
    for ch in c.get("interval_changes") or []:
        lines.append(f"  from {ch['at_s']:.3f} s every {ch['interval_ns'] / 1e3:g} us: {ch['why']}; restarted after "
                     f"{1e3 * ch['gap_s']:.0f} ms without samples" + (f" (it failed: {ch['error']})" if ch["error"] else ""))
    cov = c.get("coverage") or {}
    if cov and cov["share"] < COVERAGE_WARN:
        lines.append(f"  warning: the samples cover {cov['covered_s']:.3f} s of the {cov['window_s']:.3f} s from the first "
                     f"sample to the program's end ({100 * cov['share']:.0f}%; the last ends at {cov['last_sample_s']:.3f} s): "
                     "the level 1 shown is of that part only (another tool using the GPU's performance monitors, such "
                     "as a second timeline or Nsight, stops the sampling)")
        if c.get("empty"):
            lines.append("  CUPTI decodes about one sample per 100 us, so a busy run longer than about half a second "
                         "outgrows the counter-data image, and the records decoded into a full image carry no time "
                         "of their own" + ("; the sampler restarted slower (above)" if c.get("interval_changes") else "")
                         + ": sample less often from the start (--interval-us 1000 covered 98% of a 5.5 s run on an "
                         "H100) or give the image room (ARCHBENCH_PM_MAX_SAMPLES=16384 covered all of it, with 760 MB "
                         "of host memory and 5 s of decoding after the program)")
    measured = res.get("measured_quantities", q)
    lines.append(f"level 1 from one pass: {', '.join(measured)} ({len(c['metrics'])} counters: "
                 f"{', '.join(c['metrics'])}; chosen by {c.get('selection')})")
    for n in c.get("notes", []):
        lines.append(f"  note: {n}")
    for n in c.get("approximations", []):
        lines.append(f"  approximated: {n}")
    if c.get("stall_split"):
        lines.append(f"  approximated: {c['stall_split']['approximation']}")
    if c.get("not_collected"):
        lines.append("  not in the pass: " + ", ".join(sorted(c["not_collected"])))
    lines.append(f"kernels from: {res['kernel_source']}; sample times: {c.get('sample_clock')}")
    b = c.get("before_sampling") or {}
    if b.get("launches"):
        lines.append(f"  before the sampling started: {b['launches']} launches ({1e3 * b['gpu_time_s']:.3f} ms, "
                     f"{100 * b['gpu_share']:.1f}% of the kernels' GPU time) ran unsampled (--no-wait: the launches "
                     "did not wait for the start)")
    if c.get("trouble"):
        lines.append(f"  at the end: {c['trouble']}")
    lines.append("")
    lines.append(table(res["kernels"] + [res["total"]], q))
    if by_invocation and res["invocations"]:
        lines.append("\nBy launch (seed 004 figure 5.5):")
        rows = [dict(r, kernel=f"{short(r['kernel'], 36)} #{r['invocation']}", launches=1,
                     gpu_time_s=r["end_s"] - r["start_s"]) for r in res["invocations"]]
        lines.append(table(rows, q))
    return "\n".join(lines)


def json_doc(res):
    doc = {k: res[k] for k in ("context", "errors", "quantities", "total", "kernels", "invocations", "launches",
                               "kernel_source")}
    doc["measured_quantities"] = res.get("measured_quantities", res["quantities"])
    doc["samples"] = [{"start_s": s["start_s"], "end_s": s["end_s"], **(s["level1"] or {"idle": True})}
                      for s in res["samples"]]
    return doc


# ------------------------------------------------------------------------------ the chart

def chart_samples(res, limit=CHART_POINTS):
    """The samples as drawn: at most `limit`, consecutive ones merged (their counters summed) where
    there are more; a stall shared out by --stall-split is merged weighting each sample by its
    active cycles."""
    samples = res["samples"]
    step = -(-len(samples) // limit) if samples else 1
    if step <= 1:
        return samples
    measured = res.get("measured_quantities", res["quantities"])
    extra = [k for k in res["quantities"] if k not in measured or k == "stall"] if "measured_quantities" in res else []
    out = []
    for i in range(0, len(samples), step):
        group, c = samples[i:i + step], {}
        for s in group:
            add_into(c, s["counters"])
        l1 = level1(c, measured, res["stall_class"])
        if l1 and extra:
            w = {k: sum(s["counters"].get("cycles", 0.0) * (s["level1"] or {}).get(k, 0.0) for s in group)
                 for k in extra}
            st, total = l1.pop("stall", 0.0), sum(w.values())
            l1.update({k: st * v / total if total > 0 else 0.0 for k, v in w.items()})
        out.append({"start_s": group[0]["start_s"], "end_s": group[-1]["end_s"], "level1": l1})
    return out


def series(samples, quantities):
    """(x edges, {quantity: [value per sample]}, idle per sample) for a step chart."""
    q = [k for k in ORDER if k in quantities]
    xs = [s["start_s"] for s in samples]
    ys = {k: [(s["level1"] or {}).get(k, 0.0) for s in samples] for k in q}
    idle = [0.0 if s["level1"] else 1.0 for s in samples]
    return xs, ys, idle


def kernel_spans(res):
    """{kernel: [(start_s, end_s)]} of the kernel records, the kernels by GPU time first."""
    spans = {}
    for r in res["invocations"]:
        spans.setdefault(r["kernel"], []).append((r["start_s"], r["end_s"]))
    order = [k["kernel"] for k in res["kernels"] if k["kernel"] in spans]
    return {k: spans[k] for k in order}


def title_of(res, title):
    c = res["context"]
    return title or (f"TopDown level 1 over time: {os.path.basename(c.get('command', '').split(' ')[0]) or 'program'} "
                     f"on {c.get('device_name') or 'the GPU'} (PM sampling every {c['interval_ns'] / 1e3:g} us)")


def draw(axis, res, title=None):
    samples = chart_samples(res)
    xs, ys, idle = series(samples, res["quantities"])
    if not xs:
        axis.text(0.5, 0.5, "no samples", ha="center")
        return
    ends = [s["end_s"] for s in samples]
    x = xs + [ends[-1]]
    low = [0.0] * len(xs)
    for k, v in list(ys.items()) + [("idle", idle)]:
        high = [a + b for a, b in zip(low, v)]
        axis.fill_between(x, low + low[-1:], high + high[-1:], step="post", color=COLORS[k], linewidth=0,
                          label="idle (no instruction)" if k == "idle" else k)
        low = high
    spans = kernel_spans(res)
    for n, (name, sp) in enumerate(spans.items()):
        color = KERNEL_COLORS[n] if n < len(KERNEL_COLORS) else "#999999"
        axis.broken_barh([(a, b - a) for a, b in sp], (-0.11, 0.08), color=color,
                         label=f"kernel {short(name, 40)}" if n < len(KERNEL_COLORS) else None)
    if not spans and res["launches"]:
        axis.vlines([l["t_s"] for l in res["launches"]], -0.11, -0.03, color="#555555", linewidth=0.5,
                    label="kernel launches (host time)")
    axis.set_xlim(x[0], x[-1])
    marked = bool(spans or res["launches"])
    axis.set_ylim(-0.13 if marked else 0, 1.0)
    axis.set_yticks(([-0.07] if marked else []) + [0, 0.25, 0.5, 0.75, 1.0])
    axis.set_yticklabels((["kernels"] if marked else []) + ["0", "0.25", "0.5", "0.75", "1"])
    axis.set_xlabel("time since the program started (s)")
    axis.set_ylabel("fraction of IPC_MAX")
    axis.set_title(title_of(res, title), fontsize=10)
    axis.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    axis.figure.tight_layout()


def plain_svg(res, title=None):
    """The same chart as plain SVG (standard library only)."""
    x0, y0, w, h = 70, 50, 760, 380
    out = svg_open(x0 + w + 260, y0 + h + 110)
    out.append(f'<text x="{x0}" y="28" font-size="14">{escape(title_of(res, title))}</text>')
    samples = chart_samples(res)
    xs, ys, idle = series(samples, res["quantities"])
    if not xs:
        return "\n".join(out + ['<text x="100" y="100">no samples</text>', "</svg>"]) + "\n"
    t0, t1 = xs[0], samples[-1]["end_s"]
    span = (t1 - t0) or 1.0

    def px(t):
        return x0 + (t - t0) / span * w

    def py(v):
        return y0 + h - v * h

    ends = [s["end_s"] for s in samples]
    low = [0.0] * len(xs)
    legend = []
    for k, v in list(ys.items()) + [("idle", idle)]:
        high = [a + b for a, b in zip(low, v)]
        top = [f"{px(a):.1f},{py(hv):.1f} {px(b):.1f},{py(hv):.1f}" for a, b, hv in zip(xs, ends, high)]
        bottom = [f"{px(b):.1f},{py(lv):.1f} {px(a):.1f},{py(lv):.1f}" for a, b, lv in reversed(list(zip(xs, ends, low)))]
        out.append(f'<polygon fill="{COLORS[k]}" stroke="none" points="{" ".join(top + bottom)}"/>')
        legend.append((COLORS[k], "idle (no instruction)" if k == "idle" else k))
        low = high
    out.append(f'<rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="none" stroke="#999"/>')
    for v in (0, 0.25, 0.5, 0.75, 1.0):
        out.append(f'<text x="{x0 - 6}" y="{py(v) + 4:.1f}" text-anchor="end">{v:g}</text>')
    for i in range(6):
        t = t0 + span * i / 5
        out.append(f'<text x="{px(t):.1f}" y="{y0 + h + 52}" text-anchor="middle">{t:.3g}</text>')
    out.append(f'<text x="{x0 + w / 2}" y="{y0 + h + 72}" text-anchor="middle">time since the program started (s)</text>')
    out.append(f'<text x="18" y="{y0 + h / 2}" text-anchor="middle" transform="rotate(-90 18 {y0 + h / 2})">'
               f'fraction of IPC_MAX</text>')
    spans = kernel_spans(res)
    for n, (name, sp) in enumerate(spans.items()):
        color = KERNEL_COLORS[n] if n < len(KERNEL_COLORS) else "#999999"
        for a, b in sp:
            out.append(f'<rect x="{px(a):.1f}" y="{y0 + h + 8}" width="{max(px(b) - px(a), 0.5):.1f}" height="14" '
                       f'fill="{color}"/>')
        if n < len(KERNEL_COLORS):
            legend.append((color, f"kernel {short(name, 34)}"))
    if not spans:
        for l in res["launches"]:
            out.append(f'<line x1="{px(l["t_s"]):.1f}" y1="{y0 + h + 8}" x2="{px(l["t_s"]):.1f}" y2="{y0 + h + 22}" '
                       f'stroke="#555"/>')
        if res["launches"]:
            legend.append(("#555555", "kernel launches (host time)"))
    for i, (color, label) in enumerate(legend):
        ly = y0 + 10 + 18 * i
        out.append(f'<rect x="{x0 + w + 15}" y="{ly - 9}" width="12" height="12" fill="{color}"/>')
        out.append(f'<text x="{x0 + w + 32}" y="{ly + 1}">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_chart(path, res, title=None):
    """The evolution chart at path (PNG or SVG; matplotlib, else plain SVG): None, or why not."""
    return write(path, lambda axis: draw(axis, res, title), lambda: plain_svg(res, title))
