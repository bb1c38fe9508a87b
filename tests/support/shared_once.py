"""A result that several pytest-xdist workers need, made once per session.

pytest-xdist's ``--dist loadgroup`` does not keep an ``xdist_group`` on one worker with the pytest
of this environment (measured: a module's grouped tests ran on both workers), so a session
fixture alone would run an expensive sweep once per worker. The workers share the base temp
folder's parent: the first to take the lock builds, the others wait and reuse what it built."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Callable

import pytest
from filelock import FileLock

DONE = ".built"


def shared_once(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """``<shared temp>/<name>``, made by ``build(folder)`` the first time any worker asks (a build
    that raised is tried again by the next one); read-only for the tests that share it."""
    # xdist workers' base temps share a parent made for this session; a run without workers has its
    # base temp to itself (its parent holds every earlier session's, whose builds are stale)
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = shared / name
    with FileLock(str(shared / f"{name}.lock")):
        if not (folder / DONE).is_file():
            folder.mkdir(parents=True, exist_ok=True)
            build(folder)
            (folder / DONE).write_text("", encoding="utf-8")
    return folder


def shared_demo_sweep(tmp_path_factory: pytest.TempPathFactory, name: str, sweep_args: str) -> Path:
    """``python -m vcast.report build demo --run --sweep-args <sweep_args>`` (the demo model through
    lmms-eval, then the demo's report), once per session: the results root (read-only)."""
    from vcast.report.__main__ import main

    def build(folder: Path) -> None:
        results = folder / "results"
        if results.exists():  # a build cut off by an error: start again
            shutil.rmtree(results)
        assert main(["build", "demo", "--results", str(results), "--run", "--resamples", "200",
                     "--sweep-args", sweep_args]) == 0

    return shared_once(tmp_path_factory, name, build) / "results"


# The demo's small tree that several report tests read: make demo's command on 2 items of the default
# set at 8 frames, for a reference, V-CAST, a token-pruning baseline, one inside the LLM (FastV), and the
# budget figures' other curves (V-CAST with equal budgets, VidCom²).
DEMO_TREE_METHODS = ("vanilla", "vcast", "vcast_uniform", "random", "fastv", "vidcom2")
DEMO_TREE_SWEEP = f"task=vcast_synth frames=8 ratio=0.25 limit=2 method={','.join(DEMO_TREE_METHODS)}"


def shared_demo_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """:data:`DEMO_TREE_SWEEP` through :func:`shared_demo_sweep`, once per session: the results root."""
    return shared_demo_sweep(tmp_path_factory, "demo-tree", DEMO_TREE_SWEEP)


# The demo model on the default set's 12 items at 32 frames, where it answers (its qualitative figures and its
# end-to-end scores read these cells).
RECORDS_TREE_METHODS = ("vanilla", "vcast", "vcast_uniform", "uniform", "visionzip", "vidcom2")
RECORDS_TREE_SWEEP = f"task=vcast_synth frames=32 ratio=0.25 method={','.join(RECORDS_TREE_METHODS)}"


def shared_records_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """:data:`RECORDS_TREE_SWEEP` through :func:`shared_demo_sweep`, once per session: the results root."""
    return shared_demo_sweep(tmp_path_factory, "records-tree", RECORDS_TREE_SWEEP)
