"""Which in-LLM methods a hybrid language model can host, with which parameters, and why not: one
answer for ``attach``, the sweep's pre-flight, the GPU kit and the docs' family table.

A hybrid language model (``config.layer_types`` names layers that are not softmax attention; the
family declares ``hybrid_attention``, :class:`vcast.families.family.Family`) has decoder layers whose
token mixer is linear attention (Gated DeltaNet): a recurrent state and a short-convolution window
carried through the sequence instead of a key-value cache, and no attention map.

Every method that prunes *before* the language model runs on such a model unchanged: each
linear-attention layer builds its state from the pruned sequence at prefill, decoding continues
from it, and the kept tokens keep their original positions in the softmax layers.

The **in-LLM methods** (:func:`vcast.registry.is_llm_method`) drop or merge tokens between decoder
layers (:mod:`vcast.models.layer_drops`, which handles hybrid decoders: the linear layers after a
drop get the kept tokens and their own 2-D padding mask, and build their state from the kept
tokens; at decode they are left alone, each softmax layer is re-aligned from its own KV cache).
A plan applies when :func:`vcast.models.llm_plan.hybrid_problems` finds nothing:

1. every stage that chooses by attention reads it at a softmax-attention layer (the layer before
   the drop, ``K - 1``, or PDrop's layer ``K`` itself): a linear layer has no attention scores;
2. every drop comes after the first softmax layer: transformers reads each decoding step's cache
   length and mask size from that layer's KV cache (``Cache.get_seq_length()`` and
   ``get_mask_sizes(q, 0)`` skip the linear layers), so it must hold the whole prompt.

So the answer depends on the method's parameters and the model's ``layer_types``. With three
linear layers per softmax layer (softmax at ``3, 7, 11, ...``), per method:

- **FastV**, **FlashVID** (its in-LLM step), **HoliTom's in-LLM merge**: one stage before ``layer``
  = ``K``, scored at ``K - 1``: runs for ``K = 4, 8, 12, ...`` (FastV's default ``K = 2`` reads
  layer 1, linear: refused, naming ``layer=4``).
- **PruneVid**: one stage after ``selected_layer`` = ``S``, scored at ``S`` (pre-RoPE, non-causal):
  runs for ``S = 3, 7, 11, ...``.
- **SparseVLM**: a stage after each of ``layers`` = ``l``, scored at ``l``: runs when every ``l`` is
  in ``3, 7, 11, ...``.
- **PDrop**: a stage before each of ``layer_list`` = ``K``, scored with layer ``K``'s own weights:
  runs when every ``K`` is in ``7, 11, 15, ...`` (a softmax layer, not the first: rule 2).
- **FrameFusion**: a stage at every boundary ``1 .. L - 1``; while its similarity merge (cosine
  similarity, no attention) goes on it merges, and at the boundary where the merge ends (data
  dependent) it prunes by the attention of the layer just run. No parameter moves its stages off
  the linear layers (and its merges before the first softmax layer break rule 2): always refused.

:func:`llm_method_refusal` builds the method's plan for the model's layer types and says which stage
fails, at which layer of which type, and the nearest values of the method's layer parameter that
work (:data:`LAYER_PARAMS`); the layer types come from the loaded model (``attach``), a checkpoint's
``config.json`` or a published model's config (:func:`checkpoint_layer_types`, the sweep), or, when
none is given, the family's published models.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from vcast.families import get_family
from vcast.models.llm_plan import LLMInfo, LLMPlan, hybrid_problems, layer_span
from vcast.registry import call_params, get_method, is_llm_method
from vcast.validation import check_ratio

DEFAULT_RATIO = 0.25  # attach's default; a plan's stage layers do not depend on it

# method -> (its layer parameter, whether it is a list, that value minus the layer the stage scores at)
LAYER_PARAMS: dict[str, tuple[str, bool, int]] = {
    "fastv": ("layer", False, 1),
    "flashvid": ("layer", False, 1),
    "holitom_llm": ("layer", False, 1),
    "prunevid": ("selected_layer", False, 0),
    "sparsevlm": ("layers", True, 0),
    "pdrop": ("layer_list", True, 0),
}


def config_layer_types(config: Any) -> Optional[tuple[str, ...]]:
    """``layer_types`` of a config (a transformers config or its dict; the text config's for a
    multimodal one), or None when it names none."""
    if isinstance(config, Mapping):
        text = config.get("text_config") or config
        types = text.get("layer_types")
    else:
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        types = getattr(text, "layer_types", None)
    return None if not types else tuple(types)


def checkpoint_layer_types(pretrained: str, family: Any = None) -> Optional[tuple[str, ...]]:
    """The language model's ``layer_types`` of checkpoint ``pretrained`` without loading it: its
    ``config.json`` (a local folder, or a Hub id in the local cache) read by transformers'
    ``AutoConfig``, else the published config of ``family`` whose repository it names; None when
    unknown."""
    config = None
    try:
        from transformers import AutoConfig

        local = Path(pretrained)
        if local.is_dir() and (local / "config.json").is_file():
            config = AutoConfig.from_pretrained(str(local))
        elif not local.exists():
            config = AutoConfig.from_pretrained(pretrained, local_files_only=True)
    except (OSError, ValueError, KeyError):  # not found, not a config (a bad JSON is a ValueError too)
        config = None
    if config is not None:
        return config_layer_types(config)
    if family is None:
        return None
    family = get_family(family) if isinstance(family, str) else family
    published = next((model for model in family.published if model.repo == pretrained), None)
    return None if published is None else config_layer_types(family.load("real_size")(published.arch))


def _layer_values(method: str, plan: LLMPlan) -> Any:
    """The value of ``method``'s layer parameter that gave ``plan`` (list or int)."""
    name, is_list, offset = LAYER_PARAMS[method]
    values = [stage.score_layer + offset for stage in plan.stages if stage.queries is not None]
    return values if is_list else values[0]


