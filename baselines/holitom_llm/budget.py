"""HoliTom in-LLM token counts: the outer step's ratio under each ``budget`` convention and the
inner step's keep count, shared by both variants."""

from __future__ import annotations

BUDGETS = ("pre_llm", "after_drop", "layer_average")


def inner_keep_count(num_tokens: int, r_inner: float) -> int:
    """``round(N (1 - r_inner))`` (Python's round, as the official code), within ``[1, N]``."""
    return min(num_tokens, max(1, round(num_tokens * (1 - r_inner))))


def outer_ratio(ratio: float, budget: str, layer: int, num_layers: int, r_inner: float) -> float:
    """The ratio of the outer (pre-LLM) step for the retention ratio ``ratio`` under ``budget``."""
    if budget == "pre_llm":
        return ratio
    if budget == "after_drop":
        outer = ratio / (1 - r_inner)
    else:
        outer = ratio * num_layers / (layer + (num_layers - layer) * (1 - r_inner))
    if outer > 1 + 1e-12:
        raise ValueError(f"budget={budget!r} cannot reach ratio {ratio} with r_inner {r_inner} at layer {layer} of "
                         f"{num_layers}: the outer step would need ratio {outer:.4f} > 1")
    return min(outer, 1.0)
