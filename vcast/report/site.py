"""``python -m vcast.report site [results root]``: a static results site that opens from disk.

    python -m vcast.report site results/demo                  # results/demo/site/index.html
    python -m vcast.report site results --out /tmp/site --compare paper

Pages (plain HTML and one style sheet; no server, no network, no script but a small row filter):

* ``index.html``: the experiments under the root: every folder holding sweep cells
  (``<experiment>/<model>/<frames>f/<method>/r<ratio>/<task>/``); the root itself when it is one
  (``results/demo``).
* ``<experiment>/index.html``: each report table exactly as its CSV has it (the target's outputs:
  ``<results>/<out_dir>`` or ``<results>/tables`` and ``<results>/figures``, and any CSV / PNG /
  PDF in the experiment's folder), with ``--compare paper`` the published value and our printed
  value minus it for tables in a paper layout; the figures (PNG shown, PDF linked); the
  per-sample analysis (``*-analysis.csv``, its Markdown); every cell with its status.
* ``<experiment>/cells/<cell>.html``: a cell's spec, status, error, versions, scores, efficiency
  (``cell.json`` and a summary of ``efficiency/rank*.jsonl``), missing videos, its log's end.
* ``<experiment>/items/``: the item browser (:mod:`vcast.report.site_items`).

The build is incremental and atomic: each output's inputs (their size and mtime) and what the
page shows are fingerprinted in ``.site-manifest.json``; an unchanged output is not rendered
again, a changed one is written to a temporary name and renamed over the old one. Pages are
written before the pages that link to them (images, items, cells, experiments, then the index)
and outputs no longer produced are deleted last, so a build cut off at any point leaves a site
whose links all resolve; the next build finishes the job.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import vcast.viz
from vcast.report import site_html as H
from vcast.report.collect import collect
from vcast.report.export import _printed, _vs_paper
from vcast.report.layouts import LAYOUTS
from vcast.report.names import method_name
from vcast.report.paper import SHIPPED, PaperTables
from vcast.report.products import Product, TableOutput, find_product
from vcast.report.scoring import load_task_scorings
from vcast.report.site_writer import SiteWriter
from vcast.report.site_items import Item, SiteCell, TaskDocs, read_answers, write_frames_strip, \
    write_kept_map
from vcast.report.tables import build_table
from vcast.results.tree import Cell
from vcast.sweep.cell import REPRODUCE
from vcast.sweep.status import cell_status, planned_cells, tree_cells

logger = logging.getLogger(__name__)

DEFAULT_ROOT = Path("results")
LOG_TAIL = 40  # lines of run.log on a cell page
REPORT_SUFFIXES = (".csv", ".png", ".pdf")
SIBLINGS = (".md", ".tex")
# Renders change with this code: its own source is part of every fingerprint.
_SOURCES = [Path(__file__), Path(H.__file__),
            *(Path(__file__).with_name(f"{name}.py") for name in ("site_items", "site_writer"))]
VERSION = hashlib.sha256(b"".join(p.read_bytes() for p in _SOURCES)).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# What the results root holds
# ---------------------------------------------------------------------------------------------

def cell_state(status: str) -> str:
    """The site's word for a :func:`vcast.sweep.status.cell_status`: done, partial, running,
    missing (planned, not run) or failed (failed, oom, incomplete, interrupted, unreadable)."""
    head = status.split(",")[0].strip()
    if head == "ok":
        return "done"
    if head.startswith("partial"):
        return "partial"
    if head == "running":
        return "running"
    if head == "pending":
        return "missing"
    return "failed"


@dataclass
class ReportFile:
    """A report output of an experiment and its siblings (``.md``/``.tex`` of a CSV, ``.pdf`` of a PNG)."""

    path: Path
    siblings: list[Path] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.path.name


@dataclass
class Experiment:
    """A folder of sweep cells and the report outputs built from them."""

    name: str                 # the cells' spec.experiment (+ "-<profile>" for another profile)
    folder: Path
    slug: str                 # its folder in the site
    cells: list[SiteCell]
    product: Optional[Product]
    tables: list[ReportFile] = field(default_factory=list)
    analyses: list[ReportFile] = field(default_factory=list)
    figures: list[ReportFile] = field(default_factory=list)

    @property
    def page(self) -> str:
        return f"{self.slug}/index.html"

    @property
    def items_page(self) -> str:
        return f"{self.slug}/items/index.html"

    def cell_page(self, cell: SiteCell | str) -> str:
        rel = cell if isinstance(cell, str) else cell.rel
        return f"{self.slug}/cells/{H.slug(rel.replace('/', '--'))}.html"

    def file(self, report: Path) -> str:
        return f"{self.slug}/files/{H.slug(report.name)}"

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for cell in self.cells:
            out[cell.state] = out.get(cell.state, 0) + 1
        return out


def _product_candidates(product: Product, experiment: str, results_root: Path, profile: str) -> list[Path]:
    """Every file a report build of ``product`` can write for ``experiment``'s tables and figures."""
    tables, figures = product.folder(results_root, "tables"), product.folder(results_root, "figures")
    outputs = product.tables or ((TableOutput(product.name, None, product.experiments),) if product.experiments else ())
    paths = []
    for output in outputs:
        if experiment not in output.experiments:
            continue
        stem = output.stem if profile == REPRODUCE else f"{output.stem}-{profile}"
        paths += [tables / f"{stem}.csv", tables / f"{stem}-analysis.csv", tables / f"{stem}-tradeoff.png",
                  tables / f"{stem}-tradeoff.pdf"]
    paths += [figures / f"{name}{suffix}" for name in product.figures for suffix in (".png", ".pdf")]
    return paths