def _working_values(method: str, plan: LLMPlan, llm: LLMInfo) -> list[int]:
    """The values of ``method``'s layer parameter that put a stage like ``plan``'s on a softmax
    layer after the first one (see the module docstring)."""
    _, _, offset = LAYER_PARAMS[method]
    stage = next(stage for stage in plan.stages if stage.queries is not None)
    delta = stage.layer - stage.score_layer  # 1: the layer just run, 0: the next layer's weights
    softmax = llm.softmax_layers
    return [layer + offset for layer in softmax
            if 1 <= layer + delta <= llm.num_layers - 1 and layer + delta > softmax[0]]


def _fix(method: str, plan: LLMPlan, llm: LLMInfo) -> str:
    """What would work instead: the nearest values of the method's layer parameter, or why none."""
    if method not in LAYER_PARAMS or not any(stage.queries is not None for stage in plan.stages):
        return (f"no parameter of {method!r} moves its stages onto softmax layers; prune before the language "
                "model instead")
    name, is_list, _ = LAYER_PARAMS[method]
    working = _working_values(method, plan, llm)
    if not working:
        return (f"no value of {name} puts its stages on a softmax layer after the first of this "
                f"{llm.num_layers}-layer model; prune before the language model instead")

    def nearest(value: int) -> int:
        return min(working, key=lambda candidate: (abs(candidate - value), candidate))

    given = _layer_values(method, plan)
    fixed = sorted({nearest(value) for value in given}) if is_list else nearest(given)
    return f"nearest values that work: {name}={fixed} (any of {layer_span(working)})"


def _refusal(family: Any, method: str, params: Mapping[str, Any], ratio: float, layer_types: Sequence[str],
             model: str) -> Optional[str]:
    llm = LLMInfo.of(family, len(layer_types), layer_types)
    if not llm.hybrid:
        return None
    try:
        check_ratio(ratio)
    except ValueError:
        return None  # attach and the sweep name a bad ratio themselves
    try:
        plan = get_method(method)(ratio, llm, **call_params(method, dict(params)))
    except TypeError:
        return None  # an unknown parameter: check_params names it
    except ValueError as error:  # no plan for this model (FlashVID has no defaults for the family): attach's words
        return f"invalid parameters for method {method!r}: {error}"
    problems = hybrid_problems(plan, llm)
    if not problems:
        return None
    given = f" ({LAYER_PARAMS[method][0]}={_layer_values(method, plan)})" if method in LAYER_PARAMS else ""
    more = f"; {len(problems) - 1} more of its stages alike" if len(problems) > 1 else ""
    return (f"method {method!r}{given} cannot run inside the hybrid language model of {model}, where most "
            f"layers are linear attention (Gated DeltaNet) with no attention scores to choose by: {problems[0]}"
            f"{more}; {_fix(method, plan, llm)}")


def llm_method_refusal(family: Any, method: str, params: Optional[Mapping[str, Any]] = None, *,
                       ratio: float = DEFAULT_RATIO, layer_types: Optional[Sequence[str]] = None) -> Optional[str]:
    """Why ``method`` with ``params`` cannot run on a model of ``family`` (a
    :class:`~vcast.families.family.Family` or a family name) whose layers are ``layer_types``, or
    None when it can.

    Only in-LLM methods on hybrid language models are refused (see the module docstring). Without
    ``layer_types``, a hybrid family is judged on each of its published models. A ``ValueError``
    of the planner on a hybrid model is returned as the refusal, in ``attach``'s words (FlashVID:
    no defaults for the family; the sweep's pre-flight then names it before any job); an unknown
    parameter or a bad ratio gives None (``check_params`` / ``check_ratio`` name it). An unknown
    method raises ``ValueError`` (:func:`vcast.registry.get_method`).
    """
    if isinstance(family, str):
        family = get_family(family)
    if not is_llm_method(method):
        return None
    params = dict(params or {})
    if layer_types is not None:
        return _refusal(family, method, params, ratio, tuple(layer_types), f"this {family.display} model")
    if not family.hybrid_attention:
        return None
    for published in family.published:
        types = config_layer_types(family.load("real_size")(published.arch))
        refusal = None if types is None else _refusal(family, method, params, ratio, types, published.display)
        if refusal is not None:
            return refusal
    return None
