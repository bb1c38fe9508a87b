"""Theoretical prefill FLOPs of the supported models, from their configs and token counts.

Pure arithmetic (no I/O, no model): the same numbers on CPU as on GPU. Conventions:

- a multiply-add is 2 FLOPs; only matrix products are counted (linear layers, convolutions as
  the matrix products they are, attention's ``Q K^T`` and ``A V``); norms, biases, residual
  adds, rotary embeddings, softmax, activations, the gating product, DeepStack's additions,
  position-embedding interpolation, pooling and the token selection itself are left out;
- attention is counted over the full ``n x n`` score matrix even where the mask is causal (as
  FastV's ``4nd^2 + 2n^2d + 2ndm`` and most token-pruning papers count it);
- every item is counted on its own real (unpadded) tokens, as if run alone: the padding of a
  batch is not counted;
- the prefill only: the language model over the prompt and the LM head over the last position
  (``generate`` passes ``logits_to_keep=1``); the decode steps are not counted.

Language model, one decoder layer on ``n`` tokens (``d`` hidden, ``h`` query heads, ``h_kv`` key /
value heads, ``d_h`` head size, ``m`` MLP width)::

    projections  2 n d d_h (2 h + 2 h_kv)      q and o: h d_h wide; k and v: h_kv d_h (GQA)
    attention    4 n^2 h d_h                   Q K^T and A V, every query head
    MLP (SwiGLU) 6 n d m                       gate, up, down
    MoE instead  2 n d E + 6 n d m_e k         router over E experts; k experts per token, width m_e

and the prefill is ``sum_l layer(n_l) + 2 d V`` (``V`` the vocabulary): ``n_l`` is the sequence
length layer ``l`` sees, the same for every layer unless an in-LLM method drops tokens between
layers. With ``h d_h = d``, ``h_kv = h`` and a plain two-matrix MLP this is twice FastV's count.

Vision encoders, per frame (Qwen3-VL: per temporal patch) of ``p`` patches (``D`` width, ``I``
MLP width, ``c`` input values per patch)::

    patch embedding  2 p c D
    each block       8 p D^2 + 4 p^2 D + 4 p D I     (attention within the frame)
    Qwen3-VL merger  2 p D^2 s^2 + 2 p D D_out       (on p / s^2 tokens of width D s^2; once, plus
                                                      once per DeepStack layer)
    LLaVA projector  2 p' D_in d + 2 p' d^2          (on the p' selected features of each frame)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

TERA = 1e12


def _get(config: Any, name: str, default: Any = None) -> Any:
    """``config[name]`` for a dict, ``config.name`` for a config object; ``default`` when absent or None."""
    value = config.get(name) if isinstance(config, Mapping) else getattr(config, name, None)
    return default if value is None else value


def _sub(config: Any, name: str) -> Any:
    return _get(config, name, config)


# Language model ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class LLMShape:
    """What a decoder-only language model's FLOPs depend on.

    Attributes:
        hidden: ``d``.
        layers: decoder layers ``L``.
        heads: query heads ``h``.
        kv_heads: key / value heads ``h_kv`` (GQA; ``h`` for plain multi-head attention).
        head_dim: ``d_h``.
        intermediate: dense MLP width ``m`` (gated: gate, up and down projections).
        vocab: LM head rows ``V``.
        experts: routed experts ``E`` of a MoE layer (0: dense model).
        experts_per_token: ``k``.
        expert_intermediate: ``m_e``.
        moe_layers: the layers whose MLP is the MoE block.
    """

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    experts: int = 0
    experts_per_token: int = 0
    expert_intermediate: int = 0
    moe_layers: frozenset[int] = field(default_factory=frozenset)

    @classmethod
    def from_config(cls, config: Any) -> "LLMShape":
        """From a transformers config (its ``text_config`` when it has one) or a dict of its fields.

        MoE layers follow Qwen3-VL-MoE's rule: layer ``i`` is sparse when ``E > 0``, ``i`` is not in
        ``mlp_only_layers`` and ``(i + 1) % decoder_sparse_step == 0``.
        """
        text = _sub(config, "text_config")
        hidden, heads = int(_get(text, "hidden_size")), int(_get(text, "num_attention_heads"))
        layers = int(_get(text, "num_hidden_layers"))
        experts = int(_get(text, "num_experts", 0))
        moe: frozenset[int] = frozenset()
        if experts > 0:
            step, dense = int(_get(text, "decoder_sparse_step", 1)), set(_get(text, "mlp_only_layers", []))
            moe = frozenset(i for i in range(layers) if i not in dense and (i + 1) % step == 0)
        return cls(
            hidden=hidden, layers=layers, heads=heads, kv_heads=int(_get(text, "num_key_value_heads", heads)),
            head_dim=int(_get(text, "head_dim", hidden // heads)), intermediate=int(_get(text, "intermediate_size")),
            vocab=int(_get(text, "vocab_size")), experts=experts,
            experts_per_token=int(_get(text, "num_experts_per_tok", 0)) if experts else 0,
            expert_intermediate=int(_get(text, "moe_intermediate_size", 0)) if experts else 0, moe_layers=moe,
        )


def attention_projection_flops(shape: LLMShape, n: int) -> float:
    """``q, k, v, o`` on ``n`` tokens: ``2 n d d_h (2 h + 2 h_kv)``."""
    return 2.0 * n * shape.hidden * shape.head_dim * (2 * shape.heads + 2 * shape.kv_heads)


def attention_core_flops(shape: LLMShape, n: int) -> float:
    """``Q K^T`` and ``A V`` over the full ``n x n`` scores, every query head: ``4 n^2 h d_h``."""
    return 4.0 * n * n * shape.heads * shape.head_dim


def mlp_flops(shape: LLMShape, n: int, layer: int = 0) -> float:
    """Layer ``layer``'s MLP on ``n`` tokens: SwiGLU ``6 n d m``, or the MoE block
    ``2 n d E + 6 n d m_e k`` (router, then ``k`` experts per token)."""
    if layer in shape.moe_layers:
        router = 2.0 * n * shape.hidden * shape.experts
        return router + 6.0 * n * shape.hidden * shape.expert_intermediate * shape.experts_per_token
    return 6.0 * n * shape.hidden * shape.intermediate


def layer_flops(shape: LLMShape, n: int, layer: int = 0) -> float:
    """One decoder layer's prefill on ``n`` tokens."""
    return attention_projection_flops(shape, n) + attention_core_flops(shape, n) + mlp_flops(shape, n, layer)


