"""The vLLM plugin's pure parts (no vLLM needed): settings, kept count, prompt rewrite, positions."""

from __future__ import annotations

import pytest
import torch

import vcast
from vcast.vllm import VLLM_METHODS, VCastSettings, check_settings, kept_count
from vcast.vllm.positions import (
    POSITION_COLUMNS,
    MediaSpan,
    decode_channels,
    encode_channels,
    initial_positions,
    media_extent,
    recompute_positions,
    relump,
)
from vcast.vllm.settings import RATIO_KWARG, request_settings, settings_from_config, without_request_options

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


def test_a_requests_own_ratio_is_checked_and_taken_out_of_the_processors_options() -> None:
    """``mm_processor_kwargs={"vcast_ratio": r}``: the server's settings at ``r``; a bad value is a ValueError
    naming the option and the value (the request's 400); transformers' processor never sees the key."""
    server = VCastSettings("vcast", 0.25, {"tau": 0.5})
    assert request_settings(server, {"size": 1}) is server
    assert request_settings(server, {RATIO_KWARG: 0.5}) == VCastSettings("vcast", 0.5, {"tau": 0.5})
    for bad in (1.5, 0, -0.1, "half", True, None, float("nan")):
        with pytest.raises(ValueError, match=f"'{RATIO_KWARG}'.*{bad!r}"):
            request_settings(server, {RATIO_KWARG: bad})
    assert without_request_options({RATIO_KWARG: 0.5, "size": 1}) == {"size": 1}
    options = {"size": 1}
    assert without_request_options(options) is options


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
    # The item's slots in the real per-frame layout: offsets from its first slot, its first video
    # token's distance from its first slot in vLLM's prompt (2 timestamp tokens, the vision start), slot index.
    t = [0, 1, 2, 3, 5, 6, 7, 8, 9, 11]
    h = [0, 1, 2, 3, 5, 6, 7, 8, 9, 11]
    w = [0, 1, 2, 4, 5, 6, 7, 8, 9, 11]
    item = torch.tensor([t, h, w, [3] * 10, list(range(10))])
    expected = [[0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 14, 15, 16],
                [0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 14, 15, 16],
                [0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11, 12, 14, 15, 16]]
    return ids, item, expected


def test_positions_are_the_unpruned_ones_of_the_kept_slots() -> None:
    ids, item, expected = _pruned_video()
    # The item's extent unpruned: 6 text slots + 2 steps x max(1, 2) = 10 (text after it at 3 + 10 + 1)
    start, _ = initial_positions(ids.numel(), [MediaSpan(3, 10, media_extent(10, 2, 2, (1, 2)))])
    assert start[:, 13:].tolist() == [[15, 16]] * 3  # the text after the video is right before it is encoded
    positions, delta = recompute_positions(ids, [item], start, 0, IMAGE, VIDEO)
    assert positions.tolist() == expected
    assert delta == 17 - ids.numel()  # decoding goes on from the unpruned maximum + 1


# Chunked prefill and prefix caching: a prompt of two pruned videos and an image, every step vLLM could take --


def _prompt_with_media(seed: int = 0):
    """A prompt as vLLM holds it (videos lumped), its media items' slots as the model hands them over
    ([5, L] each, real per-frame layout), their spans, and the positions HF gives the pruned sequence:
    the unpruned sequence's positions with the dropped video tokens taken out.

    Layout: text, two videos (3 steps of 2 x 3 and 2 steps of 3 x 2, 1-3 timestamp tokens per step,
    some steps keeping no token), text, an image of 2 x 2, text; numbered unpruned as Qwen3-VL does
    (text +1, a grid of h x w at (c, c + row, c + column) from its first position c, then c + max(h, w)).
    """
    generator = torch.Generator().manual_seed(seed)
    unpruned: list[tuple[int, tuple[int, int, int], str, int]] = []  # (token, position, kind, item)
    cursor = 0

    def text(count: int, token: int = TEXT, item: int = -1, kind: str = "text") -> None:
        nonlocal cursor
        for _ in range(count):
            unpruned.append((token, (cursor, cursor, cursor), kind, item))
            cursor += 1

    def grid(rows: int, columns: int, token: int, item: int) -> None:
        nonlocal cursor
        for row in range(rows):
            for column in range(columns):
                unpruned.append((token, (cursor, cursor + row, cursor + column), "media", item))
        cursor += max(rows, columns)

    videos = [(3, (2, 3)), (2, (3, 2))]
    text(3)
    for item, (steps, (rows, columns)) in enumerate(videos):
        text(1, VS)  # the template's outer vision start
        for _ in range(steps):
            text(int(torch.randint(1, 4, (1,), generator=generator)), TEXT, item, "slot")
            text(1, VS, item, "vs")
            grid(rows, columns, VIDEO, item)
            text(1, VE, item, "slot")
        text(2)  # the outer vision end, then text
    text(1, VS)
    grid(2, 2, IMAGE, 2)
    text(4)
    # Drop video tokens: a random half, and every token of the first video's middle step.
    dropped = set()
    for index, (token, _, _, item) in enumerate(unpruned):
        if token == VIDEO and bool(torch.rand(1, generator=generator) < 0.5):
            dropped.add(index)
    first_video = [i for i, (token, _, _, item) in enumerate(unpruned) if token == VIDEO and item == 0]
    dropped |= set(first_video[6:12])
    kept = [entry for index, entry in enumerate(unpruned) if index not in dropped]
    truth = torch.tensor([position for _, position, _, _ in kept]).T  # [3, N]
    items, spans = [], []
    for item in range(3):
        slots = [i for i, entry in enumerate(kept) if entry[3] == item]
        offset, length = slots[0], len(slots)
        base = kept[offset][1][0]
        rows = [[kept[i][1][axis] - base for i in slots] for axis in range(3)]
        lead = [kept[i][2] for i in slots].index("vs") + 1 if item < 2 else 0
        items.append(torch.tensor([*rows, [lead] * length, list(range(length))]))
        media = sum(1 for i in slots if kept[i][0] in (VIDEO, IMAGE))
        blocks, hw = (videos[item][0], videos[item][1]) if item < 2 else (1, (2, 2))
        spans.append(MediaSpan(offset, length, media_extent(length, media, blocks, hw)))
    ids = [token for token, _, _, _ in kept]
    # vLLM's prompt lumps each video's kept tokens into its first step's block.
    lumped = list(ids)
    for item in range(2):
        span = spans[item]
        inside = ids[span.offset: span.offset + span.length]
        count = inside.count(VIDEO)
        without = [token for token in inside if token != VIDEO]
        first_vs = without.index(VS)
        lumped[span.offset: span.offset + span.length] = without[: first_vs + 1] + [VIDEO] * count + without[first_vs + 1:]
    return torch.tensor(lumped), items, spans, truth


