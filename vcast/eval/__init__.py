"""The experiment harness's lmms-eval layer: model plugins, the offline synthetic benchmark, the
per-cell efficiency meter.

Nothing here is imported by ``import vcast``: lmms-eval is an optional extra (``.[eval]``) and
slow to import.
"""