def report_files(folder: Path, product: Optional[Product], experiment: str, profile: str, exclude: Path
                 ) -> tuple[list[ReportFile], list[ReportFile], list[ReportFile]]:
    """(tables, analyses, figures) of an experiment: its target's outputs that exist and the CSV,
    PNG and PDF files in its own folder, each once, sorted by name."""
    found = [p for p in sorted(folder.iterdir()) if p.is_file() and p.suffix in REPORT_SUFFIXES]
    if product is not None:
        found += [p for p in _product_candidates(product, experiment, folder.parent, profile) if p.is_file()]
    seen: dict[str, Path] = {}
    for path in found:
        if exclude in path.parents:
            continue
        if path.name in seen and seen[path.name].resolve() != path.resolve():
            logger.warning("%s and %s share a name; the site shows the first", seen[path.name], path)
        seen.setdefault(path.name, path)
    tables, analyses, figures = [], [], []
    for name in sorted(seen):
        path = seen[name]
        if path.suffix == ".csv":
            siblings = [path.with_suffix(s) for s in SIBLINGS if path.with_suffix(s).is_file()]
            (analyses if path.stem.endswith("-analysis") else tables).append(ReportFile(path, siblings))
        elif path.suffix == ".png":
            figures.append(ReportFile(path, [path.with_suffix(".pdf")] if path.with_suffix(".pdf").is_file() else []))
        elif path.suffix == ".pdf" and not path.with_suffix(".png").is_file():
            figures.append(ReportFile(path))
    return tables, analyses, figures


def find_experiments(root: Path, exclude: Optional[Path] = None) -> list[Experiment]:
    """The experiments under ``root`` (sorted by folder): every folder holding cells at
    ``<model>/<frames>f/<method>/r<ratio>/<task>/``, planned cells of started sweeps included
    (status missing), with their report outputs; ``exclude`` (the site itself) is left out.

    Raises:
        FileNotFoundError: ``root`` is not a folder.
        ValueError: ``root`` holds no cell.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"results root {root} is not a folder")
    exclude = Path(exclude) if exclude is not None else root / "site"
    groups: dict[Path, list[Cell]] = {}
    for cell in tree_cells(root, planned_cells(root)):
        parts = cell.path.relative_to(root).parts
        if len(parts) < 5 or exclude == cell.path or exclude in cell.path.parents:
            continue
        groups.setdefault(cell.path.parents[4], []).append(cell)
    if not groups:
        raise ValueError(f"no experiments under {root}: no sweep cell (<experiment>/<model>/<frames>f/<method>/"
                         f"r<ratio>/<task>/cell.json) in it. Run a sweep first (make demo writes results/demo)")
    experiments: list[Experiment] = []
    slugs: set[str] = set()
    for folder in sorted(groups):
        cells = []
        for cell in groups[folder]:
            status = cell_status(cell)
            cells.append(SiteCell(cell, cell.path.relative_to(folder).as_posix(), status, cell_state(status),
                                  cell.readable_record()))
        specs = [c.spec for c in cells if c.spec is not None]
        experiment = specs[0].experiment if specs else folder.name
        profile = specs[0].profile if specs else REPRODUCE
        product = find_product(experiment) or Product(experiment, (experiment,),
                                                      (TableOutput(experiment, None, (experiment,)),))
        base = H.slug(folder.relative_to(root).as_posix().replace("/", "--") if folder != root else folder.name)
        slug, number = base, 2
        while slug in slugs or slug in ("files", "site"):
            slug, number = f"{base}-{number}", number + 1
        slugs.add(slug)
        name = experiment if profile == REPRODUCE else f"{experiment}-{profile}"
        tables, analyses, figures = report_files(folder, product, experiment, profile, exclude)
        experiments.append(Experiment(name, folder, slug, cells, product, tables, analyses, figures))
    return experiments


def cell_label(cell: SiteCell, several_frames: bool) -> str:
    """``V-CAST (r=0.25)``, with the frame count when the experiment has several, the variant
    when it is not the paper's, and ``†`` for a partial run."""
    spec = cell.spec
    method = spec.method if spec is not None else (cell.rel.split("/")[2] if cell.rel.count("/") >= 4 else cell.rel)
    details = [] if method == "vanilla" else [f"r={spec.ratio if spec is not None else math.nan:g}"]
    if several_frames:
        details.append(f"{spec.frames if spec is not None else None}f")
    variant = spec.variant if spec is not None else None
    if variant and variant != "paper":
        details.append(str(variant))
    label = method_name(method) + (f" ({', '.join(details)})" if details else "")
    return label + (" †" if cell.state == "partial" else "")


