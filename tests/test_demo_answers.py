"""End to end with the trained demo model (checkpoints/demo_qwen3_vl): the harness's numbers are
right, not only produced.

A random-weight model scores 0 whatever the harness does, so a plugin that returns empty replies,
a parser that finds no answer or a scorer that reads the wrong field would all pass a test that
only runs cells. The demo model answers, so here each of those fails: the accuracy must clear a
floor, and must equal the share of replies that name the right option (its text, as the demo
model answers, or its letter), counted from lmms-eval's samples file without the task's parser.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

pytest.importorskip("lmms_eval")

from tests.support.shared_once import shared_records_tree  # noqa: E402
from vcast.sweep.cell import CellSpec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEMO_MODEL = ROOT / "checkpoints" / "demo_qwen3_vl"
# The default set's 12 items; the model answers most of the 300 held-out ones (docs/development.md),
# so 9 of 12 leaves room for a bad draw while a broken parser, scorer or plugin (0-3 of 12) fails.
FLOOR = 75.0


def demo_spec(method: str, ratio: float) -> CellSpec:
    return CellSpec(
        experiment="t", model="demo_qwen3vl", plugin="vcast_qwen3_vl", pretrained=str(DEMO_MODEL),
        prompt_key="qwen3_vl", model_args={"max_pixels": 16384, "min_pixels": 4096, "attn_implementation": "sdpa"},
        method=method, method_id=method, method_params={}, ratio=ratio, frames=32, task="vcast_synth",
        lmms_tasks=["vcast_synth"],
    )


def _replies(cell: Path, record: dict) -> list[tuple[str, str, str]]:
    """(reply, answer letter, answer text) of every item, read straight from lmms-eval's samples file
    (its ``filtered_resps``, ``target`` and the prompt's option lines)."""
    rows = []
    for name in record["samples_files"]:
        for line in (cell / name).read_text().splitlines():
            sample = json.loads(line)
            options = dict(re.findall(r"^([A-D])\. (.+)$", sample["input"], re.M))
            rows.append((sample["filtered_resps"], sample["target"], options[sample["target"]]))
    return rows


@pytest.mark.slow
def test_the_demo_model_answers_through_lmms_eval_and_the_scores_are_its_replies(
        synth_data: Path, tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """On the cells the sweep ran (the shared tree of tests/support/shared_once.py: the demo model, the
    default set, 32 frames), vanilla's and V-CAST's."""
    from vcast.report.per_sample import collect_items

    shared = shared_records_tree(tmp_path_factory)
    scores = {}
    for method, ratio in (("vanilla", 1.0), ("vcast", 0.25)):
        spec = demo_spec(method, ratio)
        cell = next(path.parent for path in (shared / "demo").rglob("cell.json")
                    if f"/{method}/r{ratio:g}/" in path.as_posix())
        shutil.copytree(cell, tmp_path / spec.relative_dir)  # the reader below sees these two cells only
        record = json.loads((cell / "cell.json").read_text())
        assert record["status"] == "ok", record.get("log_tail")
        assert {key: record["spec"][key] for key in ("pretrained", "model_args", "frames", "lmms_tasks")} == {
            key: getattr(spec, key) for key in ("pretrained", "model_args", "frames", "lmms_tasks")}
        replies = _replies(cell, record)
        assert len(replies) == 12
        # The reply is the answer's text (" blue") or names its letter ("(B)"): counted without the task's parser.
        named = [reply.strip().rstrip(".").lower() == text or bool(re.search(rf"(?<![A-Za-z]){answer}(?![A-Za-z])", reply))
                 for reply, answer, text in replies]
        scores[method] = record["scores"]["vcast_synth"]["vcast_synth_acc"]
        assert scores[method] == pytest.approx(100.0 * sum(named) / len(named)), replies
    assert scores["vanilla"] >= FLOOR, scores
    # The report's per-sample reader sees the same items and the same accuracy.
    cells = {cell.method: cell.items for cell in collect_items(tmp_path).cells}
    assert set(cells) == {"vanilla", "vcast"}
    for method, items in cells.items():
        assert len(items) == 12 and 100.0 * items["correct"].mean() == pytest.approx(scores[method])