def lm_head_flops(shape: LLMShape, positions: int = 1) -> float:
    """The LM head on ``positions`` positions (``generate``'s prefill: the last one): ``2 d V`` each."""
    return 2.0 * positions * shape.hidden * shape.vocab


def llm_prefill_flops(shape: LLMShape, lengths: int | Sequence[int], logits_positions: int = 1) -> float:
    """One item's language-model prefill: ``sum_l layer_flops(n_l)`` plus the LM head.

    Args:
        lengths: the prompt length (every layer sees it), or ``[L]`` lengths, one per layer
            (in-LLM methods drop tokens between layers).
        logits_positions: positions the LM head runs on.
    """
    if isinstance(lengths, int):
        lengths = [lengths] * shape.layers
    if len(lengths) != shape.layers:
        raise ValueError(f"need one length per layer ({shape.layers}), got {len(lengths)}")
    return sum(layer_flops(shape, n, layer) for layer, n in enumerate(lengths)) + lm_head_flops(shape, logits_positions)


# Vision encoders --------------------------------------------------------------------------------
@dataclass(frozen=True)
class VisionShape:
    """A ViT and what maps its output into the language model.

    Attributes:
        kind: ``"qwen3_vl"`` (ViT + patch merger + DeepStack mergers) or ``"siglip"`` (SigLIP +
            LLaVA's two-layer projector).
        hidden: ``D``.
        depth: blocks (all of them run, whichever one the features are read from).
        intermediate: ``I`` (a two-matrix MLP).
        patch_values: ``c``: input values per patch (channels x temporal patch x patch^2).
        out_hidden: the language model's ``d``.
        merge: Qwen3-VL's spatial merge ``s`` (a merged token is ``s x s`` patches).
        mergers: Qwen3-VL's merger count: 1 + the DeepStack layers.
        feature_layers: SigLIP layers concatenated into the projector's input.
        drop_first: SigLIP features whose first token is dropped (``vision_feature_select_strategy="default"``).
        head: SigLIP's attention-pooling head runs (``vision_use_head``).
    """

    kind: str
    hidden: int
    depth: int
    intermediate: int
    patch_values: int
    out_hidden: int
    merge: int = 1
    mergers: int = 0
    feature_layers: int = 1
    drop_first: bool = False
    head: bool = False

    @classmethod
    def from_config(cls, config: Any) -> "VisionShape":
        """From a Qwen3-VL / Qwen3-VL-MoE or LLaVA-OneVision config (object or dict)."""
        vision, text = _get(config, "vision_config"), _get(config, "text_config")
        model_type = str(_get(config, "model_type", ""))
        if model_type.startswith("qwen3_vl"):
            patch, temporal = int(_get(vision, "patch_size")), int(_get(vision, "temporal_patch_size"))
            return cls(
                kind="qwen3_vl", hidden=int(_get(vision, "hidden_size")), depth=int(_get(vision, "depth")),
                intermediate=int(_get(vision, "intermediate_size")),
                patch_values=int(_get(vision, "in_channels", 3)) * temporal * patch * patch,
                out_hidden=int(_get(vision, "out_hidden_size")), merge=int(_get(vision, "spatial_merge_size")),
                mergers=1 + len(_get(vision, "deepstack_visual_indexes", ())),
            )
        if model_type == "llava_onevision":
            layer = _get(config, "vision_feature_layer", -1)
            patch = int(_get(vision, "patch_size"))
            return cls(
                kind="siglip", hidden=int(_get(vision, "hidden_size")), depth=int(_get(vision, "num_hidden_layers")),
                intermediate=int(_get(vision, "intermediate_size")),
                patch_values=int(_get(vision, "num_channels", 3)) * patch * patch,
                out_hidden=int(_get(text, "hidden_size")),
                feature_layers=1 if isinstance(layer, int) else len(layer),
                drop_first=_get(config, "vision_feature_select_strategy", "full") == "default",
                head=bool(_get(vision, "vision_use_head", False)),
            )
        raise ValueError(f"no vision FLOPs formula for model_type {model_type!r}")


