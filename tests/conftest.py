"""Shared helpers for the tests."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, Optional

import pytest
import torch

# No test reaches the Hugging Face Hub (the tiny checkpoints are built locally); set before any test
# runs, so that every process a test starts, and the standing warm-start server below, see the same.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# scikit-learn's import (through threadpoolctl) sets this in whichever process imports it, which some tests
# do: set from the start, the workers, the sweeps they start and their standing warm server agree on it.
os.environ.setdefault("KMP_DUPLICATE_LIB_OK", "True")

# pytest-xdist runs one worker per core: each worker, and every process it starts (a sweep's lmms-eval
# cells), computes on one thread. With torch's default (one thread per core in every process) the
# workers' thread pools fight over the cores, and the tiny models, which spend most of an op waiting
# for the pool, ran 2-20 times slower than on one thread.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


def frame_tokens_2d(angle_deg: float, order: tuple[int, int, int]) -> torch.Tensor:
    """Three 2-D tokens ``u + w, u - w, u`` (permuted by ``order``) whose mean is the unit
    vector ``u`` at ``angle_deg``; ``w`` is ``u`` rotated by 90 degrees. [3, 2]

    Their hand-computed dual-anchor scores: ``1 - 1/sqrt(2) + ~1`` for ``u +- w`` (norm sqrt 2,
    the frame's maximum) and ``0`` for ``u`` (cosine 1, the minimum norm).
    """
    a = math.radians(angle_deg)
    u = torch.tensor([math.cos(a), math.sin(a)], dtype=torch.float64)
    w = torch.tensor([-math.sin(a), math.cos(a)], dtype=torch.float64)
    tokens = torch.stack([u + w, u - w, u])
    return tokens[list(order)].float()


@pytest.fixture
def zigzag_video() -> torch.Tensor:
    """T=4, P=3, D=2: frame means at 0, 90, 0, 90 degrees, so the curvature is (1, 2, 2, 1)."""
    return torch.stack(
        [
            frame_tokens_2d(0, (0, 1, 2)),
            frame_tokens_2d(90, (0, 1, 2)),
            frame_tokens_2d(0, (2, 1, 0)),
            frame_tokens_2d(90, (0, 1, 2)),
        ]
    )


# With tau = 1/ln 2, softmax(kappa / tau) is proportional to 2**kappa.
TAU_BASE2 = 1.0 / math.log(2.0)


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One tiny random-weight checkpoint per architecture (seed 0), built once per session."""
    from vcast.tiny_checkpoints import ARCHS, build_tiny_checkpoint

    root = tmp_path_factory.mktemp("tiny")
    return {arch: build_tiny_checkpoint(arch, "tiny", root / arch, seed=0) for arch in ARCHS}


@pytest.fixture(scope="session")
def vllm_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Qwen3-VL with text head_dim 32 that vLLM's CPU attention accepts (seed 0), built once
    per session for the vLLM plugin's tests (run in .venv-vllm)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from vcast.vllm.tiny_checkpoints import build_vllm_checkpoint

    return build_vllm_checkpoint("qwen3_vl", tmp_path_factory.mktemp("vllm") / "qwen3_vl", seed=0)


@pytest.fixture(scope="session")
def standing_warm_server(request: pytest.FixtureRequest) -> Iterator[Optional[str]]:
    """One standing warm-start server per pytest process (``VCAST_WARM_SERVER``,
    vcast/sweep/warm_start.py) for the sweeps and cells the tests run here: each sweep would otherwise
    start its own and import lmms-eval, transformers and torch again (11-16 CPU-seconds on 2 cores). A
    sweep it cannot serve (another environment, another session: the tests that kill a sweep's whole
    session) starts its own, as it would without it. None (no server) where every test that runs cells
    runs them on the SLURM cluster (make test-slurm), whose jobs it could not serve."""
    from vcast.eval.warm_server import SHARED_ENV

    if not any("standing_warm_server" in item.fixturenames and not item.get_closest_marker("slurm")
               for item in request.session.items):
        yield None
        return
    folder = Path(tempfile.mkdtemp(prefix="vcast-warm-"))  # short: a socket's path has at most 107 bytes
    address = str(folder / "server.sock")
    with open(folder / "server.log", "wb") as log:
        # os.environ as Python sees it (a C library may have put more into the process's own environment)
        process = subprocess.Popen([sys.executable, "-m", "vcast.eval.warm_server", "--listen", address],
                                   stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ))
    deadline = time.monotonic() + 600  # bound once its imports are done
    while not os.path.exists(address) and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    if os.path.exists(address):
        os.environ[SHARED_ENV] = address
    try:
        yield address if os.path.exists(address) else None
    finally:
        os.environ.pop(SHARED_ENV, None)
        process.terminate()
        process.wait(60)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def synth_data(tmp_path_factory: pytest.TempPathFactory, standing_warm_server: Optional[str]) -> Path:
    """The synthetic benchmark in its default folder (where the vcast_synth task reads it);
    generated once, then reused (write_benchmark is idempotent). Every test that runs a cell uses it,
    so it brings the standing warm-start server too."""
    from filelock import FileLock

    from vcast.eval.synthetic_benchmark import DEFAULT_DATA_DIR, write_benchmark

    # Under pytest-xdist the workers share the base temp folder's parent: one writes, the others wait.
    with FileLock(str(tmp_path_factory.getbasetemp().parent / "synth_data.lock")):
        write_benchmark(DEFAULT_DATA_DIR)
    return DEFAULT_DATA_DIR


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory):
    """A real single-node SLURM cluster (slurmctld + slurmd + munged on loopback) for the session;
    skips with the precise reason where SLURM is not installed or cannot start."""
    from tests.support.slurm_cluster import LocalSlurmCluster, SlurmClusterError, slurm_unavailable_reason

    reason = slurm_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    cluster = LocalSlurmCluster(tmp_path_factory.mktemp("slurm"))
    try:
        cluster.start()
    except SlurmClusterError as error:
        pytest.skip(f"local SLURM cluster failed to start: {error}")
    try:
        yield cluster
    finally:
        cluster.stop()


