"""Qwen3.5's adapter: the shared Qwen layout of :mod:`vcast.models.mrope_adapter`, unchanged.

Qwen3.5 (dense and MoE) puts a video in the prompt exactly as Qwen3-VL does (its processor *is*
``Qwen3VLProcessor``: ``<t seconds><vision_start>`` + ``P`` video tokens + ``<vision_end>`` per
temporal patch), numbers it with the same ``get_rope_index`` (4-row ids: text row, then t, h, w),
encodes it with Qwen3-VL's ViT, and ``generate`` hands the encoder outputs to the prefill
precomputed, so the hooks prune before anything is embedded. What differs is handled as follows:

- **No DeepStack**: the encoder outputs carry no ``deepstack_features`` and the language model
  takes no ``visual_pos_masks``; the shared re-laying of both is a no-op when they are absent.
- **Linear-attention layers** (three Gated DeltaNet layers per softmax layer): nothing to re-lay.
  The pruned prompt reaches every layer; at prefill each DeltaNet layer builds its recurrent state
  and its convolution window from the pruned sequence, and decoding continues from them (a
  one-token step reads no mask and no positions there). Left padding: the text model gives these
  layers the 2-D padding mask of the pruned batch (the hooks' re-laid mask), and each zeroes its
  padded slots' inputs before the projections; with no bias anywhere on that path a zero input adds
  nothing to the convolution or the state, so a padded row computes what it computes alone.
  The decode-time cache length (``generate``'s bookkeeping and the hooks' mask re-alignment) is
  read from the first softmax layer's KV cache, which holds the pruned prompt as in Qwen3-VL.
- **Positions**: only the softmax layers use them; kept tokens keep their original MRoPE
  coordinates exactly as in Qwen3-VL (partial rotary on a quarter of the head dim changes nothing
  for the hooks).
- **In-LLM methods** run when every stage reads its scores at a softmax layer and drops after the
  first one (layer 3); the layer hooks give the linear layers after a drop the kept tokens and
  their 2-D padding mask (:mod:`vcast.models.layer_drops`). The others are refused with the stage,
  its layer and the values that work, before any hook is placed (:mod:`vcast.models.hybrid_methods`).
"""

from __future__ import annotations

from vcast.models.mrope_adapter import MRopeAdapter


class Qwen35Adapter(MRopeAdapter):
    """The shared Qwen adapter as it is (see the module docstring)."""
