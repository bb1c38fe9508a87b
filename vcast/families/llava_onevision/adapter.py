"""LLaVA-OneVision / LLaVA-Video (HF format): prune the projected, pooled frame tokens.

Each video becomes ``F * P`` tokens (``P = ceil(n / 2) ** 2`` after the 2x bilinear pooling of
the ``n x n`` SigLIP grid; 196 for the real 384/14 towers) followed by one image-newline token,
all written over the ``<video>`` placeholders. Selection runs per frame on the ``F * P``
tokens; the newline always stays.

RoPE is 1-D. ``positions="compact"`` (default, as the LLaVA integrations of the baselines do)
renumbers the pruned prompt 0, 1, 2, ... and decoding continues right after it;
``positions="original"`` keeps each kept token's original index (gaps stay) and decoding
continues after the unpruned prompt.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import torch
from torch import nn

from vcast.models.adapter import ActivePruning, Adapter, PromptContext, Segment, TokenSource, token_runs
from vcast.models.layout import SequenceLayout, compact_positions
from vcast.models.vision_probe import VisionRecord, column_mean_attention


class LlavaOnevisionAdapter(Adapter):
    position_policies = ("compact", "original")
    default_positions = "compact"
    trailing_tokens = 1  # the image-newline after each video's frames

    def vision_modules(self) -> tuple[nn.Module, nn.Module]:
        return self.model.model.vision_tower, self.model.model.multi_modal_projector

    @property
    def tokens_per_frame(self) -> int:
        return self._pooled_side**2

    @property
    def _pooled_side(self) -> int:
        vision = self.model.config.vision_config
        return math.ceil(vision.image_size // vision.patch_size / 2)

    # Vision-encoder inputs: the SigLIP layer whose output is the feature (HoliTom/FlashVID's
    # "last kept layer"), pooled with the model's own 2-D pooling like the features -----------------
    def feature_attention(self) -> nn.Module:
        layer = self.model.config.vision_feature_layer
        if not isinstance(layer, int):
            raise ValueError(f"{self.family}: vision attention needs one vision_feature_layer, got {layer!r}")
        tower = self.model.model.vision_tower
        layers = getattr(tower, "vision_model", tower).encoder.layers  # older SigLIP wraps a vision_model
        index = layer if layer >= 0 else len(layers) + 1 + layer  # hidden_states[k] is layer k-1's output
        if not 1 <= index <= len(layers):
            raise ValueError(f"{self.family}: vision_feature_layer {layer} is not the output of an attention layer")
        return layers[index - 1].self_attn

    def vision_call_layout(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> VisionRecord:
        pixels = kwargs.get("pixel_values", args[0] if args else None)
        side = self._pooled_side
        return VisionRecord(units=[(int(pixels.shape[0]), side * side)], grid=[(side, side)])

    def feature_scores(self, module: nn.Module, args: tuple[Any, ...],
                       kwargs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = kwargs.get("hidden_states", args[0] if args else None)  # [F, n, C]
        frames, length, _ = hidden.shape
        queries = module.q_proj(hidden).view(frames, length, module.num_heads, -1).transpose(1, 2)
        keys = module.k_proj(hidden).view(frames, length, module.num_heads, -1).transpose(1, 2)
        attention = column_mean_attention(queries, keys, module.scale)  # [F, n]
        head_mean_keys = keys.float().mean(1)  # [F, n, d]
        if self.model.config.vision_feature_select_strategy == "default":  # the model drops token 0
            attention, head_mean_keys = attention[:, 1:], head_mean_keys[:, 1:]
        pool = self.model.model.apply_pooling
        attention = pool(attention[..., None]).reshape(-1)
        head_mean_keys = pool(head_mean_keys)
        return attention, head_mean_keys.reshape(-1, head_mean_keys.shape[-1])

    def token_id(self, kind: str) -> int:
        config = self.model.config
        token = getattr(config, f"{kind}_token_index", None)  # older configs: *_token_id
        return token if token is not None else getattr(config, f"{kind}_token_id")

    def full_positions(self, inputs: Any) -> Optional[torch.Tensor]:
        if self.positions == "compact":
            return None
        input_ids = inputs["input_ids"]
        return torch.arange(input_ids.shape[1], device=input_ids.device).expand(input_ids.shape[0], -1)

    def capture(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> PromptContext:
        input_ids = kwargs.get("input_ids", args[0] if args else None)
        pixels = kwargs.get("pixel_values_videos")
        return PromptContext(input_ids=input_ids, video_frames=int(pixels.shape[1]) if pixels is not None else None)

    def placeholder_mask(self, context: PromptContext, kind: str) -> Optional[torch.Tensor]:
        return None if context.input_ids is None else context.input_ids == self.token_id(kind)

    def wrap_pooled(self, kind: str, tokens: torch.Tensor) -> Any:
        # Video features are one [videos, tokens, D] tensor that the forward flattens.
        return tokens[None] if kind == "video" else (tokens,)

    def segments(self, context: PromptContext, source: TokenSource) -> list[Segment]:
        if context.input_ids is None:
            if context.video_frames is not None:
                raise ValueError(f"{self.family}: videos were given with inputs_embeds instead of input_ids, "
                                 "so their tokens cannot be located; pass input_ids")
            return []
        found = self._video_segments(context, source.device)
        if self.compress_images:
            found += self._image_segments(context, source)
        return found

    def _video_segments(self, context: PromptContext, device: torch.device) -> list[Segment]:
        per_frame = self.tokens_per_frame
        found = []
        for row, start, length in token_runs(self.placeholder_mask(context, "video")):
            frames, rest = divmod(length - 1, per_frame)
            if rest or frames < 1 or (context.video_frames is not None and frames != context.video_frames):
                expected = f"{context.video_frames} frames x " if context.video_frames is not None else "F x "
                raise ValueError(
                    f"{self.family}: a run of {length} video tokens in row {row} is not "
                    f"{expected}{per_frame} pooled tokens + 1 newline; unsupported video token layout"
                )
            columns = torch.arange(start, start + frames * per_frame, device=device)
            found.append(Segment(sample=row, kind="video", columns=columns, frames=frames, tokens_per_frame=per_frame))
        return found

    def _image_segments(self, context: PromptContext, source: TokenSource) -> list[Segment]:
        found = []
        for row, start, length in token_runs(context.input_ids == self.token_id("image")):
            tokens = source.tokens("image", row, torch.arange(start, start + length, device=source.device))
            newline = self.model.model.image_newline.to(tokens.device, tokens.dtype)
            # anyres images interleave newline tokens with the grid rows; those always stay.
            columns = start + (tokens != newline).any(-1).nonzero().squeeze(1).to(source.device)
            if columns.numel():
                found.append(Segment(sample=row, kind="image", columns=columns, frames=1,
                                     tokens_per_frame=int(columns.numel())))
        return found

    def prefill_positions(self, position_ids: Optional[torch.Tensor], layout: SequenceLayout,
                          length: int) -> Optional[torch.Tensor]:
        if self.positions == "compact":
            if position_ids is None:  # the text model then numbers the pruned prompt itself
                return None
            return compact_positions(layout.valid).to(position_ids.device, position_ids.dtype)
        if position_ids is None:
            batch = layout.index.shape[0]
            position_ids = torch.arange(length, device=layout.index.device).expand(batch, length)
        return layout.gather(position_ids, dim=1).masked_fill(~layout.valid.to(position_ids.device), 0)

    def decode_positions(self, position_ids: Optional[torch.Tensor], active: ActivePruning) -> Optional[torch.Tensor]:
        if position_ids is None or self.positions == "original":
            return position_ids
        return position_ids - active.layout.dropped.to(position_ids.device)[:, None]
