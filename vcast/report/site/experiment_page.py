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
from vcast.report.products import TRADEOFF_PANELS
from vcast.report.site import html as H
from vcast.report.site import scripts
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
    links = [H.link(H.href(page, experiment.file(p)), H.esc(p.name)) for p in [report.path, *report.siblings]]
    return " · ".join(links)


def render_experiment(experiment: Experiment, compare: Optional[str], paper_csv: Path, has_items: bool) -> str:
    page = experiment.page
    name = experiment.product.name if experiment.product else experiment.name
    intro = f"Folder {H.code(experiment.folder)}"
    if experiment.product is not None:
        intro += (f"; report target {H.code(experiment.product.name)} "
                  f"({H.code(f'python -m vcast.report build {experiment.product.name}')} rebuilds its files)")
    counts = experiment.counts()
    intro += f". {len(experiment.cells)} cell(s): " + ", ".join(
        H.state_span(state, f"{counts[state]} {state}") for state in sorted(counts)) + "."
    body = [H.paragraph(intro)]
    if has_items:
        body.append(H.paragraph(H.link(H.href(page, experiment.items_page), "Item browser")
                                + ": every question, each method's answer side by side, the frames and kept tokens."))
    body.append(H.heading(2, "Tables"))
    if not experiment.tables:
        command = f"python -m vcast.report build {name} --results {experiment.folder.parent}"
        body.append(H.paragraph(f"No table yet: {H.code(command)} writes it.", css="note"))
    paper = PaperTables(paper_csv) if compare == "paper" else None
    collected = collect(experiment.folder).frame if paper is not None and experiment.tables else None
    for report in experiment.tables:
        body.append(H.heading(3, report.path.stem)
                    + H.paragraph(f"{H.esc(report.path)}: {files_links(experiment, page, report)}", css="note"))
        printed = report.path.with_suffix(".md")
        if printed.is_file():  # as the report prints it; the CSV's cells beside it, verbatim
            body.append(H.markdown_table(printed, printed.name)
                        + H.details("CSV as written", H.csv_table(report.path, report.name)))
        else:
            body.append(H.csv_table(report.path, report.name))
        if paper is not None:
            compared = paper_rows(experiment, report.path.stem, paper, collected)
            if compared is None:
                body.append(H.note("No published numbers for this table (not a paper layout)."))
            else:
                body.append(H.heading(3, f"{report.path.stem}: ours, the paper's and the difference")
                            + H.table(*compared, css="paper", data={"paper": report.name}))
    body.append(H.heading(2, "Figures"))
    if not experiment.figures:
        body.append(H.note("No figure."))
    for report in experiment.figures:
        if report.path.suffix == ".png":
            shown = H.figure(H.href(page, experiment.file(report.path)), report.path.stem,
                             files_links(experiment, page, report))
            if report.path.stem.endswith(TRADEOFF_PANELS):  # a click away: a panel per method is long
                shown = H.details(f"Every method, one panel each ({report.path.stem})", shown)
            body.append(shown)
        else:
            body.append(H.paragraph(files_links(experiment, page, report)))
    body.append(H.heading(2, "Per-sample analysis"))
    if not experiment.analyses:
        body.append(H.paragraph(f"No analysis: {H.code(f'python -m vcast.report analyze {name}')} writes "
                                "loyalty, flips and paired intervals.", css="note"))
    for report in experiment.analyses:
        body.append(H.heading(3, report.path.stem)
                    + H.paragraph(f"{H.esc(report.path)}: {files_links(experiment, page, report)}", css="note"))
        markdown = report.path.with_suffix(".md")
        if markdown.is_file():
            body.append(H.details("Markdown as written", H.preformatted(markdown.read_text(encoding="utf-8"))))
        body.append(H.csv_table(report.path, report.name))
    body.append(H.heading(2, "Cells"))
    several = len({c.frames for c in experiment.cells}) > 1
    rows = []
    for cell in sorted(experiment.cells, key=cell_order):
        scores = cell.scores
        score = "; ".join(f"{metric} {value:.4g}" for metrics in scores.values() for metric, value in metrics.items()
                          if isinstance(value, (int, float)))
        rows.append([H.link(H.href(page, experiment.cell_page(cell)), H.esc(cell.rel)),
                     H.esc(cell_label(cell, several)), H.esc(cell.task),
                     H.state_span(cell.state, cell.status), H.esc(score)])
    body.append(H.table(["cell", "method", "task", "status", "score"], rows, raw=True, table_id="cells"))
    crumbs = [("Results", "index.html"), (experiment.name, None)]
    return H.page(page, f"Experiment {experiment.name}", "".join(body), crumbs, script=scripts.SORT)