# The longest tests (a few minutes on 2 cores: whole sweeps through lmms-eval), started first so
# that under pytest-xdist none of them runs alone at the end while the other workers idle. A
# scheduling hint only: a renamed test merely starts later.
LONGEST_FIRST = ("test_cell_longer_than_the_time_limit_finishes_over_requeues",  # make test-slurm's
                 "test_build_demo_runs_the_sweep_then_writes_the_table_and_figure",
                 "test_in_llm_method_configs_sweep_on_tiny_llava",
                 "test_ctrl_c_at_any_moment_prints_one_line_exits_130_and_keeps_finished_cells",
                 # make test-vllm's: each starts vLLM in processes of its own (cells, a server)
                 "test_a_killed_vllm_run_resumes_from_its_answers",
                 "test_bad_requests_get_a_400_naming_the_problem_while_good_ones_go_on",
                 "test_a_vllm_cell_records_the_kept_tokens_of_the_hf_plugin",
                 "test_vllm_vanilla_keeps_every_token_and_record_kept_is_no_part_of_a_cell")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``make test``: ``-n auto``): the longest tests, then the other slow
    ones, then the rest, so the long ones overlap instead of one of them running alone at the
    end; the tests of the SLURM cluster marked as one group (a hint: with this pytest and xdist
    3.8, ``--dist loadgroup`` was measured not to keep a group on one worker, so each worker that
    gets one starts its own cluster, with its own ports; tests/support/shared_once.py shares a
    result across workers where that matters)."""
    turn: dict[str, int] = {}  # a slow test's place among its module's slow tests

    def order(item: pytest.Item) -> tuple[int, int]:
        name = getattr(item, "originalname", item.name)
        if name in LONGEST_FIRST:
            return 0, LONGEST_FIRST.index(name)
        if item.get_closest_marker("slow"):
            # Round-robin over the modules: the tests of a module that share one expensive fixture
            # (tests/support/shared_once.py) do not start side by side, one worker waiting for the other.
            module = item.nodeid.split("::")[0]
            turn[module] = turn.get(module, -1) + 1
            return 1, turn[module]
        return 2, 0

    items.sort(key=order)  # stable: file order within each rank
    for item in items:
        if "slurm_cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("slurm"))
            item.add_marker(pytest.mark.slurm)  # make test runs them on their own, beside the main run


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem) -> None:
    """Name each ``slow`` test as it starts (without ``-v``): pytest's dots alone stand still for
    minutes during a subprocess run, which looks like a hang. A pytest-xdist worker has no
    terminal of its own, so it writes the line to the stderr it shares with the main process."""
    if item.config.option.verbose > 0 or not item.get_closest_marker("slow"):
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:
        sys.__stderr__.write(f"  [{worker}] running slow test {item.nodeid}\n")
        sys.__stderr__.flush()
        return
    reporter = item.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"  running slow test {item.nodeid}")
