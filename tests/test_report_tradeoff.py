"""Trade-off figures (accuracy vs kept tokens / layer-averaged retention / prefill / memory) and the
efficiency table's selection-time columns, from generated run logs read through the real collect path.

The figure must read right (issue 24, finding 5): a y range that follows the data (never below 0
when everything scored 0), methods at one spot told apart, no memory panel from CPU cells."""

from __future__ import annotations

import csv
import io
import logging
from pathlib import Path
from typing import Optional

import numpy as np
import pandas as pd
import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from tests.support.sample_logs import Answer, answers_spec, write_answers_cell
from vcast.report.__main__ import main
from vcast.report.collect import LAYER_PERCENT, collect
from vcast.report.export import csv_text, markdown_text
from vcast.report.layouts import LAYOUTS, PAPER_BASELINES
from vcast.report.scoring import load_task_scorings
from vcast.report.names import method_name
from vcast.report.tables import build_table
from vcast.report.tradeoff import (MAX_CURVES, METRIC_LABELS, METRICS, build_tradeoff, drawn_metrics,
                                   plot_tradeoff, tradeoff_figures, tradeoff_points)

SCORINGS = load_task_scorings()
ITEMS = 20
# method, ratio: accuracy %, kept %, layer-averaged %, prefill s, peak MB (FastV: every token enters, fewer per layer)
GRID = {
    ("vanilla", 1.0): (80, 100, 100, 10.0, 2000),
    ("vcast", 0.5): (75, 50, 50, 6.0, 1500), ("vcast", 0.25): (70, 25, 25, 4.0, 1300),
    ("vcast", 0.1): (55, 10, 10, 3.0, 1200),
    ("random", 0.5): (70, 50, 50, 5.5, 1500), ("random", 0.25): (60, 25, 25, 3.8, 1300),
    ("random", 0.1): (45, 10, 10, 2.9, 1200),
    ("fastv", 0.5): (75, 100, 55, 7.0, 1900), ("fastv", 0.25): (65, 100, 30, 5.0, 1850),
}
# Pareto fronts worked out by hand (lower cost and higher accuracy are better; a tie in accuracy at a
# higher cost is dominated).
FRONTS = {
    "KeptPct": {("vcast", 0.1), ("vcast", 0.25), ("vcast", 0.5), ("vanilla", 1.0)},
    "LayerAvgPct": {("vcast", 0.1), ("vcast", 0.25), ("vcast", 0.5), ("vanilla", 1.0)},
    "PrefillLatency_s": {("random", 0.1), ("vcast", 0.1), ("random", 0.25), ("vcast", 0.25), ("vcast", 0.5),
                         ("vanilla", 1.0)},
    "PeakMemory_MB": {("vcast", 0.1), ("vcast", 0.25), ("vcast", 0.5), ("vanilla", 1.0)},
}


def write_grid(root: Path, grid: dict = GRID, experiment: str = "trade", memory_source: Optional[str] = None) -> None:
    scoring = SCORINGS["vcast_synth"]
    for (method, ratio), (accuracy, kept, layer, prefill, memory) in grid.items():
        right = accuracy * ITEMS // 100
        answers = [Answer("A" if i < right else "B", "A") for i in range(ITEMS)]
        efficiency = {"mean_video_tokens_total": 400.0, "mean_video_tokens_kept": 4.0 * kept,
                      "layer_retention": layer / 100, "prefill_latency_s": prefill, "peak_memory_mb": memory,
                      "selection_latency_s": 0.0 if method == "vanilla" else prefill / 10}
        if memory_source:
            efficiency["memory_source"] = memory_source
        write_answers_cell(root, answers_spec(experiment, "tiny", 16, ratio, method, scoring), scoring,
                           {"vcast_synth": answers}, efficiency)


@pytest.fixture(scope="module")
def frame(tmp_path_factory: pytest.TempPathFactory) -> pd.DataFrame:
    root = tmp_path_factory.mktemp("trade")
    write_grid(root)
    collection = collect(root)
    assert collection.problems == []
    return collection.frame


def test_points_are_the_cells_numbers_and_the_fronts_are_right(frame: pd.DataFrame) -> None:
    points = tradeoff_points(frame, model="tiny")
    assert len(points) == len(GRID)
    for row in points.itertuples(index=False):
        accuracy, kept, layer, prefill, memory = GRID[(row.method, row.ratio)]
        assert (row.accuracy, row.KeptPct, row.LayerAvgPct, row.PrefillLatency_s, row.PeakMemory_MB) == \
            pytest.approx((accuracy, kept, layer, prefill, memory))
    for metric, front in FRONTS.items():
        found = {(r.method, r.ratio) for r in points[points[f"pareto_{metric}"]].itertuples(index=False)}
        assert found == front, metric


