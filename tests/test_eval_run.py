"""``python -m vcast.eval.run`` indexes lmms-eval's own tasks only when a requested task is one of
them: the synthetic benchmark's cells skip the seconds that indexing some 3,000 YAML files takes."""

from __future__ import annotations

from vcast.eval.run import TASKS_DIR, task_manager_for


def test_own_tasks_are_found_without_lmms_eval_s_index() -> None:
    manager = task_manager_for(["vcast_synth"], [str(TASKS_DIR)], "WARNING", "vcast_qwen3_vl")
    assert "vcast_synth" in manager.all_tasks
    assert "videomme" not in manager.all_tasks and len(manager.all_tasks) < 10


def test_a_benchmark_of_lmms_eval_brings_the_whole_index() -> None:
    manager = task_manager_for(["vcast_synth", "videomme"], [str(TASKS_DIR)], "WARNING", "vcast_qwen3_vl")
    assert {"vcast_synth", "videomme", "mvbench", "mlvu_dev"} <= set(manager.all_tasks)
