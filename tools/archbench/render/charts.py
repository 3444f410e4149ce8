"""One chart renderer: a chart drawn on a matplotlib axis where matplotlib is importable (PNG or
SVG by the file's name), else, for an SVG, the tool's plain SVG text (standard library only).
ARCHBENCH_CHARTS=svg forces the plain SVG (and makes a PNG unwritable), as where matplotlib is
missing; plain SVG pieces (document, log-log axes) live here too."""

import math
import os
import sys
from ..cli import InputError, html as escape, label, si, write_file

FORCE_ENV = "ARCHBENCH_CHARTS"


def pyplot():
    """(matplotlib.pyplot on the Agg backend, None), or (None, why it cannot be used)."""
    if os.environ.get(FORCE_ENV) == "svg":
        return None, f"matplotlib not used ({FORCE_ENV}=svg)"
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        return None, f"matplotlib is not importable by {sys.executable} ({e}); install python3-matplotlib"
    return plt, None


def write(path, draw, plain_svg=None):
    """Write a chart to path, a PNG where its name ends in .png, else an SVG: draw(axis) with
    matplotlib where importable, else plain_svg() (SVG text); returns None, or why nothing was written."""
    fmt = "png" if path.lower().endswith(".png") else "svg"
    plt, why = pyplot()
    if plt is None:
        if plain_svg is None or fmt == "png":
            return why
        data = plain_svg()
    else:
        data, why = render(draw, fmt, dpi=120)
        if data is None:
            return why
    try:
        write_file(path, data)
    except InputError as e:
        return str(e)
    return None


def render(draw, fmt="svg", size=(10, 7), grid=None, dpi=100):
    """A chart as bytes (SVG or PNG) with matplotlib: (bytes, None), or (None, why) where matplotlib
    is not importable. draw(axis) gets the one axis, or with grid=(rows, columns) the list of that
    many axes (the unused ones are hidden when draw leaves them empty)."""
    import io
    plt, why = pyplot()
    if plt is None:
        return None, why
    if grid:
        fig, axes = plt.subplots(*grid, figsize=size, squeeze=False)
        axes = list(axes.flat)
    else:
        fig, axes = plt.subplots(figsize=size)
    try:
        draw(axes)
        safe_labels(fig)
        for axis in axes if grid else ():
            if not axis.has_data():
                axis.set_visible(False)
        out = io.BytesIO()
        with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": "archbench"}):  # text stays text
            fig.savefig(out, format=fmt, dpi=dpi, metadata={"Date": None} if fmt == "svg" else None)
    finally:
        plt.close(fig)
    return out.getvalue(), None


def safe_labels(fig):
    """Every text of a figure made safe (cli.label): names and context values reach titles, legends,
    annotations and tick labels; a control character would make the SVG invalid."""
    from matplotlib.text import Text
    from matplotlib.ticker import FixedFormatter
    for text in fig.findobj(Text):
        text.set_text(label(text.get_text()))
    for axis in fig.axes:
        for one in (axis.xaxis, axis.yaxis):
            formatter = one.get_major_formatter()
            if isinstance(formatter, FixedFormatter):  # tick labels given as text: set again at each draw
                formatter.seq = [label(s) for s in formatter.seq]


def svg_open(width, height):
    """The first lines of a plain SVG document on a white background."""
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'font-family="sans-serif" font-size="11">', f'<rect width="{width}" height="{height}" fill="white"/>']


class LogLog:
    """Log-log axes in an SVG: data -> pixel."""

    def __init__(self, xlim, ylim, x0=80, y0=50, w=760, h=500):
        self.xl, self.yl = [math.log10(v) for v in xlim], [math.log10(v) for v in ylim]
        self.x0, self.y0, self.w, self.h = x0, y0, w, h

    def x(self, v):
        return self.x0 + (math.log10(v) - self.xl[0]) / (self.xl[1] - self.xl[0]) * self.w

    def y(self, v):
        return self.y0 + self.h - (math.log10(v) - self.yl[0]) / (self.yl[1] - self.yl[0]) * self.h

    def slope_deg(self):
        """The on-screen angle of a line of slope 1 (bandwidth diagonals)."""
        dx = self.w / (self.xl[1] - self.xl[0])
        dy = self.h / (self.yl[1] - self.yl[0])
        return -math.degrees(math.atan2(dy, dx))

    def frame(self, xlabel, ylabel, title):
        out = [f'<rect x="{self.x0}" y="{self.y0}" width="{self.w}" height="{self.h}" fill="none" stroke="#999"/>',
               f'<text x="{self.x0}" y="28" font-size="15">{escape(title)}</text>',
               f'<text x="{self.x0 + self.w / 2}" y="{self.y0 + self.h + 40}" text-anchor="middle">'
               f'{escape(xlabel)}</text>',
               f'<text x="20" y="{self.y0 + self.h / 2}" text-anchor="middle" '
               f'transform="rotate(-90 20 {self.y0 + self.h / 2})">{escape(ylabel)}</text>']
        for e in range(math.ceil(self.xl[0]), math.floor(self.xl[1]) + 1):
            px = self.x(10 ** e)
            out.append(f'<line x1="{px:.1f}" y1="{self.y0}" x2="{px:.1f}" y2="{self.y0 + self.h}" stroke="#eee"/>')
            out.append(f'<text x="{px:.1f}" y="{self.y0 + self.h + 16}" text-anchor="middle">{10.0 ** e:g}</text>')
        for e in range(math.ceil(self.yl[0]), math.floor(self.yl[1]) + 1):
            py = self.y(10 ** e)
            out.append(f'<line x1="{self.x0}" y1="{py:.1f}" x2="{self.x0 + self.w}" y2="{py:.1f}" stroke="#eee"/>')
            out.append(f'<text x="{self.x0 - 6}" y="{py + 4:.1f}" text-anchor="end">{escape(si(10.0 ** e))}</text>')
        return out


