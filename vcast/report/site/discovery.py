"""The results site's view of a results root: its experiments (folders of sweep cells), each
experiment's cells with their status, and the report files built from them."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from vcast.report.names import method_name
from vcast.report.products import TRADEOFF_FIGURES, Product, TableOutput, find_product
from vcast.report.site import html as H
from vcast.report.site.items import SiteCell
from vcast.results.tree import Cell
from vcast.sweep.cell import REPRODUCE
from vcast.sweep.status import cell_status, planned_cells, tree_cells

logger = logging.getLogger(__name__)

REPORT_SUFFIXES = (".csv", ".png", ".pdf")
SIBLINGS = (".md", ".tex")


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


def product_candidates(product: Product, experiment: str, results_root: Path, profile: str) -> list[Path]:
    """Every file a report build of ``product`` can write for ``experiment``'s tables and figures."""
    tables, figures = product.folder(results_root, "tables"), product.folder(results_root, "figures")
    outputs = product.tables or ((TableOutput(product.name, None, product.experiments),) if product.experiments else ())
    paths = []
    for output in outputs:
        if experiment not in output.experiments:
            continue
        stem = output.stem if profile == REPRODUCE else f"{output.stem}-{profile}"
        paths += [tables / f"{stem}.csv", tables / f"{stem}-analysis.csv"]
        paths += [tables / f"{stem}{figure}{suffix}" for figure in TRADEOFF_FIGURES for suffix in (".png", ".pdf")]
    paths += [figures / f"{name}{suffix}" for name in product.figures for suffix in (".png", ".pdf")]
    return paths


def report_files(folder: Path, product: Optional[Product], experiment: str, profile: str, exclude: Path
                 ) -> tuple[list[ReportFile], list[ReportFile], list[ReportFile]]:
    """(tables, analyses, figures) of an experiment: its target's outputs that exist and the CSV,
    PNG and PDF files in its own folder, each once, sorted by name."""
    found = [p for p in sorted(folder.iterdir()) if p.is_file() and p.suffix in REPORT_SUFFIXES]
    if product is not None:
        found += [p for p in product_candidates(product, experiment, folder.parent, profile) if p.is_file()]
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


def cell_order(cell: SiteCell) -> tuple[Any, ...]:
    spec = cell.spec
    if spec is None:
        return (0, True, 0.0, method_name(""), cell.rel)
    return (int(spec.frames), spec.method != "vanilla", float(spec.ratio), method_name(spec.method), cell.rel)
