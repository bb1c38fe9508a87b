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
    output gate  + 2 n d h d_h                 gated attention only: q_proj also yields the gate
    attention    4 n^2 h d_h                   Q K^T and A V, every query head
    MLP (SwiGLU) 6 n d m                       gate, up, down
    MoE instead  2 n d E + 6 n d m_e k         router over E experts; k experts per token, width m_e
    shared expt  + 6 n d m_s + 2 n d           a MoE's always-on SwiGLU expert and its scalar gate

and the prefill is ``sum_l layer(n_l) + 2 d V`` (``V`` the vocabulary): ``n_l`` is the sequence
length layer ``l`` sees, the same for every layer unless an in-LLM method drops tokens between
layers. With ``h d_h = d``, ``h_kv = h`` and a plain two-matrix MLP this is twice FastV's count.

A hybrid model's linear-attention layers (Gated DeltaNet, ``layer_types`` ``"linear_attention"``)
replace the projections and the attention with (``h_k`` query / key heads of size ``d_k``, ``h_v``
value heads of size ``d_v``, ``c`` the short convolution's kernel, ``C = 64`` the chunk)::

    projections  2 n d (2 h_k d_k + 2 h_v d_v + 2 h_v)   in_proj_qkv, in_proj_z (the output gate),
                 + 2 n h_v d_v d                         in_proj_b, in_proj_a; out_proj
    convolution  2 n c (2 h_k d_k + h_v d_v)             depthwise causal conv over q, k, v
    delta rule   2 n h_v (3 d_k d_v + C (3 d_k + 2 d_v)) per value head (q, k shared across groups)

The delta rule is counted as its chunked form computes it (transformers' torch kernel and
flash-linear-attention's both): per chunk of ``C`` tokens the ``C x C`` products ``K_beta K^T``,
``Q K^T``, the two triangular solves (counted as full ``C x C`` products, as the causal scores are)
and ``A V_new`` give ``C (3 d_k + 2 d_v)`` per token; reading the carried ``d_k x d_v`` state twice
(``K S``, ``Q S``) and writing it once (``K^T V_new``) give ``3 d_k d_v`` per token. Linear in
``n``: a linear-attention layer's cost per token does not grow with the prompt.

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

from vcast.families import family_of

TERA = 1e12


def config_value(config: Any, name: str, default: Any = None) -> Any:
    """``config[name]`` for a dict, ``config.name`` for a config object; ``default`` when absent or None."""
    value = config.get(name) if isinstance(config, Mapping) else getattr(config, name, None)
    return default if value is None else value


def sub_config(config: Any, name: str) -> Any:
    return config_value(config, name, config)


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
        shared_expert_intermediate: ``m_s``, the width of a MoE block's shared expert (0: none).
        attention_gate: softmax attention with an output gate (``q_proj`` twice as wide).
        linear_layers: the layers whose token mixer is linear attention (Gated DeltaNet), not
            softmax attention (empty: none).
        linear_key_heads: ``h_k``.
        linear_value_heads: ``h_v``.
        linear_key_dim: ``d_k``.
        linear_value_dim: ``d_v``.
        linear_conv_kernel: ``c``.
        linear_chunk: ``C``, the chunk of the chunked delta rule.
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
    shared_expert_intermediate: int = 0
    attention_gate: bool = False
    linear_layers: frozenset[int] = field(default_factory=frozenset)
    linear_key_heads: int = 0
    linear_value_heads: int = 0
    linear_key_dim: int = 0
    linear_value_dim: int = 0
    linear_conv_kernel: int = 0
    linear_chunk: int = 64

    @classmethod
    def from_config(cls, config: Any) -> "LLMShape":
        """From a transformers config (its ``text_config`` when it has one) or a dict of its fields.

        MoE layers follow Qwen3-VL-MoE's rule: layer ``i`` is sparse when ``E > 0``, ``i`` is not in
        ``mlp_only_layers`` and ``(i + 1) % decoder_sparse_step == 0``. Linear-attention layers are
        those ``layer_types`` names ``"linear_attention"``, with transformers' ``linear_*`` sizes.
        An output gate on the softmax attention is not in the config: a family's ``llm_shape``
        sets ``attention_gate``.
        """
        text = sub_config(config, "text_config")
        hidden, heads = int(config_value(text, "hidden_size")), int(config_value(text, "num_attention_heads"))
        layers = int(config_value(text, "num_hidden_layers"))
        experts = int(config_value(text, "num_experts", 0))
        moe: frozenset[int] = frozenset()
        if experts > 0:
            step, dense = int(config_value(text, "decoder_sparse_step", 1)), set(config_value(text, "mlp_only_layers", []))
            moe = frozenset(i for i in range(layers) if i not in dense and (i + 1) % step == 0)
        linear = frozenset(i for i, kind in enumerate(config_value(text, "layer_types", ()) or ())
                           if kind == "linear_attention")
        return cls(
            hidden=hidden, layers=layers, heads=heads, kv_heads=int(config_value(text, "num_key_value_heads", heads)),
            head_dim=int(config_value(text, "head_dim", hidden // heads)), intermediate=int(config_value(text, "intermediate_size", 0)),
            vocab=int(config_value(text, "vocab_size")), experts=experts,
            experts_per_token=int(config_value(text, "num_experts_per_tok", 0)) if experts else 0,
            expert_intermediate=int(config_value(text, "moe_intermediate_size", 0)) if experts else 0, moe_layers=moe,
            shared_expert_intermediate=int(config_value(text, "shared_expert_intermediate_size", 0)) if experts else 0,
            linear_layers=linear,
            linear_key_heads=int(config_value(text, "linear_num_key_heads", 0)) if linear else 0,
            linear_value_heads=int(config_value(text, "linear_num_value_heads", 0)) if linear else 0,
            linear_key_dim=int(config_value(text, "linear_key_head_dim", 0)) if linear else 0,
            linear_value_dim=int(config_value(text, "linear_value_head_dim", 0)) if linear else 0,
            linear_conv_kernel=int(config_value(text, "linear_conv_kernel_dim", 0)) if linear else 0,
        )


def attention_projection_flops(shape: LLMShape, n: int) -> float:
    """``q, k, v, o`` on ``n`` tokens: ``2 n d d_h (2 h + 2 h_kv)``, plus ``2 n d h d_h`` for the
    output gate of a gated attention."""
    query_widths = 3 if shape.attention_gate else 2
    return 2.0 * n * shape.hidden * shape.head_dim * (query_widths * shape.heads + 2 * shape.kv_heads)


def attention_core_flops(shape: LLMShape, n: int) -> float:
    """``Q K^T`` and ``A V`` over the full ``n x n`` scores, every query head: ``4 n^2 h d_h``."""
    return 4.0 * n * n * shape.heads * shape.head_dim


def mlp_flops(shape: LLMShape, n: int, layer: int = 0) -> float:
    """Layer ``layer``'s MLP on ``n`` tokens: SwiGLU ``6 n d m``, or the MoE block
    ``2 n d E + 6 n d m_e k`` (router, then ``k`` experts per token)."""
    if layer in shape.moe_layers:
        router = 2.0 * n * shape.hidden * shape.experts
        routed = 6.0 * n * shape.hidden * shape.expert_intermediate * shape.experts_per_token
        shared = (6.0 * n * shape.hidden * shape.shared_expert_intermediate + 2.0 * n * shape.hidden
                  if shape.shared_expert_intermediate else 0.0)
        return router + routed + shared
    return 6.0 * n * shape.hidden * shape.intermediate


def linear_attention_flops(shape: LLMShape, n: int) -> float:
    """A Gated DeltaNet token mixer on ``n`` tokens (the module docstring's formula): projections
    ``2 n d (2 h_k d_k + 2 h_v d_v + 2 h_v) + 2 n h_v d_v d``, convolution ``2 n c (2 h_k d_k + h_v d_v)``,
    chunked delta rule ``2 n h_v (3 d_k d_v + C (3 d_k + 2 d_v))``."""
    d, h_k, h_v = shape.hidden, shape.linear_key_heads, shape.linear_value_heads
    d_k, d_v = shape.linear_key_dim, shape.linear_value_dim
    projections = 2.0 * n * d * (2 * h_k * d_k + 2 * h_v * d_v + 2 * h_v) + 2.0 * n * h_v * d_v * d
    convolution = 2.0 * n * shape.linear_conv_kernel * (2 * h_k * d_k + h_v * d_v)
    delta_rule = 2.0 * n * h_v * (3 * d_k * d_v + shape.linear_chunk * (3 * d_k + 2 * d_v))
    return projections + convolution + delta_rule


def layer_flops(shape: LLMShape, n: int, layer: int = 0) -> float:
    """One decoder layer's prefill on ``n`` tokens: its token mixer (softmax attention, or linear
    attention for the layers in ``shape.linear_layers``) and its MLP."""
    if layer in shape.linear_layers:
        return linear_attention_flops(shape, n) + mlp_flops(shape, n, layer)
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
        kind: ``"qwen_vit"`` (Qwen3-VL's ViT + patch merger + DeepStack mergers) or ``"siglip"``
            (SigLIP + LLaVA's two-layer projector). A family's ``flops`` module builds it from a
            config (``vcast/families/<name>/flops.py``).
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


def vision_frame_flops(shape: VisionShape, patches: int) -> float:
    """One frame (Qwen3-VL: one temporal patch) of ``patches`` patches, the encoder's own
    attention running within the frame (Qwen3-VL's ``cu_seqlens``, SigLIP's per-image batch)."""
    p, d = patches, shape.hidden
    flops = 2.0 * p * shape.patch_values * d  # patch embedding (a convolution with stride = kernel)
    flops += shape.depth * (8.0 * p * d * d + 4.0 * p * p * d + 4.0 * p * d * shape.intermediate)
    if shape.kind == "qwen_vit":
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


@dataclass(frozen=True)
class PrefillFlops:
    """One call's theoretical prefill, summed over its items (FLOPs, not TFLOPs)."""

    vision: float
    llm: float

    @property
    def total(self) -> float:
        return self.vision + self.llm


def vision_units(config: Any, inputs: Mapping[str, Any]) -> list[tuple[int, int]]:
    """``(frames, patches per frame)`` for every video and image the processor's ``inputs`` hold,
    as the config's family counts them (its ``flops`` module's ``vision_units``)."""
    return family_of(config).load("flops").vision_units(config, inputs)


def call_prefill_flops(config: Any, units: Sequence[tuple[int, int]],
                       layer_lengths: Sequence[Sequence[int]], logits_positions: int = 1) -> PrefillFlops:
    """A ``generate`` call's prefill: the vision path over ``units`` (:func:`vision_units`) and the
    language model per item over its per-layer lengths (``[items][L]``), with the formulas of the
    config's family (its ``flops`` module: ``vision_flops``, and ``llm_shape`` where it has one)."""
    module = family_of(config).load("flops")
    llm = getattr(module, "llm_shape", LLMShape.from_config)(config)
    vision = module.vision_flops(config, units) if units else 0.0
    return PrefillFlops(vision=vision, llm=sum(llm_prefill_flops(llm, list(lengths), logits_positions)
                                                 for lengths in layer_lengths))