def vision_frame_flops(shape: VisionShape, patches: int) -> float:
    """One frame (Qwen3-VL: one temporal patch) of ``patches`` patches, the encoder's own
    attention running within the frame (Qwen3-VL's ``cu_seqlens``, SigLIP's per-image batch)."""
    p, d = patches, shape.hidden
    flops = 2.0 * p * shape.patch_values * d  # patch embedding (a convolution with stride = kernel)
    flops += shape.depth * (8.0 * p * d * d + 4.0 * p * p * d + 4.0 * p * d * shape.intermediate)
    if shape.kind == "qwen3_vl":
        wide = d * shape.merge**2
        merged = p // shape.merge**2
        flops += shape.mergers * (2.0 * merged * wide * wide + 2.0 * merged * wide * shape.out_hidden)
    else:
        if shape.head:  # attention pooling: k, v over the patches; q, o and the MLP on one probe token
            flops += 2.0 * d * d * (2 * p + 2) + 4.0 * p * d + 4.0 * d * shape.intermediate
        features = p - 1 if shape.drop_first else p
        flops += 2.0 * features * d * shape.feature_layers * shape.out_hidden  # linear_1
        flops += 2.0 * features * shape.out_hidden * shape.out_hidden  # linear_2
    return flops


def vision_flops(shape: VisionShape, units: Sequence[tuple[int, int]]) -> float:
    """The vision path over ``units``: ``(frames, patches per frame)`` per video or image crop group."""
    return sum(frames * vision_frame_flops(shape, patches) for frames, patches in units)


def vision_units(config: Any, inputs: Mapping[str, Any]) -> list[tuple[int, int]]:
    """``(frames, patches per frame)`` for every video and image the processor's ``inputs`` hold.

    Qwen3-VL: one unit per row ``(t, h, w)`` of ``video_grid_thw`` / ``image_grid_thw`` (``t``
    temporal patches of ``h * w`` patches). LLaVA-OneVision: ``pixel_values_videos [B, F, C, H, W]``
    is ``B * F`` frames; ``pixel_values`` the anyres crops the model encodes (per image as many as
    its ``image_sizes`` give, as ``get_image_features`` counts them).
    """
    model_type = str(_get(config, "model_type", ""))
    units: list[tuple[int, int]] = []
    if model_type.startswith("qwen3_vl"):
        for key in ("video_grid_thw", "image_grid_thw"):
            grid = inputs.get(key)
            if grid is not None:
                units += [(int(t), int(h) * int(w)) for t, h, w in grid.tolist()]
        return units
    if model_type != "llava_onevision":
        raise ValueError(f"no vision FLOPs formula for model_type {model_type!r}")
    patch = int(_get(_get(config, "vision_config"), "patch_size"))
    videos = inputs.get("pixel_values_videos")
    if videos is not None:
        batch, frames, _, height, width = videos.shape
        units.append((batch * frames, (height // patch) * (width // patch)))
    images = inputs.get("pixel_values")
    if images is not None:
        height, width = images.shape[-2:]
        units.append((_image_crops(config, images, inputs), (height // patch) * (width // patch)))
    return units


def _image_crops(config: Any, images: Any, inputs: Mapping[str, Any]) -> int:
    """The crops LLaVA-OneVision's ``get_image_features`` encodes from ``pixel_values``."""
    sizes = inputs.get("image_sizes")
    if images.dim() != 5 or sizes is None:
        return int(images.shape[0])
    from transformers.models.llava_onevision.modeling_llava_onevision import image_size_to_num_patches

    per_sample = inputs.get("batch_num_images")
    patching = [True] * len(sizes) if per_sample is None else [n == 1 for n in per_sample for _ in range(n)]
    side = int(_get(_get(config, "vision_config"), "image_size"))
    return sum(image_size_to_num_patches(image_size=size, grid_pinpoints=_get(config, "image_grid_pinpoints"),
                                         patch_size=side) if patch else 1
               for size, patch in zip(sizes, patching))


@dataclass(frozen=True)
class PrefillFlops:
    """One call's theoretical prefill, summed over its items (FLOPs, not TFLOPs)."""

    vision: float
    llm: float

    @property
    def total(self) -> float:
        return self.vision + self.llm


def call_prefill_flops(config: Any, units: Sequence[tuple[int, int]],
                       layer_lengths: Sequence[Sequence[int]], logits_positions: int = 1) -> PrefillFlops:
    """A ``generate`` call's prefill: the vision path over ``units`` (:func:`vision_units`) and the
    language model per item over its per-layer lengths (``[items][L]``)."""
    llm = LLMShape.from_config(config)
    vision = vision_flops(VisionShape.from_config(config), units) if units else 0.0
    return PrefillFlops(vision=vision, llm=sum(llm_prefill_flops(llm, list(lengths), logits_positions)
                                                 for lengths in layer_lengths))
