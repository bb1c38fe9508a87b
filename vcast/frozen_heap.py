"""Keep Python's cycle collector off the objects a command's imports made.

torch, transformers and lmms-eval leave a heap of objects the cycle collector tracks, and every full
collection walks all of them: the ones Python triggers while a run allocates, and the ones of its
own shutdown. Measured on 2 CPU cores with what a cell imports (:func:`vcast.eval.warm_server.preload`):
the process takes 2-2.5 s to exit, 0.3 s with its heap frozen; a tiny cell forked from the
warm-start server took 4-5 s, 1.4-1.6 s when the server froze its heap before forking (the use
``gc.freeze`` documents for a forking server: the children also leave those pages unwritten).

:func:`freeze_heap` first collects what is garbage now (its finalizers run as usual), then moves
everything still alive to the collector's permanent generation (``gc.freeze``): never walked again,
and freed by reference counting at exit as the modules are cleared (Python does not promise
``__del__`` at exit for objects still alive then). Objects made afterwards are collected as usual.

Only what runs a whole process calls it (a command's ``__main__`` or
:func:`vcast.closed_pipe.run_command`, the warm-start server), never a library function: it would
pin for good what a caller holds. (Freezing the test suite's workers after collection was measured
too: no faster, since their tests mostly compute.)
"""

from __future__ import annotations

import gc


def freeze_heap() -> None:
    """Collect now, then leave everything alive out of later collections (module docstring)."""
    gc.collect()
    gc.freeze()
