"""vcast: V-CAST token pruning for video LLMs, and the harness that reproduces its paper.

    import vcast
    sel = vcast.select(frames, ratio=0.25)   # frames: float [T, P, D]
    sel.keep, sel.budgets

    handle = vcast.models.attach(hf_model, method="vcast", ratio=0.25)   # inside a video LLM
"""

from vcast import models
from vcast.api import input_plan, select
from vcast.registry import available_methods, method_inputs, method_params, method_variants, register_method
from vcast.selection import Selection

__all__ = ["Selection", "models", "available_methods", "input_plan", "method_inputs", "method_params",
           "method_variants", "register_method", "select"]
__version__ = "0.1.0"
