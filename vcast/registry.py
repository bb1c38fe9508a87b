"""Compressors by name. A compressor is ``fn(frames [T, P, D], ratio, **params) -> Selection``.

V-CAST registers itself from :mod:`vcast.methods`; the baselines register from the top-level
``baselines`` package, which is imported the first time a name is looked up.

A compressor may also need **model inputs** beyond the tokens, declared at registration and
supplied by the adapters (only to methods that declare them, so nothing is computed for the
others). They are keyword-only arguments of the compressor, not user parameters:

- ``grid``: ``(h, w)``, the token grid of one frame (``h * w == P``).
- ``vision_attention``: float ``[T, P]``, the attention each token received in the vision
  encoder's feature layer, averaged over heads and queries (column mean), pooled onto the
  LLM token grid like the tokens themselves.
- ``vision_keys``: float ``[T, P, d]``, that layer's keys averaged over heads (pre-projector
  features, VisionZip's merge metric), pooled the same way.
- ``vision_mean_query_attention``: float ``[T, P]`` in the model's dtype, per temporal patch the
  attention of its mean query to each merge unit's mean key in the vision encoder's last block,
  averaged over heads (FastVID's Qwen2.5-VL release, :func:`vcast.models.vision_probe.mean_query_attention`).
  Only some families' adapters compute it; ``attach`` refuses a method that needs it elsewhere.

A method's inputs may depend on its variant (``variant_inputs``) and on one of its parameters
(``param_inputs``): :func:`method_inputs` takes the parameters a run uses.

An **in-LLM method** works inside the language model, so it registers a *planner* instead
(:func:`register_llm_method`): ``planner(ratio, llm, **params) -> LLMPlan``
(:mod:`vcast.models.llm_plan`). It shares the names, parameters and checks below, runs under
:func:`vcast.models.attach` only, and declares the model inputs of its pre-LLM step.

An **input method** spends the budget on what the model is given (fewer sampled frames, a lower
resolution) and prunes nothing, so it registers ``fn(ratio, **params) -> InputPlan``
(:func:`register_input_method`, :mod:`vcast.input_methods`). It shares the names and checks; the
lmms-eval plugins and the sweep run it, :func:`vcast.input_plan` gives its plan to a library user.
"""

from __future__ import annotations

import importlib
import inspect
import logging
from dataclasses import replace
from typing import Any, Callable, Optional

from vcast.method_facts import MethodFacts
from vcast.selection import Selection
from vcast.spelling import did_you_mean
from vcast.variants import PAPER, VARIANTS, check_variant

logger = logging.getLogger(__name__)

Compressor = Callable[..., Selection]

_REGISTRY: dict[str, Compressor] = {}
_INPUTS: dict[str, tuple[str, ...]] = {}
_IN_LLM: set[str] = set()
_INPUT: set[str] = set()
_VARIANTS: dict[str, tuple[str, ...]] = {}
_VARIANT_INPUTS: dict[str, dict[str, tuple[str, ...]]] = {}
# (variant, parameter, value) -> the inputs of that variant run with that parameter value.
ParamInputs = dict[tuple[str, str, Any], tuple[str, ...]]
_PARAM_INPUTS: dict[str, ParamInputs] = {}
_FACTS: dict[str, MethodFacts] = {}
MODEL_INPUTS = ("grid", "vision_attention", "vision_keys", "vision_mean_query_attention")
_PLUGIN_PACKAGES = ("vcast.methods", "baselines")
_plugins_loaded = False


