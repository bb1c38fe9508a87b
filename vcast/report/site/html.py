"""HTML pieces of the results site (:mod:`vcast.report.site`): the page frame, tables, the style sheet.

Every text that comes from a results tree goes through :func:`esc` (``html.escape`` with quotes),
so a method called ``<b>`` or a question with ``&`` prints as written. Pages link one style sheet,
``style.css`` at the site's root, and nothing outside the site: no fonts, scripts or images from
the network, so a copy of the folder opens from disk (``file://``) anywhere.
"""

from __future__ import annotations

import csv
import html
import json
import math
import os
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

STYLE = "style.css"

CSS = """\
:root { --fg: #1d2125; --muted: #5f6b76; --line: #d5dade; --head: #f1f3f5; --ok: #1f7a3d; --bad: #b3261e;
        --warn: #9a6700; --link: #0b5cad; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
       margin: 0 auto; padding: 1rem 1.5rem 3rem; max-width: 1400px; }
a { color: var(--link); }
nav.crumbs { font-size: 13px; color: var(--muted); margin-bottom: .5rem; }
h1 { font-size: 1.5rem; margin: .3rem 0 1rem; }
h2 { font-size: 1.2rem; margin: 2rem 0 .6rem; border-bottom: 1px solid var(--line); padding-bottom: .2rem; }
h3 { font-size: 1.05rem; margin: 1.3rem 0 .4rem; }
p.note, .muted { color: var(--muted); }
div.scroll { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; margin: .4rem 0 1rem; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 3px 7px; vertical-align: top; }
th { background: var(--head); text-align: left; position: sticky; top: 0; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.kv th { position: static; width: 16rem; }
pre { background: var(--head); padding: .6rem .8rem; overflow-x: auto; font-size: 12px; white-space: pre-wrap; }
figure { margin: .5rem 0 1.5rem; }
figure img, canvas.kept-map { max-width: 100%; height: auto; border: 1px solid var(--line); }
figcaption { font-size: 13px; color: var(--muted); }
.state { font-weight: 600; }
.state-done { color: var(--ok); }
.state-partial { color: var(--warn); }
.state-failed, .state-missing { color: var(--bad); }
.state-running { color: var(--link); }
.right { color: var(--ok); font-weight: 600; }
.wrong { color: var(--bad); font-weight: 600; }
input.filter { font: inherit; padding: 3px 6px; width: 20rem; margin: .3rem 0; }
details.picker label { margin-right: .9rem; white-space: nowrap; font-size: 13px; }
svg.curve { border: 1px solid var(--line); background: #fff; }
table.sortable th { cursor: pointer; }
table.sortable th[data-order="desc"]::after { content: " \\25BE"; }
table.sortable th[data-order="asc"]::after { content: " \\25B4"; }
tr.section th { background: #fff; text-align: left; font-style: italic; }
p.caption { font-size: 13px; }
ul.legend { list-style: none; padding: 0; margin: .2rem 0; font-size: 12px; }
ul.legend li { display: inline-block; margin-right: 1rem; }
ul.legend span.swatch { display: inline-block; width: 1.5rem; height: 3px; vertical-align: middle;
                         margin-right: .3rem; }
"""

# Distinct line colours of the budget curves (matplotlib's tab10), assigned in row order.
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
          "#17becf")

def esc(value: Any) -> str:
    """``value`` as HTML text (``html.escape``, quotes included); None prints empty."""
    return "" if value is None else html.escape(str(value), quote=True)


def href(from_page: str, to: str) -> str:
    """The relative URL from the page ``from_page`` to the site file ``to`` (both relative to the
    site's root, ``/``-separated), percent-free: site file names are plain (:func:`slug`)."""
    start = os.path.dirname(from_page) or "."
    return Path(os.path.relpath(to, start)).as_posix()


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def slug(text: str) -> str:
    """A file-name-safe form of ``text``: letters, digits, ``.``, ``_`` and ``-`` kept, the rest ``_``."""
    return _UNSAFE.sub("_", str(text)).strip(".") or "_"


