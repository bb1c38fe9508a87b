"""The pruned prompt fed straight to the model, with no hooks: the reference the hooks must equal.

Given a processor batch of ONE sample and which of its tokens survive, build the inputs that
make an untouched model see exactly the pruned prompt: the kept ``input_ids``, the vision
encoder's outputs restricted to the kept tokens (``mm_encoder_outputs``, transformers >= 5.18),
and the kept tokens' position ids (Qwen3-VL: the full prompt's MRoPE (t, h, w), text row
renumbered; LLaVA: original indices, or none for compact numbering). ``generate`` on these
continues positions exactly as the hooked model does.

Used by the tests (hooked generate == this), by the GPU check kit (:mod:`vcast.gpucheck`) and by
``scripts/bench_prefill.py`` (the "ideal" prefill that costs no machinery). For a merging method,
:func:`encoder_selection` gives the tokens the hooks must write (``pruned_inputs(video_tokens=...)``).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import torch
from torch import nn

from vcast.models.adapter import flat_tokens
from vcast.models.stats import CallStats
from vcast.selection import Selection


def survivors(stats: CallStats, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """BoolTensor ``[B, L]``: tokens of the unpruned prompt that the last call kept."""
    keep = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool().clone()
    for segment in stats.segments:
        dropped = torch.ones(segment.total, dtype=torch.bool)
        dropped[segment.keep] = False
        keep[segment.sample, segment.positions[dropped].to(keep.device)] = False
    return keep


def encode(model: nn.Module, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Run the vision encoder once: ``{"video": ..., "image": ...}`` as ``mm_encoder_outputs``."""
    base = model.model
    encoded: dict[str, Any] = {}
    if inputs.get("pixel_values_videos") is not None:
        extra = {"video_grid_thw": inputs["video_grid_thw"]} if "video_grid_thw" in inputs else {}
        encoded["video"] = base.get_video_features(pixel_values_videos=inputs["pixel_values_videos"], return_dict=True,
                                                   **extra)
    if inputs.get("pixel_values") is not None:
        extra = {k: inputs[k] for k in ("image_grid_thw", "image_sizes") if k in inputs}
        encoded["image"] = base.get_image_features(pixel_values=inputs["pixel_values"], return_dict=True, **extra)
    return encoded


def _restrict(output: Any, keep: torch.Tensor, as_batch: bool, merged: Optional[torch.Tensor] = None) -> Any:
    """``output`` with its pooled tokens (and DeepStack features) restricted to ``keep`` [N] bool.

    ``merged`` [K', D]: a merging method's tokens, written over the first ``K'`` kept tokens (the
    video's own; LLaVA's trailing newline comes after them). DeepStack rows stay the kept ones'.
    The result holds one ``[K, D]`` item, or with ``as_batch`` a ``[1, K, D]`` batch (LLaVA video).
    """
    def cut(tokens: Any, replacement: Optional[torch.Tensor] = None) -> Any:
        flat = flat_tokens(tokens)
        kept = flat[keep.to(flat.device)]
        if replacement is not None:
            kept = kept.clone()
            kept[: replacement.shape[0]] = replacement.to(kept)
        return kept[None] if as_batch else (kept,)

    fields = dict(output)
    fields["pooler_output"] = cut(output.pooler_output, merged)
    if getattr(output, "deepstack_features", None) is not None:
        fields["deepstack_features"] = [cut(layer) for layer in output.deepstack_features]
    return type(output)(**fields)


def mrope_positions(model: nn.Module, inputs: Mapping[str, Any]) -> torch.Tensor:
    """Qwen3-VL's (t, h, w) position ids ``[3, B, L]`` of the full prompt, from the model itself."""
    spatial, _ = model.model.get_rope_index(
        inputs["input_ids"], mm_token_type_ids=inputs["mm_token_type_ids"], image_grid_thw=inputs.get("image_grid_thw"),
        video_grid_thw=inputs.get("video_grid_thw"), attention_mask=inputs.get("attention_mask"),
    )
    return spatial


