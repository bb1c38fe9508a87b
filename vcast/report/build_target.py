"""Build a report target: run its experiments through the sweep when asked, then write its tables
(CSV, LaTeX, Markdown), figures, per-sample analysis and summary from the results tree, or say
why not (no finished cell, a refused partial run) and how to run the missing cells. The command
line is :mod:`vcast.report.__main__`."""

from __future__ import annotations

import argparse
import logging
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

import pandas as pd

from vcast.report.analysis import accuracy_intervals, compare_all
from vcast.report.analysis_export import SUFFIX as ANALYSIS_SUFFIX
from vcast.report.analysis_export import write_analysis
from vcast.report.collect import COLUMNS, collect
from vcast.report.comparison import ProfileTable
from vcast.report.export import write_table
from vcast.report.intervals import attach_intervals
from vcast.report.layouts import LAYOUTS, generic_layout
from vcast.report.paper import PaperTables
from vcast.report.per_sample import CellItemsCollection, collect_items
from vcast.report.products import PRODUCTS, TRADEOFF_FIGURE, TRADEOFF_FIGURES, Product, TableOutput, find_product
from vcast.report.scoring import load_task_scorings
from vcast.report.significance import DEFAULT_RESAMPLES, DEFAULT_SEED
from vcast.report.summary_table import SUFFIX as SUMMARY_SUFFIX
from vcast.report.summary_table import SUFFIXES as SUMMARY_SUFFIXES
from vcast.report.summary_table import summary_table, write_summary
from vcast.report.tables import build_table
from vcast.report.tradeoff import plot_tradeoff
from vcast.sweep.cell import REPRODUCE, experiment_folder
from vcast.sweep.grid import experiment_methods
from vcast.sweep.profiles import PROFILES


logger = logging.getLogger("vcast.report")

REPO = Path(__file__).resolve().parents[2]
TABLE_SUFFIXES = (".csv", ".tex", ".md")
FIGURE_SUFFIXES = (".png", ".pdf")


def _figure_frame_scaling(frame: pd.DataFrame, out: Path, args: argparse.Namespace) -> list[Path]:
    from vcast.report.figures import plot_frame_scaling

    return plot_frame_scaling(frame, out / "frame-scaling", model=args.model or "qwen3vl_8b", ratio=args.ratio)


def _figure_budget_gains(frame: pd.DataFrame, out: Path, args: argparse.Namespace) -> list[Path]:
    from vcast.report.figures import plot_budget_gains

    return plot_budget_gains(frame, out / "budget-gains", model=args.model or "qwen3vl_8b", ratio=args.ratio)


def _figure_llava_efficiency(frame: pd.DataFrame, out: Path, args: argparse.Namespace) -> list[Path]:
    from vcast.report.figures import plot_efficiency_bars

    return plot_efficiency_bars(frame, out / "llava-ov-efficiency", model=args.model or "llava_ov_7b",
                                ratio=args.ratio)


def _recorded_budgets(figure: str, frame: pd.DataFrame, out: Path, args: argparse.Namespace) -> list[Path]:
    from vcast.report.budget_profiles_figure import plot_budget_profiles
    from vcast.report.recorded_budgets import CURVE_LABELS, recorded_panels

    panels, group = recorded_panels(frame, args.results, figure, ratio=args.ratio, experiments=args.experiments,
                                    model=args.model_config, frames=args.frames, seed=args.seed)
    return plot_budget_profiles(panels, out / figure, ratio=args.ratio, frames_per_step=group, labels=CURVE_LABELS)


def _figure_budget_profiles(frame: pd.DataFrame, out: Path, args: argparse.Namespace) -> list[Path]:
    return _recorded_budgets("budget-profiles", frame, out, args)


def _figure_budget_analysis(frame: pd.DataFrame, out: Path, args: argparse.Namespace) -> list[Path]:
    return _recorded_budgets("budget-analysis", frame, out, args)


