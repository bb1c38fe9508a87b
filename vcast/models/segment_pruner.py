"""From a prompt's video segments to the tokens that survive: the method run on each segment.

Pure of hooks: given the segments an adapter found, where their tokens are (a
:class:`~vcast.models.adapter.TokenSource`), each segment's model inputs and the real-token mask,
:func:`prune_segments` selects per segment, writes a merging method's tokens into the source, and
says which tokens of the ``[B, L]`` prompt survive. The handle then re-lays the inputs by that mask.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import torch

from vcast.api import select
from vcast.models.adapter import Segment, TokenSource
from vcast.models.call_record import PendingSegment
from vcast.models.layer_drops import VideoTags


@dataclass
class PrunedPrompt:
    """What :func:`prune_segments` decided.

    Attributes:
        survives: BoolTensor ``[B, L]``: real tokens that stay.
        segments: each segment's selection (for the call's stats).
        tokens_before, tokens_after: ``[B]`` real tokens before and after.
        tags: each kept video token's (video, frame, patch) for the in-LLM stages, or None.
    """

    survives: torch.Tensor
    segments: list[PendingSegment] = field(default_factory=list)
    tokens_before: Optional[torch.Tensor] = None
    tokens_after: Optional[torch.Tensor] = None
    tags: Optional[VideoTags] = None

    @property
    def drops_nothing(self) -> bool:
        return bool(torch.equal(self.tokens_before, self.tokens_after))


def prune_segments(segments: Sequence[Segment], source: TokenSource, model_inputs: Sequence[dict[str, Any]],
                   real: torch.Tensor, method: Optional[str], ratio: float, params: dict[str, Any],
                   with_tags: bool) -> PrunedPrompt:
    """Select in every segment (``method`` None: keep all) on its ``[T, P, D]`` tokens.

    Args:
        segments: the adapter's segments of the prompt.
        source: the LLM-space tokens; a merging method's tokens are written into it.
        model_inputs: per segment, the method's extra inputs (vision attention, keys, ...).
        real: BoolTensor ``[B, L]``: the prompt's real (unpadded) tokens.
        with_tags: record each kept video token's place for the in-LLM stages.
    """
    device = source.device
    survives = real.clone()
    result = PrunedPrompt(survives=survives, tags=VideoTags.empty(tuple(real.shape), device) if with_tags else None)
    videos_in_row: dict[int, int] = {}
    for segment, extra in zip(segments, model_inputs):
        frames = source.tokens(segment.kind, segment.sample, segment.columns)
        frames = frames.view(segment.frames, segment.tokens_per_frame, -1)
        extra = {name: value.to(frames.device) if isinstance(value, torch.Tensor) else value
                 for name, value in extra.items()}
        selection = (select(frames, ratio, method=method, **params, **extra) if method is not None
                     else select(frames, 1.0, method="vanilla"))
        keep = selection.keep.to(device)
        if result.tags is not None and segment.kind == "video":
            video = videos_in_row.get(segment.sample, 0)
            kept_columns = segment.columns[keep]
            result.tags.frame[segment.sample, kept_columns] = keep // segment.tokens_per_frame
            result.tags.patch[segment.sample, kept_columns] = keep % segment.tokens_per_frame
            result.tags.video[segment.sample, kept_columns] = video
            result.tags.sizes.setdefault(segment.sample, {})[video] = segment.frames * segment.tokens_per_frame
            videos_in_row[segment.sample] = video + 1
        if selection.merges:
            source.write(segment.kind, segment.sample, segment.columns[keep], selection.tokens)
        dropped = torch.ones(segment.columns.numel(), dtype=torch.bool, device=device)
        dropped[keep] = False
        survives[segment.sample, segment.columns[dropped]] = False
        result.segments.append(PendingSegment(
            sample=segment.sample, kind=segment.kind, frames=segment.frames,
            tokens_per_frame=segment.tokens_per_frame, keep=selection.keep, budgets=selection.budgets,
            columns=segment.columns, merged=selection.merges,
        ))
    result.tokens_before = real.sum(1)
    result.tokens_after = survives.sum(1)
    return result
