"""The saliency FastVID's Qwen2.5-VL release ranks tokens by: the attention of each temporal
patch's *mean query* to its merge units' *mean keys*, in the last ViT block.

Released in LunarShen/FastVID @a40a109,
``fastvid_qwen25vl/lmms-eval/lmms_eval/models/qwenvlutils/modeling_qwen2_5_vl.py``:
``Qwen2_5_VLVisionFlashAttention2.forward`` L193-203 computes it in the last block
(``layer_num == self.depth - 1``, L583-584; block 31 of the released 32, one of
``fullatt_block_indexes``, so it attends within each temporal patch), and the vision tower's
``forward`` L589-594 puts it back in raster order with the merger's ``reverse_indices``. The
release's ``vision_attention`` is therefore not the column mean the other methods read
(:func:`vcast.models.vision_probe.column_mean_attention`, the mean over queries of each patch's
softmax row, pooled over the merge unit afterwards, which FlashVID's Qwen2.5-VL code reads), but,
per temporal patch ``t`` and head ``h``:

* ``q_th`` = the mean of the block's rotated queries over the temporal patch's ``n = 4 P`` patches;
* ``k_thu`` = the mean of the rotated keys of merge unit ``u``'s 4 patches (4 consecutive rows of
  the encoder's sequence);
* ``a_thu = softmax_u(q_th . k_thu / sqrt(d))`` over the ``P`` units (float32 softmax, cast to the
  model dtype), then the mean over heads.

Every step runs in the dtype and with the tensor shapes the release uses (bf16 for the released
model: the two means, the product, the division by ``math.sqrt(d)`` and the head mean are rounded
to bf16), so the values are the release's bits given the same rotated queries and keys.

Adapter contract (not this package's): the queries and keys are those the last block computes
(``qkv`` then the model's own ``apply_rotary_pos_emb_vision``), for the rows of one video, in the
encoder's own (window-attention) order; the result is in that order's unit order, and the
release's raster order is ``result.reshape(-1)[argsort(window_index)].reshape(T, P)`` (the
merger's ``reverse_indices``). The release assumes one video per call (``grid_thw[0]``).

Agreement: bit-equal to the release's attention forward and reordering on random last blocks
(fp32 and bf16; a comparison outside the project, docs/fidelity.md).

Registers nothing; an adapter that feeds ``variant="official", version="qwen2_5_vl"`` calls
:func:`mean_query_saliency`.
"""

from __future__ import annotations

import math

import torch

MERGE_UNIT = 4  # patches per LLM token (2 x 2 spatial merge)


def mean_query_saliency(queries: torch.Tensor, keys: torch.Tensor, num_frames: int,
                        unit: int = MERGE_UNIT) -> torch.Tensor:
    """FastVID's Qwen2.5-VL saliency of one video, in the encoder's row order.

    Args:
        queries, keys: ``[N, H, d]`` rotated queries and keys of the last ViT block (``N = T n``
            rows, each temporal patch's ``n`` rows contiguous, merge units as ``unit`` consecutive
            rows), in the model's dtype.
        num_frames: ``T``, the temporal patches.
        unit: patches per merge unit (4).
    Returns:
        ``[T, n // unit]`` in the queries' dtype, units in the encoder's order.
    """
    rows, heads, head_dim = queries.shape
    if keys.shape != queries.shape:
        raise ValueError(f"queries and keys must have one shape, got {tuple(queries.shape)} and {tuple(keys.shape)}")
    if num_frames < 1 or rows % num_frames or (rows // num_frames) % unit:
        raise ValueError(f"{rows} rows do not split into {num_frames} temporal patches of whole {unit}-patch units")
    per_frame = rows // num_frames
    by_head_q = queries.transpose(0, 1).view(heads, num_frames, per_frame, head_dim)  # [H, T, n, d]
    by_head_k = keys.transpose(0, 1).view(heads, num_frames, per_frame // unit, unit, head_dim)
    mean_query = by_head_q.mean(-2, keepdim=True)  # [H, T, 1, d]
    unit_keys = by_head_k.mean(-2)  # [H, T, P, d]
    logits = torch.matmul(mean_query, unit_keys.transpose(-2, -1)) / math.sqrt(head_dim)  # [H, T, 1, P]
    weights = torch.softmax(logits, dim=-1, dtype=torch.float32).to(mean_query.dtype)
    return weights.mean(2).mean(0)  # [T, P]
