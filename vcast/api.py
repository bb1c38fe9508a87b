"""``vcast.select``: one entry point for every registered compressor."""

from __future__ import annotations

from typing import Any

import torch

from vcast.input_methods import InputPlan
from vcast.registry import available_methods, call_params, check_params, get_method, is_input_method, is_llm_method
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
    if is_input_method(method):
        raise ValueError(input_method_refusal(method, "vcast.select"))
    check_params(method, params, allow_inputs=True)
    ratio = check_ratio(ratio)
    check_frames(frames)
    return compressor(frames, ratio, **call_params(method, params))


def input_method_refusal(method: str, caller: str) -> str:
    """Why ``caller`` cannot run input method ``method`` (it selects no tokens), and what can."""
    return (f"method {method!r} spends the budget on the model's input (what the processor is given), so "
            f"{caller} has no tokens to select for it: run it through the lmms-eval plugins or the sweep "
            f"(method={method}), or read its plan with vcast.input_plan({method!r}, ratio) and prepare "
            "your inputs with it")


def input_plan(method: str, ratio: float, **params: Any) -> InputPlan:
    """The plan of input method ``method`` at retention ``ratio`` (:mod:`vcast.input_methods`).

    Example: ``vcast.input_plan("fewer_frames", 0.25).frames(32, temporal_patch=2)`` is 8.

    Raises:
        ValueError: naming an unknown method, one that is not an input method, a bad parameter
            or ratio.
    """
    plan_fn = get_method(method)
    if not is_input_method(method):
        raise ValueError(f"method {method!r} is not an input method; input methods: "
                         f"{', '.join(available_input_methods())}")
    check_params(method, params)
    return plan_fn(check_ratio(ratio), **call_params(method, params))


def available_input_methods() -> list[str]:
    """Sorted names of the input methods (:func:`vcast.registry.register_input_method`)."""
    return [name for name in available_methods() if is_input_method(name)]
