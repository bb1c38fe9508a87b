"""From a composed Hydra config to a :class:`CellSpec`, and the checks that need no subprocess."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from vcast.sweep.cell import REPRODUCE, CellSpec
from vcast.sweep.profiles import resolve_variant
from vcast.validation import check_int, check_ratio
from vcast.variants import PAPER


def _container(node: Any) -> dict[str, Any]:
    return dict(OmegaConf.to_container(node, resolve=True)) if node is not None else {}


def _local_or_hub(path: str) -> str:
    """A path that exists locally (against the launch folder, then the vcast repository) becomes
    absolute, since cells run in their own folder; else it stays as given (a Hub id)."""
    from hydra.utils import get_original_cwd

    from vcast.sweep.environment import resolve_pretrained

    try:
        cwd = Path(get_original_cwd())
    except ValueError:  # composed outside the sweep app (dry run, status)
        cwd = Path.cwd()
    return resolve_pretrained(path, cwd)


def spec_from_config(cfg: DictConfig, experiment: str) -> CellSpec:
    """The cell of ``cfg``; ValueError naming the bad value of a malformed grid point.

    A method with ``fixed_ratio`` (vanilla: 1.0) ignores ``ratio``, so every ratio of a grid
    names the same ``r1`` cell (it runs once; the others find it finished or busy).
    """
    method = cfg.method
    ratio = check_ratio(cfg.ratio)  # checked even where fixed_ratio overrides it: the grid is wrong
    if method.get("fixed_ratio") is not None:
        ratio = check_ratio(method.fixed_ratio)
    frames = check_int("frames", cfg.frames, 1)
    processes = check_int("processes", cfg.processes, 1)
    tasks = list(cfg.task.tasks)
    if not tasks:
        raise ValueError(f"task {cfg.task.name!r} lists no lmms-eval tasks")
    include = [str(Path(p).resolve()) for p in cfg.get("include_paths") or []]
    params = _container(method.get("params"))
    profile = str(cfg.get("profile", REPRODUCE))
    variant = resolve_variant(profile, method.name, params.pop("variant", None), _container(cfg.get("variants")))
    if profile == REPRODUCE:
        # The reproduction variant's own settings for this table (e.g. HoliTom's SPATIAL_TOKENS=50).
        params.update(_container(cfg.get("reproduce_params")).get(method.name) or {})
    if variant != PAPER or len(_variants_of(method.id)) > 1:
        params["variant"] = variant  # methods with one variant take no such parameter
    return CellSpec(
        experiment=experiment, model=cfg.model.name, plugin=cfg.model.plugin,
        pretrained=_local_or_hub(str(cfg.model.pretrained)), prompt_key=cfg.model.prompt_key,
        model_args=_container(cfg.model.get("args")), method=method.name, method_id=method.id,
        method_params=params, ratio=ratio, frames=frames, task=cfg.task.name,
        lmms_tasks=tasks, batch_size=int(cfg.batch_size), processes=processes,
        limit=None if cfg.limit is None else float(cfg.limit), seed=int(cfg.seed), include_paths=include,
        variant=variant, profile=profile,
    )


def _variants_of(method_id: str) -> tuple[str, ...]:
    """The method's variants; ``("paper",)`` for a name that is not registered (preflight says so)."""
    from vcast.registry import method_variants

    try:
        return method_variants(method_id)
    except ValueError:
        return (PAPER,)


def preflight(spec: CellSpec) -> Optional[str]:
    """Why ``spec`` cannot run at all (so no job is spent on it), or None."""
    import vcast
    from vcast.eval.plugin_args import check_frames, model_args_problem
    from vcast.families import family_for_plugin
    from vcast.models.hybrid_methods import checkpoint_layer_types, llm_method_refusal
    from vcast.registry import check_params, is_input_method, is_llm_method, method_params, method_variants

    if spec.method_id not in vcast.available_methods():
        return (f"method {spec.method_id!r} (config {spec.method!r}) is not implemented in this version of vcast; "
                f"available: {', '.join(vcast.available_methods())}")
    if spec.variant not in method_variants(spec.method_id):
        return (f"method {spec.method_id!r} (config {spec.method!r}) has no variant {spec.variant!r} "
                f"(profile {spec.profile!r}); it has: {', '.join(method_variants(spec.method_id))}")
    try:
        check_params(spec.method_id, spec.method_params)
        check_frames(spec.plugin, spec.frames)
    except ValueError as error:
        return str(error)
    problem = model_args_problem(spec.plugin, spec.model_args, tuple(method_params(spec.method_id)))
    if problem is not None:
        return problem
    family = family_for_plugin(spec.plugin)
    layer_types = (checkpoint_layer_types(spec.pretrained, family)  # a hybrid LLM: per method, params and layers
                   if family is not None and family.hybrid_attention and is_llm_method(spec.method_id) else None)
    refusal = None if family is None else llm_method_refusal(family, spec.method_id, spec.method_params,
                                                             ratio=spec.ratio, layer_types=layer_types)
    if refusal is not None:
        return refusal
    if family is not None:  # model inputs the family's adapter cannot compute (vcast.models.vision_probe)
        from vcast.models.vision_probe import supplied_problem
        from vcast.registry import method_inputs

        params = {key: value for key, value in spec.method_params.items() if key != "variant"}
        needed = method_inputs(spec.method_id, spec.variant, **params)
        problem = supplied_problem(family.load("adapter"), family.display, needed, spec.method_id, spec.method_params)
        if problem is not None:
            return problem
    if is_input_method(spec.method_id):
        from vcast.api import input_plan
        from vcast.eval.input_budget import input_plan_refusal

        return input_plan_refusal(spec.plugin, input_plan(spec.method_id, spec.ratio, **spec.method_params))
    return None
