"""Kept-token records: the format, what the lmms-eval plugins write for every video of every item
(real lmms-eval cells on the tiny checkpoints), in-LLM stages mapped back onto the grid, and the
recorded vision-side kept set bit-equal to the selection recomputed from the same features."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from vcast.kept_records import (FOLDER, Geometry, KeptRecord, append_records, from_json,
                                merged_grid_geometry, pack_mask, pooled_grid_geometry, rank_file, to_json,
                                unpack_mask)
from vcast.results.tree import Cell


def read_records(cell: Path, task=None) -> dict:
    """A cell's kept-token records as the results reader gives them."""
    return Cell(cell).kept(task)


CONTEXT = "How many times does it flash?\nA. 1\nB. 2\nC. 3\nD. 4"
QWEN_ARGS = {"max_num_frames": 8, "max_pixels": 16384, "min_pixels": 4096}


def _record(doc_id: int = 0, video: int = 0, stages: bool = True, seed: int = 0) -> KeptRecord:
    """A Qwen3-VL-shaped record at 64 frames of 448 px: 32 x 14 x 14 tokens, a quarter kept."""
    rng = np.random.default_rng(seed)
    geometry = Geometry("qwen3_vl", (32, 14, 14), 2, (448, 448))
    kept = np.zeros(geometry.tokens, dtype=bool)
    kept[rng.choice(geometry.tokens, geometry.tokens // 4, replace=False)] = True
    kept = kept.reshape(geometry.grid)
    stage = kept & (rng.random(geometry.grid) < 0.5)
    # Video-MME's long videos: frame indices up to ~100k frames, 64 of them.
    indices = np.linspace(0, 99_999, 64).round().astype(int).tolist()
    return KeptRecord(task="videomme", doc_id=doc_id, video=video, method="fastv" if stages else "vcast",
                      geometry=geometry, frame_indices=indices, budgets=kept.sum((1, 2)).tolist(), kept=kept,
                      stages=[(2, stage)] if stages else [])


def _same(a: KeptRecord, b: KeptRecord) -> None:
    assert (a.task, a.doc_id, a.video, a.method, a.geometry, a.frame_indices, a.budgets, a.merged) == (
        b.task, b.doc_id, b.video, b.method, b.geometry, b.frame_indices, b.budgets, b.merged)
    assert np.array_equal(a.kept, b.kept)
    assert [layer for layer, _ in a.stages] == [layer for layer, _ in b.stages]
    assert all(np.array_equal(x, y) for (_, x), (_, y) in zip(a.stages, b.stages))


# The format ------------------------------------------------------------------------------------

def test_masks_pack_to_bits_and_back() -> None:
    mask = np.random.default_rng(1).random((3, 5, 7)) < 0.3  # 105 bits: not a whole number of bytes
    text = pack_mask(mask)
    assert np.array_equal(unpack_mask(text, (3, 5, 7)), mask)
    assert len(text) == 4 * -(-14 // 3)  # ceil(105 / 8) = 14 bytes of base64
    for wrong in ((4, 5, 7), (3, 5, 6)):  # more bits than were packed, and fewer bytes' worth
        with pytest.raises(ValueError, match="cannot fill shape"):
            unpack_mask(text, wrong)
    assert unpack_mask(text, (1, 1, 110)).shape == (1, 1, 110)  # the same 14 bytes: the shape is the caller's


def test_records_round_trip_and_a_cut_last_line_is_skipped(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    records = [_record(0), _record(1, stages=False, seed=1), _record(1, video=1, seed=2)]
    for record in records:
        _same(from_json(json.loads(json.dumps(to_json(record)))), record)
    cell = tmp_path / "cell"
    assert append_records(rank_file(cell, 0), records[:2]) == 2
    assert append_records(rank_file(cell, 1), records[2:]) == 1
    line = json.dumps(to_json(_record(2)), separators=(",", ":"))
    with rank_file(cell, 1).open("a", encoding="utf-8") as handle:
        handle.write(line[: len(line) // 2])  # a run killed while writing
    with caplog.at_level(logging.WARNING, logger="vcast.results.tree"):
        found = read_records(cell)
    assert "rank1.jsonl:2: not a complete JSON line" in caplog.text
    assert sorted(found) == [("videomme", 0, 0), ("videomme", 1, 0), ("videomme", 1, 1)]
    for record in records:
        _same(found[(record.task, record.doc_id, record.video)], record)
    assert [doc for _, doc, _ in read_records(cell, "videomme")] == [0, 1, 1]
    assert read_records(cell, "mvbench") == {}
    newer = _record(0, seed=5)  # a rerun's record of the same item wins
    append_records(rank_file(cell, 2), [newer])
    _same(read_records(cell)[("videomme", 0, 0)], newer)


def test_a_record_refuses_masks_off_its_grid() -> None:
    record = _record(stages=False)
    with pytest.raises(ValueError, match="kept mask must be bool"):
        replace(record, kept=record.kept[:-1])
    with pytest.raises(ValueError, match="stage 2 mask must be bool"):
        replace(record, stages=[(2, record.kept.astype(np.uint8))])
    with pytest.raises(ValueError, match="budgets must have T = 32"):
        replace(record, budgets=record.budgets[:-1])
    with pytest.raises(ValueError, match="kept-token record format"):
        from_json({**to_json(record), "format": 99})


def test_geometries_of_the_two_families() -> None:
    qwen = qwen_geometry((32, 28, 28))  # 64 frames of 448 px: 2-frame temporal patches, 16 px patches
    assert qwen == Geometry("qwen3_vl", (32, 14, 14), 2, (448, 448)) and qwen.tokens == 6272
    assert qwen_geometry((4, 8, 12)).frame_size == (128, 192)
    with pytest.raises(ValueError, match="spatial merge"):
        qwen_geometry((4, 7, 8))
    llava = pooled_grid_geometry("llava_onevision", 32, 196, 384)  # 27 x 27 SigLIP patches pooled to 14 x 14
    assert llava == Geometry("llava_onevision", (32, 14, 14), 1, (384, 384))
    with pytest.raises(ValueError, match="not a square grid"):
        pooled_grid_geometry("llava_onevision", 8, 10, 70)
    with pytest.raises(ValueError, match="geometry family must be one of"):
        Geometry("qwen9", (1, 1, 1), 1, (32, 32))


def qwen_geometry(grid_thw: tuple[int, int, int]) -> Geometry:
    return merged_grid_geometry("qwen3_vl", grid_thw, patch_size=16, merge_size=2, temporal_patch=2)


def test_disk_cost_per_record_at_64_frames_of_448_px() -> None:
    """The sizes docs/harness.md states (one JSON line each; Video-MME: 2,700 of them)."""
    plain = len(json.dumps(to_json(_record(stages=False)), separators=(",", ":"))) + 1
    staged = len(json.dumps(to_json(_record(stages=True)), separators=(",", ":"))) + 1
    assert 1_000 < plain < 2_000 and 2_000 < staged < 3_200, (plain, staged)
    assert staged - plain == pytest.approx(4 * 784 / 3, abs=40)  # one more 784-byte mask in base64


# The plugins, in process ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def clips(synth_data: Path) -> list[str]:
    lines = (synth_data / "vcast_synth.jsonl").read_text().splitlines()[:3]
    return [str(synth_data / json.loads(line)["video"]) for line in lines]


def _plugin(arch: str, tiny_dirs: dict, **kwargs):
    from vcast.families.llava_onevision.plugin import VCastLlavaOV
    from vcast.families.qwen3_vl.plugin import VCastQwen3VL

    if arch == "llava_onevision":
        return VCastLlavaOV(pretrained=str(tiny_dirs[arch]), **{"max_num_frames": 8, **kwargs})
    return VCastQwen3VL(pretrained=str(tiny_dirs[arch]), **{**QWEN_ARGS, **kwargs})


def _entry_columns(stats, inputs) -> list[dict[int, int]]:
    """Per row ``{prompt column: column in the sequence that entered the LLM}`` of the tokens that
    survived the pre-LLM step, computed apart from the handle: surviving real tokens, in order,
    left-padded to the longest row (the plugins pad on the left)."""
    from vcast.models.reference import survivors

    keep = survivors(stats, inputs["input_ids"], inputs.get("attention_mask"))
    width = int(keep.sum(1).max())
    out = []
    for row in keep:
        columns = row.nonzero().squeeze(1).tolist()
        pads = width - len(columns)
        out.append({column: pads + rank for rank, column in enumerate(columns)})
    return out


@pytest.mark.parametrize("arch", ["qwen3_vl", "llava_onevision"])
@pytest.mark.parametrize("method", ["vcast", "fastv", "holitom_llm"])
def test_every_video_of_every_item_of_a_batch_gets_its_record(arch: str, method: str, tiny_dirs: dict,
                                                              clips: list[str], tmp_path: Path) -> None:
    """Two items, the first with two videos: three records, each on its own grid, its budgets its
    per-step counts, and each in-LLM stage the very columns the stage kept (mapped back onto the
    grid through the pre-LLM step, which holitom_llm prunes and merges)."""
    plugin = _plugin(arch, tiny_dirs, method=method, ratio=0.25, batch_size=2,
                     efficiency_dir=str(tmp_path / "efficiency"))
    prepared = plugin._prepare([CONTEXT, CONTEXT + " "], [[clips[0], clips[1]], [clips[2]]])
    inputs = prepared.tensors
    plugin._generate(prepared, {"max_new_tokens": 2}, ["t", "u"], [5, 7])
    stats = plugin.handle.stats
    records = read_records(tmp_path)
    assert sorted(records) == [("t", 5, 0), ("t", 5, 1), ("u", 7, 0)]
    assert plugin.recorder.kept_path == tmp_path / FOLDER / "rank0.jsonl"
    efficiency = plugin.efficiency.records[-1]
    assert sum(int(r.kept.sum()) for r in records.values()) == efficiency.video_tokens_kept
    for (task, doc_id, video), record in records.items():
        assert record.method == method and record.merged == (method == "holitom_llm")
        assert record.kept.sum(axis=(1, 2)).tolist() == record.budgets
        assert len(record.frame_indices) == record.geometry.grid[0] * record.geometry.frames_per_step
    first = records[("t", 5, 0)]
    if arch == "qwen3_vl":
        grids = inputs["video_grid_thw"].tolist()
        assert [r.geometry.grid for r in records.values()] == [(t, h // 2, w // 2) for t, h, w in grids]
        assert first.geometry.frames_per_step == 2 and first.geometry.frame_size == (grids[0][1] * 16, grids[0][2] * 16)
    else:
        assert first.geometry == Geometry("llava_onevision", (8, 3, 3), 1, (70, 70))  # tiny tower: 70 px, 5 -> 3
    from vcast.eval.video import read_llava_video, read_qwen_video

    read = (lambda path: read_qwen_video(path, 8)) if arch == "qwen3_vl" else (lambda path: read_llava_video(path, 8))
    assert [r.frame_indices for r in records.values()] == [read(clip).indices for clip in clips]

    from vcast.registry import is_llm_method

    assert bool(first.stages) == is_llm_method(method)
    if not first.stages:
        return
    entry = _entry_columns(stats, inputs)
    videos = [s for s in stats.segments if s.kind == "video"]
    rows = {(r.task, r.doc_id): row for row, r in enumerate([records[("t", 5, 0)], records[("u", 7, 0)]])}
    for number, stage in enumerate(stats.llm_stages):
        for row in range(2):
            columns = []
            for (task, doc_id, video), record in records.items():
                if rows[(task, doc_id)] != row:
                    continue
                layer, mask = record.stages[number]
                assert layer == stage.layer and not (mask & ~record.kept).any()  # a stage keeps kept tokens only
                segment = [s for s in videos if s.sample == row][video]
                columns += [entry[row][int(c)] for c in segment.positions[torch.from_numpy(mask.ravel())]]
            assert sorted(columns) == stage.columns[row].tolist(), (stage.layer, row)


def _recomputed_mask(model, inputs, method: str, ratio: float, grid: tuple[int, int, int]) -> np.ndarray:
    """The method run again on the vision encoder's own tokens of ``inputs``' one video."""
    from vcast.models.reference import encoder_selection

    with torch.inference_mode():
        selection = encoder_selection(model, inputs, method, ratio)
    return selection.mask().cpu().numpy().reshape(grid)


@pytest.mark.parametrize("arch", ["qwen3_vl", "llava_onevision"])
def test_the_recorded_kept_set_is_the_selection_on_the_encoders_features(arch: str, tiny_dirs: dict,
                                                                         clips: list[str], tmp_path: Path) -> None:
    """attach + generate through the plugin, then vcast.select again on the same video's encoder
    tokens: the recorded mask is that selection's mask, bit for bit."""
    plugin = _plugin(arch, tiny_dirs, method="vcast", ratio=0.25, efficiency_dir=str(tmp_path / "efficiency"))
    for doc_id, clip in enumerate(clips[:2]):
        prepared = plugin._prepare([CONTEXT], [[clip]])
        inputs = prepared.tensors
        plugin._generate(prepared, {"max_new_tokens": 2}, ["t"], [doc_id])
        record = read_records(tmp_path)[("t", doc_id, 0)]
        expected = _recomputed_mask(plugin.model, inputs, "vcast", 0.25, record.geometry.grid)
        assert np.array_equal(record.kept, expected), doc_id
        assert 0 < record.kept.sum() < record.kept.size


@pytest.mark.parametrize("method", ["fewer_frames", "downsample"])
def test_an_input_method_records_what_the_model_was_given(method: str, tiny_dirs: dict, clips: list[str],
                                                          tmp_path: Path) -> None:
    """Its own frames and grid (the input budget's), every token kept."""
    plugin = _plugin("qwen3_vl", tiny_dirs, method=method, ratio=0.25, max_num_frames=16, max_pixels=65536,
                     efficiency_dir=str(tmp_path / "efficiency"))
    plugin._generate(plugin._prepare([CONTEXT], [[clips[0]]]), {"max_new_tokens": 1}, ["t"], [0])
    ((budget,), (record,)) = plugin.efficiency.records[-1].input_budget, read_records(tmp_path).values()
    assert record.method == method and record.kept.all()
    assert len(record.frame_indices) == budget["frames"]
    assert record.geometry.grid == (budget["frames"] // 2, *budget["grid"])
    assert record.geometry.frame_size == (32 * budget["grid"][0], 32 * budget["grid"][1])
    if method == "fewer_frames":
        assert budget["frames"] < budget["reference_frames"]
    else:
        assert budget["grid"][0] * budget["grid"][1] < budget["reference_grid"][0] * budget["reference_grid"][1]


def test_no_efficiency_dir_or_record_kept_false_writes_nothing(tiny_dirs: dict, clips: list[str],
                                                               tmp_path: Path) -> None:
    plugin = _plugin("qwen3_vl", tiny_dirs, method="vcast", record_kept=False,
                     efficiency_dir=str(tmp_path / "efficiency"))
    plugin._generate(plugin._prepare([CONTEXT], [[clips[0]]]), {"max_new_tokens": 1}, ["t"], [0])
    assert plugin.recorder.kept_path is None and (tmp_path / "efficiency").is_dir() and not (tmp_path / FOLDER).exists()
    assert _plugin("qwen3_vl", tiny_dirs, method="vcast").recorder.kept_path is None


# Real lmms-eval cells through the sweep's runner ---------------------------------------------------

def _spec(tiny_dirs: dict, arch: str = "qwen3_vl", method: str = "vcast", **model_args):
    from vcast.sweep.cell import CellSpec

    qwen = arch == "qwen3_vl"
    return CellSpec(
        experiment="kept", model="tiny_qwen3vl" if qwen else "tiny_llava_ov",
        plugin="vcast_qwen3_vl" if qwen else "vcast_llava_ov", pretrained=str(tiny_dirs[arch]),
        prompt_key="qwen3_vl" if qwen else "default",
        model_args={**({"max_pixels": 16384, "min_pixels": 4096} if qwen else {}), **model_args},
        method=method, method_id=method, method_params={}, ratio=0.25, frames=8, task="vcast_synth",
        lmms_tasks=["vcast_synth"], limit=2)


def _run(spec, root: Path) -> tuple[Path, Any]:
    from vcast.sweep.execute import run_cell

    record = run_cell(spec, root)
    assert record.status == "ok", record.log_tail
    return root / spec.relative_dir, record


def _check_cell(cell: Path, synth_data: Path, arch: str, method: str) -> dict:
    """One record per item, counts per step its budgets, and the efficiency records' kept tokens."""
    from vcast.eval.video import read_llava_video, read_qwen_video

    records = read_records(cell)
    assert sorted(records) == [("vcast_synth", 0, 0), ("vcast_synth", 1, 0)]
    calls = Cell(cell).efficiency()
    assert sum(call["video_tokens_kept"] for call in calls) == sum(int(r.kept.sum()) for r in records.values())
    assert sum(call["video_tokens_final"] for call in calls) == sum(
        int((r.stages[-1][1] if r.stages else r.kept).sum()) for r in records.values())
    lines = (synth_data / "vcast_synth.jsonl").read_text().splitlines()
    for (_, doc_id, _), record in records.items():
        assert record.method == method and record.geometry.family == arch
        assert record.kept.sum(axis=(1, 2)).tolist() == record.budgets
        assert 0 < sum(record.budgets) <= record.kept.size
        path = str(synth_data / json.loads(lines[doc_id])["video"])
        reader = read_qwen_video(path, 8) if arch == "qwen3_vl" else read_llava_video(path, 8)
        assert record.frame_indices == reader.indices
    return records


@pytest.mark.slow
def test_a_vcast_cell_on_qwen3vl_records_every_item_exactly(tiny_dirs: dict, synth_data: Path,
                                                            tmp_path: Path) -> None:
    """The plugin path end to end: the records of a real cell (lmms-eval in a subprocess, prefetch
    on) equal vcast.select recomputed here on the same videos through the same processor."""
    cell, _ = _run(_spec(tiny_dirs), tmp_path)
    records = _check_cell(cell, synth_data, "qwen3_vl", "vcast")
    assert all(not r.stages and not r.merged and r.kept.sum() < r.kept.size for r in records.values())
    plugin = _plugin("qwen3_vl", tiny_dirs, method="vanilla")
    lines = (synth_data / "vcast_synth.jsonl").read_text().splitlines()
    for (_, doc_id, _), record in records.items():
        prepared = plugin._prepare([CONTEXT], [[str(synth_data / json.loads(lines[doc_id])["video"])]])
        inputs = prepared.tensors
        t, h, w = inputs["video_grid_thw"][0].tolist()
        assert record.geometry == Geometry("qwen3_vl", (t, h // 2, w // 2), 2, (h * 16, w * 16))
        expected = _recomputed_mask(plugin.model, inputs, "vcast", 0.25, record.geometry.grid)
        assert np.array_equal(record.kept, expected), doc_id


@pytest.mark.slow
def test_an_in_llm_cell_records_its_drop_stage(tiny_dirs: dict, synth_data: Path, tmp_path: Path) -> None:
    cell, _ = _run(_spec(tiny_dirs, method="fastv"), tmp_path)
    records = _check_cell(cell, synth_data, "qwen3_vl", "fastv")
    for record in records.values():
        assert record.kept.all()  # FastV drops nothing before the LLM
        ((layer, mask),) = record.stages
        assert layer == 2 and 0 < mask.sum() < mask.size


@pytest.mark.slow
def test_a_llava_cell_records_frames_of_the_pooled_grid(tiny_dirs: dict, synth_data: Path, tmp_path: Path) -> None:
    cell, _ = _run(_spec(tiny_dirs, arch="llava_onevision"), tmp_path)
    records = _check_cell(cell, synth_data, "llava_onevision", "vcast")
    assert {r.geometry for r in records.values()} == {Geometry("llava_onevision", (8, 3, 3), 1, (70, 70))}


@pytest.mark.slow
def test_record_kept_false_writes_no_records_and_is_the_same_cell(tiny_dirs: dict, synth_data: Path,
                                                                  tmp_path: Path) -> None:
    from vcast.sweep.cell import identity_mismatch
    from vcast.sweep.execute import run_cell

    off = _spec(tiny_dirs, record_kept=False)
    cell, _ = _run(off, tmp_path)
    assert not (cell / FOLDER).exists() and (cell / "efficiency").is_dir()
    on = _spec(tiny_dirs)
    assert on.relative_dir == off.relative_dir
    assert identity_mismatch(Cell(cell).record.spec, on) == []
    assert run_cell(on, tmp_path).status == "skipped"
    assert run_cell(_spec(tiny_dirs, record_kept=True), tmp_path).status == "skipped"
    assert identity_mismatch(Cell(cell).record.spec, _spec(tiny_dirs, max_pixels=8192)) != []


def test_the_sweep_takes_record_kept_as_a_model_argument() -> None:
    from vcast.eval.plugin_args import PLUGIN_ARGS, model_arg_problem
    from vcast.sweep.overrides import unread_overrides

    assert "record_kept" in PLUGIN_ARGS["vcast_qwen3_vl"] and "record_kept" in PLUGIN_ARGS["vcast_llava_ov"]
    assert model_arg_problem("vcast_llava_ov", "record_kept") is None
    assert model_arg_problem("vcast_vllm", "record_kept") is None  # vLLM records them too (test_vllm_equality.py)
    assert unread_overrides(["model=tiny_qwen3vl", "task=vcast_synth", "method=vcast",
                             "+model.args.record_kept=false"]) == []