def test_the_figure_draws_one_curve_per_method_over_its_ratios(frame: pd.DataFrame, tmp_path: Path) -> None:
    points = tradeoff_points(frame, model="tiny")
    assert drawn_metrics(points) == list(METRICS)  # FastV's layer average differs from its kept share
    figure = build_tradeoff(points, model="tiny")
    lines = {line.get_gid(): line for ax in figure.axes for line in ax.get_lines() if line.get_gid()}
    vcast = lines["curve:vcast:KeptPct"]
    assert list(vcast.get_xdata()) == [10, 25, 50] and list(vcast.get_ydata()) == [55, 70, 75]
    assert list(lines["curve:fastv:LayerAvgPct"].get_xdata()) == pytest.approx([30, 55])
    assert list(lines["vanilla:PeakMemory_MB"].get_xdata()) == [2000]
    front = lines["pareto:PrefillLatency_s"]
    assert list(front.get_xdata()) == [2.9, 3.0, 3.8, 4.0, 6.0, 10.0]
    assert {gid.split(":")[1] for gid in lines if gid.startswith("curve:")} == {"vcast", "random", "fastv"}
    written = plot_tradeoff(frame, tmp_path / "trade-tradeoff", model="tiny")
    assert [p.name for p in written] == ["trade-tradeoff.png", "trade-tradeoff.pdf"]
    assert written[0].read_bytes().startswith(b"\x89PNG") and written[1].read_bytes().startswith(b"%PDF")


def test_past_ten_methods_the_paper_comparison_and_a_panel_per_method(tmp_path: Path) -> None:
    """25 methods on one plot are curves on curves: past MAX_CURVES the figure draws vanilla, V-CAST
    and the paper's baselines (its front among them), and a second figure gives every method a
    panel of its own over the same axes."""
    others = ("random", "uniform", "fastv", "pdrop", "sparsevlm", "dycoke", "prunevid")
    methods = ("vcast", *PAPER_BASELINES, *others)
    assert len(methods) > MAX_CURVES
    grid = {("vanilla", 1.0): (80, 100, 100, 10.0, 2000)}
    for index, method in enumerate(methods):
        grid[(method, 0.25)] = (10 + 5 * index, 25, 25, 4.0, 1300)  # 5 points: one of the 20 items
        grid[(method, 0.5)] = (15 + 5 * index, 50, 50, 6.0, 1500)
    write_grid(tmp_path, grid)
    frame = collect(tmp_path).frame
    [(main_figure, main_stem), (panels, panels_stem)] = tradeoff_figures(frame, tmp_path / "t-tradeoff", model="tiny")
    assert (main_stem.name, panels_stem.name) == ("t-tradeoff", "t-tradeoff-methods")
    drawn = {line.get_gid().split(":")[1] for ax in main_figure.axes for line in ax.get_lines()
             if (line.get_gid() or "").startswith("curve:")}
    assert drawn == {"vcast", *PAPER_BASELINES}
    # the front among the drawn points (not the others' better ones): the paper's last baseline, then vanilla
    front = {line.get_gid() for line in main_figure.axes[0].get_lines() if (line.get_gid() or "").startswith("ring:")}
    assert front == {f"ring:{PAPER_BASELINES[-1]}:KeptPct", "ring:vanilla:KeptPct"}
    assert "all 13 methods, one panel each: t-tradeoff-methods" in main_figure.get_suptitle()
    curves = {line.get_gid(): line for ax in panels.axes for line in ax.get_lines()
              if (line.get_gid() or "").startswith("panel:")}
    assert sorted(curves) == sorted(f"panel:{m}" for m in methods)
    last = len(methods) - 1
    assert list(curves[f"panel:{methods[-1]}"].get_ydata()) == [10 + 5 * last, 15 + 5 * last]
    assert len({(ax.get_xlim(), ax.get_ylim()) for ax in panels.axes if ax.get_visible() and ax.lines}) == 1
    written = plot_tradeoff(frame, tmp_path / "t-tradeoff", model="tiny")
    assert [p.name for p in written] == ["t-tradeoff.png", "t-tradeoff.pdf", "t-tradeoff-methods.png",
                                         "t-tradeoff-methods.pdf"]


def test_no_layer_panel_without_in_llm_methods(tmp_path: Path) -> None:
    write_grid(tmp_path, {k: v for k, v in GRID.items() if k[0] != "fastv"})
    points = tradeoff_points(collect(tmp_path).frame, model="tiny")
    assert LAYER_PERCENT not in drawn_metrics(points)
    assert len(build_tradeoff(points, model="tiny").axes) == len(METRICS) - 1


