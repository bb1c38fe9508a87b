"""The ``lmms_eval.models`` entry point: lmms-eval finds vcast's models through this, with no
fork and no edit of lmms-eval (``pyproject.toml`` registers :func:`manifests`): one plugin per
model family (:mod:`vcast.families`), plus the vLLM backend's."""

from __future__ import annotations

from typing import Any

from vcast.families import all_families

VLLM_PLUGIN = ("vcast_vllm", "vcast.vllm.lmms_plugin.VCastVLLM")  # needs the vLLM environment (docs/vllm.md)


# {lmms-eval model id: class path} of every vcast plugin.
MODELS: dict[str, str] = {**{family.plugin_id: family.plugin.replace(":", ".") for family in all_families()},
                          VLLM_PLUGIN[0]: VLLM_PLUGIN[1]}


def manifests() -> list[Any]:
    """One ``ModelManifest`` per plugin (simple models; lmms-eval imports the class lazily)."""
    from lmms_eval.models.registry_v2 import ModelManifest

    return [ModelManifest(model_id=model_id, simple_class_path=path) for model_id, path in MODELS.items()]
