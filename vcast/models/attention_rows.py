"""A few rows of a decoder layer's attention, without materialising the ``S x S`` map.

Attention-based in-LLM methods (FastV, PDrop, FlashVID's in-LLM step, FrameFusion, SparseVLM,
PruneVid) score visual tokens by the attention *a few query rows* pay them at one layer: the last
token, the text tokens after the video. Their official codes switch the model to eager attention
and ask every layer (or the chosen one) for its full weights, which costs ``H * S * S`` floats.
Here the layer keeps its SDPA / FlashAttention kernel; from the layer's own input (captured by a
pre-hook on its attention module) we recompute the chosen rows' queries and all keys exactly as
the module does (projections, Qwen3-VL's per-head ``q_norm`` / ``k_norm``, the rotary embedding of
the model's own module, grouped KV heads) and take the softmax over every key the row may see
(causal, padding masked), in float32, in chunks of heads.

Memory: ``H * R * S`` scores for ``R`` rows, in chunks of at most ``CHUNK_ELEMENTS``.
"""

from __future__ import annotations

import sys
from typing import Optional

import torch
from torch import nn

CHUNK_ELEMENTS = 1 << 26


def _rotary(module: nn.Module):
    """The rotary function of the module's own modeling file (Qwen2's 1-D or Qwen3-VL's MRoPE)."""
    return sys.modules[type(module).__module__].apply_rotary_pos_emb


def _heads(module: nn.Module, projected: torch.Tensor, norm: Optional[nn.Module]) -> torch.Tensor:
    """``[B, N, heads * d]`` -> ``[B, heads, N, d]``, through the per-head norm when the model has one."""
    batch, length, _ = projected.shape
    states = projected.view(batch, length, -1, module.head_dim)
    if norm is not None:
        states = norm(states)
    return states.transpose(1, 2)


def attention_rows(module: nn.Module, hidden_states: torch.Tensor, position_embeddings: tuple[torch.Tensor, torch.Tensor],
                   rows: torch.Tensor, key_mask: Optional[torch.Tensor] = None, *, rotary: bool = True,
                   causal: bool = True) -> torch.Tensor:
    """Softmax attention of query positions ``rows`` over all keys, as ``module`` computes it.

    Args:
        module: a decoder layer's self-attention (``q_proj``, ``k_proj``, ``head_dim``,
            ``scaling``, ``num_key_value_groups``; optional ``q_norm`` / ``k_norm``).
        hidden_states: ``[B, S, C]``, the module's input (after the layer's input norm).
        position_embeddings: the ``(cos, sin)`` pair the module receives, each ``[B, S, d]``.
        rows: LongTensor ``[R]`` of query positions (the same for every batch row).
        key_mask: BoolTensor ``[B, S]``, False for padding keys, or None.
        rotary: apply the rotary embedding (False: PruneVid's pre-RoPE scores; after any q/k norm).
        causal: mask keys after the row (False: every key, as PruneVid's scores do).
    Returns:
        float32 ``[B, H, R, S]``: each row sums to 1 over the keys it may see (``j <= row`` when
        ``causal``, not padding); the rest is 0.
    """
    batch, length, _ = hidden_states.shape
    rows = rows.to(hidden_states.device)
    cos, sin = position_embeddings
    queries = _heads(module, module.q_proj(hidden_states.index_select(1, rows)), getattr(module, "q_norm", None))
    keys = _heads(module, module.k_proj(hidden_states), getattr(module, "k_norm", None))
    if rotary:
        rotate = _rotary(module)
        queries, _ = rotate(queries, queries, cos.index_select(1, rows), sin.index_select(1, rows))
        _, keys = rotate(keys, keys, cos, sin)
    groups = module.num_key_value_groups
    heads = queries.shape[1]
    visible = torch.arange(length, device=rows.device)[None, :] <= rows[:, None]  # [R, S] causal
    if not causal:
        visible = torch.ones_like(visible)
    visible = visible[None, None].expand(batch, 1, -1, -1)
    if key_mask is not None:
        visible = visible & key_mask.to(rows.device).bool()[:, None, None, :]
    out = torch.empty(batch, heads, rows.numel(), length, dtype=torch.float32, device=hidden_states.device)
    step = max(1, CHUNK_ELEMENTS // max(1, batch * rows.numel() * length))
    for start in range(0, heads, step):
        stop = min(heads, start + step)
        kv_heads = torch.arange(start, stop, device=rows.device) // groups  # grouped-query attention
        scores = torch.matmul(queries[:, start:stop].float(), keys.index_select(1, kv_heads).float().transpose(-1, -2))
        scores = (scores * module.scaling).masked_fill(~visible, float("-inf"))
        out[:, start:stop] = scores.softmax(dim=-1).nan_to_num(0.0)
    return out
