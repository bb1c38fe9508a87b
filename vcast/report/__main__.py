"""``python -m vcast.report``: rebuild the paper's tables and figures from a results tree.

    python -m vcast.report list                              # the targets and what they write
    python -m vcast.report build qwen3vl-8b                  # tables from existing cells
    python -m vcast.report build qwen3vl-8b --run --sweep-args "hydra/launcher=slurm_h100"
    python -m vcast.report build qwen3vl-8b --compare paper  # + our value minus the published one
    python -m vcast.report build qwen3vl-8b --compare clean  # + reproduction minus variant=paper (same grid)
    python -m vcast.report build qwen3vl-8b --profile clean  # the variant=paper table (<stem>-clean.*)
    python -m vcast.report collect --results results --out tidy.csv
    python -m vcast.report analyze qwen3vl-8b                # loyalty, flips, paired intervals, trade-off figure
    python -m vcast.report build qwen3vl-8b --intervals --analysis   # ± in the tables, and the analysis
    python -m vcast.report site results/demo                 # a static site: tables, figures, analysis, cells, items

``--run`` first runs the target's experiments through the sweep (finished cells are skipped),
then writes the report; ``make table-<target>`` does the same (``REPORT_ONLY=1`` skips running).
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
from pathlib import Path
from typing import Optional, Sequence

if __name__ == "__main__":  # before the imports below: a Ctrl-C while they load ends with one line too
    from vcast.interrupt_guard import guard_imports

    guard_imports()

import pandas as pd  # noqa: E402

from vcast.closed_pipe import run_command  # noqa: E402
from vcast.report import site  # noqa: E402
from vcast.report.build_target import (build_product, finished_cells, no_cells_refusal,  # noqa: E402
                                       resolve_target, run_cells_advice, run_experiments, write_analysis_outputs)
from vcast.report.collect import COLUMNS, collect  # noqa: E402
from vcast.report.paper import SHIPPED, PaperTables  # noqa: E402
from vcast.report.products import PRODUCTS, find_product  # noqa: E402
from vcast.report.qualitative import DEFAULT_BASELINES as QUALITATIVE_BASELINES  # noqa: E402
from vcast.report.significance import DEFAULT_RESAMPLES, DEFAULT_SEED  # noqa: E402
from vcast.sweep.cell import REPRODUCE  # noqa: E402
from vcast.sweep.profiles import PROFILES  # noqa: E402

logger = logging.getLogger("vcast.report")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m vcast.report", description=__doc__.split("\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the report targets and what they write")
    build = commands.add_parser("build", help="write a target's tables and figures")
    build.add_argument("target", help=f"one of: {', '.join(PRODUCTS)}; or any experiment folder under --results "
                                      "(a generic table, e.g. adhoc)")
    build.add_argument("--results", type=Path, default=Path("results"), help="results root (default: results)")
    build.add_argument("--out", type=Path, help="output folder (default: <results>/tables and <results>/figures)")
    build.add_argument("--run", action="store_true", help="run the target's experiments through the sweep first")
    build.add_argument("--sweep-args", default="", help="extra sweep overrides, e.g. 'hydra/launcher=slurm_h100'")
    build.add_argument("--model", help="model config to report instead of the table's own (e.g. tiny_qwen3vl)")
    build.add_argument("--profile", choices=PROFILES, default=REPRODUCE,
                       help="whose cells: reproduce (each method's published-row variant, default) or clean "
                            "(variant=paper everywhere; writes <stem>-clean.*)")
    build.add_argument("--compare", choices=["paper", *PROFILES],
                       help="add this table minus another: paper (the published numbers) or a profile's table")
    build.add_argument("--allow-partial", action="store_true",
                       help="build paper tables from partial (limit) cells too, marked with a dagger (refused otherwise)")
    on_by_default = ", ".join(name for name, p in PRODUCTS.items() if p.options) or "none"
    build.add_argument("--kept-tokens", action=argparse.BooleanOptionalAction, default=None,
                       help="add a 'Kept %%' column: video tokens each method really kept (from the run logs); "
                            f"default: the target's own choice (on for {on_by_default})")
    build.add_argument("--intervals", action=argparse.BooleanOptionalAction, default=None,
                       help="print each score with ± half its bootstrap interval (from the per-sample logs); "
                            "default: the target's own choice")
    build.add_argument("--analysis", action=argparse.BooleanOptionalAction, default=None,
                       help="also write <stem>-analysis.{csv,md,tex} and <stem>-tradeoff.{png,pdf} (see analyze); "
                            "default: the target's own choice")
    build.add_argument("--summary", action=argparse.BooleanOptionalAction, default=None,
                       help="with --analysis, also write <stem>-summary.{md,csv}: methods x ratios with ± intervals "
                            "and the paired difference from V-CAST (one benchmark); default: the target's own choice")
    _resampling_arguments(build)
    build.add_argument("--paper-csv", type=Path, default=SHIPPED, help="published numbers (default: the shipped copy)")
    build.add_argument("--ratio", type=float, default=0.25,
                       help="retention ratio of the cells the figures draw (default 0.25)")
    build.add_argument("--frames", type=int,
                       help="frame count of the cells whose recorded budgets the budget figures draw (default: the "
                            "count most of them share)")
    analyze = commands.add_parser(
        "analyze", help="per-sample analysis (loyalty, flips, paired bootstrap, McNemar) and the trade-off figure")
    analyze.add_argument("target", help="a report target or an experiment folder under --results (as for build)")
    analyze.add_argument("--results", type=Path, default=Path("results"), help="results root (default: results)")
    analyze.add_argument("--out", type=Path,
                         help="output folder (default: <results>/tables; the demo's: <results>/demo)")
    analyze.add_argument("--model", help="model config of the trade-off figure (default: the table's)")
    analyze.add_argument("--profile", choices=PROFILES, default=REPRODUCE, help="whose cells (default reproduce)")
    analyze.add_argument("--show", action="store_true", help="print the Markdown analysis too")
    _resampling_arguments(analyze)
    qualitative = commands.add_parser(
        "qualitative", help="fig:badcase: items V-CAST answers right and chosen baselines wrong, with kept maps")
    qualitative.add_argument("experiment", help="the experiment whose cells to read (a folder under --results)")
    qualitative.add_argument("--results", type=Path, default=Path("results"), help="results root (default: results)")
    qualitative.add_argument("--out", type=Path, help="output folder (default: where the experiment's target writes "
                                                      "its figures: <results>/demo for the demo, else <results>/figures)")
    qualitative.add_argument("--baselines", default=",".join(QUALITATIVE_BASELINES),
                             help="methods that must answer wrong, comma-separated (default: %(default)s)")
    qualitative.add_argument("--vanilla-wrong", action="store_true", help="the unpruned model must answer wrong too")
    qualitative.add_argument("--items", type=int, default=3, help="items to draw (default 3)")
    qualitative.add_argument("--seed", type=int, default=0, help="seed of the choice among qualifying items")
    qualitative.add_argument("--ratio", type=float, default=0.25, help="the cells' retention ratio (default 0.25)")
    qualitative.add_argument("--frames", type=int, help="the cells' frame count (default: the most common)")
    qualitative.add_argument("--model", help="model config of the cells (default: any)")
    site.add_arguments(commands.add_parser(
        "site", help="a static results site (opens from disk): tables, figures, analysis, cells, items"))
    tidy = commands.add_parser("collect", help="the tidy frame of a results tree (CSV)")
    tidy.add_argument("--results", type=Path, default=Path("results"))
    tidy.add_argument("--out", type=Path, help="CSV path (default: print)")
    return parser


def _resampling_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--resamples", type=int, default=DEFAULT_RESAMPLES,
                        help=f"bootstrap resamples (default {DEFAULT_RESAMPLES})")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help=f"seed of the bootstrap's numpy Generator (default {DEFAULT_SEED})")


def _analyze(args: argparse.Namespace) -> int:
    try:
        product = resolve_target(args.target, args.results)
    except ValueError as error:
        _parser().error(str(error))
    if args.resamples < 1:
        _parser().error(f"--resamples must be at least 1, got {args.resamples}")
    collection = collect(args.results) if args.results.is_dir() else None
    frame = collection.frame if collection else pd.DataFrame(columns=COLUMNS)
    frame = frame[frame["profile"] == args.profile]
    if not finished_cells(frame, product):
        print(no_cells_refusal(product, args.results, args.profile), file=sys.stderr)
        return 1
    out_dir = args.out or product.folder(args.results, "tables")
    written, problems = write_analysis_outputs(product, args.results, frame, out_dir, profile=args.profile,
                                               model=args.model, resamples=args.resamples, seed=args.seed)
    for path in written:
        print(f"wrote {path}")
        if args.show and path.name.endswith("-analysis.md"):
            print(path.read_text(encoding="utf-8"))
    for problem in problems:
        print(f"skipped: {problem}", file=sys.stderr)
    return 0 if any(p.name.endswith("-analysis.csv") for p in written) else 1


def _qualitative(args: argparse.Namespace) -> int:
    from vcast.report.qualitative import write_qualitative

    if args.items < 1:
        _parser().error(f"--items must be at least 1, got {args.items}")
    baselines = [name.strip() for name in args.baselines.split(",") if name.strip()]
    try:
        written, problems = write_qualitative(args.results, args.experiment,
                                              args.out or qualitative_folder(args.experiment, args.results),
                                              ratio=args.ratio, frames=args.frames, baselines=baselines,
                                              vanilla_wrong=args.vanilla_wrong, items=args.items, seed=args.seed,
                                              model=args.model)
    except (ValueError, FileNotFoundError) as error:
        product = find_product(args.experiment)
        missing = any(words in str(error) for words in ("no finished cell", "no results folder"))
        advice = f"\n{run_cells_advice(product, args.results, REPRODUCE)}" if product and missing else ""
        print(f"qualitative: {error}{advice}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    for problem in problems:
        print(f"skipped: {problem}", file=sys.stderr)
    return 0 if written else 1


def qualitative_folder(experiment: str, results: Path) -> Path:
    """Where ``qualitative <experiment>`` writes: with the other figures of the experiment's
    target (``demo``: ``<results>/demo``), else in ``<results>/figures``."""
    product = find_product(experiment)
    return product.folder(results, "figures") if product else Path(results) / "figures"


def main(argv: Optional[Sequence[str]] = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = _parser().parse_args(argv)
    if args.command == "list":
        for product in PRODUCTS.values():
            outputs = [f"{t.stem}.{{csv,tex,md}}" for t in product.tables] + [f"{f}.{{png,pdf}}" for f in product.figures]
            print(f"{product.name:16} experiments: {', '.join(product.experiments) or '-':55} "
                  f"writes: {', '.join(outputs)}  ({product.description})")
        return 0
    if args.command == "analyze":
        return _analyze(args)
    if args.command == "qualitative":
        return _qualitative(args)
    if args.command == "site":
        try:
            return site.run(args)
        except (FileNotFoundError, ValueError) as error:
            _parser().error(str(error))
    if args.command == "collect":
        if not args.results.is_dir():
            _parser().error(f"no results folder {args.results}: run a sweep first (make demo writes results/demo)")
        collection = collect(args.results)
        text = collection.frame.to_csv(index=False)
        if args.out:
            from vcast.atomic_files import atomic_write_text

            atomic_write_text(args.out, text)
        else:
            sys.stdout.write(text)
        return 1 if collection.problems else 0
    try:
        product = resolve_target(args.target, args.results)
    except ValueError as error:
        _parser().error(str(error))
    compare_profile = args.compare if args.compare in PROFILES else None
    if compare_profile == args.profile:
        _parser().error(f"--compare {args.compare} compares the profile with itself; pick the other one")
    failed = []
    if args.run:
        for profile in (args.profile, compare_profile):
            if profile is not None:
                failed += run_experiments(product, args.results, [*shlex.split(args.sweep_args), f"profile={profile}"])
    paper = PaperTables(args.paper_csv) if args.compare == "paper" else None
    written, problems = build_product(product, args.results, out=args.out, model=args.model, paper=paper, args=args,
                                      profile=args.profile, compare_profile=compare_profile,
                                      allow_partial=args.allow_partial)
    for path in written:
        print(f"wrote {path}")
    for problem in problems:
        print(problem if problem.startswith(("refused", "left")) else f"skipped: {problem}", file=sys.stderr)
    return 1 if failed or any(problem.startswith("refused") for problem in problems) else 0


if __name__ == "__main__":
    raise SystemExit(run_command(main))
