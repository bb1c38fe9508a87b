"""Downsample: spend the token budget on a lower per-frame resolution instead of pruning tokens.

Not a row of the V-CAST paper: the resolution twin of ``fewer_frames`` (VTC-Bench uses plain
downsampling as its baseline). An input method (:mod:`vcast.input_plan`): where the unpruned
model sees a frame as an ``(h, w)`` grid of LLM tokens, the plugin resizes the frame (bicubic,
antialiased, from the decoded frame, as the wrapper resizes) so the grid is
``(floor(h sqrt r), floor(w sqrt r))``, every frame kept; then the model runs unpruned.

Qwen3-VL only: its vision tower takes any multiple of 32 pixels. LLaVA-OneVision's SigLIP tower
takes a fixed 384x384 input (27x27 patches, learned position embeddings for that grid), so a
lower resolution cannot reach it as input; the LLaVA plugin refuses ``downsample`` and names
``avgpool_2x2`` (the 2x2 token-grid mean) as the nearest in-model equivalent.

Budget. ``T h' w' <= r T h w`` tokens (448x448 frames, a 14x14 grid: 7x7 at r = 0.25, 25% exactly;
5x5 at r = 0.15, 12.8%); the efficiency records say what was really spent.

Hyper-parameters: none.
"""

from __future__ import annotations

from vcast.input_plan import InputPlan
from vcast.registry import register_input_method


@register_input_method("downsample")
def downsample_plan(ratio: float) -> InputPlan:
    """Shrink each side of every frame's token grid by ``sqrt(ratio)`` (floored), all frames kept."""
    return InputPlan("downsample", ratio, grid_share=ratio)
