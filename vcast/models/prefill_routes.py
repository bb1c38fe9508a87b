"""The two ways a prefill is pruned, once the method has chosen the surviving tokens.

- **encoded** (the embedder's pre-hook, when the vision encoder's outputs come precomputed:
  ``generate`` in transformers >= 5.18): prune the token ids, the encoder outputs, the mask and
  the positions before anything is embedded, so the model never builds the full-length prompt;
- **embedded** (the language model's pre-hook, otherwise): re-lay the embeddings, the mask, the
  positions and the family's extras (DeepStack features).

Either way the kept tokens keep their original positions (the adapter gathers them), the batch
is re-padded on the left (:func:`vcast.models.layout.plan_layout`), and the result says how later
decoding steps line up with the pruned cache (:class:`~vcast.models.adapter.ActivePruning`).
``select(source, attention_mask, shape)`` runs the method on the prompt's segments and returns the
surviving tokens ``[B, L]`` (or None: nothing dropped); a merging method writes its merged
tokens into ``source``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Optional

import torch
from torch import nn

from vcast.models.adapter import ActivePruning, Adapter, PromptContext, TokenSource, flat_tokens
from vcast.models.layout import SequenceLayout, plan_layout

logger = logging.getLogger(__name__)

Select = Callable[[TokenSource, Optional[torch.Tensor], tuple[int, int]], Optional[torch.Tensor]]


@dataclass
class PrunedPrefill:
    """A pruned prefill: the call's new keyword arguments, the layout of the kept tokens, and what
    decoding needs to know of it."""

    kwargs: dict[str, Any]
    layout: SequenceLayout
    active: ActivePruning


def _new_mask(layout: SequenceLayout, attention_mask: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    if not layout.needs_mask:
        return None
    return layout.valid.to(attention_mask.dtype if attention_mask is not None else torch.long)


def prune_embedded(adapter: Adapter, kwargs: dict[str, Any], select: Select) -> Optional[PrunedPrefill]:
    """Re-lay the language model's ``inputs_embeds`` ``[B, L, C]`` (and mask, positions, extras)
    to the survivors; None when the call has no embeddings or nothing is dropped."""
    embeds = kwargs.get("inputs_embeds")
    if embeds is None:
        return None
    attention_mask = kwargs.get("attention_mask")
    length = embeds.shape[1]
    source = TokenSource.from_embeddings(embeds)
    survives = select(source, attention_mask, embeds.shape[:2])
    if survives is None:
        return None
    layout = plan_layout(survives, attention_mask)
    kwargs = dict(kwargs)
    kwargs["inputs_embeds"] = layout.gather(source.embeddings, dim=1)
    kwargs["attention_mask"] = _new_mask(layout, attention_mask)
    kwargs["position_ids"] = adapter.prefill_positions(kwargs.get("position_ids"), layout, length)
    adapter.prefill_extras(kwargs, layout, survives)
    logger.debug("%s: pruned the embedded prompt %d -> %d tokens", adapter.family, length, layout.width)
    return PrunedPrefill(kwargs, layout, ActivePruning(layout=layout, full_length=length,
                                                       attention_mask=kwargs["attention_mask"]))


def prune_encoded(adapter: Adapter, model: nn.Module, kwargs: dict[str, Any], context: PromptContext,
                  select: Select) -> Optional[PrunedPrefill]:
    """Prune the embedder's ``input_ids`` ``[B, L]`` and ``mm_encoder_outputs`` (and mask, token
    types, positions) to the survivors; None when nothing is dropped."""
    input_ids = kwargs["input_ids"]
    encoded = kwargs["mm_encoder_outputs"]
    masks = {kind: mask for kind, output in encoded.items()
             if output is not None and (mask := adapter.placeholder_mask(context, kind)) is not None}
    flat = {kind: flat_tokens(encoded[kind].pooler_output) for kind in masks}
    source = TokenSource.from_encoder(flat, masks)
    attention_mask = kwargs.get("attention_mask")
    survives = select(source, attention_mask, tuple(input_ids.shape))
    if survives is None:
        return None
    length = input_ids.shape[1]
    layout = plan_layout(survives, attention_mask)
    valid = layout.valid.to(input_ids.device)
    kwargs = dict(kwargs)
    kwargs["input_ids"] = layout.gather(input_ids, dim=1).masked_fill(~valid, filler_token(model))
    if kwargs.get("mm_token_type_ids") is not None:
        kwargs["mm_token_type_ids"] = layout.gather(kwargs["mm_token_type_ids"], dim=1).masked_fill(~valid, 0)
    kwargs["attention_mask"] = _new_mask(layout, attention_mask)
    kwargs["position_ids"] = adapter.prefill_positions(kwargs.get("position_ids"), layout, length)
    # source.flat: with any merged tokens written in
    kwargs["mm_encoder_outputs"] = adapter.prune_encoded(encoded, masks, source.flat, survives, source.written)
    logger.debug("%s: pruned the prompt before embedding %d -> %d tokens", adapter.family, length, layout.width)
    return PrunedPrefill(kwargs, layout, ActivePruning(layout=layout, full_length=length,
                                                       attention_mask=kwargs["attention_mask"]))


def filler_token(model: nn.Module) -> int:
    """A text token for pad slots (masked out; it only must not be a visual placeholder)."""
    for config in (getattr(model, "generation_config", None), model.config, getattr(model.config, "text_config", None)):
        pad = getattr(config, "pad_token_id", None)
        if isinstance(pad, int):
            return pad
    return 0
