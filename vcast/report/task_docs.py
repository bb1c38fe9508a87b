"""An lmms-eval task's own documents and visuals, for figures that show an item's video.

The task is loaded as lmms-eval loads it (``TaskManager`` with vcast's task folder on the include
path), so ``doc_to_visual`` is the task's own: the same video paths the cells were given. Loading
a task reads its dataset (Hugging Face for the real benchmarks, local files for vcast's own), so
each task is loaded once per process.
"""

from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

TASKS_DIR = Path(__file__).resolve().parents[1] / "eval" / "tasks"


@lru_cache(maxsize=8)
def load_task(name: str, include_paths: tuple[str, ...] = ()) -> Any:
    """The lmms-eval task object of ``name`` (an lmms task, not a group), found in lmms-eval's own
    tasks, vcast's and ``include_paths`` (a cell's own task folders)."""
    from lmms_eval.tasks import TaskManager, get_task_dict

    folders = [str(TASKS_DIR), *include_paths]
    own = TaskManager(include_path=folders, include_defaults=False)  # vcast's and the cell's tasks: a few files
    # else lmms-eval's own, whose index reads its thousands of task files (seconds)
    manager = own if name in own.all_tasks else TaskManager(include_path=folders)
    tasks = get_task_dict([name], manager)
    if name not in tasks:
        raise ValueError(f"lmms-eval has no task {name!r} (is it a group? give one of its tasks)")
    return tasks[name]


def _docs(task: Any) -> Any:
    if task.has_test_docs():
        return task.test_docs()
    if task.has_validation_docs():
        return task.validation_docs()
    raise ValueError(f"task {task.config.task}: neither test nor validation documents")


def item_doc(name: str, doc_id: Any, include_paths: tuple[str, ...] = ()) -> dict[str, Any]:
    """Document ``doc_id`` of task ``name`` (lmms-eval numbers a split's documents from 0)."""
    docs = _docs(load_task(name, include_paths))
    index = int(doc_id)
    if not 0 <= index < len(docs):
        raise ValueError(f"task {name} has {len(docs)} documents; no doc_id {doc_id!r}")
    return dict(docs[index])


def item_visuals(name: str, doc_id: Any, include_paths: tuple[str, ...] = ()) -> list[Any]:
    """What the task's ``doc_to_visual`` gives for ``doc_id``: video paths, images."""
    task = load_task(name, include_paths)
    return list(task.doc_to_visual(item_doc(name, doc_id, include_paths)))
