"""Qwen2.5-VL's adapter: the shared Qwen handling of :mod:`vcast.models.mrope_adapter` (prune the
merger's video tokens, keep their MRoPE (t, h, w)) with what differs from Qwen3-VL:

- Layout: the processor writes a video as ONE run ``<vision_start>`` + ``T * P`` video tokens +
  ``<vision_end>`` (``T = grid_t`` temporal patches of ``P = h * w / 4`` tokens, frame-major, no
  timestamps), so the frames come from the grid, not from the runs (:meth:`video_grids`). A plain
  forward passes ``video_grid_thw``; ``generate`` (transformers >= 5.18) encodes the video before
  the prefill and then drops ``video_grid_thw`` (it is an argument of ``get_video_features``), so
  there ``T`` and ``P`` are read off the 4-row position ids ``generate`` passes: the video's
  tokens span ``h`` height and ``w`` width positions, ``P = h * w``, ``T = tokens / P``.
- Temporal positions are absolute time: ``get_rope_index`` spaces the temporal patches by
  ``tokens_per_second * second_per_grid_ts`` (the processor's ``second_per_grid_ts`` =
  ``temporal_patch_size / fps`` of the sampled frames): :meth:`rope_index_extras`. Qwen2-VL's are
  the temporal patch's index, and its ``get_rope_index`` takes nothing more.
- No DeepStack (nothing to re-lay beyond the embeddings).
- The ViT attends within windows (``window_size`` pixels, a square of merge units) except in the
  ``fullatt_block_indexes`` blocks, over tokens it keeps reordered window by window
  (``window_index``): :meth:`feature_scores`. Qwen2-VL's ViT has no windows: every block attends
  over each temporal patch in the LLM's order (the reorder is the identity, :meth:`_window_index`).

Which of the two archs a model is comes from its ``model_type`` (:data:`vcast.families.qwen2_5_vl.ARCHS`).
"""

from __future__ import annotations

import sys
from typing import Any, Optional

import torch
from torch import nn

from vcast.families.qwen2_5_vl import arch_traits
from vcast.models.adapter import token_runs
from vcast.models.mrope_adapter import MRopeAdapter, vit_column_means
from vcast.models.vision_probe import VisionRecord, mean_query_attention


