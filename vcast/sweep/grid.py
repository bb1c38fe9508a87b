"""A sweep's cells before any job runs: Hydra's basic-sweeper expansion, each job's config composed.

The jobs of ``python -m vcast.sweep experiment=X -m`` are the cartesian product of the
experiment's ``hydra.sweeper.params`` and the command line's overrides (a command-line key
replaces the same key of the params, in its place), in Hydra's order, so job ``i`` here is Hydra's job ``i``.
Pre-flight, the dry run and ``status --experiment`` all read the grid through this module.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

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


def experiment_of(cfg: DictConfig) -> str:
    """The experiment a composed job belongs to (``adhoc`` without one), as the sweep names it."""
    return cfg.hydra.runtime.choices.get("experiment") or "adhoc"


def grid_jobs(sweeper_params: Mapping[str, Any], arguments: Sequence[str]) -> list[GridJob]:
    """Every job of the sweep with its cell spec, or the error that makes it invalid."""
    from vcast.sweep.spec import spec_from_config

    jobs = []
    for num, overrides in enumerate(job_overrides(sweeper_params, arguments)):
        try:
            cfg = compose_job(overrides)
            data = cfg.task.get("data")
            jobs.append(GridJob(num, tuple(overrides), spec=spec_from_config(cfg, experiment_of(cfg)),
                                data=None if data is None else OmegaConf.to_container(data, resolve=True)))
        except Exception as error:  # a composition error or a bad value: the job would be invalid too
            jobs.append(GridJob(num, tuple(overrides), error=str(error).splitlines()[0]))
    return jobs


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


def command_line_grid(arguments: Sequence[str]) -> Iterator[GridJob]:
    """The jobs of ``python -m vcast.sweep <arguments> -m`` (composed outside the app)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    words = [word for word in arguments if word not in _FLAGS]
    parsed = OverridesParser.create().parse_overrides(words)
    fixed = [word for word, override in zip(words, parsed) if not override.is_sweep_override()]
    with initialized():
        primary = compose_job(fixed)  # the experiment's sweeper params, before any job's values
        params = dict(primary.hydra.sweeper.params or {})
        yield from grid_jobs(params, words)