def test_the_cli_writes_the_figure_next_to_the_analysis(tmp_path: Path) -> None:
    write_grid(tmp_path / "results")
    out = tmp_path / "out"
    assert main(["analyze", "trade", "--results", str(tmp_path / "results"), "--out", str(out),
                 "--resamples", "200"]) == 0
    assert {p.name for p in out.iterdir()} >= {"trade-tradeoff.png", "trade-tradeoff.pdf", "trade-analysis.md"}


def test_efficiency_table_has_the_selection_time_and_its_share_of_prefill(tmp_path: Path) -> None:
    scoring = SCORINGS["videomme"]
    for method, ratio, prefill, selection in (("vanilla", 1.0, 20.0, 0.5), ("random", 0.25, 8.0, 0.2),
                                              ("vcast", 0.25, 9.0, 1.8)):
        answers = [Answer("A" if i % 2 else "B", "A", d) for d in ("short", "medium", "long") for i in range(4)]
        write_answers_cell(tmp_path, answers_spec("efficiency", "qwen3vl_8b", 32, ratio, method, scoring), scoring,
                           {"videomme": answers}, {"prefill_latency_s": prefill, "selection_latency_s": selection})
    collected = collect(tmp_path).frame
    share = collected[collected["benchmark"] == "SelectionPctPrefill"].set_index("method")["value"]
    assert share.to_dict() == pytest.approx({"vanilla": 2.5, "random": 2.5, "vcast": 20.0})
    table = build_table(collected, LAYOUTS["efficiency_comparison"], experiments=["efficiency"])
    rows = {r["method"]: r for r in csv.DictReader(io.StringIO(csv_text(table)))}
    assert float(rows["vcast"]["SelectionLatency_s"]) == 1.8 and float(rows["vcast"]["SelectionPctPrefill"]) == 20.0
    vcast = next(r for r in table.rows if r.method == "vcast")
    assert "SelectionLatency_s" not in vcast.notes and vcast.notes["PrefillLatency_s"] == "↓55.0%"
    assert "| Selection Latency (s) | Selection / Prefill (%) |" in markdown_text(table)
    assert "| 1.80 | 20.0 |" in markdown_text(table)


# ---------------------------------------------------------------------------------------------
# Reading right (issue 24, finding 5): random weights tie every accuracy at 0
# ---------------------------------------------------------------------------------------------

AT_A_QUARTER = ("vcast", "random", "visionzip", "vidcom2", "fastvid", "holitom", "dycoke", "prunevid", "framefusion")
# Every accuracy 0; nine methods at 25 % kept; FastV and SparseVLM keep every token, as vanilla does.
TIED = {("vanilla", 1.0): (0, 100, 100, 10.0, 1150), ("fastv", 0.25): (0, 100, 30, 8.0, 1160),
        ("sparsevlm", 0.25): (0, 100, 35, 8.5, 1140),
        **{(method, 0.25): (0, 25, 25, 4.0 + 0.5 * i, 1138 + 3 * i) for i, method in enumerate(AT_A_QUARTER)}}


@pytest.fixture(scope="module")
def tied(tmp_path_factory: pytest.TempPathFactory) -> Figure:
    root = tmp_path_factory.mktemp("tied")
    write_grid(root, TIED)
    figure = build_tradeoff(tradeoff_points(collect(root).frame, model="tiny"), model="tiny")
    figure.draw_without_rendering()  # the layout, so display positions are the page's
    return figure


def panel(figure: Figure, metric: str) -> Axes:
    (ax,) = [ax for ax in figure.axes if ax.get_xlabel() == METRIC_LABELS[metric]]
    return ax


def markers(ax: Axes) -> dict[str, list[tuple[float, float]]]:
    """Method -> where its markers are drawn in ``ax`` (points on the page): curves' own markers,
    markers moved off their spot, vanilla's star."""
    scale = 72 / ax.figure.dpi
    found: dict[str, list[tuple[float, float]]] = {}
    for line in ax.get_lines():
        kind, *rest = (line.get_gid() or "").split(":")
        if kind not in ("curve", "spread", "vanilla") or line.get_marker() in (None, "None", "none", ""):
            continue
        xy = np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float)
        if line.get_markevery() is not None:
            xy = xy[list(line.get_markevery())]
        method = "vanilla" if kind == "vanilla" else rest[0]
        found.setdefault(method, []).extend(tuple(p * scale) for p in line.get_transform().transform(xy))
    return found


def test_tied_accuracies_get_an_axis_inside_0_to_100_with_a_minimum_span(tied: Figure, frame: pd.DataFrame) -> None:
    for ax in tied.axes:
        low, high = ax.get_ylim()
        assert low == 0.0 and 4.0 <= high <= 10.0, ax.get_xlabel()  # not -2..2 around the tie
    varied = build_tradeoff(tradeoff_points(frame, model="tiny"), model="tiny")
    for ax in varied.axes:
        low, high = ax.get_ylim()
        assert 40 < low < 45 and 80 < high < 85  # the data (45..80) padded, not the 0..100 range


