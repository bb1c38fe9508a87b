"""DyCoke's temporal token merging (TTM), a pre-LLM pruning step; variants paper | official | vidcom2_qwen.

Paper: "DyCoke: Dynamic Compression of Tokens for Fast Video Large Language Models", CVPR 2025.
Official code: KD-TAO/DyCoke@dd74634 ``llava/model/llava_arch.py`` ``dycole_ttm`` L35-91 (applied at
L384-396; defaults in the bundled ``lmms_eval/models/llava_onevision.py`` L88-93). Qwen3-VL port:
xuyang-liu16/VidCom2 branch ``qwen`` @a85d485 ``token_compressor/dycoke/core.py`` L9-45 +
``temporal_token_merging.py`` L23-140 (called from ``models/qwen3_vl.py`` L139-169).
Only TTM is implemented, in every variant: DyCoke's second stage (dynamic KV-cache pruning while
decoding, ``llava/model/language_model/modeling_qwen2.py`` ``dycoke_pruning``) is NOT implemented
here. It never touches prefill, so single-token answers are unaffected; longer answers decode over
the full TTM cache.

Algorithm on ``frames`` [T, P, D] (cosine of the same spatial position in two frames):

* pairs (i, i+1), i even: frame i is kept whole; frame i+1 keeps its ``n`` tokens least similar
  to frame i;
* quads: for i = 0, 4, ... < T - 4, frame i+2 is re-reduced against frame i (original
  features), keeping its ``n`` least similar tokens;
* ``n = (1 - K) * P`` truncated, where ``K`` is DyCoke's pruned share of a reduced frame.
Pure pruning: the kept tokens are the input's own (no averaging, despite the name).

Variants (``variant=``; ``k=None`` is resolved per variant):

* ``"paper"`` (default; unchanged; :mod:`baselines.dycoke.paper`): ``K = 1 - r`` when ``k`` is
  None (``n = floor(r * P)``, the VidCom2 mapping), ``n`` from the decimal values (``K = 0.9,
  P = 10`` gives 1 where binary floats give 0); cosine ``a.b / (|a| |b| + eps)`` in float32
  whatever the input dtype (bf16 and float32 give the same result); ties to the lower token index
  (stable sort); positions ascending.
  Deliberate deviations from the release: odd T reduces the last frame against frame T-2 (the
  video's end stays visible, for ``n`` tokens) where the release drops it; T <= 4 skips the quad
  step (the release raises); T = 1 keeps the frame whole.
* ``"official"`` (:mod:`baselines.dycoke.official`): ``dycole_ttm`` at dd74634, bit for bit on CPU
  in float32 and bf16 (arithmetic in the input dtype, see :mod:`baselines.dycoke.release_ttm`):
  pairs ranked by ``F.cosine_similarity(F.normalize(.), F.normalize(.))``, quads by
  ``F.cosine_similarity`` of the raw features, each frame's 1-D row through
  ``topk(n, largest=False)`` (its tie order), ``n = int((1 - K) * P)`` in binary floats (K = 0.7,
  P = 196: 58), **odd T drops the last frame** (0 tokens; the paper variant reduces it instead).
  Default ``k=None`` -> K = 0.7, the release's lmms-eval default (``llava_onevision.py`` L88-93;
  ``builder.py``'s 0.3 is overridden there); ``ratio`` is unused. The release emits a reduced
  frame's tokens in ascending-cosine order, not spatial order; this variant returns those rows as
  ``Selection.tokens`` in that order on the frame's kept slots (ascending), so with LLaVA's compact
  positions the LLM sees the release's sequence exactly (on a model that keeps positions, e.g.
  Qwen3-VL, a row then takes its slot's position, not its own: use vidcom2_qwen there). The index
  slip ``similarities[(i - 2) // 2]`` of the first commit 26dc6f4 was fixed in 35cc532 ("Update
  ttm code", an ancestor of dd74634): dd74634 ranks frame i+1 by its own pair's row, and so do we.
  Only where the release cannot run do we extend it: T <= 4 (its ``torch.stack([])`` of the empty
  quad list raises) skips the quad step, as the VidCom2 port does; T = 1 keeps the frame whole.
* ``"vidcom2_qwen"`` (:mod:`baselines.dycoke.vidcom2_qwen`): the VidCom2 port, bit for bit on CPU
  in float32 and bf16: the same release arithmetic in the input dtype; ``DYCOKE_K`` (our ``k``)
  defaults to ``1 - R_RATIO`` (``1 - r``) and a reduced frame keeps ``int((1 - K) * P)`` with the
  port's float clamps (r = 0.1, P = 10 gives 0); odd T drops the last frame; T = 1 kept whole;
  T <= 4 no quad step; the kept indices deduplicated and sorted (``torch.unique``), each token at
  its own place (the port slices the MRoPE ids, so positions are preserved); no ``tokens``. Its
  env knob ``DYCOKE_NUM_TOKENS_PER_FRAME`` is not a parameter (P comes from ``frames``).

Compared with the released codes loaded at run time on CPU (a comparison outside the project;
official on the LLM's token sequence, vidcom2_qwen on the kept indices; where the release raises,
T <= 4, official against the VidCom2 port's sequence). Measured agreement with the releases:
docs/fidelity.md, section "DyCoke".

Budget (DyCoke defines its own count; it is NOT ``floor(r * T * P)``): the anchor frames stay
whole, so the paper variant keeps ``A * P + (T - A) * n`` tokens, where the ``A`` whole frames are
the even frames except those re-reduced by the quad step (2, 6, ..., i.e. ``i % 4 == 2`` and
``i < T - 2``) and except the last frame of an odd ``T > 1`` (the release variants keep 0 there).
For even T that is frames 0, 4, 8, ... plus frame T-2 when T is a multiple of 4. Example: T=32,
P=196, r=0.25 -> frames 0, 4, ..., 28 and 30 whole, the other 23 keep n=49: 2891 of 6272 tokens
(46.1%); with the official K=0.7 (n=58) 49.4%, as the release's ``dycole_ttm`` layout gives.
No model inputs.
"""
