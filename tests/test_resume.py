"""A cell interrupted at any point resumes from its last answered item, with the samples and scores
of an uninterrupted run: real lmms-eval runs of the tiny Qwen3-VL on the synthetic benchmark (12
items), killed with SIGKILL / SIGTERM from outside (a preempted job) and from inside lmms-eval's
response cache write (``tests/support/kill_points``), then rerun; only the items not yet answered
are computed again, counted from each attempt's efficiency records."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytest.importorskip("lmms_eval")

from tests.support.shared_once import shared_once  # noqa: E402
from tests.test_sweep import ROOT, tiny_spec  # noqa: E402
from lmms_eval.api.instance import Instance  # noqa: E402

from vcast.eval.resume import (answered, model_fingerprint, read_attempts, recorded_fingerprints,  # noqa: E402
                               start_attempt, store_answers)
from tests.support.cell_files import is_complete, read_cell  # noqa: E402
from vcast.sweep.cell import cell_identity, identity_digest  # noqa: E402
from vcast.results.layout import CACHE_DIR, IDENTITY_FILE  # noqa: E402
from vcast.results.tree import Cell, work_dir  # noqa: E402
from vcast.sweep.execute import _working_folder, run_cell  # noqa: E402
from vcast.sweep.status import cell_status  # noqa: E402

pytestmark = pytest.mark.slow

ITEMS = 12  # the whole synthetic benchmark
KILL_POINTS = ROOT / "tests" / "support" / "kill_points"


def _spec(tiny_dirs: dict, **overrides):
    return tiny_spec(tiny_dirs, **{"limit": None, **overrides})


def _samples_text(cell: Path) -> list[str]:
    """The cell's samples file, line by line (each line byte for byte) in doc order: a
    data-parallel run writes them rank by rank."""
    record = read_cell(cell)
    [samples] = record["samples_files"]
    lines = (cell / samples).read_text(encoding="utf-8").splitlines()
    return sorted(lines, key=lambda line: json.loads(line)["doc_id"])


@pytest.fixture(scope="session")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory, tiny_dirs: dict,
                  synth_data: Path) -> tuple[list[str], dict, Path]:
    """The cell run once without interruption: its samples (:func:`_samples_text`), its scores and
    its folder (read-only)."""

    def build(folder: Path) -> None:
        assert run_cell(_spec(tiny_dirs), folder).status == "ok"

    results = shared_once(tmp_path_factory, "resume_uninterrupted", build)
    cell = results / _spec(tiny_dirs).relative_dir
    return _samples_text(cell), read_cell(cell)["scores"], cell


def _child_env(**extra: str) -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", **extra}


def _check_resumed(cell: Path, uninterrupted: tuple[list[str], dict, Path], attempts: int) -> dict:
    """The finished cell equals the uninterrupted one, and each attempt computed exactly the items
    the cache did not hold when it started (each item once, from the attempt that computed it)."""
    record = read_cell(cell)
    assert record["status"] == "ok" and is_complete(cell), record.get("log_tail")
    assert _samples_text(cell) == uninterrupted[0]
    assert record["scores"] == uninterrupted[1]
    listed = record["attempts"]
    assert [entry["attempt"] for entry in listed] == list(range(1, attempts + 1)) == [
        *range(1, record["attempt"] + 1)]
    for entry, following in zip(listed, [*listed[1:], None]):
        # what this attempt computed and kept is what the next one found answered
        found_next = ITEMS if following is None else following["answered_before"]
        assert entry["answered_before"] + entry["computed"] == found_next, listed
    items = [(task, doc) for tasks in record["items_by_attempt"].values() for task, docs in tasks.items()
             for doc in docs]
    assert len(items) == len(set(items)) == ITEMS
    assert record["efficiency"]["items"] == ITEMS
    assert record["efficiency"]["resumed_over"] == len([e for e in listed if e["computed"]])
    assert record["efficiency"]["total_latency_s"] is None
    # What the cell writes beside lmms-eval's results counts every attempt, as the uninterrupted run's
    ours, theirs = Cell(cell).results()["throughput"], Cell(uninterrupted[2]).results()["throughput"]
    for key in ("total_gen_tokens", "avg_kept_video_tokens", "avg_total_video_tokens"):
        assert ours[key] == theirs[key], key
    assert theirs["attempts"] == 1 and ours["attempts"] == record["efficiency"]["resumed_over"]
    assert ours["avg_latency"] == pytest.approx(ours["total_elapsed_time"] / ITEMS)
    assert not list(cell.rglob(".*.tmp")), "a temporary file survived the rerun"
    stamp = cell / CACHE_DIR / IDENTITY_FILE
    assert json.loads(stamp.read_text()) == json.loads(json.dumps(cell_identity(Cell(cell).record.spec)))
    return record


def test_killed_twice_during_the_cache_write(tiny_dirs: dict, synth_data: Path, tmp_path: Path,
                                            uninterrupted: tuple[list[str], dict, Path]) -> None:
    """SIGKILL inside lmms-eval's write of one answer, twice: first with the 4th answer's journal
    line torn (that answer is lost: 3 kept), then, on the rerun, with its 3rd answer journaled but
    not yet in SQLite (replayed: kept, so 3 + 3)."""
    spec = _spec(tiny_dirs)
    path = os.pathsep.join(filter(None, [str(KILL_POINTS), os.environ.get("PYTHONPATH")]))
    for point in ("journal:4", "upsert:3"):
        killed = run_cell(spec, tmp_path, env=_child_env(VCAST_KILL_AT=point, PYTHONPATH=path))
        assert killed.status == "failed" and killed.returncode == -signal.SIGKILL
    # and what a kill inside an atomic write leaves (vcast.atomic_files: a hidden temporary beside the file)
    (tmp_path / spec.relative_dir / "efficiency" / ".progress.rank0.json.k1ll.tmp").write_text('{"attempt": ')
    run_cell(spec, tmp_path)
    record = _check_resumed(tmp_path / spec.relative_dir, uninterrupted, attempts=3)
    assert [(entry["answered_before"], entry["computed"]) for entry in record["attempts"]] == [
        (0, 3), (3, 3), (6, ITEMS - 6)]


def _run_in_job(spec, results: Path) -> subprocess.Popen:
    """``run_cell`` in a process group of its own, as a SLURM job step runs the sweep."""
    code = ("import sys; from pathlib import Path; from vcast.sweep.cell import CellSpec; "
            "from vcast.sweep.execute import run_cell; "
            "spec = CellSpec(**__import__('json').loads(sys.argv[1])); run_cell(spec, Path(sys.argv[2]))")
    return subprocess.Popen([sys.executable, "-c", code, json.dumps(spec.as_dict()), str(results)], cwd=ROOT,
                            env=_child_env(), start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def _kill_after(job: subprocess.Popen, cache: Path, answers: int, sig: int) -> int:
    """Signal every process of the job once the cache holds ``answers`` (a preemption), after
    checking that ``status`` shows the running cell's progress; the answers it held then."""
    deadline = time.monotonic() + 300
    while not cache.exists() or answered(cache) < answers:
        assert job.poll() is None, "the job ended before it was interrupted"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    shown = cell_status(Cell(cache.parent.parent / cache.parent.name[1:].split(".staging-")[0]))
    assert re.fullmatch(rf"running \((\d+)/{ITEMS} answered, attempt \d+\)", shown), shown
    # Every process of the job at once, as SLURM does (torchrun's workers are not in its group).
    family = [psutil.Process(job.pid), *psutil.Process(job.pid).children(recursive=True)]
    for process in family:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.send_signal(sig)
    psutil.wait_procs(family, timeout=60)
    job.wait(timeout=60)
    return answered(cache)


