"""The offline ``vcast_synth`` benchmark: deterministic, true to its pixels, safe on disk, and
loadable by the real lmms-eval."""

from __future__ import annotations

import importlib.util
import json
import logging
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("av")
decord = pytest.importorskip("decord")

from vcast.eval import synthetic_benchmark as sb

ROOT = Path(__file__).resolve().parents[1]
TASK_DIR = ROOT / "vcast" / "eval" / "tasks" / "vcast_synth"
SATURATED = 80  # max - min over RGB: the grey background has ~0, every palette colour >= 140
MIN_OBJECT_PIXELS = 100  # the smallest object (a 24 px disc) has ~450 pixels


# ---------------------------------------------------------------------------------------------
# Helpers: what the decoded pixels alone say
# ---------------------------------------------------------------------------------------------


def read_records(jsonl: Path) -> list[dict]:
    return [json.loads(line) for line in jsonl.read_text().splitlines()]


def decode(path: Path) -> np.ndarray:
    """All frames of ``path`` through decord, the reader the harness uses. [T, H, W, 3] uint8"""
    reader = decord.VideoReader(str(path))
    return reader.get_batch(list(range(len(reader)))).asnumpy()


def nearest_colour(rgb: np.ndarray) -> str:
    names = list(sb.PALETTE)
    palette = np.array([sb.PALETTE[name] for name in names], dtype=np.float64)
    return names[int(np.argmin(((palette - rgb) ** 2).sum(axis=1)))]


def saturated(frames: np.ndarray) -> np.ndarray:
    """Pixels of a palette colour (not the grey texture). [T, H, W] bool"""
    pixels = frames.astype(np.int16)
    return pixels.max(axis=-1) - pixels.min(axis=-1) > SATURATED


def option_texts(record: dict) -> list[str]:
    return [option.split(". ", 1)[1] for option in record["options"]]


def letter_of(record: dict, text: str) -> str:
    texts = option_texts(record)
    return sb.LETTERS[texts.index(text)] if text in texts else ""


def runs(frame_ids: list[int]) -> int:
    """Number of runs of consecutive frame indices."""
    return sum(1 for i, t in enumerate(frame_ids) if i == 0 or t != frame_ids[i - 1] + 1)