def _order(cell: SiteCell) -> tuple[Any, ...]:
    spec = cell.spec
    if spec is None:
        return (0, True, 0.0, method_name(""), cell.rel)
    return (int(spec.frames), spec.method != "vanilla", float(spec.ratio), method_name(spec.method), cell.rel)


# ---------------------------------------------------------------------------------------------
# Cell pages
# ---------------------------------------------------------------------------------------------

def efficiency_summary(cell: Cell) -> tuple[list[list[str]], int]:
    """(rows ``field, calls, total, mean, min, max`` over the cell's per-call efficiency records,
    records read) for every numeric field of the records (a torn last line is skipped)."""
    values: dict[str, list[float]] = {}
    records = cell.efficiency()
    for record in records:
        for key, value in record.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                values.setdefault(key, []).append(float(value))
    rows = [[key, str(len(v)), f"{sum(v):.6g}", f"{sum(v) / len(v):.6g}", f"{min(v):.6g}", f"{max(v):.6g}"]
            for key, v in sorted(values.items())]
    return rows, len(records)


def render_cell(experiment: Experiment, cell: SiteCell) -> str:
    rel = experiment.cell_page(cell)
    record = cell.record
    body = [f"<p>Cell <code>{H.esc(cell.rel)}</code> of experiment {H.esc(experiment.name)}: "
            f"{H.state_span(cell.state, cell.status)}.</p>\n"]
    if record is None:
        body.append("<p class=\"note\">No readable record (cell.json): the cell has not run (planned by a sweep), "
                    "is running, or its record is invalid (its status says so).</p>\n")
    else:
        if record.error:
            body.append(f"<h2>Error</h2>\n<pre>{H.esc(record.error)}</pre>\n")
        run = [("status", record.status), ("attempt", record.attempt), ("returncode", record.returncode),
               ("started_at", record.started_at), ("finished_at", record.finished_at),
               ("duration_s", record.duration_s), ("host", record.host), ("slurm_job_id", record.slurm_job_id),
               ("world_size", record.world_size)]
        run = [(key, value) for key, value in run if value is not None]
        run.append(("DONE marker", "present" if cell.source.done else "absent"))
        body.append("<h2>Status</h2>\n" + H.key_values(run))
        body.append("<h2>Spec</h2>\n" + H.key_values(sorted(record.spec.as_dict().items())))
        if record.scores:
            rows = [[task, metric, f"{value:.6g}" if isinstance(value, (int, float)) else str(value)]
                    for task, metrics in sorted(record.scores.items()) for metric, value in sorted(metrics.items())]
            body.append("<h2>Scores</h2>\n" + H.table(["lmms task", "metric", "value"], rows))
        if record.versions:
            body.append("<h2>Versions</h2>\n" + H.key_values(sorted(record.versions.items())))
        if record.efficiency is not None:
            body.append("<h2>Efficiency</h2>\n<h3>As recorded in cell.json</h3>\n" + H.key_values(
                sorted(record.efficiency.figures().items())))
    rows, count = efficiency_summary(cell.source)
    if rows:
        body.append(f"<h3>Per-call records (efficiency/rank*.jsonl: {count} records)</h3>\n"
                    + H.table(["field", "records", "total", "mean", "min", "max"], rows))
    elif record is not None:
        body.append("<p class=\"note\">No per-call efficiency records (efficiency/rank*.jsonl).</p>\n")
    if record is not None and record.results_file is not None:
        missing = record.missing_visuals
        body.append(f"<h2>Missing videos</h2>\n<p>{H.esc(missing.count)} item(s) without a readable "
                    "video (answered empty).</p>\n")
        if missing.items:
            keys = sorted({k for entry in missing.items for k in entry})
            body.append(H.table(keys, [[json.dumps(e.get(k)) if isinstance(e.get(k), (dict, list)) else
                                        str(e.get(k, "")) for k in keys] for e in missing.items]))
    tail = cell.source.log_tail(LOG_TAIL)
    if tail:
        opened = " open" if cell.state == "failed" else ""
        body.append(f"<h2>run.log</h2>\n<details{opened}><summary>last {LOG_TAIL} lines</summary>\n"
                    f"<pre>{H.esc(tail)}</pre></details>\n")
    if record is not None:
        body.append("<h2>cell.json</h2>\n<details><summary>as written</summary>\n"
                    f"<pre>{H.esc(json.dumps(record.as_json(), indent=2, sort_keys=True))}</pre></details>\n")
    crumbs = [("Results", "index.html"), (experiment.name, experiment.page), (cell.rel, None)]
    return H.page(rel, f"Cell {cell.rel}", "".join(body), crumbs)


