"""The vLLM plugin's pure parts (no vLLM needed): settings, kept count, prompt rewrite, positions."""

from __future__ import annotations

import pytest
import torch

import vcast
from vcast.vllm import VLLM_METHODS, VCastSettings, check_settings, kept_count
from vcast.vllm.positions import recompute_positions, relump
from vcast.vllm.settings import settings_from_config

VS, VE, VIDEO, IMAGE, TEXT = 10, 11, 20, 21, 2


@pytest.mark.parametrize("method", VLLM_METHODS)
@pytest.mark.parametrize("shape", [(4, 4, 4), (3, 2, 5), (8, 6, 8)])
def test_kept_count_is_the_selection_size(method: str, shape: tuple[int, int, int]) -> None:
    frames_t, rows, cols = shape
    frames = torch.randn(frames_t, rows * cols, 16, generator=torch.Generator().manual_seed(7))
    settings = VCastSettings(method=method, ratio=0.3)
    assert kept_count(settings, frames_t, (rows, cols)) == vcast.select(frames, 0.3, method).keep.numel()


def test_kept_count_follows_params() -> None:
    loose, tight = VCastSettings("vcast", 0.1, {"k_min": 0}), VCastSettings("vcast", 0.1, {"k_min": 3})
    assert kept_count(loose, 8, (4, 4)) == 12  # floor(0.1 * 128)
    assert kept_count(tight, 8, (4, 4)) == 24  # raised to T * k_min


@pytest.mark.parametrize("method, reason", [
    ("fastv", "inside the language model"),
    ("visionzip", "attention maps"),
    ("framefusion_merge", "merges or reorders"),
    ("nonexistent", "unknown method"),
])
def test_methods_that_cannot_run_in_vllm_are_refused(method: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        check_settings(VCastSettings(method=method, ratio=0.25))


def test_content_dependent_count_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pure pruning method whose count depends on the tokens (a norm threshold) cannot run in vLLM,
    which fixes the count before encoding; registered for this test only."""
    from baselines.common.selection_output import selection_from_positions
    from vcast import registry

    def threshold(frames: torch.Tensor, ratio: float) -> vcast.Selection:
        norms = frames.float().norm(dim=-1).flatten()
        keep = torch.nonzero(norms > 3.0).flatten()  # how many pass depends on the tokens
        return selection_from_positions(keep, frames.shape[0], frames.shape[1])

    registry.available_methods()  # load the built-in methods first
    for table, value in ((registry._REGISTRY, threshold), (registry._INPUTS, ()),
                         (registry._VARIANTS, ("paper",)), (registry._VARIANT_INPUTS, {})):
        monkeypatch.setitem(table, "norm_threshold_test", value)
    with pytest.raises(ValueError, match="depends on the video's content"):
        check_settings(VCastSettings("norm_threshold_test", 0.25))


def test_settings_from_config_names_bad_entries() -> None:
    class Config:
        vcast = {"method": "vcast", "ratio": 0.25, "tau": 0.7}

    with pytest.raises(ValueError, match="tau"):
        settings_from_config(Config())
    Config.vcast = {"method": "vcast", "ratio": 0.5, "params": {"tau": 0.9}}
    assert settings_from_config(Config()) == VCastSettings("vcast", 0.5, {"tau": 0.9})
    with pytest.raises(ValueError, match="hf_overrides"):
        settings_from_config(object())


def test_relump_resizes_each_video_run() -> None:
    ids = [1, VS, TEXT, VS, VIDEO, VIDEO, VIDEO, VE, VE, 1, VS, VIDEO, VE]
    assert relump(ids, VIDEO, [1, 3]) == [1, VS, TEXT, VS, VIDEO, VE, VE, 1, VS, VIDEO, VIDEO, VIDEO, VE]
    with pytest.raises(ValueError, match="more video-token runs than its 1 pruned video"):
        relump(ids, VIDEO, [1])


def _pruned_video() -> tuple[torch.Tensor, torch.Tensor, list[list[int]]]:
    """Two frames of 1 x 2 tokens after two timestamp tokens each, one token kept per frame (frame 0's
    second, frame 1's first), inside the template's outer vision start/end (transformers >= 5.10).

    Unpruned, HF numbers it: x 0, x 1, outer-VS 2, ts 3 4, VS 5, video (6,6,6) (6,6,7), VE 8,
    ts 9 10, VS 11, video (12,12,12) (12,12,13), VE 14, outer-VE 15, x 16.
    """
    # vLLM's prompt: the 2 kept tokens lumped into frame 0's block.
    ids = torch.tensor([1, 1, VS, TEXT, TEXT, VS, VIDEO, VIDEO, VE, TEXT, TEXT, VS, VE, VE, 1])
    # The item's slots in the real per-frame layout: offsets from its first slot, flags.
    t = [0, 1, 2, 3, 5, 6, 7, 8, 9, 11]
    h = [0, 1, 2, 3, 5, 6, 7, 8, 9, 11]
    w = [0, 1, 2, 4, 5, 6, 7, 8, 9, 11]
    is_vs = [0, 0, 1, 0, 0, 0, 0, 1, 0, 0]
    is_video = [0, 0, 0, 1, 0, 0, 0, 0, 1, 0]
    item = torch.tensor([t, h, w, is_vs, is_video])
    expected = [[0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 14, 15, 16],
                [0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 14, 15, 16],
                [0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 14, 15, 16]]
    return ids, item, expected


def test_positions_are_the_unpruned_ones_of_the_kept_slots() -> None:
    ids, item, expected = _pruned_video()
    stale = torch.arange(ids.numel()).expand(3, -1)
    positions, delta = recompute_positions(ids, [item], stale, 0, IMAGE, VIDEO)
    assert positions.tolist() == expected
    assert delta == 17 - ids.numel()  # decoding goes on from the unpruned maximum + 1


def test_a_video_split_by_a_prefill_chunk_is_refused() -> None:
    ids, item, _ = _pruned_video()
    with pytest.raises(RuntimeError, match="split at 5"):
        recompute_positions(ids, [item], torch.arange(ids.numel()).expand(3, -1), 5, IMAGE, VIDEO)
