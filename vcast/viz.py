"""What was kept, drawn over the frames: the dropped tokens' cells dimmed, the kept ones as they are.

A method's kept set is a boolean grid over the language model's video tokens, ``[T, h, w]``: ``T``
temporal steps (Qwen3-VL: patches of 2 frames; LLaVA-OneVision: frames) of ``h x w`` tokens. One
token covers ``H / h`` x ``W / w`` pixels of the frames the model was given, whatever their pixel
size (a processor's resize maps the whole frame onto the whole grid), so the frames can be drawn
at any size: the original video's, or the processor's.

    frames = ...                                    # uint8 [N, H, W, 3], N = T * frames_per_step
    sel = vcast.select(features, 0.25)              # features [T, h*w, D]
    fig = draw_kept(frames, {"vcast": sel}, grid_hw=(h, w), path="results/kept.png")

The masks can be a :class:`vcast.Selection` (with ``grid_hw``), a bool array ``[T, h, w]`` (or
``[T, h*w]`` with ``grid_hw``), or a :class:`vcast.kept_records.KeptRecord` (its own grid and
``frames_per_step``; for in-LLM methods, ``stage`` picks which drop stage). Figures are built as
:class:`matplotlib.figure.Figure` objects without pyplot: no GUI, no global state, and a notebook
shows the returned figure.
"""

from __future__ import annotations

import io
import logging
from pathlib import Path
from typing import Any, Literal, Mapping, Optional, Sequence, Union

import numpy as np
import torch
from matplotlib.figure import Figure

from vcast.atomic_files import atomic_write_bytes
from vcast.kept_records import KeptRecord
from vcast.selection import Selection

logger = logging.getLogger(__name__)

MaskLike = Union[np.ndarray, torch.Tensor, Selection, KeptRecord]
Stage = Union[int, Literal["last"], None]
MAX_STEPS = 8  # default columns: more frames than this make cells too small to read
FORMATS = ("png", "pdf")
KEPT_COLOR = "#d95a5f"   # the budget bars of the steps shown
OTHER_COLOR = "#b0b4b8"  # the budget bars of the other steps


# ---------------------------------------------------------------------------------------------
# Masks
# ---------------------------------------------------------------------------------------------

def selection_grid(selection: Selection, grid_hw: Sequence[int]) -> np.ndarray:
    """The kept tokens of ``selection`` as a bool grid ``[T, h, w]`` (token ``i`` of a step sits at
    row ``i // w``, column ``i % w``, the row-major order of the model's token grid).

    Raises:
        ValueError: ``grid_hw`` is not two positive sizes, or ``h * w`` is not the selection's
            tokens per frame ``P``.
    """
    h, w = _grid_hw(grid_hw)
    if h * w != selection.tokens_per_frame:
        raise ValueError(f"grid_hw {(h, w)} holds {h * w} tokens, but the selection has "
                         f"tokens_per_frame P = {selection.tokens_per_frame}")
    return selection.mask().cpu().numpy().reshape(selection.num_frames, h, w)


def record_grid(record: KeptRecord, stage: Stage = "last") -> np.ndarray:
    """A record's kept tokens, bool ``[T, H, W]`` (its ``geometry.grid``).

    Args:
        stage: ``"last"``: the last in-LLM drop stage (the tokens the deepest layers see), or
            ``record.kept`` when the record has no stages (a method that prunes before the LLM);
            ``None``: ``record.kept`` (what the language model receives); an int: the stage of
            that layer.
    Raises:
        ValueError: ``stage`` is an int that is not one of the record's stage layers.
    """
    if stage is None or (stage == "last" and not record.stages):
        return record.kept
    if stage == "last":
        return record.stages[-1][1]
    for layer, mask in record.stages:
        if layer == stage:
            return mask
    raise ValueError(f"stage {stage!r}: the record of method {record.method!r} has stages at layers "
                     f"{[layer for layer, _ in record.stages]} (or use stage='last' or None)")