def register_method(name: str, inputs: tuple[str, ...] = (), variants: tuple[str, ...] = (PAPER,),
                    variant_inputs: Optional[dict[str, tuple[str, ...]]] = None,
                    facts: Optional[MethodFacts] = None,
                    param_inputs: Optional[ParamInputs] = None) -> Callable[[Compressor], Compressor]:
    """Decorator: make ``fn`` available as ``vcast.select(..., method=name)``.

    ``inputs``: the model inputs (names from ``MODEL_INPUTS``) the adapters must supply; each is
    also a keyword-only argument of ``fn``.
    ``variants``: the :mod:`vcast.variants` it has, ``"paper"`` first; a method with more than
    ``"paper"`` takes them as its keyword parameter ``variant``.
    ``variant_inputs``: variants that need other model inputs than ``inputs`` (e.g. the VidCom2
    Qwen ports rank by token norms and need none), so the adapters compute nothing unused.
    ``facts``: its display name, paper and the code each variant follows (:mod:`vcast.method_facts`);
    a method registered without them is shown under its name.
    ``param_inputs``: ``{(variant, parameter, value): inputs}``, the inputs of a variant run with
    that value of one of its parameters, ahead of ``variant_inputs`` (FastVID's ``official``
    ``version="qwen2_5_vl"`` ranks by that release's own saliency).
    """
    variant_inputs = dict(variant_inputs or {})
    param_inputs = dict(param_inputs or {})
    facts = facts or MethodFacts()
    facts.check(name, tuple(variants))
    unknown = sorted(set(inputs).union(*variant_inputs.values(), *param_inputs.values()) - set(MODEL_INPUTS))
    if unknown:
        raise ValueError(f"method {name!r} declares unknown model input(s) {unknown}; known: {MODEL_INPUTS}")
    _check_variants_declared(name, variants)
    stray = sorted(set(variant_inputs) - set(variants)) + sorted(
        {variant for variant, _, _ in param_inputs} - set(variants))
    if stray:
        raise ValueError(f"method {name!r} declares inputs for variants {stray} it does not have")

    def decorator(fn: Compressor) -> Compressor:
        if name in _REGISTRY and _REGISTRY[name] is not fn:
            raise ValueError(f"method {name!r} is already registered by {_REGISTRY[name].__module__}")
        accepted = inspect.signature(fn).parameters
        every_input = set(inputs).union(*variant_inputs.values(), *param_inputs.values())
        missing = sorted(i for i in every_input if i not in accepted)
        if missing:
            raise ValueError(f"method {name!r} declares inputs {missing} that {fn.__name__} does not take")
        unknown_params = sorted({param for _, param, _ in param_inputs if param not in accepted})
        if unknown_params:
            raise ValueError(f"method {name!r} declares inputs for parameters {unknown_params} that "
                             f"{fn.__name__} does not take")
        if len(variants) > 1 and "variant" not in inspect.signature(fn).parameters:
            raise ValueError(f"method {name!r} declares variants {variants} but {fn.__name__} takes no 'variant'")
        _REGISTRY[name] = fn
        _INPUTS[name] = tuple(inputs)
        _VARIANTS[name] = tuple(variants)
        _VARIANT_INPUTS[name] = {variant: tuple(needed) for variant, needed in variant_inputs.items()}
        _PARAM_INPUTS[name] = {key: tuple(needed) for key, needed in param_inputs.items()}
        _FACTS[name] = facts
        return fn

    return decorator


def _check_variants_declared(name: str, variants: tuple[str, ...]) -> None:
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown or not variants or variants[0] != PAPER:
        raise ValueError(f"method {name!r} declares variants {variants}; they must start with {PAPER!r} "
                         f"and come from {VARIANTS}")


