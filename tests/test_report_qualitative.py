"""What the report draws from the cells' kept-token records: the qualitative figures
(``python -m vcast.report qualitative``) and the budget figures (``budget-profiles``,
``budget-analysis``), on a real demo sweep (the trained demo model through lmms-eval, the 12
items of the default synthetic set at 32 frames)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.support.shared_once import RECORDS_TREE_METHODS, shared_records_tree
from vcast.report.__main__ import main, qualitative_folder
from vcast.report.collect import collect
from vcast.report.budget_profiles_figure import build_budget_profiles
from vcast.report.per_sample import collect_items
from vcast.report.qualitative import choose_items, item_records, shown_steps, write_qualitative
from vcast.report.recorded_budgets import CURVE_LABELS, recorded_panels
from vcast.results.tree import Cell

METHODS = RECORDS_TREE_METHODS

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def tree(synth_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``build demo --run`` on six methods, once per session: the results root, every cell with its
    kept records (read-only: tests that change it copy it first)."""
    results = shared_records_tree(tmp_path_factory)
    cells = {json.loads(p.read_text())["spec"]["method"]: p.parent for p in (results / "demo").rglob("cell.json")}
    assert sorted(cells) == sorted(METHODS)
    assert all(Cell(cell).kept() for cell in cells.values())
    return results


def _correct(cell_dir: Path) -> dict[int, bool]:
    """Each item's correctness read straight from the samples file's score (not the report's reader)."""
    records = Cell(cell_dir).samples("vcast_synth")["vcast_synth"]
    return {int(r["doc_id"]): r["vcast_synth_acc"]["score"] == 1.0 for r in records}


def test_chosen_items_are_right_for_vcast_and_wrong_for_every_baseline(tree: Path) -> None:
    collection = collect_items(tree, experiments=["demo"])
    choices = choose_items(collection, "demo", baselines=["uniform", "visionzip"], count=12, seed=0)
    cells = {c.method: tree / c.cell for c in collection.cells}
    truth = {method: _correct(cell) for method, cell in cells.items()}
    qualifying = {doc for doc, ok in truth["vcast"].items()
                  if ok and not truth["uniform"][doc] and not truth["visionzip"][doc]}
    assert {int(c.doc_id) for c in choices} == qualifying and qualifying  # all of them, and at least one
    # a seed picks among them, reproducibly
    one = choose_items(collection, "demo", baselines=["uniform", "visionzip"], count=1, seed=3)
    assert one == choose_items(collection, "demo", baselines=["uniform", "visionzip"], count=1, seed=3)
    with pytest.raises(ValueError, match="no finished nosuch cell"):
        choose_items(collection, "demo", baselines=["nosuch"])


