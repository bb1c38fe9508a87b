"""A sweep's cells before any job runs: Hydra's basic-sweeper expansion, each job's config composed.

The grid points of ``python -m vcast.sweep experiment=X -m`` are the cartesian product of the
experiment's ``hydra.sweeper.params`` and the command line's overrides (a command-line key
replaces the same key of the params, in its place), in Hydra's order. The sweep runs one job per
distinct cell of them (:func:`distinct_jobs`; the sweeper ``hydra_plugins.vcast_sweeper`` launches
exactly these), so job ``i`` here is the launcher's job ``i`` and SLURM's array task ``i``.
Pre-flight, the dry run, the sweep and ``status --grid`` all read the grid through this module.
"""

from __future__ import annotations

import functools
import itertools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from omegaconf import DictConfig, OmegaConf

logger = logging.getLogger("vcast.sweep")

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"
CONFIG_NAME = "sweep"
# Command-line words that are flags of the Hydra app, not overrides.
_FLAGS = ("-m", "--multirun")


@dataclass(frozen=True)
class GridJob:
    """Job ``num`` of a sweep: its overrides, and its cell (``spec``) or why it has none (``error``)."""

    num: int
    overrides: tuple[str, ...]
    spec: Optional[Any] = None     # vcast.sweep.cell.CellSpec
    error: Optional[str] = None
    data: Optional[dict[str, Any]] = None  # the task config's ``data`` node (vcast.sweep.environment)


