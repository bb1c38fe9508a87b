"""Model adapters: V-CAST (or any registered method) inside Hugging Face video LLMs.

    handle = vcast.models.attach(model, method="vcast", ratio=0.25)
    model.generate(**inputs)      # video tokens pruned at prefill, positions preserved
    handle.stats                  # the last call: kept/total tokens per video, budgets, timings
    handle.detach()
"""

from vcast.models.attach import SUPPORTED_CLASSES, attach
from vcast.models.handle import PruningHandle
from vcast.models.stats import CallStats, SegmentStats

__all__ = ["SUPPORTED_CLASSES", "CallStats", "PruningHandle", "SegmentStats", "attach"]