def page(rel: str, title: str, body: str, crumbs: Sequence[tuple[str, Optional[str]]] = (),
         script: str = "") -> str:
    """A whole page at site path ``rel``: its title, the breadcrumb trail ``[(text, site path or
    None), ...]``, ``body`` (HTML) and ``script`` (JavaScript, :mod:`vcast.report.site.scripts`)."""
    script_tag = element("script", "\n" + script) + "\n" if script else ""
    trail = " › ".join(f'<a href="{esc(href(rel, target))}">{esc(text)}</a>' if target else esc(text)
                       for text, target in crumbs)
    nav = f'<nav class="crumbs">{trail}</nav>\n' if trail else ""
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{esc(title)}</title>\n<link rel=\"stylesheet\" href=\"{esc(href(rel, STYLE))}\">\n"
            f"</head>\n<body>\n{nav}<h1>{esc(title)}</h1>\n{body}{script_tag}</body>\n</html>\n")


def is_number(text: str) -> bool:
    try:
        return math.isfinite(float(text))
    except ValueError:
        return False


def read_csv_rows(path: Path) -> list[list[str]]:
    """Every row of a CSV file as written (header first)."""
    with Path(path).open(encoding="utf-8", newline="") as handle:
        return [row for row in csv.reader(handle)]


def table(header: Sequence[str], rows: Iterable[Sequence[str]], *, raw: bool = False, table_id: str = "",
          css: str = "", data: Optional[Mapping[str, str]] = None, row_keys: Optional[Sequence[str]] = None) -> str:
    """An HTML table; cells are escaped text unless ``raw`` (then they are HTML already);
    ``row_keys``: each row's ``data-method`` (what the item page's method picker shows or hides)."""
    cell = (lambda text: text) if raw else esc
    attributes = (f' id="{esc(table_id)}"' if table_id else "") + (f' class="{esc(css)}"' if css else "")
    attributes += "".join(f' data-{esc(key)}="{esc(value)}"' for key, value in (data or {}).items())
    lines = [f"<div class=\"scroll\"><table{attributes}>", "<thead><tr>" + "".join(
        f"<th>{esc(h)}</th>" for h in header) + "</tr></thead>", "<tbody>"]
    for index, row in enumerate(rows):
        key = f' data-method="{esc(row_keys[index])}"' if row_keys is not None else ""
        lines.append(f"<tr{key}>" + "".join(
            f"<td class=\"num\">{cell(v)}</td>" if not raw and is_number(str(v)) else f"<td>{cell(v)}</td>"
            for v in row) + "</tr>")
    lines.append("</tbody></table></div>")
    return "\n".join(lines) + "\n"


def csv_table(path: Path, name: str) -> str:
    """The CSV file's cells verbatim as an HTML table (the header row as ``th``), tagged with
    ``data-csv="<name>"`` so a reader can find which file it shows."""
    rows = read_csv_rows(path)
    if not rows:
        return f"<p class=\"note\">{esc(name)} is empty.</p>\n"
    width = max(len(row) for row in rows)
    header = rows[0] + [""] * (width - len(rows[0]))
    return table(header, [row + [""] * (width - len(row)) for row in rows[1:]], css="csv", data={"csv": name})


_STRONG = re.compile(r"\*\*(.+?)\*\*")
_EMPHASIS = re.compile(r"(?<![*\w])\*(?!\s)(.+?)(?<!\s)\*(?![*\w])")
_CODE = re.compile(r"`([^`]+)`")
_UNDERLINE = re.compile(r"&lt;u&gt;(.+?)&lt;/u&gt;")


def inline_markdown(text: str) -> str:
    """``text`` escaped, then the Markdown the report's tables use as HTML: ``**bold**`` (best),
    ``<u>underlined</u>`` (second best), ``*italic*`` (the reference row) and ``code``."""
    out = esc(text)
    out = _CODE.sub(r"<code>\1</code>", out)
    out = _STRONG.sub(r"<strong>\1</strong>", out)
    out = _EMPHASIS.sub(r"<em>\1</em>", out)
    return _UNDERLINE.sub(r"<u>\1</u>", out)


