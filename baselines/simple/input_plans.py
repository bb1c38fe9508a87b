"""The input plans of ``fewer_frames`` and ``downsample``: the same budget spent on a smaller input.

Both are input methods (:mod:`vcast.input_methods`): nothing is selected from the tokens; the
lmms-eval plugins give the processor the smaller input the plan describes, then the model runs
unpruned.
"""

from __future__ import annotations

from vcast.input_methods import InputPlan


def fewer_frames_input(ratio: float) -> InputPlan:
    """Read ``floor(ratio * F)`` frames (whole temporal patches) at the unpruned resolution."""
    return InputPlan("fewer_frames", ratio, frame_share=ratio)


def downsample_input(ratio: float) -> InputPlan:
    """Shrink each side of every frame's token grid by ``sqrt(ratio)`` (floored), all frames kept."""
    return InputPlan("downsample", ratio, grid_share=ratio)
