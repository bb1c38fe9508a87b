"""Trade-off figures (accuracy vs kept tokens / layer-averaged retention / prefill / memory) and the
efficiency table's selection-time columns, from generated run logs read through the real collect path."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pandas as pd
import pytest

from vcast.report.__main__ import main
from vcast.report.collect import collect
from vcast.report.export import csv_text, markdown_text
from vcast.report.layouts import LAYOUTS
from vcast.report.scoring import load_task_scorings
from vcast.report.tables import build_table
from vcast.report.tradeoff import LAYER_PERCENT, METRICS, build_tradeoff, drawn_metrics, plot_tradeoff, tradeoff_points
from vcast.testing.sample_logs import Answer, answers_spec, write_answers_cell

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


def write_grid(root: Path, grid: dict = GRID, experiment: str = "trade") -> None:
    scoring = SCORINGS["vcast_synth"]
    for (method, ratio), (accuracy, kept, layer, prefill, memory) in grid.items():
        right = accuracy * ITEMS // 100
        answers = [Answer("A" if i < right else "B", "A") for i in range(ITEMS)]
        efficiency = {"mean_video_tokens_total": 400.0, "mean_video_tokens_kept": 4.0 * kept,
                      "layer_retention": layer / 100, "prefill_latency_s": prefill, "peak_memory_mb": memory,
                      "selection_latency_s": 0.0 if method == "vanilla" else prefill / 10}
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
