"""The ``framefusion_merge`` registration: parameters, defaults, checks and dispatch to the variant modules."""

from __future__ import annotations

import torch

from baselines.common import papers
from baselines.framefusion_merge.official import official_merge_select
from baselines.framefusion_merge.paper import paper_merge_select
from baselines.framefusion_merge.release import RELEASE, RELEASE_BUDGET_LAYERS
from vcast.method_facts import MethodFacts
from vcast.registry import register_method
from vcast.selection import Selection
from vcast.validation import check_int, check_range
from vcast.variants import OFFICIAL, PAPER, check_variant

VARIANTS = (PAPER, OFFICIAL)

FACTS = MethodFacts(display="FrameFusion (first merge)", venue="ICCV'25", paper=papers.FRAMEFUSION,
                    code={PAPER: RELEASE, OFFICIAL: RELEASE})


@register_method("framefusion_merge", inputs=(), variants=VARIANTS, facts=FACTS)
def framefusion_merge_select(frames: torch.Tensor, ratio: float, *, threshold: float = 0.6,
                             num_layers: int | None = None, variant: str = PAPER) -> Selection:
    """FrameFusion's first merge on ``frames`` [T, P, D].

    Args:
        frames: float [T, P, D], any dtype and device.
        ratio: r in (0, 1], FrameFusion's cost; the merge removes at most ``floor((1 - r) * N)``
            (``official``: ``int(u * N)`` with the release's float ``u``).
        threshold: S_th, the cosine at or above which a token merges into its predecessor.
        num_layers: ``official`` only: the ``L`` of the release's budget formula that sets the
            cap ``u`` (None: 28, the release's hard-coded value).
        variant: ``"paper"`` (float32, decimal cap, stable ties) or ``"official"`` (the release
            bit for bit, in the input dtype).
    Returns:
        Selection with merged ``tokens`` [K, D] (float32 for ``paper``, the input dtype for
        ``official``); K = ``ceil(r * N)`` when the cap binds, else ``N - |candidates|``.
    """
    variant = check_variant("framefusion_merge", variant, VARIANTS)
    threshold = check_range("threshold", threshold, -1.0, 1.0)  # a cosine
    if variant == OFFICIAL:
        layers = RELEASE_BUDGET_LAYERS if num_layers is None else check_int("num_layers", num_layers, 1)
        return official_merge_select(frames, ratio, threshold=threshold, num_layers=layers)
    if num_layers is not None:
        raise ValueError("framefusion_merge: num_layers is a parameter of variant='official' (the paper variant's "
                         f"cap is exactly 1 - r), got num_layers={num_layers!r}")
    return paper_merge_select(frames, ratio, threshold)
