"""The simple methods: content-blind references, EVS and the input methods, in one package.

Registrations (parameters, defaults, checks, facts) in :mod:`baselines.simple.method`; the
algorithms in :mod:`~baselines.simple.random`, :mod:`~baselines.simple.uniform`,
:mod:`~baselines.simple.cells_2x2` (with :mod:`~baselines.simple.grid_cells`),
:mod:`~baselines.simple.evs` and :mod:`~baselines.simple.input_plans`.

``random``: keep a seeded, uniformly random subset of exactly ``B = floor(r T P)`` video tokens.
  Paper: the "Random" row of tab:efficiency_comparison in "V-CAST: Video Curvature-Aware
  Spatio-Temporal Pruning for Efficient Video Large Language Models" (NeurIPS 2026 preprint), the
  cost floor of a pruning method (no scoring at all). There is no official code (docs/fidelity.md:
  methods without released code have ``paper`` only); :mod:`baselines.simple.random` is the
  definition. Hyper-parameters: ``seed = 0`` at every ratio.

``uniform``: the same budget for every frame, and evenly spaced tokens inside each frame.
  Paper: a content-blind reference for "V-CAST: Video Curvature-Aware Spatio-Temporal Pruning for
  Efficient Video Large Language Models" (NeurIPS 2026 preprint): the allocation of V-CAST's
  "Uniform Allocation" ablation (tab:ablation_temporal) without any spatial scoring. There is no
  official code (docs/fidelity.md); :mod:`baselines.simple.uniform` is the definition.
  Hyper-parameters: none.

``first_2x2``, ``random_2x2``: keep the top-left token / one seeded, uniformly random token of
every 2x2 cell of each frame's token grid. ``avgpool_2x2``: merge every 2x2 cell into its mean.
  Paper: the "First (2x2)", "Random (2x2)" and "AvgPool (2x2)" rows of tab:rope in "V-CAST: Video
  Curvature-Aware Spatio-Temporal Pruning for Efficient Video Large Language Models" (NeurIPS 2026
  preprint): naive pruning references against merging, and the naive merging reference that the
  paper contrasts with on-grid pruning. There is no official code (docs/fidelity.md);
  :mod:`baselines.simple.cells_2x2` is the definition. Budget: their own count, ``ceil(h / 2) *
  ceil(w / 2)`` tokens per frame; the only accepted ratio is the nominal 0.25, any other raises
  ValueError naming ``ratio`` (the sweep config pins ``fixed_ratio: 0.25``). Hyper-parameters:
  ``seed = 0`` (``random_2x2``); none for the other two.

``evs`` (Efficient Video Sampling): keep the tokens that changed most since the previous frame.
  Paper: "Efficient Video Sampling: Pruning Temporally Redundant Tokens for Faster VLM Inference"
  (NVIDIA, 2025), deployed in vLLM (``vllm/multimodal/video_prune/evs.py``, switched on by
  ``video_pruning_rate``) and SGLang for Qwen2.5-VL / Qwen3-VL. Not a row of the V-CAST paper: it
  is the pruning a serving engine already ships, so reviewers ask for it. Written here from its
  definition, then compared with vLLM's function on the same inputs (measured agreement with
  vLLM: docs/fidelity.md, section "EVS").
  Variants (``variant=``): ``paper`` (default; float32 cosines) and ``official`` (vLLM's code as
  deployed: the input dtype and vLLM's count); :mod:`baselines.simple.evs` has both.
  Hyper-parameters: none. No model inputs.

``fewer_frames``: spend the token budget on sampling ``floor(r F)`` frames instead of pruning tokens.
  Not a row of the V-CAST paper: the cheapest competitor a reviewer asks about (VTC-Bench and
  UniPruneBench report that frame or resolution reduction is a strong baseline). An input method
  (:mod:`vcast.input_methods`): the lmms-eval plugins read ``floor(r F)`` frames (rounded down to a
  whole Qwen3-VL temporal patch of 2 frames, at least one) where the unpruned model reads ``F``,
  spread over the whole video by the wrapper's own sampling (``linspace``), at the unpruned
  model's per-frame resolution; then the model runs unpruned. The vision encoder runs on fewer
  frames too, so it saves vision time as well. ``vcast.select`` has nothing to select for it (it
  refuses); ``vcast.input_plan("fewer_frames", r).frames(F, temporal_patch)`` gives the count.
  Budget: ``floor(r F)`` frames of ``P`` tokens each, at most ``r F P`` tokens (Qwen3-VL 16 frames
  at r = 0.15: 2 frames, 12.5%); the efficiency records say what was really spent.
  Hyper-parameters: none.

``downsample``: spend the token budget on a lower per-frame resolution instead of pruning tokens.
  Not a row of the V-CAST paper: the resolution twin of ``fewer_frames`` (VTC-Bench uses plain
  downsampling as its baseline). An input method (:mod:`vcast.input_methods`): where the unpruned
  model sees a frame as an ``(h, w)`` grid of LLM tokens, the plugin resizes the frame (bicubic,
  antialiased, from the decoded frame, as the wrapper resizes) so the grid is
  ``(floor(h sqrt r), floor(w sqrt r))``, every frame kept; then the model runs unpruned.
  Qwen3-VL only: its vision tower takes any multiple of 32 pixels. LLaVA-OneVision's SigLIP tower
  takes a fixed 384x384 input (27x27 patches, learned position embeddings for that grid), so a
  lower resolution cannot reach it as input; the LLaVA plugin refuses ``downsample`` and names
  ``avgpool_2x2`` (the 2x2 token-grid mean) as the nearest in-model equivalent.
  Budget: ``T h' w' <= r T h w`` tokens (448x448 frames, a 14x14 grid: 7x7 at r = 0.25, 25%
  exactly; 5x5 at r = 0.15, 12.8%); the efficiency records say what was really spent.
  Hyper-parameters: none.
"""
