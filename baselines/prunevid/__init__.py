"""PruneVid, full: the pre-LLM static/dynamic merge (stage A), then attention pruning inside the LLM (stage B).

Paper: "PruneVid: Visual Token Pruning for Efficient Video Large Language Models" (Huang et al.,
ACL 2025 Findings). Official code followed: Visual-AI/PruneVid@b12600c (PLLaVA only): stage A
``models/pllava/modeling_pllava.py`` ``merge_frames_dynamic`` L764-827; stage B
``models/pllava/llama.py`` L1288-1462 and ``models/pllava/elastic_cache.py`` ``VTPWindowCache``
L108-207; defaults ``scripts/eval.sh``.

Stage A is the registered compressor ``prunevid_stage_a`` (:mod:`baselines.prunevid_stage_a`; its
docstring lists its own deviations), run before the LLM at ratio ``cluster_ratio`` (the official
``cluster_ratio`` gamma: the share stage A keeps) with ``tau``, ``temporal_segment_ratio``,
``dpc_k`` and ``min_cluster_tokens`` passed through.

Stage B (:mod:`baselines.prunevid.paper`), one stage: after layer ``selected_layer`` (``S_sel``) has run, the attention of
that layer is read for every token after the row's last video token as queries
(``queries="text"``), **before RoPE and without the causal mask** (``rotary=False``,
``causal=False``: softmax of the raw projections over all keys, as the official patched eager
attention returns it); the score of a video token is ``g = max over heads, then max over query
rows``; within every group (below) the top ``floor(n_g * alpha)`` video tokens by ``g`` stay for
layers ``S_sel + 1 .. L - 1`` (the plan's stage sits at ``K = S_sel + 1``), at their original
positions (``positions="original"``: gaps stay, as the official ``position_ids[:, index]``; Qwen3-VL
keeps its original MRoPE coordinates). Ties go to the lower index.

Groups, and what the stage can recover of stage A's structure. The official stage B receives
stage A's ``static_sizes``, ``dynamic_sizes`` and ``window_sizes`` and keeps, per window, the top
``floor(static * alpha)`` static tokens and, per frame, the top ``floor((n_dyn / W) * alpha)``
dynamic tokens. Our stage only sees stage A's *outputs* (``StageInputs.frames`` / ``patches`` of
each present token; ``embeddings`` are the merged tokens, not the original frames, so stage A
cannot be re-run). ``prunevid_stage_a`` places every output in a frame: a dynamic token (or
dynamic cluster) in its own frame, a static token (or static cluster) at its spatial location in
its window's FIRST frame. The frame of every token is therefore exact, and every group of the
official split lies inside one frame: a window's non-first frames hold exactly that frame's
dynamic group; its first frame holds the window's static group AND that frame's dynamic group, at
disjoint locations. Which of that frame's tokens are static cannot be told from positions once
stage A has clustered (its cluster centres are arbitrary members), and the window bounds cannot
be told either (they only matter through the static group). So the groups here are the frames
(per video): every frame keeps ``floor(n_f * alpha)`` of its ``n_f`` tokens. This equals the
official rule on every frame except a window's first frame, where the static and dynamic tokens
are ranked together (``floor((s + d) alpha)`` instead of ``floor(s alpha) + floor(d alpha)``: at
most one token more per window, and the alpha share is split between them by score instead of
by group). An exact split would need the engine to carry stage A's group of each token into
``StageInputs``.

Retention ratio ``r``: the nominal share of the ORIGINAL ``T * P`` video tokens kept after stage B,
``r = gamma * alpha`` (gamma = ``cluster_ratio``, the stage-A share; alpha the stage-B share). One of
the two is derived from ``r``: by default gamma = max(0.5, sqrt(r)) and alpha = r / gamma, i.e.
the official gamma = 0.5 and alpha = 2r up to r = 0.25 (the papers' regime), and gamma = alpha =
sqrt(r) above, so that both stages stay active up to r = 1 (no official setting exists there;
r = 0.6 gives 0.775 each); ``alpha=`` fixes alpha and
sets gamma = r / alpha (needs alpha >= r); ``cluster_ratio=`` fixes gamma and sets alpha = r / gamma
(needs gamma >= r); giving both is refused (``r`` fixes their product). ``r = 0.2`` reproduces the
official scripts (gamma 0.5, alpha 0.4; ``scripts/eval.sh``); ``r = 0.25`` gives alpha 0.5. The real
count is below ``r T P``: stage A keeps exactly ``floor(gamma T P)`` tokens (fewer when static
averaging alone leaves fewer), and stage B floors per frame (up to one token per frame lost). alpha
is taken on the decimal values as written (``Fraction``), so ``floor(10 * 0.25 / 0.5) = 5`` exactly.
The layer-averaged retention (reported by the engine) counts layers ``0..S_sel`` at stage A's share.

Defaults (official ``scripts/eval.sh``, MVBench / VideoMME / EgoSchema on PLLaVA's 32-layer
LLaMA): ``selected_layer = 10`` of 32, moved to other depths as the stage layer
``K = layer_scaled(11, 32, L)`` (``S_sel = K - 1``): 28 layers (Qwen2-7B) -> 9, 36 (Qwen3-VL-8B)
-> 11, 2 and 3 (tiny test models) -> 0; ``tau = 0.8``, ``temporal_segment_ratio = 0.25``,
``dpc_k = 7``, ``min_cluster_tokens = 14`` (stage A); gamma / alpha as above. VCG-Bench's official
``selected_layer = 5`` is a parameter away. Model inputs: none.

Variants (``variant=``; the same parameters and defaults):

``"paper"`` (default): everything in this docstring.

``"official"`` (:mod:`baselines.prunevid.official`): stage A is ``prunevid_stage_a``
``variant="official"`` (the release's ``merge_frames_dynamic`` bit for bit, ``cluster_ratio`` =
gamma, ``seed`` for its density noise);
stage B is the release's ``VTPWindowCache.process_attention`` (``elastic_cache.py`` L120-154):
the pre-RoPE, unmasked map in the model's dtype as the release computes it (``q k^T / sqrt(d)`` in
the model's dtype, float32 softmax rounded to it: ``LLMPlan.score_dtype="model"``,
``score_scale="divide"``), max over heads then over the query rows, per window the ``topk`` of
``int(s * alpha)`` static outputs and per frame of ``int(d * alpha)`` dynamic ones, ``alpha`` a
float (``float(ratio / gamma)``, or the ``alpha`` given) and the count a truncated float product
(``int(100 * 0.29) = 28``). The deviation of ``paper`` "stage B cannot tell stage A's static
tokens from the first frame's dynamic ones" is **reproduced away**: the official stage A places
its outputs at slots that encode the groups (a window's static outputs from patch 0 of its first
frame, a frame's dynamic ones ending at patch ``P - 1``; see
:mod:`baselines.prunevid_stage_a.official`), and stage B reads them back. This is exact unless a
window's first frame is filled by both groups unclustered (only when ``P <= 28`` or gamma = 1),
where that frame is ranked as one group. Measured against the release's ``process_attention``
loaded at run time, fed the release's own stage-A sizes, on the same hand-made attention (a
comparison outside the project), with the group read-back and the ``paper`` grouping on the same
scores for context. Measured agreement with the release: docs/fidelity.md, section "PruneVid
stage B". Still not reproduced
(both variants): the KV cache of layers ``0..S_sel`` is not gathered to the kept set (decode
steps there still see every stage-A token; the prefill and so the first generated token are
unaffected), the queries include LLaVA-OneVision's newline token after the video, GQA is
handled, batches and several videos per row work. The release is PLLaVA-only (1-D RoPE); on
Qwen3-VL the official slots give the stage-A outputs MRoPE coordinates unrelated to their content.

Deliberate deviations of ``variant="paper"`` from the official code:

* groups are frames, not (window static set, frame dynamic sets) (above);
* the official code also gathers the KV cache of layers ``0..S_sel`` to the kept set, so that
  decode steps attend only to kept tokens in every layer; here layers ``0..S_sel`` keep their full
  cache (the engine, :mod:`vcast.models.layer_drops`, shortens only the layers after a drop), so
  decode tokens still see every stage-A token in the early layers;
* scores are recomputed for the query rows only (``vcast.models.attention_rows``) instead of the
  eager full map; no ``scores="eager"`` option, because the eager kernel's weights are post-RoPE
  and causal while the official map is pre-RoPE and unmasked. Grouped-query attention is handled
  (the official matmul assumes LLaMA-2's one KV head per head); on Qwen3-VL "pre-RoPE" is after
  its per-head ``q_norm`` / ``k_norm`` (the release's LLaMA has none; this is the natural
  analogue);
* the queries are every token after the row's last video token (LLaVA-OneVision's trailing
  newline included), every video of a row is handled (frames grouped per video), and batches of
  several rows work (the official code asserts batch 1 and one image span);
* a row with no token after its video has no query: nothing is dropped (the official code
  would fail on an empty map);
* stage A's own deviations (exact budget ``floor(gamma T P)``, deterministic DPC-kNN, ...) are
  listed in :mod:`baselines.prunevid_stage_a`.
"""
