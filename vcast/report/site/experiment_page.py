"""An experiment's page: its report tables (with ``--compare paper`` the published values beside
them), figures, per-sample analysis and cells."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import pandas as pd

from vcast.report.collect import collect
from vcast.report.export import printed_value, vs_paper
from vcast.report.layouts import LAYOUTS
from vcast.report.paper import PaperTables
from vcast.report.site import html as H
from vcast.report.site.discovery import Experiment, ReportFile, cell_label, cell_order
from vcast.report.tables import build_table
from vcast.sweep.cell import REPRODUCE


def paper_rows(experiment: Experiment, stem: str, paper: PaperTables, frame: Optional[pd.DataFrame] = None
               ) -> Optional[tuple[list[str], list[list[str]]]]:
    """With ``--compare paper``: the rows of table ``stem`` (a paper layout) as ``method, frames,
    ratio`` then per column ours, the paper's and ours minus the paper's, as the report prints
    them (:func:`vcast.report.export.vs_paper`); None for a table without a paper layout.
    ``frame``: the experiment's cells collected (:func:`vcast.report.collect.collect`), once for
    all its tables (collected here when not given)."""
    product = experiment.product
    output = next((o for o in (product.tables if product else ()) if o.stem == stem and o.layout), None)
    if output is None:
        return None
    layout = LAYOUTS[output.layout]
    frame = collect(experiment.folder).frame if frame is None else frame
    specs = [c.spec for c in experiment.cells if c.spec is not None]
    profile = specs[0].profile if specs else REPRODUCE
    table = build_table(frame[frame["profile"] == profile], layout, experiments=output.experiments)
    header = ["method", "frames", "ratio"]
    for column in layout.columns:
        header += [column.key, f"{column.key} paper", f"{column.key} Δ"]
    rows = []
    for entry in table.rows:
        row = [entry.label, str(entry.frames), f"{entry.ratio:g}"]
        for column in layout.columns:
            published = paper.value(entry.paper_table, layout, entry, column.key)
            diff = vs_paper(paper, table, entry, column)
            row += [printed_value(entry, column), "" if published is None else f"{published:.{column.digits}f}",
                    "" if diff is None else f"{diff:+.{column.digits}f}"]
        rows.append(row)
    return header, rows


def files_links(experiment: Experiment, page: str, report: ReportFile) -> str:
    links = [f'<a href="{H.esc(H.href(page, experiment.file(p)))}">{H.esc(p.name)}</a>'
             for p in [report.path, *report.siblings]]
    return " · ".join(links)


def render_experiment(experiment: Experiment, compare: Optional[str], paper_csv: Path, has_items: bool) -> str:
    page = experiment.page
    body = [f"<p>Folder <code>{H.esc(experiment.folder)}</code>"]
    if experiment.product is not None:
        body.append(f"; report target <code>{H.esc(experiment.product.name)}</code> "
                    f"(<code>python -m vcast.report build {H.esc(experiment.product.name)}</code> rebuilds its files)")
    counts = experiment.counts()
    body.append(f". {len(experiment.cells)} cell(s): " + ", ".join(
        H.state_span(state, f"{counts[state]} {state}") for state in sorted(counts)) + ".</p>\n")
    if has_items:
        body.append(f'<p><a href="{H.esc(H.href(page, experiment.items_page))}">Item browser</a>: every question, '
                    "each method's answer side by side, the frames and kept tokens.</p>\n")
    body.append("<h2>Tables</h2>\n")
    if not experiment.tables:
        body.append(f"<p class=\"note\">No table yet: <code>python -m vcast.report build "
                    f"{H.esc(experiment.product.name if experiment.product else experiment.name)} --results "
                    f"{H.esc(experiment.folder.parent)}</code> writes it.</p>\n")
    paper = PaperTables(paper_csv) if compare == "paper" else None
    collected = collect(experiment.folder).frame if paper is not None and experiment.tables else None
    for report in experiment.tables:
        body.append(f"<h3>{H.esc(report.path.stem)}</h3>\n<p class=\"note\">{H.esc(report.path)}: "
                    f"{files_links(experiment, page, report)}</p>\n")
        printed = report.path.with_suffix(".md")
        if printed.is_file():  # as the report prints it; the CSV's cells beside it, verbatim
            body.append(H.markdown_table(printed, printed.name) + "<details><summary>CSV as written</summary>\n"
                        + H.csv_table(report.path, report.name) + "</details>\n")
        else:
            body.append(H.csv_table(report.path, report.name))
        if paper is not None:
            compared = paper_rows(experiment, report.path.stem, paper, collected)
            if compared is None:
                body.append("<p class=\"note\">No published numbers for this table (not a paper layout).</p>\n")
            else:
                body.append(f"<h3>{H.esc(report.path.stem)}: ours, the paper's and the difference</h3>\n"
                            + H.table(*compared, css="paper", data={"paper": report.name}))
    body.append("<h2>Figures</h2>\n")
    if not experiment.figures:
        body.append("<p class=\"note\">No figure.</p>\n")
    for report in experiment.figures:
        if report.path.suffix == ".png":
            body.append(f'<figure><img src="{H.esc(H.href(page, experiment.file(report.path)))}" '
                        f'alt="{H.esc(report.path.stem)}">\n<figcaption>{files_links(experiment, page, report)}'
                        "</figcaption></figure>\n")
        else:
            body.append(f"<p>{files_links(experiment, page, report)}</p>\n")
    body.append("<h2>Per-sample analysis</h2>\n")
    if not experiment.analyses:
        body.append("<p class=\"note\">No analysis: <code>python -m vcast.report analyze "
                    f"{H.esc(experiment.product.name if experiment.product else experiment.name)}</code> writes "
                    "loyalty, flips and paired intervals.</p>\n")
    for report in experiment.analyses:
        body.append(f"<h3>{H.esc(report.path.stem)}</h3>\n<p class=\"note\">{H.esc(report.path)}: "
                    f"{files_links(experiment, page, report)}</p>\n")
        markdown = report.path.with_suffix(".md")
        if markdown.is_file():
            body.append("<details><summary>Markdown as written</summary>\n"
                        f"<pre>{H.esc(markdown.read_text(encoding='utf-8'))}</pre></details>\n")
        body.append(H.csv_table(report.path, report.name))
    body.append("<h2>Cells</h2>\n")
    several = len({c.frames for c in experiment.cells}) > 1
    rows = []
    for cell in sorted(experiment.cells, key=cell_order):
        scores = cell.scores
        score = "; ".join(f"{metric} {value:.4g}" for metrics in scores.values() for metric, value in metrics.items()
                          if isinstance(value, (int, float)))
        rows.append([f'<a href="{H.esc(H.href(page, experiment.cell_page(cell)))}">{H.esc(cell.rel)}</a>',
                     H.esc(cell_label(cell, several)), H.esc(cell.task),
                     H.state_span(cell.state, cell.status), H.esc(score)])
    body.append(H.table(["cell", "method", "task", "status", "score"], rows, raw=True, table_id="cells"))
    crumbs = [("Results", "index.html"), (experiment.name, None)]
    return H.page(page, f"Experiment {experiment.name}", "".join(body), crumbs, script=H.SORT_JS)
