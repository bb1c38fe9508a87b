"""The ``lmms_eval.models`` entry point: lmms-eval finds vcast's models through this, with no
fork and no edit of lmms-eval (``pyproject.toml`` registers :func:`manifests`)."""

from __future__ import annotations

from typing import Any

MODELS = {
    "vcast_qwen3_vl": "vcast.eval.qwen3_vl.VCastQwen3VL",
    "vcast_llava_ov": "vcast.eval.llava_ov.VCastLlavaOV",
    "vcast_vllm": "vcast.vllm.lmms_plugin.VCastVLLM",  # needs the vLLM environment (docs/vllm.md)
}


def manifests() -> list[Any]:
    """One ``ModelManifest`` per plugin (simple models; lmms-eval imports the class lazily)."""
    from lmms_eval.models.registry_v2 import ModelManifest

    return [ModelManifest(model_id=model_id, simple_class_path=path) for model_id, path in MODELS.items()]
