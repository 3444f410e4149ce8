"""The report's page: each chart drawn (matplotlib) as a data URI, and the HTML of every section:
facts, headline, seeds' tables, compare and history views, the charts."""

import math
import os
import re

from ..analysis import compare, history
from ..analysis.nodeview import link_matrices
from ..analysis.report import FACTS, SEED_CAPTIONS, SEED_TABLES, Panel, Plot, charts_of, headline, seed_table
from ..analysis.roofline import size
from ..cli import html as escape, si
from ..records import results as ar
from ..records.published import SEEDS
from . import charts
from . import compare as rc, history as rh, roofline as rr
from .html import data_uri, document, img, table
from .nodeview import node_html

# ---------------------------------------------------------------- drawing

COLORS = [c for c in ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                      "#bcbd22", "#17becf", "#393b79", "#ad494a", "#637939", "#8c6d31", "#7b4173", "#3182bd")]
MARKERS = "osD^v<>ph*"
WIDE = 50  # a range of values wider than this factor is drawn on a log scale


def wide(values):
    values = [v for v in values if v is not None and v > 0]
    return bool(values) and max(values) / min(values) > WIDE


def count(v):
    """A count on a log-2 axis: 64, 4 Ki, 16 Mi."""
    for unit, scale in (("Gi", 1024 ** 3), ("Mi", 1024 ** 2), ("Ki", 1024)):
        if v >= scale and v % scale == 0:
            return f"{v / scale:g} {unit}"
    return f"{v:g}"


def grid_of(n):
    cols = min(3, n)
    return math.ceil(n / cols), cols


def size_of(plot):
    """The figure size (inches) of a plot."""
    n = len(plot.panels)
    rows, cols = grid_of(n)
    bars_tall = max((len(p.categories) * max(1, len(p.series)) ** 0.5 for p in plot.panels
                     if p.kind != "line"), default=0)
    height = max(4.2, 0.24 * bars_tall + 1.4) if bars_tall else 4.4
    return (11 if cols == 1 else 5.4 * cols, height * rows)


