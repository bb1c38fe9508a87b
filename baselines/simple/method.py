"""The registrations of the simple methods: random, uniform, the 2x2 references, EVS and the two
input methods (their parameters, defaults, checks and facts; the algorithms are in the sibling
modules named for them)."""

from __future__ import annotations

from typing import Any

import torch

from baselines.simple.cells_2x2 import avgpool_2x2_merge, first_2x2_keep, random_2x2_keep
from baselines.simple.evs import official_evs, paper_evs
from baselines.simple.grid_cells import frame_cells
from baselines.simple.input_plans import downsample_input, fewer_frames_input
from baselines.simple.random import random_keep
from baselines.simple.uniform import uniform_keep
from vcast.input_methods import InputPlan
from vcast.method_facts import MethodFacts
from vcast.registry import register_input_method, register_method
from vcast.selection import Selection
from vcast.validation import check_int
from vcast.variants import OFFICIAL, PAPER, check_variant

MAX_SEED = 2**64 - 1  # torch.Generator.manual_seed's range

RANDOM_FACTS = MethodFacts(display="Random", vllm=True)
UNIFORM_FACTS = MethodFacts(display="Uniform (evenly spaced)", vllm=True)
FIRST_2X2_FACTS = MethodFacts(display="First (2x2)")
RANDOM_2X2_FACTS = MethodFacts(display="Random (2x2)")
AVGPOOL_2X2_FACTS = MethodFacts(display="AvgPool (2x2)")
EVS_FACTS = MethodFacts(
    display="EVS",
    venue="vLLM",
    paper='"Efficient Video Sampling: Pruning Temporally Redundant Tokens for Faster VLM Inference" (NVIDIA, 2025)',
    code={OFFICIAL: "vllm-project/vllm@v0.32.0 vllm/multimodal/video_prune/evs.py compute_retention_mask"},
    vllm=True,
)
FEWER_FRAMES_FACTS = MethodFacts(display="Fewer frames")
DOWNSAMPLE_FACTS = MethodFacts(display="Downsample")


@register_method("random", facts=RANDOM_FACTS)
def random_select(frames: torch.Tensor, ratio: float, *, seed: int = 0) -> Selection:
    """Keep ``floor(r T P)`` tokens of ``frames`` [T, P, D] chosen uniformly at random.

    Args:
        frames: [T, P, D] video tokens (checked by :func:`vcast.select`); only the shape is used.
        ratio: retention ratio r in (0, 1].
        seed: seed of the CPU generator (>= 0).
    Returns:
        Selection with ``keep`` [B] and ``budgets`` [T].
    """
    seed = check_int("seed", seed, 0, MAX_SEED)
    return random_keep(frames, ratio, seed)


@register_method("uniform", facts=UNIFORM_FACTS)
def uniform_select(frames: torch.Tensor, ratio: float) -> Selection:
    """Keep ``floor(r T P)`` tokens, spread evenly over frames and evenly inside each frame.

    Args:
        frames: [T, P, D] video tokens (checked by :func:`vcast.select`); only the shape is used.
        ratio: retention ratio r in (0, 1].
    Returns:
        Selection with ``keep`` [B], ``budgets`` [T] and the (uniform) frame weights [T].
    """
    return uniform_keep(frames, ratio)


@register_method("first_2x2", inputs=("grid",), facts=FIRST_2X2_FACTS)
def first_2x2_select(frames: torch.Tensor, ratio: float, *, grid: Any | None = None) -> Selection:
    """Keep the top-left token of every 2x2 cell of every frame.

    Args:
        frames: [T, P, D] video tokens (checked by :func:`vcast.select`).
        ratio: must be 0.25 (the method fixes its own count, see :mod:`baselines.simple.cells_2x2`).
        grid: model input ``(h, w)`` with ``h * w == P``, or None for a square grid.
    Returns:
        Selection with ``T * ceil(h/2) * ceil(w/2)`` kept tokens.
    """
    return first_2x2_keep(frames, frame_cells("first_2x2", frames, ratio, grid))


@register_method("random_2x2", inputs=("grid",), facts=RANDOM_2X2_FACTS)
def random_2x2_select(frames: torch.Tensor, ratio: float, *, seed: int = 0, grid: Any | None = None) -> Selection:
    """Keep one uniformly random member of every 2x2 cell of every frame.

    Args:
        frames: [T, P, D] video tokens (checked by :func:`vcast.select`).
        ratio: must be 0.25 (the method fixes its own count, see :mod:`baselines.simple.cells_2x2`).
        seed: seed of the CPU generator (>= 0).
        grid: model input ``(h, w)`` with ``h * w == P``, or None for a square grid.
    Returns:
        Selection with ``T * ceil(h/2) * ceil(w/2)`` kept tokens.
    """
    layout = frame_cells("random_2x2", frames, ratio, grid)
    seed = check_int("seed", seed, 0, MAX_SEED)
    return random_2x2_keep(frames, layout, seed)


@register_method("avgpool_2x2", inputs=("grid",), facts=AVGPOOL_2X2_FACTS)
def avgpool_2x2_select(frames: torch.Tensor, ratio: float, *, grid: Any | None = None) -> Selection:
    """Average every 2x2 cell of every frame into one token at the cell's top-left position.

    Args:
        frames: [T, P, D] video tokens (checked by :func:`vcast.select`).
        ratio: must be 0.25 (the method fixes its own count, see :mod:`baselines.simple.cells_2x2`).
        grid: model input ``(h, w)`` with ``h * w == P``, or None for a square grid.
    Returns:
        Selection with ``K = T * ceil(h/2) * ceil(w/2)`` positions and ``tokens`` [K, D] float32.
    """
    return avgpool_2x2_merge(frames, frame_cells("avgpool_2x2", frames, ratio, grid))


@register_method("evs", variants=(PAPER, OFFICIAL), facts=EVS_FACTS)
def evs_select(frames: torch.Tensor, ratio: float, *, variant: str = PAPER) -> Selection:
    """Keep the ``B`` tokens of ``frames`` [T, P, D] that differ most from the previous frame.

    Args:
        frames: [T, P, D] video tokens (checked by :func:`vcast.select`).
        ratio: retention ratio r in (0, 1].
        variant: "paper" (float32 cosines) or "official" (vLLM: input dtype, vLLM's count).
    Returns:
        Selection with ``keep`` [B] (ascending) and ``budgets`` [T].
    """
    variant = check_variant("evs", variant, (PAPER, OFFICIAL))
    if variant == OFFICIAL:
        return official_evs(frames, ratio)
    return paper_evs(frames, ratio)


@register_input_method("fewer_frames", facts=FEWER_FRAMES_FACTS)
def fewer_frames_plan(ratio: float) -> InputPlan:
    """Read ``floor(ratio * F)`` frames (whole temporal patches) at the unpruned resolution."""
    return fewer_frames_input(ratio)


@register_input_method("downsample", facts=DOWNSAMPLE_FACTS)
def downsample_plan(ratio: float) -> InputPlan:
    """Shrink each side of every frame's token grid by ``sqrt(ratio)`` (floored), all frames kept."""
    return downsample_input(ratio)
