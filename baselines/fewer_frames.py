"""Fewer frames: spend the token budget on sampling ``floor(r F)`` frames instead of pruning tokens.

Not a row of the V-CAST paper: the cheapest competitor a reviewer asks about (VTC-Bench and
UniPruneBench report that frame or resolution reduction is a strong baseline). An input method
(:mod:`vcast.input_plan`): the lmms-eval plugins read ``floor(r F)`` frames (rounded down to a whole
Qwen3-VL temporal patch of 2 frames, at least one) where the unpruned model reads ``F``, spread
over the whole video by the wrapper's own sampling (``linspace``), at the unpruned model's
per-frame resolution; then the model runs unpruned. The vision encoder runs on fewer frames too,
so it saves vision time as well. ``vcast.select`` has nothing to select for it (it refuses);
``vcast.input_plan("fewer_frames", r).frames(F, temporal_patch)`` gives the count.

Budget. ``floor(r F)`` frames of ``P`` tokens each, at most ``r F P`` tokens (Qwen3-VL 16 frames
at r = 0.15: 2 frames, 12.5%); the efficiency records say what was really spent.

Hyper-parameters: none.
"""

from __future__ import annotations

from vcast.input_plan import InputPlan
from vcast.registry import register_input_method


@register_input_method("fewer_frames")
def fewer_frames_plan(ratio: float) -> InputPlan:
    """Read ``floor(ratio * F)`` frames (whole temporal patches) at the unpruned resolution."""
    return InputPlan("fewer_frames", ratio, frame_share=ratio)
