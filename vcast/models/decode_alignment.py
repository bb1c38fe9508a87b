"""Decoding after a pruned prefill: the step's mask and positions lined up with the pruned cache.

``generate`` keeps its own attention mask and position ids full-length (its output keeps the
whole prompt, and the new tokens' positions continue from the unpruned prompt). The cache holds
only the kept tokens, so each decoding step's mask is the pruned prefill's mask followed by the
columns of the new tokens, and the adapter maps the positions (MRoPE: the text row counts the
pruned slots; the others continue from the unpruned maximum).
"""

from __future__ import annotations

from typing import Any

import torch

from vcast.models.adapter import ActivePruning, Adapter


def realign_decode(adapter: Adapter, kwargs: dict[str, Any], active: ActivePruning) -> dict[str, Any]:
    """The language model's keyword arguments of one decoding step, its ``attention_mask``
    (``[B, full_length + new]`` from ``generate``) become ``[B, kept + new]`` and its positions the
    adapter's; ValueError when the mask is not 2-D or does not continue this pruned prompt."""
    kwargs = dict(kwargs)
    cache = kwargs["past_key_values"]
    embeds = kwargs.get("inputs_embeds")
    steps = embeds.shape[1] if embeds is not None else 1
    new_tokens = cache.get_seq_length() - active.layout.width + steps
    attention_mask = kwargs.get("attention_mask")
    if attention_mask is not None:
        if not isinstance(attention_mask, torch.Tensor) or attention_mask.dim() != 2:
            raise ValueError(f"{adapter.family}: decoding after a pruned prefill needs a 2-D attention "
                             f"mask, got {type(attention_mask).__name__}")
        if attention_mask.shape[1] != active.full_length + new_tokens:
            raise ValueError(
                f"{adapter.family}: the attention mask has {attention_mask.shape[1]} columns but the "
                f"cache continues a pruned prompt of {active.full_length} tokens plus {new_tokens} new ones; "
                "was the cache built by another call?"
            )
        head = (active.attention_mask if active.attention_mask is not None
                else attention_mask.new_ones(attention_mask.shape[0], active.layout.width))
        kwargs["attention_mask"] = torch.cat([head.to(attention_mask), attention_mask[:, active.full_length :]], 1)
    elif active.attention_mask is not None:
        tail = active.attention_mask.new_ones(active.attention_mask.shape[0], new_tokens)
        kwargs["attention_mask"] = torch.cat([active.attention_mask, tail], 1)
    kwargs["position_ids"] = adapter.decode_positions(kwargs.get("position_ids"), active)
    return kwargs
