"""The HTML pieces every page shares: the style sheet, a table, an image or why it is missing, a
chart as a data URI, and the document around a page's body."""

import base64

from ..cli import html as escape

CSS = """body{font-family:sans-serif;margin:1.5em auto;max-width:1200px;color:#222;padding:0 1em}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;
text-align:left;vertical-align:top}td.n{text-align:right;white-space:nowrap}th{background:#f3f3f3}
section.chart{margin:2em 0;border-top:1px solid #ddd;padding-top:.5em}img{max-width:100%;height:auto}
figcaption{font-size:13px;color:#444;margin:.3em 0}.note{font-size:12px;color:#666;margin:.2em 0}
nav{font-size:13px;columns:3}nav a{display:block}.missing{padding:2em;background:#fafafa;color:#a00}"""


def table(header, rows, numeric=()):
    """An HTML table's lines; the columns numbered in numeric are right-aligned."""
    out = ["<table>", "<tr>" + "".join(f"<th>{escape(h)}</th>" for h in header) + "</tr>"]
    for row in rows:
        out.append("<tr>" + "".join(f"<td{' class=n' if i in numeric else ''}>{escape(c)}</td>"
                                    for i, c in enumerate(row)) + "</tr>")
    return out + ["</table>"]


def img(uri, why, alt):
    """The image at uri, or a box saying why the chart was not drawn."""
    if uri:
        return f'<img src="{uri}" alt="{escape(alt)}">'
    return f'<div class="missing">chart not drawn: {escape(why)}</div>'


def data_uri(data, fmt):
    """A chart's bytes (PNG where fmt is "png", else SVG) as a data URI."""
    mime = "image/png" if fmt == "png" else "image/svg+xml"
    return f"data:{mime};base64," + base64.b64encode(data).decode()


def document(title, body, css=CSS):
    """A whole HTML page: the head with title and style sheet, then the body's lines."""
    return ("<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
            f"<meta name=viewport content='width=device-width'><title>{escape(title)}</title>"
            f"<style>{css}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