def _cell_inputs(cell: SiteCell) -> list[Path]:
    return cell.source.input_files()


# ---------------------------------------------------------------------------------------------
# Experiment pages
# ---------------------------------------------------------------------------------------------

def paper_rows(experiment: Experiment, stem: str, paper: PaperTables) -> Optional[tuple[list[str], list[list[str]]]]:
    """With ``--compare paper``: the rows of table ``stem`` (a paper layout) as ``method, frames,
    ratio`` then per column ours, the paper's and ours minus the paper's, as the report prints
    them (:func:`vcast.report.export._vs_paper`); None for a table without a paper layout."""
    product = experiment.product
    output = next((o for o in (product.tables if product else ()) if o.stem == stem and o.layout), None)
    if output is None:
        return None
    layout = LAYOUTS[output.layout]
    frame = collect(experiment.folder).frame
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
            diff = _vs_paper(paper, table, entry, column)
            row += [_printed(entry, column), "" if published is None else f"{published:.{column.digits}f}",
                    "" if diff is None else f"{diff:+.{column.digits}f}"]
        rows.append(row)
    return header, rows


def _files_links(experiment: Experiment, page: str, report: ReportFile) -> str:
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
    for report in experiment.tables:
        body.append(f"<h3>{H.esc(report.path.stem)}</h3>\n<p class=\"note\">{H.esc(report.path)} as written: "
                    f"{_files_links(experiment, page, report)}</p>\n" + H.csv_table(report.path, report.name))
        if paper is not None:
            compared = paper_rows(experiment, report.path.stem, paper)
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
                        f'alt="{H.esc(report.path.stem)}">\n<figcaption>{_files_links(experiment, page, report)}'
                        "</figcaption></figure>\n")
        else:
            body.append(f"<p>{_files_links(experiment, page, report)}</p>\n")
    body.append("<h2>Per-sample analysis</h2>\n")
    if not experiment.analyses:
        body.append("<p class=\"note\">No analysis: <code>python -m vcast.report analyze "
                    f"{H.esc(experiment.product.name if experiment.product else experiment.name)}</code> writes "
                    "loyalty, flips and paired intervals.</p>\n")
    for report in experiment.analyses:
        body.append(f"<h3>{H.esc(report.path.stem)}</h3>\n<p class=\"note\">{H.esc(report.path)}: "
                    f"{_files_links(experiment, page, report)}</p>\n")
        markdown = report.path.with_suffix(".md")
        if markdown.is_file():
            body.append("<details><summary>Markdown as written</summary>\n"
                        f"<pre>{H.esc(markdown.read_text(encoding='utf-8'))}</pre></details>\n")
        body.append(H.csv_table(report.path, report.name))
    body.append("<h2>Cells</h2>\n")
    several = len({c.frames for c in experiment.cells}) > 1
    rows = []
    for cell in sorted(experiment.cells, key=_order):
        scores = cell.scores
        score = "; ".join(f"{metric} {value:.4g}" for metrics in scores.values() for metric, value in metrics.items()
                          if isinstance(value, (int, float)))
        rows.append([f'<a href="{H.esc(H.href(page, experiment.cell_page(cell)))}">{H.esc(cell.rel)}</a>',
                     H.esc(cell_label(cell, several)), H.esc(cell.task),
                     H.state_span(cell.state, cell.status), H.esc(score)])
    body.append(H.table(["cell", "method", "task", "status", "score"], rows, raw=True, table_id="cells"))
    crumbs = [("Results", "index.html"), (experiment.name, None)]
    return H.page(page, f"Experiment {experiment.name}", "".join(body), crumbs)