def with_text_row(spatial: torch.Tensor) -> torch.Tensor:
    """``[3, 1, L]`` (t, h, w) -> the 4-row ids ``generate`` passes: text row 0..L-1 on top."""
    text = torch.arange(spatial.shape[-1], device=spatial.device).view(1, 1, -1).expand(1, spatial.shape[1], -1)
    return torch.cat([text, spatial], 0)


def pruned_inputs(model: nn.Module, inputs: Mapping[str, Any], encoded: Mapping[str, Any], keep: torch.Tensor,
                  positions: str = "original", video_tokens: Optional[torch.Tensor] = None) -> dict[str, Any]:
    """Keyword arguments for ``model(...)`` / ``model.generate(...)`` that feed the pruned prompt.

    Args:
        inputs: the processor's batch (one sample).
        encoded: :func:`encode` of ``inputs`` (unpruned).
        keep: BoolTensor ``[1, L]`` of surviving tokens (:func:`survivors`).
        positions: ``"original"`` or, for LLaVA, ``"compact"``.
        video_tokens: ``[K, D]`` merged tokens of the (one) video, in kept-position order, or None.
    """
    input_ids = inputs["input_ids"]
    if input_ids.shape[0] != 1:
        raise ValueError(f"the reference path takes one sample, got a batch of {input_ids.shape[0]}")
    row = keep[0].to(input_ids.device)
    config = model.config
    is_qwen = hasattr(config, "vision_start_token_id")
    video_id = config.video_token_id if is_qwen else config.video_token_index
    image_id = config.image_token_id if is_qwen else config.image_token_index

    kwargs: dict[str, Any] = {"input_ids": input_ids[:, row], "attention_mask": torch.ones_like(input_ids[:, row])}
    mm_outputs = {}
    for kind, token in (("video", video_id), ("image", image_id)):
        if kind in encoded:
            as_batch = not is_qwen and kind == "video"  # LLaVA video features are [videos, N, D]
            merged = video_tokens if kind == "video" else None
            mm_outputs[kind] = _restrict(encoded[kind], row[input_ids[0] == token], as_batch, merged)
    kwargs["mm_encoder_outputs"] = mm_outputs

    if is_qwen:
        kwargs["mm_token_type_ids"] = inputs["mm_token_type_ids"][:, row]
        kwargs["position_ids"] = with_text_row(mrope_positions(model, inputs)[..., row])
    elif positions == "original":
        kwargs["position_ids"] = torch.arange(input_ids.shape[1], device=input_ids.device)[row][None]
    return kwargs


def probe_video(model: nn.Module, inputs: Mapping[str, Any]) -> tuple[Any, list]:
    """Encode ``inputs``' video with a bare :class:`vcast.models.vision_probe.VisionProbe` attached
    (no pruning): (the encoder's pooled video output, the probe's records of the call)."""
    from vcast.models.attach import adapter_class
    from vcast.models.vision_probe import VisionProbe

    probe = VisionProbe(adapter_class(model)(model, None, False), attention=True)
    try:
        with torch.no_grad():
            pooled = encode(model, inputs)["video"].pooler_output
        records = probe.take()
    finally:
        probe.remove()
    return pooled, records


def encoder_selection(model: nn.Module, inputs: Mapping[str, Any], method: str, ratio: float,
                      **params: Any) -> Selection:
    """Compressor ``method`` on the vision encoder's own ``[T, P, D]`` tokens of the ONE video in
    ``inputs`` (LLaVA: without the trailing newline), with the model inputs it declares read by a
    bare probe: what ``attach`` must choose, and, for a merging method, the tokens it must write."""
    from vcast.api import select
    from vcast.models.attach import adapter_class
    from vcast.models.vision_probe import inputs_for_videos
    from vcast.registry import method_inputs

    family = adapter_class(model).family
    pooled, records = probe_video(model, inputs)
    tokens = pooled[0] if family != "LLaVA-OneVision" else pooled[0, :-1]
    frames, per_frame = records[-1].units[0]  # one video: one (T, P)
    (extra,) = inputs_for_videos(records, [(frames, per_frame)], method_inputs(method, params.get("variant")), family)
    return select(tokens.reshape(frames, per_frame, -1), ratio, method=method, **params, **extra)
