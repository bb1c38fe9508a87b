"""Model inputs that some compressors need beyond the LLM-space tokens, read from the vision encoder.

Methods such as VisionZip, FastVID and HoliTom rank tokens by the attention they receive in the
vision encoder's feature layer, and VisionZip merges by that layer's keys. Their official codes
switch the vision tower to eager attention to get the weights back. Here the encoder keeps its
own kernel (SDPA or FlashAttention): a forward pre-hook on the one attention module that matters
captures its input, recomputes that layer's queries and keys, and accumulates the attention
column means in query chunks, so at most ``CHUNK_ELEMENTS`` scores exist at a time. Nothing is
computed unless the attached method declares it needs these inputs
(:func:`vcast.registry.method_inputs`).

Each vision-encoder call of the prompt becomes one :class:`VisionRecord`; the adapter turns the
per-patch values into per-LLM-token values (pooled exactly like the tokens) and says which
videos a record holds.

One input is not a column mean: ``vision_mean_query_attention`` (:func:`mean_query_attention`),
the saliency FastVID's Qwen2.5-VL release ranks by. Only the adapters that define
``mean_query_scores(module, args, kwargs)`` supply it (:data:`SUPPLIED_BY`); a method that needs
it on another family is refused before any hook (:func:`check_supplied`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional

import torch

from vcast.families import all_families

MEAN_QUERY_ATTENTION = "vision_mean_query_attention"
# Model inputs an adapter supplies only where it defines the method that computes them.
SUPPLIED_BY = {MEAN_QUERY_ATTENTION: "mean_query_scores"}
MERGE_UNIT = 4  # patches per LLM token in the Qwen ViTs (2 x 2 spatial merge)

CHUNK_ELEMENTS = 1 << 25  # scores per chunk: 128 MiB in float32


@dataclass
class VisionRecord:
    """One vision-encoder call.

    Attributes:
        units: ``(T, P)`` of each item the call encoded, in output order (Qwen3-VL: one per
            ``grid_thw`` row; LLaVA: one for all frames of the call).
        grid: ``(h, w)`` token grid of each item (LLM tokens of one frame).
        attention: float32 ``[N]`` per LLM token, in output order, or None when not needed.
        keys: float32 ``[N, d]`` per LLM token, or None.
        mean_query_attention: ``[N]`` per LLM token in output order, in the model's dtype
            (:func:`mean_query_attention` per temporal patch), or None when not needed.
    """

    units: list[tuple[int, int]]
    grid: list[tuple[int, int]]
    attention: Optional[torch.Tensor] = None
    keys: Optional[torch.Tensor] = None
    mean_query_attention: Optional[torch.Tensor] = None


def column_mean_attention(queries: torch.Tensor, keys: torch.Tensor, scale: float) -> torch.Tensor:
    """Attention received by each key, averaged over heads and queries, without the full map.

    Args:
        queries, keys: ``[S, H, n, d]``: ``S`` independent sequences of ``n`` tokens.
        scale: the softmax scale (``d ** -0.5``).
    Returns:
        float32 ``[S, n]``: ``mean_{h, i} softmax_j(q_hi . k_hj * scale)``.
    """
    sequences, heads, length, _ = queries.shape
    keys_t = keys.float().transpose(-1, -2)  # [S, H, d, n]
    total = torch.zeros(sequences, length, device=queries.device, dtype=torch.float32)
    rows = max(1, CHUNK_ELEMENTS // max(1, sequences * heads * length))
    for start in range(0, length, rows):
        scores = torch.matmul(queries[:, :, start : start + rows].float(), keys_t) * scale
        total += scores.softmax(dim=-1).sum(dim=(1, 2))
    return total / (heads * length)


def mean_query_attention(queries: torch.Tensor, keys: torch.Tensor, num_frames: int,
                         unit: int = MERGE_UNIT) -> torch.Tensor:
    """The attention of each temporal patch's *mean query* to its merge units' *mean keys*, head mean.

    FastVID's Qwen2.5-VL release (LunarShen/FastVID @a40a109, its vision attention forward
    L193-203) ranks tokens by this, computed in the last ViT block, in the model's dtype and with
    the release's shapes and calls, so the values are its bits given the same rotated q and k:
    per temporal patch ``t`` and head ``h``, ``q_th`` = the mean of the ``n`` queries, ``k_thu`` =
    the mean of merge unit ``u``'s ``unit`` consecutive keys, ``softmax_u(q_th . k_thu / sqrt(d))``
    (float32 softmax cast back), then the mean over heads. Each temporal patch's rows are contiguous
    whatever attention the block runs (the release reads the grid, not ``cu_seqlens``).

    Args:
        queries, keys: ``[N, H, d]`` rotated queries and keys (``N = T n``), in the model's dtype.
        num_frames: ``T``, the temporal patches.
        unit: rows per merge unit (4).
    Returns:
        ``[T, n // unit]`` in the queries' dtype, units in the rows' order.
    """
    rows, heads, head_dim = queries.shape
    if keys.shape != queries.shape:
        raise ValueError(f"queries and keys must have one shape, got {tuple(queries.shape)} and {tuple(keys.shape)}")
    if num_frames < 1 or rows % num_frames or (rows // num_frames) % unit:
        raise ValueError(f"{rows} rows do not split into {num_frames} temporal patches of whole {unit}-patch units")
    per_frame = rows // num_frames
    by_head_q = queries.transpose(0, 1).view(heads, num_frames, per_frame, head_dim)  # [H, T, n, d]
    by_head_k = keys.transpose(0, 1).view(heads, num_frames, per_frame // unit, unit, head_dim)
    mean_query = by_head_q.mean(-2, keepdim=True)  # [H, T, 1, d]
    unit_keys = by_head_k.mean(-2)  # [H, T, P, d]
    logits = torch.matmul(mean_query, unit_keys.transpose(-2, -1)) / math.sqrt(head_dim)  # [H, T, 1, P]
    weights = torch.softmax(logits, dim=-1, dtype=torch.float32).to(mean_query.dtype)
    return weights.mean(2).mean(0)  # [T, P]


def supplies(adapter: Any, name: str) -> bool:
    """Whether ``adapter`` can compute model input ``name`` (every adapter computes the column means
    and keys; the inputs of :data:`SUPPLIED_BY` only where it defines their method)."""
    method = SUPPLIED_BY.get(name)
    return method is None or callable(getattr(adapter, method, None))


def supplied_problem(adapter: Any, family: str, needed: tuple[str, ...], method: Optional[str] = None,
                     params: Optional[Mapping[str, Any]] = None) -> Optional[str]:
    """Why ``adapter`` (an adapter or its class) of ``family`` (display name) cannot compute an input
    of ``needed`` that ``method`` with ``params`` reads, or None when it computes them all."""
    missing = [name for name in needed if not supplies(adapter, name)]
    if not missing:
        return None
    others = [other.display for other in all_families()
              if all(supplies(other.load("adapter"), name) for name in missing)]
    reader = "the method" if method is None else f"method {method!r} with {dict(params or {})}"
    return (f"{family}: {reader} ranks by {', '.join(missing)}, the attention of each temporal patch's mean "
            "query to its merge units' mean keys in the vision encoder's last block (the saliency of a FastVID "
            f"release written for another model), which the {family} adapter does not compute (adapters "
            f"that do: {', '.join(others) or 'none'}); choose a variant or version that ranks by vision_attention, "
            "or one that needs no vision input")


def check_supplied(adapter: Any, needed: tuple[str, ...], method: Optional[str] = None,
                   params: Optional[Mapping[str, Any]] = None) -> None:
    """ValueError naming ``adapter``'s family and why, when it cannot compute an input of ``needed``
    (that ``method`` with ``params`` reads); called before any hook, so a refusal changes nothing."""
    problem = supplied_problem(adapter, adapter.family, needed, method, params)
    if problem is not None:
        raise ValueError(problem)


class VisionProbe:
    """Hooks that record one :class:`VisionRecord` per vision-encoder call, until :meth:`take`.

    Args:
        adapter: the model's adapter (it knows the modules and how to read them).
        attention: whether to compute the attention column means and keys (else only the
            call's layout, for the ``grid`` input).
        mean_query: whether to compute ``vision_mean_query_attention`` (the adapter's
            ``mean_query_scores``; ValueError from :func:`check_supplied` where it has none).
    """

    def __init__(self, adapter: Any, attention: bool, mean_query: bool = False) -> None:
        if mean_query:
            check_supplied(adapter, (MEAN_QUERY_ATTENTION,))
        self.adapter = adapter
        self.attention = attention
        self.mean_query = mean_query
        self.records: list[VisionRecord] = []
        vision, _ = adapter.vision_modules()
        self._hooks = [vision.register_forward_pre_hook(self._on_vision_call, with_kwargs=True)]
        if attention or mean_query:
            layer = adapter.feature_attention()
            self._hooks.append(layer.register_forward_pre_hook(self._on_feature_layer, with_kwargs=True))

    def _on_vision_call(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        self.records.append(self.adapter.vision_call_layout(args, kwargs))

    def _on_feature_layer(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        if not self.records:  # the layer was called outside an encoder call
            return
        record = self.records[-1]  # the encoder call this layer runs in
        with torch.no_grad():
            if self.attention:
                record.attention, record.keys = self.adapter.feature_scores(module, args, kwargs)
            if self.mean_query:
                record.mean_query_attention = self.adapter.mean_query_scores(module, args, kwargs)

    def take(self) -> list[VisionRecord]:
        """The records since the last call (the prompt's vision calls), forgetting them."""
        records, self.records = self.records, []
        return records

    def clear(self) -> None:
        self.records = []

    def remove(self) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks.clear()
        self.clear()


def stand_in_inputs(names: tuple[str, ...], num_frames: int, grid: tuple[int, int], key_dim: int,
                    generator: torch.Generator) -> dict[str, Any]:
    """Random model inputs ``names`` with the shapes the adapters supply, for a ``[T, h * w, D]``
    video (parameter checks and benchmarks without a model)."""
    tokens = grid[0] * grid[1]
    made = {
        "grid": lambda: grid,
        "vision_attention": lambda: torch.rand(num_frames, tokens, generator=generator).softmax(-1),
        "vision_keys": lambda: torch.randn(num_frames, tokens, key_dim, generator=generator),
        MEAN_QUERY_ATTENTION: lambda: torch.rand(num_frames, tokens, generator=generator).softmax(-1),
    }
    return {name: made[name]() for name in names}


def inputs_for_videos(records: list[VisionRecord], videos: list[tuple[int, int]], needed: tuple[str, ...],
                      family: str) -> list[dict[str, Any]]:
    """The model inputs of each video, from the record that encoded them.

    Args:
        records: this prompt's vision calls.
        videos: ``(T, P)`` of each video segment, in prompt order (row-major).
        needed: input names (``grid``, ``vision_attention``, ``vision_keys``,
            ``vision_mean_query_attention``).
    Returns:
        one dict per video: ``grid`` ``(h, w)``, ``vision_attention`` ``[T, P]``, ``vision_keys``
        ``[T, P, d]``, ``vision_mean_query_attention`` ``[T, P]`` as needed.
    Raises:
        ValueError: no record holds exactly these videos (the encoder ran elsewhere), or the
            record lacks a needed value (its probe was not asked for it).
    """
    if not videos:
        return []
    frames = sum(t for t, _ in videos)
    match = None
    for record in reversed(records):  # the video call comes after any image call of the prompt
        if record.units == videos or (len(record.units) == 1 and record.units[0] == (frames, videos[0][1])
                                      and all(p == videos[0][1] for _, p in videos)):
            match = record
            break
    if match is None:
        raise ValueError(
            f"{family}: the method needs {', '.join(needed)} from the vision encoder, but no encoder call of this "
            f"prompt encoded its videos {videos} (calls seen: {[r.units for r in records]}); run the video "
            "through the model (or generate) with the handle attached, not precomputed encoder outputs"
        )
    absent = [name for name, value in (("vision_attention", match.attention), ("vision_keys", match.keys),
                                       (MEAN_QUERY_ATTENTION, match.mean_query_attention))
              if name in needed and value is None]
    if absent:
        raise ValueError(f"{family}: the vision encoder's call was probed without {', '.join(absent)}, which the "
                         f"method needs (probe it with them)")
    per_video, start = [], 0
    grids = match.grid if len(match.grid) == len(videos) else match.grid * len(videos)
    for (t, p), grid in zip(videos, grids):
        item: dict[str, Any] = {}
        if "grid" in needed:
            item["grid"] = grid
        if "vision_attention" in needed:
            item["vision_attention"] = match.attention[start : start + t * p].view(t, p)
        if "vision_keys" in needed:
            item["vision_keys"] = match.keys[start : start + t * p].view(t, p, -1)
        if MEAN_QUERY_ATTENTION in needed:
            item[MEAN_QUERY_ATTENTION] = match.mean_query_attention[start : start + t * p].view(t, p)
        per_video.append(item)
        start += t * p
    return per_video