# ---------------------------------------------------------------------------------------------
# Item browser
# ---------------------------------------------------------------------------------------------

@dataclass
class Media:
    """What an item page shows besides the answers."""

    frames: list[tuple[str, str]] = field(default_factory=list)    # (site path, caption)
    frames_note: str = ""
    kept: list[tuple[str, str, str]] = field(default_factory=list)  # (label, site path or "", caption or why not)
    curves: list[tuple[str, list[int]]] = field(default_factory=list)
    per_step: Optional[int] = None
    kept_note: str = ""


def _item_stem(item: Item) -> str:
    return H.slug(f"{item.lmms_task}-{item.doc_id}")


def item_page(experiment: Experiment, item: Item) -> str:
    return f"{experiment.slug}/items/{H.slug(item.task)}/{_item_stem(item)}.html"


def _kept_caption(label: str, record: Any) -> str:
    """What a kept map shows: the tokens kept (of an in-LLM method: those its last stage's layers
    see, the map's mask), the grid, and whether the kept places hold merges."""
    t, h, w = record.geometry.grid
    total = int(record.kept.size)

    def share(mask: Any) -> str:
        return f"{int(mask.sum())}/{total} tokens ({100 * int(mask.sum()) / max(total, 1):.0f}%)"

    if record.stages:
        layer, mask = record.stages[-1]
        text = f"{label}: {share(record.kept)} enter the language model, {share(mask)} from layer {layer} on (shown)"
    else:
        text = f"{label}: {share(record.kept)} kept"
    text += f"; {t} temporal steps of {h}×{w} tokens"
    return text + ("; the kept places hold merged tokens" if record.merged else "")


def item_media(writer: SiteWriter, experiment: Experiment, item: Item, cells: dict[str, tuple[SiteCell, str]],
               docs: TaskDocs, records: dict[str, dict[tuple[str, int, int], Any]], problems: list[str]) -> Media:
    """Draw (or keep) the item's frame strips and kept maps; what its page shows of them."""
    media = Media()
    videos, why = docs.videos(item.doc_id)
    media_dir = f"{experiment.slug}/items/{H.slug(item.task)}/media"
    answered = [cells[a.cell] for a in item.answers if a.cell in cells]
    if not videos:
        media.frames_note = f"No frames: {why}."
    readings = sorted({(c.spec.frames, c.spec.plugin) for c, _ in answered if c.spec is not None})
    for number, video in enumerate(videos):
        for frames, plugin in readings:
            reader = "llava" if "llava" in plugin else "qwen"
            rel = f"{media_dir}/{_item_stem(item)}-v{number}-{frames}f-{reader}.png"
            try:
                caption = writer.produce(rel, [video], {"frames": frames, "reader": reader},
                                         lambda path: write_frames_strip(path, video, frames, plugin))
            except (OSError, ValueError, RuntimeError) as error:
                problems.append(f"{item.name}: frames of {video} not read: {error}")
                media.frames_note = f"No frames: {video}: {error}."
                continue
            media.frames.append((rel, f"{video.name}: {caption}"))
    with_records = [(c, label) for c, label in answered if records.get(c.rel)]
    if not with_records:
        media.kept_note = ("No kept-token records in these cells (<cell>/kept/rank*.jsonl: the plugins write them "
                           "when the run records kept tokens).")
        return media
    viz_inputs = [Path(vcast.viz.__file__)]  # a change in the drawing redraws the maps
    for cell, label in answered:
        found = [(key, r) for key, r in sorted(records.get(cell.rel, {}).items())
                 if key[0] == item.lmms_task and str(key[1]) == item.doc_id]
        if not found:
            media.kept.append((label, "", "no kept-token records in this cell" if not records.get(cell.rel) else
                               "no kept-token record of this item in this cell"))
            continue
        for (_, _, number), record in found:
            media.curves.append((label if len(found) == 1 else f"{label} video {number}", list(record.budgets)))
            media.per_step = record.geometry.grid[1] * record.geometry.grid[2]
            if number >= len(videos):
                media.kept.append((label, "", f"kept map not drawn: no video {number} ({why or 'not found'})"))
                continue
            rel = f"{media_dir}/{_item_stem(item)}-v{number}-kept-{H.slug(cell.rel.replace('/', '--'))}.png"
            inputs = [videos[number], *cell.source.kept_files(), *viz_inputs]
            try:
                writer.produce(rel, inputs, {"cell": cell.rel, "video": number},
                               lambda path, video=videos[number], record=record: write_kept_map(path, video, record))
            except (OSError, ValueError, RuntimeError) as error:
                problems.append(f"{item.name}: kept map of {cell.rel} not drawn: {error}")
                media.kept.append((label, "", f"kept map not drawn: {error}"))
                continue
            media.kept.append((label, rel, _kept_caption(label, record)))
    return media