def figure_arguments(args: argparse.Namespace, product: Product, results: Path,
                     model: Optional[str] = None) -> argparse.Namespace:
    """``args`` and where the figures read their cells: the results root, the product's
    experiments and model config (the budget figures draw the budgets those cells recorded)."""
    filled = argparse.Namespace(**vars(args))
    filled.results, filled.experiments, filled.model_config = results, product.experiments, model or product.model
    for name, default in (("frames", None), ("seed", DEFAULT_SEED), ("ratio", 0.25), ("model", None)):
        if not hasattr(filled, name):
            setattr(filled, name, default)
    return filled


FIGURES: dict[str, Callable[[pd.DataFrame, Path, argparse.Namespace], list[Path]]] = {
    "frame-scaling": _figure_frame_scaling,
    "budget-gains": _figure_budget_gains,
    "llava-ov-efficiency": _figure_llava_efficiency,
    "budget-profiles": _figure_budget_profiles,
    "budget-analysis": _figure_budget_analysis,
}


def run_experiments(product: Product, results: Path, sweep_args: Sequence[str]) -> list[str]:
    """Run the product's experiments through the sweep (its launcher from ``sweep_args``); the
    experiments whose sweep command failed."""
    failed = []
    for experiment in product.experiments:
        command = [sys.executable, "-m", "vcast.sweep", f"experiment={experiment}", f"results_root={results}",
                   *sweep_args, "-m"]
        logger.info("running %s", " ".join(shlex.quote(c) for c in command))
        if subprocess.run(command).returncode != 0:
            logger.error("the sweep of experiment %s failed; the report shows the cells that exist", experiment)
            failed.append(experiment)
    return failed


def _table_model(output: TableOutput, product: Product, frame: pd.DataFrame, model: Optional[str]) -> Optional[str]:
    """The model whose cells fill ``output``: ``--model``, the layout's, the product's, else the first found."""
    if model:
        return model
    if output.layout is not None:
        return LAYOUTS[output.layout].model
    rows = frame[frame["experiment"].isin(output.experiments)]
    return product.model if product.model in set(rows["model"]) else (rows["model"].iloc[0] if len(rows) else None)


def _outputs(product: Product) -> tuple[TableOutput, ...]:
    """The product's tables, or one pseudo-table over all its experiments (figure-only products)."""
    return product.tables or ((TableOutput(product.name, None, product.experiments),) if product.experiments else ())


def write_analysis_outputs(product: Product, results: Path, frame: pd.DataFrame, out_dir: Path, *,
                           profile: str = REPRODUCE, model: Optional[str] = None,
                           resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED,
                           items: Optional[CellItemsCollection] = None,
                           intervals: Optional[pd.DataFrame] = None) -> tuple[list[Path], list[str]]:
    """Per table of ``product``: ``<stem>-analysis.{csv,md,tex}`` (loyalty, flips, paired
    intervals, McNemar) and ``<stem>-tradeoff.{png,pdf}`` (past 10 methods also
    ``<stem>-tradeoff-methods.{png,pdf}``); with ``intervals`` (the cells'
    bootstrap intervals) also ``<stem>-summary.{md,csv}`` (:mod:`vcast.report.summary_table`);
    returns (written paths, problems)."""
    scorings = load_task_scorings()
    if items is None:
        items = collect_items(results, experiments=product.experiments) if results.is_dir() else CellItemsCollection()
    problems = [f"per-sample analysis: {problem}" for problem in items.problems]
    written: list[Path] = []
    for output in _outputs(product):
        stem = output.stem if profile == REPRODUCE else f"{output.stem}-{profile}"
        cells = [c for c in items.cells if c.experiment in output.experiments and c.profile == profile]
        comparisons = compare_all(cells, scorings, resamples=resamples, seed=seed)
        if comparisons.empty:
            problems.append(f"analysis {stem}: no method cell with a vanilla or V-CAST cell to compare with")
        written += write_analysis(comparisons, out_dir / stem, stem)
        table_model = _table_model(output, product, frame, model)
        if intervals is not None and table_model is not None:
            try:
                summary = summary_table(frame, intervals, comparisons, model=table_model,
                                        experiments=output.experiments,
                                        order=[m for e in output.experiments for m in experiment_methods(e)])
                written += write_summary(summary, out_dir / stem)
            except ValueError as error:
                problems.append(f"summary {stem}: {error}")
        try:
            if table_model is None:
                raise ValueError("no cells")
            written += plot_tradeoff(frame, out_dir / f"{stem}{TRADEOFF_FIGURE}", model=table_model,
                                     experiments=output.experiments)
        except ValueError as error:
            problems.append(f"figure {stem}{TRADEOFF_FIGURE}: {error}")
            logger.warning("trade-off figure %s not drawn: %s", stem, error)
    return written, problems


