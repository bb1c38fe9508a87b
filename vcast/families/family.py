"""What is known about a model family, declared once in its package and read by everything else.

A family's package (``vcast/families/<name>/``) declares one :class:`Family` as ``FAMILY`` in its
``__init__``; the registry (:mod:`vcast.families`) finds the packages on its own, so adding a
family touches only its package, its configs and its tests. The declaration imports nothing heavy:
the adapter, the lmms-eval plugin, the tiny-checkpoint builder and the FLOPs shape are named as
``"module:attribute"`` and imported on first use (:meth:`Family.load`).

Names derived from :attr:`Family.name` (``qwen2_5_vl``): the lmms-eval plugin id
``vcast_<name>``, the tiny checkpoint ``checkpoints/tiny_<name>`` (built by
``scripts/make_tiny_checkpoint.py --arch <name>``) and its model config ``configs/model/tiny_<name>.yaml``.
The two families vcast had before families were packages keep their published names
(``plugin_id="vcast_llava_ov"``, ``tiny_config="tiny_qwen3vl"``): results already filed under them
stay valid.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Optional


@dataclass(frozen=True)
class PublishedModel:
    """One released checkpoint of a family, as the configs and the report name it.

    Attributes:
        config: its model config (``configs/model/<config>.yaml``), which is also its results folder.
        repo: the Hugging Face repository (``Qwen/Qwen2.5-VL-7B-Instruct``).
        display: the name tables show (``"Qwen2.5-VL-7B-Instruct"``).
        arch: the tiny-checkpoint arch with its architecture (MoE or dense), for the GPU kit.
    """

    config: str
    repo: str
    display: str
    arch: str


@dataclass(frozen=True)
class Family:
    """Facts about one model family.

    Attributes:
        name: the one name (``qwen3_vl``); see the module docstring for what derives from it.
        display: the name messages and docs use (``"Qwen3-VL"``).
        model_types: the ``config.model_type`` values it covers (``("qwen3_vl", "qwen3_vl_moe")``).
        hf_classes: the transformers model classes, one per model type, in the same order.
        archs: the tiny-checkpoint archs (``scripts/make_tiny_checkpoint.py --arch``), one per model type.
        adapter: ``"module:Class"`` of its :class:`vcast.models.adapter.Adapter`.
        plugin: ``"module:Class"`` of its lmms-eval model (a :class:`vcast.eval.plugin.VCastLMM`).
        plugin_args: the ``model_args`` its plugin takes beyond :data:`vcast.eval.plugin_args.HF_ARGS`.
        prompt_key: the lmms-eval model id whose task prompts it uses (the stock wrapper's).
        tiny: ``"module"`` with ``build(arch, size, words) -> (model, processor)``,
            ``checkpoint_spec(arch, size)`` and ``SIZES``.
        flops: ``"module"`` with ``vision_units(config, inputs)`` (the encoder's ``(frames, patches)``
            work units of a processor batch), ``vision_flops(config, units)`` and, where the language
            model is not plain softmax attention, ``llm_shape(config)`` (:mod:`vcast.models.flops`).
        real_size: ``"module:real_config"``: from a published model's arch to its real-size config
            dict (the GPU kit builds random weights of that shape on the device); the module may
            also have ``tiny_widths(spec, arch)`` for the kit's CPU mode.
        kit_prompt: ``"module:attr"``: ``(config, frames, side, generator) -> inputs``, one video
            prompt in the family's layout built as tensors (the GPU kit's,
            :func:`vcast.gpucheck.models.video_inputs`).
        frames_per_step: source frames behind one temporal step of the LLM tokens (Qwen: the
            temporal patch, 2; LLaVA: 1).
        min_frames: the fewest frames its plugin can read.
        mrope: whether the LLM's positions are multi-axis (t, h, w): kept tokens cannot be renumbered.
        deepstack: whether vision features are also added inside the LLM (Qwen3-VL's DeepStack).
        hybrid_attention: whether some LLM layers are not softmax attention (Qwen3.5's Gated
            DeltaNet): an in-LLM method runs only where its stages read scores at softmax layers
            and drop after the first one (:mod:`vcast.models.hybrid_methods`).
        fixed_resolution: why its vision tower takes one fixed input size (no input method may
            lower the resolution), or empty when it takes any.
        published: its released checkpoints with a config in ``configs/model/``.
        plugin_id: the lmms-eval id, when not ``vcast_<name>`` (a published name kept).
        tiny_config: the tiny checkpoint's model config, when not ``tiny_<name>`` (a published name kept).
        method_defaults: per-method defaults that follow the family (FlashVID's layer, ...),
            ``{method: {param: value}}``.
        chat_template_kwargs: extra arguments of its plugin's ``apply_chat_template`` (Qwen3.5:
            ``enable_thinking=False``, so the answer is not a reasoning trace).
    """

    name: str
    display: str
    model_types: tuple[str, ...]
    hf_classes: tuple[str, ...]
    archs: tuple[str, ...]
    adapter: str
    plugin: str
    plugin_args: tuple[str, ...]
    prompt_key: str
    tiny: str
    flops: str
    real_size: str
    kit_prompt: str
    frames_per_step: int
    min_frames: int
    mrope: bool
    deepstack: bool = False
    hybrid_attention: bool = False
    fixed_resolution: str = ""
    published: tuple[PublishedModel, ...] = ()
    plugin_id: str = ""
    tiny_config: str = ""
    method_defaults: dict[str, dict[str, Any]] = field(default_factory=dict)
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.name.isidentifier() or self.name != self.name.lower():
            raise ValueError(f"family name must be a lower-case identifier, got {self.name!r}")
        if not (len(self.model_types) == len(self.hf_classes) == len(self.archs)) or not self.model_types:
            raise ValueError(f"family {self.name!r}: model_types, hf_classes and archs must be non-empty and "
                             f"of one length, got {self.model_types}, {self.hf_classes}, {self.archs}")
        if self.archs[0] != self.name:
            raise ValueError(f"family {self.name!r}: its first arch must be its own name (the tiny checkpoint "
                             f"checkpoints/tiny_{self.name}), got {self.archs[0]!r}")
        if not self.plugin_id:
            object.__setattr__(self, "plugin_id", f"vcast_{self.name}")
        if not self.tiny_config:
            object.__setattr__(self, "tiny_config", f"tiny_{self.name}")

    @property
    def tiny_dir(self) -> str:
        """The tiny checkpoint's folder, relative to the repository (``make tiny-checkpoints`` builds it)."""
        return f"checkpoints/tiny_{self.name}"

    def load(self, fact: str) -> Any:
        """Import a fact named as ``"module:attribute"`` (or ``"module"``): ``load("adapter")``."""
        target = getattr(self, fact)
        module_name, _, attribute = target.partition(":")
        module = importlib.import_module(module_name)
        return getattr(module, attribute) if attribute else module

    def hf_class(self, model_type: str) -> str:
        """The transformers class name of ``model_type`` (one of :attr:`model_types`)."""
        return self.hf_classes[self.model_types.index(model_type)]

    def published_model(self, config: str) -> Optional[PublishedModel]:
        return next((model for model in self.published if model.config == config), None)
