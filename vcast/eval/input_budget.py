"""What an input method (:mod:`vcast.input_methods`) gave the model, per video, and the unpruned
model's video-token count it is measured against.

A plugin's ``_prepare`` gives the list with its batch (:class:`vcast.eval.prepared_inputs.PreparedInputs`
``input_budget``): one dict per video of the batch, in order, with ``frames`` / ``reference_frames`` (frames read by the
method and by the unpruned model) and ``grid`` / ``reference_grid`` (each frame's LLM token grid
``[h, w]``, or None where the plugin does not resize: LLaVA). The efficiency record keeps it.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Optional, Sequence

from vcast.families import family_for_plugin


def input_plan_refusal(plugin: str, plan: Any) -> Optional[str]:
    """Why lmms-eval model ``plugin`` cannot run input plan ``plan`` (:class:`vcast.input_methods.InputPlan`),
    or None: a family whose vision tower takes one fixed input size (``Family.fixed_resolution``)
    refuses any method that lowers the resolution."""
    family = family_for_plugin(plugin)
    if plan.grid_share != 1.0 and family is not None and family.fixed_resolution:
        return f"{plugin}: method {plan.method!r} lowers the frame resolution, but {family.fixed_resolution}"
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