def build_option(name: str, product: Product, args: Optional[argparse.Namespace]) -> bool:
    """Build option ``name`` (``kept_tokens``, ``intervals``, ``analysis``): the command line's
    choice where it made one, else the target's own (:attr:`Product.options`)."""
    chosen = getattr(args, name, None) if args is not None else None
    return bool(chosen) if chosen is not None else name in product.options


def output_folders(product: Product, results: Path, out: Optional[Path] = None) -> tuple[Path, Path]:
    """The (tables, figures) folders of a build of ``product``: ``out`` for both when given."""
    return out or product.folder(results, "tables"), out or product.folder(results, "figures")


def possible_outputs(product: Product, out: Optional[Path], results: Path, profile: str = REPRODUCE) -> list[Path]:
    """Every file a build of ``product`` under ``profile`` can write (tables, their analysis and
    trade-off figure, figures), whichever options it runs with."""
    tables, figures = output_folders(product, results, out)
    paths = []
    for output in _outputs(product):
        stem = output.stem if profile == REPRODUCE else f"{output.stem}-{profile}"
        if output.layout is not None or product.tables:
            paths += [tables / f"{stem}{suffix}" for suffix in TABLE_SUFFIXES]
        paths += [tables / f"{stem}{ANALYSIS_SUFFIX}{suffix}" for suffix in TABLE_SUFFIXES]
        paths += [tables / f"{stem}{SUMMARY_SUFFIX}{suffix}" for suffix in SUMMARY_SUFFIXES]
        paths += [tables / f"{stem}{figure}{suffix}" for figure in TRADEOFF_FIGURES for suffix in FIGURE_SUFFIXES]
    paths += [figures / f"{name}{suffix}" for name in product.figures for suffix in FIGURE_SUFFIXES]
    return paths


def earlier_outputs(product: Product, out: Optional[Path], results: Path, written: Sequence[Path],
                    profile: str = REPRODUCE) -> list[str]:
    """One line per output of ``product`` that exists but this build did not write (an earlier
    build with other options wrote it): kept, and named so that no one reads it as this build's."""
    now = {Path(path).resolve() for path in written}
    lines = []
    for path in possible_outputs(product, out, results, profile):
        if path.is_file() and path.resolve() not in now:
            stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(path.stat().st_mtime))
            lines.append(f"left from an earlier build (written {stamp}), not rewritten by this one: {path}")
    return lines


