"""Drop or merge video tokens inside the language model, between decoder layers.

:class:`LayerDrops` carries out an :class:`~vcast.models.llm_plan.LLMPlan` on one model instance
with PyTorch hooks on its decoder layers (no transformers class is touched):

- **forward hook on layer K-1** (a stage boundary): compute the attention rows the stage asks
  for (:func:`vcast.models.attention_rows.attention_rows` next to the layer's SDPA /
  FlashAttention, or the eager weights), call the stage's ``choose`` per batch row, write any
  merged hidden states, and return the re-laid hidden states ``[B, S', C]``;
- **forward pre-hook on every layer >= K**: at prefill, hand it the re-laid position
  embeddings (the kept tokens' own ``(cos, sin)``, or re-computed ones for compacted positions),
  position ids and attention mask; at decode, pick its cache's columns out of the step's
  layer-0 mask and, for compacted positions, give the new token the position that continues
  this layer's own sequence.
- **DeepStack** (Qwen3-VL adds vision features to the visual tokens after layers 0..n-1 inside
  the text model's loop, against a mask local to that loop): while a plan is active the hook
  takes ``deepstack_visual_embeds`` out of the text model's inputs and adds each layer's
  features itself, in the layer's forward hook, to the visual tokens still present (same
  operation, same rows, so with nothing dropped the result is bit-identical). A plan with
  ``deepstack="before"`` adds feature ``i`` before layer ``i`` instead (feature 0 to the input
  embeddings, feature ``i`` after layer ``i - 1``), as the VidCom2 ``qwen`` FastV port does.
- **Eager scores' memory** (``LLMPlan.scores="eager"``): when a prefill starts, the eager
  attention's per-layer peak is estimated from ``[B, S]`` and the heads
  (:mod:`vcast.models.eager_memory`) and the call refused with a ValueError naming the estimate
  and the device's free memory when it does not fit, before any layer runs.
- **Scores in the model's dtype** (``LLMPlan.score_dtype="model"``): the stage gets the attention
  rows as the eager kernel yields them (bf16 for a bf16 model) instead of float32.
- **The official leak** (``LLMPlan.post_drop_causal="original_positions"``): the layers after a
  prefill drop get a mask in which the query in slot ``i`` sees the kept slots ``j <= p_i``
  (``p_i`` its layer-0 column), the mask the VidCom2 ``qwen`` FastV port rebuilds.

The KV cache follows by itself: ``DynamicCache`` keeps one length per layer, so the layers
after a drop cache only the kept tokens; ``generate``'s bookkeeping reads layer 0, which still
holds the whole (pre-LLM) prompt.

**Hybrid decoders** (``config.layer_types`` names layers that are not softmax attention, e.g.
``"linear_attention"``: Gated DeltaNet, with a recurrent and a convolution state in the cache
instead of per-token keys and values). The plan must pass
:func:`vcast.models.llm_plan.hybrid_problems` (checked here too): scores are read only at softmax
layers (through that layer's own ``self_attn``), and every drop comes after the first softmax layer.
Then:

- at prefill, the layers after a drop that are linear attention get the re-laid hidden states and,
  instead of the softmax layers' 4-D / None mask, their own kind: the 2-D padding mask of the kept
  slots (None when no slot is padding). Their recurrent state builds from the kept tokens alone;
  the layers before the drop built theirs from every token, as a softmax layer's KV cache holds
  them. The pads of a re-laid batch are on the left, so a zeroed pad adds nothing to a state that
  is still zero;
- a drop whose layer ``K - 1`` is linear (a stage scoring with layer ``K``'s weights) takes the
  softmax layers' current mask, recorded at the last softmax layer that ran (the first softmax
  layer always runs before any drop);
- at decode, linear layers are left alone (a one-token step reads no mask and no positions; the
  state is per sequence, not per token); softmax layers are re-aligned as above, each from its own
  cache length. transformers' step mask and ``generate``'s / the handle's cache length come from the
  first softmax layer's KV cache (``Cache.get_seq_length()`` and ``get_mask_sizes(q, 0)`` skip
  the linear layers), which holds the whole prompt because no drop comes before it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional

import torch
from torch import nn

from vcast.models.attention_rows import attention_rows
from vcast.models.eager_memory import check_eager_memory, free_memory_bytes
from vcast.models.layout import SequenceLayout, compact_positions, plan_layout
from vcast.models.llm_masks import (  # the kernel-format helpers, for the official leak mask
    _from_bool,
    _is_flash,
    check_implementation,
    decode_mask,
    prefill_mask,
)
from vcast.models.llm_plan import LLMInfo, LLMPlan, LLMStage, StageInputs, hybrid_problems

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class VideoTags:
    """Where the video tokens are in a ``[B, S]`` sequence: -1 everywhere else.

    Attributes:
        frame: LongTensor ``[B, S]``: frame (temporal patch) within its video.
        patch: LongTensor ``[B, S]``: on-grid index within its frame.
        video: LongTensor ``[B, S]``: which video of the row.
        sizes: ``sizes[b][v]``: the ``T * P`` tokens video ``v`` of row ``b`` had before any
            pruning (what a method's budget counts from), for the videos tagged.
    """

    frame: torch.Tensor
    patch: torch.Tensor
    video: torch.Tensor
    sizes: dict[int, dict[int, int]] = field(default_factory=dict)

    @classmethod
    def empty(cls, shape: tuple[int, int], device: torch.device) -> "VideoTags":
        none = torch.full(shape, -1, dtype=torch.long, device=device)
        return cls(none, none.clone(), none.clone())

    def gather(self, layout: SequenceLayout) -> "VideoTags":
        def pick(values: torch.Tensor) -> torch.Tensor:
            return layout.gather(values, dim=1).masked_fill(~layout.valid.to(values.device), -1)

        return VideoTags(pick(self.frame), pick(self.patch), pick(self.video), self.sizes)


@dataclass
class _StageLayout:
    """The sequence the layers from ``layer`` on hold (for decoding)."""

    layer: int
    columns: torch.Tensor  # [B, S_s] layer-0 column of each slot
    valid: torch.Tensor  # [B, S_s]


@dataclass
class _Prefill:
    """State of one prefill while it runs through the layers."""

    tags: VideoTags
    valid: torch.Tensor  # [B, S] real tokens
    columns: torch.Tensor  # [B, S] layer-0 column of each slot
    embeddings: torch.Tensor  # [B, S0, C] layer-0 input
    entry_tags: VideoTags
    deepstack: Optional[list[torch.Tensor]] = None
    deepstack_rows: Optional[torch.Tensor] = None  # [B, S] row of each visual token's DeepStack feature, or -1
    relaid: Optional[dict[str, Any]] = None  # kwargs for the layers after the last drop
    states: list[dict[str, Any]] = field(default_factory=list)
    kept: list[tuple[int, list[torch.Tensor]]] = field(default_factory=list)  # per stage run: (K, kept columns per row)
    eager_weights: Optional[torch.Tensor] = None
    # hybrid decoders only: the mask of the softmax layers (as the last one that ran got it) and
    # the 2-D padding mask of the linear layers after the last drop
    softmax_mask: Optional[torch.Tensor] = None
    linear_mask: Optional[torch.Tensor] = None


class LayerDrops:
    """The hooks of one in-LLM plan on one model; owned by a :class:`~vcast.models.handle.PruningHandle`."""

    def __init__(self, language_model: nn.Module, plan: LLMPlan, llm: LLMInfo,
                 free_memory: Callable[[torch.device], Optional[int]] = free_memory_bytes) -> None:
        """``free_memory``: ``device -> free bytes`` for the eager-score memory check
        (:func:`vcast.models.eager_memory.check_eager_memory`)."""
        self.language_model = language_model
        self.free_memory = free_memory
        self.plan = plan
        self.llm = llm
        self.layers = list(language_model.layers)
        if not llm.layer_types and getattr(language_model.config, "layer_types", None):
            self.llm = llm = replace(llm, layer_types=tuple(language_model.config.layer_types))
        self.hybrid = llm.hybrid
        self._softmax = [llm.softmax(index) for index in range(len(self.layers))]
        problems = hybrid_problems(plan, llm)
        if problems:
            raise ValueError(f"this in-LLM plan cannot run on a hybrid {llm.family} language model: {problems[0]}")
        self.implementation = language_model.config._attn_implementation
        check_implementation(self.implementation)
        if plan.scores == "eager" and self.implementation != "eager":
            raise ValueError("scores='eager' reads the attention weights of the eager kernel; load the model with "
                             f"attn_implementation='eager' (it has {self.implementation!r})")
        if plan.post_drop_causal == "original_positions" and _is_flash(self.implementation):
            raise ValueError("post_drop_causal='original_positions' needs an explicit mask: load the model with "
                             f"attn_implementation='eager' or 'sdpa' (it has {self.implementation!r})")
        # MRoPE's three axes cannot be re-numbered: such a model's positions stay the original ones.
        self.compact = plan.positions == "compact" and not llm.mrope
        self._stages = {stage.layer: stage for stage in plan.stages}
        self._prefill: Optional[_Prefill] = None
        self._decode: list[_StageLayout] = []
        self._prefill_width = 0
        self._hooks = []
        for index, layer in enumerate(self.layers):
            self._hooks.append(layer.register_forward_pre_hook(self._make_pre_hook(index), with_kwargs=True))
            self._hooks.append(layer.register_forward_hook(self._make_post_hook(index), with_kwargs=True))
        if plan.scores == "eager":
            for stage in plan.stages:
                if stage.queries is not None:
                    attention = self.layers[stage.layer - 1].self_attn
                    self._hooks.append(attention.register_forward_hook(self._keep_eager_weights))

    def remove(self) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()
        self._prefill = None
        self._decode = []

    # Called by the handle ---------------------------------------------------------------------
    def begin_prefill(self, kwargs: dict[str, Any], tags: VideoTags) -> dict[str, Any]:
        """Start a prefill (the language model's inputs after any pre-LLM pruning); returns them
        with DeepStack taken over."""
        embeds = kwargs["inputs_embeds"]
        mask = kwargs.get("attention_mask")
        batch, width = embeds.shape[:2]
        if self.plan.scores == "eager":  # refuse before the first layer materialises its weights
            check_eager_memory(batch, self.language_model.config.num_attention_heads, width, embeds.dtype,
                               embeds.device, self.free_memory)
        valid = (torch.ones(batch, width, dtype=torch.bool, device=embeds.device) if mask is None
                 else mask.to(embeds.device).bool())
        columns = torch.arange(width, device=embeds.device).expand(batch, width)
        state = _Prefill(tags=tags, valid=valid, columns=columns, embeddings=embeds, entry_tags=tags,
                         states=[{} for _ in range(batch)])
        deepstack = kwargs.get("deepstack_visual_embeds")
        if deepstack is not None:
            visual = kwargs["visual_pos_masks"].to(embeds.device)
            rows = (visual.flatten().long().cumsum(0) - 1).view(visual.shape)
            state.deepstack = list(deepstack)
            state.deepstack_rows = rows.masked_fill(~visual, -1)
            kwargs = dict(kwargs, deepstack_visual_embeds=None, visual_pos_masks=None)
            if self.plan.deepstack == "before" and bool((tags.frame >= 0).any()) and state.deepstack:
                # the VidCom2 qwen FastV port adds feature i before layer i: feature 0 to the input
                embeds = self._add_deepstack(embeds, state, state.deepstack[0])
                state.deepstack = state.deepstack[1:]
                state.embeddings = embeds
                kwargs["inputs_embeds"] = embeds
        self._prefill = state
        self._decode = []
        self._prefill_width = width
        return kwargs

    def end_prefill(self) -> Optional[list[tuple[int, list[torch.Tensor]]]]:
        """Close the prefill: per stage that ran, ``(K, kept video columns per row)`` in the
        language model's input sequence (None outside a prefill)."""
        state, self._prefill = self._prefill, None
        return None if state is None else state.kept

    # Hooks --------------------------------------------------------------------------------------
    def _make_pre_hook(self, index: int):
        def hook(module: nn.Module, args: tuple, kwargs: dict) -> Optional[tuple[tuple, dict]]:
            state = self._prefill
            if state is not None:
                if self.hybrid:
                    return self._hybrid_prefill_kwargs(index, args, kwargs, state)
                if state.relaid is None:
                    return None
                return args, {**kwargs, **state.relaid}
            if not self._softmax[index]:  # a linear layer decodes from its state: nothing to re-align
                return None
            stage = self._decode_stage(index)
            if stage is None:
                return None
            return args, self._decode_kwargs(index, stage, args, kwargs)

        return hook

    def _make_post_hook(self, index: int):
        def hook(module: nn.Module, args: tuple, kwargs: dict, output: Any) -> Any:
            state = self._prefill
            if state is None:
                return None
            hidden = output[0] if isinstance(output, tuple) else output
            if state.deepstack is not None and index < len(state.deepstack):
                hidden = self._add_deepstack(hidden, state, state.deepstack[index])
            stage = self._stages.get(index + 1)
            if stage is not None:
                hidden = self._drop(stage, module, args, kwargs, hidden, state)
            if isinstance(output, tuple):
                return (hidden, *output[1:])
            return hidden

        return hook

    def _hybrid_prefill_kwargs(self, index: int, args: tuple, kwargs: dict,
                               state: _Prefill) -> Optional[tuple[tuple, dict]]:
        """A hybrid decoder's prefill: softmax layers get the re-laid kwargs (their mask is
        recorded), linear layers the same with their own 2-D padding mask."""
        if self._softmax[index]:
            if state.relaid is not None:
                kwargs = {**kwargs, **state.relaid}
            state.softmax_mask = kwargs.get("attention_mask")
            return None if state.relaid is None else (args, kwargs)
        if state.relaid is None:
            return None
        return args, {**kwargs, **state.relaid, "attention_mask": state.linear_mask}

    def _keep_eager_weights(self, module: nn.Module, args: tuple, output: Any) -> None:
        if self._prefill is not None and isinstance(output, tuple) and len(output) > 1 and output[1] is not None:
            self._prefill.eager_weights = output[1]

    # DeepStack ----------------------------------------------------------------------------------
    @staticmethod
    def _add_deepstack(hidden: torch.Tensor, state: _Prefill, features: torch.Tensor) -> torch.Tensor:
        rows = state.deepstack_rows
        present = rows >= 0
        hidden = hidden.clone()
        features = features.to(hidden.device, hidden.dtype)
        hidden[present, :] = hidden[present, :] + features.index_select(0, rows[present])
        return hidden

    # Prefill drop -------------------------------------------------------------------------------
    def _scores(self, stage: LLMStage, layer: nn.Module, args: tuple, kwargs: dict, hidden: torch.Tensor,
                state: _Prefill, row: int, queries: torch.Tensor) -> torch.Tensor:
        """``[H, R, S]`` attention of ``queries`` in row ``row`` (float32, or the model's dtype
        under ``score_dtype="model"``)."""
        in_model_dtype = self.plan.score_dtype == "model"
        if self.plan.scores == "eager":
            weights = state.eager_weights
            if weights is None:
                raise RuntimeError("scores='eager' but the attention returned no weights")
            weights = weights[row]
            if queries.numel() != weights.shape[1] or not bool(
                    (queries == torch.arange(weights.shape[1], device=queries.device)).all()):
                weights = weights.index_select(1, queries)  # all rows in order (queries="all") need no copy
            return weights if in_model_dtype else weights.float()
        if stage.score_layer == stage.layer - 1:
            scorer = layer
            source = kwargs.get("hidden_states", args[0] if args else None)
        else:
            scorer = self.layers[stage.layer]
            source = hidden
        cos, sin = kwargs["position_embeddings"]
        normed = scorer.input_layernorm(source[row : row + 1])
        return attention_rows(scorer.self_attn, normed, (cos[row : row + 1], sin[row : row + 1]), queries,
                              key_mask=state.valid[row : row + 1], rotary=stage.rotary, causal=stage.causal,
                              score_dtype=self.plan.score_dtype, scale=self.plan.score_scale)[0]

    def _drop(self, stage: LLMStage, layer: nn.Module, args: tuple, kwargs: dict, hidden: torch.Tensor,
              state: _Prefill) -> torch.Tensor:
        batch, width = hidden.shape[:2]
        survives = state.valid.clone()
        written = hidden
        kept = []
        for row in range(batch):
            visual = ((state.tags.frame[row] >= 0) & state.valid[row]).nonzero().squeeze(1)
            if visual.numel() == 0:
                kept.append(state.columns[row, visual])
                continue
            real = state.valid[row].nonzero().squeeze(1)
            if stage.queries == "last":
                queries = real[-1:]
            elif stage.queries == "text":
                queries = real[real > visual[-1]]
            elif stage.queries == "all":
                queries = real
            else:
                queries = real[:0]
            attention = (self._scores(stage, layer, args, kwargs, hidden, state, row, queries)
                         if stage.queries is not None and queries.numel() else None)
            entry_visual = (state.entry_tags.frame[row] >= 0).nonzero().squeeze(1)
            inputs = StageInputs(
                stage=self.plan.stages.index(stage), layer=stage.layer, num_layers=self.llm.num_layers,
                hidden=hidden[row], visual=visual, frames=state.tags.frame[row, visual],
                patches=state.tags.patch[row, visual], videos=state.tags.video[row, visual], rows=queries,
                attention=attention, entry_tokens=int(entry_visual.numel()), embeddings=state.embeddings[row],
                entry_visual=entry_visual, state=state.states[row], video_sizes=dict(state.tags.sizes.get(row, {})),
            )
            choice = stage.choose(inputs)
            keep = choice.keep.to(hidden.device).long()
            if keep.numel() and (int(keep.min()) < 0 or int(keep.max()) >= visual.numel()
                                 or keep.unique().numel() != keep.numel()):
                raise ValueError(f"stage at layer {stage.layer}: keep must be distinct indices in [0, {visual.numel()}), "
                                 f"got {keep.tolist()[:20]}")
            dropped = torch.ones(visual.numel(), dtype=torch.bool, device=hidden.device)
            dropped[keep] = False
            survives[row, visual[dropped]] = False
            if choice.tokens is not None:
                if written is hidden:
                    written = hidden.clone()
                written[row, visual[keep]] = choice.tokens.to(written)
            kept.append(torch.sort(state.columns[row, visual[keep]]).values)
        state.kept.append((stage.layer, kept))
        state.eager_weights = None
        if bool((survives == state.valid).all()) and written is hidden:
            return hidden
        had_padding = not bool(state.valid.all())
        layout = plan_layout(survives, state.valid.long() if had_padding else None)
        relaid = dict(state.relaid or {})
        cos, sin = kwargs["position_embeddings"]
        new_valid = layout.valid.to(hidden.device)
        new_hidden = layout.gather(written, dim=1)
        if self.compact:
            positions = compact_positions(new_valid)
            relaid["position_embeddings"] = self.language_model.rotary_emb(new_hidden, positions)
        else:
            relaid["position_embeddings"] = (layout.gather(cos, dim=1), layout.gather(sin, dim=1))
        relaid["position_ids"] = compact_positions(new_valid)
        # the softmax layers' mask: this layer's own, or (a linear layer K - 1) the last softmax layer's
        mask = kwargs.get("attention_mask") if self._softmax[stage.layer - 1] else state.softmax_mask
        relaid["attention_mask"] = prefill_mask(mask, layout, self.implementation, hidden.dtype)
        if self.hybrid:  # the linear layers' 2-D padding mask of the kept slots
            state.linear_mask = None if bool(new_valid.all()) else new_valid.long()
        state.columns = layout.gather(state.columns, dim=1)
        if self.plan.post_drop_causal == "original_positions":
            relaid["attention_mask"] = self._original_positions_mask(state.columns, new_valid, hidden.dtype)
        state.relaid = relaid
        state.valid = new_valid
        state.tags = state.tags.gather(layout)
        if state.deepstack_rows is not None:
            state.deepstack_rows = layout.gather(state.deepstack_rows, dim=1).masked_fill(~new_valid, -1)
        self._decode.append(_StageLayout(layer=stage.layer, columns=state.columns, valid=new_valid))
        logger.debug("in-LLM drop before layer %d: %d -> %d columns", stage.layer, width, layout.width)
        return new_hidden

    def _original_positions_mask(self, columns: torch.Tensor, valid: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """``[B, 1, S', S']``: slot ``i`` sees the kept slots ``j <= columns[i]`` (its layer-0
        column), pad keys masked, pad rows see themselves (the VidCom2 qwen FastV port's mask)."""
        slots = torch.arange(columns.shape[1], device=columns.device)
        allowed = (slots[None, None, :] <= columns[:, :, None]) & valid[:, None, :]
        eye = torch.eye(columns.shape[1], dtype=torch.bool, device=columns.device)
        allowed = allowed | (eye[None] & ~valid[:, :, None])
        return _from_bool(allowed[:, None], self.implementation, dtype)

    # Decode -----------------------------------------------------------------------------------------
    def _decode_stage(self, index: int) -> Optional[_StageLayout]:
        found = None
        for stage in self._decode:
            if stage.layer <= index:
                found = stage
        return found

    def _decode_kwargs(self, index: int, stage: _StageLayout, args: tuple, kwargs: dict) -> dict:
        hidden = kwargs.get("hidden_states", args[0] if args else None)
        queries = hidden.shape[1]
        cache = kwargs.get("past_key_values")
        if cache is None:
            raise ValueError("decoding after an in-LLM drop needs the KV cache (use_cache=True)")
        mask = kwargs.get("attention_mask")
        if mask is not None:
            total = mask.shape[-1]
        else:
            total = self._prefill_width + cache.get_seq_length(index) - stage.columns.shape[1] + queries
        batch = stage.columns.shape[0]
        new = total - self._prefill_width
        new_columns = torch.arange(self._prefill_width, total, device=stage.columns.device).expand(batch, new)
        columns = torch.cat([stage.columns, new_columns], 1)
        keys_valid = torch.cat([stage.valid, torch.ones_like(new_columns, dtype=torch.bool)], 1)
        kwargs = dict(kwargs)
        kwargs["attention_mask"] = decode_mask(mask, columns, keys_valid, queries, self.implementation, hidden.dtype)
        if self.compact:
            past = cache.get_seq_length(index) - stage.columns.shape[1]  # tokens decoded so far
            positions = (stage.valid.sum(1, keepdim=True) + past
                         + torch.arange(queries, device=stage.valid.device)[None])
            kwargs["position_embeddings"] = self.language_model.rotary_emb(hidden, positions.to(hidden.device))
        return kwargs
