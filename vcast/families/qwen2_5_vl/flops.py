"""The family's vision FLOPs: Qwen2.5-VL's windowed ViT and Qwen2-VL's (the conventions of
:mod:`vcast.models.flops`: 2 FLOPs per multiply-add, matrix products only, attention over the full
score matrix of each sequence it runs on, each item on its own tokens).

Per temporal patch of ``p = h x w`` patches (``D`` width, ``I`` MLP width, ``c = 3 * 2 * 14^2``
input values per patch, ``s`` the spatial merge)::

    patch embedding      2 p c D
    each block           8 p D^2 + 6 p D I + attention
        attention        4 p^2 D                   full-attention blocks (fullatt_block_indexes)
                         4 D sum_w n_w^2           the others: within windows of n_w patches
    merger               2 p D^2 s^2 + 2 p D D_out (on p / s^2 tokens of width D s^2; once)

``8 p D^2``: qkv (``6 p D^2``) and the output projection; ``6 p D I``: the SwiGLU MLP's gate, up and
down projections. The windows tile the temporal patch's ``h/s x w/s`` merge units in squares of
``window_size / patch_size / s`` units per side, those on the bottom and right edges cut short
(``n_w`` is 4 x the units a window holds): the partition of transformers' ``get_vision_window_index``.
There is no DeepStack.

Qwen2-VL (``gated_vit`` and ``windowed_vit`` false in :data:`vcast.families.qwen2_5_vl.ARCHS`): ``D`` is
the vision config's ``embed_dim``, its ``hidden_size`` the merger's output ``D_out``, and::

    each block           8 p D^2 + 4 p D I + 4 p^2 D     I = embed_dim * mlp_ratio

``4 p D I``: the MLP's ``fc1`` and ``fc2`` (QuickGELU between, not counted); every block attends
over the whole temporal patch. Patch embedding and merger as above.

A work unit (:func:`vision_units`) is ``(t, h * w)`` like every family's, and also carries the
patch grid ``(h, w)`` that the windows depend on (:class:`GridUnit`). A bare ``(t, p)`` tuple is
taken as a square grid (Qwen2.5-VL; Qwen2-VL needs no grid).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from vcast.families.qwen2_5_vl import ArchTraits, arch_traits
from vcast.models.flops import config_value


class GridUnit(tuple):
    """``(frames, patches)`` of one image or video, with its patch grid ``height x width``."""

    height: int
    width: int

    def __new__(cls, frames: int, height: int, width: int) -> "GridUnit":
        unit = super().__new__(cls, (int(frames), int(height) * int(width)))
        unit.height, unit.width = int(height), int(width)
        return unit

    def __reduce__(self) -> tuple:
        return GridUnit, (self[0], self.height, self.width)


def _vision(config: Any) -> Any:
    return config_value(config, "vision_config")


def _traits(config: Any) -> ArchTraits:
    return arch_traits(str(config_value(config, "model_type", "")))


def window_sizes(config: Any, height: int, width: int) -> list[int]:
    """Patches per attention window of one temporal patch of ``height x width`` patches."""
    vision = _vision(config)
    merge, patch = int(config_value(vision, "spatial_merge_size")), int(config_value(vision, "patch_size"))
    side = int(config_value(vision, "window_size")) // merge // patch  # merge units per window side
    rows, cols = height // merge, width // merge
    spans = lambda n: [min(side, n - start) for start in range(0, n, side)]  # noqa: E731
    return [a * b * merge * merge for a in spans(rows) for b in spans(cols)]


def frame_flops(config: Any, height: int, width: int) -> float:
    """One temporal patch of ``height x width`` patches through the encoder and the merger."""
    vision, traits = _vision(config), _traits(config)
    depth, merge = int(config_value(vision, "depth")), int(config_value(vision, "spatial_merge_size"))
    patch, temporal = int(config_value(vision, "patch_size")), int(config_value(vision, "temporal_patch_size"))
    values = int(config_value(vision, "in_channels", 3)) * temporal * patch * patch
    if traits.gated_vit:  # SwiGLU: gate, up and down projections
        d, out = int(config_value(vision, "hidden_size")), int(config_value(vision, "out_hidden_size"))
        mlp = 6.0 * d * int(config_value(vision, "intermediate_size"))
    else:  # Qwen2-VL: fc1 and fc2 of embed_dim * mlp_ratio (transformers rounds it down with int())
        d, out = int(config_value(vision, "embed_dim")), int(config_value(vision, "hidden_size"))
        mlp = 4.0 * d * int(d * config_value(vision, "mlp_ratio"))
    p = height * width
    if traits.windowed_vit:
        full = {int(i) % depth for i in config_value(vision, "fullatt_block_indexes", ())}
        windowed = 4.0 * d * sum(n * n for n in window_sizes(config, height, width))
    else:  # no windows: every block attends over the whole temporal patch
        full, windowed = set(range(depth)), 0.0
    flops = 2.0 * p * values * d
    for block in range(depth):
        flops += 8.0 * p * d * d + p * mlp + (4.0 * p * p * d if block in full else windowed)
    wide, merged = d * merge * merge, p // (merge * merge)
    flops += 2.0 * merged * wide * wide + 2.0 * merged * wide * out
    return flops


def vision_flops(config: Any, units: Sequence[tuple[int, int]]) -> float:
    """The encoder and merger over ``units`` (:func:`vision_units`)."""
    total = 0.0
    for unit in units:
        frames, patches = unit
        height, width = getattr(unit, "height", None), getattr(unit, "width", None)
        if height is None and not _traits(config).windowed_vit:  # the cost depends on p alone
            height, width = 1, int(patches)
        elif height is None:
            side = math.isqrt(int(patches))
            if side * side != patches:
                raise ValueError(f"Qwen2.5-VL's windowed attention needs the patch grid of a unit; ({frames}, "
                                 f"{patches}) is not square: pass vision_units(config, inputs)")
            height = width = side
        total += frames * frame_flops(config, height, width)
    return total


def vision_units(config: Any, inputs: Mapping[str, Any]) -> list[tuple[int, int]]:
    """One :class:`GridUnit` per row ``(t, h, w)`` of ``video_grid_thw`` / ``image_grid_thw``:
    ``t`` temporal patches of ``h * w`` patches."""
    units: list[tuple[int, int]] = []
    for key in ("video_grid_thw", "image_grid_thw"):
        grid = inputs.get(key)
        if grid is not None:
            units += [GridUnit(t, h, w) for t, h, w in grid.tolist()]
    return units
