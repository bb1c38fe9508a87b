"""Which variant of a method a cell runs: the sweep's ``profile``.

* ``profile=reproduce`` (default): each method runs the variant its experiment names in
  ``variants:`` (``configs/experiment/*.yaml``: the code that produced the published row, e.g.
  V-CAST ``official``, VisionZip ``vidcom2_qwen`` on Qwen3-VL); a method the experiment does not
  name runs ``paper``.
* ``profile=clean``: every method runs ``variant="paper"`` (our clean default), into
  ``<results_root>/<experiment>-clean/`` so the two never share a cell; ``python -m vcast.report
  build <target> --profile clean`` builds its table and ``--compare clean`` puts both side by side.

``reproduce_params:`` (method config -> params) adds the settings a reproduction variant needs for
that table (e.g. VisionZip's ``spatial_tokens: 50``, HoliTom's script value at r = 0.25), under
``reproduce`` only.

A method config may pin a variant in its params (``params: {variant: official}``); the pin wins
under ``reproduce`` and is refused under ``clean`` unless it is ``paper``.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from vcast.sweep.cell import REPRODUCE
from vcast.validation import check_choice
from vcast.variants import PAPER, VARIANTS

CLEAN = "clean"
PROFILES = (REPRODUCE, CLEAN)


def resolve_variant(profile: str, method: str, pinned: Optional[str], experiment_variants: Mapping[str, Any]) -> str:
    """The variant cell ``method`` (a method config name) runs under ``profile``.

    Args:
        profile: ``reproduce`` or ``clean``.
        method: the method config's name (the keys of ``experiment_variants``).
        pinned: ``params.variant`` of the method config, or None.
        experiment_variants: the experiment's ``variants:`` mapping (method config -> variant).
    """
    profile = check_choice("profile", profile, PROFILES)
    unknown = {name: value for name, value in experiment_variants.items() if value not in VARIANTS}
    if unknown:
        raise ValueError(f"variants {unknown} are not variants; variants: {', '.join(VARIANTS)}")
    if pinned is not None:
        check_choice(f"method {method!r} params.variant", pinned, VARIANTS)
    if profile == CLEAN:
        if pinned not in (None, PAPER):
            raise ValueError(f"profile=clean runs variant 'paper' everywhere, but method config {method!r} pins "
                             f"variant {pinned!r}; drop the pin or run profile=reproduce")
        return PAPER
    if pinned is not None:
        return pinned
    return str(experiment_variants.get(method, PAPER))