def job_overrides(sweeper_params: Mapping[str, Any], arguments: Sequence[str]) -> list[list[str]]:
    """Every job's overrides, as Hydra's basic sweeper expands them.

    ``sweeper_params``: ``hydra.sweeper.params`` (``{"ratio": "0.15,0.25", ...}``);
    ``arguments``: the command line's overrides (``["experiment=demo", "method=vcast,fastv"]``).
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    words = [f"{key}={value}" for key, value in (sweeper_params or {}).items()]
    words += [word for word in arguments if word not in _FLAGS]
    parsed = OverridesParser.create().parse_overrides(words)
    choices: dict[str, list[str]] = {}
    for override in parsed:
        key = override.get_key_element()
        if override.is_sweep_override():
            values = [f"{key}={value}" for value in override.sweep_string_iterator()]
        else:
            values = [f"{key}={override.get_value_element_as_str()}"]
        choices[key] = values  # a later word wins but keeps the key's first place, as in Hydra
    return [list(job) for job in itertools.product(*choices.values())]


def compose_job(overrides: Sequence[str]) -> DictConfig:
    """The config of one job (with its ``hydra`` node); needs an initialised Hydra
    (inside the sweep app, or :func:`initialized`)."""
    from hydra import compose

    return compose(config_name=CONFIG_NAME, overrides=list(overrides), return_hydra_config=True)


def experiment_of(cfg: DictConfig, choices: Optional[Mapping[str, Any]] = None) -> str:
    """The experiment a composed job files its cells under: its ``experiment_name`` (an experiment
    that extends another's folder: ``demo_full`` files into ``demo``), else the experiment config's
    name, else ``adhoc``. ``choices``: Hydra's config-group choices where ``cfg`` has no ``hydra``
    node (inside a job)."""
    choices = cfg.hydra.runtime.choices if choices is None else choices
    return cfg.get("experiment_name") or choices.get("experiment") or "adhoc"


def distinct_jobs(grid_points: Sequence[Sequence[str]], composer: Optional["PointComposer"] = None) -> list[GridJob]:
    """One job per distinct cell of ``grid_points`` (each one's overrides, in Hydra's order), numbered
    from 0 in that order: the first grid point that names a cell stands for the others (a method with
    a fixed ratio, vanilla, names one ``r1`` cell at every ratio of the grid), so job ``i`` is SLURM's
    array task ``i`` and no two jobs run one cell. An invalid grid point is a job of its own.
    ``composer``: one whose compositions the caller reuses afterwards (a new one by default)."""
    from vcast.sweep.spec import spec_from_config

    jobs: list[GridJob] = []
    seen: set[str] = set()
    composer = composer or PointComposer()
    for overrides in grid_points:
        num = len(jobs)
        try:
            cfg = composer.compose(overrides)
            spec = spec_from_config(cfg, experiment_of(cfg))
            data = cfg.task.get("data")
        except Exception as error:  # a composition error or a bad value: the job would be invalid too
            jobs.append(GridJob(num, tuple(overrides), error=str(error).splitlines()[0]))
            continue
        if spec.name in seen:
            continue
        seen.add(spec.name)
        jobs.append(GridJob(num, tuple(overrides), spec=spec,
                            data=None if data is None else OmegaConf.to_container(data, resolve=True)))
    return jobs


class PointComposer:
    """:func:`compose_job` for many grid points, composing once per distinct choice of configs: grid
    points that differ only in plain values (``frames=32``, ``ratio=0.15``) share one composition, a
    copy of which gets their values as Hydra applies a command-line value (after the defaults,
    ``OmegaConf.update``). A grid of 112 points over 28 config choices composes 28 times (Hydra
    composes in about 80 ms, a copy takes about 5); tests/test_sweep.py holds the cells equal to those
    of Hydra's own composition at every frames x ratio of every experiment."""

    def __init__(self) -> None:
        from hydra.core.override_parser.overrides_parser import OverridesParser

        self._parser = OverridesParser.create()
        self._bases: dict[tuple[str, ...], DictConfig] = {}

    def compose(self, overrides: Sequence[str]) -> DictConfig:
        """The config Hydra composes for ``overrides`` (with its ``hydra`` node)."""
        import copy

        parsed = self._parser.parse_overrides(list(overrides))
        plain = [(word, o) for word, o in zip(overrides, parsed) if _plain_value(o)]
        rest = tuple(word for word, o in zip(overrides, parsed) if not _plain_value(o))
        if rest not in self._bases:
            self._bases[rest] = compose_job(list(rest))
        cfg = copy.deepcopy(self._bases[rest])
        for _, override in plain:
            OmegaConf.update(cfg, override.key_or_group, override.value(), merge=True)
        return cfg


def _plain_value(override: Any) -> bool:
    """``key=value`` on a key of the config, not a config group, a sweep, an addition or deletion,
    Hydra's own node, or an interpolation: a value Hydra merely sets after composing."""
    from hydra.core.override_parser.types import OverrideType

    key = override.key_or_group
    return (override.type == OverrideType.CHANGE and override.package is None and not override.is_sweep_override()
            and not key.startswith("hydra") and "/" not in key and not (CONFIG_DIR / key).is_dir()
            and isinstance(override.value(), (int, float, bool, str)) and "${" not in str(override.value()))


class initialized:
    """``with initialized(): ...``: Hydra initialised on vcast's configs outside the sweep app
    (for the dry run and ``status``); a no-op where Hydra is already initialised."""

    def __init__(self) -> None:
        self._context: Optional[Any] = None

    def __enter__(self) -> "initialized":
        from hydra import initialize_config_dir
        from hydra.core.global_hydra import GlobalHydra

        if not GlobalHydra.instance().is_initialized():
            self._context = initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3")
            self._context.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._context is not None:
            self._context.__exit__(*exc)


def command_line_points(arguments: Sequence[str]) -> list[list[str]]:
    """Every grid point's overrides of ``python -m vcast.sweep <arguments> -m``, in Hydra's order."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    words = [word for word in arguments if word not in _FLAGS]
    parsed = OverridesParser.create().parse_overrides(words)
    fixed = [word for word, override in zip(words, parsed) if not override.is_sweep_override()]
    with initialized():
        primary = compose_job(fixed)  # the experiment's sweeper params, before any job's values
        params = dict(primary.hydra.sweeper.params or {})
    return job_overrides(params, words)


def command_line_grid(arguments: Sequence[str]) -> list[GridJob]:
    """The jobs of ``python -m vcast.sweep <arguments> -m`` (composed outside the app): one per
    distinct cell, as the sweep launches them."""
    points = command_line_points(arguments)
    with initialized():
        return distinct_jobs(points)


def experiment_methods(folder: str) -> list[str]:
    """The method configs of every experiment config that files its cells under ``folder`` (its own
    name, or its ``experiment_name``), in their grids' order, the folder's own config first, each
    once; empty for an ad-hoc folder. The report orders its rows so."""
    return list(_experiment_methods(folder))


@functools.cache  # composing every experiment takes seconds; the configs do not change under a process
def _experiment_methods(folder: str) -> tuple[str, ...]:
    configs = sorted(CONFIG_DIR.glob("experiment/*.yaml"), key=lambda path: (path.stem != folder, path.stem))
    methods: dict[str, None] = {}
    with initialized():
        for path in configs:
            cfg = compose_job([f"experiment={path.stem}"])
            if experiment_of(cfg) != folder:
                continue
            listed = (cfg.hydra.sweeper.get("params") or {}).get("method")
            methods.update(dict.fromkeys(str(listed or cfg.method.name).split(",")))
    return tuple(methods)
