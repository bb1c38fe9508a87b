"""Scores read from an in-LLM stage's attention rows, shared by the in-LLM methods."""

from __future__ import annotations

import torch

from vcast.models.llm_plan import StageInputs


def last_token_scores(inputs: StageInputs) -> torch.Tensor:
    """``[N]``: head-mean attention of the last prompt token to each video token, in the
    attention's dtype (float32 unless the plan asked for the model's)."""
    return inputs.attention.mean(0)[-1].index_select(0, inputs.visual)