def markdown_cells(line: str) -> list[str]:
    """The cells of one Markdown table row (``| a | b |``), stripped."""
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def markdown_table(path: Path, name: str) -> str:
    """The report's Markdown table in ``path`` as HTML, as the report prints it: its caption, display
    names, rounding, ``±`` intervals, best bold and second underlined, section rows across the
    table; sortable by a click on a column's header (numbers by value; section rows hide while
    sorted, a third click restores the order). Tagged ``data-md="<name>"``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("|")), None)
    if start is None or start + 1 >= len(lines):
        return f"<p class=\"note\">{esc(name)} holds no table.</p>\n"
    caption = " ".join(line for line in lines[:start] if line.strip())
    header = markdown_cells(lines[start])
    out = [f"<p class=\"caption\">{inline_markdown(caption)}</p>"] if caption else []
    out += [f'<div class="scroll"><table class="report sortable" data-md="{esc(name)}">',
            "<thead><tr>" + "".join(f"<th>{inline_markdown(h)}</th>" for h in header) + "</tr></thead>", "<tbody>"]
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            continue
        cells = markdown_cells(line)
        if len(cells) > 1 and not any(cells[1:]):  # a section or block title across the table
            out.append(f'<tr class="section"><th colspan="{len(header)}">{inline_markdown(cells[0])}</th></tr>')
            continue
        out.append("<tr>" + "".join(
            f'<td class="num">{inline_markdown(c)}</td>' if index else f"<td>{inline_markdown(c)}</td>"
            for index, c in enumerate(cells)) + "</tr>")
    out.append("</tbody></table></div>")
    return "\n".join(out) + "\n"


def element(name: str, inner: str = "", *, css: str = "", attrs: Optional[Mapping[str, Any]] = None,
            void: bool = False) -> str:
    """``<name class="css" key="value" ...>inner</name>``: ``inner`` is HTML already, attribute
    values are escaped, in the order given; ``void``: no content and no closing tag (``img``, ``input``)."""
    pairs = ([("class", css)] if css else []) + [(key, value) for key, value in (attrs or {}).items()
                                                   if value is not None]
    opening = f"<{name}" + "".join(f' {key}="{esc(value)}"' if value is not True else f" {key}"
                                   for key, value in pairs) + ">"
    return opening if void else f"{opening}{inner}</{name}>"


def heading(level: int, text: str) -> str:
    """A section heading (``h2``, ``h3``...) of ``text``, on its own line."""
    return element(f"h{level}", esc(text)) + "\n"


def paragraph(inner: str, css: str = "") -> str:
    """A paragraph of HTML ``inner``, on its own line."""
    return element("p", inner, css=css) + "\n"


def note(text: str) -> str:
    """A muted paragraph of plain ``text`` (what is missing, and why)."""
    return paragraph(esc(text), css="note")


def code(text: Any) -> str:
    return element("code", esc(text))


def strong(text: Any, css: str = "") -> str:
    return element("strong", esc(text), css=css)


def muted(text: Any) -> str:
    return element("span", esc(text), css="muted")


def link(target: str, inner: str) -> str:
    """``<a href="target">inner</a>`` (``inner`` is HTML already; ``target`` a relative address)."""
    return element("a", inner, attrs={"href": target})


def preformatted(text: Any, css: str = "") -> str:
    return element("pre", esc(text), css=css)


def details(summary: str, inner: str, opened: bool = False) -> str:
    """A collapsible block: ``summary`` (plain text) over HTML ``inner``, open when ``opened``."""
    return element("details", element("summary", esc(summary)) + "\n" + inner, attrs={"open": True if opened else None}
                   ) + "\n"


def figure(src: str, alt: str, caption: str, *, css: str = "", method: str = "") -> str:
    """An image with its caption (HTML); ``method``: its ``data-method`` (the item page's picker)."""
    image = element("img", attrs={"src": src, "alt": alt}, void=True)
    return element("figure", image + element("figcaption", caption), css=css,
                   attrs={"data-method": method or None}) + "\n"


def kept_map(sheet: str, layout: Mapping[str, Any], frames_per_step: int, grid: Sequence[int], kept: Sequence[str],
             label: str, caption: str, *, method: str = "", dim: float = 0.25) -> str:
    """A method's kept map (HTML): a canvas that :data:`vcast.report.site.scripts.KEPT_MAPS` draws
    from the shared frame sheet ``sheet`` (its ``layout``: :func:`vcast.report.site.items.sheet_jpeg`;
    tile ``i`` a frame of shown step ``i // frames_per_step``) with the cells of tokens not in
    ``kept`` (per shown step, hex bits of the ``grid`` ``(h, w)``) dimmed to ``dim``; ``caption`` is HTML."""
    width, height = layout["size"]
    tiles = [layout["columns"], *layout["tile"], layout["gap"], frames_per_step, layout["count"]]
    canvas = element("canvas", esc(f"kept tokens: {label}"), css="kept-map", attrs={
        "width": width, "height": height, "role": "img", "aria-label": f"kept tokens: {label}", "data-sheet": sheet,
        "data-tiles": " ".join(str(int(v)) for v in tiles), "data-grid": f"{int(grid[0])} {int(grid[1])}",
        "data-kept": " ".join(kept), "data-dim": f"{dim:g}"})
    return element("figure", canvas + element("figcaption", caption), css="kept",
                   attrs={"data-method": method or None}) + "\n"


def key_values(pairs: Iterable[tuple[str, Any]]) -> str:
    """A two-column table of names and values (dicts and lists as compact JSON)."""
    rows = []
    for key, value in pairs:
        if isinstance(value, float):
            value = f"{value:.6g}"  # 27.1559, not 27.155885249999983
        text = json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value
        rows.append(f"<tr><th>{esc(key)}</th><td>{esc('' if text is None else text)}</td></tr>")
    return "<table class=\"kv\">\n" + "\n".join(rows) + "\n</table>\n"


def state_span(state: str, text: str) -> str:
    """``text`` coloured by the cell state (done, partial, failed, missing, running)."""
    return f'<span class="state state-{esc(state)}">{esc(text)}</span>'


def budget_svg(curves: Sequence[tuple[str, Sequence[int]]], per_step: Optional[int] = None,
               width: int = 560, height: int = 180, keys: Optional[Sequence[str]] = None) -> str:
    """An inline SVG line chart of tokens kept per temporal step, one polyline per ``(label,
    budgets)``, and its legend; empty when there is no curve. ``keys``: each curve's
    ``data-method`` (on its line and legend entry, for the method picker)."""
    keys = list(keys) if keys is not None else [""] * len(curves)
    kept = [(label, list(values), key) for (label, values), key in zip(curves, keys) if len(values)]
    curves, keys = [(label, values) for label, values, _ in kept], [key for _, _, key in kept]
    if not curves:
        return ""
    steps = max(len(values) for _, values in curves)
    top = max([per_step or 0, *(max(values) for _, values in curves)]) or 1
    left, right, bottom, up = 40, 10, 26, 8
    plot_w, plot_h = width - left - right, height - bottom - up

    def x(step: int) -> float:
        return left + (plot_w * step / (steps - 1) if steps > 1 else plot_w / 2)

    def y(value: float) -> float:
        return up + plot_h * (1 - value / top)

    parts = [f'<svg class="curve" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="tokens kept per temporal step">',
             f'<line x1="{left}" y1="{y(0):.1f}" x2="{width - right}" y2="{y(0):.1f}" stroke="#888"/>',
             f'<line x1="{left}" y1="{up}" x2="{left}" y2="{y(0):.1f}" stroke="#888"/>',
             f'<text x="{left - 4}" y="{up + 9}" font-size="10" text-anchor="end">{top}</text>',
             f'<text x="{left - 4}" y="{y(0):.1f}" font-size="10" text-anchor="end">0</text>',
             f'<text x="{left}" y="{height - 6}" font-size="10">step 0</text>',
             f'<text x="{width - right}" y="{height - 6}" font-size="10" text-anchor="end">step {steps - 1}</text>']
    legend = []
    for index, (label, values) in enumerate(curves):
        color = COLORS[index % len(COLORS)]
        key = f' data-method="{esc(keys[index])}"' if keys[index] else ""
        points = " ".join(f"{x(step):.1f},{y(value):.1f}" for step, value in enumerate(values))
        parts.append(f'<polyline{key} fill="none" stroke="{color}" stroke-width="1.6" points="{points}">'
                     f"<title>{esc(label)}: {esc(', '.join(str(v) for v in values))}</title></polyline>")
        legend.append(f'<li{key}><span class="swatch" style="background:{color}"></span>{esc(label)}</li>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n<ul class=\"legend\">" + "".join(legend) + "</ul>\n"