def test_axis_range_pads_keeps_a_minimum_span_and_stays_in_bounds() -> None:
    from vcast.report.tradeoff import MIN_ACCURACY_SPAN, axis_range

    assert MIN_ACCURACY_SPAN == 4.0
    # A tie at the top: 4 points plus 8 % on each side, moved inside 0..100.
    assert axis_range([100, 100], min_span=4, bounds=(0, 100)) == pytest.approx((95.36, 100.0))
    assert axis_range([50, 50], min_span=4, bounds=(0, 100)) == pytest.approx((47.68, 52.32))
    assert axis_range([0, 100], min_span=4, bounds=(0, 100)) == (0.0, 100.0)


def test_methods_at_one_spot_are_told_apart_and_named(tied: Figure) -> None:
    kept = panel(tied, "KeptPct")
    drawn = markers(kept)
    # FastV and SparseVLM keep every token at vanilla's accuracy: spread around vanilla's star.
    at_full = [p for method in ("vanilla", "fastv", "sparsevlm") for p in drawn[method]]
    assert len(at_full) == 3
    assert min(np.hypot(a[0] - b[0], a[1] - b[1]) for i, a in enumerate(at_full) for b in at_full[i + 1:]) >= 6.0
    # Nine methods at 25 % kept: too many to spread; one numbered badge, none of their markers stacked under it.
    assert not any(drawn.get(method) for method in AT_A_QUARTER)
    assert [line.get_gid() for line in kept.get_lines()].count("badge:KeptPct") == 1
    (listing,) = [legend for legend in tied.legends if legend.get_gid() == "spots"]  # the list beside the plot
    entries = [text.get_text() for text in listing.get_texts()]
    quarter = next(entry for entry in entries if "25% kept" in entry)
    assert all(method_name(method) in quarter for method in AT_A_QUARTER)
    full = next(entry for entry in entries if "100% kept" in entry)
    assert all(name in full for name in ("Vanilla", "FastV", "SparseVLM"))
    # The Pareto front's point at 25 % is one of the nine: its ring is labelled with its name.
    labels = {text.get_gid(): text.get_text() for text in kept.texts if (text.get_gid() or "").startswith("pareto")}
    ((gid, text),) = labels.items()
    method = gid.split(":")[1]
    assert method in AT_A_QUARTER and text == f"{method_name(method)} 25%"


def test_a_reason_every_point_shares_is_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A grid of CPU cells (make demo's): one line with the count and a few points, not one per point."""
    write_grid(tmp_path, memory_source="process_peak_rss")
    frame = collect(tmp_path).frame
    with caplog.at_level(logging.INFO, logger="vcast.report.tradeoff"):
        tradeoff_points(frame, model="tiny")
        benchmark = SCORINGS["vcast_synth"].benchmark
        assert tradeoff_points(frame, model="tiny", benchmarks=[benchmark, "MLVU"]).empty
    lines = [record.getMessage() for record in caplog.records if record.name == "vcast.report.tradeoff"]
    assert lines == [
        f"trade-off: peak memory of {len(GRID)} point(s) is process_peak_rss (process memory of CPU runs, not GPU "
        "memory); not drawn: fastv 16f r=0.25, fastv 16f r=0.5, random 16f r=0.1, … (6 more)",
        f"trade-off: {len(GRID)} point(s) lack MLVU; not drawn: fastv 16f r=0.25, fastv 16f r=0.5, random 16f r=0.1, "
        "… (6 more)",
    ]


def test_cpu_peak_memory_is_not_drawn_and_the_title_says_why(tmp_path: Path) -> None:
    write_grid(tmp_path / "cpu", memory_source="process_peak_rss")
    collected = collect(tmp_path / "cpu").frame
    assert set(collected["memory_source"]) == {"process_peak_rss"}
    points = tradeoff_points(collected, model="tiny")
    assert points["PeakMemory_MB"].isna().all() and "PeakMemory_MB" not in drawn_metrics(points)
    figure = build_tradeoff(points, model="tiny")
    assert "Peak memory (MB)" not in [ax.get_xlabel() for ax in figure.axes]
    assert "not meaningful" in figure.get_suptitle() and "CPU" in figure.get_suptitle()

    write_grid(tmp_path / "gpu", memory_source="cuda_max_allocated")
    figure = build_tradeoff(tradeoff_points(collect(tmp_path / "gpu").frame, model="tiny"), model="tiny")
    assert list(panel(figure, "PeakMemory_MB").get_lines()[1].get_xdata())  # the GPU's memory is drawn
    assert "not meaningful" not in figure.get_suptitle()
