"""The ``vllm.general_plugins`` entry point (pyproject.toml): registers the V-CAST Qwen3-VL classes.

vLLM calls :func:`register` in every process it starts. The classes are passed themselves, not
as lazy ``"module:Class"`` strings (a string costs vLLM an extra inspection subprocess per start).
With another vLLM than :data:`vcast.vllm.VLLM_VERSION` installed it registers nothing and logs
both versions (so other models keep working in that environment); selecting the plugin's
architecture, or calling :func:`vcast.vllm.engine_kwargs`, then fails with both versions named.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def register() -> None:
    """Register :data:`vcast.vllm.ARCHITECTURES` with vLLM's ``ModelRegistry`` (idempotent)."""
    from vllm import ModelRegistry

    from vcast.vllm import ARCHITECTURES, check_vllm_version

    try:
        check_vllm_version()
    except RuntimeError as error:
        logger.error("vcast: not registering the V-CAST models: %s", error)
        return
    from vcast.vllm.model import VCastQwen3VLForConditionalGeneration, VCastQwen3VLMoeForConditionalGeneration

    classes = {cls.__name__: cls for cls in (VCastQwen3VLForConditionalGeneration,
                                             VCastQwen3VLMoeForConditionalGeneration)}
    for name in ARCHITECTURES.values():
        if name not in ModelRegistry.get_supported_archs():
            ModelRegistry.register_model(name, classes[name])
    logger.debug("vcast: registered %s with vLLM", ", ".join(ARCHITECTURES.values()))
