"""The hooks that prune one model instance, and the handle that owns them.

Hooks, all on the instance (no transformers class is touched):

- model (top level), pre/post: a call starts at a prefill; decode steps are timed; peak memory
  is read after every step.
- embedder (``model.model``), pre: at prefill, when the vision encoder's outputs come
  precomputed (``generate`` in transformers >= 5.18), select on them and prune the token ids,
  the encoder outputs, the mask and the positions before anything is embedded. Otherwise
  remember ``input_ids`` (which the language model never sees) for the next hook.
- language model, pre: at a prefill not pruned yet, select on the embeddings and re-lay them
  (and the mask, positions and DeepStack features); at decode, re-align the attention mask
  and positions with the pruned cache. Post: end of the prefill timing.
- decoder layers (in-LLM methods only): :class:`vcast.models.layer_drops.LayerDrops`.
- vision encoder, pre/post: vision timing.

``generate``'s own ``input_ids``, attention mask and position ids stay full-length: its output
keeps the full prompt, and decoding positions continue from the unpruned prompt.

The handle wires the hooks and holds a call's state; the work is in small pieces of their own:
:mod:`vcast.models.call_meter` (the spans and peak memory of a call), :mod:`vcast.models.segment_pruner`
(the method on each segment: which tokens survive), :mod:`vcast.models.prefill_routes` (re-laying
a prefill to the survivors, before or after embedding), :mod:`vcast.models.decode_alignment` (the
decoding steps against the pruned cache), :mod:`vcast.models.call_record` (a call's record -> its
:class:`~vcast.models.stats.CallStats`) and :mod:`vcast.models.layer_drops` (the in-LLM stages).
"""

from __future__ import annotations

import logging
from typing import Any, Optional

import torch
from torch import nn

from vcast.families import family_of
from vcast.models.adapter import ActivePruning, Adapter, PromptContext, TokenSource
from vcast.models.attached import forget
from vcast.models.call_meter import CallMeter
from vcast.models.call_record import CallRecord, resolve
from vcast.models.decode_alignment import realign_decode
from vcast.models.layer_drops import LayerDrops, VideoTags
from vcast.models.llm_plan import LLMInfo, LLMPlan
from vcast.models.prefill_routes import PrunedPrefill, Select, prune_embedded, prune_encoded
from vcast.models.segment_pruner import prune_segments
from vcast.models.stats import CallStats, LLMStageStats
from vcast.models.vision_probe import MEAN_QUERY_ATTENTION, VisionProbe, check_supplied, inputs_for_videos
from vcast.registry import call_params, get_method, is_llm_method, method_inputs

logger = logging.getLogger(__name__)


def _is_prefill(kwargs: dict[str, Any]) -> bool:
    cache = kwargs.get("past_key_values")
    return cache is None or cache.get_seq_length() == 0


