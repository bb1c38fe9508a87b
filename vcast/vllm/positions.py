"""The two pure pieces of the vLLM plugin's bookkeeping (no vLLM import, unit-tested in any env).

* :func:`relump`: a prompt's lumped video-token run resized to the plugin's kept count.
* :func:`recompute_positions`: MRoPE positions of a pruned prompt, each media item anchored at its
  own first slot (vLLM 0.32 anchors a video at the chat template's outer ``<|vision_start|>`` when
  transformers >= 5.10 keeps it, shifting every later position: bug (b) of docs/vllm.md).
"""

from __future__ import annotations

from typing import Sequence

import torch


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


def recompute_positions(input_ids: torch.Tensor, item_positions: Sequence[torch.Tensor], positions: torch.Tensor,
                        num_computed_tokens: int, image_token_id: int, video_token_id: int) -> tuple[torch.Tensor, int]:
    """MRoPE positions ``[3, N]`` of a prompt whose media items' real positions are now known.

    Args:
        input_ids: LongTensor [N], the whole prompt (videos lumped: frame 0's block holds all
            kept video tokens, the later frames' blocks none).
        item_positions: per media item in this step, LongTensor [5, L]: rows t, h, w (offsets
            from the item's first slot, unpruned coordinates), is_vision_start, is_video; a video's
            L slots run from its first timestamp token to its last ``<|vision_end|>``, an image's
            are its image tokens.
        positions: LongTensor [3, N], the current positions (text before the first item correct).
        num_computed_tokens: prompt tokens already prefilled; an item starting before it was split
            by a prefill chunk (or a cached prefix), which this cannot place: RuntimeError.
    Returns:
        ``(positions [3, N], delta)``: each item at ``max(positions before it) + 1 + offsets``,
        text after it counting on from the item's maximum + 1; ``delta = max + 1 - N`` (decoding
        goes on from the maximum + 1).
    """
    positions = positions.clone()
    length = int(input_ids.numel())
    media = (input_ids == image_token_id) | (input_ids == video_token_id)
    cursor = int(num_computed_tokens)
    for item in item_positions:
        found = torch.nonzero(media[cursor:]).flatten()
        if found.numel() == 0:
            raise RuntimeError(f"a media item's embeddings arrived but the prompt has no media token after "
                               f"position {cursor}")
        first_media = cursor + int(found[0])
        if bool(item[4].any()):  # a video: the slots before frame 0's vision start are its timestamp
            starts = torch.nonzero(item[3] == 1).flatten()
            if starts.numel() == 0:
                raise RuntimeError("a video's embeddings carry no vision-start flag")
            start = first_media - int(starts[0]) - 1
        else:
            start = first_media
        if start < num_computed_tokens:
            raise RuntimeError(
                f"a pruned video starting at prompt position {start} was split at {num_computed_tokens} by a prefill "
                "chunk or a cached prefix; its positions cannot be placed (vLLM 0.32 gets them wrong too). Run with "
                "enable_chunked_prefill=False and enable_prefix_caching=False (vcast.vllm.engine_kwargs does)")
        end = start + int(item.shape[1])
        base = int(positions[:, :start].max()) + 1 if start > 0 else 0
        positions[:, start:end] = item[:3].to(positions.device, positions.dtype) + base
        top = int(positions[:, start:end].max()) + 1
        positions[:, end:] = torch.arange(length - end, device=positions.device, dtype=positions.dtype) + top
        cursor = end
    delta = int(positions.max()) + 1 - length if length else 0
    return positions, delta
