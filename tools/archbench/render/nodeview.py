"""A node's section of the report (analysis/nodeview.py): each GPU its own column, the outliers
marked; each link kind a matrix, the low pairs marked."""

from ..cli import html as escape
from .variability import fmt

SLOW = ' style="background:#f4c7c3;font-weight:bold"'
FAST = ' style="background:#d9ead3"'


def _cell(text, style=""):
    return f"<td class=n{style}>{escape(text)}</td>"


def node_html(gpus, rows, slow, matrices):
    """The section's HTML lines."""
    out = []
    if rows:
        head = "".join(f"<th>{escape(g)}</th>" for g in gpus)
        out.append(f"<table><tr><th>benchmark</th>{head}</tr>")
        for r in rows:
            cells = "".join(_cell("-") if v is None else
                            _cell(fmt(r["metric"], v) + (f" ({m})" if m else ""), SLOW if m == "slow" else FAST if m else "")
                            for v, m in zip(r["values"], r["marks"]))
            out.append(f"<tr><td>{escape(r['name'])}</td>{cells}</tr>")
        out.append("</table>")
        out.append("<p class=note>Each GPU's median over its repetitions; an outlier of the variability test "
                   "(modified z beyond 3.5, three GPUs or more) is marked slow (red) or fast (green).</p>")
    for g in slow:
        out.append(f"<p><b>Slow GPU: {escape(g['gpu'])}</b>: a slow outlier on {g['slow_on']} of {g['tested']} "
                   "benchmarks.</p>")
    for kind, (ids, cells) in matrices.items():
        head = "".join(f"<th>to GPU {d}</th>" for d in ids)
        out.append(f"<h3>{escape(kind)} (GB/s, row: source)</h3><table><tr><th></th>{head}</tr>")
        for s in ids:
            row = "".join(_cell("-") if (s, d) not in cells else
                          _cell(f"{cells[(s, d)][0]:.1f}", SLOW if cells[(s, d)][1] else "") for d in ids)
            out.append(f"<tr><th>GPU {s}</th>{row}</tr>")
        out.append("</table>")
    if matrices:
        out.append("<p class=note>A pair marked red is below 0.9 of its kind's median.</p>")
    return out
