"""The pure pieces of the vLLM plugin's bookkeeping (no vLLM import, unit-tested in any env).

* :func:`relump`: a prompt's lumped video-token run resized to the plugin's kept count.
* :func:`media_extent` and :func:`initial_positions`: a prompt's MRoPE positions before any media
  item is encoded, every text token already where it will stay (each item's extent is its unpruned
  one, which its shape alone fixes), so a prefill chunk or a cached prefix that ends inside or after
  a pruned video leaves the text after it at the right positions.
* :func:`recompute_positions`: the positions of the media slots a prefill step computes, each item
  anchored at its own first slot (vLLM 0.32 anchors a video at the chat template's outer
  ``<|vision_start|>`` when transformers >= 5.10 keeps it, shifting every later position: bug (b)
  of docs/vllm.md), any part of an item at a time (bug (c)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

# Rows of a media item's position channels (vcast.vllm.model appends them to its embeddings): t, h, w
# offsets from the item's first position; LEAD, the slots from the item's first to its first image or
# video token in vLLM's prompt (a video's frame-0 timestamp and vision start; 0 for an image), which
# places an item a step reaches from its start; SLOT, the slot's index in the item, which places the
# rest of an item an earlier step or a cached prefix began.
T, H, W, LEAD, SLOT = range(5)
POSITION_CHANNELS = 5
# Each channel rides in the embeddings' dtype as base-256 digits: bfloat16 holds integers exactly only
# up to 256, and vLLM 0.32's own channels (one column per value) come back rounded past it (a
# 32-frame video's later frames: offsets 257 -> 256, 301 -> 300).
DIGITS = 3
POSITION_COLUMNS = POSITION_CHANNELS * DIGITS
_LIMIT = 256 ** DIGITS


def encode_channels(channels: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``channels`` LongTensor [5, L] (values in ``[0, 256**3)``) as ``[L, 15]`` columns of ``dtype``,
    each value as 3 base-256 digits (exact in bfloat16, float16 and float32)."""
    if channels.shape[0] != POSITION_CHANNELS:
        raise ValueError(f"expected {POSITION_CHANNELS} position channels, got {channels.shape[0]}")
    if channels.numel() and (int(channels.min()) < 0 or int(channels.max()) >= _LIMIT):
        raise ValueError(f"position channels must lie in [0, {_LIMIT}), got [{int(channels.min())}, "
                         f"{int(channels.max())}]")
    values = channels.long().T  # [L, 6]
    digits = [(values // 256 ** (DIGITS - 1 - k)) % 256 for k in range(DIGITS)]
    return torch.stack(digits, dim=-1).reshape(values.shape[0], POSITION_COLUMNS).to(dtype)


def decode_channels(columns: torch.Tensor) -> torch.Tensor:
    """The LongTensor [5, L] that :func:`encode_channels` made ``columns`` [L, 15] from."""
    if columns.shape[-1] != POSITION_COLUMNS:
        raise ValueError(f"expected {POSITION_COLUMNS} position columns, got {columns.shape[-1]}")
    digits = columns.round().long().reshape(columns.shape[0], POSITION_CHANNELS, DIGITS)
    weights = torch.tensor([256 ** (DIGITS - 1 - k) for k in range(DIGITS)], device=columns.device)
    return (digits * weights).sum(dim=-1).T


def relump(token_ids: Sequence[int], video_token_id: int, counts: Sequence[int]) -> list[int]:
    """``token_ids`` with its i-th run of ``video_token_id`` resized to ``counts[i]`` tokens.

    vLLM writes one run per pruned video (all kept tokens in frame 0's block); ValueError when the
    number of runs is not ``len(counts)``.
    """
    out: list[int] = []
    runs = 0
    index = 0
    ids = list(token_ids)
    while index < len(ids):
        if ids[index] != video_token_id:
            out.append(ids[index])
            index += 1
            continue
        end = index
        while end < len(ids) and ids[end] == video_token_id:
            end += 1
        if runs >= len(counts):
            raise ValueError(f"the prompt has more video-token runs than its {len(counts)} pruned video(s)")
        out.extend([video_token_id] * int(counts[runs]))
        runs += 1
        index = end
    if runs != len(counts):
        raise ValueError(f"the prompt has {runs} video-token runs for {len(counts)} pruned video(s)")
    return out


@dataclass(frozen=True)
class MediaSpan:
    """A media item's slots in the prompt, ``[offset, offset + length)``, and ``extent``: how many
    positions it spans unpruned (the text after it goes on from its first position + ``extent``)."""

    offset: int
    length: int
    extent: int


def media_extent(length: int, media_tokens: int, blocks: int, grid_hw: tuple[int, int]) -> int:
    """The unpruned extent of a Qwen3-VL media item of ``length`` slots, ``media_tokens`` of them
    image or video tokens: each text slot (a video's timestamps, per-frame vision start and end)
    takes one position and each of its ``blocks`` grids (a video's temporal steps, an image's one)
    ``max(h, w)`` (its tokens sit at ``(0, row, column)`` from the block's first position)."""
    rows, columns = grid_hw
    return (length - media_tokens) + blocks * max(rows, columns)


def initial_positions(num_tokens: int, spans: Sequence[MediaSpan]) -> tuple[torch.Tensor, int]:
    """MRoPE positions ``[3, num_tokens]`` of a prompt whose media items are not encoded yet.

    Text counts on by one; each item's first position is the maximum before it + 1, and the text
    after it goes on from there + ``extent``. An item's own slots hold its first position until
    :func:`recompute_positions` writes them (the step that computes them always does). Returns
    ``(positions, delta)``, ``delta = max + 1 - num_tokens`` (decoding goes on from the maximum + 1).
    """
    positions = torch.empty(3, num_tokens, dtype=torch.long)
    cursor = 0  # prompt slot
    value = 0   # the next position
    top = -1
    for span in sorted(spans, key=lambda s: s.offset):
        if span.offset < cursor or span.offset + span.length > num_tokens:
            raise ValueError(f"media item at [{span.offset}, {span.offset + span.length}) overlaps another or "
                             f"runs past the prompt's {num_tokens} tokens")
        text = span.offset - cursor
        positions[:, cursor: span.offset] = torch.arange(value, value + text)
        value += text
        positions[:, span.offset: span.offset + span.length] = value
        top = max(top, value + span.extent - 1)
        value += span.extent
        cursor = span.offset + span.length
    positions[:, cursor:] = torch.arange(value, value + num_tokens - cursor)
    if num_tokens > cursor:
        top = max(top, value + num_tokens - cursor - 1)
    return positions, top + 1 - num_tokens


def recompute_positions(input_ids: torch.Tensor, item_positions: Sequence[torch.Tensor], positions: torch.Tensor,
                        num_computed_tokens: int, image_token_id: int, video_token_id: int) -> tuple[torch.Tensor, int]:
    """MRoPE positions ``[3, N]`` of a prompt once a prefill step's media slots are known.

    Args:
        input_ids: LongTensor [N], the whole prompt (videos lumped: frame 0's block holds all
            kept video tokens, the later frames' blocks none).
        item_positions: the step's media slots, one LongTensor [5, L] per item it reaches, in
            prompt order: rows t, h, w (offsets from the item's first position, unpruned
            coordinates), lead and slot (:data:`LEAD`, :data:`SLOT`). A video's slots run from
            its first timestamp token to its last ``<|vision_end|>``, an image's are its image
            tokens; a step gets the part of each item inside its window, so only its first part
            can start inside an item (a prefill chunk or a cached prefix ended there).
        positions: LongTensor [3, N], the current positions (:func:`initial_positions`, then
            earlier steps'): every text position right.
        num_computed_tokens: prompt tokens already prefilled or cached; the step starts there.
    Returns:
        ``(positions [3, N], delta)``: each slot at its item's first position (the maximum before
        the item + 1) + its offsets, the rest as they were; ``delta = max + 1 - N``.
    """
    positions = positions.clone()
    length = int(input_ids.numel())
    media = (input_ids == image_token_id) | (input_ids == video_token_id)
    cursor = int(num_computed_tokens)
    for index, item in enumerate(item_positions):
        if item.shape[0] != POSITION_CHANNELS:
            raise ValueError(f"a media item's position channels are {item.shape[0]} rows, expected {POSITION_CHANNELS}")
        slot = int(item[SLOT, 0])
        if slot > 0:  # the rest of an item an earlier step (or the cached prefix) began
            if index > 0:
                raise RuntimeError(f"media part {index} of a prefill step starts at slot {slot} of its item; only the "
                                   "step's first part can continue an item")
            first = cursor
            start = first - slot
        else:  # the item's first image or video token is the prompt's next one (a video keeps at least one)
            found = torch.nonzero(media[cursor:]).flatten()
            if found.numel() == 0:
                raise RuntimeError(f"a media item's embeddings arrived but the prompt has no media token after "
                                   f"position {cursor}")
            start = cursor + int(found[0]) - int(item[LEAD, 0])
            first = start
            if start < num_computed_tokens:
                raise RuntimeError(f"a media item that begins at slot 0 was placed at prompt position {start}, before "
                                   f"the step's first token {num_computed_tokens}")
        end = first + int(item.shape[1])
        if start < 0 or end > length:
            raise RuntimeError(f"media slots [{first}, {end}) of an item at {start} fall outside the {length}-token prompt")
        base = int(positions[:, :start].max()) + 1 if start > 0 else 0
        positions[:, first:end] = item[:3].to(positions.device, positions.dtype) + base
        cursor = end
    delta = int(positions.max()) + 1 - length if length else 0
    return positions, delta