def render_item(experiment: Experiment, item: Item, media: Media, previous: Optional[Item], following: Optional[Item]
                ) -> str:
    page = item_page(experiment, item)
    body = []
    links = []
    if previous is not None:
        links.append(f'<a href="{H.esc(H.href(page, item_page(experiment, previous)))}">← {H.esc(previous.name)}</a>')
    if following is not None:
        target = H.href(page, item_page(experiment, following))
        links.append(f'<a href="{H.esc(target)}">{H.esc(following.name)} →</a>')
    if links:
        body.append(f"<p>{' · '.join(links)}</p>\n")
    body.append(f"<h2>Question</h2>\n<pre class=\"question\">{H.esc(item.question or '(not logged)')}</pre>\n"
                f"<p>Right answer: <strong class=\"target\">{H.esc(item.target or '(not logged)')}</strong></p>\n")
    body.append("<h2>Frames</h2>\n")
    for rel, caption in media.frames:
        body.append(f'<figure><img src="{H.esc(H.href(page, rel))}" alt="frames"><figcaption>{H.esc(caption)}'
                    "</figcaption></figure>\n")
    if media.frames_note:
        body.append(f"<p class=\"note\">{H.esc(media.frames_note)}</p>\n")
    rows = []
    for answer in item.answers:
        verdict = ("<span class=\"right\">right</span>" if answer.correct else "<span class=\"wrong\">wrong</span>"
                   if answer.correct is not None else "")
        cell_link = f'<a href="{H.esc(H.href(page, experiment.cell_page(answer.cell)))}">cell</a>'
        rows.append([H.esc(answer.label), H.esc(answer.answer), H.esc(answer.reply), verdict, cell_link])
    body.append("<h2>Answers</h2>\n" + H.table(["method", "answer", "reply", "correct", "cell"], rows, raw=True,
                                                table_id="answers"))
    body.append("<h2>Kept tokens</h2>\n")
    if media.kept_note:
        body.append(f"<p class=\"note\">{H.esc(media.kept_note)}</p>\n")
    if media.curves:
        body.append("<h3>Tokens kept per temporal step</h3>\n" + H.budget_svg(media.curves, media.per_step))
    for label, rel, caption in media.kept:
        if rel:
            body.append(f'<figure class="kept"><img src="{H.esc(H.href(page, rel))}" alt="kept tokens: '
                        f'{H.esc(label)}" loading="lazy"><figcaption>{H.esc(caption)}</figcaption></figure>\n')
        else:
            body.append(f"<p><strong>{H.esc(label)}</strong>: <span class=\"muted\">{H.esc(caption)}</span></p>\n")
    crumbs = [("Results", "index.html"), (experiment.name, experiment.page), ("Items", experiment.items_page),
              (item.name, None)]
    title = item.name if item.task == item.lmms_task else f"{item.task}: {item.name}"
    return H.page(page, title, "".join(body), crumbs)


