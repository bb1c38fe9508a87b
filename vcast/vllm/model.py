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
    wrong positions: refused at start-up (chunked prefill or prefix caching on) and at run time.

Kept tokens therefore take their original (t, h, w), text after a video continues from the
unpruned maximum + 1, and decoding from the prompt's maximum + 1: the positions of vcast's HF path.

Each pruned video leaves its stats (grid, budgets, the bit-packed kept mask) under the key the
lmms-eval plugin put in its metadata, which the processor turns into a per-video field that
reaches ``embed_multimodal`` (:mod:`vcast.vllm.kept`); ``vcast_drain_stats`` hands them over.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any, Mapping, Sequence

import torch

from vcast.vllm import VLLM_VERSION, check_vllm_version
from vcast.vllm.kept import NO_KEY, VIDEO_KEY, pack_keep_mask
from vcast.vllm.positions import recompute_positions, relump
from vcast.vllm.settings import VCastSettings, kept_count, select_video, settings_from_config

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

_POSITION_CHANNELS = 5  # t, h, w, is_vision_start, is_video (vLLM's Qwen3-VL layout)
_MAX_STATS = 65536


# ---------------------------------------------------------------------------------------------
# Front-end: the kept count
# ---------------------------------------------------------------------------------------------


class _CountMixin:
    """Rewrites vLLM's EVS count in the prompt to the plugin's count (same function as the mask's)."""

    info: Any

    def _vcast_counts(self, grids: torch.Tensor | Sequence[Sequence[int]]) -> list[int]:
        config = self.info.get_hf_config()
        settings = settings_from_config(config)
        merge = config.vision_config.spatial_merge_size
        rows = grids.tolist() if isinstance(grids, torch.Tensor) else [list(g) for g in grids]
        return [kept_count(settings, int(t), (int(h) // merge, int(w) // merge)) for t, h, w in rows]

    def _apply_hf_processor_main(self, mm_items: Any, hf_kwargs: Mapping[str, object]) -> Any:
        videos = mm_items.get("video") if hasattr(mm_items, "get") else None
        keys = [_video_key(item) for item in videos.get_all()] if videos else []
        processed = super()._apply_hf_processor_main(mm_items, hf_kwargs)  # type: ignore[misc]
        grids = processed.get("video_grid_thw") if hasattr(processed, "get") else None
        if grids is None or len(grids) == 0:
            return processed
        if len(keys) != len(grids):
            raise ValueError(f"{len(keys)} video(s) in, {len(grids)} video grid(s) out of the processor")
        processed[VIDEO_KEY] = torch.tensor(keys, dtype=torch.long)  # [videos]
        video_token_id = self.info.get_hf_config().video_token_id
        input_ids = processed["input_ids"]
        as_tensor = isinstance(input_ids, torch.Tensor)
        rows = input_ids.tolist() if as_tensor else [list(row) for row in input_ids]
        if len(rows) != 1:
            raise ValueError(f"expected one prompt per processor call, got {len(rows)}")
        fixed = [relump(rows[0], video_token_id, self._vcast_counts(grids))]
        processed["input_ids"] = torch.tensor(fixed, dtype=input_ids.dtype) if as_tensor else fixed
        return processed

    def _get_hf_mm_inputs(self, mm_items: Any, hf_kwargs: Mapping[str, object]) -> Any:
        """vLLM's, with each video's key taken out of its metadata (transformers' ``VideoMetadata``
        takes no other keys); :meth:`_apply_hf_processor_main` returns it as a field."""
        hf_data, hf_kwargs, passthrough = super()._get_hf_mm_inputs(mm_items, hf_kwargs)  # type: ignore[misc]
        if hf_data.get("videos"):
            hf_data = {**hf_data, "videos": [_without_key(item) for item in hf_data["videos"]]}
        return hf_data, hf_kwargs, passthrough

    def _get_mm_fields_config(self, hf_inputs: Any, hf_processor_mm_kwargs: Mapping[str, object]) -> Mapping[str, Any]:
        """vLLM's fields plus each video's key (one int per video, kept on the CPU)."""
        fields = dict(super()._get_mm_fields_config(hf_inputs, hf_processor_mm_kwargs))  # type: ignore[misc]
        fields[VIDEO_KEY] = MultiModalFieldConfig.batched("video", keep_on_cpu=True)
        return fields

    def _get_prompt_updates(self, mm_items: Any, hf_processor_mm_kwargs: Mapping[str, Any],
                            out_mm_kwargs: Any) -> Sequence[Any]:
        updates = list(super()._get_prompt_updates(mm_items, hf_processor_mm_kwargs, out_mm_kwargs))  # type: ignore[misc]
        video_token_id = self.info.get_hf_config().video_token_id
        for position, update in enumerate(updates):
            if update.modality != "video":
                continue
            stock = update.replacement

            def replacement(item_idx: int, stock: Any = stock) -> PromptUpdateDetails:
                details = stock(item_idx)
                grid = out_mm_kwargs["video"][item_idx]["video_grid_thw"].data
                count = self._vcast_counts([grid.tolist()])
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
        scheduler = vllm_config.scheduler_config
        if scheduler.enable_chunked_prefill and scheduler.max_num_batched_tokens < vllm_config.model_config.max_model_len:
            raise ValueError(
                f"chunked prefill with max_num_batched_tokens={scheduler.max_num_batched_tokens} < max_model_len="
                f"{vllm_config.model_config.max_model_len} can split a pruned video, whose positions vLLM "
                f"{VLLM_VERSION} then gets wrong: pass enable_chunked_prefill=False or raise max_num_batched_tokens")
        if vllm_config.cache_config.enable_prefix_caching:
            raise ValueError("prefix caching can cover part of a pruned video, whose positions then go wrong: pass "
                             "enable_prefix_caching=False")
        # Off by default; set through LLM.apply_model to keep each video's kept indices (tests, debugging).
        self.vcast_record = False
        self.vcast_records: list[dict[str, Any]] = []
        # Per pruned video (drained by the lmms-eval plugin; bounded, so a server that never drains it
        # does not grow past ~_MAX_STATS bit-packed masks): see vcast_drain_stats.
        self.vcast_stats: deque[dict[str, Any]] = deque(maxlen=_MAX_STATS)
        # The keys of the videos of the embed_multimodal call in progress (vcast.vllm.kept).
        self._vcast_keys: list[int] = []
        logger.info("V-CAST vLLM plugin: method=%s ratio=%s params=%s", self.vcast_settings.method,
                    self.vcast_settings.ratio, dict(self.vcast_settings.params))

    def _postprocess_video_embeds_evs(self, video_embeds_split: tuple[torch.Tensor, ...],
                                      video_input: Any) -> tuple[torch.Tensor, ...]:
        """Per video: the mask from ``vcast.select`` on the main channels ``[T, P, D]``, every
        channel (main and DeepStack) gathered with it, then vLLM's own final layout and positions."""
        grid_thw = video_input["video_grid_thw"].tolist()
        merge = self.visual.spatial_merge_size
        keys = self._vcast_keys if len(self._vcast_keys) == len(grid_thw) else [NO_KEY] * len(grid_thw)
        out = []
        for video_idx, (embeds, (t, h, w)) in enumerate(zip(video_embeds_split, grid_thw)):
            grid = (h // merge, w // merge)
            frames = embeds[:, : self.visual_dim].reshape(t, grid[0] * grid[1], self.visual_dim)
            start = time.perf_counter()
            selection = select_video(frames, self.vcast_settings, grid)
            seconds = time.perf_counter() - start
            mask = selection.mask().reshape(-1).to(embeds.device)
            expected = kept_count(self.vcast_settings, t, grid)
            if int(mask.sum()) != expected:
                raise RuntimeError(f"{self.vcast_settings.method} kept {int(mask.sum())} tokens of a {t}x{grid} video "
                                   f"but the prompt holds {expected} placeholders")
            budgets = selection.budgets.tolist()
            self.vcast_stats.append({"key": keys[video_idx], "grid_thw": (t, h, w), "total": int(mask.numel()),
                                     "kept": expected, "selection_s": seconds, "budgets": budgets,
                                     "mask": pack_keep_mask(mask)})
            if self.vcast_record:
                self.vcast_records.append({"grid_thw": (t, h, w), "keep": selection.keep.cpu(),
                                           "frames": frames.detach().float().cpu()})
            out.append(self._create_final_video_embeddings(
                video_embeddings=embeds[mask],
                num_tokens_per_frame=budgets,
                timestamps=video_input.timestamps[video_idx],
                video_grid_thw=[t, h, w],
                retention_mask=mask,
            ))
        return tuple(out)

    def embed_multimodal(self, **kwargs: object) -> Any:
        """vLLM's, with the videos' keys (:data:`VIDEO_KEY`, a ``[videos]`` tensor that the
        processor made a field) set aside for :meth:`_postprocess_video_embeds_evs`."""
        keys = kwargs.pop(VIDEO_KEY, None)
        self._vcast_keys = [] if keys is None else [int(k) for k in torch.as_tensor(keys).reshape(-1).tolist()]
        try:
            return super().embed_multimodal(**kwargs)  # type: ignore[misc]
        finally:
            self._vcast_keys = []

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
        """vLLM's contract (strip the 5 position channels, return the prompt's positions and delta),
        anchored at each video's own first slot (bug (b)) and refusing split videos (bug (c))."""
        device = multimodal_embeddings[0].device if len(multimodal_embeddings) else mrope_positions.device
        ids = torch.as_tensor(input_ids, dtype=torch.long, device=device)
        stripped = [item[:, :-_POSITION_CHANNELS] for item in multimodal_embeddings]
        item_positions = [item[:, -_POSITION_CHANNELS:].T.long() for item in multimodal_embeddings if item.shape[0]]
        positions, delta = recompute_positions(ids, item_positions, mrope_positions.to(device), num_computed_tokens,
                                               self.config.image_token_id, self.config.video_token_id)
        return stripped, positions, delta

    def embed_input_ids(self, input_ids: torch.Tensor, multimodal_embeddings: Any = None, *,
                        is_multimodal: torch.Tensor | None = None) -> torch.Tensor:
        if multimodal_embeddings:
            width = self.visual_dim + getattr(self, "multiscale_dim", 0)
            if any(item.shape[-1] == width + _POSITION_CHANNELS for item in multimodal_embeddings):
                raise RuntimeError(
                    "the pruned video's position channels reached the language model: this vLLM runner does not "
                    f"run the pruning bookkeeping (vLLM {VLLM_VERSION}'s CPU runner never turns it on). On CPU pass "
                    "worker_cls='vcast.vllm.worker.VCastCPUWorker' (vcast.vllm.engine_kwargs does)")
        return super().embed_input_ids(input_ids, multimodal_embeddings,  # type: ignore[misc]
                                       is_multimodal=is_multimodal)


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
