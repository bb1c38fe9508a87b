"""A CPU worker that turns on vLLM's video-pruning bookkeeping (bug (a) of docs/vllm.md).

vLLM 0.32's ``CPUModelRunner.load_model`` never sets ``is_multimodal_pruning_enabled`` (the GPU
runner does, in its own ``load_model``), so the pruned video's position channels are never
stripped and its positions never recomputed (``split_with_sizes`` fails). This subclass sets the
flag on its own runner instance after loading, exactly as the GPU runner computes it. Select it
with ``worker_cls="vcast.vllm.worker.VCastCPUWorker"`` (:func:`vcast.vllm.engine_kwargs` does on CPU).
"""

from __future__ import annotations

import logging
from typing import Any

from vcast.vllm import check_vllm_version

check_vllm_version()

from vllm.model_executor.models.interfaces import supports_multimodal_pruning  # noqa: E402
from vllm.v1.worker.cpu_worker import CPUWorker  # noqa: E402

logger = logging.getLogger(__name__)


class VCastCPUWorker(CPUWorker):
    """``CPUWorker`` whose runner runs the multimodal-pruning bookkeeping when the model prunes."""

    def load_model(self, *args: Any, **kwargs: Any) -> None:
        super().load_model(*args, **kwargs)
        runner = self.model_runner
        mm_config = runner.model_config.multimodal_config
        enabled = (supports_multimodal_pruning(runner.get_model()) and mm_config is not None
                   and mm_config.is_multimodal_pruning_enabled())
        if enabled and not getattr(runner, "is_multimodal_pruning_enabled", False):
            runner.is_multimodal_pruning_enabled = True
            logger.info("vcast: turned the CPU runner's multimodal-pruning bookkeeping on")
