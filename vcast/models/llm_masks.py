"""Attention masks for the layers after an in-LLM drop, in the format each kernel expects.

Transformers builds one mask per forward for the layer-0 sequence and hands it to every layer:
``None`` (SDPA / FlashAttention without padding: the kernel's own causal flag), a 4-D
``[B, 1, q, kv]`` boolean (SDPA) or additive float (eager) mask, or a 2-D ``[B, kv]`` padding
mask (FlashAttention-2). After a drop, the layers from ``K`` on see a shorter sequence: their
mask is the layer-0 mask with the kept columns (and rows) picked out, and pad slots of a batch
whose rows kept different numbers of tokens masked as keys.

These are the softmax layers' masks. A hybrid model's linear-attention layers take their own 2-D
padding mask (None without pads), which :mod:`vcast.models.layer_drops` gives them after a drop
(the kept slots), and no mask at a one-token decoding step.
"""

from __future__ import annotations

from typing import Optional

import torch

from vcast.models.layout import SequenceLayout

SUPPORTED = ("eager", "sdpa", "flash_attention_2", "flash_attention_3")


def check_implementation(implementation: str) -> None:
    if implementation not in SUPPORTED:
        raise ValueError(f"in-LLM token dropping supports attn_implementation in {SUPPORTED}, "
                         f"got {implementation!r}; load the model with attn_implementation='sdpa'")


def _is_flash(implementation: str) -> bool:
    return implementation.startswith("flash_attention")


def _from_bool(allowed: torch.Tensor, implementation: str, dtype: torch.dtype) -> torch.Tensor:
    """A 4-D boolean "may attend" mask in the kernel's format (additive float for eager)."""
    if implementation == "eager":
        return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill(
            ~allowed, torch.finfo(dtype).min)
    return allowed


def _mask_keys(mask: torch.Tensor, keys_valid: torch.Tensor) -> torch.Tensor:
    """Mask pad-slot keys of a 4-D mask (``keys_valid`` [B, kv])."""
    blocked = ~keys_valid[:, None, None, :].to(mask.device)
    if mask.dtype == torch.bool:
        return mask & ~blocked
    return mask.masked_fill(blocked, torch.finfo(mask.dtype).min)


def prefill_mask(mask: Optional[torch.Tensor], layout: SequenceLayout, implementation: str,
                 dtype: torch.dtype) -> Optional[torch.Tensor]:
    """The mask for the layers after a prefill drop that re-laid the sequence by ``layout``.

    Args:
        mask: the mask the dropping layer received (see the module docstring).
        layout: the drop's re-layout (``[B, S']`` index into the ``S`` columns before it).
        implementation: the model's ``attn_implementation``.
        dtype: the hidden states' dtype (eager masks are additive in it).
    """
    valid = layout.valid
    if mask is None:
        if not layout.needs_mask:
            return None
        if _is_flash(implementation):
            return valid.long()
        slots = torch.arange(layout.width, device=valid.device)
        causal = slots[None, :] <= slots[:, None]
        allowed = causal[None, None] & valid[:, None, None, :]
        allowed = allowed | (torch.eye(layout.width, dtype=torch.bool, device=valid.device)[None, None]
                             & ~valid[:, None, :, None])  # pad rows see themselves: no all-masked row
        return _from_bool(allowed, implementation, dtype)
    if mask.dim() == 2:
        return layout.gather(mask, dim=1) * valid.to(mask.device, mask.dtype)
    if mask.dim() != 4:
        raise ValueError(f"unexpected attention mask of shape {tuple(mask.shape)} at an in-LLM drop")
    index = layout.index.to(mask.device)
    batch, heads, width = mask.shape[0], mask.shape[1], index.shape[1]
    rows = mask.gather(2, index[:, None, :, None].expand(batch, heads, width, mask.shape[3]))
    picked = rows.gather(3, index[:, None, None, :].expand(batch, heads, width, width))
    picked = _mask_keys(picked, valid)
    own = torch.eye(width, dtype=torch.bool, device=mask.device)[None, None] & ~valid.to(mask.device)[:, None, :, None]
    if picked.dtype == torch.bool:
        return picked | own
    return picked.masked_fill(own, 0.0)


def decode_mask(mask: Optional[torch.Tensor], columns: torch.Tensor, keys_valid: torch.Tensor, queries: int,
                implementation: str, dtype: torch.dtype) -> Optional[torch.Tensor]:
    """The mask of a decoding step for a layer whose cache holds layer-0 columns ``columns``.

    Args:
        mask: the step's layer-0 mask (``kv0`` columns), or None.
        columns: LongTensor ``[B, kv]``: the layer-0 column of each of the layer's cache slots,
            new tokens included.
        keys_valid: BoolTensor ``[B, kv]``: False for the layer's pad slots.
        queries: tokens of this step.
    """
    if mask is None:
        if bool(keys_valid.all()):
            return None
        if _is_flash(implementation):
            return keys_valid.long()
        allowed = keys_valid[:, None, None, :].expand(-1, 1, queries, -1)
        return _from_bool(allowed, implementation, dtype)
    columns = columns.to(mask.device)
    if mask.dim() == 2:
        return mask.gather(1, columns) * keys_valid.to(mask.device, mask.dtype)
    batch, heads, rows = mask.shape[:3]
    picked = mask.gather(3, columns[:, None, None, :].expand(batch, heads, rows, columns.shape[1]))
    return _mask_keys(picked, keys_valid)
