"""A few rows of a decoder layer's attention, without materialising the ``S x S`` map.

Attention-based in-LLM methods (FastV, PDrop, FlashVID's in-LLM step, FrameFusion, SparseVLM,
PruneVid) score visual tokens by the attention *a few query rows* pay them at one layer: the last
token, the text tokens after the video. Their official codes switch the model to eager attention
and ask every layer (or the chosen one) for its full weights, which costs ``H * S * S`` floats.
Here the layer keeps its SDPA / FlashAttention kernel; from the layer's own input (captured by a
pre-hook on its attention module) we recompute the chosen rows' queries and all keys exactly as
the module does (projections, Qwen3-VL's per-head ``q_norm`` / ``k_norm``, the rotary embedding of
the model's own module, grouped KV heads; a gated ``q_proj`` that yields each head's query and
output gate side by side, as a hybrid model's softmax layers have, gives its query halves) and
take the softmax over every key the row may see (causal, padding masked), in float32, in chunks of
heads.

``score_dtype="model"`` instead yields the probabilities the way HF's eager kernel does in the
model's dtype (what the official codes read): the queries projected for every token (the
layer's own GEMM shape) and the rows picked afterwards, ``q k^T`` and its scaling in the model's
dtype, the softmax in float32, the result rounded to the model's dtype. Measured on CPU against
the eager kernel's weights: docs/fidelity.md, section "Attention rows in the model's dtype". In
bf16 the rows are the kernel's bits; in float32 one row alone is not (the one-row ``q k^T`` is
another GEMM shape than the kernel's ``S x S`` product and its float32 sums round differently
in the last bits), though FastV's kept sets stayed the same. On a GPU the bf16 one-row product
may likewise round differently where the BLAS picks another reduction order (not measured: no
GPU here). ``scores="eager"`` reads the kernel's own weights and has no such effect.

Memory: ``H * R * S`` scores for ``R`` rows, in chunks of at most ``CHUNK_ELEMENTS``.
"""

from __future__ import annotations

import math
import sys
from typing import Optional

import torch
from torch import nn

CHUNK_ELEMENTS = 1 << 26


def _rotary(module: nn.Module):
    """The rotary function of the module's own modeling file (Qwen2's 1-D or Qwen3-VL's MRoPE)."""
    return sys.modules[type(module).__module__].apply_rotary_pos_emb


def _query_heads(module: nn.Module) -> int:
    """The module's query heads (its key-value heads times the groups)."""
    return module.k_proj.out_features // module.head_dim * module.num_key_value_groups


def _gated(module: nn.Module) -> bool:
    """Whether ``q_proj`` yields ``[query | gate]`` per head (twice the query width), the gated
    attention of a hybrid model's softmax layers: the query is each head's first half."""
    return module.q_proj.out_features == 2 * _query_heads(module) * module.head_dim


def _heads(module: nn.Module, projected: torch.Tensor, norm: Optional[nn.Module], gated: bool = False) -> torch.Tensor:
    """``[B, N, heads * d]`` -> ``[B, heads, N, d]``, through the per-head norm when the model has one
    (``gated``: ``[B, N, heads * 2d]``, each head's query half taken first, as the module does)."""
    batch, length, _ = projected.shape
    if gated:
        projected = projected.view(batch, length, -1, 2 * module.head_dim)[..., : module.head_dim]
    states = projected.view(batch, length, -1, module.head_dim)
    if norm is not None:
        states = norm(states)
    return states.transpose(1, 2)


def attention_rows(module: nn.Module, hidden_states: torch.Tensor, position_embeddings: tuple[torch.Tensor, torch.Tensor],
                   rows: torch.Tensor, key_mask: Optional[torch.Tensor] = None, *, rotary: bool = True,
                   causal: bool = True, score_dtype: str = "float32", scale: str = "multiply") -> torch.Tensor:
    """Softmax attention of query positions ``rows`` over all keys, as ``module`` computes it.

    Args:
        module: a decoder layer's self-attention (``q_proj``, ``k_proj``, ``head_dim``,
            ``scaling``, ``num_key_value_groups``; optional ``q_norm`` / ``k_norm``; a ``q_proj``
            twice the query width is read as gated: ``[query | gate]`` per head).
        hidden_states: ``[B, S, C]``, the module's input (after the layer's input norm).
        position_embeddings: the ``(cos, sin)`` pair the module receives, each ``[B, S, d]``.
        rows: LongTensor ``[R]`` of query positions (the same for every batch row).
        key_mask: BoolTensor ``[B, S]``, False for padding keys, or None.
        rotary: apply the rotary embedding (False: PruneVid's pre-RoPE scores; after any q/k norm).
        causal: mask keys after the row (False: every key, as PruneVid's scores do).
        score_dtype: ``"float32"`` (logits and softmax in float32) or ``"model"`` (``q k^T`` and
            its scaling in the model's dtype, float32 softmax rounded to the model's dtype: the
            eager kernel's weights; see the module docstring).
        scale: ``"multiply"`` by ``module.scaling`` (HF's eager kernel) or ``"divide"`` by
            ``sqrt(head_dim)`` (PDrop's manual scores).
    Returns:
        ``[B, H, R, S]`` (float32, or the model's dtype for ``score_dtype="model"``): each row
        sums to 1 over the keys it may see (``j <= row`` when ``causal``, not padding); the rest
        is 0.
    """
    if score_dtype not in ("float32", "model"):
        raise ValueError(f"score_dtype must be 'float32' or 'model', got {score_dtype!r}")
    if scale not in ("multiply", "divide"):
        raise ValueError(f"scale must be 'multiply' or 'divide', got {scale!r}")
    in_model_dtype = score_dtype == "model"
    batch, length, _ = hidden_states.shape
    rows = rows.to(hidden_states.device)
    cos, sin = position_embeddings
    if in_model_dtype:  # the layer's own GEMM shape (all tokens), then the rows: no shape-dependent rounding
        projected = module.q_proj(hidden_states).index_select(1, rows)
    else:
        projected = module.q_proj(hidden_states.index_select(1, rows))
    queries = _heads(module, projected, getattr(module, "q_norm", None), gated=_gated(module))
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
    out_dtype = queries.dtype if in_model_dtype else torch.float32
    out = torch.empty(batch, heads, rows.numel(), length, dtype=out_dtype, device=hidden_states.device)
    step = max(1, CHUNK_ELEMENTS // max(1, batch * rows.numel() * length))
    for start in range(0, heads, step):
        stop = min(heads, start + step)
        kv_heads = torch.arange(start, stop, device=rows.device) // groups  # grouped-query attention
        chunk_queries, chunk_keys = queries[:, start:stop], keys.index_select(1, kv_heads)
        if not in_model_dtype:
            chunk_queries, chunk_keys = chunk_queries.float(), chunk_keys.float()
        scores = torch.matmul(chunk_queries, chunk_keys.transpose(-1, -2))
        scores = scores * module.scaling if scale == "multiply" else scores / math.sqrt(module.head_dim)
        scores = scores.masked_fill(~visible, float("-inf"))
        # the eager kernel's softmax: float32 whatever the logits' dtype, then the result's dtype
        out[:, start:stop] = scores.softmax(dim=-1, dtype=torch.float32).nan_to_num(0.0).to(out_dtype)
    return out
