"""What an input method (:mod:`vcast.input_methods`) gave the model, per video, and the unpruned
model's video-token count it is measured against.

A plugin's ``_prepare`` sets the list on its processor outputs as the attribute named
:data:`INPUT_BUDGET` (an attribute, not a key, so ``generate(**inputs)`` never sees it): one dict
per video of the batch, in order, with ``frames`` / ``reference_frames`` (frames read by the
method and by the unpruned model) and ``grid`` / ``reference_grid`` (each frame's LLM token grid
``[h, w]``, or None where the plugin does not resize: LLaVA). The efficiency record keeps it.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Optional, Sequence

INPUT_BUDGET = "vcast_input_budget"

# Plugins whose vision tower takes one fixed input size, so no input method may change the resolution.
FIXED_RESOLUTION = {
    "vcast_llava_ov": ("the LLaVA-OneVision vision tower takes a fixed 384x384 input (learned position embeddings "
                       "for its 27x27 patches); use avgpool_2x2 (the 2x2 mean of the token grid) instead"),
}


def input_plan_refusal(plugin: str, plan: Any) -> Optional[str]:
    """Why lmms-eval model ``plugin`` cannot run input plan ``plan`` (:class:`vcast.input_methods.InputPlan`), or None."""
    if plan.grid_share != 1.0 and plugin in FIXED_RESOLUTION:
        return f"{plugin}: method {plan.method!r} lowers the frame resolution, but {FIXED_RESOLUTION[plugin]}"
    return None


def video_budget(frames: int, reference_frames: int, grid: Optional[Sequence[int]] = None,
                 reference_grid: Optional[Sequence[int]] = None) -> dict[str, Any]:
    """One video's entry: frames and per-frame LLM token grid used, and the unpruned model's."""
    return {"frames": int(frames), "reference_frames": int(reference_frames),
            "grid": None if grid is None else [int(side) for side in grid],
            "reference_grid": None if reference_grid is None else [int(side) for side in reference_grid]}


def _scale(entry: dict[str, Any]) -> Fraction:
    """Unpruned tokens per token the model saw: the frame ratio times the grid-area ratio."""
    scale = Fraction(entry["reference_frames"], entry["frames"])
    if entry["grid"] is not None:
        scale *= Fraction(entry["reference_grid"][0] * entry["reference_grid"][1], entry["grid"][0] * entry["grid"][1])
    return scale


def reference_video_tokens(budgets: list[dict[str, Any]], segments: Sequence[Any]) -> int:
    """The unpruned model's video tokens for a call whose videos were read as ``budgets`` and seen
    as ``segments`` (the handle's per-video :class:`vcast.models.stats.SegmentStats`, in order).

    Every frame of a video has the same token count, so each video's count scales exactly.

    Raises:
        RuntimeError: when the segments do not match the budgets (a plugin bug, never a user's).
    """
    videos = [segment for segment in segments if segment.kind == "video"]
    if len(videos) != len(budgets):
        raise RuntimeError(f"the model saw {len(videos)} video(s) but the input plan read {len(budgets)}")
    total = 0
    for entry, segment in zip(budgets, videos):
        tokens = segment.total * _scale(entry)
        if tokens.denominator != 1:
            raise RuntimeError(f"video of {segment.total} tokens read as {entry} scales to {tokens}, not a whole count")
        total += int(tokens)
    return total