def draw_panels(axes, panels):
    """The renderer: each Panel on its axis."""
    from matplotlib.ticker import EngFormatter, FixedLocator, FuncFormatter, NullLocator, PercentFormatter
    for axis, p in zip(axes, panels):
        if p.kind == "line":
            ys = [y for _, _, s in p.series for y in s]
            for i, (label, xs, s) in enumerate(p.series):
                axis.plot(xs, s, marker=MARKERS[i % len(MARKERS)], ms=4, lw=1.5,
                          color=COLORS[i % len(COLORS)], label=label)
            for label, xs, s in p.refs:
                axis.plot(xs, s, "--", color="#999", lw=1, label=label if label not in
                          [line.get_label() for line in axis.get_lines()[:-1]] else "_")
            if p.xbytes or p.logx:
                axis.set_xscale("log", base=2)
                xs = [x for _, sx, _ in p.series for x in sx if x > 0]
                if xs:
                    # ticks at powers of two a float holds (an axis value may be near 1.8e308)
                    lo, hi = math.floor(math.log2(min(xs))), min(math.ceil(math.log2(max(xs))), 1023)
                    step = max(1, math.ceil((hi - lo) / (4 if len(axes) > 1 else 8)))
                    axis.xaxis.set_major_locator(FixedLocator([2.0 ** e for e in range(lo, hi + 1, step)]))
                    axis.xaxis.set_minor_locator(NullLocator())
                axis.xaxis.set_major_formatter(FuncFormatter(lambda v, _: size(v) if p.xbytes
                                                             else count(v)))
            log = wide(ys) if p.logy is None else p.logy
            if log:
                axis.set_yscale("log")
            elif ys:
                axis.set_ylim(0, max(ys) * 1.1 or 1)
            axis.yaxis.set_major_formatter(EngFormatter())  # the unit is in the label
            for x, text in p.marks:
                lo, hi = axis.get_xlim()
                if lo <= x <= hi or not p.series:
                    axis.axvline(x, ls="--", color="#555", lw=0.9)
                    axis.text(x, 0.98, " " + text, rotation=90, va="top", ha="right", fontsize=7, color="#333",
                              transform=axis.get_xaxis_transform())
            if any(label for label, _, _ in p.series) or p.refs:
                axis.legend(fontsize=7, ncol=1 + len(p.series) // 12)
        else:
            n = max(1, len(p.series))
            height = 0.8 / n
            for i, (label, vals) in enumerate(p.series):
                ypos = [k - 0.4 + height * (i + 0.5) for k in range(len(p.categories))]
                if p.kind == "stacked":
                    left = [sum(s[1][k] for s in p.series[:i]) for k in range(len(p.categories))]
                    axis.barh(range(len(p.categories)), vals, left=left, color=COLORS[i % len(COLORS)], label=label)
                else:
                    axis.barh(ypos, [v or 0 for v in vals], height=height, color=COLORS[i % len(COLORS)],
                              label=label or "_")
            axis.set_yticks(range(len(p.categories)), p.categories, fontsize=7)
            axis.set_ylim(len(p.categories) - 0.4, -0.6)  # the first category on top
            if p.kind == "stacked":
                axis.set_xlim(0, 1)
                axis.xaxis.set_major_formatter(PercentFormatter(1.0))
                axis.legend(fontsize=7, loc="lower right", ncol=len(p.series))
            else:
                values = [v for _, vals in p.series for v in vals if v]
                if min(values, default=0) < 0:  # changes: both signs, plain numbers
                    axis.set_xlim(min(0, min(values) * 1.1), max(0, max(values) * 1.1))
                    axis.axvline(0, color="#333", lw=0.8)
                elif wide(values):
                    axis.set_xscale("log")
                    axis.xaxis.set_major_formatter(EngFormatter())
                elif values:
                    axis.set_xlim(0, max(values) * 1.1)
                    axis.xaxis.set_major_formatter(EngFormatter())
                if len(p.series) > 1:
                    axis.legend(fontsize=7)
        axis.set_title(p.title, fontsize=10)
        axis.set_xlabel(p.xlabel)
        if p.kind == "line":
            axis.set_ylabel(p.ylabel)
        axis.grid(True, which="major", alpha=0.3)
    if panels:
        axes[0].figure.tight_layout()


def image_of(plot, fmt):
    """(data URI, None) of a plot, or (None, why not)."""
    if plot.energy:
        return data_uri(rr.energy_svg(*plot.energy).encode(), "svg"), None
    if plot.roofline:
        data, why = charts.render(lambda axis: rr.draw(axis, *plot.roofline), fmt, size=(10, 7))
    else:
        data, why = charts.render(lambda axes: draw_panels(axes, plot.panels), fmt, size=size_of(plot),
                                  grid=grid_of(len(plot.panels)))
    if data is None:
        return None, why
    return data_uri(data, fmt), None


def sections(page, fmt):
    """[(anchor, title, caption, image URI or None, why not drawn, notes)] of every chart."""
    out = []
    for chart, plot, good, failed in charts_of(page):
        title = chart.title + (f": {plot.title}" if plot.title and len(plot.panels) != 1 or plot.roofline
                               or plot.energy else "")
        if plot.panels and len(plot.panels) == 1 and plot.title:
            plot.panels[0].title = plot.panels[0].title or plot.title
        uri, why = image_of(plot, fmt)
        notes = list(plot.notes)
        notes.append(f"{len(good)} benchmark(s)" + (f"; {len(failed)} failed or skipped, left out (e.g. "
                                                      f"{failed[0].name}: {failed[0].error})" if failed else ""))
        anchor = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")
        while anchor in {s[0] for s in out}:
            anchor += "-2"
        out.append((anchor, title, chart.caption, uri, why, notes))
    return out


def fmt_value(value, unit):
    if value is None:
        return "-"
    if unit == "us":
        return f"{value * 1e-3:.3g} us"
    return si(value, unit)


def seed_tables_html(page):
    """Every seed table of SEED_TABLES as a section: [(anchor, title, html lines)]."""
    out = []
    for key in SEED_TABLES:
        seed = SEEDS[key]
        header, rows = seed_table(page, key)
        first = 2 + sum(len(v) for v in seed["rows"][0]["values"].values())
        html = table(header, rows, numeric=[i for i in range(2, len(header)) if i != first])
        html.append(f"<p class=note>{escape(seed['reference'])}; seeds/{escape(seed['file'])}. "
                    f"{escape(seed['hosts'])}. Published peaks: {escape(seed['published_peaks'])}.</p>")
        anchor, title, caption = SEED_CAPTIONS[key]
        out.append((anchor, title, [f"<p>{escape(caption)}</p>"] + html))
    return out


# ---------------------------------------------------------------- HTML

def facts_html(page):
    keys = [k for k in FACTS if any(k in r.context for r in page.runs)]
    rows = [[k] + [", ".join(map(str, r.facts.get(k, []))) for r in page.runs] for k in keys]
    rows.append(["files"] + [", ".join(os.path.relpath(f) if not os.path.isabs(r.arg) else f for f in r.files)
                             for r in page.runs])
    return table(["fact"] + [r.label for r in page.runs], rows)


def headline_html(page):
    per_run = [headline(r) for r in page.runs]
    keys = list(dict.fromkeys((g, lab) for figs, _ in per_run for g, lab, *_ in figs))
    rows = []
    for group, lab in keys:
        cells = []
        for figs, _ in per_run:
            f = next((f for f in figs if (f[0], f[1]) == (group, lab)), None)
            if f is None:
                cells.append("-")
                continue
            text = fmt_value(f[2], f[3])
            if f[4]:
                text += f" ({f[2] / f[4]:.0%} of {fmt_value(f[4], f[3])})"
            cells.append(text)
        rows.append([group, lab] + cells)
    out = table(["", "figure"] + [r.label for r in page.runs], rows, numeric=range(2, 2 + len(page.runs)))
    sources = [f"{r.label}: {tb['source']}" for r, (_, tb) in zip(page.runs, per_run) if tb]
    out.append("<p class=note>Medians over repetitions; peaks are the best over widths and backends. Limits: "
               + (escape("; ".join(sources)) if sources else "no published limits known for this device (the "
                  "roofline tool's textbook table)") + ".</p>")
    return out


def compare_html(page, fmt):
    """archbench_compare's verdicts of every later run against the first, with a chart of the changes."""
    base = page.runs[0]
    noise_dir = ar.noise_record(base.files[0]) if len(base.files) == 1 else None
    noise = ar.load_side(noise_dir)[1] if noise_dir else None
    runs = f" and the runs in {escape(os.path.relpath(noise_dir))}" if noise_dir else ""
    out = [f"<p class=note>Noise: the repetitions' spread{runs} (archbench_compare.py's model and defaults).</p>"]
    for run in page.runs[1:]:
        devices = compare.devices_differ({"device": [base.context.get("device")]}, {"device": [run.context.get("device")]})
        report = compare.compare(base.benches, run.benches, compare.settings(across_devices=bool(devices)), noise)
        out.append(f"<h3>{escape(run.label)} against {escape(base.label)}</h3>")
        if devices:
            out.append(f"<p>Devices differ ({escape(devices[0])}, {escape(devices[1])}): compared across devices, "
                       f"no regression counted.</p>")
        out.append(f"<p>{escape(rc.title(report))}</p>")
        diff = compare.context_diff({k: [v] for k, v in base.context.items()}, {k: [v] for k, v in run.context.items()})
        if diff:
            out += table(["context", "base", "new"], diff)
        rows = rc.table_rows(report, str)
        if rows:
            out += table(rc.HEADER, rows[:200], numeric=(2, 3, 4, 5, 6))
        changes = sorted(((name, r["change"], key) for key in compare.VERDICTS for name, rs in report[key]
                          for r in rs if r["metric"] == "real_time"), key=lambda c: -abs(c[1]))[:40]
        if changes:
            cats = [c[0] for c in changes]
            series = [(v, [c[1] * 100 if c[2] == v else None for c in changes])
                      for v in compare.VERDICTS if any(c[2] == v for c in changes)]
            plot = Plot(panels=[Panel(kind="bars", categories=cats, series=series,
                                      xlabel="change of the median time (%)")])
            uri, why = image_of(plot, fmt)
            out.append(img(uri, why, "changes of the median time"))
            out.append("<p class=note>The 40 largest changes of the median time, coloured by verdict (a time "
                       "that grows is a slowdown).</p>")
    return out


def history_html(page, fmt):
    """archbench_history's headline figures, a row per run in date order, and its charts."""
    runs = sorted(page.runs, key=lambda r: history.run_time(r.context))
    groups = [(f"run {page.runs.index(r) + 1}", str(r.context.get("runtime_version", "?")),
               str(r.context.get("archbench_version", "?")), str(r.context.get("date", ""))[:10], len(r.files),
               history.headlines(r.benches)) for r in runs]
    cols = history.chart_columns(groups)
    out = table(["run", "date"] + [lab for _, lab, _ in cols],
                [[f"{g[0]}: {r.label}", g[3]] + [rh.fmt(g[-1].get(k)) for k, _, _ in cols]
                 for g, r in zip(groups, runs)],
                numeric=range(2, 2 + len(cols)))
    if cols:
        devices = ", ".join(dict.fromkeys(str(r.context.get("device", "")) for r in runs))
        data, why = charts.render(lambda axis: history_chart(axis, groups, devices), fmt,
                                  size=(12, 3.6 * math.ceil(len(cols) / 3) + 1))
        uri = data_uri(data, fmt) if data else None
        out.append(img(uri, why, "history"))
    return out


def history_chart(axis, groups, device):
    """archbench_history's panels, each from 0 (rates and latencies) with SI ticks."""
    from matplotlib.ticker import EngFormatter
    figure = axis.figure
    rh.draw_chart(axis, groups, device)
    for panel in figure.axes:
        if panel.get_visible() and panel.has_data():
            panel.set_ylim(0, panel.get_ylim()[1] * 1.1)
            panel.yaxis.set_major_formatter(EngFormatter())
    figure.tight_layout()


def page_html(page, fmt, title):
    parts = sections(page, fmt)
    body = [f"<h1>{escape(title)}</h1>",
            "<p class=note>Written by tools/archbench_report.py from the files listed under the device facts; "
            "values are medians over repetitions.</p>", "<nav>"]
    seeds = seed_tables_html(page)
    extra = [("facts", "Device facts"), ("headline", "Headline")] + [(a, t) for a, t, _ in seeds]
    if len(page.runs) > 1:
        extra += [("compare", "Compare"), ("history", "History")]
    body += [f'<a href="#{a}">{escape(t)}</a>' for a, t in extra + [(s[0], s[1]) for s in parts]]
    body += ["</nav>", '<section id="facts"><h2>Device facts</h2>'] + facts_html(page) + ["</section>"]
    body += ['<section id="headline"><h2>Headline</h2>'] + headline_html(page) + ["</section>"]
    for anchor, name, lines in seeds:
        body += [f'<section id="{anchor}"><h2>{escape(name)}</h2>'] + lines + ["</section>"]
    for n, (run, table) in enumerate(page.nodes):  # a node's run: each GPU its own column, outliers marked
        body += [f'<section id="node{n}"><h2>Node: {escape(run.arg)}</h2>'] + node_html(*table, link_matrices(run)) \
            + ["</section>"]
    links = [(r, m) for r in page.runs if not r.context.get("gpu") for m in [link_matrices(r)] if m]
    for n, (run, matrices) in enumerate(links):  # the peer family's links, pair by pair
        body += [f'<section id="links{n}"><h2>Links: {escape(run.label)}</h2>'] + node_html([], [], [], matrices) \
            + ["</section>"]
    if len(page.runs) > 1:
        body += ['<section id="compare" class="chart"><h2>Compare</h2>'] + compare_html(page, fmt) + ["</section>"]
        body += ['<section id="history" class="chart"><h2>History</h2>'] + history_html(page, fmt) + ["</section>"]
    for anchor, name, caption, uri, why, notes in parts:
        body.append(f'<section id="{anchor}" class="chart"><h2>{escape(name)}</h2><figure>{img(uri, why, name)}'
                    f"<figcaption>{escape(caption)}</figcaption></figure>")
        body += [f"<p class=note>{escape(n)}</p>" for n in notes]
        body.append("</section>")
    return document(title, body)