def _prefill(ids: torch.Tensor, items, spans, chunk: int, cached: int = 0) -> tuple[torch.Tensor, int]:
    """The positions after vLLM's runner prefills ``ids`` in ``chunk``-token steps from ``cached``
    (a cached prefix): each step hands over the part of every item inside its window."""
    positions, delta = initial_positions(ids.numel(), spans)
    start = cached
    while start < ids.numel():
        end = min(start + chunk, ids.numel())
        parts = [item[:, max(start - span.offset, 0): min(end - span.offset, span.length)]
                 for item, span in zip(items, spans) if span.offset < end and span.offset + span.length > start]
        positions, delta = recompute_positions(ids, parts, positions, start, IMAGE, VIDEO)
        start = end
    return positions, delta


def test_initial_positions_put_the_text_where_it_stays() -> None:
    ids, _, spans, truth = _prompt_with_media()
    positions, delta = initial_positions(ids.numel(), spans)
    inside = torch.zeros(ids.numel(), dtype=torch.bool)
    for span in spans:
        inside[span.offset: span.offset + span.length] = True
    assert torch.equal(positions[:, ~inside], truth[:, ~inside])
    assert delta == int(truth.max()) + 1 - ids.numel()


def test_every_chunk_size_gives_the_positions_of_one_prefill() -> None:
    """Chunk sizes 1 to the whole prompt: boundaries at every slot of both videos (frame boundaries,
    mid-frame, inside the timestamps) and of the image."""
    ids, items, spans, truth = _prompt_with_media()
    whole, whole_delta = _prefill(ids, items, spans, ids.numel())
    assert torch.equal(whole, truth) and whole_delta == int(truth.max()) + 1 - ids.numel()
    for chunk in range(1, ids.numel()):
        positions, delta = _prefill(ids, items, spans, chunk)
        assert torch.equal(positions, truth), f"chunk {chunk}"
        assert delta == whole_delta, f"chunk {chunk}"


def test_a_cached_prefix_ending_anywhere_leaves_the_rest_right() -> None:
    """A cached prefix ending at every slot (the prefix's positions were computed by the request that
    cached it), then 7-token chunks or the whole rest."""
    ids, items, spans, truth = _prompt_with_media()
    for cached in range(ids.numel()):
        for chunk in (7, ids.numel()):
            positions, delta = _prefill(ids, items, spans, chunk, cached)
            assert torch.equal(positions[:, cached:], truth[:, cached:]), f"cached {cached}, chunk {chunk}"
            assert delta == int(truth.max()) + 1 - ids.numel()


def test_a_part_that_is_not_the_first_cannot_continue_an_item() -> None:
    ids, items, spans, _ = _prompt_with_media()
    positions, _ = initial_positions(ids.numel(), spans)
    with pytest.raises(RuntimeError, match="only the step's first part can continue an item"):
        recompute_positions(ids, [items[0], items[1][:, 3:]], positions, 0, IMAGE, VIDEO)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_position_channels_survive_the_embeddings_dtype(dtype: torch.dtype) -> None:
    """bfloat16 rounds 257 to 256 (vLLM's one-column channels); the plugin's digits come back exact."""
    values = torch.tensor([[0, 1, 255, 256, 257, 301, 65535, 65536, 256 ** 3 - 1]] * 5)
    columns = encode_channels(values, dtype)
    assert columns.dtype == dtype and columns.shape == (values.shape[1], POSITION_COLUMNS)
    assert torch.equal(decode_channels(columns), values)
    if dtype == torch.bfloat16:
        assert torch.tensor([257.0]).to(dtype).long().item() == 256
    with pytest.raises(ValueError, match="position channels must lie in"):
        encode_channels(values + 1, dtype)