def answer_from_pixels(record: dict, frames: np.ndarray) -> tuple[str, list[int]]:
    """The option letter and the event frames that ``frames`` [T, H, W, 3] support."""
    if record["category"] == "cut":
        labels = [nearest_colour(frame.reshape(-1, 3).mean(axis=0)) for frame in frames]
        changes = [t for t in range(1, len(labels)) if labels[t] != labels[t - 1]]
        return letter_of(record, labels[-1]), changes
    mask = saturated(frames)
    visible = [int(t) for t in np.nonzero(mask.sum(axis=(1, 2)) > MIN_OBJECT_PIXELS)[0]]
    if not visible:
        return "", []
    if record["category"] == "appear":
        colour = nearest_colour(frames[mask].reshape(-1, 3).astype(np.float64).mean(axis=0))
        return letter_of(record, colour), visible
    return letter_of(record, str(runs(visible))), visible


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default-sized benchmark (4 items per category), seed 0."""
    return sb.write_benchmark(tmp_path_factory.mktemp("synth") / "data", seed=0).parent


@pytest.fixture(scope="module")
def decoded(bench: Path) -> dict[str, np.ndarray]:
    return {r["question_id"]: decode(bench / r["video"]) for r in read_records(bench / sb.JSONL_NAME)}


def tree_mtimes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): p.stat().st_mtime_ns for p in sorted(root.rglob("*"))}


# ---------------------------------------------------------------------------------------------
# Content
# ---------------------------------------------------------------------------------------------


def test_schema_lengths_and_balance(bench: Path, decoded: dict[str, np.ndarray]) -> None:
    records = read_records(bench / sb.JSONL_NAME)
    assert [r["question_id"] for r in records] == [f"{c}_{i:03d}" for c in sb.CATEGORIES for i in range(4)]
    for r in records:
        assert r["video"] == f"videos/{r['question_id']}.mp4" and (bench / r["video"]).is_file()
        assert r["category"] == r["question_id"].rsplit("_", 1)[0]
        assert len(r["options"]) == 4 and len(set(r["options"])) == 4
        assert [o[:3] for o in r["options"]] == ["A. ", "B. ", "C. ", "D. "]
        assert len(set(option_texts(r))) == 4
        assert r["answer"] in sb.LETTERS
        assert sb.MIN_FRAMES <= r["num_frames"] <= sb.MAX_FRAMES and r["fps"] == sb.FPS
        assert r["duration"] == pytest.approx(r["num_frames"] / r["fps"])
        assert decoded[r["question_id"]].shape == (r["num_frames"], sb.HEIGHT, sb.WIDTH, 3)
    for category in sb.CATEGORIES:
        rows = [r for r in records if r["category"] == category]
        assert min(r["num_frames"] for r in rows) < 32, f"{category}: no clip shorter than 32 frames"
        assert sorted(r["answer"] for r in rows) == ["A", "B", "C", "D"], f"{category}: unbalanced letters"
    assert len({r["num_frames"] for r in records}) > 3  # the lengths vary


def test_answers_are_true_to_the_pixels(bench: Path, decoded: dict[str, np.ndarray]) -> None:
    for r in read_records(bench / sb.JSONL_NAME):
        frames = decoded[r["question_id"]]
        letter, events = answer_from_pixels(r, frames)
        assert letter == r["answer"], f"{r['question_id']}: pixels say {letter!r}, jsonl says {r['answer']!r}"
        assert events == r["event_frames"], f"{r['question_id']}: events at {events}, jsonl {r['event_frames']}"
        if r["category"] == "appear":
            assert 2 <= len(events) <= 4 and runs(events) == 1
            assert 0 < events[0] and events[-1] < len(frames) - 1
        elif r["category"] == "count":
            colour = nearest_colour(frames[saturated(frames)].reshape(-1, 3).astype(np.float64).mean(axis=0))
            assert f" {colour} " in r["question"], f"{r['question_id']}: the flashes are {colour}"
        else:  # cut: the colour before the cut is offered as a distractor
            before = nearest_colour(frames[0].reshape(-1, 3).mean(axis=0))
            assert letter_of(r, before) not in ("", r["answer"])
            assert 0.2 * len(frames) <= events[0] <= 0.8 * len(frames)


def test_the_pixel_checks_can_fail(bench: Path, decoded: dict[str, np.ndarray]) -> None:
    """Edited clips give other answers, so agreement above is not by construction."""
    records = {r["question_id"]: r for r in read_records(bench / sb.JSONL_NAME)}
    cut = records["cut_000"]
    letter, events = answer_from_pixels(cut, decoded["cut_000"][::-1])
    assert letter != cut["answer"] and events != cut["event_frames"]

    appear = records["appear_000"]
    frames = decoded["appear_000"].copy()
    frames[appear["event_frames"]] = frames[0]  # hide the object
    assert answer_from_pixels(appear, frames) == ("", [])

    count = next(r for r in records.values() if r["category"] == "count" and r["answer"] != "A")
    frames = decoded[count["question_id"]].copy()
    frames[count["event_frames"][0]:count["event_frames"][-1] + 1] = frames[count["event_frames"][0]]  # one long flash
    letter, _ = answer_from_pixels(count, frames)
    assert letter == "A" != count["answer"]


def test_same_seed_same_benchmark_other_seed_differs(bench: Path, decoded: dict, tmp_path: Path) -> None:
    again = sb.write_benchmark(tmp_path / "again", seed=0).parent
    assert (again / sb.JSONL_NAME).read_bytes() == (bench / sb.JSONL_NAME).read_bytes()
    for r in read_records(again / sb.JSONL_NAME):
        np.testing.assert_array_equal(decode(again / r["video"]), decoded[r["question_id"]])
    small = [sb.write_benchmark(tmp_path / f"seed{seed}", seed=seed, items_per_category=1) for seed in (0, 1)]
    assert read_records(small[0]) != read_records(small[1])


# ---------------------------------------------------------------------------------------------
# On disk
# ---------------------------------------------------------------------------------------------


def test_second_call_is_a_no_op_and_mismatches_raise(tmp_path: Path) -> None:
    out = tmp_path / "data"
    jsonl = sb.write_benchmark(out, seed=3, items_per_category=1)
    assert jsonl == out / sb.JSONL_NAME
    manifest = json.loads((out / sb.MANIFEST_NAME).read_text())
    assert manifest["seed"] == 3 and manifest["items_per_category"] == 1 and manifest["num_items"] == 3
    before = tree_mtimes(out)
    assert sb.write_benchmark(out, seed=3, items_per_category=1) == jsonl
    assert tree_mtimes(out) == before

    with pytest.raises(ValueError, match="seed: found 3, requested 4"):
        sb.write_benchmark(out, seed=4, items_per_category=1)
    with pytest.raises(ValueError, match="items_per_category"):
        sb.write_benchmark(out, seed=3, items_per_category=2)
    assert tree_mtimes(out) == before

    (out / "videos" / "cut_000.mp4").unlink()  # incomplete: refused, not silently reused
    with pytest.raises(ValueError, match="incomplete"):
        sb.write_benchmark(out, seed=3, items_per_category=1)

    sb.write_benchmark(out, seed=4, items_per_category=1, overwrite=True)
    assert json.loads((out / sb.MANIFEST_NAME).read_text())["seed"] == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # no temp or old folders left

    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match="no manifest.json"):
        sb.write_benchmark(foreign, items_per_category=1)
    assert (foreign / "notes.txt").read_text() == "mine"
    (tmp_path / "empty").mkdir()
    assert sb.write_benchmark(tmp_path / "empty", items_per_category=1).is_file()  # an empty folder is filled


def test_failure_midway_leaves_nothing_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_write = sb.write_mp4
    calls = []

    def failing_write(*args, **kwargs):
        calls.append(args[0])
        if len(calls) > 2:
            raise RuntimeError("disk full")
        real_write(*args, **kwargs)

    out = tmp_path / "data"
    monkeypatch.setattr(sb, "write_mp4", failing_write)
    with pytest.raises(RuntimeError, match="disk full"):
        sb.write_benchmark(out, items_per_category=1)
    assert list(tmp_path.iterdir()) == []

    monkeypatch.setattr(sb, "write_mp4", real_write)
    sb.write_benchmark(out, seed=0, items_per_category=1)
    before = tree_mtimes(out)
    monkeypatch.setattr(sb, "write_mp4", failing_write)
    calls.clear()
    with pytest.raises(RuntimeError, match="disk full"):
        sb.write_benchmark(out, seed=1, items_per_category=1, overwrite=True)
    assert tree_mtimes(out) == before  # the previous benchmark is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_a_concurrent_identical_write_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "data"
    real_generate = sb._generate
    theirs: dict[str, int] = {}

    def racing_generate(tmp: Path, seed: int, items_per_category: int) -> int:
        count = real_generate(tmp, seed, items_per_category)
        shutil.copytree(tmp, out)  # another process finishes the same benchmark first
        theirs.update(tree_mtimes(out))
        return count

    monkeypatch.setattr(sb, "_generate", racing_generate)
    assert sb.write_benchmark(out, items_per_category=1) == out / sb.JSONL_NAME
    assert tree_mtimes(out) == theirs and len(theirs) > 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]


@pytest.mark.parametrize("kwargs", [{"seed": -1}, {"items_per_category": 0}, {"seed": 1.5}])
def test_bad_arguments_raise(tmp_path: Path, kwargs: dict) -> None:
    with pytest.raises(ValueError):
        sb.write_benchmark(tmp_path / "data", **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_cli_writes_and_refuses_a_different_seed(tmp_path: Path) -> None:
    out = tmp_path / "cli"
    cmd = [sys.executable, str(ROOT / "scripts" / "make_synthetic_benchmark.py"), "--out", str(out),
           "--items-per-category", "1", "--seed", "2"]
    result = subprocess.run(cmd, check=False, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "3 items" in result.stdout and str(out) in result.stdout
    assert len(read_records(out / sb.JSONL_NAME)) == 3 and len(list((out / "videos").glob("*.mp4"))) == 3
    result = subprocess.run(cmd[:-1] + ["5"], check=False, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "seed: found 2, requested 5" in result.stderr


# ---------------------------------------------------------------------------------------------
# The lmms-eval task
# ---------------------------------------------------------------------------------------------


def load_task_utils():
    spec = importlib.util.spec_from_file_location("vcast_synth_utils", TASK_DIR / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(
    ("response", "letter"),
    [
        ("B", "B"), ("B.", "B"), ("(C)", "C"), ("d", "D"), (" [a] ", "A"), ("**D**", "D"),
        ("The answer is B", "B"), ("Answer: C. blue", "C"), ("A. red", "A"), ("A", "A"),
        ("A red square, so D", "D"), ("A cat", ""), ("the answer is b", ""), ("red", ""),
        ("", ""), ("ABCD", ""), ("E", ""),
    ],
)
def test_parse_choice(response: str, letter: str) -> None:
    assert load_task_utils().parse_choice(response) == letter


@pytest.mark.parametrize(
    ("response", "letter"),
    [
        (" blue", "C"), ("Blue.", "C"), ("3", ""), ("green", ""), ("blue (A)", "A"), ("blue or red", ""),
        ("D", "D"), ("", ""),
    ],
)
def test_parse_choice_falls_back_to_the_option_text(response: str, letter: str) -> None:
    """Rule 3, after the letter rules: a reply that is exactly one option's text names it."""
    options = ["A. red", "B. yellow", "C. blue", "D. cyan"]
    assert load_task_utils().parse_choice(response, options) == letter
    assert load_task_utils().parse_choice(" 3", ["A. 1", "B. 2", "C. 3", "D. 4"]) == "C"


