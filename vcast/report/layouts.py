"""The layout of every table of the paper: which cells go in which row, column and block.

A :class:`Layout` is sections (one frame count each, opened by the unpruned reference row) of
blocks (one retention ratio each; best/second-best are marked per column inside a block). The
builder (:mod:`vcast.report.tables`) fills a layout from the tidy frame; the exporters render it.
Row order, labels and blocks follow ``vcast_paper.tex``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import pandas as pd

from vcast.report.collect import SIDE_COLUMNS
from vcast.report.names import method_name

REFERENCE = "vanilla"
DERIVED_KEYS = ("Average", "Average%")  # computed by the table builder, not read from cells
MAIN_AVERAGE = ("MVBench", "LongVideoBench", "MLVU", "VideoMME")


@dataclass(frozen=True)
class Column:
    """One value column. ``group`` spans a second header line (VideoMME: Overall/Short/...)."""

    key: str                     # tidy benchmark name, or Average / Average% / Performance
    header: str
    group: Optional[str] = None
    higher_is_better: bool = True
    digits: int = 1
    source: Optional[str] = None  # tidy benchmark to read when key is not one (Performance)
    ranked: bool = True           # bold/underline and efficiency notes (not for kept-token shares)
    annotated: bool = True        # efficiency notes vs the reference (not for selection time: vanilla's is ~0)


@dataclass(frozen=True)
class Row:
    method: str
    label: Optional[str] = None   # display name when not the method's own (ablation rows)
    paper: Optional[str] = None   # its name in paper_tables.csv when not the label


@dataclass(frozen=True)
class Block:
    """Rows at one retention ratio, ranked together (bold best, underline second per column)."""

    ratio: float
    rows: tuple[Row, ...]
    title: Optional[str] = None
    ranked: bool = True


@dataclass(frozen=True)
class Section:
    """One frame count: the reference (unpruned) row, then the blocks."""

    frames: int
    blocks: tuple[Block, ...]
    title: Optional[str] = None
    paper_table: Optional[str] = None  # when the section is its own table in the paper
    reference_label: Optional[str] = None


@dataclass(frozen=True)
class Layout:
    key: str
    label: str                   # the paper's \label
    caption: str
    model: str                   # model config whose cells fill it (overridable when building)
    columns: tuple[Column, ...]
    sections: tuple[Section, ...]
    average_of: tuple[str, ...] = ()
    efficiency: bool = False     # relative annotations vs the reference row (tab:efficiency_comparison)
    task: Optional[str] = None   # efficiency tables read the cells of this task only
    paper_tables: tuple[str, ...] = field(default_factory=tuple)

    @property
    def has_percent(self) -> bool:
        return any(column.key == "Average%" for column in self.columns)


def _rows(*methods: str) -> tuple[Row, ...]:
    return tuple(Row(method) for method in methods)


def _pct(ratio: float) -> str:
    return f"Retention Ratio={ratio * 100:g}%"


VIDEOMME = (Column("VideoMME", "Overall", "VideoMME"), Column("VideoMME-Short", "Short", "VideoMME"),
            Column("VideoMME-Medium", "Medium", "VideoMME"), Column("VideoMME-Long", "Long", "VideoMME"))
MAIN_COLUMNS = (Column("MVBench", "MVBench"), Column("LongVideoBench", "LongVideoBench"), Column("MLVU", "MLVU"),
                *VIDEOMME, Column("Average", "Score", "Average"), Column("Average%", "%", "Average"))
# The baselines of the paper's main table (tab:qwen_results): what a figure or page of many methods shows
# first, beside vanilla and V-CAST (the trade-off figure, the site's item pages).
PAPER_BASELINES = ("visionzip", "vidcom2", "fastvid", "holitom", "flashvid")
QWEN_METHODS = _rows(*PAPER_BASELINES, "vcast")


def _main(key: str, label: str, caption: str, model: str, frames_ratios: dict[int, tuple[float, ...]],
          methods: tuple[Row, ...], *, percent: bool = True) -> Layout:
    titled = len(frames_ratios) > 1
    sections = tuple(
        Section(frames, tuple(Block(ratio, methods, _pct(ratio)) for ratio in ratios),
                title=f"Max Input Frames={frames}" if titled else None)
        for frames, ratios in frames_ratios.items())
    columns = MAIN_COLUMNS if percent else (*MAIN_COLUMNS[:-2], Column("Average", "Average Score"))
    return Layout(key, label, caption, model, columns, sections, MAIN_AVERAGE)


def _ablation_row(method: str, label: str) -> Row:
    return Row(method, label=label, paper=label)


TEMPORAL_ROWS = (_ablation_row("vcast_uniform", "Uniform Allocation"),
                 _ablation_row("vcast_random_alloc", "Random Allocation"),
                 _ablation_row("vcast_uniqueness", "Global Uniqueness"),
                 _ablation_row("vcast", "Curvature-Aware"))

LAYOUTS: dict[str, Layout] = {layout.key: layout for layout in (
    _main("qwen_results", "tab:qwen_results",
          "Qwen3-VL-8B-Instruct: comparison with other baselines under multiple settings.",
          "qwen3vl_8b", {64: (0.25, 0.15), 32: (0.25, 0.15)}, QWEN_METHODS),
    _main("qwen_0.35_results", "tab:qwen_0.35_results",
          "Qwen3-VL-8B-Instruct under a retention ratio of 35%.",
          "qwen3vl_8b", {64: (0.35,), 32: (0.35,)}, QWEN_METHODS),
    _main("llava_ov_results", "tab:llava_ov_results", "LLaVA-OV-7B, 32 input frames.", "llava_ov_7b",
          {32: (0.25,)}, _rows("fastv", "pdrop", "sparsevlm", "visionzip", "prunevid", "framefusion",
                               "fastvid", "vidcom2", "vcast")),
    _main("llava_video_results", "tab:llava_video_results", "LLaVA-Video-7B, 64 input frames.",
          "llava_video_7b", {64: (0.25,)}, _rows("fastv", "sparsevlm", "visionzip", "holitom", "vidcom2", "vcast")),
    _main("qwen3vl_32b", "tab:qwen3vl_32b", "Qwen3-VL-32B-Instruct, 32 input frames.", "qwen3vl_32b",
          {32: (0.25,)}, QWEN_METHODS),
    _main("qwen3vl_moe", "tab:qwen3vl_moe", "Qwen3-VL-30B-A3B-Instruct (MoE), 64 input frames.",
          "qwen3vl_30b_a3b", {64: (0.25,)}, QWEN_METHODS, percent=False),
    Layout(
        "rope", "tab:rope", "Spatial selection strategies at R=25%: token merging vs token pruning.", "qwen3vl_8b",
        (Column("MVBench", "MVBench"), Column("LongVideoBench", "LongVideoBench"),
         Column("VideoMME", "All", "VideoMME"), Column("VideoMME-Short", "S", "VideoMME"),
         Column("VideoMME-Medium", "M", "VideoMME"), Column("VideoMME-Long", "L", "VideoMME")),
        (Section(32, (Block(0.25, _rows("holitom", "avgpool_2x2"), "(a) Token Merging", ranked=False),
                      Block(0.25, _rows("random_2x2", "first_2x2"), "(b) Token Pruning", ranked=False))),)),
    Layout(
        "efficiency_comparison", "tab:efficiency_comparison",
        "Efficiency: Qwen3-VL-8B-Instruct on VideoMME at R=25% (32 frames). Latencies are sums over the "
        "benchmark; total is the evaluation's wall time; selection is the method's own work before the "
        "prefill; decode + preprocess is the harness reading the videos, overlapped with the model when "
        "prefetching; prefill TFLOPs are the theoretical count per item, vision encoder + LLM (none of "
        "these columns is in the paper).", "qwen3vl_8b",
        (Column("PrefillLatency_s", "Prefilling Latency (s)", higher_is_better=False),
         Column("PrefillTFLOPs", "Prefill TFLOPs / item", higher_is_better=False),
         Column("SelectionLatency_s", "Selection Latency (s)", higher_is_better=False, digits=2, annotated=False),
         Column("SelectionPctPrefill", "Selection / Prefill (%)", higher_is_better=False, annotated=False),
         Column("GenerationLatency_s", "LLM Generation Latency (s)", higher_is_better=False),
         # The harness's own cost (reading + preprocessing the videos), not the method's: not ranked.
         Column("PrepareLatency_s", "Decode + Preprocess (s)", higher_is_better=False, ranked=False,
                annotated=False),
         Column("TotalLatency_s", "Total Latency (s)", higher_is_better=False),
         Column("PeakMemory_MB", "GPU Peak Memory (MB)", higher_is_better=False),
         Column("Throughput_items_per_s", "Throughput (item/s)", digits=2),
         Column("Performance", "Performance", source="VideoMME")),
        (Section(32, (Block(0.25, _rows("random"), ranked=False), Block(0.25, QWEN_METHODS))),),
        efficiency=True, task="videomme"),
    Layout(
        "ablation_temporal_32_64", "tab:ablation_temporal_32_64",
        "Ablation on temporal allocation, Qwen3-VL-8B at R=25%.", "qwen3vl_8b",
        (Column("MLVU", "MLVU"), *VIDEOMME[:3], Column("Average", "Average Score")),
        tuple(Section(frames, (Block(0.25, TEMPORAL_ROWS),), title=f"Max Input Frames={frames}",
                      paper_table=f"tab:ablation_temporal_{frames}") for frames in (32, 64)),
        average_of=("MLVU", "VideoMME"), paper_tables=("tab:ablation_temporal_32", "tab:ablation_temporal_64")),
    Layout(
        "ablation_spatial", "tab:ablation_spatial", "Ablation on spatial selection, Qwen3-VL-8B at R=25%.",
        "qwen3vl_8b",
        (Column("MVBench", "MVBench"), Column("MLVU", "MLVU"), *VIDEOMME[:3], Column("Average", "Average Score")),
        (Section(32, (Block(0.25, (_ablation_row("vcast_diversity", "Contextual Diversity Only"),
                                   _ablation_row("vcast_activation", "Feature Activation Only"),
                                   _ablation_row("vcast", "Dual-Anchor"))),)),),
        average_of=("MVBench", "MLVU", "VideoMME")),
    Layout(
        "ablation_full_suppl", "tab:ablation_full_suppl",
        "Sensitivity to V-CAST's hyper-parameters, Qwen3-VL-8B at R=25% (64 frames).", "qwen3vl_8b",
        (Column("MLVU", "MLVU"), *VIDEOMME, Column("Average", "Avg Score")),
        (Section(64, (Block(0.25, tuple(_ablation_row(m, f"tau={t}") for m, t in
                                        (("vcast_tau06", "0.6"), ("vcast", "0.7"), ("vcast_tau09", "0.9")))),),
                 title="(a) Temperature tau", reference_label="Vanilla"),
         Section(64, (Block(0.25, tuple(_ablation_row(m, f"w={w}") for m, w in (
             ("vcast_w13_07", "(1.3, 0.7)"), ("vcast_w11_09", "(1.1, 0.9)"), ("vcast", "(1.0, 1.0)"),
             ("vcast_w09_11", "(0.9, 1.1)")))),), title="(b) Anchor weights", reference_label="Vanilla")),
        average_of=("MLVU", "VideoMME")),
)}


def generic_layout(frame: pd.DataFrame, model: str, key: str = "results") -> Layout:
    """A table of whatever ``frame`` holds for ``model``: one column per benchmark, one section per
    frame count, one block per ratio (for experiments without a paper layout, e.g. the demo)."""
    rows = frame[frame["model"] == model]
    if rows.empty:
        raise ValueError(f"no cells of model {model!r} (found: {', '.join(sorted(frame['model'].unique())) or 'none'})")
    benchmarks = [b for b in dict.fromkeys(rows["benchmark"]) if b not in SIDE_COLUMNS]
    columns = [Column(b, b) for b in sorted(benchmarks)]
    average = tuple(c.key for c in columns if "-" not in c.key)  # leave out per-group breakdowns
    if len(average) > 1:
        columns.append(Column("Average", "Average"))
    has_reference = (rows["method"] == REFERENCE).any()
    if has_reference and len(average) >= 1:
        columns.append(Column("Average%", "%"))
    sections = []
    for frames in sorted(rows["frames"].unique(), reverse=True):
        at = rows[(rows["frames"] == frames) & (rows["method"] != REFERENCE)]
        blocks = tuple(
            Block(float(ratio), _rows(*sorted(at[at["ratio"] == ratio]["method"].unique(), key=method_name)),
                  _pct(float(ratio)))
            for ratio in sorted(at["ratio"].unique(), reverse=True))
        # The unpruned row by its method's one name (a paper layout names it after the model, as the paper does).
        sections.append(Section(int(frames), blocks, title=f"Max Input Frames={frames}",
                                reference_label=method_name(REFERENCE)))
    # Average% needs an average even when the table shows a single benchmark (the demo).
    return Layout(key, f"tab:{key}", f"Results of {model}.", model, tuple(columns), tuple(sections), average)
