"""SparseVLM's raters: chosen once per prefill from the layer-0 embeddings, found again at every stage.

Used by both variants (:mod:`baselines.sparsevlm.paper`, :mod:`baselines.sparsevlm.official`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from vcast.models.llm_plan import StageInputs


def rater_rows(inputs: StageInputs, choose_raters: Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor],
               raters_key: str, text_key: str) -> torch.Tensor:
    """LongTensor ``[R]``: the query rows of the raters in ``inputs.attention``.

    The raters are chosen once, at the row's first stage (``choose_raters(embeddings,
    entry_visual, text_tokens)``), and kept in ``inputs.state``; text is never pruned, so the
    row's original text is always the last ``text_tokens`` query rows.
    """
    if raters_key not in inputs.state:
        inputs.state[text_key] = inputs.rows.numel()
        inputs.state[raters_key] = choose_raters(inputs.embeddings, inputs.entry_visual, inputs.rows.numel())
    return inputs.state[raters_key].to(inputs.visual.device) + (inputs.rows.numel() - inputs.state[text_key])