def kept_grid(kept: MaskLike, grid_hw: Optional[Sequence[int]] = None, stage: Stage = "last") -> np.ndarray:
    """Any of the accepted mask forms as a bool numpy grid ``[T, h, w]``.

    Args:
        kept: a :class:`Selection` (needs ``grid_hw``), a :class:`KeptRecord` (its own grid;
            ``stage`` as in :func:`record_grid`), or a bool array / tensor ``[T, h, w]``, or
            ``[T, h*w]`` with ``grid_hw``.
        grid_hw: ``(h, w)`` of the token grid of one step.
    Raises:
        ValueError: a shape that does not fit ``grid_hw``, a non-boolean array, or a Selection
            without ``grid_hw``.
    """
    if isinstance(kept, KeptRecord):
        mask = record_grid(kept, stage)
        if grid_hw is not None and tuple(mask.shape[1:]) != _grid_hw(grid_hw):
            raise ValueError(f"grid_hw {tuple(grid_hw)} differs from the record's grid {tuple(mask.shape[1:])}")
        return mask
    if isinstance(kept, Selection):
        if grid_hw is None:
            raise ValueError("a Selection has flat tokens [T, P]: pass grid_hw=(h, w) with h * w = "
                             f"P = {kept.tokens_per_frame}")
        return selection_grid(kept, grid_hw)
    mask = kept.cpu().numpy() if isinstance(kept, torch.Tensor) else np.asarray(kept)
    if mask.dtype != np.bool_:
        raise ValueError(f"a kept mask must be boolean, got dtype {mask.dtype}")
    if mask.ndim == 2 and grid_hw is not None:
        h, w = _grid_hw(grid_hw)
        if mask.shape[1] != h * w:
            raise ValueError(f"mask shape {tuple(mask.shape)}: {mask.shape[1]} tokens per step do not fill "
                             f"grid_hw {(h, w)}")
        return mask.reshape(mask.shape[0], h, w)
    if mask.ndim != 3 or min(mask.shape) < 1:
        raise ValueError(f"a kept mask must be bool [T, h, w] (or [T, h*w] with grid_hw), got shape "
                         f"{tuple(mask.shape)}")
    if grid_hw is not None and tuple(mask.shape[1:]) != _grid_hw(grid_hw):
        raise ValueError(f"mask shape {tuple(mask.shape)} does not match grid_hw {tuple(grid_hw)}")
    return mask


def _grid_hw(grid_hw: Sequence[int]) -> tuple[int, int]:
    if len(grid_hw) != 2 or min(int(s) for s in grid_hw) < 1:
        raise ValueError(f"grid_hw must be (h, w) of positive sizes, got {tuple(grid_hw)!r}")
    return int(grid_hw[0]), int(grid_hw[1])


# ---------------------------------------------------------------------------------------------
# Frames
# ---------------------------------------------------------------------------------------------

def cell_edges(pixels: int, cells: int) -> np.ndarray:
    """Int ``[cells + 1]``: pixel edges of ``cells`` equal-as-can-be cells over ``pixels``; cell
    ``i`` is pixels ``[edges[i], edges[i+1])``, so every pixel is in exactly one cell (edges
    rounded half up, integer arithmetic so that no float decides a boundary)."""
    index = np.arange(cells + 1, dtype=np.int64)
    return (2 * index * pixels + cells) // (2 * cells)


def step_frames(frames: np.ndarray, steps: int, frames_per_step: int = 1) -> np.ndarray:
    """The first frame of each temporal step, uint8 ``[T, H, W, 3]`` from ``frames`` uint8
    ``[N, H, W, 3]``: frames ``0, fps, 2 fps, ...``.

    ``N`` is ``T * frames_per_step``, or fewer by less than one step (Qwen3-VL's processor pads a
    last partial step by repeating its last frame).

    Raises:
        ValueError: frames not uint8 ``[N, H, W, 3]``, or ``N`` does not fit ``T`` steps.
    """
    frames = np.asarray(frames)
    if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3 or min(frames.shape) < 1:
        raise ValueError(f"frames must be uint8 [N, H, W, 3], got {frames.dtype} {tuple(frames.shape)}")
    if frames_per_step < 1:
        raise ValueError(f"frames_per_step must be >= 1, got {frames_per_step!r}")
    n = frames.shape[0]
    if not (steps - 1) * frames_per_step < n <= steps * frames_per_step:
        raise ValueError(f"{n} frames do not make T = {steps} steps of frames_per_step = {frames_per_step} "
                         f"(need {steps * frames_per_step}, the frames the model was given)")
    return frames[::frames_per_step][:steps]


