"""Every ``key=value`` on a sweep's command line is read by the harness, or refused before any job.

Hydra refuses a key that no config has ("To append to your config use +key=...") and then takes
``+key=...`` without complaint, although nothing reads it: the sweep would run what the configs
say, not what was asked (``+pretrained=mine`` ran the default checkpoint). :func:`unread_overrides`
checks each value override against what a cell reads, for every model, method and task of the
grid, and names the right spelling where one exists: the same name elsewhere (``pretrained`` ->
``model.pretrained``), else the closest names by edit distance (``ratoi`` -> ``ratio``,
``model.pretraind`` -> ``model.pretrained``, ``+method.params.tua`` -> ``tau``; :mod:`vcast.spelling`).

What a cell reads: every key of the composed config (the configs under ``configs/`` hold nothing
that is not read), a model argument (``model.args.<key>``) its plugin or its method takes
(:mod:`vcast.eval.plugin_args`), a parameter (``method.params.<key>``) its method takes, the
per-method maps ``variants`` and ``reproduce_params``, and under ``hydra.`` the fields of the chosen
launcher plus SLURM's ``additional_parameters``. Config-group choices (``model=``, ``method=``,
``hydra/launcher=``), ``profile=`` and the method configs and variants of ``variants.`` are
:mod:`vcast.sweep.names`'s to check.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional, Sequence

from omegaconf import DictConfig, OmegaConf

from vcast.spelling import closest, did_you_mean, suggestion
from vcast.sweep.grid import CONFIG_DIR, compose_job, initialized

_FLAGS = ("-m", "--multirun")
_MISSING = object()
# Keys under which any name is read: by submitit (sbatch options), by Hydra (its sweeper's grid, your
# own callbacks), or per method.
_OPEN = ("hydra.launcher.additional_parameters.", "hydra.sweeper.params.", "hydra.callbacks.", "variants.",
         "reproduce_params.")
_SWEPT_GROUPS = ("model", "method", "task")
SLURM_LAUNCHER = "slurm_h100"


def _is_group(key: str) -> bool:
    return "/" in key or (CONFIG_DIR / key).is_dir()


def unread_overrides(words: Sequence[str]) -> list[str]:
    """One line per override of ``words`` (the sweep's command line) that no cell would read,
    naming the key and the right spelling where there is one; empty when every key is read."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    words = [word for word in words if word not in _FLAGS]
    try:
        return _unread(words, OverridesParser.create().parse_overrides(words))
    except (HydraException, OmegaConfBaseException):  # a malformed word or an unknown config: Hydra names it
        return []


def _unread(words: Sequence[str], parsed: Sequence[Any]) -> list[str]:
    groups = [(word, o) for word, o in zip(words, parsed) if _is_group(o.key_or_group)]
    values = [(word, o) for word, o in zip(words, parsed) if not _is_group(o.key_or_group) and not o.is_delete()]
    if not values:
        return []
    found: dict[str, list[tuple[str, str]]] = {}  # word -> (the cell's method, why), in the grid's order
    with initialized():
        suggestions = _Suggestions()
        for cfg in _grid_configs(groups):
            for word, override in values:
                problem = _key_problem(override.key_or_group, cfg, suggestions)
                if problem and all(method != cfg.method.name for method, _ in found.get(word, [])):
                    found.setdefault(word, []).append((str(cfg.method.name), problem))
    lines = []
    for word, cells in found.items():
        others = sorted({method for method, _ in cells[1:]} - {cells[0][0]})
        lines.append(f"{word}: {cells[0][1]}" + (f" (also for method {', '.join(others)})" if others else ""))
    return lines


def _grid_configs(groups: Sequence[tuple[str, Any]]) -> Iterable[DictConfig]:
    """One composed config per value of each swept model / method / task (the command line's, or
    else the experiment's ``hydra.sweeper.params``), the other groups at their first value."""
    fixed = [word for word, o in groups if not o.is_sweep_override()]
    swept = {o.key_or_group: [f"{o.key_or_group}={v}" for v in o.sweep_string_iterator()]
             for _, o in groups if o.is_sweep_override()}
    first = [choices[0] for choices in swept.values()]
    primary = compose_job(fixed + first)
    yield primary
    from hydra.core.override_parser.overrides_parser import OverridesParser

    params = OmegaConf.to_container(primary.hydra.sweeper.params, resolve=False) if primary.hydra.sweeper.get(
        "params") else {}
    for key, value in params.items():
        if key in _SWEPT_GROUPS and key not in swept:
            (override,) = OverridesParser.create().parse_overrides([f"{key}={value}"])
            values = override.sweep_string_iterator() if override.is_sweep_override() else [str(value)]
            swept[key] = [f"{key}={v}" for v in values]
    for key, choices in swept.items():
        others = [word for word in first if not word.startswith(f"{key}=")]
        for choice in choices[1:] if choices and choices[0] in first else choices:
            yield compose_job(fixed + others + [choice])


def _method_params(cfg: DictConfig) -> tuple[str, ...]:
    """The parameters of the cell's method (with ``variant``); empty for a name not registered."""
    from vcast.registry import method_params

    try:
        return tuple(dict.fromkeys((*method_params(str(cfg.method.id)), "variant")))
    except ValueError:
        return ()  # pre-flight names the unknown method


def _key_problem(key: str, cfg: DictConfig, suggestions: "_Suggestions") -> Optional[str]:
    """Why override ``key`` would be read by nothing in the cell of ``cfg``, or None."""
    from vcast.eval.plugin_args import SWEEP_OWNED, model_arg_problem

    path = key.split(".")
    if key.startswith(_OPEN):
        return None
    if path[:2] == ["model", "args"] and len(path) == 3:
        problem = model_arg_problem(str(cfg.model.plugin), path[2], _method_params(cfg))
        hint = did_you_mean(path[2], _model_args(cfg)) if problem and path[2] not in SWEEP_OWNED else ""
        return f"{problem}; {hint}" if hint else problem
    if path[:2] == ["method", "params"] and len(path) == 3:
        params = _method_params(cfg)
        if params and path[2] not in params:
            hint = did_you_mean(path[2], params)
            return (f"method {cfg.method.id!r} (config {cfg.method.name!r}) takes no parameter {path[2]!r}; "
                    f"it takes {', '.join(params)}" + (f"; {hint}" if hint else ""))
        return None
    if OmegaConf.select(cfg, key, default=_MISSING, throw_on_resolution_failure=False) is not _MISSING:
        return None
    if path[0] == "hydra":
        launcher = str(cfg.hydra.launcher.get("_target_", "")).rsplit(".", 1)[-1]
        hint = suggestion(_siblings(key, cfg))
        if not hint and path[:2] == ["hydra", "launcher"]:
            hint = suggestions.launcher_field(path[-1])
        return f"the launcher {launcher} has no {path[-1]!r}, so nothing reads {key!r}" + (f"; {hint}" if hint else "")
    found = suggestions.spellings(key, cfg)
    return (f"nothing reads {key!r}" + (f"; {suggestion(found)}" if found else
                                        "; configs/README.md lists the keys a cell reads"))


def _model_args(cfg: DictConfig) -> list[str]:
    """The model arguments a cell may set: its plugin's (but those the sweep sets) and its method's parameters."""
    from vcast.eval.plugin_args import PLUGIN_ARGS, SWEEP_OWNED

    plugin_args = PLUGIN_ARGS.get(str(cfg.model.plugin), ())
    return [name for name in (*plugin_args, *_method_params(cfg)) if name not in SWEEP_OWNED]


def _siblings(key: str, cfg: DictConfig) -> list[str]:
    """The keys next to ``key`` (under the same parent in ``cfg``) that it is probably a misspelling of."""
    parent, _, name = key.rpartition(".")
    node = OmegaConf.select(cfg, parent, default=None, throw_on_resolution_failure=False) if parent else cfg
    if not isinstance(node, DictConfig):
        return []
    return [f"{parent}.{near}" if parent else near for near in closest(name, [str(k) for k in node])]


class _Suggestions:
    """Where a misplaced or misspelled key belongs: the same name elsewhere in the config, a model
    argument, a method parameter, a key the sweep sets from another one, or a SLURM launcher field;
    else the closest of these by edit distance, next to the key first."""

    def __init__(self) -> None:
        self._slurm: Optional[list[str]] = None

    def slurm_fields(self) -> list[str]:
        """The fields of ``hydra/launcher=slurm_h100``, in the config's order."""
        if self._slurm is None:
            slurm = compose_job([f"hydra/launcher={SLURM_LAUNCHER}"]).hydra.launcher
            self._slurm = [str(key) for key in slurm]
        return self._slurm

    def launcher_field(self, name: str) -> Optional[str]:
        """The hint for launcher field ``name`` that only the SLURM launcher has (or a misspelling of one)."""
        if name in self.slurm_fields():
            return f"it is a field of hydra/launcher={SLURM_LAUNCHER}: add that override"
        near = closest(name, self.slurm_fields(), limit=1)
        return (f"did you mean {near[0]}, a field of hydra/launcher={SLURM_LAUNCHER}? add that override"
                if near else None)

    def spellings(self, key: str, cfg: DictConfig) -> list[str]:
        """The keys ``key`` (one that nothing reads) was probably meant as, best first."""
        from vcast.eval.plugin_args import SWEEP_OWNED

        name = key.rsplit(".", 1)[-1]
        found = self._elsewhere(name, cfg)
        if found:
            return found
        found = _siblings(key, cfg)
        if found:
            return found
        names = [path.rsplit(".", 1)[-1] for path in _leaf_paths(cfg)]
        for near in closest(name, [*names, *_model_args(cfg), *SWEEP_OWNED, *self.slurm_fields()]):
            found += [spelled for spelled in self._elsewhere(near, cfg) if spelled not in found]
        return found[:3]

    def _elsewhere(self, name: str, cfg: DictConfig) -> list[str]:
        """Where a key called ``name`` is read."""
        from vcast.eval.plugin_args import PLUGIN_ARGS, SWEEP_OWNED

        found = [path for path in _leaf_paths(cfg) if path.rsplit(".", 1)[-1] == name]
        plugin_args = PLUGIN_ARGS.get(str(cfg.model.plugin), ())
        if name in SWEEP_OWNED and SWEEP_OWNED[name] and SWEEP_OWNED[name] not in found:
            found.append(SWEEP_OWNED[name])
        elif name in plugin_args and name not in SWEEP_OWNED and f"model.args.{name}" not in found:
            found.append(f"+model.args.{name}")
        if name in _method_params(cfg) and f"method.params.{name}" not in found:
            found.append(f"+method.params.{name}")
        if name in self.slurm_fields():
            found.append(f"hydra/launcher={SLURM_LAUNCHER} hydra.launcher.{name}")
        return found


def _leaf_paths(cfg: DictConfig) -> list[str]:
    """Every key path of ``cfg`` but Hydra's own node, depth first, in the config's order."""
    paths: list[str] = []

    def walk(node: Any, prefix: str) -> None:
        for key in node.keys():
            path = f"{prefix}{key}"
            paths.append(path)
            value = node._get_node(key)
            if isinstance(value, DictConfig) and not value._is_missing() and not value._is_none():
                walk(value, f"{path}.")

    walk(cfg, "")
    return [path for path in paths if not path.startswith("hydra")]
