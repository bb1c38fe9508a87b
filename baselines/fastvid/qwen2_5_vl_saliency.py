"""The saliency FastVID's Qwen2.5-VL release ranks tokens by: the attention of each temporal
patch's *mean query* to its merge units' *mean keys*, in the last ViT block.

Released in LunarShen/FastVID @a40a109,
``fastvid_qwen25vl/lmms-eval/lmms_eval/models/qwenvlutils/modeling_qwen2_5_vl.py``:
``Qwen2_5_VLVisionFlashAttention2.forward`` L193-203 computes it in the last block
(``layer_num == self.depth - 1``, L583-584; block 31 of the released 32, one of
``fullatt_block_indexes``, so it attends within each temporal patch), and the vision tower's
``forward`` L589-594 puts it back in raster order with the merger's ``reverse_indices``. The
release's saliency is therefore not the column mean the other methods read as ``vision_attention``
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

The computation lives in vcast (:func:`vcast.models.vision_probe.mean_query_attention`, the model
input ``vision_mean_query_attention``), since the model adapters compute it and vcast does not
depend on this package; :func:`mean_query_saliency` is that function. Under
``vcast.models.attach`` the Qwen2.5-VL family's adapter (``mean_query_scores``) runs it on the last
block's own rotated queries and keys, per ``grid_thw`` row, in the encoder's (window-attention)
order, then reorders the units with ``argsort(window_index)`` as the release does (the release
assumes one video per call, ``grid_thw[0]``; per row is the same for one). FastVID
``variant="official", version="qwen2_5_vl"`` declares that input and ranks by it; the adapters of
other families do not compute it, and ``attach`` refuses the combination there, naming the family.

Compared with the release's attention forward and reordering on random last blocks (fp32 and
bf16; a comparison outside the project). Measured agreement with the release: docs/fidelity.md,
section "Qwen2.5-VL: what each release runs there".

Registers nothing.
"""

from __future__ import annotations

from typing import Any

import torch

from vcast.models.vision_probe import MEAN_QUERY_ATTENTION, MERGE_UNIT, mean_query_attention

__all__ = ["MEAN_QUERY_ATTENTION", "MERGE_UNIT", "mean_query_saliency", "saliency_input"]

mean_query_saliency = mean_query_attention  # ``(queries [N, H, d], keys [N, H, d], T) -> [T, P]``


def saliency_input(value: Any, num_frames: int, tokens_per_frame: int, device: torch.device,
                   given_column_means: bool) -> torch.Tensor:
    """The ``vision_mean_query_attention`` input ``[T, P]`` on ``device``, in its own dtype (the
    release ranks by the model-dtype values); ValueError naming it when it is missing (saying so
    when the column-mean ``vision_attention`` was given instead), misshaped, not float or not finite."""
    if value is None:
        instead = (" (vision_attention was given: the column mean, which is not this release's saliency)"
                   if given_column_means else "")
        raise ValueError(f"fastvid official version 'qwen2_5_vl' ranks by {MEAN_QUERY_ATTENTION} [T, P], the "
                         "release's mean-query saliency (the Qwen2.5-VL adapter supplies it under "
                         f"vcast.models.attach); got None{instead}")
    if not isinstance(value, torch.Tensor) or not value.is_floating_point():
        dtype = f" of dtype {value.dtype}" if isinstance(value, torch.Tensor) else ""
        raise ValueError(f"{MEAN_QUERY_ATTENTION} must be a float tensor [T, P], got {type(value).__name__}{dtype}")
    if tuple(value.shape) != (num_frames, tokens_per_frame):
        raise ValueError(f"{MEAN_QUERY_ATTENTION} must be [T, P] = [{num_frames}, {tokens_per_frame}] like frames, "
                         f"got shape {tuple(value.shape)}")
    if not bool(torch.isfinite(value).all()):
        raise ValueError(f"{MEAN_QUERY_ATTENTION} contains non-finite values (NaN or Inf)")
    return value.to(device)
