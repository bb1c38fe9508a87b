"""The site's build: every page of every experiment, then the index, each written only when what
it shows changed (:class:`vcast.report.site.writer.SiteWriter`); the ``site`` subcommand."""

from __future__ import annotations

import argparse
import hashlib
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from vcast.report.paper import SHIPPED
from vcast.report.site import html as H
from vcast.report.site.cell_page import cell_inputs, render_cell
from vcast.report.site.discovery import Experiment, find_experiments
from vcast.report.site.experiment_page import render_experiment
from vcast.report.site.item_pages import build_items
from vcast.report.site.writer import SiteWriter

logger = logging.getLogger(__name__)

DEFAULT_ROOT = Path("results")
# Renders change with this code: the package's own source is part of every fingerprint.
VERSION = hashlib.sha256(b"".join(p.read_bytes() for p in sorted(Path(__file__).parent.glob("*.py")))).hexdigest()[:16]


def render_index(root: Path, experiments: Sequence[Experiment]) -> str:
    rows = []
    for experiment in experiments:
        counts = experiment.counts()
        rows.append([H.link(experiment.page, H.esc(experiment.name)), H.code(experiment.folder),
                     ", ".join(H.state_span(s, f"{counts[s]} {s}") for s in sorted(counts)),
                     H.esc(", ".join(r.path.stem for r in experiment.tables) or "–"),
                     H.esc(str(len(experiment.figures)))])
    body = (H.paragraph(f"Results root {H.code(root)}: {len(experiments)} experiment(s). Built by "
                        f"{H.code('python -m vcast.report site')} from the cells and the report's outputs.")
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
            writer.text(experiment.cell_page(cell), cell_inputs(cell),
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
