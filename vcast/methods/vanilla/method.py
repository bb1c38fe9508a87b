"""The registration of ``method="vanilla"`` (keep every token; :mod:`vcast.methods.vanilla.keep_all`)."""

from __future__ import annotations

import torch

from vcast.method_facts import MethodFacts
from vcast.methods.vanilla.keep_all import all_tokens
from vcast.registry import register_method
from vcast.selection import Selection

FACTS = MethodFacts(display="Vanilla", vllm=False)


@register_method("vanilla", facts=FACTS)
def keep_all(frames: torch.Tensor, ratio: float) -> Selection:
    """All ``T * P`` tokens of ``frames`` [T, P, D]; ``ratio`` must be 1 (nothing is pruned)."""
    if ratio != 1.0:
        raise ValueError(f"method 'vanilla' keeps every token, so ratio must be 1.0, got {ratio!r}")
    return all_tokens(frames)
