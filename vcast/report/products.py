"""What each ``make table-*`` / ``figure-*`` target runs and writes.

A :class:`Product` names the sweep experiments it needs (``configs/experiment/<name>.yaml``),
the tables it writes (``<out>/<stem>.{csv,tex,md}``, built from those experiments' cells) and
the figures (``<out>/<stem>.{png,pdf}``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional


@dataclass(frozen=True)
class TableOutput:
    stem: str
    layout: Optional[str]         # a key of vcast.report.layouts.LAYOUTS; None = generic layout
    experiments: tuple[str, ...]


@dataclass(frozen=True)
class Product:
    name: str
    experiments: tuple[str, ...]
    tables: tuple[TableOutput, ...] = ()
    figures: tuple[str, ...] = ()  # keys of vcast.report.__main__.FIGURES
    out_dir: Optional[str] = None  # default <results>/tables (tables) and <results>/figures
    model: Optional[str] = None    # model config for a generic layout
    description: str = ""
    # What every build of this target writes beyond the tables (BUILD_OPTIONS), whichever command
    # builds it (make, report build): one target, one set of outputs with the same columns.
    options: tuple[str, ...] = ()
    # The make target that runs its cells and builds it, for a target with no finished cell (``demo``); the paper
    # tables' is their table-<name> target (vcast.report.__main__.make_target).
    make: Optional[str] = None

    def folder(self, results: Path, kind: Literal["tables", "figures"]) -> Path:
        """Where its outputs of ``kind`` (``tables``, ``figures``) go under ``results``: its own
        ``<results>/<out_dir>`` for a target that has one (the demo's: every output together), else
        the folder shared by the paper's targets, ``<results>/<kind>``."""
        return Path(results) / (self.out_dir or kind)


# The build options a target may turn on by default (``python -m vcast.report build --help``).
BUILD_OPTIONS = ("kept_tokens", "intervals", "analysis", "summary")
# The trade-off figures a table's analysis draws, after its stem: the figure, and past ten methods every
# method one panel each (vcast.report.tradeoff.plot_tradeoff).
TRADEOFF_FIGURE, TRADEOFF_PANELS = "-tradeoff", "-tradeoff-methods"
TRADEOFF_FIGURES = (TRADEOFF_FIGURE, TRADEOFF_PANELS)


def _single(name: str, experiment: str, layout: str, description: str, figures: tuple[str, ...] = ()) -> Product:
    return Product(name, (experiment,), (TableOutput(name, layout, (experiment,)),), figures, description=description)


PRODUCTS: dict[str, Product] = {product.name: product for product in (
    _single("qwen3vl-8b", "qwen3vl_8b", "qwen_results", "tab:qwen_results"),
    _single("qwen3vl-8b-r035", "qwen3vl_8b_r035", "qwen_0.35_results", "tab:qwen_0.35_results"),
    _single("qwen3vl-32b", "qwen3vl_32b", "qwen3vl_32b", "tab:qwen3vl_32b"),
    _single("qwen3vl-moe", "qwen3vl_moe", "qwen3vl_moe", "tab:qwen3vl_moe"),
    _single("llava-ov-7b", "llava_ov", "llava_ov_results", "tab:llava_ov_results + fig:llava_ov_efficiency",
            figures=("llava-ov-efficiency",)),
    _single("llava-video-7b", "llava_video", "llava_video_results", "tab:llava_video_results"),
    _single("efficiency", "efficiency", "efficiency_comparison", "tab:efficiency_comparison"),
    _single("rope", "rope", "rope", "tab:rope"),
    Product("extended", ("extended",), (TableOutput("extended", None, ("extended",)),), model="qwen3vl_8b",
            description="beyond the paper: EVS, fewer frames, downsample, random, VidCom2 and V-CAST"),
    Product("ablations", ("ablation_temporal", "ablation_spatial", "ablation_hparams"), (
        TableOutput("ablation-temporal", "ablation_temporal_32_64", ("ablation_temporal",)),
        TableOutput("ablation-spatial", "ablation_spatial", ("ablation_spatial",)),
        TableOutput("ablation-hparams", "ablation_full_suppl", ("ablation_hparams",)),
    ), description="tab:ablation_temporal_32_64, tab:ablation_spatial, tab:ablation_full_suppl"),
    Product("frames", ("frame_scaling",), figures=("frame-scaling",), description="fig:frame_scaling"),
    Product("budget-gains", ("budget_others",), figures=("budget-gains",), description="fig:ablation_budget_others"),
    Product("budgets", ("ablation_temporal",), figures=("budget-profiles",), model="qwen3vl_8b",
            description="fig:temporal_allocation, from the budgets its cells recorded"),
    Product("budget-analysis", ("qwen3vl_8b",), figures=("budget-analysis",), model="qwen3vl_8b",
            description="fig:budget_analysis, from the budgets its cells recorded"),
    Product("demo", ("demo",), (TableOutput("demo", None, ("demo",)),), ("budget-profiles", "budget-analysis"),
            out_dir="demo",
            model="demo_qwen3vl", options=BUILD_OPTIONS, make="demo",
            description="the demo's table (kept tokens, ± intervals), its summary (methods x ratios, Δ vs V-CAST), "
                        "its per-sample analysis and trade-off figure, and the budget figures from the budgets its "
                        "cells recorded"),
)}


def find_product(name: str) -> Optional[Product]:
    """The target ``name`` names: a target (``qwen3vl-8b``), its spelling with underscores
    (``qwen3vl_8b``), or the sweep experiment it is built from (``llava_ov``); None for any other
    name (an experiment folder without a target builds a generic table)."""
    for candidate in (name, name.replace("_", "-")):
        if candidate in PRODUCTS:
            return PRODUCTS[candidate]
    owners = [product for product in PRODUCTS.values() if name in product.experiments]
    return owners[0] if len(owners) == 1 else None