class Qwen25VLAdapter(MRopeAdapter):

    def __init__(self, model: nn.Module, positions: Optional[str], compress_images: bool) -> None:
        super().__init__(model, positions, compress_images)
        self._traits = arch_traits(model.config.model_type)
        self._vision_grid: Optional[torch.Tensor] = None  # grid_thw of the encoder call in progress

    # Layout -----------------------------------------------------------------------------------
    def video_grids(self, kwargs: dict[str, Any], input_ids: Optional[torch.Tensor]) -> Optional[list[tuple[int, int]]]:
        """``(T, P)`` per video: from ``video_grid_thw`` when it reaches the model, else (``generate``
        with the encoder outputs precomputed) from the extent of each video's height and width
        positions. None when the prompt has no video."""
        merge = self._merge
        grid = kwargs.get("video_grid_thw")
        if grid is not None:
            return [(int(t), int(h) * int(w) // merge**2) for t, h, w in grid.tolist()]
        counts = self._video_token_counts(kwargs)
        if not counts:
            return None
        positions = kwargs.get("position_ids")
        if input_ids is None or positions is None or positions.dim() != 3 or positions.shape[0] not in (3, 4):
            raise ValueError(
                f"{self.family}: the video encoder's outputs came without video_grid_thw or the MRoPE position ids, "
                "so a video's temporal patches cannot be told apart (its tokens are one run); pass video_grid_thw "
                "or the 4-row position_ids (generate() does)")
        runs = token_runs(input_ids == self.token_id("video"))
        if len(runs) != len(counts):
            raise ValueError(f"{self.family}: {len(counts)} videos but {len(runs)} runs of video tokens; "
                             "unsupported prompt layout")
        height, width = positions[-2], positions[-1]
        grids = []
        for (row, start, length), count in zip(runs, counts):
            h, w = height[row, start : start + length], width[row, start : start + length]
            per_frame = int(h.max() - h.min() + 1) * int(w.max() - w.min() + 1)
            grids.append((count // per_frame, per_frame))
        return grids

    def rope_index_extras(self, inputs: Any) -> dict[str, Any]:
        """``second_per_grid_ts``: seconds per temporal patch of each video (absolute-time MRoPE);
        nothing for Qwen2-VL, whose temporal positions are the temporal patches' indices."""
        if not self._traits.absolute_time:
            return {}
        return {"second_per_grid_ts": inputs.get("second_per_grid_ts")}

    # Vision encoder: the last block, a full-attention one in the published models ---------------
    def vision_call_layout(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> VisionRecord:
        record = super().vision_call_layout(args, kwargs)
        grid_thw = kwargs.get("grid_thw", args[1] if len(args) > 1 else None)
        self._vision_grid = grid_thw  # feature_scores, called later in this encoder call, reads it
        return record

    def _window_index(self, visual: nn.Module, grid_thw: torch.Tensor) -> torch.Tensor:
        """The encoder's ``window_index``: merge unit order inside the blocks -> input (LLM) order
        (``[units]``, ``units = sum(t * h * w) / merge**2``); the identity for Qwen2-VL's windowless ViT."""
        if not self._traits.windowed_vit:
            units = int(grid_thw.prod(-1).sum()) // self._merge**2
            return torch.arange(units, device=grid_thw.device)
        module = sys.modules[type(visual).__module__]
        make = getattr(module, "get_vision_window_index", None)
        if make is not None:  # transformers >= 5.x
            index, _ = make(grid_thw, spatial_merge_size=visual.spatial_merge_size, window_size=visual.window_size,
                            patch_size=visual.patch_size)
        else:  # earlier releases: a method of the encoder
            index, _ = visual.get_window_index(grid_thw)
        return index

    def feature_scores(self, module: nn.Module, args: tuple[Any, ...],
                       kwargs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """Attention column means and head-mean keys of the feature layer, per LLM token.

        The layer attends within the sequences of its ``cu_seqlens``: a temporal patch in the
        full-attention blocks (the last block of every published Qwen2.5-VL is one), a window
        inside a temporal patch otherwise. A token's value is the column mean of the attention
        map the layer actually computes, over heads and over all queries of its temporal patch:
        in a window of ``n`` of the frame's ``N`` patches, ``n / N`` times the column mean within
        the window (queries of other windows give it 0), so a frame's values sum to 1 either way.
        A merge unit's value is the mean of its 4 patches, which the blocks keep consecutive;
        the units come in window order and are put back in the LLM's (``argsort(window_index)``,
        as the encoder does with the merger's output). Keys are taken before the rotary embedding.
        """
        grid_thw = self._vision_grid
        if grid_thw is None:
            raise ValueError(f"{self.family}: the feature layer ran outside a recorded vision-encoder call")
        column_means, keys = vit_column_means(module, args, kwargs, times_length=True)
        length, device = keys.shape[0], keys.device
        # Times n (above) and divided by N (here): the column mean over the whole temporal patch.
        frame_patches = torch.cat([torch.full((t * h * w,), float(h * w), device=device)
                                   for t, h, w in grid_thw.tolist()])  # frames stay contiguous in window order
        attention = column_means / frame_patches
        unit = self._merge**2
        reverse = torch.argsort(self._window_index(self.model.model.visual, grid_thw).to(device))
        attention = attention.view(-1, unit).mean(-1)[reverse]
        head_mean_keys = keys.float().mean(1).view(length // unit, unit, -1).mean(1)[reverse]
        return attention, head_mean_keys

    def mean_query_scores(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.Tensor:
        """``vision_mean_query_attention`` of the feature (last) layer: ``[N]`` per LLM token, in the
        LLM's order and the model's dtype.

        FastVID's Qwen2.5-VL release computes it in this block's attention forward
        (:func:`vcast.models.vision_probe.mean_query_attention`): on the block's own rotated queries
        and keys (``qkv``, then the model's ``apply_rotary_pos_emb_vision``), in the encoder's window
        order, per temporal patch of the grid (whatever ``cu_seqlens`` the block attends with); here
        per ``grid_thw`` row (the release takes ``grid_thw[0]``, one video per call), each row's
        temporal patches contiguous in that order. The units go back to the LLM's order with
        ``argsort(window_index)``, the merger's ``reverse_indices`` the release applies (the
        identity for Qwen2-VL, whose ViT has no windows).
        """
        grid_thw = self._vision_grid
        if grid_thw is None:
            raise ValueError(f"{self.family}: the feature layer ran outside a recorded vision-encoder call")
        hidden = kwargs.get("hidden_states", args[0] if args else None)
        cos, sin = kwargs["position_embeddings"]
        length = hidden.shape[0]
        queries, keys, _ = module.qkv(hidden).reshape(length, 3, module.num_heads, -1).unbind(1)  # [N, H, d]
        rotary = sys.modules[type(module).__module__].apply_rotary_pos_emb_vision  # the model's own
        queries, keys = rotary(queries, keys, cos, sin)
        unit = self._merge**2
        per_row, start = [], 0
        for t, h, w in grid_thw.tolist():
            stop = start + t * h * w
            per_row.append(mean_query_attention(queries[start:stop], keys[start:stop], t, unit).reshape(-1))
            start = stop
        reverse = torch.argsort(self._window_index(self.model.model.visual, grid_thw).to(hidden.device))
        return torch.cat(per_row)[reverse]
