"""The pruned prompt fed straight to the model, with no hooks: the reference the hooks must equal.

Given a processor batch of ONE sample and which of its tokens survive, build the inputs that
make an untouched model see exactly the pruned prompt: the kept ``input_ids``, the vision
encoder's outputs restricted to the kept tokens (``mm_encoder_outputs``, transformers >= 5.18),
and the kept tokens' position ids (the adapter's :meth:`~vcast.models.adapter.Adapter.full_positions`
of the full prompt, gathered; MRoPE families' text row renumbered; none for compact numbering). ``generate`` on these
continues positions exactly as the hooked model does.

Used by the tests (hooked generate == this), by the GPU check kit (:mod:`vcast.gpucheck`) and by
``scripts/bench_prefill.py`` (the "ideal" prefill that costs no machinery). For a merging method,
:func:`encoder_selection` gives the tokens the hooks must write (``pruned_inputs(video_tokens=...)``).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

import torch
from torch import nn

from vcast.families import family_of
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


def full_positions(model: nn.Module, inputs: Mapping[str, Any], positions: Optional[str] = None) -> Optional[torch.Tensor]:
    """The unpruned prompt's position ids as ``generate`` gives them to the language model (MRoPE
    families: ``[4, B, L]``, text row on top), or None where the text model numbers 0..L-1 itself."""
    return _adapter(model, positions).full_positions(inputs)


def _adapter(model: nn.Module, positions: Optional[str] = None) -> Any:
    return family_of(model).load("adapter")(model, positions, False)


def pruned_inputs(model: nn.Module, inputs: Mapping[str, Any], encoded: Mapping[str, Any], keep: torch.Tensor,
                  positions: str = "original", video_tokens: Optional[torch.Tensor] = None) -> dict[str, Any]:
    """Keyword arguments for ``model(...)`` / ``model.generate(...)`` that feed the pruned prompt.

    Args:
        inputs: the processor's batch (one sample).
        encoded: :func:`encode` of ``inputs`` (unpruned).
        keep: BoolTensor ``[1, L]`` of surviving tokens (:func:`survivors`).
        positions: the adapter's position policy (``"original"``; ``"compact"`` where it has one).
        video_tokens: ``[K, D]`` merged tokens of the (one) video, in kept-position order, or None.
    """
    input_ids = inputs["input_ids"]
    if input_ids.shape[0] != 1:
        raise ValueError(f"the reference path takes one sample, got a batch of {input_ids.shape[0]}")
    row = keep[0].to(input_ids.device)
    adapter = _adapter(model, positions)

    kwargs: dict[str, Any] = {"input_ids": input_ids[:, row], "attention_mask": torch.ones_like(input_ids[:, row])}
    mm_outputs = {}
    for kind in ("video", "image"):
        if kind in encoded:
            as_batch = not isinstance(adapter.wrap_pooled(kind, torch.zeros(1, 1)), tuple)  # LLaVA video: [videos, N, D]
            merged = video_tokens if kind == "video" else None
            mm_outputs[kind] = _restrict(encoded[kind], row[input_ids[0] == adapter.token_id(kind)], as_batch, merged)
    kwargs["mm_encoder_outputs"] = mm_outputs
    if "mm_token_type_ids" in inputs:
        kwargs["mm_token_type_ids"] = inputs["mm_token_type_ids"][:, row]
    ids = adapter.full_positions(inputs)
    if ids is not None:
        kwargs["position_ids"] = ids[..., row]
        if ids.dim() == 3 and ids.shape[0] == 4:  # the text row counts the pruned prompt's own slots
            kept = int(row.sum())
            kwargs["position_ids"][0] = torch.arange(kept, device=ids.device)
    return kwargs


def probe_video(model: nn.Module, inputs: Mapping[str, Any]) -> tuple[Any, list]:
    """Encode ``inputs``' video with a bare :class:`vcast.models.vision_probe.VisionProbe` attached
    (no pruning): (the encoder's pooled video output, the probe's records of the call)."""
    from vcast.models.attach import adapter_class
    from vcast.models.vision_probe import MEAN_QUERY_ATTENTION, VisionProbe, supplies

    adapter = adapter_class(model)(model, None, False)
    probe = VisionProbe(adapter, attention=True, mean_query=supplies(adapter, MEAN_QUERY_ATTENTION))
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

    adapter = adapter_class(model)(model, None, False)
    family = adapter.family
    pooled, records = probe_video(model, inputs)
    tokens = pooled[0][: pooled[0].shape[0] - adapter.trailing_tokens]
    frames, per_frame = records[-1].units[0]  # one video: one (T, P)
    (extra,) = inputs_for_videos(records, [(frames, per_frame)], method_inputs(method, **params), family)
    return select(tokens.reshape(frames, per_frame, -1), ratio, method=method, **params, **extra)
