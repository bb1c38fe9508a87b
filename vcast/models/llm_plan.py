"""What an in-LLM method asks of the model: where to drop video tokens, which attention to read.

An **in-LLM method** (FastV, PDrop, SparseVLM, FlashVID's last step, the inner parts of HoliTom,
PruneVid and FrameFusion) is registered with :func:`vcast.registry.register_llm_method` as a
*planner*: ``planner(ratio, llm: LLMInfo, **params) -> LLMPlan``. The plan says

- which ordinary compressor (if any) runs on the video tokens before the LLM (``pre_method``);
- at which layer boundaries tokens may be dropped or merged (``stages``), and for each, which
  attention rows the choice needs;
- how the kept tokens are numbered afterwards (``positions``).

:mod:`vcast.models.layer_drops` carries the plan out inside the model: before layer ``K`` of a
stage it gives the stage's ``choose`` function one :class:`StageInputs` per batch row and re-lays
the hidden states, KV cache, positions, masks and DeepStack inputs after its :class:`StageChoice`.

**Hybrid language models** (``LLMInfo.layer_types`` names layers that are not softmax attention,
e.g. ``"linear_attention"``: Gated DeltaNet, a recurrent state instead of a KV cache): a plan
applies only when :func:`hybrid_problem` finds nothing, i.e. every stage that reads attention
reads it at a softmax-attention layer (a linear layer has no attention scores), and every drop
comes after the first softmax layer (transformers reads the decode's cache length and mask size
from that layer's KV cache, which must hold the whole prompt). :meth:`LLMPlan.check` raises it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

import torch

from vcast.families import Family

QUERIES = ("last", "text", "all")
SCORE_MODES = ("rows", "eager")
SCORE_DTYPES = ("float32", "model")
SCORE_SCALES = ("multiply", "divide")
DEEPSTACK_MODES = ("after", "before")
POST_DROP_CAUSAL = ("kept", "original_positions")
# ``config.layer_types`` values of softmax-attention layers (anything else, e.g. "linear_attention",
# has no attention scores and no per-token KV cache).
SOFTMAX_LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention")


@dataclass(frozen=True)
class LLMInfo:
    """The language model a plan is made for.

    Attributes:
        family: the model family's display name (for messages).
        num_layers: decoder layers ``L``.
        method_defaults: the family's per-method defaults (``Family.method_defaults``:
            ``{method: {param: value}}``, e.g. FlashVID's official layer for this family).
        mrope: whether its positions are multi-axis (MRoPE): kept tokens cannot be renumbered.
        layer_types: ``config.layer_types`` (one per layer), or empty: every layer is softmax
            attention. Types outside :data:`SOFTMAX_LAYER_TYPES` make the model hybrid.
    """

    family: str
    num_layers: int
    method_defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    mrope: bool = False
    layer_types: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "layer_types", tuple(self.layer_types))
        if self.layer_types and len(self.layer_types) != self.num_layers:
            raise ValueError(f"layer_types names {len(self.layer_types)} layers, the model has {self.num_layers}")

    @classmethod
    def of(cls, family: Family, num_layers: int, layer_types: Optional[Sequence[str]] = None) -> "LLMInfo":
        """The language model of ``family`` with ``num_layers`` layers (of ``layer_types``, when
        the config names them)."""
        return cls(family=family.display, num_layers=num_layers, method_defaults=family.method_defaults,
                   mrope=family.mrope, layer_types=tuple(layer_types or ()))

    def softmax(self, layer: int) -> bool:
        """Whether decoder layer ``layer`` is softmax attention (has attention scores and a KV cache)."""
        return not self.layer_types or self.layer_types[layer] in SOFTMAX_LAYER_TYPES

    @property
    def hybrid(self) -> bool:
        """Whether some layer is not softmax attention."""
        return any(not self.softmax(layer) for layer in range(len(self.layer_types)))

    @property
    def softmax_layers(self) -> tuple[int, ...]:
        return tuple(layer for layer in range(self.num_layers) if self.softmax(layer))


@dataclass(frozen=True)
class StageInputs:
    """One batch row at one stage boundary (all tensors on the model's device).

    Attributes:
        stage: index of the stage in the plan.
        layer: ``K``: the tokens chosen here are the ones layer ``K`` and later see.
        num_layers: ``L``.
        hidden: ``[S, C]`` the residual stream entering layer ``K`` (the row's padded width).
        visual: LongTensor ``[N]``: columns of ``hidden`` holding the video tokens still present,
            ascending.
        frames: LongTensor ``[N]``: frame (temporal patch) of each within its video.
        patches: LongTensor ``[N]``: on-grid index of each within its frame (its original place).
        videos: LongTensor ``[N]``: which video of the row each belongs to (0, 1, ...).
        rows: LongTensor ``[R]``: columns of the query rows of ``attention`` (empty without scores).
        attention: ``[H, R, S]`` softmax attention of those rows over every column (float32, or
            the model's dtype under ``LLMPlan.score_dtype="model"``), or None when the stage
            asked for none.
        entry_tokens: ``N0``: video tokens of the row when it entered the LLM.
        embeddings: ``[S0, C]`` the row's input embeddings at layer 0.
        entry_visual: LongTensor ``[N0]``: columns of ``embeddings`` holding the video tokens.
        state: a dict the method may use to carry values between the stages of this row's prefill.
        video_sizes: ``{video: T * P}``: each video's token count before any pruning (its
            pre-LLM step included), when the adapter knows it.
    """

    stage: int
    layer: int
    num_layers: int
    hidden: torch.Tensor
    visual: torch.Tensor
    frames: torch.Tensor
    patches: torch.Tensor
    videos: torch.Tensor
    rows: torch.Tensor
    attention: Optional[torch.Tensor]
    entry_tokens: int
    embeddings: torch.Tensor
    entry_visual: torch.Tensor
    state: dict[str, Any]
    video_sizes: dict[int, int] = field(default_factory=dict)


@dataclass(frozen=True)
class StageChoice:
    """What survives a stage.

    Attributes:
        keep: LongTensor ``[K]``: indices into ``StageInputs.visual`` of the video tokens that
            stay (any order; duplicates are an error).
        tokens: ``[K, C]`` new hidden states for them (merging methods), row ``k`` for
            ``keep[k]``; None keeps their own.
    """

    keep: torch.Tensor
    tokens: Optional[torch.Tensor] = None


@dataclass(frozen=True)
class LLMStage:
    """One drop point.

    Attributes:
        layer: ``K`` in ``[1, L - 1]``: the drop happens between layers ``K - 1`` and ``K``.
        choose: ``choose(StageInputs) -> StageChoice``.
        queries: which attention rows ``choose`` reads: None (none), ``"last"`` (the last
            prompt token), ``"text"`` (every token after the row's last video token) or
            ``"all"`` (every real token of the row: ``[H, S, S]``, for column means).
        score_layer: whose attention: ``K - 1`` (the layer just run, as FastV reads it) or
            ``K`` (the next layer's weights applied to its input, as PDrop computes it).
        rotary: scores with the rotary embedding (False: PruneVid's pre-RoPE scores).
        causal: scores with the causal mask (False: PruneVid's).
    """

    layer: int
    choose: Callable[[StageInputs], StageChoice]
    queries: Optional[str] = None
    score_layer: Optional[int] = None
    rotary: bool = True
    causal: bool = True

    def __post_init__(self) -> None:
        if self.queries is not None and self.queries not in QUERIES:
            raise ValueError(f"queries must be one of {QUERIES} or None, got {self.queries!r}")
        score_layer = self.layer - 1 if self.score_layer is None else self.score_layer
        if score_layer not in (self.layer - 1, self.layer):
            raise ValueError(f"score_layer must be {self.layer - 1} or {self.layer}, got {score_layer}")
        object.__setattr__(self, "score_layer", score_layer)


@dataclass(frozen=True)
class LLMPlan:
    """What an in-LLM method does to one model.

    Attributes:
        stages: drop points, by increasing layer.
        pre_method: an ordinary compressor run on the video tokens before the LLM, or None.
        pre_ratio: its ratio.
        pre_params: its parameters.
        positions: ``"original"`` (kept tokens keep their positions, FastV) or ``"compact"``
            (re-numbered 0, 1, ... after each stage, decoding continues each layer's own count:
            PDrop, SparseVLM). Qwen3-VL always keeps the original MRoPE coordinates.
        scores: ``"rows"`` (only the needed attention rows, recomputed next to SDPA /
            FlashAttention) or ``"eager"`` (read from the eager attention's full weights, as the
            official codes do; needs ``attn_implementation="eager"``).
        score_dtype: the precision of ``StageInputs.attention``. ``"float32"`` (default): the
            logits and the softmax in float32 from the model's q / k (eager weights upcast).
            ``"model"``: the probabilities as HF's eager kernel yields them in the model's dtype:
            ``q k^T`` and its scaling in the model's dtype, the softmax in float32, the result
            rounded to the model's dtype (bf16 in, bf16 out; the eager weights as they are), so
            that a method's own reductions (head means) run in that dtype like the official
            codes'. See :func:`vcast.models.attention_rows.attention_rows` for what stays
            kernel-dependent.
        score_scale: how the recomputed rows scale ``q k^T``: ``"multiply"`` by the module's
            ``scaling`` (HF's eager kernel) or ``"divide"`` by ``sqrt(head_dim)`` (PDrop's manual
            scores; in float32 the two differ in the last bit now and then, in bf16 no logit
            rounds differently for head_dim 32 or 128). Ignored by ``scores="eager"``.
        deepstack: when Qwen3-VL's DeepStack features are added: ``"after"`` layer ``i`` (HF's
            text model, default) or ``"before"`` layer ``i`` (the VidCom2 ``qwen``-branch FastV
            port's custom loop: feature ``i`` reaches layer ``i`` one layer early; applied only
            to a prefill that holds video tokens, like that port's compression).
        post_drop_causal: the prefill mask of the layers after a drop: ``"kept"`` (causal over
            the kept tokens, default) or ``"original_positions"`` (the VidCom2 ``qwen`` FastV
            port's rebuilt eager mask: the query in slot ``i`` sees the kept slots
            ``j <= p_i``, ``p_i`` its original position, so tokens after a gap see up to that
            many later tokens; not expressible with FlashAttention).
    """

    stages: tuple[LLMStage, ...]
    pre_method: Optional[str] = None
    pre_ratio: float = 1.0
    pre_params: dict[str, Any] = field(default_factory=dict)
    positions: str = "original"
    scores: str = "rows"
    score_dtype: str = "float32"
    score_scale: str = "multiply"
    deepstack: str = "after"
    post_drop_causal: str = "kept"

    def check(self, llm: LLMInfo) -> None:
        """ValueError naming what does not fit ``llm``."""
        if self.positions not in ("original", "compact"):
            raise ValueError(f"positions must be 'original' or 'compact', got {self.positions!r}")
        if self.scores not in SCORE_MODES:
            raise ValueError(f"scores must be one of {SCORE_MODES}, got {self.scores!r}")
        for name, value, options in (("score_dtype", self.score_dtype, SCORE_DTYPES),
                                     ("score_scale", self.score_scale, SCORE_SCALES),
                                     ("deepstack", self.deepstack, DEEPSTACK_MODES),
                                     ("post_drop_causal", self.post_drop_causal, POST_DROP_CAUSAL)):
            if value not in options:
                raise ValueError(f"{name} must be one of {options}, got {value!r}")
        layers = [stage.layer for stage in self.stages]
        if layers != sorted(set(layers)):
            raise ValueError(f"stage layers must increase strictly, got {layers}")
        for stage in self.stages:
            if not 1 <= stage.layer <= llm.num_layers - 1:
                raise ValueError(f"a drop layer must be in [1, {llm.num_layers - 1}] for a {llm.num_layers}-layer "
                                 f"{llm.family} language model, got {stage.layer}")
            if self.scores == "eager" and stage.queries is not None and stage.score_layer != stage.layer - 1:
                raise ValueError("scores='eager' reads the weights of the layer just run; a stage scoring with the "
                                 f"next layer's weights (layer {stage.layer}) computes its rows itself")
        problems = hybrid_problems(self, llm)
        if problems:
            raise ValueError(f"{problems[0]}" + (f" (and {len(problems) - 1} more stage(s) alike)"
                                                 if len(problems) > 1 else ""))


def stage_problem(stage: LLMStage, llm: LLMInfo) -> Optional[str]:
    """Why ``stage`` cannot run on the hybrid language model ``llm``, or None (always None on a
    model whose layers are all softmax attention); see the module docstring."""
    if not llm.hybrid:
        return None
    softmax = llm.softmax_layers
    if stage.queries is not None and not llm.softmax(stage.score_layer):
        return (f"its stage before layer {stage.layer} chooses by the attention scores of layer "
                f"{stage.score_layer}, a {llm.layer_types[stage.score_layer]!r} layer, which has none "
                f"(softmax attention only in layer{'s' if len(softmax) > 1 else ''} {layer_span(softmax)} of "
                f"{llm.num_layers})")
    if not softmax or stage.layer <= softmax[0]:
        first = f"layer {softmax[0]}, the first softmax-attention layer" if softmax else "a softmax-attention layer"
        return (f"its stage before layer {stage.layer} drops tokens before {first}, whose KV cache transformers "
                "reads for every decoding step's cache length and mask size, so it must hold the whole prompt")
    return None


def hybrid_problems(plan: LLMPlan, llm: LLMInfo) -> list[str]:
    """:func:`stage_problem` of each stage of ``plan`` that has one, in order."""
    return [problem for problem in (stage_problem(stage, llm) for stage in plan.stages) if problem is not None]


def layer_span(layers: Sequence[int]) -> str:
    """``3, 7, 11, ..., 63`` for an arithmetic run longer than four, else every layer listed."""
    layers = list(layers)
    if len(layers) > 4 and len({b - a for a, b in zip(layers, layers[1:])}) == 1:
        return f"{layers[0]}, {layers[1]}, {layers[2]}, ..., {layers[-1]}"
    return ", ".join(map(str, layers))


def layer_scaled(layer: int, reference_layers: int, num_layers: int) -> int:
    """A drop layer given for a ``reference_layers``-deep model, moved to ``num_layers`` layers
    (``round(layer * L / L_ref)`` within ``[1, L - 1]``); unchanged when the depths match."""
    if num_layers == reference_layers:
        return layer
    return min(max(1, round(layer * num_layers / reference_layers)), num_layers - 1)


def layer_averaged_retention(entry: float, stage_layers: list[int], stage_fractions: list[float],
                             num_layers: int) -> float:
    """``rho_bar``: the share of the original video tokens each layer sees, averaged over layers.

    Args:
        entry: share that enters the LLM (after any pre-LLM step).
        stage_layers: the drop layers ``K_i`` (increasing).
        stage_fractions: share of the original tokens after each drop.
        num_layers: ``L``.
    """
    bounds = [0, *stage_layers, num_layers]
    shares = [entry, *stage_fractions]
    return sum((bounds[i + 1] - bounds[i]) * shares[i] for i in range(len(shares))) / num_layers