def kept_frames(frames: np.ndarray, mask: np.ndarray, frames_per_step: int = 1, dim: float = 0.25,
                fill: int = 0) -> np.ndarray:
    """The first frame of each temporal step with every dropped token's cell dimmed.

    Args:
        frames: uint8 ``[N, H, W, 3]``, the frames the model was given (any pixel size),
            ``N = T * frames_per_step`` (see :func:`step_frames`).
        mask: bool ``[T, h, w]``, the kept tokens (any form :func:`kept_grid` reads with its own
            grid: an array, a tensor, a :class:`KeptRecord`).
        frames_per_step: source frames per temporal step (Qwen3-VL 2, LLaVA-OneVision 1).
        dim: how much of a dropped cell's pixel survives, in [0, 1]: ``pixel * dim + fill * (1 - dim)``.
        fill: the value dropped cells fade to, 0..255 (0: black; 128: grey).
    Returns:
        uint8 ``[T, H, W, 3]``: kept cells' pixels unchanged. Cell ``(i, j)`` covers rows
        ``cell_edges(H, h)[i:i+2]`` and columns ``cell_edges(W, w)[j:j+2]``.
    Raises:
        ValueError: naming a bad shape, dtype, ``dim`` or ``fill``.
    """
    mask = kept_grid(mask)
    if not 0.0 <= float(dim) <= 1.0:
        raise ValueError(f"dim must be in [0, 1], got {dim!r}")
    if not 0 <= int(fill) <= 255:
        raise ValueError(f"fill must be in 0..255, got {fill!r}")
    firsts = step_frames(frames, mask.shape[0], frames_per_step)
    _, height, width, _ = firsts.shape
    h, w = mask.shape[1:]
    if h > height or w > width:
        raise ValueError(f"a {h} x {w} token grid on {height} x {width} pixel frames leaves cells without pixels")
    row_cell = np.repeat(np.arange(h), np.diff(cell_edges(height, h)))
    col_cell = np.repeat(np.arange(w), np.diff(cell_edges(width, w)))
    kept_px = mask[:, row_cell][:, :, col_cell]  # [T, H, W]
    dimmed = np.rint(firsts.astype(np.float32) * float(dim) + float(fill) * (1.0 - float(dim)))
    return np.where(kept_px[..., None], firsts, dimmed.clip(0, 255).astype(np.uint8))


def kept_every_frame(frames: np.ndarray, mask: np.ndarray, frames_per_step: int = 1, dim: float = 0.25,
                     fill: int = 0) -> np.ndarray:
    """Every frame with its temporal step's dropped tokens dimmed: uint8 ``[N, H, W, 3]``.

    A token of a step stands for all ``frames_per_step`` frames of it (Qwen3-VL: 2), so content
    seen in one frame of a step only (a brief event in an odd frame) shows, kept or dropped, where
    :func:`kept_frames` (the first frame of each step) would not show it at all. Arguments as in
    :func:`kept_frames`.
    """
    mask = kept_grid(mask)
    frames = np.asarray(frames)
    step_frames(frames, mask.shape[0], frames_per_step)  # the same check of N against T steps
    per_frame = np.repeat(mask, frames_per_step, axis=0)[: frames.shape[0]]
    return kept_frames(frames, per_frame, 1, dim=dim, fill=fill)


def record_frames(record: KeptRecord, frames: np.ndarray, *, source: bool = False, stage: Stage = "last",
                  dim: float = 0.25, fill: int = 0, every_frame: bool = False) -> np.ndarray:
    """:func:`kept_frames` of a record: uint8 ``[T, H, W, 3]``; with ``every_frame``,
    :func:`kept_every_frame`: uint8 ``[N, H, W, 3]``.

    Args:
        frames: uint8 ``[N, H, W, 3]``: the frames the model was given (``source=False``), or the
            whole decoded video (``source=True``: ``record.frame_indices`` picks the given ones).
        stage: which mask, as in :func:`record_grid`.
    """
    draw = kept_every_frame if every_frame else kept_frames
    return draw(_given_frames(record, frames, source), record_grid(record, stage), record.geometry.frames_per_step,
                dim=dim, fill=fill)


