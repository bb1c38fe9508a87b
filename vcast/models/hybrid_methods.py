"""Which methods a hybrid language model cannot host, and why: one answer for ``attach`` and the sweep.

A family with ``hybrid_attention`` (:class:`vcast.families.family.Family`) has decoder layers whose
token mixer is not softmax attention: linear attention (Gated DeltaNet) that carries a recurrent
state and a short-convolution window through the sequence instead of a key-value cache.

Every method that prunes *before* the language model runs on such a model unchanged: the hooks
drop or merge video tokens before the first layer, so each linear-attention layer builds its
state from the pruned sequence at prefill and decoding continues from that state, and the kept
tokens keep their original MRoPE positions in the softmax layers. Left padding is safe too: the
linear-attention layers zero the padded slots' inputs (the 2-D mask), so a pad adds nothing to
the state.

The **in-LLM methods** (:func:`vcast.registry.is_llm_method`: FastV, PDrop, SparseVLM, FlashVID,
HoliTom's in-LLM merge, PruneVid, FrameFusion) cannot, for two reasons:

1. Each of their stages chooses what to keep by the softmax attention of a decoder layer (the
   layer before the drop, or PDrop's the one after): the last / text tokens' attention rows over
   the video tokens. Three of every four layers of such a model are linear attention, which has
   no attention map: the recurrence mixes tokens through a decayed state, and there is no row of
   weights per key to read. The methods' drop layers (FastV's 2, PDrop's and SparseVLM's several,
   PruneVid's 10 of 32, FlashVID's ...) fall on such layers in general.
2. The machinery that carries a drop out between layers (:mod:`vcast.models.layer_drops`) is
   written for softmax layers: it hands every later layer a 4-D causal mask, reads
   ``layer.self_attn``'s projections for the scores, and numbers each layer's decode step from
   that layer's KV-cache length; a linear-attention layer takes a 2-D padding mask, has
   ``linear_attn`` instead, and keeps no per-token cache.

A drop itself would be coherent (the layers after it, linear ones included, would simply build
their states from the kept tokens, and the layers before it keep theirs over every token, as a
softmax layer's KV cache does). So these methods are refused with this reason rather than run on
scores the model does not have.
"""

from __future__ import annotations

from typing import Any, Optional

from vcast.families import get_family
from vcast.registry import is_llm_method


def llm_method_refusal(family: Any, method: str) -> Optional[str]:
    """Why ``method`` cannot run on models of ``family`` (a :class:`~vcast.families.family.Family`
    or a family name), or None when it can. Only in-LLM methods on hybrid-attention families are
    refused; an unknown method raises ``ValueError`` (:func:`vcast.registry.get_method`)."""
    if isinstance(family, str):
        family = get_family(family)
    if not is_llm_method(method) or not family.hybrid_attention:
        return None
    return (f"method {method!r} runs inside the language model, which {family.display} cannot host: most of its "
            "layers are linear attention (Gated DeltaNet), with no attention scores to choose by; prune before the "
            "language model instead")
