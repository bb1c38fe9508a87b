"""The plugins' pipelined harness (issue 25, item 5): the bounded, ordered prefetcher on its own,
the plugin's answers and records with and without prefetching, and the decode / preprocess
seconds from the call records to cell.json's summary and the efficiency table.

No timing is asserted anywhere: the overlap itself is measured on a GPU
(``scripts/bench_prefetch.py``)."""

from __future__ import annotations

import csv
import io
import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from vcast.eval.prefetch import Prefetcher

ROOT = Path(__file__).resolve().parents[1]
QWEN_ARGS = {"max_num_frames": 8, "max_pixels": 16384, "min_pixels": 4096}


class Counting:
    """A ``prepare`` that records which items it started (in its thread), optionally failing on one."""

    def __init__(self, fail_on: Any = None) -> None:
        self.started: list[Any] = []
        self.threads: set[str] = set()
        self.fail_on = fail_on
        self.changed = threading.Condition()

    def __call__(self, item: Any) -> Any:
        with self.changed:
            self.started.append(item)
            self.threads.add(threading.current_thread().name)
            self.changed.notify_all()
        if item == self.fail_on:
            raise ValueError(f"cannot read item {item}")
        return ("prepared", item)

    def wait_for(self, count: int, timeout: float = 30.0) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.started) >= count, timeout), self.started


def _alive(name: str) -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == name and thread.is_alive()]


@pytest.mark.parametrize("depth", [0, 1, 2, 5])
def test_items_come_back_in_order_with_their_own_values(depth: int) -> None:
    prepare = Counting()
    with Prefetcher(range(12), prepare, depth, name=f"order-{depth}") as prepared:
        got = list(prepared)
    assert [p.item for p in got] == list(range(12))
    assert [p.value for p in got] == [("prepared", i) for i in range(12)]
    assert all(p.prepare_s >= 0 and p.wait_s >= 0 for p in got)
    assert prepare.started == list(range(12))  # one worker: prepared one after the other, in order
    if depth == 0:  # inline, in the consumer's thread, and waiting is preparing
        assert prepare.threads == {threading.current_thread().name}
        assert all(p.wait_s == p.prepare_s for p in got)
    else:
        assert prepare.threads == {f"order-{depth}"}
    assert not _alive(f"order-{depth}")


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_no_item_is_started_past_the_bound(depth: int) -> None:
    """At most ``depth`` items started and not yet taken; the source is pulled no further either."""
    pulled: list[int] = []

    def source() -> Iterator[int]:
        for index in range(10):
            pulled.append(index)
            yield index

    prepare = Counting()
    with Prefetcher(source(), prepare, depth, name="bound") as prepared:
        batches = iter(prepared)
        first = next(batches)
        assert first.item == 0
        # Taking item 0 frees one slot: items 1 .. depth+1 may start, and will; none beyond.
        prepare.wait_for(depth + 1)
        time.sleep(0.2)  # a worker ignoring the bound would start more meanwhile (no timing asserted)
        assert prepare.started == list(range(depth + 1)) and pulled == list(range(depth + 1))
        taken = 1
        for batch in batches:
            taken += 1
            assert batch.item == taken - 1
            assert len(prepare.started) <= taken + depth and len(pulled) <= taken + depth
    assert taken == 10 and prepare.started == list(range(10))


@pytest.mark.parametrize("depth", [0, 2])
def test_an_error_surfaces_at_its_own_item_and_stops_the_worker(depth: int) -> None:
    prepare = Counting(fail_on=3)
    taken = []
    with pytest.raises(ValueError, match="cannot read item 3"):
        with Prefetcher(range(10), prepare, depth, name="errors") as prepared:
            for batch in prepared:
                taken.append(batch.item)
    assert taken == [0, 1, 2]  # every earlier item first, then the error in the failing one's place
    assert prepare.started == [0, 1, 2, 3]  # nothing after the failing item was started
    assert not _alive("errors")


def test_leaving_the_loop_early_stops_and_joins_the_worker() -> None:
    prepare = Counting()
    with Prefetcher(range(100), prepare, 2, name="early") as prepared:
        for batch in prepared:
            if batch.item == 4:
                break
    assert not _alive("early") and len(prepare.started) <= 5 + 2

    prepare = Counting()
    with pytest.raises(RuntimeError, match="the model failed"):
        with Prefetcher(range(100), prepare, 2, name="raising") as prepared:
            for batch in prepared:
                if batch.item == 1:
                    raise RuntimeError("the model failed")
    assert not _alive("raising") and len(prepare.started) <= 2 + 2


