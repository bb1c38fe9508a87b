"""FlashVID's vision side, ``flashvid_merge``: attention/diversity token selection plus tree-based
spatio-temporal merging before the LLM.

Paper: "FlashVID: Efficient Video Large Language Models via Training-free Tree-based
Spatiotemporal Token Merging" (Fan et al., ICLR 2026). Official code: Fanziyang-v/FlashVID@1d37422
(the mirror's HEAD is that commit): ``flashvid/utils.py`` L23-349 and ``token_selection.py`` for
the vision side (``fastv_prune`` L352-406 is the in-LLM step of :mod:`baselines.flashvid`).

Two registered names, each with ``variant="paper"`` (default) and ``variant="official"``:

* ``flashvid_merge`` (this package; an ordinary compressor, model input ``vision_attention``): the
  vision side.
* ``flashvid`` (:mod:`baselines.flashvid`, an in-LLM planner): ``flashvid_merge`` (same variant)
  before the LLM, then one drop before layer ``K`` keeping the ``ceil(N * llm_retention)`` video
  tokens most attended by the last prompt token at layer ``K - 1``.

Modules: :mod:`baselines.flashvid_merge.method` (the registration), :mod:`baselines.flashvid_merge.paper`
(the algorithm of ``variant="paper"``, with its deviations from the release),
:mod:`baselines.flashvid_merge.official` (the release) and :mod:`baselines.flashvid_merge.params`
(the parameter checks and decimal counts both FlashVID registrations use).

``variant="official"``: the release bit for bit, in the input dtype where it computes in it
(:mod:`baselines.flashvid_merge.official`, whose header lists every step, dtype and quirk): the tree
merge keeps the release's count (a root holds ``sum / (1 + direct children)``, e.g. 1.5 times the
mean for a 3-frame chain), single-frame segments cluster all ``P`` tokens, ``attn_div_v2`` does
not mask picked tokens, float budgets (``ceil`` of float products), DPC-kNN noise
``torch.rand * 1e-6`` drawn from ``torch.Generator().manual_seed(seed)`` (``seed = 0``). Output
tokens in ``frames``' dtype. Measured against the release loaded at run time on CPU, one thread
(a comparison outside the project; where the release raises, a ValueError here). Measured
agreement with the release: docs/fidelity.md, section "FlashVID (vision side)". The one thing
:class:`vcast.Selection` cannot hold: the release can put two outputs at one index (a single-frame
segment's cluster centre on an ADTS token, which happens in nearly every single-frame segment;
``attn_div_v2`` picking a token twice). Here the last in the release's order is kept (the value its
Qwen3-VL code writes into that slot); the release's sequence holds one more token there (the slot
twice on Qwen3-VL, the other token beside it on LLaVA). The comparison applies the same rule to the
release's output (how often such an index occurs: the same section).

Defaults (official config and scripts, both variants): ``alpha = 0.7``, ``expansion = 1.25``,
``segment_threshold = 0.9``, ``temporal_threshold = 0.8``; the compressor's own defaults are the
wrapper's (``min_segment_num = 8``, ``selection = "attn_div_v2"``, the LLaVA scripts). (The
planner ``flashvid`` picks its values per model family, :mod:`baselines.flashvid`.)

Model input: ``vision_attention`` [T, P] (supplied by the adapters in :mod:`vcast.models`), the
attention each token received in the vision encoder's last layer, averaged over heads and
queries, pooled onto the LLM token grid: the official LLaVA SigLIP column mean, and the official
Qwen3-VL per-temporal-patch softmax averaged over each 2x2 merge unit (the release computes both
in the model's dtype; ``official`` upcasts what it is given, as the release does, so bf16 values
pass through exactly).
"""
