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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import torch

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
    """

    units: list[tuple[int, int]]
    grid: list[tuple[int, int]]
    attention: Optional[torch.Tensor] = None
    keys: Optional[torch.Tensor] = None


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


class VisionProbe:
    """Hooks that record one :class:`VisionRecord` per vision-encoder call, until :meth:`take`.

    Args:
        adapter: the model's adapter (it knows the modules and how to read them).
        attention: whether to compute the attention column means and keys (else only the
            call's layout, for the ``grid`` input).
    """

    def __init__(self, adapter: Any, attention: bool) -> None:
        self.adapter = adapter
        self.attention = attention
        self.records: list[VisionRecord] = []
        vision, _ = adapter.vision_modules()
        self._hooks = [vision.register_forward_pre_hook(self._on_vision_call, with_kwargs=True)]
        if attention:
            layer = adapter.feature_attention()
            self._hooks.append(layer.register_forward_pre_hook(self._on_feature_layer, with_kwargs=True))

    def _on_vision_call(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        self.records.append(self.adapter.vision_call_layout(args, kwargs))

    def _on_feature_layer(self, module: torch.nn.Module, args: tuple, kwargs: dict) -> None:
        if not self.records:  # the layer was called outside an encoder call
            return
        record = self.records[-1]  # the encoder call this layer runs in
        with torch.no_grad():
            record.attention, record.keys = self.adapter.feature_scores(module, args, kwargs)

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
    }
    return {name: made[name]() for name in names}


def inputs_for_videos(records: list[VisionRecord], videos: list[tuple[int, int]], needed: tuple[str, ...],
                      family: str) -> list[dict[str, Any]]:
    """The model inputs of each video, from the record that encoded them.

    Args:
        records: this prompt's vision calls.
        videos: ``(T, P)`` of each video segment, in prompt order (row-major).
        needed: input names (``grid``, ``vision_attention``, ``vision_keys``).
    Returns:
        one dict per video: ``grid`` ``(h, w)``, ``vision_attention`` ``[T, P]``, ``vision_keys``
        ``[T, P, d]`` as needed.
    Raises:
        ValueError: no record holds exactly these videos (the encoder ran elsewhere).
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
        per_video.append(item)
        start += t * p
    return per_video
