"""vcast: V-CAST token pruning for video LLMs, and the harness that reproduces its paper.

    import vcast
    sel = vcast.select(frames, ratio=0.25)   # frames: float [T, P, D]
    sel.keep, sel.budgets
"""

from vcast.api import select
from vcast.registry import available_methods, method_params, register_method
from vcast.selection import Selection

__all__ = ["Selection", "available_methods", "method_params", "register_method", "select"]
__version__ = "0.1.0"