def test_a_prefetcher_checks_its_depth_and_is_iterated_once() -> None:
    with pytest.raises(ValueError, match="prefetch depth must be an integer >= 0, got -1"):
        Prefetcher([], lambda item: item, -1)
    with Prefetcher([1], lambda item: item, 1) as prepared:
        assert [p.value for p in prepared] == [1]
        with pytest.raises(RuntimeError, match="iterated once"):
            iter(prepared)


# The plugin ------------------------------------------------------------------------------------

def _requests(paths: dict[int, str]) -> list:
    from lmms_eval.api.instance import Instance

    contexts = ["How many times does it flash?", "Which colour flashes first?\nA. red\nB. blue",
                "Where is the square?\nA. left\nB. right\nC. top\nD. bottom", "Count the flashes."]
    return [Instance("generate_until", (contexts[i % len(contexts)], {"max_new_tokens": 4},
                                        lambda doc: [doc["path"]], i, "mv", "test"),
                     idx=0, metadata={"task": "mv", "doc_id": i, "repeats": 1}) for i in paths]


def _plugin(arch: str, tiny_dirs: dict, **kwargs: Any) -> Any:
    from vcast.families.llava_onevision.plugin import VCastLlavaOV
    from vcast.families.qwen3_vl.plugin import VCastQwen3VL

    if arch == "llava_onevision":
        return VCastLlavaOV(pretrained=str(tiny_dirs[arch]), max_num_frames=8, **kwargs)
    return VCastQwen3VL(pretrained=str(tiny_dirs[arch]), **QWEN_ARGS, **kwargs)


@pytest.mark.parametrize("arch", ["qwen3_vl", "llava_onevision"])
def test_the_plugin_answers_and_records_the_same_with_and_without_prefetch(arch: str, tiny_dirs: dict,
                                                                            synth_data: Path, tmp_path: Path) -> None:
    """Six requests in batches of two, one video missing and one undecodable: the same answers,
    call records (items, tokens), kept-token records and missing items, in the same order, at
    prefetch 0 and 2; every record has its decode / preprocess seconds."""
    from vcast.eval.missing_visuals import read_missing
    from vcast.kept_records import to_json
    from vcast.results.tree import Cell

    items = [json.loads(line) for line in (synth_data / "vcast_synth.jsonl").read_text().splitlines()[:4]]
    (tmp_path / "broken.mp4").write_bytes(b"\x00 not a video")
    clips = [str(synth_data / item["video"]) for item in items]
    paths = {0: clips[0], 1: str(tmp_path / "gone.mp4"), 2: clips[1], 3: clips[2], 4: str(tmp_path / "broken.mp4"),
             5: clips[3]}
    runs = {}
    for prefetch in (0, 2):
        plugin = _plugin(arch, tiny_dirs, method="vcast", ratio=0.25, batch_size=2, prefetch=prefetch,
                         efficiency_dir=str(tmp_path / f"run{prefetch}" / "efficiency"))
        plugin.task_dict = {"mv": {"test": [{"path": paths[i]} for i in paths]}}
        answers = plugin.generate_until(_requests(paths))
        records = plugin.efficiency.records
        assert all(r.prepare_s is not None and r.prepare_s > 0 and r.wait_s is not None for r in records)
        runs[prefetch] = (answers, [(r.doc_ids, r.items, r.output_tokens, r.video_tokens_kept,
                                     r.video_tokens_total, r.prompt_tokens_before) for r in records],
                          read_missing(tmp_path / f"run{prefetch}" / "efficiency"),
                          [to_json(r) for r in Cell(tmp_path / f"run{prefetch}").kept().values()])
        assert not [t for t in threading.enumerate() if t.name.startswith("vcast-prefetch") and t.is_alive()]
    assert runs[0] == runs[2]
    answers, _, missing, kept = runs[2]
    assert answers[1] == answers[4] == ""
    assert sorted((r["task"], r["doc_id"]) for r in kept) == [("mv", 0), ("mv", 2), ("mv", 3), ("mv", 5)]
    assert sorted((item["doc_id"], item["error"].split(":")[0]) for item in missing) == [
        (1, "MissingVideo"), (4, "UndecodableVideo")]