def build_product(product: Product, results: Path, *, out: Optional[Path] = None, model: Optional[str] = None,
                  paper: Optional[PaperTables] = None, args: Optional[argparse.Namespace] = None,
                  profile: str = REPRODUCE, compare_profile: Optional[str] = None,
                  allow_partial: bool = False) -> tuple[list[Path], list[str]]:
    """Write the product's tables and figures; returns (written paths, problems).

    ``profile``: whose cells fill the tables (``reproduce``, or ``clean`` into ``<stem>-clean.*``);
    ``compare_profile``: add the difference to the same tables built from that profile's cells.
    A paper table built from partial (``limit``) cells is refused (a problem starting with
    ``refused``) unless ``allow_partial``; then, and in ad-hoc tables, their rows are marked ``†``.
    A product with no finished cell writes nothing (refused, with how to run its cells). Outputs
    of an earlier build that this one did not rewrite are named (problems starting with ``left``).
    """
    folders = {experiment_folder(e, p) for e in product.experiments for p in PROFILES} if product.experiments else None
    collection = collect(results, folders=folders) if results.is_dir() else None
    every_profile = collection.frame if collection else pd.DataFrame(columns=COLUMNS)
    frame = every_profile[every_profile["profile"] == profile]
    problems = list(collection.problems) if collection else [f"no results folder {results}"]
    tables, figures = output_folders(product, results, out)
    if product.experiments and not finished_cells(frame, product):
        return [], [*problems, no_cells_refusal(product, results, profile)]
    kept_tokens = build_option("kept_tokens", product, args)
    intervals = build_option("intervals", product, args)
    resamples = int(getattr(args, "resamples", DEFAULT_RESAMPLES) if args is not None else DEFAULT_RESAMPLES)
    seed = int(getattr(args, "seed", DEFAULT_SEED) if args is not None else DEFAULT_SEED)
    analysis = build_option("analysis", product, args)
    items = None
    if intervals or analysis:
        items = collect_items(results, experiments=product.experiments) if results.is_dir() else CellItemsCollection()
    interval_frame = (accuracy_intervals(items.cells, load_task_scorings(), resamples=resamples, seed=seed)
                      if intervals and items is not None else None)
    written: list[Path] = []
    for output in product.tables:
        if output.layout is None:
            rows = frame[frame["experiment"].isin(output.experiments)]
            if rows.empty:
                problems.append(f"table {output.stem}: no cells of profile {profile}")
                continue
            layout = generic_layout(rows, model or product.model or rows["model"].iloc[0], key=output.stem)
        else:
            layout = LAYOUTS[output.layout]
        table = build_table(frame, layout, model=model, experiments=output.experiments, kept_tokens=kept_tokens)
        comparison = paper
        if compare_profile is not None:
            other = every_profile[every_profile["profile"] == compare_profile]
            comparison = ProfileTable(build_table(other, layout, model=model, experiments=output.experiments,
                                                  kept_tokens=kept_tokens), compare_profile)
        stem = output.stem if profile == REPRODUCE else f"{output.stem}-{profile}"
        if interval_frame is not None:
            attach_intervals(table, interval_frame, experiments=output.experiments, profile=profile)
        if table.partial and output.layout is not None and not allow_partial:
            cells = "; ".join(f"{cell} (limit {limit:g})" for cell, limit in sorted(table.partial.items()))
            problems.append(f"refused table {stem}: it would print partial runs as results: {cells}. Run those "
                            "cells without limit (rerun_mismatched=true), or pass --allow-partial to mark them")
            continue
        written += write_table(table, tables / stem, comparison)
    figure_args = figure_arguments(args or argparse.Namespace(), product, results, model) if product.figures else None
    for name in product.figures:
        try:
            written += FIGURES[name](frame, figures, figure_args)
        except ValueError as error:
            problems.append(f"figure {name}: {error}")
            logger.warning("figure %s not drawn: %s", name, error)
    if analysis:
        summary = build_option("summary", product, args)
        if summary and interval_frame is None and items is not None:
            interval_frame = accuracy_intervals(items.cells, load_task_scorings(), resamples=resamples, seed=seed)
        more, trouble = write_analysis_outputs(product, results, frame, tables, profile=profile,
                                               model=model, resamples=resamples, seed=seed, items=items,
                                               intervals=interval_frame if summary else None)
        written += more
        problems += trouble
    return written, problems + earlier_outputs(product, out, results, written, profile)


def make_target(product: Product) -> Optional[str]:
    """``table-<name>`` for a paper or extended table (the Makefile's REPORT_TABLES: the targets
    with tables in the shared tables folder), else None."""
    return f"table-{product.name}" if product.tables and product.out_dir is None else None