def render_items_index(experiment: Experiment, by_task: dict[str, list[Item]], totals: dict[str, int]) -> str:
    page = experiment.items_page
    body = ["<p>One page per question: the prompt, every method's answer side by side, the frames the model read "
            "and, where recorded, the tokens each method kept. Type to filter the rows.</p>\n"]
    for task, items in by_task.items():
        table_id = f"items-{H.slug(task)}"
        shown = f"{len(items)} items" if len(items) == totals[task] else (
            f"the first {len(items)} of {totals[task]} items (--max-items)")
        body.append(f"<h2>{H.esc(task)} ({H.esc(shown)})</h2>\n"
                    f'<input class="filter" type="search" placeholder="filter: words in any column" '
                    f'data-table="{H.esc(table_id)}">\n')
        rows = []
        for item in items:
            right = sum(1 for a in item.answers if a.correct)
            wrong = [a.label for a in item.answers if a.correct is False]
            first = (item.question.strip().splitlines() or [""])[0]
            rows.append([f'<a href="{H.esc(H.href(page, item_page(experiment, item)))}">{H.esc(item.name)}</a>',
                         H.esc(first), H.esc(item.target), H.esc(f"{right}/{len(item.answers)}"),
                         H.esc(", ".join(wrong))])
        body.append(H.table(["item", "question", "answer", "right", "wrong"], rows, raw=True, table_id=table_id))
    crumbs = [("Results", "index.html"), (experiment.name, experiment.page), ("Items", None)]
    return H.page(page, f"Items of {experiment.name}", "".join(body), crumbs, script=H.FILTER_JS)


def build_items(writer: SiteWriter, experiment: Experiment, problems: list[str], max_items: Optional[int] = None
                ) -> bool:
    """The item browser of ``experiment`` (the first ``max_items`` items of each task, all by
    default); whether it has any item."""
    several = len({c.frames for c in experiment.cells}) > 1
    finished = [(c, cell_label(c, several)) for c in sorted(experiment.cells, key=_order) if c.finished]
    by_task, trouble = read_answers(finished, load_task_scorings())
    problems += [f"{experiment.name}: {p}" for p in trouble]
    if not by_task:
        return False
    totals = {task: len(items) for task, items in by_task.items()}
    if max_items is not None:
        by_task = {task: items[:max_items] for task, items in by_task.items()}
    cells = {c.rel: (c, label) for c, label in finished}
    records: dict[str, dict[tuple[str, int, int], Any]] = {}
    for cell, _ in finished:
        try:
            records[cell.rel] = cell.source.kept()
        except (OSError, ValueError, KeyError) as error:
            problems.append(f"{experiment.name}: {cell.rel}: kept-token records not read: {error}")
            records[cell.rel] = {}
    for task, items in by_task.items():
        docs: dict[str, TaskDocs] = {}
        for index, item in enumerate(items):
            if item.lmms_task not in docs:
                include = next((c.spec.include_paths for c, _ in finished
                                if c.spec is not None and c.spec.task == task), [])
                docs[item.lmms_task] = TaskDocs(item.lmms_task, include)
            media = item_media(writer, experiment, item, cells, docs[item.lmms_task], records, problems)
            previous = items[index - 1] if index else None
            following = items[index + 1] if index + 1 < len(items) else None
            inputs = [p for c, _ in finished if c.task == task
                      for p in (c.source.record_path, *c.source.kept_files())]
            key = {"item": _item_json(item), "media": media.__dict__, "experiment": experiment.name,
                   "previous": previous.name if previous else None, "next": following.name if following else None}
            writer.text(item_page(experiment, item), inputs, key,
                        lambda item=item, media=media, previous=previous, following=following:
                        render_item(experiment, item, media, previous, following))
    inputs = [c.source.record_path for c, _ in finished]
    key = {task: [_item_json(i) for i in items] for task, items in by_task.items()}
    writer.text(experiment.items_page, inputs, {"items": key, "experiment": experiment.name, "totals": totals},
                lambda: render_items_index(experiment, by_task, totals))
    return True


def _item_json(item: Item) -> dict[str, Any]:
    return {"task": item.task, "lmms_task": item.lmms_task, "doc_id": item.doc_id, "question": item.question,
            "target": item.target, "answers": [a.__dict__ for a in item.answers]}


# ---------------------------------------------------------------------------------------------
# The site
# ---------------------------------------------------------------------------------------------

def render_index(root: Path, experiments: Sequence[Experiment]) -> str:
    rows = []
    for experiment in experiments:
        counts = experiment.counts()
        rows.append([f'<a href="{H.esc(experiment.page)}">{H.esc(experiment.name)}</a>',
                     f"<code>{H.esc(experiment.folder)}</code>",
                     ", ".join(H.state_span(s, f"{counts[s]} {s}") for s in sorted(counts)),
                     H.esc(", ".join(r.path.stem for r in experiment.tables) or "–"),
                     H.esc(str(len(experiment.figures)))])
    body = (f"<p>Results root <code>{H.esc(root)}</code>: {len(experiments)} experiment(s). Built by "
            "<code>python -m vcast.report site</code> from the cells and the report's outputs.</p>\n"
            + H.table(["experiment", "folder", "cells", "tables", "figures"], rows, raw=True, table_id="experiments"))
    return H.page("index.html", "V-CAST results", body)


