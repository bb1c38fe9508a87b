"""vLLM's Qwen3-VL (dense and MoE) with its video-pruning hook computing the mask with vcast.

vLLM 0.32 prunes Qwen3-VL video tokens in two places that must agree:

* the front-end processor writes each video's placeholders "lumped": all ``K`` kept video tokens
  in frame 0's block (``<t0><vs> K x <video> <ve> <t1><vs><ve> ...``), since the real per-frame
  counts are known only after encoding. :class:`VCastQwen3VLProcessor` rewrites that run to the
  plugin's ``K`` (:func:`vcast.vllm.settings.kept_count`);
* the model's ``_postprocess_video_embeds_evs`` computes the retention mask, and returns for the
  whole placeholder range the embeddings in the real per-frame layout (timestamps and vision
  start/end interleaved as in the unpruned prompt) with 5 extra channels: each slot's original
  (t, h, w) offset, a vision-start flag and a video flag. :class:`_VCastPruning` computes the mask
  with :func:`vcast.select` on the main post-merger channels; DeepStack channels ride along with
  the same rows.

The runner then strips the 5 channels and moves each item's positions to where it sits in the
prompt (``recompute_mrope_positions``). Fixed here, on the plugin's classes only:

(a) the CPU runner never turns that bookkeeping on: :mod:`vcast.vllm.worker`, and a clear error
    here when the extra channels reach ``embed_input_ids`` unstripped;
(b) transformers >= 5.10 leaves the chat template's outer ``<|vision_start|>`` before each video,
    and vLLM anchors the video at that token, shifting every position after it:
    :meth:`_VCastPruning.recompute_mrope_positions` anchors it at frame 0's own vision start;
(c) a prefill chunk boundary inside a pruned video (or a cached prefix that covers one) gives
    wrong positions: the prompt's text positions are right before any item is encoded
    (:meth:`_VCastPruning.get_mrope_input_positions`: an item's unpruned extent depends on its
    shape alone), and each item's slots carry their index in the item, so a step that starts
    inside an item places the rest of it (:func:`vcast.vllm.positions.recompute_positions`);
(d) vLLM appends the position channels in the embeddings' dtype, which rounds offsets past 256 in
    bfloat16; the plugin's channels are base-256 digits (:func:`vcast.vllm.positions.encode_channels`).

Kept tokens therefore take their original (t, h, w), text after a video continues from the
unpruned maximum + 1, and decoding from the prompt's maximum + 1: the positions of vcast's HF path,
with chunked prefill and prefix caching on as vLLM runs by default.

Each pruned video leaves its stats (grid, budgets, the bit-packed kept mask) under the key the
lmms-eval plugin put in its metadata, which the processor turns into a per-video field that
reaches ``embed_multimodal`` (:mod:`vcast.vllm.kept`); ``vcast_drain_stats`` hands them over. A
request's own ratio (``mm_processor_kwargs={"vcast_ratio": r}``, :func:`vcast.vllm.settings.request_settings`)
reaches the model the same way, so its count and its mask use one ratio. A video the loader sampled no
frame of is refused in the processor by name (the request's 400), before transformers' processor fails.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import replace
from typing import Any, Mapping, Sequence

import torch

from vcast.vllm import VLLM_VERSION, check_vllm_version
from vcast.vllm.kept import NO_KEY, VIDEO_KEY, pack_keep_mask
from vcast.vllm.positions import (
    POSITION_COLUMNS,
    SLOT,
    MediaSpan,
    decode_channels,
    encode_channels,
    initial_positions,
    media_extent,
    recompute_positions,
    relump,
)
from vcast.vllm.settings import (
    RATIO_FIELD,
    VCastSettings,
    kept_count,
    request_settings,
    select_video,
    settings_from_config,
    without_request_options,
)

check_vllm_version()

from vllm.model_executor.models.qwen3_vl import (  # noqa: E402  (after the version check)
    Qwen3VLDummyInputsBuilder,
    Qwen3VLForConditionalGeneration,
    Qwen3VLMultiModalProcessor,
    Qwen3VLProcessingInfo,
)
from vllm.model_executor.models.qwen3_vl_moe import (  # noqa: E402
    Qwen3VLMoeForConditionalGeneration,
    Qwen3VLMoeProcessingInfo,
)
from vllm.multimodal import MULTIMODAL_REGISTRY  # noqa: E402
from vllm.multimodal.inputs import MultiModalFieldConfig  # noqa: E402
from vllm.multimodal.processing import PromptReplacement, PromptUpdateDetails  # noqa: E402

logger = logging.getLogger(__name__)

_STOCK_CHANNELS = 5  # vLLM's: t, h, w, is_vision_start, is_video, one column each (replaced by ours)
_MAX_STATS = 65536


# ---------------------------------------------------------------------------------------------
# Front-end: the kept count
# ---------------------------------------------------------------------------------------------


class _CountMixin:
    """Rewrites vLLM's EVS count in the prompt to the plugin's count (same function as the mask's)."""

    info: Any

    def _vcast_settings(self, hf_kwargs: Mapping[str, object]) -> VCastSettings:
        """The server's settings, with the request's own ratio where it sets one (ValueError: its 400)."""
        return request_settings(settings_from_config(self.info.get_hf_config()), hf_kwargs)

    def _vcast_counts(self, grids: torch.Tensor | Sequence[Sequence[int]], settings: VCastSettings) -> list[int]:
        config = self.info.get_hf_config()
        merge = config.vision_config.spatial_merge_size
        rows = grids.tolist() if isinstance(grids, torch.Tensor) else [list(g) for g in grids]
        return [kept_count(settings, int(t), (int(h) // merge, int(w) // merge)) for t, h, w in rows]

    def _apply_hf_processor_main(self, mm_items: Any, hf_kwargs: Mapping[str, object]) -> Any:
        videos = mm_items.get("video") if hasattr(mm_items, "get") else None
        keys = [_video_key(item) for item in videos.get_all()] if videos else []
        for index, item in enumerate(videos.get_all() if videos else []):
            _check_has_frames(index, item)
        settings = self._vcast_settings(hf_kwargs)
        processed = super()._apply_hf_processor_main(mm_items, without_request_options(hf_kwargs))  # type: ignore[misc]
        grids = processed.get("video_grid_thw") if hasattr(processed, "get") else None
        if grids is None or len(grids) == 0:
            return processed
        if len(keys) != len(grids):
            raise ValueError(f"{len(keys)} video(s) in, {len(grids)} video grid(s) out of the processor")
        counts = self._vcast_counts(grids, settings)  # before any field: a ratio that keeps nothing is the 400
        processed[VIDEO_KEY] = torch.tensor(keys, dtype=torch.long)  # [videos]
        processed[RATIO_FIELD] = torch.full((len(keys),), settings.ratio, dtype=torch.float64)  # [videos]
        video_token_id = self.info.get_hf_config().video_token_id
        input_ids = processed["input_ids"]
        as_tensor = isinstance(input_ids, torch.Tensor)
        rows = input_ids.tolist() if as_tensor else [list(row) for row in input_ids]
        if len(rows) != 1:
            raise ValueError(f"expected one prompt per processor call, got {len(rows)}")
        fixed = [relump(rows[0], video_token_id, counts)]
        processed["input_ids"] = torch.tensor(fixed, dtype=input_ids.dtype) if as_tensor else fixed
        return processed

    def _get_hf_mm_inputs(self, mm_items: Any, hf_kwargs: Mapping[str, object]) -> Any:
        """vLLM's, with each video's key taken out of its metadata (transformers' ``VideoMetadata``
        takes no other keys); :meth:`_apply_hf_processor_main` returns it as a field."""
        hf_data, hf_kwargs, passthrough = super()._get_hf_mm_inputs(  # type: ignore[misc]
            mm_items, without_request_options(hf_kwargs))
        if hf_data.get("videos"):
            hf_data = {**hf_data, "videos": [_without_key(item) for item in hf_data["videos"]]}
        return hf_data, hf_kwargs, passthrough

    def _get_mm_fields_config(self, hf_inputs: Any, hf_processor_mm_kwargs: Mapping[str, object]) -> Mapping[str, Any]:
        """vLLM's fields plus each video's key and ratio (one number per video each, kept on the CPU)."""
        fields = dict(super()._get_mm_fields_config(  # type: ignore[misc]
            hf_inputs, without_request_options(hf_processor_mm_kwargs)))
        fields[VIDEO_KEY] = MultiModalFieldConfig.batched("video", keep_on_cpu=True)
        fields[RATIO_FIELD] = MultiModalFieldConfig.batched("video", keep_on_cpu=True)
        return fields

    def _get_prompt_updates(self, mm_items: Any, hf_processor_mm_kwargs: Mapping[str, Any],
                            out_mm_kwargs: Any) -> Sequence[Any]:
        settings = self._vcast_settings(hf_processor_mm_kwargs)
        updates = list(super()._get_prompt_updates(  # type: ignore[misc]
            mm_items, without_request_options(hf_processor_mm_kwargs), out_mm_kwargs))
        video_token_id = self.info.get_hf_config().video_token_id
        for position, update in enumerate(updates):
            if update.modality != "video":
                continue
            stock = update.replacement

            def replacement(item_idx: int, stock: Any = stock) -> PromptUpdateDetails:
                details = stock(item_idx)
                grid = out_mm_kwargs["video"][item_idx]["video_grid_thw"].data
                count = self._vcast_counts([grid.tolist()], settings)
                return PromptUpdateDetails.from_seq(relump(details.full, video_token_id, count))

            updates[position] = PromptReplacement(modality="video", target=update.target, replacement=replacement)
        return updates


class VCastQwen3VLProcessor(_CountMixin, Qwen3VLMultiModalProcessor):
    """vLLM's Qwen3-VL processor with the plugin's kept count in each video's placeholders, and each
    video's :data:`vcast.vllm.kept.VIDEO_KEY` moved from its metadata into a multimodal field."""


def _video_key(item: Any) -> int:
    """The :data:`VIDEO_KEY` in a ``(frames, metadata)`` video item's metadata, or :data:`NO_KEY`."""
    metadata = item[1] if isinstance(item, tuple) and len(item) == 2 else None
    return int(metadata.get(VIDEO_KEY, NO_KEY)) if isinstance(metadata, Mapping) else NO_KEY


def _check_has_frames(index: int, item: Any) -> None:
    """A ValueError (the server's 400) naming a video that reached the processor without a frame: the
    loader sampled none (a video shorter than one sampling step), where transformers' processor
    would fail with a dump of its inputs."""
    frames, metadata = item if isinstance(item, tuple) and len(item) == 2 else (item, None)
    count = len(frames) if hasattr(frames, "__len__") else None
    if count != 0:
        return
    total = metadata.get("total_num_frames") if isinstance(metadata, Mapping) else None
    duration = metadata.get("duration") if isinstance(metadata, Mapping) else None
    source = "" if total is None else f" of its {total} frame(s)" + ("" if duration is None else f" ({duration:.3f} s)")
    raise ValueError(f"video {index} has no frame to encode: the server's video loader sampled none{source}; "
                     "send a longer video")


def _without_key(item: Any) -> Any:
    """A ``(frames, metadata)`` video item without :data:`VIDEO_KEY` in its metadata (a copy)."""
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], Mapping) and VIDEO_KEY in item[1]:
        return item[0], {k: v for k, v in item[1].items() if k != VIDEO_KEY}
    return item


# ---------------------------------------------------------------------------------------------
# Model: the mask, and the positions
# ---------------------------------------------------------------------------------------------


class _VCastPruning:
    """The overrides shared by the dense and the MoE class (mixed in before vLLM's class)."""

    config: Any
    visual: Any
    visual_dim: int
    is_multimodal_pruning_enabled: bool

    def _vcast_setup(self, vllm_config: Any) -> None:
        self.vcast_settings: VCastSettings = settings_from_config(self.config)
        if not self.is_multimodal_pruning_enabled:
            raise ValueError("the V-CAST vLLM model runs inside vLLM's video-pruning path: pass video_pruning_rate > 0 "
                             "(any value; the plugin sets the count), e.g. through vcast.vllm.engine_kwargs")
        # Off by default; set through LLM.apply_model to keep each video's kept indices (tests, debugging).
        self.vcast_record = False
        self.vcast_records: list[dict[str, Any]] = []
        # With vcast_record: each prefill step that reached media, {"computed": its first prompt
        # token, "slots": [(first slot, slots) per item part]} (where chunks and cached prefixes cut).
        self.vcast_steps: list[dict[str, Any]] = []
        # Per pruned video (drained by the lmms-eval plugin; bounded, so a server that never drains it
        # does not grow past ~_MAX_STATS bit-packed masks): see vcast_drain_stats.
        self.vcast_stats: deque[dict[str, Any]] = deque(maxlen=_MAX_STATS)
        # The keys and ratios of the videos of the embed_multimodal call in progress (vcast.vllm.kept, and
        # each request's own ratio: vcast.vllm.settings.RATIO_KWARG).
        self._vcast_keys: list[int] = []
        self._vcast_ratios: list[float] = []
        # vLLM's exact positions [L, 5] of the video _create_final_video_embeddings is building, and
        # whether vLLM is numbering it (get_mrope_input_positions then answers as vLLM's own).
        self._vcast_expanded: torch.Tensor | None = None
        self._vcast_stock_numbering = False
        logger.info("V-CAST vLLM plugin: method=%s ratio=%s params=%s", self.vcast_settings.method,
                    self.vcast_settings.ratio, dict(self.vcast_settings.params))

    def _postprocess_video_embeds_evs(self, video_embeds_split: tuple[torch.Tensor, ...],
                                      video_input: Any) -> tuple[torch.Tensor, ...]:
        """Per video: the mask from ``vcast.select`` on the main channels ``[T, P, D]``, every
        channel (main and DeepStack) gathered with it, then vLLM's own final layout and positions."""
        grid_thw = video_input["video_grid_thw"].tolist()
        merge = self.visual.spatial_merge_size
        keys = self._vcast_keys if len(self._vcast_keys) == len(grid_thw) else [NO_KEY] * len(grid_thw)
        ratios = self._vcast_ratios if len(self._vcast_ratios) == len(grid_thw) else [None] * len(grid_thw)
        out = []
        for video_idx, (embeds, (t, h, w)) in enumerate(zip(video_embeds_split, grid_thw)):
            grid = (h // merge, w // merge)
            frames = embeds[:, : self.visual_dim].reshape(t, grid[0] * grid[1], self.visual_dim)
            settings = self.vcast_settings if ratios[video_idx] is None else replace(self.vcast_settings,
                                                                                      ratio=ratios[video_idx])
            start = time.perf_counter()
            selection = select_video(frames, settings, grid)
            seconds = time.perf_counter() - start
            mask = selection.mask().reshape(-1).to(embeds.device)
            expected = kept_count(settings, t, grid)
            if int(mask.sum()) != expected:
                raise RuntimeError(f"{settings.method} kept {int(mask.sum())} tokens of a {t}x{grid} video "
                                   f"but the prompt holds {expected} placeholders")
            budgets = selection.budgets.tolist()
            self.vcast_stats.append({"key": keys[video_idx], "grid_thw": (t, h, w), "total": int(mask.numel()),
                                     "kept": expected, "selection_s": seconds, "budgets": budgets,
                                     "mask": pack_keep_mask(mask)})
            if self.vcast_record:
                self.vcast_records.append({"grid_thw": (t, h, w), "keep": selection.keep.cpu(),
                                           "frames": frames.detach().float().cpu()})
            self._vcast_expanded = None
            final = self._create_final_video_embeddings(
                video_embeddings=embeds[mask],
                num_tokens_per_frame=budgets,
                timestamps=video_input.timestamps[video_idx],
                video_grid_thw=[t, h, w],
                retention_mask=mask,
            )
            expanded, self._vcast_expanded = self._vcast_expanded, None
            if expanded is None or expanded.shape[0] != final.shape[0]:
                raise RuntimeError("vLLM built a pruned video's embeddings without its expanded positions")
            starts = torch.nonzero(expanded[:, 3]).flatten()  # vLLM's vision-start flags
            if starts.numel() == 0:
                raise RuntimeError("a pruned video's expanded positions carry no vision start")
            out.append(_with_channels(final[:, :-_STOCK_CHANNELS], expanded[:, :3].T.long(), int(starts[0]) + 1))
        return tuple(out)

    def _get_expanded_positions(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        """vLLM's, kept exact ([L, 5], long) before vLLM casts it to the embeddings' dtype. vLLM numbers
        the unpruned video through ``self.get_mrope_input_positions``, which must be its own there."""
        self._vcast_stock_numbering = True
        try:
            expanded = super()._get_expanded_positions(*args, **kwargs)  # type: ignore[misc]
        finally:
            self._vcast_stock_numbering = False
        self._vcast_expanded = expanded
        return expanded

    def _postprocess_image_embeds_evs(self, image_embeds_split: tuple[torch.Tensor, ...],
                                      image_input: Any) -> tuple[torch.Tensor, ...]:
        """vLLM's, with the plugin's position channels: an image's tokens at ``(0, row, column)``."""
        stock = super()._postprocess_image_embeds_evs(image_embeds_split, image_input)  # type: ignore[misc]
        if not self.is_multimodal_pruning_enabled:
            return stock
        merge = self.visual.spatial_merge_size
        out = []
        for embeds, (_, h, w) in zip(stock, image_input["image_grid_thw"].tolist()):
            rows, columns = h // merge, w // merge
            grid = torch.arange(rows * columns, device=embeds.device)
            offsets = torch.stack([torch.zeros_like(grid), grid // columns, grid % columns])
            out.append(_with_channels(embeds[:, :-_STOCK_CHANNELS], offsets, 0))
        return tuple(out)

    def get_mrope_input_positions(self, input_tokens: Sequence[int] | torch.Tensor,
                                  mm_features: Sequence[Any]) -> tuple[torch.Tensor, int]:
        """The prompt's positions before its media are encoded, each text token where it stays: an
        item's extent is its unpruned one, which its grid and its slots' tokens fix
        (:func:`vcast.vllm.positions.initial_positions`); its own slots wait for the step that
        computes them (:meth:`recompute_mrope_positions`)."""
        if getattr(self, "_vcast_stock_numbering", False):  # vLLM numbering one unpruned video (above)
            return super().get_mrope_input_positions(input_tokens, mm_features)  # type: ignore[misc]
        tokens = input_tokens.tolist() if isinstance(input_tokens, torch.Tensor) else list(input_tokens)
        merge = self.config.vision_config.spatial_merge_size
        media_ids = {self.config.image_token_id, self.config.video_token_id}
        spans = []
        for feature in mm_features:
            where = feature.mm_position
            t, h, w = (int(v) for v in feature.data[f"{feature.modality}_grid_thw"].data.tolist())
            slots = tokens[where.offset: where.offset + where.length]
            media = sum(1 for token in slots if token in media_ids)
            blocks = t if feature.modality == "video" else 1
            spans.append(MediaSpan(where.offset, where.length,
                                   media_extent(where.length, media, blocks, (h // merge, w // merge))))
        return initial_positions(len(tokens), spans)

    def embed_multimodal(self, **kwargs: object) -> Any:
        """vLLM's, with the videos' keys (:data:`VIDEO_KEY`, a ``[videos]`` tensor that the
        processor made a field) set aside for :meth:`_postprocess_video_embeds_evs`."""
        keys, ratios = kwargs.pop(VIDEO_KEY, None), kwargs.pop(RATIO_FIELD, None)
        self._vcast_keys = [] if keys is None else [int(k) for k in torch.as_tensor(keys).reshape(-1).tolist()]
        self._vcast_ratios = [] if ratios is None else [float(r) for r in torch.as_tensor(ratios).reshape(-1).tolist()]
        try:
            return super().embed_multimodal(**kwargs)  # type: ignore[misc]
        finally:
            self._vcast_keys, self._vcast_ratios = [], []

    def vcast_drain_stats(self) -> list[dict[str, Any]]:
        """The per-video stats since the last call (and forget them), in encoding order, one dict per
        encoded video: ``key`` (the plugin's :data:`VIDEO_KEY`, :data:`NO_KEY` without one),
        ``grid_thw`` ``(t, h, w)`` (temporal and 16 px patches), ``total`` and ``kept`` tokens,
        ``selection_s``, ``budgets`` (kept per temporal step, ``[t]``) and ``mask`` (uint8
        ``[ceil(t * h * w / merge**2 / 8)]``: the kept mask over ``[t, h / merge, w / merge]``,
        bit-packed by :func:`vcast.vllm.kept.pack_keep_mask`)."""
        stats = list(self.vcast_stats)
        self.vcast_stats.clear()
        return stats

    def recompute_mrope_positions(self, input_ids: list[int] | torch.Tensor, multimodal_embeddings: Sequence[torch.Tensor],
                                  mrope_positions: torch.LongTensor,
                                  num_computed_tokens: int) -> tuple[Sequence[torch.Tensor], torch.Tensor, int]:
        """vLLM's contract (strip the position channels, return the prompt's positions and delta),
        anchored at each video's own first slot (bug (b)), any part of an item at a time (bug (c))."""
        device = multimodal_embeddings[0].device if len(multimodal_embeddings) else mrope_positions.device
        ids = torch.as_tensor(input_ids, dtype=torch.long, device=device)
        stripped = [item[:, :-POSITION_COLUMNS] for item in multimodal_embeddings]
        item_positions = [decode_channels(item[:, -POSITION_COLUMNS:]) for item in multimodal_embeddings
                          if item.shape[0]]
        positions, delta = recompute_positions(ids, item_positions, mrope_positions.to(device), num_computed_tokens,
                                               self.config.image_token_id, self.config.video_token_id)
        if self.vcast_record and item_positions:
            self.vcast_steps.append({"computed": int(num_computed_tokens),
                                     "slots": [(int(item[SLOT, 0]), int(item.shape[1])) for item in item_positions]})
        return stripped, positions, delta

    def embed_input_ids(self, input_ids: torch.Tensor, multimodal_embeddings: Any = None, *,
                        is_multimodal: torch.Tensor | None = None) -> torch.Tensor:
        if multimodal_embeddings:
            width = self.visual_dim + getattr(self, "multiscale_dim", 0)
            if any(item.shape[-1] == width + POSITION_COLUMNS for item in multimodal_embeddings):
                raise RuntimeError(
                    "the pruned video's position channels reached the language model: this vLLM runner does not "
                    f"run the pruning bookkeeping (vLLM {VLLM_VERSION}'s CPU runner never turns it on). On CPU pass "
                    "worker_cls='vcast.vllm.worker.VCastCPUWorker' (vcast.vllm.engine_kwargs does)")
        return super().embed_input_ids(input_ids, multimodal_embeddings,  # type: ignore[misc]
                                       is_multimodal=is_multimodal)


def _with_channels(embeds: torch.Tensor, offsets: torch.Tensor, lead: int) -> torch.Tensor:
    """``embeds`` [L, D] with the plugin's position columns appended, as exact digits: ``offsets``
    LongTensor [3, L] (t, h, w from the item's first position), ``lead`` (slots before the item's
    first image or video token in vLLM's prompt) and each slot's index in the item."""
    slots = torch.arange(embeds.shape[0], device=offsets.device).unsqueeze(0)
    channels = torch.cat([offsets.to(slots.device), torch.full_like(slots, lead), slots])
    return torch.cat([embeds, encode_channels(channels, embeds.dtype).to(embeds.device)], dim=-1)


@MULTIMODAL_REGISTRY.register_processor(VCastQwen3VLProcessor, info=Qwen3VLProcessingInfo,
                                        dummy_inputs=Qwen3VLDummyInputsBuilder)
class VCastQwen3VLForConditionalGeneration(_VCastPruning, Qwen3VLForConditionalGeneration):
    """Qwen3-VL (dense) with V-CAST (or another shape-counted pruning method) on its videos."""

    def __init__(self, *, vllm_config: Any, prefix: str = "model") -> None:
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        self._vcast_setup(vllm_config)


@MULTIMODAL_REGISTRY.register_processor(VCastQwen3VLProcessor, info=Qwen3VLMoeProcessingInfo,
                                        dummy_inputs=Qwen3VLDummyInputsBuilder)
class VCastQwen3VLMoeForConditionalGeneration(_VCastPruning, Qwen3VLMoeForConditionalGeneration):
    """Qwen3-VL-MoE with V-CAST (or another shape-counted pruning method) on its videos."""

    def __init__(self, *, vllm_config: Any, prefix: str = "") -> None:
        super().__init__(vllm_config=vllm_config, prefix=prefix)
        self._vcast_setup(vllm_config)
