"""FastV, ``variant="vidcom2_qwen"``: the VidCom2 ``qwen``-branch port's column-mean ranking and count.

The port's quirks the plan reproduces (DeepStack before the layer, the rebuilt causal mask) and
those it does not: :mod:`baselines.fastv`.
"""

from __future__ import annotations

import torch

from vcast.models.llm_plan import StageChoice, StageInputs


def column_mean_scores(inputs: StageInputs) -> torch.Tensor:
    """``[N]``: head mean, then mean over every query row (``attention`` ``[H, S, S]``), at the video columns."""
    return inputs.attention.mean(0).mean(0).index_select(0, inputs.visual)


def vidcom2_count(tokens: int, keep: float) -> int:
    """The port's ``max(1, int(N_v * R_RATIO))``."""
    return min(tokens, max(1, int(tokens * keep)))


def vidcom2_top(inputs: StageInputs, keep: float) -> StageChoice:
    """The port's choice: ``topk(max(1, int(N_v r)), largest=True)`` of the column-mean scores."""
    count = vidcom2_count(inputs.visual.numel(), keep)
    return StageChoice(keep=torch.topk(column_mean_scores(inputs), k=count, largest=True).indices)