def finished_cells(frame: pd.DataFrame, product: Product) -> bool:
    """Whether ``frame`` (one profile's) holds a finished cell of ``product``'s experiments."""
    return bool((frame["experiment"].isin(product.experiments) & (frame["status"] == "ok")).any())


def no_cells_refusal(product: Product, results: Path, profile: str) -> str:
    """Why nothing of ``product`` was written: the pre-flight problems that keep its cells from
    running on this machine first, then the command that runs them (the command just run is never
    the only advice: ``make table-*`` runs the sweep itself)."""
    from vcast.sweep.grid import CONFIG_DIR
    from vcast.sweep.start import sweep_machine_problems

    head = (f"refused {product.name}: no finished cell of experiment {', '.join(product.experiments)} (profile "
            f"{profile}) under {results}; nothing written.")
    configured = [e for e in product.experiments if (CONFIG_DIR / "experiment" / f"{e}.yaml").is_file()]
    if not configured:  # an ad-hoc folder: only the sweep that made it knows its grid
        return head + (f" Run its cells again with the sweep command that made them (python -m vcast.sweep.status "
                       f"{results / product.experiments[0]} lists them and their errors)")
    lines = [head]
    for experiment in configured:
        problems = sweep_machine_problems([f"experiment={experiment}", *_sweep_words(results, profile)])
        if problems:
            lines.append(f"Its cells cannot run on this machine yet (pre-flight of experiment {experiment}):")
            lines += [f"  - {problem}" for problem in problems]
    lines.append(run_cells_advice(product, results, profile, blocked=len(lines) > 1))
    return "\n".join(lines)


def _sweep_words(results: Path, profile: str) -> list[str]:
    return ([] if profile == REPRODUCE else [f"profile={profile}"]) + (
        [] if Path(results) == Path("results") else [f"results_root={results}"])


def run_cells_advice(product: Product, results: Path, profile: str, blocked: bool = False) -> str:
    """``Run its cells: ...``: the sweep of each of ``product``'s experiments (or its own make target,
    ``make demo``, which also builds it), then the command that rebuilds it."""
    words = _sweep_words(results, profile)
    sweeps = " and ".join(f"python -m vcast.sweep experiment={e} {' '.join(words)}".rstrip() + " -m"
                          for e in product.experiments)
    target = make_target(product)
    rebuild = (f"make {target} REPORT_ONLY=1" + ("" if profile == REPRODUCE else f" PROFILE={profile}")
               + ("" if Path(results) == Path("results") else f" RESULTS={results}")) if target else (
        f"python -m vcast.report build {product.name}" + ("" if profile == REPRODUCE else f" --profile {profile}")
        + ("" if Path(results) == Path("results") else f" --results {results}"))
    own = f"make {product.make}, or " if product.make and not words else ""
    return (f"Run its cells{' once those are fixed' if blocked else ''}: {own}{sweeps} (hydra/launcher=slurm_h100 "
            f"for a SLURM job array), then rebuild: {rebuild}")


def resolve_target(name: str, results: Path) -> Product:
    """The report target ``name`` names (its own name, with underscores, or its experiment's:
    :func:`vcast.report.products.find_product`), else a generic table of the experiment folder."""
    return find_product(name) or adhoc_product(name, results)


def adhoc_product(experiment: str, results: Path) -> Product:
    """A table of any experiment's cells (``results/<experiment>/``) in the generic layout: one row
    per method (and variant), a column per task, ratio and frame count that the cells have."""
    folder = Path(results) / experiment
    if not folder.is_dir():
        found = sorted(p.name for p in Path(results).iterdir() if p.is_dir() and not p.name.startswith(".")
                       and p.name not in ("tables", "figures")) if Path(results).is_dir() else []
        raise ValueError(f"{experiment!r} is neither a report target ({', '.join(PRODUCTS)}) nor an experiment "
                         f"folder in {results} (experiments there: {', '.join(found) or 'none'})")
    return Product(experiment, (experiment,), (TableOutput(experiment, None, (experiment,)),),
                   description=f"the cells of results/{experiment} in the generic layout")