def copy_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: str, seed: int) -> Iterator[Path]:
    """A copy of the task folder with only the ``data`` folder (``data``, ``data_heldout``) of 3 items
    from ``seed``, and the datasets cache in tmp_path; yields the copy's parent (an include path)."""
    tasks = tmp_path / "tasks"
    shutil.copytree(TASK_DIR, tasks / "vcast_synth", ignore=shutil.ignore_patterns("data", "data_heldout",
                                                                                   "__pycache__"))
    sb.write_benchmark(tasks / "vcast_synth" / data, seed=seed, items_per_category=1)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf" / "datasets"))
    from lmms_eval.api import task as task_module

    # lmms-eval resolves the datasets cache once per process; make it read the variables above.
    clear = getattr(task_module._resolve_hf_datasets_cache_dir, "cache_clear", lambda: None)
    clear()
    yield tasks
    clear()


@pytest.fixture
def task_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A copy of the task folder with its own data/ (3 items) and no data_heldout/."""
    yield from copy_task(tmp_path, monkeypatch, "data", 0)


@pytest.fixture
def heldout_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A copy of the task folder with its own data_heldout/ (3 items) and no data/ (the default
    set a user who ran only ``make synth-heldout`` lacks)."""
    yield from copy_task(tmp_path, monkeypatch, "data_heldout", sb.HELDOUT_SEED)


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if record.levelno >= logging.ERROR]