def test_qualitative_figures_draw_each_methods_recorded_kept_set(tree: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "figures"
    assert main(["qualitative", "demo", "--results", str(tree), "--out", str(out), "--baselines", "uniform",
                 "--items", "2"]) == 0
    pngs = sorted(out.glob("qualitative-demo-vcast_synth-*.png"))
    assert len(pngs) == 2 and all(p.with_suffix(".pdf").is_file() for p in pngs)
    assert all(p.read_bytes().startswith(b"\x89PNG") for p in pngs)

    from vcast.report import qualitative

    collection = collect_items(tree, experiments=["demo"])
    choice = choose_items(collection, "demo", baselines=["uniform"], count=1)[0]
    records = item_records(choice)
    assert set(records) == {"vanilla", "uniform", "vcast"}
    drawn = []
    original = qualitative.draw_item
    monkeypatch.setattr(qualitative, "draw_item", lambda *a, **k: drawn.append(original(*a, **k)) or drawn[-1])
    written, problems = write_qualitative(tree, "demo", tmp_path / "again", baselines=["uniform"], items=1)
    assert not problems and len(written) == 2
    (figure,) = drawn
    steps = shown_steps(records, records["vcast"].geometry.grid[0])
    assert np.argmax(records["vcast"].budgets) in steps  # V-CAST's largest budget is shown
    for method, record in records.items():
        frames = [ax for ax in figure.axes if (ax.get_gid() or "").startswith(f"frame:{method}:")]
        assert [int(ax.get_gid().rsplit(":", 1)[1]) for ax in frames] == steps
        assert f"{int(record.kept.sum())}/{record.kept.size}" in frames[0].get_ylabel()
    # vanilla keeps every token: a row undimmed, and no budget curve
    assert records["vanilla"].kept.all()
    curves = {line.get_gid(): list(line.get_ydata()) for ax in figure.axes for line in ax.get_lines()}
    assert curves == {f"budget:{m}": list(records[m].budgets) for m in ("uniform", "vcast")}


def test_a_target_s_qualitative_figures_go_with_its_other_outputs(tree: Path, tmp_path: Path) -> None:
    """Without --out: the demo's (a target with its own folder) beside its table and figures in
    results/demo; a paper target's, or an experiment folder's without a target, in results/figures."""
    results = tmp_path / "results"
    shutil.copytree(tree, results)
    assert main(["qualitative", "demo", "--results", str(results), "--baselines", "uniform", "--items", "1"]) == 0
    (png,) = (results / "demo").glob("qualitative-demo-vcast_synth-*.png")
    assert png.with_suffix(".pdf").is_file() and (results / "demo" / "demo.csv").is_file()
    assert not (results / "figures").exists()
    assert qualitative_folder("qwen3vl_8b", results) == qualitative_folder("my_sweep", results) == results / "figures"


def test_an_item_whose_video_is_missing_is_named_and_skipped(tree: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    import vcast.report.task_docs as task_docs

    monkeypatch.setattr(task_docs, "item_visuals", lambda task, doc: [str(tmp_path / f"gone_{doc}.mp4")])
    written, problems = write_qualitative(tree, "demo", tmp_path / "out", baselines=["uniform"], items=1)
    assert written == [] and len(problems) == 1 and "gone_" in problems[0] and "not found" in problems[0]


def test_budget_figures_draw_the_budgets_the_cells_recorded(tree: Path) -> None:
    frame = collect(tree).frame
    for figure, keys in (("budget-profiles", ["uniform", "curvature"]),
                         ("budget-analysis", ["visionzip", "vidcom2", "curvature"])):
        panels, group = recorded_panels(frame, tree, figure, ratio=0.25, experiments=["demo"])
        assert group == 2 and len(panels) == 3
        method = {"uniform": "vcast_uniform", "curvature": "vcast", "visionzip": "visionzip", "vidcom2": "vidcom2"}
        for title, profiles in panels:
            assert list(profiles) == keys
            doc = int(title.split("#")[1].split(":")[0])
            for key, budgets in profiles.items():
                cell = next(tree.rglob(f"{method[key]}/r0.25/vcast_synth"))
                assert list(budgets) == Cell(cell).kept()[("vcast_synth", doc, 0)].budgets, (figure, key, doc)
        drawn = build_budget_profiles(panels, ratio=0.25, frames_per_step=group, labels=CURVE_LABELS)
        labels = {**CURVE_LABELS, "uniform": "Uniform Allocation", "curvature": "Curvature-Aware (V-CAST)"}
        assert [text.get_text() for text in drawn.legends[0].get_texts()] == [labels[k] for k in keys]
    # the demo build wrote both from the records
    for name in ("budget-profiles", "budget-analysis"):
        assert (tree / "demo" / f"{name}.png").read_bytes().startswith(b"\x89PNG")


def test_a_method_without_records_is_left_out_and_fewer_than_two_is_refused(tree: Path, tmp_path: Path) -> None:
    copy = tmp_path / "results"
    shutil.copytree(tree, copy)
    shutil.rmtree(next(copy.rglob("vidcom2/r0.25/vcast_synth")) / "kept")
    frame = collect(copy).frame
    panels, _ = recorded_panels(frame, copy, "budget-analysis", ratio=0.25)
    assert all(list(profiles) == ["visionzip", "curvature"] for _, profiles in panels)
    shutil.rmtree(next(copy.rglob("vcast_uniform/r0.25/vcast_synth")) / "kept")
    with pytest.raises(ValueError, match="at least two of vcast_uniform, vcast_uniqueness, vcast"):
        recorded_panels(frame, copy, "budget-profiles", ratio=0.25)
