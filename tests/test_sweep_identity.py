"""A finished cell is reused only for the very request it answers (limit, method params, variant,
model args, frames, seed, ...); otherwise it is refused with the differing fields, or run again."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest


from tests.support.cell_files import CELL_FILE, read_cell
from tests.support.paper_results import _spec, _task_files, write_cell
from vcast.report.scoring import load_task_scorings
from vcast.results.tree import Cell
from vcast.sweep.cell import identity_mismatch
from vcast.sweep.execute import run_cell


@pytest.fixture()
def finished(tmp_path: Path):
    """A finished vcast cell (limit 2, no params) and its spec."""
    scoring = load_task_scorings()["vcast_synth"]
    spec = replace(_spec("t", "tiny", 16, 0.25, "vcast", scoring), limit=2.0)
    results, samples, _ = _task_files(scoring, {"VCastSynth": 50.0})
    write_cell(tmp_path, spec, "ok", results, samples)
    return tmp_path, spec


def test_the_same_request_is_skipped(finished) -> None:
    root, spec = finished
    assert run_cell(spec, root).status == "skipped"
    assert run_cell(replace(spec, processes=4, experiment="t"), root).status == "skipped"  # not identity


@pytest.mark.parametrize("change, field", [
    (dict(limit=None), "limit: 2.0 -> None"),
    (dict(method_params={"tau": 0.3}), "method_params: {} -> {'tau': 0.3}"),
    (dict(variant="official", method_params={"variant": "official"}), "variant: 'paper' -> 'official'"),
    (dict(model_args={"max_pixels": 16384}), "model_args"),
    (dict(seed=1), "seed: 0 -> 1"),
    (dict(batch_size=4), "batch_size: 1 -> 4"),
    (dict(pretrained="other/ckpt"), "pretrained"),
])
def test_another_request_is_refused_naming_the_fields(finished, change: dict, field: str) -> None:
    root, spec = finished
    record = run_cell(replace(spec, **change), root)
    assert record.status == "mismatch"
    assert field in record.error and "rerun_mismatched=true" in record.error
    assert read_cell(root / spec.relative_dir)["spec"]["limit"] == 2.0  # the finished cell is untouched


def test_record_kept_is_not_part_of_the_identity(finished) -> None:
    """It changes what a run records (kept-token records), never what the model computes."""
    root, spec = finished
    for args in ({"record_kept": False}, {"record_kept": True}):
        assert run_cell(replace(spec, model_args=args), root).status == "skipped"
    recorded = replace(Cell(root / spec.relative_dir).record.spec,
                       model_args={"record_kept": False, "max_pixels": 16384})
    assert identity_mismatch(recorded, replace(spec, model_args={"max_pixels": 16384})) == []
    (difference,) = identity_mismatch(recorded, replace(spec, model_args={"record_kept": False}))
    assert difference.startswith("model_args: {'max_pixels': 16384} -> {}")


def test_a_cell_from_before_variants_reads_as_paper(finished) -> None:
    """A record written before variants and profiles (and before the record had a version) is read
    with their defaults."""
    root, spec = finished
    cell = root / spec.relative_dir
    record = read_cell(cell)
    del record["spec"]["variant"], record["spec"]["profile"], record["record_version"]
    (cell / CELL_FILE).write_text(json.dumps(record))
    older = Cell(cell).record.spec
    assert (older.variant, older.profile) == ("paper", "reproduce")
    assert identity_mismatch(older, spec) == []
    assert identity_mismatch(older, replace(spec, variant="official")) == ["variant: 'paper' -> 'official'"]


def test_rerun_mismatched_runs_it_again(finished) -> None:
    root, spec = finished
    record = run_cell(replace(spec, limit=None), root, rerun_mismatched=True)
    # ran (the "paper" plugin is not a model), as the first attempt of the new request: the finished
    # cell's answers are another request's
    assert record.attempt == 1 and record.status == "failed"
    assert record.spec.limit is None and set(record.versions) >= {"vcast", "torch", "transformers"}


def test_status_marks_a_limited_run_partial(finished, capsys: pytest.CaptureFixture[str]) -> None:
    from vcast.sweep.status import main

    root, _ = finished
    assert main([str(root)]) == 0
    out = capsys.readouterr().out
    assert "partial (limit 2)" in out and "1 cell(s): 1 partial" in out
