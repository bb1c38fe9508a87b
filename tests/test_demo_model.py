"""The demo model: its committed checkpoint, the recipe's checks, and training batches built as the
harness builds its inputs (prompt, frames, reply)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from vcast.demo_model.checksums import checksum_problems, write_checksums
from vcast.demo_model.examples import (
    encode,
    frame_indices,
    generation_inputs,
    reply_text,
    running_onsets,
)
from vcast.demo_model.recipe import (
    Recipe,
    check_disjoint_from_evaluation,
    training_seeds,
)
from vcast.eval.synthetic_benchmark import HELDOUT_SEED, Item, iter_items

ROOT = Path(__file__).resolve().parents[1]
DEMO_MODEL = ROOT / "checkpoints" / "demo_qwen3_vl"


def _item(category: str, total: int, events: tuple[int, ...], answer: str = "B") -> Item:
    frames = np.zeros((total, 128, 128, 3), dtype=np.uint8)
    options = ("A. 1", "B. 2", "C. 3", "D. 4") if category == "count" else ("A. red", "B. blue", "C. cyan", "D. green")
    return Item(f"{category}_x", category, "Q?", options, answer, frames, events)


@pytest.fixture(scope="module")
def processor():
    from transformers import AutoProcessor

    return AutoProcessor.from_pretrained(DEMO_MODEL)


def test_committed_checkpoint_matches_its_checksums_and_the_recipe() -> None:
    assert checksum_problems(DEMO_MODEL) == []
    info = json.loads((DEMO_MODEL / "training.json").read_text())
    assert info["recipe"] == Recipe().as_dict()  # retrain (make demo-model) after changing the recipe
    curve = (DEMO_MODEL / "loss_curve.csv").read_text().splitlines()
    assert len(curve) == 1 + Recipe().steps


def test_checksums_name_a_changed_missing_or_unlisted_file(tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(b"a")
    (tmp_path / "b.json").write_text("{}")
    write_checksums(tmp_path)
    assert checksum_problems(tmp_path) == []
    (tmp_path / "a.bin").write_bytes(b"A")
    (tmp_path / "b.json").unlink()
    (tmp_path / "c.txt").write_text("new")
    assert checksum_problems(tmp_path) == ["b.json: missing", "a.bin: checksum differs", "c.txt: not listed"]
    verify = subprocess.run([sys.executable, "-m", "vcast.demo_model.verify", str(tmp_path)], capture_output=True,
                            text=True)
    assert verify.returncode == 1 and "a.bin: checksum differs" in verify.stderr and "make demo-model" in verify.stderr


def test_running_onsets_count_each_flash_once_per_read_frame() -> None:
    # 8 frames, all read: flashes on 1-2 and 5 -> onsets at 1 and 5; per temporal patch (frames 1, 3, 5, 7).
    assert running_onsets(_item("count", 8, (1, 2, 5)), list(range(8))).tolist() == [1, 1, 2, 2]
    # Frames 0, 2, 4, 6 read: a flash on 3-4 is seen (at 4); one on 3 alone is missed.
    assert running_onsets(_item("count", 8, (3, 4)), [0, 2, 4, 6]).tolist() == [0, 1]
    assert running_onsets(_item("count", 8, (3,)), [0, 2, 4, 6]).tolist() == [0, 0]
    # The cut: the new background comes on once and stays.
    assert running_onsets(_item("cut", 8, (3,)), list(range(8))).tolist() == [0, 1, 1, 1]
    # Capped at 4 (count's largest option).
    assert running_onsets(_item("count", 12, (0, 2, 4, 6, 8, 10)), list(range(12))).tolist() == [1, 2, 3, 4, 4, 4]


def test_frames_are_the_plugins() -> None:
    from vcast.eval.video import linspace_indices

    assert frame_indices(_item("appear", 64, (3,)), 32) == linspace_indices(64, 32)
    short = frame_indices(_item("appear", 31, (3,)), 32)  # 30: rounded down to the temporal patch
    assert short == linspace_indices(31, 30) and short[0] == 0 and short[-1] == 30


def test_labels_cover_the_reply_and_its_end(processor) -> None:
    items = [_item("appear", 20, (3, 4)), _item("count", 24, (2, 3, 9, 10), answer="B")]
    replies = [reply_text(item) for item in items]
    assert replies == [" blue", " 2"]
    batch = encode(processor, items, replies, frames=32)
    for row, want in zip(batch["labels"], replies):
        assert processor.tokenizer.decode(row[row != -100]) == want + "<|im_end|>"
    assert [t.shape[0] for t in batch["running_onsets"]] == [10, 12]


def test_training_prompt_is_the_plugins(processor, synth_data: Path) -> None:
    """The demo model sees in training the tokens the vcast_qwen3_vl plugin gives it in the harness."""
    from vcast.families.qwen3_vl.plugin import VCastQwen3VL

    item = next(iter_items(seed=0, items_per_category=4))  # appear_000, as written to the default set
    plugin = VCastQwen3VL(pretrained=str(DEMO_MODEL), max_num_frames=32, max_pixels=16384, min_pixels=4096,
                          device="cpu")
    from vcast.demo_model.examples import task_hooks

    context = task_hooks().doc_to_text(item.record(), {"post_prompt": task_hooks().DEFAULT_POST_PROMPT})
    harness = plugin._prepare([context], [[str(synth_data / item.record()["video"])]]).tensors
    ours = generation_inputs(processor, [item], 32)
    assert torch.equal(harness["input_ids"], ours["input_ids"])
    assert torch.equal(harness["video_grid_thw"], ours["video_grid_thw"])
    # Same frames, before (ours) and after (the plugin's) the mp4 round trip.
    assert (harness["pixel_values_videos"] - ours["pixel_values_videos"]).abs().mean() < 0.05


@pytest.mark.parametrize("bad, message", [
    (dict(frames=31), "frames must be even"),
    (dict(batch=0), "batch must be >= 1"),
    (dict(lr=-1.0), "lr must be a non-negative number"),
])
def test_recipe_names_a_bad_value(bad: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Recipe(**bad)


def test_training_seeds_stay_clear_of_the_evaluation_sets() -> None:
    seeds = training_seeds(Recipe())
    check_disjoint_from_evaluation(seeds)
    assert min(seeds) > max(0, HELDOUT_SEED)
    with pytest.raises(ValueError, match=f"evaluation seed {HELDOUT_SEED}"):
        check_disjoint_from_evaluation(range(HELDOUT_SEED - 1, HELDOUT_SEED + 1))


def test_train_writes_a_loadable_checksummed_folder_and_refuses_bad_settings(tmp_path: Path) -> None:
    from transformers import Qwen3VLForConditionalGeneration

    from vcast.demo_model.train import main

    out = tmp_path / "demo"
    assert main(["--out", str(out), "--set", "steps=1", "batch=2", "validation_items=1", "validate_every=1",
                 "loader_processes=0"]) == 0
    assert checksum_problems(out) == []
    info = json.loads((out / "training.json").read_text())
    assert info["recipe"]["steps"] == 1 and set(info["validation"]) == {"appear", "cut", "count", "all"}
    assert len((out / "loss_curve.csv").read_text().splitlines()) == 2
    assert isinstance(Qwen3VLForConditionalGeneration.from_pretrained(out), Qwen3VLForConditionalGeneration)
    with pytest.raises(SystemExit):  # exists, no --overwrite: refused, untouched
        main(["--out", str(out), "--set", "steps=1"])
    assert checksum_problems(out) == []
    for bad in ("steps=x", "nope=1", "betas=1", "bf16=maybe"):
        with pytest.raises(SystemExit):
            main(["--out", str(tmp_path / "other"), "--set", bad])
    assert not (tmp_path / "other").exists()


def test_a_reply_is_the_option_lines_own_token_and_the_demo_size_is_qwen3_vl_only(processor) -> None:
    from vcast.tiny_checkpoints import build

    tokens = processor.tokenizer.convert_ids_to_tokens(processor.tokenizer("C. blue\n blue")["input_ids"])
    assert tokens == ["C", ".", "Ġblue", "Ċ", "Ġblue"]
    with pytest.raises(ValueError, match="size .demo. does not exist for .llava_onevision."):
        build("llava_onevision", "demo", 0)
