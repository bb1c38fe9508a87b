"""What is known about a method, declared once where it registers and read by everything else.

A method's registration (:func:`vcast.registry.register_method` and its two siblings) carries a
:class:`MethodFacts`: how tables and figures name it, the paper it comes from, and for each
variant the official code that variant follows. The registration itself already says which model
inputs it needs and where it runs (on the vision tokens, inside the language model, or on the
model's input); ``vllm`` says whether :mod:`vcast.vllm` can run it too.

Read by: the report's display names (:mod:`vcast.report.names`), the vLLM backend's method list
(:data:`vcast.vllm.VLLM_METHODS`) and the method table of ``docs/baselines.md``
(:func:`vcast.registry.method_table`, kept equal to the page by a test).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from vcast.variants import VARIANTS


@dataclass(frozen=True)
class MethodFacts:
    """Facts about one registered method.

    Attributes:
        display: the name tables and figures show (``"HoliTom"``); the registered name when empty.
        venue: shown after the name in LaTeX tables (``"NeurIPS'25"``; ``"Ours"`` for V-CAST).
        paper: the citation (title, first author, venue and year); empty for a method with no paper.
        code: variant -> the code that variant follows, as ``owner/repo@commit path[ function]``
            (for ``"paper"``: the code our clean reading starts from, or empty when there is none).
        vllm: whether the vLLM backend (:mod:`vcast.vllm`) runs it.
    """

    display: str = ""
    venue: str = ""
    paper: str = ""
    code: Mapping[str, str] = field(default_factory=dict)
    vllm: bool = False

    def check(self, name: str, variants: tuple[str, ...]) -> None:
        """ValueError naming the problem if these facts do not fit method ``name`` with ``variants``."""
        stray = sorted(set(self.code) - set(variants))
        if stray:
            unknown = sorted(set(stray) - set(VARIANTS))
            hint = f" ({unknown} are no variant at all; variants: {', '.join(VARIANTS)})" if unknown else ""
            raise ValueError(f"method {name!r} declares code for variant(s) {stray} it does not have "
                             f"(it has {', '.join(variants)}){hint}")
        for variant, code in self.code.items():
            if not isinstance(code, str):
                raise ValueError(f"method {name!r}: the code of variant {variant!r} must be a string, got {code!r}")
