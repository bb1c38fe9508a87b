"""Which code a method runs: our clean default, or the code that produced a published number.

Every method takes a keyword parameter ``variant``:

* ``"paper"`` (default): the paper's formulas, float32 scores whatever the input dtype, and our
  documented fixes (deterministic ties, exact budgets). bf16 and float32 input give the same
  result.
* ``"official"``: the method authors' released code, bit for bit on CPU: the same formulas,
  constants, rounding, tie order and arithmetic in the input dtype where the release does it in
  the input dtype, quirks included.
* ``"vidcom2_qwen"``: the Qwen3-VL re-implementation in the VidCom2 repository's ``qwen``
  branch, which produced the paper's Qwen3-VL rows for VisionZip, FastVID, HoliTom, DyCoke and
  FastV.

A method declares the variants it has at registration (``register_method(..., variants=...)``);
asking it for another is a ValueError that names the ones it has. ``docs/fidelity.md`` lists,
per method and variant, the code followed and what is bit-equal.
"""

from __future__ import annotations

from typing import Iterable

PAPER = "paper"
OFFICIAL = "official"
VIDCOM2_QWEN = "vidcom2_qwen"
VARIANTS = (PAPER, OFFICIAL, VIDCOM2_QWEN)


def check_variant(method: str, variant: object, supported: Iterable[str]) -> str:
    """Return ``variant`` if ``method`` has it; ValueError naming the variants it has otherwise."""
    options = tuple(supported)
    if variant not in options:
        known = "" if variant in VARIANTS else f" ({variant!r} is not a variant at all; variants: {', '.join(VARIANTS)})"
        raise ValueError(f"method {method!r} has variant(s) {', '.join(map(repr, options))}; got {variant!r}{known}")
    return variant  # type: ignore[return-value]