def test_the_request_loop_never_decodes_with_the_workers_tokenizer(tiny_dirs: dict, synth_data: Path,
                                                                   tmp_path: Path) -> None:
    """The worker's processor calls set the fast tokenizer's padding, a mutable borrow in Rust that
    fails ("Already borrowed") while another thread decodes with the same tokenizer: the loop's
    decoding (answers, stop strings, pad and end ids) goes through its own copy."""
    items = [json.loads(line) for line in (synth_data / "vcast_synth.jsonl").read_text().splitlines()[:2]]
    paths = {i: str(synth_data / item["video"]) for i, item in enumerate(items)}
    plugin = _plugin("qwen3_vl", tiny_dirs, method="vcast", ratio=0.25, batch_size=1, prefetch=2)
    plugin.task_dict = {"mv": {"test": [{"path": paths[i]} for i in paths]}}
    shared = plugin.processor.tokenizer
    assert plugin._decoder is not shared and plugin._decoder._tokenizer is not shared._tokenizer

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the request loop decoded with the prefetch worker's tokenizer")

    for name in ("decode", "batch_decode", "convert_ids_to_tokens"):
        setattr(shared, name, refuse)
    answers = plugin.generate_until(_requests(paths))
    assert len(answers) == 2 and all(isinstance(answer, str) for answer in answers)


def test_the_plugin_refuses_a_bad_prefetch(tiny_dirs: dict) -> None:
    with pytest.raises(ValueError, match="prefetch must be >= 0, got -1"):
        _plugin("qwen3_vl", tiny_dirs, prefetch=-1)
    with pytest.raises(ValueError, match="prefetch must be an integer, got 'two'"):
        _plugin("qwen3_vl", tiny_dirs, prefetch="two")


# Records -> cell.json -> the efficiency table ----------------------------------------------------

def _record(doc_id: int, **times: float) -> dict[str, Any]:
    return {"task": "t", "tasks": ["t"], "doc_ids": [doc_id], "items": 1, "vision_s": 0.1, "selection_s": 0.01,
            "prefill_s": 0.2, "decode_s": 0.3, "generate_s": 0.6, "decode_steps": 3, "output_tokens": 3,
            "peak_memory_mb": 10.0, "memory_source": "process_peak_rss", "timer": "wall", "video_tokens_total": 64,
            "video_tokens_kept": 16, **times}


def test_the_summary_sums_decode_and_preprocess_and_reads_old_records() -> None:
    from vcast.eval.efficiency import CallRecord, summarize

    summary = summarize([_record(0, prepare_s=1.5, wait_s=0.25), _record(1, prepare_s=2.0, wait_s=0.0)], wall_s=5.0)
    assert summary["prepare_latency_s"] == pytest.approx(3.5) and summary["prepare_wait_s"] == pytest.approx(0.25)
    old = summarize([_record(0), _record(1, prepare_s=2.0, wait_s=0.0)], wall_s=5.0)  # a record from before
    assert old["prepare_latency_s"] is None and old["prepare_wait_s"] is None
    assert CallRecord(**{k: v for k, v in _record(0).items()}).prepare_s is None  # old lines still read


def test_the_efficiency_table_shows_decode_and_preprocess_unannotated(tmp_path: Path) -> None:
    from vcast.report.collect import collect
    from vcast.report.export import csv_text, markdown_text
    from vcast.report.layouts import LAYOUTS
    from vcast.report.scoring import load_task_scorings
    from vcast.report.tables import build_table
    from tests.support.sample_logs import Answer, answers_spec, write_answers_cell

    scoring = load_task_scorings()["videomme"]
    for method, ratio, prepare in (("vanilla", 1.0, 30.0), ("random", 0.25, 28.0), ("vcast", 0.25, 29.0)):
        answers = [Answer("A" if i % 2 else "B", "A", d) for d in ("short", "medium", "long") for i in range(4)]
        write_answers_cell(tmp_path, answers_spec("efficiency", "qwen3vl_8b", 32, ratio, method, scoring), scoring,
                           {"videomme": answers}, {"prefill_latency_s": 10.0, "prepare_latency_s": prepare,
                                                   "prepare_wait_s": 1.0})
    table = build_table(collect(tmp_path).frame, LAYOUTS["efficiency_comparison"], experiments=["efficiency"])
    rows = {r["method"]: r for r in csv.DictReader(io.StringIO(csv_text(table)))}
    assert float(rows["vcast"]["PrepareLatency_s"]) == 29.0 and float(rows["vanilla"]["PrepareLatency_s"]) == 30.0
    vcast = next(r for r in table.rows if r.method == "vcast")
    assert "PrepareLatency_s" not in vcast.notes and "PrepareLatency_s" not in vcast.marks
    assert "| Decode + Preprocess (s) | Total Latency (s) |" in markdown_text(table)


# Real lmms-eval ----------------------------------------------------------------------------------