def test_preempted_twice_then_finished(tiny_dirs: dict, synth_data: Path, tmp_path: Path,
                                       uninterrupted: tuple[list[str], dict, Path]) -> None:
    """The job running the cell is stopped from outside twice (SIGTERM, then SIGKILL), leaving its
    staging folder; ``status`` shows the answered items; each rerun computes only the others."""
    spec = _spec(tiny_dirs)
    cell = tmp_path / spec.relative_dir
    cache = work_dir(cell) / CACHE_DIR
    held = [_kill_after(_run_in_job(spec, tmp_path), cache, 2, signal.SIGTERM)]
    assert not cell.exists() and held[0] < ITEMS
    assert cell_status(Cell(cell)) == f"interrupted ({held[0]}/{ITEMS} answered, attempt 1)"
    held.append(_kill_after(_run_in_job(spec, tmp_path), cache, held[0] + 3, signal.SIGKILL))
    assert held[1] < ITEMS and cell_status(Cell(cell)).startswith(f"interrupted ({held[1]}/{ITEMS} answered, attempt 2")
    assert run_cell(spec, tmp_path).status == "ok"
    record = _check_resumed(cell, uninterrupted, attempts=3)
    assert [entry["answered_before"] for entry in record["attempts"]] == [0, *held]
    assert "=== " + spec.name + ": attempt 3" in (cell / "run.log").read_text()


