"""Hydra's basic sweeper, launching one job per distinct cell of the grid.

The basic sweeper launches every grid point of the cartesian product; two grid points can name one
cell (a method with a fixed ratio, vanilla, is the same ``r1`` cell at every ratio), and on SLURM
each duplicate is an allocation that loads a model to find the cell busy or finished.
:class:`CellSweeper` expands the grid exactly as the basic sweeper does, keeps the first grid point
of each cell (:func:`vcast.sweep.grid.distinct_jobs`), runs pre-flight and logs the plan
(:func:`vcast.sweep.start.check_and_plan`), then launches those jobs, numbered from 0: the numbers
the dry run prints and SLURM's array task ids.
"""

# No ``from __future__ import annotations``: Hydra executes plugin modules outside sys.modules, where
# dataclasses cannot resolve string annotations.
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.types import Override


@dataclass
class CellSweeperConf:
    _target_: str = "hydra_plugins.vcast_sweeper.cell_sweeper.CellSweeper"
    max_batch_size: Optional[int] = None
    params: Optional[Dict[str, str]] = None


ConfigStore.instance().store(group="hydra/sweeper", name="vcast_cells", node=CellSweeperConf, provider="vcast")


class CellSweeper(BasicSweeper):
    """The basic sweeper with one job per distinct cell, after pre-flight (see the module docstring)."""

    def split_arguments(self, overrides: List[Override], max_batch_size: Optional[int]) -> List[List[List[str]]]:
        from vcast.sweep.grid import distinct_jobs
        from vcast.sweep.start import check_and_plan

        assert self.config is not None
        (grid_points,) = BasicSweeper.split_arguments(overrides, None)
        jobs = distinct_jobs(grid_points)
        check_and_plan(jobs, self.config, Path(self.config.hydra.sweep.dir), grid_points=len(grid_points))
        chosen: List[List[str]] = [list(job.overrides) for job in jobs]
        size = max_batch_size or len(chosen) or 1
        return [chosen[start:start + size] for start in range(0, len(chosen), size)]
