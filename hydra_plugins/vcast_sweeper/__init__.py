"""vcast's Hydra sweeper (``hydra/sweeper=vcast_cells``, set in ``configs/sweep.yaml``).

Hydra finds sweepers only under the ``hydra_plugins`` namespace package, so the plugin lives here;
what it does is :mod:`vcast.sweep.grid` (one job per distinct cell) and :mod:`vcast.sweep.start`
(pre-flight and the plan).
"""