def read_offline_run(path: Path) -> tuple[dict, dict]:
    """(config, summary) of an offline wandb run, read back from its record file."""
    from wandb.proto import wandb_internal_pb2
    from wandb.sdk.internal import datastore

    store = datastore.DataStore()
    store.open_for_scan(str(path))
    config, summary = {}, {}
    while (data := store.scan_data()) is not None:
        record = wandb_internal_pb2.Record()
        record.ParseFromString(data)
        kind = record.WhichOneof("record_type")
        updates = {"run": lambda: record.run.config.update, "config": lambda: record.config.update,
                   "summary": lambda: record.summary.update}.get(kind)
        for item in updates() if updates else []:
            key = item.key or "/".join(item.nested_key)
            (summary if kind == "summary" else config)[key] = json.loads(item.value_json)
    return config, summary


def test_a_data_parallel_sweep_cell_resumes_and_logs_to_wandb(tiny_dirs: dict, synth_data: Path, tmp_path: Path,
                                                               uninterrupted: tuple[list[str], dict, Path]) -> None:
    """Two processes (``processes=2``: accelerate launch) through the sweep, killed mid-way with every
    process of its job, then the same sweep again: the answers of both ranks are reused, and the cell
    equals the single-process uninterrupted one (samples, scores, token counts); its wandb run holds
    its config and figures."""
    pytest.importorskip("wandb")
    command = [sys.executable, "-m", "vcast.sweep", f"results_root={tmp_path}", "model=tiny_qwen3vl",
               f"model.pretrained={tiny_dirs['qwen3_vl']}", "frames=8", "limit=null", "task=vcast_synth",
               "method=vcast", "ratio=0.25", "processes=2", "logger=wandb", "wandb.mode=offline"]
    cell = tmp_path / "adhoc/tiny_qwen3vl/8f/vcast/r0.25/vcast_synth"
    job = subprocess.Popen(command, cwd=ROOT, env=_child_env(), start_new_session=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)  # in a session of its own, as a SLURM job step
    held = _kill_after(job, work_dir(cell) / CACHE_DIR, 4, signal.SIGKILL)
    assert held < ITEMS
    rerun = subprocess.run(command, cwd=ROOT, env=_child_env(), capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    record = _check_resumed(cell, uninterrupted, attempts=2)
    assert record["attempts"][1]["answered_before"] == held and record["world_size"] == 2
    assert len(list((cell / "efficiency").glob("rank*.jsonl"))) == 2
    single = read_cell(uninterrupted[2])
    for key in ("items", "mean_video_tokens_kept", "mean_video_tokens_total", "output_tokens"):
        assert record["efficiency"][key] == single["efficiency"][key], key
    # One wandb run, for the finished cell (the killed attempt logged nothing).
    [run_file] = (tmp_path / "adhoc" / "wandb").rglob("offline-run-*/run-*.wandb")
    config, summary = read_offline_run(run_file)
    assert config["method"] == "vcast" and config["ratio"] == 0.25 and config["processes"] == 2
    assert summary["status"] == "ok"
    assert summary["score/vcast_synth/vcast_synth_acc"] == record["scores"]["vcast_synth"]["vcast_synth_acc"]
    assert summary["efficiency/mean_video_tokens_kept"] == record["efficiency"]["mean_video_tokens_kept"]


def _copy_cache(uninterrupted_cell: Path, cell: Path) -> Path:
    """The finished cell's response cache copied into ``cell``'s working folder (as a killed
    attempt leaves it); the copy."""
    copy = work_dir(cell) / CACHE_DIR
    shutil.copytree(uninterrupted_cell / CACHE_DIR, copy)
    return copy


def test_resume_false_starts_afresh_and_keeps_the_old_answers_aside(tiny_dirs: dict, synth_data: Path,
                                                                   tmp_path: Path,
                                                                   uninterrupted: tuple[list[str], dict, Path]) -> None:
    """Every answer of the cell is in its working folder's cache, yet ``resume=false`` computes
    all of them, and keeps the earlier work aside."""
    spec = _spec(tiny_dirs)
    cell = tmp_path / spec.relative_dir
    _copy_cache(uninterrupted[2], cell)
    record = run_cell(spec, tmp_path, resume=False)
    assert record.status == "ok" and _samples_text(cell) == uninterrupted[0]
    assert [(e.answered_before, e.computed) for e in record.attempts] == [(0, ITEMS)]
    assert record.efficiency.total_latency_s > 0 and record.efficiency.resumed_over is None
    [aside] = cell.parent.glob(f".{cell.name}.set-aside-*")
    assert "resume=false" in record.set_aside[0] and answered(aside / CACHE_DIR) == ITEMS


def test_a_cache_from_another_cell_is_set_aside_not_used(tiny_dirs: dict, synth_data: Path, tmp_path: Path,
                                                         uninterrupted: tuple[list[str], dict, Path]) -> None:
    """The finished r=0.25 cell's cache copied into the r=0.5 cell's working folder (its identity
    stamp removed, as by hand): lmms-eval's recorded model fingerprint gives it away; the run sets
    it aside, says so, and computes every item."""
    other = _spec(tiny_dirs, ratio=0.5, limit=4)
    cell = tmp_path / other.relative_dir
    (_copy_cache(uninterrupted[2], cell) / IDENTITY_FILE).unlink()
    record = run_cell(other, tmp_path)
    assert record.status == "ok"
    assert [(e.answered_before, e.computed) for e in record.attempts] == [(0, 4)]
    assert "set aside as" in (cell / "run.log").read_text() and ".set-aside-" in record.attempts[0].set_aside
    assert (cell / record.attempts[0].set_aside).is_dir()  # recorded where it lies, after the swap too
    assert json.loads((cell / CACHE_DIR / IDENTITY_FILE).read_text()) == json.loads(json.dumps(cell_identity(other)))
    [aside] = cell.glob(f"{CACHE_DIR}.set-aside-*")
    assert answered(aside) == ITEMS
    [fingerprint] = set(recorded_fingerprints(cell / CACHE_DIR).values())
    assert fingerprint.startswith(f"VCastQwen3VL[{identity_digest(cell_identity(other))}]|")


def test_a_working_folder_of_another_identity_is_set_aside(tmp_path: Path) -> None:
    """The sweep's own check, before any process starts: the cache's identity stamp names another
    cell (here another seed), so the whole working folder is set aside."""
    spec = tiny_spec({"qwen3_vl": str(tmp_path / "ckpt")})
    cell = tmp_path / spec.relative_dir
    stamp = work_dir(cell) / CACHE_DIR / IDENTITY_FILE
    stamp.parent.mkdir(parents=True)
    stamp.write_text(json.dumps({**cell_identity(spec), "seed": 1}))
    (work_dir(cell) / "efficiency").mkdir()
    work, notes = _working_folder(spec, cell, True, cell_identity(spec))
    [aside] = cell.parent.glob(f".{cell.name}.set-aside-*")
    assert (aside / "efficiency").is_dir() and "seed differ" in notes[0]
    assert json.loads(stamp.read_text()) == cell_identity(spec) and not (work / "efficiency").exists()


def test_start_attempt_sets_a_mismatched_cache_aside_and_merges_a_matching_one(tmp_path: Path) -> None:
    from lmms_eval.caching.response_cache import ResponseCache

    def cache_with_answer(root: Path, model: str) -> None:
        cache = ResponseCache.create(str(root), model=model, model_args="a=1")
        request = Instance(request_type="generate_until", arguments=("context", {"until": ["\n"]}),
                           idx=0, metadata={"task": "t", "doc_id": 0, "repeats": 1})
        store_answers(cache, [request], ["B"])
        cache.close()  # killed: never finalised, never merged

    cache_with_answer(tmp_path / "same", "M")
    attempt, aside = start_attempt(tmp_path / "same", model_fingerprint("M", "a=1"), 1)
    assert (attempt.number, attempt.answered_before, aside) == (1, 1, None)
    assert not list((tmp_path / "same" / "runs").iterdir())  # merged into cache.db, then removed

    cache_with_answer(tmp_path / "other", "N")
    attempt, aside = start_attempt(tmp_path / "other", model_fingerprint("M", "a=1"), 1)
    assert (attempt.number, attempt.answered_before) == (1, 0) and aside is not None
    assert recorded_fingerprints(aside) and answered(aside) == 1
    recorded = read_attempts(tmp_path / "other")[0]["set_aside"]
    assert recorded == aside.name and (tmp_path / recorded) == aside  # relative to the folder holding the cache


def test_an_answer_already_cached_does_not_shift_the_others(tmp_path: Path) -> None:
    """A batch whose first request is already answered (a padding repeat): each of the others is
    stored with its own answer."""
    from lmms_eval.caching.response_cache import ResponseCache

    cache = ResponseCache.create(str(tmp_path), model="M", model_args="")

    def request(doc_id: int) -> Instance:
        return Instance(request_type="generate_until", arguments=(f"question {doc_id}", {"until": ["\n"]}),
                        idx=0, metadata={"task": "t", "doc_id": doc_id, "repeats": 1})

    store_answers(cache, [request(0)], ["A"])
    store_answers(cache, [request(0), request(1), request(2)], ["A", "B", "C"])

    class Unused:
        def generate_until(self, requests: list) -> list:
            raise AssertionError(f"{len(requests)} request(s) not cached")

    assert cache.execute(Unused(), "generate_until", [request(2), request(1), request(0)]) == ["C", "B", "A"]
    cache.close()


def test_a_model_printed_with_its_address_gets_no_fingerprint_check(tmp_path: Path) -> None:
    """lmms-eval fingerprints ``f"{model}|..."``: a model without a stable print (a stock lmms-eval
    wrapper) could never find its answers again; its cache is not set aside at every attempt for it."""
    from vcast.eval.run import begin_attempt

    class Stock:
        pass

    from lmms_eval.caching.response_cache import ResponseCache

    cache = tmp_path / "cache"
    for expected in (1, 2):
        assert begin_attempt(Stock(), "a=1", cache, None) == expected
        earlier = ResponseCache.create(str(cache), model=Stock(), model_args="a=1")  # an earlier run's database
        request = Instance(request_type="generate_until", arguments=("q", {}), idx=0,
                           metadata={"task": "t", "doc_id": expected, "repeats": 1})
        store_answers(earlier, [request], ["A"])
        earlier.close()
    assert [entry["set_aside"] for entry in read_attempts(cache)] == [None, None]
    assert not list(tmp_path.glob("cache.set-aside-*")) and answered(cache) == 2


def test_an_unreadable_run_database_is_rebuilt_from_its_journal(tmp_path: Path) -> None:
    """A rank's database cut short (a copy to a network file system killed half-way) is no
    database; its journal still has every answer, and the merge takes them from there."""
    from lmms_eval.caching.response_cache import ResponseCache

    cache = ResponseCache.create(str(tmp_path), model="M", model_args="")
    requests = [Instance(request_type="generate_until", arguments=(f"q{doc}", {}), idx=0,
                         metadata={"task": "t", "doc_id": doc, "repeats": 1}) for doc in range(3)]
    store_answers(cache, requests, ["A", "B", "C"])
    cache.close()
    [database] = tmp_path.glob("runs/*/rank_0.db")
    database.write_bytes(b"not a database, cut short")
    attempt, _ = start_attempt(tmp_path, None, 1)
    assert attempt.answered_before == 3

    class Unused:
        def generate_until(self, requests: list) -> list:
            raise AssertionError(f"{len(requests)} request(s) not recovered")

    again = ResponseCache.create(str(tmp_path), model="M", model_args="")
    assert again.execute(Unused(), "generate_until", requests) == ["A", "B", "C"]
    again.close()


def test_merging_waits_for_a_reader_of_the_cache(tmp_path: Path) -> None:
    """A reader with the merged database open (``status`` or a progress poll, as the next attempt starts)
    lets the checkpoint through but not the change of journal mode, which raises at once: consolidation
    waits for the reader to close, and says which database when it never does."""
    import sqlite3
    import threading

    from vcast.eval.resume import _settle

    database = tmp_path / "cache.db"
    with contextlib.closing(sqlite3.connect(database)) as db:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE answers (x)")
        db.execute("INSERT INTO answers VALUES (1)")
        db.commit()
    reader = sqlite3.connect(f"file:{database}?mode=ro", uri=True, check_same_thread=False)
    reader.execute("BEGIN")
    assert reader.execute("SELECT x FROM answers").fetchall() == [(1,)]
    with pytest.raises(RuntimeError, match=f"could not checkpoint {re.escape(str(database))}"):
        _settle(database, tries=2)
    release = threading.Timer(0.5, reader.close)
    release.start()
    _settle(database)  # returns once the reader has closed
    release.join()
    with contextlib.closing(sqlite3.connect(database)) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert db.execute("SELECT x FROM answers").fetchall() == [(1,)]


def test_status_names_the_attempt_a_job_runs_before_it_records_it(tmp_path: Path) -> None:
    """Early in attempt 2 (its model still loading, the cache's attempts list still ends at 1), the
    job holding the cell has already said which attempt it runs: status shows that one."""
    from vcast.sweep.execute import CellLock

    spec = tiny_spec({"qwen3_vl": str(tmp_path / "ckpt")})
    cell = tmp_path / spec.relative_dir
    cache = work_dir(cell) / CACHE_DIR
    cache.mkdir(parents=True)
    (cache / "attempts.jsonl").write_text(json.dumps({"attempt": 1, "answered_before": 0}) + "\n")
    code = ("import sys, time; from pathlib import Path; from vcast.sweep.execute import CellLock; "
            "lock = CellLock(Path(sys.argv[1])); assert lock.acquire(); lock.describe(2); "
            "print('held', flush=True); time.sleep(60)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(cell)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        shown = cell_status(Cell(cell))
    finally:
        holder.kill()
        holder.wait()
    assert shown.startswith("running (") and "attempt 2, starting" in shown, shown
    assert cell_status(Cell(cell)).startswith("interrupted (0/? answered, attempt 1)")  # the job is gone
    assert CellLock(cell).acquire()
