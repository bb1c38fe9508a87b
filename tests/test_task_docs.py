"""An item's documents and video as the task gives them (:mod:`vcast.report.task_docs`, which looks
for vcast's own tasks in vcast's task folder before lmms-eval's index of its thousands: the same
documents either way, which this checks; the time saved is docs/report.md's figure, not a test's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("lmms_eval")

from vcast.eval.tasks.vcast_synth import utils as task  # noqa: E402
from vcast.report.task_docs import item_doc, item_visuals  # noqa: E402


def test_an_own_tasks_item_and_video_are_the_ones_the_cells_read() -> None:
    lines = task.JSONL.read_text(encoding="utf-8").splitlines()
    doc = json.loads(lines[2])
    assert item_doc("vcast_synth", 2)["question_id"] == doc["question_id"]
    [video] = item_visuals("vcast_synth", "2")
    assert Path(video) == Path(task.doc_to_visual(doc)[0]) and Path(video).is_file()
    with pytest.raises(ValueError, match=f"has {len(lines)} documents; no doc_id 99"):
        item_doc("vcast_synth", 99)
