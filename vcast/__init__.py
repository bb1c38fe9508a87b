"""vcast: V-CAST token pruning for video LLMs, and the harness that reproduces its paper.

    import vcast
    sel = vcast.select(frames, ratio=0.25)   # frames: float [T, P, D]
    sel.keep, sel.budgets

    handle = vcast.models.attach(hf_model, method="vcast", ratio=0.25)   # inside a video LLM

The names below load on first use (PEP 562): ``import vcast`` alone does not import torch, so the
command-line tools (``python -m vcast.sweep``, ``vcast.report``, ``vcast.sweep.status``) take over
Ctrl-C and a closed pipe within milliseconds of starting (:mod:`vcast.interrupt_guard`).
"""

from __future__ import annotations

import importlib
from typing import Any

# name -> the module that defines it (``models``: the subpackage itself)
_EXPORTS = {
    "Selection": "vcast.selection",
    "models": "vcast.models",
    "available_methods": "vcast.registry",
    "input_plan": "vcast.api",
    "method_inputs": "vcast.registry",
    "method_params": "vcast.registry",
    "method_variants": "vcast.registry",
    "register_method": "vcast.registry",
    "select": "vcast.api",
}
__all__ = sorted(_EXPORTS)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'vcast' has no attribute {name!r}")
    loaded = importlib.import_module(module)
    value = loaded if module == f"vcast.{name}" else getattr(loaded, name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
