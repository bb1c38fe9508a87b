"""The Qwen vision-language families' shared adapter: prune post-merger video tokens, keep their
original MRoPE (t, h, w).

Written for Qwen3-VL (dense and MoE), whose layout it describes; families that derive from it
(``vcast/families/<name>/adapter.py``) override what differs (a video laid out as one run of
tokens: :meth:`MRopeAdapter.video_grids`). Qwen3-VL's processor writes each temporal patch of a
video as ``<t seconds><vision_start>`` + ``P = H * W / 4`` video tokens + ``<vision_end>``. A
video is ``T = grid_t`` such blocks, and its ``T * P`` tokens are, in prompt order, the merger's
output. Selection runs on those tokens per video; timestamps and vision_start/end are text and
always stay.

Positions come from the model's own ``get_rope_index`` on the full prompt (``generate``
computes them before prefill); the hook only gathers them, so kept tokens keep their
coordinates and the gaps stay. Row 0 of the 4-row ids (text positions: causal mask and
FlashAttention's packing check) is renumbered over the pruned prompt. Decoding goes on from
the unpruned maximum + 1, which ``generate`` already carries.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from itertools import groupby
from typing import Any, Optional

import torch
from torch import nn

from vcast.models.adapter import ActivePruning, Adapter, PromptContext, Segment, TokenSource, token_runs
from vcast.models.layout import SequenceLayout, compact_positions
from vcast.models.vision_probe import VisionRecord, column_mean_attention

_VIDEO, _IMAGE = 2, 1  # mm_token_type_ids codes


@dataclass(frozen=True)
class MRopeContext(PromptContext):
    """:class:`PromptContext` plus ``video_grids``: ``(T, P)`` of each video in prompt order, where
    :meth:`MRopeAdapter.video_grids` gives them (a video's tokens are one run), else None (each
    temporal patch is its own run, as in Qwen3-VL)."""

    video_grids: Optional[list[tuple[int, int]]] = None


class MRopeAdapter(Adapter):
    """Qwen3-VL's token layout, MRoPE handling, DeepStack re-laying and ViT feature scores."""
    position_policies = ("original",)
    default_positions = "original"

    def vision_modules(self) -> tuple[nn.Module, nn.Module]:
        return self.model.model.visual, self.model.model.visual

    # Vision-encoder inputs: the last ViT block (as FlashVID and FastVID read Qwen's encoder) ----
    @property
    def _merge(self) -> int:
        return self.model.config.vision_config.spatial_merge_size

    def feature_attention(self) -> nn.Module:
        return self.model.model.visual.blocks[-1].attn

    def vision_call_layout(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> VisionRecord:
        grid_thw = kwargs.get("grid_thw", args[1] if len(args) > 1 else None)
        if grid_thw is None:
            raise ValueError(f"{self.family}: the vision encoder was called without grid_thw")
        merge = self._merge
        rows = [(t, h // merge, w // merge) for t, h, w in grid_thw.tolist()]
        return VisionRecord(units=[(t, h * w) for t, h, w in rows], grid=[(h, w) for _, h, w in rows])

    def feature_scores(self, module: nn.Module, args: tuple[Any, ...],
                       kwargs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """Each temporal patch attends only to itself (``cu_seqlens``); its ``h * w`` patches come
        grouped by 2x2 merge unit, so a unit's value is the mean of 4 consecutive patches
        (``view(-1, 4)``, not a raster reshape). Keys are taken before the rotary embedding."""
        column_means, keys = vit_column_means(module, args, kwargs)
        length = keys.shape[0]
        unit = self._merge**2
        attention = column_means.view(-1, unit).mean(-1)
        head_mean_keys = keys.float().mean(1).view(length // unit, unit, -1).mean(1)
        return attention, head_mean_keys

    def capture(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> PromptContext:
        input_ids = kwargs.get("input_ids", args[0] if args else None)
        return MRopeContext(input_ids=input_ids, mm_token_type_ids=kwargs.get("mm_token_type_ids"),
                            video_token_counts=self._video_token_counts(kwargs),
                            video_grids=self.video_grids(kwargs, input_ids))

    def video_grids(self, kwargs: dict[str, Any], input_ids: Optional[torch.Tensor]) -> Optional[list[tuple[int, int]]]:
        """``(T, P)`` of each video of the embedder call ``kwargs``, for layouts where a video's
        ``T * P`` tokens are one run of placeholders; None where each temporal patch is a run of
        its own and the runs give the frames (Qwen3-VL, this default)."""
        return None

    def _video_token_counts(self, kwargs: dict[str, Any]) -> Optional[list[int]]:
        """Tokens per video: from the encoder outputs (``generate`` in transformers >= 5.18 encodes
        the video before prefill and passes only those), else from ``video_grid_thw``."""
        encoded = (kwargs.get("mm_encoder_outputs") or {}).get("video")
        pooled = getattr(encoded, "pooler_output", None)
        if isinstance(pooled, (tuple, list)):
            return [int(tokens.shape[0]) for tokens in pooled]
        grid = kwargs.get("video_grid_thw")
        if grid is not None:
            merge = self.model.config.vision_config.spatial_merge_size
            return [t * h * w // merge**2 for t, h, w in grid.tolist()]
        return None

    def rope_index_extras(self, inputs: Any) -> dict[str, Any]:
        """Keyword arguments of the model's ``get_rope_index`` beyond the grids (none for Qwen3-VL)."""
        return {}

    def full_positions(self, inputs: Any) -> Optional[torch.Tensor]:
        """``[4, B, L]``: text row 0..L-1 on top of the model's own ``get_rope_index`` (t, h, w) rows."""
        spatial, _ = self.model.model.get_rope_index(
            inputs["input_ids"], mm_token_type_ids=inputs["mm_token_type_ids"],
            image_grid_thw=inputs.get("image_grid_thw"), video_grid_thw=inputs.get("video_grid_thw"),
            attention_mask=inputs.get("attention_mask"), **self.rope_index_extras(inputs),
        )
        text = torch.arange(spatial.shape[-1], device=spatial.device).view(1, 1, -1).expand(1, spatial.shape[1], -1)
        return torch.cat([text, spatial], 0)

    def can_prune_encoded(self, kwargs: dict[str, Any]) -> bool:
        # Without position ids the model would derive MRoPE from the pruned prompt: prune later.
        return super().can_prune_encoded(kwargs) and kwargs.get("position_ids") is not None

    def placeholder_mask(self, context: PromptContext, kind: str) -> Optional[torch.Tensor]:
        if context.input_ids is not None:
            return context.input_ids == self.token_id(kind)
        if context.mm_token_type_ids is not None:
            return context.mm_token_type_ids == (_VIDEO if kind == "video" else _IMAGE)
        return None

    def segments(self, context: PromptContext, source: TokenSource) -> list[Segment]:
        """Each run of video tokens is one temporal patch; consecutive runs make up a video (where
        :meth:`video_grids` gives a video's ``(T, P)``, its one run is cut into ``T`` frames of ``P``).

        Images (when compressed) are one run each, a one-frame segment.
        """
        found = self._video_segments(context, source.device)
        if self.compress_images:
            mask = self.placeholder_mask(context, "image")
            for row, start, length in token_runs(mask) if mask is not None else []:
                columns = torch.arange(start, start + length, device=source.device)
                found.append(Segment(sample=row, kind="image", columns=columns, frames=1, tokens_per_frame=length))
        return found

    def _video_segments(self, context: PromptContext, device: torch.device) -> list[Segment]:
        mask = self.placeholder_mask(context, "video")
        if mask is None:
            if context.video_token_counts:
                raise ValueError(f"{self.family}: videos were given but neither input_ids nor mm_token_type_ids, "
                                 "so their tokens cannot be located")
            return []
        runs = token_runs(mask)
        if not runs:
            return []
        counts = context.video_token_counts
        if counts is None:
            raise ValueError(f"{self.family}: the prompt has video tokens but neither the video encoder's outputs "
                             "nor video_grid_thw reached the model; pass the processor's video_grid_thw")
        if sum(counts) != sum(length for _, _, length in runs):
            raise ValueError(f"{self.family}: the videos have {counts} tokens but the prompt has "
                             f"{sum(length for _, _, length in runs)} video placeholders")
        grids = context.video_grids if isinstance(context, MRopeContext) else None
        found, next_run = [], 0
        for index, count in enumerate(counts):
            group, total = [], 0
            while total < count:
                group.append(runs[next_run])
                total += group[-1][2]
                next_run += 1
            rows, lengths = {run[0] for run in group}, {run[2] for run in group}
            frames, per_frame = grids[index] if grids is not None else (len(group), group[0][2])
            if total != count or len(rows) != 1 or frames * per_frame != count or (grids is None and len(lengths) != 1):
                raise ValueError(f"{self.family}: a video of {count} tokens does not match its placeholders "
                                 f"(runs {[(r, s, n) for r, s, n in group]}); unsupported prompt layout")
            columns = torch.cat([torch.arange(start, start + n, device=device) for _, start, n in group])
            found.append(Segment(sample=group[0][0], kind="video", columns=columns, frames=frames,
                                 tokens_per_frame=per_frame))
        return found

    def prefill_positions(self, position_ids: Optional[torch.Tensor], layout: SequenceLayout,
                          length: int) -> Optional[torch.Tensor]:
        batch = layout.index.shape[0]
        if position_ids is None:  # what the text model would use: 0..L-1 on every row
            position_ids = torch.arange(length, device=layout.index.device).expand(batch, length)
        if position_ids.dim() == 2:
            position_ids = position_ids[None].expand(4, batch, length)
        has_text_row = position_ids.shape[0] == 4
        spatial = position_ids[1:] if has_text_row else position_ids
        spatial = layout.gather(spatial, dim=2).masked_fill(~layout.valid.to(spatial.device), 0)
        if not has_text_row:
            return spatial
        text = compact_positions(layout.valid).to(spatial.device, spatial.dtype)
        return torch.cat([text[None], spatial], 0)

    def decode_positions(self, position_ids: Optional[torch.Tensor], active: ActivePruning) -> Optional[torch.Tensor]:
        if position_ids is None or position_ids.dim() != 3 or position_ids.shape[0] != 4:
            return position_ids
        # Rows 1-3 continue from the unpruned maximum; the text row counts pruned slots.
        text = position_ids[0] - active.layout.dropped.to(position_ids.device)[:, None]
        return torch.cat([text[None], position_ids[1:]], 0)

    def prefill_extras(self, kwargs: dict[str, Any], layout: SequenceLayout, survives: torch.Tensor) -> None:
        visual = kwargs.get("visual_pos_masks")
        if visual is None:
            return
        deepstack = kwargs.get("deepstack_visual_embeds")
        if deepstack is not None:
            # DeepStack rows follow the visual tokens in prompt order: keep the same ones.
            kept_rows = survives.to(visual.device)[visual].nonzero().squeeze(1)
            kwargs["deepstack_visual_embeds"] = [features.index_select(0, kept_rows.to(features.device))
                                                 for features in deepstack]
        kwargs["visual_pos_masks"] = layout.gather(visual, dim=1) & layout.valid.to(visual.device)

    def check_decode(self, kwargs: dict[str, Any]) -> None:
        if kwargs.get("position_ids") is None:
            raise ValueError(
                f"{self.family}: a decoding step after a pruned prefill was called without position_ids; "
                "the model would derive them from the pruned cache length and misplace every new token. "
                "Pass the unpruned 4-row position ids (generate() does this)"
            )


def vit_column_means(module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any],
                     times_length: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """A Qwen ViT attention layer's column means ``[N]`` (over heads and the queries of each
    attention sequence of ``cu_seqlens``; ``times_length``: each times its sequence's length) and
    its keys ``[N, H, d]`` before the rotary embedding, from the layer's own inputs (the model's own
    ``apply_rotary_pos_emb_vision`` rotates q and k)."""
    hidden = kwargs.get("hidden_states", args[0] if args else None)
    cu_seqlens = kwargs["cu_seqlens"]
    cos, sin = kwargs["position_embeddings"]
    length = hidden.shape[0]
    queries, keys, _ = module.qkv(hidden).reshape(length, 3, module.num_heads, -1).unbind(1)  # [N, H, d]
    rotary = sys.modules[type(module).__module__].apply_rotary_pos_emb_vision  # the model's own
    rotated_q, rotated_k = rotary(queries, keys, cos, sin)
    lengths = (cu_seqlens[1:] - cu_seqlens[:-1]).tolist()
    column_means, start = [], 0
    for size, run in groupby(lengths):  # equal-length sequences side by side: batch them
        count = len(list(run))
        stop = start + size * count
        q = rotated_q[start:stop].view(count, size, module.num_heads, -1).transpose(1, 2)
        k = rotated_k[start:stop].view(count, size, module.num_heads, -1).transpose(1, 2)
        means = column_mean_attention(q, k, module.scaling)
        column_means.append((means * size if times_length else means).reshape(-1))
        start = stop
    return torch.cat(column_means), keys