@dataclass
class SiteBuild:
    """What a build did."""

    index: Path
    written: list[str]
    unchanged: list[str]
    removed: list[str]
    problems: list[str]


def build_site(root: Path, out: Optional[Path] = None, *, compare: Optional[str] = None,
               paper_csv: Path = SHIPPED, max_items: Optional[int] = None) -> SiteBuild:
    """Build (or bring up to date) the site of the results under ``root`` in ``out`` (default
    ``<root>/site``); see the module docstring. ``max_items``: item pages for the first that many
    items of each task only (all by default; each page reads its item's video once).

    Raises:
        FileNotFoundError: ``root`` is not a folder.
        ValueError: ``root`` holds no experiment, ``compare`` is not ``paper`` or ``max_items`` < 1.
    """
    root = Path(root)
    out = Path(out) if out is not None else root / "site"
    if compare not in (None, "paper"):
        raise ValueError(f"compare must be 'paper' or None, got {compare!r}")
    if max_items is not None and max_items < 1:
        raise ValueError(f"--max-items must be at least 1, got {max_items}")
    experiments = find_experiments(root, exclude=out)
    out.mkdir(parents=True, exist_ok=True)
    writer = SiteWriter(out, VERSION)
    problems: list[str] = []
    writer.text(H.STYLE, [], "style", lambda: H.CSS)
    for experiment in experiments:
        for report in [*experiment.tables, *experiment.analyses, *experiment.figures]:
            for path in (report.path, *report.siblings):
                writer.copy(experiment.file(path), path)
        has_items = build_items(writer, experiment, problems, max_items)
        for cell in experiment.cells:
            writer.text(experiment.cell_page(cell), _cell_inputs(cell),
                        {"rel": cell.rel, "status": cell.status, "experiment": experiment.name},
                        lambda cell=cell: render_cell(experiment, cell))
        inputs = [p for r in [*experiment.tables, *experiment.analyses, *experiment.figures]
                  for p in (r.path, *r.siblings, r.path.with_suffix(".md"))]
        if compare:
            inputs += [paper_csv, *(c.source.record_path for c in experiment.cells)]
        key = {"experiment": experiment.name, "folder": str(experiment.folder), "items": has_items,
               "compare": compare, "product": experiment.product.name if experiment.product else None,
               "cells": [(c.rel, c.status, c.scores if c.record is not None else None, c.task or None)
                         for c in experiment.cells],
               "files": [str(r.path) for r in [*experiment.tables, *experiment.analyses, *experiment.figures]]}
        writer.text(experiment.page, inputs, key,
                    lambda experiment=experiment, has_items=has_items:
                    render_experiment(experiment, compare, paper_csv, has_items))
    summary = [(e.name, e.slug, str(e.folder), sorted(e.counts().items()), [r.path.stem for r in e.tables],
                len(e.figures)) for e in experiments]
    writer.text("index.html", [], {"root": str(root), "experiments": summary}, lambda: render_index(root, experiments))
    writer.finish()
    logger.info("site %s: %d file(s) written, %d unchanged, %d removed", out, len(writer.written),
                len(writer.unchanged), len(writer.removed))
    return SiteBuild(out / "index.html", writer.written, writer.unchanged, writer.removed, problems)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``site`` subcommand's options."""
    parser.add_argument("root", nargs="?", type=Path, default=DEFAULT_ROOT,
                        help=f"results root or one experiment's folder (default: {DEFAULT_ROOT})")
    parser.add_argument("--out", type=Path, help="site folder (default: <root>/site)")
    parser.add_argument("--compare", choices=["paper"],
                        help="paper: beside each table in a paper layout, the published value and ours minus it")
    parser.add_argument("--paper-csv", type=Path, default=SHIPPED, help="published numbers (default: the shipped copy)")
    parser.add_argument("--max-items", type=int,
                        help="item pages for the first N items of each task only (default: every item)")


def run(args: argparse.Namespace) -> int:
    """``python -m vcast.report site``: build, print problems (stderr) and where to open it."""
    build = build_site(args.root, args.out, compare=args.compare, paper_csv=args.paper_csv, max_items=args.max_items)
    for problem in build.problems:
        print(f"skipped: {problem}", file=sys.stderr)
    print(f"wrote {len(build.written)} file(s), {len(build.unchanged)} unchanged, {len(build.removed)} removed; "
          f"open file://{build.index.resolve()}")
    return 0