def _given_frames(record: KeptRecord, frames: np.ndarray, source: bool) -> np.ndarray:
    frames = np.asarray(frames)
    if not source:
        return frames
    indices = np.asarray(record.frame_indices, dtype=np.int64)
    if indices.size == 0 or indices.min() < 0 or indices.max() >= len(frames):
        raise ValueError(f"the record's frame_indices reach frame {int(indices.max()) if indices.size else None} "
                         f"but the video has {len(frames)} frames")
    return frames[indices]


# ---------------------------------------------------------------------------------------------
# Figures
# ---------------------------------------------------------------------------------------------

def default_steps(steps: int, most: int = MAX_STEPS) -> list[int]:
    """Up to ``most`` evenly spaced step indices of ``steps``, first and last included."""
    if steps <= most:
        return list(range(steps))
    return sorted({int(round(x)) for x in np.linspace(0, steps - 1, most)})


def draw_kept(frames: np.ndarray, masks: Mapping[str, MaskLike], *, grid_hw: Optional[Sequence[int]] = None,
              frames_per_step: int = 1, steps: Optional[Sequence[int]] = None, budgets: bool = True,
              title: Optional[str] = None, path: Union[str, Path, None] = None, stage: Stage = "last",
              source: bool = False, dim: float = 0.25, fill: int = 0, frame_inches: float = 1.4,
              dpi: int = 150) -> Figure:
    """One row per method, one column per chosen temporal step: the step's first frame with the
    dropped tokens' cells dimmed.

    Args:
        frames: uint8 ``[N, H, W, 3]``, the frames the model was given, ``N = T * frames_per_step``
            (or the whole video with ``source=True`` when every mask is a :class:`KeptRecord`).
        masks: ``{method label: mask}``, rows in this order; a mask is a bool ``[T, h, w]`` array
            or tensor, ``[T, h*w]`` or a :class:`Selection` with ``grid_hw``, or a
            :class:`KeptRecord` (which brings its own grid and ``frames_per_step``). All rows
            have the same ``T``.
        grid_hw: ``(h, w)``, the token grid of one step.
        frames_per_step: source frames per step for the non-record masks.
        steps: the step indices to show (default: up to 8 evenly spaced).
        budgets: under each row, a bar per step of the tokens kept (the steps shown in colour).
        title: the figure's title.
        path: write the figure there too, PNG or PDF by its suffix (atomically).
        stage: which mask of a record with in-LLM stages (:func:`record_grid`; default the last).
        dim, fill: how dropped cells are dimmed (:func:`kept_frames`).
        frame_inches: the height of one frame panel.
    Returns:
        The figure. Axes carry a ``gid``: ``"frame:<label>:<step>"`` and ``"budget:<label>"``.
    Raises:
        ValueError: no masks, rows of different ``T``, a step out of range, a bad shape (named),
            or a path that is neither ``.png`` nor ``.pdf``.
    """
    if not masks:
        raise ValueError("masks is empty: pass {method label: mask}")
    if path is not None and Path(path).suffix.lower().lstrip(".") not in FORMATS:
        raise ValueError(f"path {str(path)!r}: the suffix picks the format, one of .png, .pdf")
    grids = {str(label): kept_grid(value, grid_hw, stage) for label, value in masks.items()}
    lengths = {label: grid.shape[0] for label, grid in grids.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"the masks have different numbers of temporal steps T: {lengths}")
    rows = []  # (label, grid [T, h, w], dimmed frames [T, H, W, 3], note)
    for (label, grid), value in zip(grids.items(), masks.values()):
        if isinstance(value, KeptRecord):
            shown = record_frames(value, frames, source=source, stage=stage, dim=dim, fill=fill)
            note = _record_note(value, stage)
        else:
            if source:
                raise ValueError(f"source=True needs KeptRecord masks (their frame_indices); {label!r} is not one")
            shown = kept_frames(frames, grid, frames_per_step, dim=dim, fill=fill)
            note = "merged" if isinstance(value, Selection) and value.merges else ""
        rows.append((label, grid, shown, note))
    total_steps = rows[0][1].shape[0]
    chosen = default_steps(total_steps) if steps is None else [int(s) for s in steps]
    bad = [s for s in chosen if not 0 <= s < total_steps]
    if bad or not chosen:
        raise ValueError(f"steps {list(chosen)}: each must be in 0..{total_steps - 1} (T = {total_steps}) "
                         "and at least one given")

    height, width = rows[0][2].shape[1:3]
    panel_w = frame_inches * width / height
    ratios = [1.0, 0.3] if budgets else [1.0]
    row_inches = frame_inches * sum(ratios) + (0.75 if budgets else 0.3)  # titles, tick labels
    figure = Figure(figsize=(1.3 + panel_w * len(chosen), row_inches * len(rows) + (0.4 if title else 0.1)), dpi=dpi)
    outer = figure.add_gridspec(len(rows), 1, hspace=0.3)
    for r, (label, grid, shown, note) in enumerate(rows):
        inner = outer[r].subgridspec(len(ratios), len(chosen), height_ratios=ratios, hspace=0.12, wspace=0.04)
        kept_per_step = grid.reshape(total_steps, -1).sum(axis=1)
        per_step = grid.shape[1] * grid.shape[2]
        kept, total = int(kept_per_step.sum()), total_steps * per_step
        for c, step in enumerate(chosen):
            ax = figure.add_subplot(inner[0, c])
            ax.set_gid(f"frame:{label}:{step}")
            ax.imshow(shown[step], interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"t={step}: {kept_per_step[step]}/{per_step}", fontsize=7, pad=2)
            if c == 0:
                text = f"{label}\n{kept}/{total} ({100 * kept / total:.0f}%)" + (f"\n{note}" if note else "")
                ax.set_ylabel(text, fontsize=8)
        if budgets:
            ax = figure.add_subplot(inner[1, :])
            ax.set_gid(f"budget:{label}")
            colors = [KEPT_COLOR if t in chosen else OTHER_COLOR for t in range(total_steps)]
            ax.bar(np.arange(total_steps), kept_per_step, width=0.85, color=colors)
            ax.set_xlim(-0.5, total_steps - 0.5)
            ax.set_ylim(0, per_step)
            ax.tick_params(labelsize=6, length=2, pad=1)
            ax.set_ylabel("kept", fontsize=7)
            if r == len(rows) - 1:
                ax.set_xlabel("temporal step", fontsize=7, labelpad=1)
    if title:
        figure.suptitle(title, fontsize=10)
    if path is not None:
        save(figure, path)
    return figure


