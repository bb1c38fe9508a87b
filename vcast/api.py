"""``vcast.select``: one entry point for every registered compressor."""

from __future__ import annotations

from typing import Any

import torch

from vcast.registry import call_params, check_params, get_method, is_llm_method
from vcast.selection import Selection
from vcast.validation import check_frames, check_ratio


def select(frames: torch.Tensor, ratio: float, method: str = "vcast", **params: Any) -> Selection:
    """Choose which video tokens to keep.

    Args:
        frames: float [T, P, D] tokens of one video (T frames or temporal patches, P tokens
            each), on any device and in any float dtype.
        ratio: retention ratio in (0, 1]; 1 keeps every token.
        method: a name from :func:`vcast.available_methods`.
        **params: the method's own parameters, and the model inputs it declares
            (:func:`vcast.registry.method_inputs`, e.g. ``vision_attention`` [T, P]).
    Returns:
        :class:`vcast.Selection` with ``keep`` [K] ascending flat indices and ``budgets`` [T]
        (and ``tokens`` [K, D] for merging methods).
    Raises:
        ValueError: naming the bad value (ratio, shape, non-finite input, unknown method or
            parameter, a parameter out of range, or an in-LLM method, which needs the model).
    """
    compressor = get_method(method)
    if is_llm_method(method):
        raise ValueError(f"method {method!r} drops tokens inside the language model, so it needs the model: "
                         "use vcast.models.attach(model, method=...) instead of vcast.select")
    check_params(method, params, allow_inputs=True)
    ratio = check_ratio(ratio)
    check_frames(frames)
    return compressor(frames, ratio, **call_params(method, params))