def _task_with_bad_videos(synth_data: Path, root: Path, items: int) -> str:
    """A copy of vcast_synth (``vcast_synth_prefetch``) of its first ``items`` items, the second
    one's video missing and the fourth one's not a video."""
    source = ROOT / "vcast" / "eval" / "tasks" / "vcast_synth"
    task_dir = root / "vcast_synth_prefetch"
    (task_dir / "data" / "videos").mkdir(parents=True)
    (task_dir / "vcast_synth_prefetch.yaml").write_text(
        (source / "vcast_synth.yaml").read_text().replace("task: vcast_synth", "task: vcast_synth_prefetch"))
    shutil.copy(source / "utils.py", task_dir / "utils.py")
    lines = (synth_data / "vcast_synth.jsonl").read_text().splitlines()[:items]
    (task_dir / "data" / "vcast_synth.jsonl").write_text("\n".join(lines) + "\n")
    for index, line in enumerate(lines):
        video = json.loads(line)["video"]
        if index == 3:
            (task_dir / "data" / video).write_bytes(b"\x00 corrupt mp4")
        elif index != 1:
            shutil.copy(synth_data / video, task_dir / "data" / video)
    return str(root)


def _samples(output: Path) -> list[dict[str, Any]]:
    """Each doc's whole sample line (lmms-eval 0.7.3 writes no timestamps in them: doc_id, target,
    filtered_resps, the metric's per-doc record, input, doc_hash, token_counts), by doc id."""
    lines = next(output.rglob("*_samples_vcast_synth_prefetch.jsonl")).read_text().splitlines()
    samples = sorted(map(json.loads, lines), key=lambda sample: sample["doc_id"])
    assert all({"filtered_resps", "vcast_synth_acc"} <= set(sample) for sample in samples)
    return samples


@pytest.mark.slow
def test_lmms_eval_gives_identical_samples_with_and_without_prefetch(tiny_dirs: dict, synth_data: Path,
                                                                    tmp_path: Path) -> None:
    """The harness's runner (real lmms-eval, the synthetic benchmark's clips, one missing and one
    corrupt video among six items, batches of two): identical samples, scores, call records and
    missing items at prefetch=0 and prefetch=2."""
    from vcast.eval.efficiency import read_jsonl
    from vcast.eval.missing_visuals import read_missing
    from vcast.eval.run import main

    include = _task_with_bad_videos(synth_data, tmp_path / "tasks", items=6)
    runs = {}
    for prefetch in (0, 2):
        out, eff = tmp_path / f"out{prefetch}", tmp_path / f"eff{prefetch}"
        model_args = (f"pretrained={tiny_dirs['qwen3_vl']},method=vcast,ratio=0.25,max_num_frames=8,"
                      f"max_pixels=16384,min_pixels=4096,prefetch={prefetch},efficiency_dir={eff}")
        assert main(["--model", "vcast_qwen3_vl", "--model_args", model_args, "--tasks", "vcast_synth_prefetch",
                     "--include_path", include, "--output_path", str(out), "--batch_size", "2",
                     "--prompt_key", "qwen3_vl"]) == 0
        results = json.loads(next(out.rglob("*_results.json")).read_text())
        records = read_jsonl(eff, "rank*.jsonl")  # the efficiency folder of a bare run, not a cell's
        assert all(r["prepare_s"] > 0 and r["wait_s"] is not None for r in records)
        # Inline, the loop waits exactly as long as the batch takes to prepare; in the worker it does not.
        assert all(r["wait_s"] == r["prepare_s"] for r in records) is (prefetch == 0)
        runs[prefetch] = {
            "samples": _samples(out),
            "scores": results["results"]["vcast_synth_prefetch"],
            "calls": [(r["doc_ids"], r["output_tokens"], r["video_tokens_kept"], r["prompt_tokens_before"])
                      for r in records],
            "missing": read_missing(eff),
        }
    assert runs[0] == runs[2]
    assert len(runs[2]["samples"]) == 6 and sum(len(call[0]) for call in runs[2]["calls"]) == 4
    assert sorted(item["doc_id"] for item in runs[2]["missing"]) == [1, 3]
    answers = {s["doc_id"]: s["filtered_resps"] for s in runs[2]["samples"]}
    assert answers[1] == answers[3] == "" and all(answers[i] for i in (0, 2, 4, 5))  # the model answered the rest


@pytest.mark.slow
def test_bench_prefetch_prints_both_runs_and_their_ratios(tiny_dirs: dict, synth_data: Path, tmp_path: Path) -> None:
    """The benchmark script end to end on two items: one row per prefetch value (no timing asserted)."""
    import re
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "scripts/bench_prefetch.py", "--pretrained", str(tiny_dirs["qwen3_vl"]),
                          "--limit", "2", "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = [line.split() for line in run.stdout.splitlines() if re.match(r"\s+[02]\s+2\s+\d", line)]
    assert [row[0] for row in rows] == ["0", "2"] and all(row[-1].endswith("x") for row in rows)