class PruningHandle:
    """Returned by :func:`vcast.models.attach`; see its docstring."""

    def __init__(self, model: nn.Module, adapter: Adapter, method: str, ratio: float,
                 params: dict[str, Any]) -> None:
        self.model = model
        self.adapter = adapter
        self.method = method
        self.ratio = ratio
        self.params = dict(params)
        self._meter = CallMeter(next(adapter.language_model.parameters()).device)
        self._context: Optional[PromptContext] = None
        self._active: Optional[ActivePruning] = None
        self._resolved: Optional[CallStats] = None
        self._hooks: list[torch.utils.hooks.RemovableHandle] = []
        self._inputs = method_inputs(method, **self.params)
        check_supplied(adapter, self._inputs, method, self.params)  # before any hook: a refusal leaves none
        self._probe: Optional[VisionProbe] = None
        self.plan: Optional[LLMPlan] = None
        self._drops: Optional[LayerDrops] = None
        self._tags: Optional[VideoTags] = None
        self._pre = (method, ratio, self.params)  # the compressor run before the language model
        if is_llm_method(method):
            self.plan = llm_plan(model, adapter, method, ratio, self.params)
            self._pre = (self.plan.pre_method, self.plan.pre_ratio, dict(self.plan.pre_params))
        self._register()

    # Public ---------------------------------------------------------------------------------
    @property
    def attached(self) -> bool:
        return bool(self._hooks)

    @property
    def stats(self) -> Optional[CallStats]:
        """The last call (prefill and the decode steps after it), or None before the first.

        Reading it waits for the device (CUDA events are resolved here, not in the hooks).
        """
        meter = self._meter
        if meter.record is None:
            return None
        if self._resolved is None:
            self._resolved = resolve(meter.record, self.method, self.ratio, meter.clock, meter.memory,
                                     self._num_layers if self.plan is not None else None)
        return self._resolved

    def detach(self) -> None:
        """Remove every hook: the model behaves exactly as before :func:`attach`. Idempotent."""
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()
        if self._probe is not None:
            self._probe.remove()
            self._probe = None
        if self._drops is not None:
            self._drops.remove()
            self._drops = None
        self._context = self._active = None
        forget(self.model, self)

    def __enter__(self) -> "PruningHandle":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.detach()

    def __repr__(self) -> str:
        state = "attached" if self.attached else "detached"
        return (f"PruningHandle({self.adapter.family}, method={self.method!r}, ratio={self.ratio}, "
                f"positions={self.adapter.positions!r}, {state})")

    # Hook registration ------------------------------------------------------------------------
    def _register(self) -> None:
        adapter = self.adapter
        vision_first, vision_last = adapter.vision_modules()
        self._hooks = [
            self.model.register_forward_pre_hook(self._on_call_start, with_kwargs=True),
            self.model.register_forward_hook(self._on_call_end, with_kwargs=True),
            adapter.embedder.register_forward_pre_hook(self._on_embedder, with_kwargs=True),
            adapter.language_model.register_forward_pre_hook(self._on_language_model, with_kwargs=True),
            adapter.language_model.register_forward_hook(self._on_language_model_end),
            vision_first.register_forward_pre_hook(self._on_vision_start),
            vision_last.register_forward_hook(self._on_vision_end),
        ]
        if self.plan is not None:
            self._drops = LayerDrops(adapter.language_model, self.plan, llm_info(self.model, adapter))
            self._num_layers: Optional[int] = self._drops.llm.num_layers  # kept: stats may be read after detach
        if self._inputs:  # only methods that read the vision encoder pay for it
            needs_attention = bool({"vision_attention", "vision_keys"} & set(self._inputs))
            self._probe = VisionProbe(adapter, attention=needs_attention,
                                      mean_query=MEAN_QUERY_ATTENTION in self._inputs)

    # Hooks ------------------------------------------------------------------------------------
    def _start_call(self) -> None:
        clean = self._meter.start_call()
        self._resolved = None
        self._context = self._active = None
        if clean and self._probe is not None:  # vision calls of an earlier prompt
            self._probe.clear()

    def _on_call_start(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        # Decided here: the forward fills the cache, so its post hook would see a decode.
        decode = not _is_prefill(kwargs)
        if not decode:
            self._start_call()
        self._meter.step_start(decode)

    def _on_call_end(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        self._meter.step_end()
        self._resolved = None

    def _on_vision_start(self, module: nn.Module, args: tuple) -> None:
        self._meter.vision_start()

    def _on_vision_end(self, module: nn.Module, args: tuple, output: Any) -> None:
        self._meter.vision_end()

    def _on_embedder(self, module: nn.Module, args: tuple, kwargs: dict) -> Optional[tuple[tuple, dict]]:
        if not _is_prefill(kwargs):
            if self._active is not None:
                self.adapter.check_decode(kwargs)
            return None
        if not self._meter.in_call:  # the embedder was called directly, not through the model
            self._start_call()
        context = self.adapter.capture(args, kwargs)
        if args or not self.adapter.can_prune_encoded(kwargs):
            self._context = context  # pruned later, on the embeddings, by the language-model hook
            return None
        with self._meter.selection():
            pruned = prune_encoded(self.adapter, self.model, kwargs, context, self._selector(context))
        return None if pruned is None else (args, self._take(pruned))

    def _on_language_model_end(self, module: nn.Module, args: tuple, output: Any) -> None:
        self._meter.prefill_end()
        record = self._meter.record
        if self._drops is not None:
            kept = self._drops.end_prefill()
            if kept and record is not None:
                # The LLM's columns are those of the sequence after any pre-LLM pruning; its layout's
                # gather index maps them back to the unpruned prompt (the segments' positions).
                index = None if self._active is None else self._active.layout.index.cpu()
                record.llm_stages = [
                    LLMStageStats(layer=layer, kept=[int(c.numel()) for c in columns],
                                  columns=[c.cpu() for c in columns],
                                  prompt_columns=[c.cpu() if index is None else index[row, c.cpu()]
                                                  for row, c in enumerate(columns)])
                    for layer, columns in kept]

    def _on_language_model(self, module: nn.Module, args: tuple, kwargs: dict) -> Optional[tuple[tuple, dict]]:
        if _is_prefill(kwargs):
            context, self._context = self._context, None
            rewritten = None
            if context is not None:
                if args:
                    raise ValueError(f"{self.adapter.family}: the language model was called with positional "
                                     "arguments; vcast hooks expect keyword arguments as transformers passes them")
                with self._meter.selection():
                    pruned = prune_embedded(self.adapter, kwargs, self._selector(context))
                rewritten = None if pruned is None else (args, self._take(pruned))
            if self._drops is not None:
                rewritten = self._begin_llm_stages(args, kwargs, rewritten)
            self._meter.prefill_start()
            return rewritten
        if self._active is None:
            return None
        return args, realign_decode(self.adapter, kwargs, self._active)

    def _begin_llm_stages(self, args: tuple, kwargs: dict, rewritten: Optional[tuple[tuple, dict]]) -> tuple[tuple, dict]:
        """Hand the language model's (possibly pre-pruned) inputs to the in-LLM stages."""
        if rewritten is not None:
            args, kwargs = rewritten
        embeds = kwargs.get("inputs_embeds")
        if embeds is None:
            raise ValueError(f"{self.adapter.family}: in-LLM methods need the language model called with "
                             "inputs_embeds (as the multimodal model does)")
        tags, self._tags = self._tags, None
        if tags is None or tags.frame.shape != embeds.shape[:2]:
            tags = VideoTags.empty(tuple(embeds.shape[:2]), embeds.device)
        return args, self._drops.begin_prefill(dict(kwargs), tags)

    # Prefill: select, then re-lay (vcast.models.prefill_routes) -------------------------------
    def _selector(self, context: PromptContext) -> Select:
        """The route's ``select``: this call's segments of ``context`` through the method."""
        return lambda source, attention_mask, shape: self._select(context, source, attention_mask, shape)

    def _take(self, pruned: PrunedPrefill) -> dict:
        """Adopt a pruned prefill: decoding lines up with it, the in-LLM tags follow its layout."""
        self._active = pruned.active
        if self._tags is not None:
            self._tags = self._tags.gather(pruned.layout)
        return pruned.kwargs

    def _select(self, context: PromptContext, source: TokenSource, attention_mask: Optional[torch.Tensor],
                shape: tuple[int, int]) -> Optional[torch.Tensor]:
        """Run the method on every segment: BoolTensor ``[B, L]`` of surviving tokens, or None
        when nothing is dropped (no videos, or every token kept). A merging method's tokens are
        written into ``source`` at their positions."""
        segments = self.adapter.segments(context, source)
        records = self._probe.take() if self._probe is not None else []
        self._tags = None
        if not segments:
            return None
        method, ratio, params = self._pre
        if attention_mask is not None and (not isinstance(attention_mask, torch.Tensor) or attention_mask.dim() != 2):
            raise ValueError(
                f"{self.adapter.family}: pruning needs a 2-D attention mask [B, L] at prefill, got "
                f"{type(attention_mask).__name__} {tuple(getattr(attention_mask, 'shape', ()))} "
                "(a static or compiled cache builds 4-D masks; use the default dynamic cache)"
            )
        # attach refuses compress_images for such methods, so every segment is a video here.
        model_inputs = (inputs_for_videos(records, [(s.frames, s.tokens_per_frame) for s in segments], self._inputs,
                                          self.adapter.family) if self._inputs else [{} for _ in segments])
        real = (torch.ones(shape, dtype=torch.bool, device=source.device) if attention_mask is None
                else attention_mask.to(source.device).bool())
        pruned = prune_segments(segments, source, model_inputs, real, method, ratio, params, self._drops is not None)
        record = self._meter.record if self._meter.record is not None else CallRecord()
        record.segments.extend(pruned.segments)
        record.tokens_before, record.tokens_after = pruned.tokens_before, pruned.tokens_after
        self._tags = pruned.tags
        if pruned.drops_nothing and not source.written:
            return None  # every token kept (e.g. ratio 1): the inputs stay exactly as they were
        record.pruned = True
        return pruned.survives


def llm_info(model: nn.Module, adapter: Adapter) -> LLMInfo:
    """The language model's family facts and depth."""
    return LLMInfo.of(family_of(model), len(adapter.language_model.layers))


def llm_plan(model: nn.Module, adapter: Adapter, method: str, ratio: float, params: dict[str, Any]) -> LLMPlan:
    """The plan of in-LLM method ``method`` for this model (ValueError naming what does not fit)."""
    llm = llm_info(model, adapter)
    plan = get_method(method)(ratio, llm, **call_params(method, params))
    plan.check(llm)
    return plan