def test_a_task_without_data_is_named_only_when_it_is_requested(heldout_copy: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    """lmms-eval imports utils.py for every task that names it: loading vcast_synth_heldout says
    nothing about vcast_synth's missing data/; loading vcast_synth names it and its make target."""
    from lmms_eval.tasks import TaskManager, get_task_dict

    manager = TaskManager(include_path=str(heldout_copy), include_defaults=False, model_name="qwen3_vl")
    assert {"vcast_synth", "vcast_synth_heldout"} <= set(manager.all_tasks)
    with caplog.at_level(logging.INFO):
        task = get_task_dict(["vcast_synth_heldout"], manager)["vcast_synth_heldout"]
    assert len(list(task.test_docs())) == 3
    (video,) = task.doc_to_visual(next(iter(task.test_docs())))
    assert Path(video).parent.parent == heldout_copy / "vcast_synth" / "data_heldout"
    assert _errors(caplog) == []

    with caplog.at_level(logging.INFO), pytest.raises(Exception):  # lmms-eval's loader, after its retries
        get_task_dict(["vcast_synth"], manager)
    (error,) = _errors(caplog)
    assert error.startswith(f"vcast_synth: {heldout_copy / 'vcast_synth' / 'data' / 'vcast_synth.jsonl'} is missing")
    assert "make synth-data" in error


def test_task_loads_through_lmms_eval(task_copy: Path) -> None:
    from lmms_eval.tasks import TaskManager, get_task_dict

    manager = TaskManager(include_path=str(task_copy), model_name="qwen3_vl")
    assert Path(manager.task_index["vcast_synth"]["yaml_path"]).parent == task_copy / "vcast_synth"
    task = get_task_dict(["vcast_synth"], manager)["vcast_synth"]
    docs = list(task.test_docs())
    records = read_records(task_copy / "vcast_synth" / "data" / sb.JSONL_NAME)
    assert [d["question_id"] for d in docs] == [r["question_id"] for r in records]
    assert task.config.generation_kwargs["max_new_tokens"] == 16
    assert task.config.generation_kwargs["do_sample"] is False

    for doc in docs:
        (video,) = task.doc_to_visual(doc)
        assert isinstance(video, str) and Path(video).is_absolute() and Path(video).is_file()
        assert len(decord.VideoReader(video)) == doc["num_frames"]
        text = task.doc_to_text(doc)
        assert text.startswith(doc["question"] + "\n") and "\n".join(doc["options"]) in text
        assert text.endswith("Answer with the option's letter from the given choices directly.")
        assert task.doc_to_target(doc) == doc["answer"]

    wrong = {"A": "B", "B": "C", "C": "D", "D": "A"}
    right = [task.process_results(d, [d["answer"]])["vcast_synth_acc"] for d in docs]
    assert [r["score"] for r in right] == [1.0] * 3 and right[0]["question_id"] == docs[0]["question_id"]
    mixed = [task.process_results(docs[0], [f"({docs[0]['answer']})"])["vcast_synth_acc"],
             task.process_results(docs[1], [wrong[docs[1]["answer"]]])["vcast_synth_acc"],
             task.process_results(docs[2], ["I cannot tell."])["vcast_synth_acc"]]
    assert [r["pred"] for r in mixed][1:] == [wrong[docs[1]["answer"]], ""]
    aggregate = task.aggregation()["vcast_synth_acc"]
    assert aggregate(right) == 100.0
    assert aggregate(mixed) == pytest.approx(100.0 / 3)
    assert aggregate([r for r in mixed[1:]]) == 0.0
    assert task.higher_is_better()["vcast_synth_acc"] is True


def test_missing_video_names_the_fix() -> None:
    with pytest.raises(FileNotFoundError, match="make_synthetic_benchmark.py"):
        load_task_utils().doc_to_visual({"video": "videos/no_such_clip.mp4"})
