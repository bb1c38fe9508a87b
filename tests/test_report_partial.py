"""Report honesty: partial (limit) cells are marked and refused by the paper tables unless asked,
missing videos are footnoted, every method has a display name, ties get no marks, and any
experiment folder builds a generic table."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import pytest
import yaml

from tests.support.paper_results import _spec, _task_files, write_cell
from vcast.report.__main__ import main
from vcast.report.collect import collect
from vcast.report.export import csv_text, latex_text, markdown_text
from vcast.report.layouts import generic_layout
from vcast.registry import available_methods, method_facts
from vcast.report.names import CONFIG_ROWS
from vcast.report.scoring import load_task_scorings
from vcast.report.tables import build_table

REPO = Path(__file__).resolve().parents[1]


def _cell(root: Path, experiment: str, model: str, method: str, ratio: float, value: float,
          limit: float | None = None, missing: int = 0) -> Path:
    scoring = load_task_scorings()["mlvu"]
    spec = dataclasses.replace(_spec(experiment, model, 32, ratio, method, scoring), limit=limit)
    results, samples, _ = _task_files(scoring, {"MLVU": value})
    cell = write_cell(root, spec, "ok", results, samples)
    if missing:
        record = json.loads((cell / "cell.json").read_text())
        record["missing_visuals"] = {"count": missing, "items": []}
        (cell / "cell.json").write_text(json.dumps(record))
    return cell


def test_partial_cells_and_unreadable_videos_are_logged_once_per_reason(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    """A smoke sweep's cells share their limit: one WARNING with the count and a few cells."""
    for method in ("random", "uniform", "vcast", "visionzip"):
        _cell(tmp_path, "demo", "tiny", method, 0.25, 40.0, limit=5, missing=2 if method == "vcast" else 0)
    _cell(tmp_path, "demo", "tiny", "vidcom2", 0.25, 40.0, limit=3)
    with caplog.at_level(logging.WARNING, logger="vcast.report.collect"):
        collect(tmp_path)
    cell = "demo/tiny/32f/{}/r0.25/mlvu"
    assert [record.getMessage() for record in caplog.records if record.name == "vcast.report.collect"] == [
        "4 cell(s) are partial runs (limit 5): their numbers are marked, not a full result: "
        f"{cell.format('random')}, {cell.format('uniform')}, {cell.format('vcast')}, … (1 more)",
        f"1 cell(s) are partial runs (limit 3): their numbers are marked, not a full result: {cell.format('vidcom2')}",
        "1 cell(s) had items with no readable video (answered empty; how many in brackets): "
        f"{cell.format('vcast')} (2)",
    ]


def test_a_partial_cell_is_refused_by_a_paper_table_unless_allowed(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    _cell(tmp_path, "qwen3vl_8b", "qwen3vl_8b", "vanilla", 1.0, 50.0)
    _cell(tmp_path, "qwen3vl_8b", "qwen3vl_8b", "vcast", 0.25, 48.0, limit=50)
    frame = collect(tmp_path).frame
    assert sorted(frame.drop_duplicates("cell")["limit"].fillna(-1).tolist()) == [-1.0, 50.0]

    assert main(["build", "qwen3vl-8b", "--results", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "refused table qwen3vl-8b" in err and "qwen3vl_8b/qwen3vl_8b/32f/vcast/r0.25/mlvu (limit 50)" in err
    assert not (tmp_path / "tables" / "qwen3vl-8b.csv").exists()

    assert main(["build", "qwen3vl-8b", "--results", str(tmp_path), "--allow-partial"]) == 0
    md = (tmp_path / "tables" / "qwen3vl-8b.md").read_text()
    assert "| V-CAST † |" in md and "*† partial run (limit): qwen3vl_8b/qwen3vl_8b/32f/vcast/r0.25/mlvu (limit 50)*" in md
    tex = (tmp_path / "tables" / "qwen3vl-8b.tex").read_text()
    assert r"$^\dagger$" in tex and r"\footnotesize" in tex
    rows = (tmp_path / "tables" / "qwen3vl-8b.csv").read_text().splitlines()
    assert rows[0].endswith(",limit") and any(r.startswith("32,0.25,vcast,") and r.endswith(",50") for r in rows)


def test_missing_videos_are_footnoted(tmp_path: Path) -> None:
    _cell(tmp_path, "x", "m", "vanilla", 1.0, 50.0)
    _cell(tmp_path, "x", "m", "vcast", 0.25, 40.0, missing=3)
    frame = collect(tmp_path).frame
    table = build_table(frame, generic_layout(frame, "m"), model="m")
    assert table.missing_videos == {"x/m/32f/vcast/r0.25/mlvu": 3}
    assert "(answered empty): x/m/32f/vcast/r0.25/mlvu (3)" in markdown_text(table)
    assert "limit" not in csv_text(table).splitlines()[0]  # no partial cell: no limit column


def test_a_column_where_every_value_ties_gets_no_marks(tmp_path: Path) -> None:
    _cell(tmp_path, "x", "m", "vanilla", 1.0, 0.0)
    for method in ("vcast", "random", "uniform"):
        _cell(tmp_path, "x", "m", method, 0.25, 0.0)
    frame = collect(tmp_path).frame
    table = build_table(frame, generic_layout(frame, "m"), model="m")
    assert all(not row.marks for row in table.rows)
    assert "**0.0**" not in markdown_text(table) and r"\textbf{0.0}" not in latex_text(table)
    _cell(tmp_path, "x", "m", "uniform", 0.25, 10.0)  # now one differs: marks come back
    frame = collect(tmp_path).frame
    table = build_table(frame, generic_layout(frame, "m"), model="m")
    marks = {row.method: row.marks.get("MLVU") for row in table.rows if not row.reference}
    assert marks == {"uniform": "best", "vcast": "second", "random": "second"}


def test_every_method_config_has_a_display_name() -> None:
    """A config named after a registered method takes its facts' display name; any other config is
    a row of CONFIG_ROWS (and no row there shadows a registered method)."""
    names = [yaml.safe_load(path.read_text())["name"] for path in sorted((REPO / "configs" / "method").glob("*.yaml"))]
    missing = [name for name in names if name not in CONFIG_ROWS and
               (name not in available_methods() or method_facts(name).display == name)]
    assert missing == []
    assert sorted(set(CONFIG_ROWS) & set(available_methods())) == []
    assert sorted(set(CONFIG_ROWS) - set(names)) == []


def test_any_experiment_folder_builds_a_generic_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _cell(tmp_path, "adhoc", "tiny_qwen3vl", "vanilla", 1.0, 50.0)
    _cell(tmp_path, "adhoc", "tiny_qwen3vl", "vcast", 0.25, 45.0, limit=2)
    assert main(["build", "adhoc", "--results", str(tmp_path)]) == 0  # not a paper table: marked, not refused
    md = (tmp_path / "tables" / "adhoc.md").read_text()
    assert "| V-CAST † | 45.0" in md
    with pytest.raises(SystemExit):
        main(["build", "nope", "--results", str(tmp_path)])
    err = capsys.readouterr().err
    assert "'nope' is neither a report target" in err and "experiments there: adhoc" in err