def draw_record(record: KeptRecord, frames: np.ndarray, *, label: Optional[str] = None, **options: Any) -> Figure:
    """:func:`draw_kept` of one record (one row, labelled with its method unless ``label``);
    ``options`` are :func:`draw_kept`'s (``source=True`` when ``frames`` is the whole video)."""
    return draw_kept(frames, {label or record.method: record}, **options)


def _record_note(record: KeptRecord, stage: Stage) -> str:
    notes = []
    if record.stages and stage is not None:
        layer = record.stages[-1][0] if stage == "last" else stage
        notes.append(f"layers \u2265 {layer}")
    if record.merged:
        notes.append("merged")
    return ", ".join(notes)


def save(figure: Figure, path: Union[str, Path]) -> Path:
    """Write ``figure`` to ``path`` (PNG or PDF by suffix) through a temporary file and a rename;
    dates and tool versions are left out of the metadata, so the same figure gives the same bytes."""
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise ValueError(f"path {str(path)!r}: the suffix picks the format, one of .png, .pdf")
    buffer = io.BytesIO()
    metadata = {"CreationDate": None, "Producer": None} if fmt == "pdf" else {"Software": None}
    figure.savefig(buffer, format=fmt, metadata=metadata, bbox_inches="tight")
    atomic_write_bytes(path, buffer.getvalue())
    logger.info("wrote %s", path)
    return path
