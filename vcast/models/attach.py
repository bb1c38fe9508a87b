"""``vcast.models.attach``: make a Hugging Face video LLM prune its video tokens."""

from __future__ import annotations

from typing import Any, Optional

import torch
from torch import nn

from vcast.api import input_method_refusal, select
from vcast.families import all_families, family_of
from vcast.models.adapter import Adapter
from vcast.models.attached import attached_handle, remember
from vcast.models.handle import PruningHandle, llm_plan
from vcast.models.hybrid_methods import config_layer_types, llm_method_refusal
from vcast.models.vision_probe import stand_in_inputs
from vcast.registry import check_params, get_method, is_input_method, is_llm_method, method_inputs
from vcast.validation import check_ratio

# Every family's transformers classes (vcast.families), for messages and the public API.
SUPPORTED_CLASSES: tuple[str, ...] = tuple(name for family in all_families() for name in family.hf_classes)


def adapter_class(model: nn.Module) -> type[Adapter]:
    """The adapter of ``model``'s family (:func:`vcast.families.family_of`); TypeError naming the class
    otherwise."""
    try:
        family = family_of(model)
    except TypeError:
        raise TypeError(
            f"vcast.models.attach does not support {type(model).__name__}; supported: {', '.join(SUPPORTED_CLASSES)} "
            "(load the model with AutoModelForImageTextToText or one of those classes)"
        ) from None
    return family.load("adapter")


def attach(
    model: nn.Module,
    method: str = "vcast",
    ratio: float = 0.25,
    *,
    positions: Optional[str] = None,
    compress_images: bool = False,
    **params: Any,
) -> PruningHandle:
    """Prune video tokens inside ``model`` on every prefill, until ``handle.detach()``.

    Only this instance changes (PyTorch hooks on its modules); no transformers class is touched.

    Args:
        model: a model of a family vcast supports (:func:`vcast.families.all_families`;
            ``docs/models.md`` lists them), loaded with ``AutoModelForImageTextToText``.
        method: a name from :func:`vcast.available_methods`.
        ratio: retention ratio in (0, 1] of each video's tokens.
        positions: position ids of the kept tokens: ``"original"`` (each kept token's own, gaps
            stay; the only choice for MRoPE families) or, for 1-D RoPE families, ``"compact"``
            (re-numbered; LLaVA's default).
        compress_images: also prune images (as one-frame videos). Off by default: images stay whole.
        **params: the method's parameters (see :func:`vcast.method_params`).
    Returns:
        :class:`PruningHandle`: ``.stats`` (the last call), ``.detach()``; also a context manager.
    Raises:
        TypeError: unsupported model class.
        ValueError: naming a bad method, parameter, ratio, position policy, or a model that
            already has a handle attached.
    """
    adapter_cls = adapter_class(model)
    get_method(method)
    if is_input_method(method):
        raise ValueError(input_method_refusal(method, "vcast.models.attach") +
                         ", then attach method='vanilla' to measure the same way")
    refusal = llm_method_refusal(family_of(model), method, params, ratio=ratio,  # in-LLM methods on a hybrid LLM
                                 layer_types=config_layer_types(model.config) or ())
    if refusal is not None:
        raise ValueError(refusal)
    check_params(method, params)
    ratio = check_ratio(ratio)
    if is_llm_method(method):  # its plan depends on the model: check it against this one
        try:
            plan = llm_plan(model, adapter_cls(model, positions, compress_images), method, ratio, params)
        except ValueError as error:
            raise ValueError(f"invalid parameters for method {method!r}: {error}") from None
        if plan.pre_method is not None:
            _check_param_values(plan.pre_method, plan.pre_ratio, plan.pre_params)
    else:
        _check_param_values(method, ratio, params)
    needed = method_inputs(method, **params)
    if needed and compress_images:
        raise ValueError(f"method {method!r} needs {', '.join(needed)} from the vision encoder, "
                         "which vcast reads for videos only; attach with compress_images=False")
    existing = attached_handle(model)
    if existing is not None:
        raise ValueError(f"this {type(model).__name__} already has a vcast handle attached "
                         f"({existing!r}); detach it first")
    handle = PruningHandle(model, adapter_cls(model, positions, compress_images), method, ratio, params)
    remember(model, handle)
    return handle


STAND_IN_FRAMES = 16


def _check_param_values(method: str, ratio: float, params: dict[str, Any]) -> None:
    """Fail at attach, not in the middle of a forward: one selection on a small random video.

    P = 1024 is larger than any model's tokens per frame, and T = 16 temporal units are as many
    as the official FastVID's DySeg needs (T - 1 >= 7), so only values invalid for every real
    video are refused here (``k_min`` above the real P is still caught at the first call).
    """
    generator = torch.Generator().manual_seed(0)
    frames = torch.randn(STAND_IN_FRAMES, 1024, 8, generator=generator)
    inputs = stand_in_inputs(method_inputs(method, **params), STAND_IN_FRAMES, (32, 32), 8,
                             generator)
    try:
        select(frames, ratio, method=method, **params, **inputs)
    except ValueError as error:
        raise ValueError(f"invalid parameters for method {method!r} (checked on a {STAND_IN_FRAMES} x 1024-token "
                         f"test video): {error}") from None