def register_llm_method(name: str, inputs: tuple[str, ...] = (), variants: tuple[str, ...] = (PAPER,),
                        facts: Optional[MethodFacts] = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: make the planner ``fn(ratio, llm, **params) -> LLMPlan`` available as
    ``vcast.models.attach(model, method=name)``.

    ``inputs``: the model inputs its pre-LLM compressor needs (the adapters supply them to that
    compressor; the planner does not take them). ``variants``, ``facts``: as in :func:`register_method`.
    """
    register = register_method(name, variants=variants, facts=facts)

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        unknown = sorted(set(inputs) - set(MODEL_INPUTS))
        if unknown:
            raise ValueError(f"method {name!r} declares unknown model input(s) {unknown}; known: {MODEL_INPUTS}")
        register(fn)
        _INPUTS[name] = tuple(inputs)
        _IN_LLM.add(name)
        return fn

    return decorator


def register_input_method(name: str, facts: Optional[MethodFacts] = None
                          ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: make ``fn(ratio, **params) -> InputPlan`` (:mod:`vcast.input_methods`) available as
    ``method=name`` to the lmms-eval plugins and the sweep, and through :func:`vcast.input_plan`.
    ``facts``: as in :func:`register_method`."""
    register = register_method(name, facts=facts)

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        register(fn)
        _INPUT.add(name)
        return fn

    return decorator


def is_input_method(name: str) -> bool:
    """Whether ``name`` changes the model's input instead of its tokens (see :func:`register_input_method`)."""
    get_method(name)
    return name in _INPUT


def is_token_method(name: str) -> bool:
    """Whether ``name`` is a compressor that ``vcast.select`` runs on tokens (neither in-LLM nor input)."""
    get_method(name)
    return name not in _IN_LLM and name not in _INPUT


def is_llm_method(name: str) -> bool:
    """Whether ``name`` works inside the language model (a planner, see :func:`register_llm_method`)."""
    get_method(name)
    return name in _IN_LLM


def method_kind(name: str) -> str:
    """Where method ``name`` works: ``"vision"`` (on the vision tokens before the language model),
    ``"llm"`` (inside the language model) or ``"input"`` (on what the model is given)."""
    get_method(name)
    return "llm" if name in _IN_LLM else "input" if name in _INPUT else "vision"


def method_facts(name: str) -> MethodFacts:
    """The facts method ``name`` declared at registration (:mod:`vcast.method_facts`), with its
    display name filled in (the registered name when it declared none)."""
    get_method(name)
    facts = _FACTS[name]
    return facts if facts.display else replace(facts, display=name)


def vllm_methods() -> tuple[str, ...]:
    """The registered methods the vLLM backend runs (``facts.vllm``), sorted."""
    return tuple(name for name in available_methods() if _FACTS[name].vllm)


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    for package in _PLUGIN_PACKAGES:
        try:
            importlib.import_module(package)
        except ModuleNotFoundError as error:
            if error.name != package:
                raise
            logger.debug("compressor package %s is not installed", package)
    # Only once every import worked: a broken plugin keeps failing loudly instead of vanishing.
    _plugins_loaded = True


def available_methods() -> list[str]:
    """Sorted names usable as ``method=``."""
    _load_plugins()
    return sorted(_REGISTRY)


def get_method(name: str) -> Compressor:
    """The compressor registered as ``name``; ValueError naming the closest names and the choices otherwise."""
    _load_plugins()
    if name not in _REGISTRY:
        hint = did_you_mean(str(name), sorted(_REGISTRY))
        raise ValueError(f"unknown method {name!r}; {hint + ' ' if hint else ''}"
                         f"available: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]


def method_inputs(name: str, /, variant: Optional[str] = None, **params: Any) -> tuple[str, ...]:
    """The model inputs (see the module docstring) that method ``name`` needs (in ``variant``,
    when that variant needs others; with ``params``, the run's other parameters, when one of
    them changes them). Pass a run's parameters whole: ``method_inputs(name, **params)``."""
    get_method(name)
    for (for_variant, param, value), needed in _PARAM_INPUTS.get(name, {}).items():
        if for_variant == variant and param in params and params[param] == value:
            return needed
    return _VARIANT_INPUTS.get(name, {}).get(variant, _INPUTS[name])


def _all_inputs(name: str) -> set[str]:
    """Every model input method ``name`` takes in any variant or with any parameters (none for an
    in-LLM method, whose planner takes none)."""
    if name in _IN_LLM:
        return set()
    return set(_INPUTS[name]).union(*_VARIANT_INPUTS.get(name, {}).values(), *_PARAM_INPUTS.get(name, {}).values())


def method_variants(name: str) -> tuple[str, ...]:
    """The :mod:`vcast.variants` method ``name`` has, ``"paper"`` first."""
    get_method(name)
    return _VARIANTS[name]


def method_params(name: str) -> dict[str, Any]:
    """The keyword parameters of method ``name`` with their defaults (model inputs excluded)."""
    signature = inspect.signature(get_method(name))
    inputs = _all_inputs(name)
    return {
        p.name: p.default
        for p in signature.parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in inputs
    }


def check_params(name: str, params: dict[str, Any], allow_inputs: bool = False) -> None:
    """ValueError naming any parameter that method ``name`` does not take, or a ``variant`` it
    does not have (every method accepts ``variant="paper"``).

    Model inputs are refused unless ``allow_inputs`` (``vcast.select`` takes them from the caller;
    under ``attach`` the adapter supplies them).
    """
    accepted = method_params(name)
    if "variant" in params:  # every method takes it; one with only "paper" takes nothing else
        check_variant(name, params["variant"], _VARIANTS[name])
        accepted = {**accepted, "variant": PAPER}
    inputs = _all_inputs(name)
    given_inputs = sorted(set(params) & inputs)
    if given_inputs and not allow_inputs:
        raise ValueError(f"{', '.join(map(repr, given_inputs))} of method {name!r} come from the model "
                         "(the adapter supplies them); they are not parameters")
    unknown = sorted(set(params) - set(accepted) - set(inputs))
    if unknown:
        raise ValueError(
            f"unknown parameter(s) {', '.join(map(repr, unknown))} for method {name!r}; "
            f"accepted: {', '.join(accepted) or 'none'}"
        )


def call_params(name: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` as method ``name``'s function takes them: ``variant`` (checked by
    :func:`check_params`) is dropped for a method that has only ``"paper"``."""
    if "variant" in params and "variant" not in inspect.signature(get_method(name)).parameters:
        return {key: value for key, value in params.items() if key != "variant"}
    return params
