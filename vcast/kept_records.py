"""Kept-token records: which video tokens a method kept, per item and per video, with what is
needed to draw them over the frames.

One record is one video of one item of one cell. The kept set is a boolean mask over the grid of
the video's LLM tokens ``[T, H, W]`` (merging ViTs: ``T`` temporal patches of 2 frames and ``H x W``
merged patches, 32 px for a 16 px patch; pooling towers: ``T`` frames of the pooled ``H x W`` grid),
stored bit-packed (``numpy.packbits`` of the C-order flattening, big-endian bit order) in base64: 6,272
tokens (64 frames of 448 px in 32 px cells) take 784 bytes, 1,048 characters; the whole record is
about 1.7 KB of JSON, plus about 1.1 KB per in-LLM drop stage.

A method that drops tokens inside the language model adds one mask per drop stage (``stages``:
the tokens the layers from ``layer`` on still see). A merging method's mask holds the tokens that
survive as merge targets (``merged`` is true: their content is a merge, their place is theirs).

Files: ``<cell>/kept/rank<r>.jsonl``, one JSON object per line (:func:`append_records`,
:meth:`vcast.results.tree.Cell.kept` reads them); the format's version is :data:`FORMAT`. The lmms-eval plugins write them
after each batch (:func:`call_records` turns the pruning handle's stats of one ``generate`` call
into records), unless run with ``record_kept=false``.
"""

from __future__ import annotations

import base64
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from vcast.families import all_families
from vcast.results.layout import KEPT_DIR

FORMAT = 1
FOLDER = KEPT_DIR


def rank_file(cell: Path, rank: int) -> Path:
    """``<cell>/kept/rank<r>.jsonl``."""
    return Path(cell) / FOLDER / f"rank{rank}.jsonl"


@dataclass(frozen=True)
class Geometry:
    """Where the LLM token grid sits on the frames.

    Attributes:
        family: the model family's name (:mod:`vcast.families`).
        grid: ``(T, H, W)``: temporal steps and the LLM token grid of one step.
        frames_per_step: source frames behind one temporal step (the family's ``frames_per_step``).
        frame_size: ``(height, width)`` in pixels of the frames the model was given (after the
            processor's resize); one token covers ``height / H`` x ``width / W`` of them.
    """

    family: str
    grid: tuple[int, int, int]
    frames_per_step: int
    frame_size: tuple[int, int]

    def __post_init__(self) -> None:
        names = [family.name for family in all_families()]
        if self.family not in names:
            raise ValueError(f"geometry family must be one of {', '.join(names)}, got {self.family!r}")
        if len(self.grid) != 3 or min(self.grid) < 1:
            raise ValueError(f"geometry grid must be (T, H, W) of positive sizes, got {self.grid!r}")
        if self.frames_per_step < 1:
            raise ValueError(f"frames_per_step must be >= 1, got {self.frames_per_step!r}")

    @property
    def tokens(self) -> int:
        """``T * H * W``."""
        t, h, w = self.grid
        return t * h * w


@dataclass(frozen=True)
class KeptRecord:
    """The kept set of one video of one item.

    Attributes:
        task: lmms-eval task name.
        doc_id: the item's doc id in that task.
        video: index of the video within the item (0 for single-video items).
        method: the registry method.
        geometry: the token grid and how it sits on the frames.
        frame_indices: indices into the source video of the frames the model was given.
        budgets: tokens kept per temporal step, length ``T``.
        kept: bool ``[T, H, W]``: tokens the language model receives (merge targets for merging
            methods).
        merged: whether the kept places hold merged tokens.
        stages: in-LLM drops: ``(layer, bool [T, H, W])``, the tokens the layers from ``layer`` on
            see, in layer order.
    """

    task: str
    doc_id: int
    video: int
    method: str
    geometry: Geometry
    frame_indices: list[int]
    budgets: list[int]
    kept: np.ndarray
    merged: bool = False
    stages: list[tuple[int, np.ndarray]] = field(default_factory=list)

    def __post_init__(self) -> None:
        for name, mask in [("kept", self.kept), *((f"stage {layer}", m) for layer, m in self.stages)]:
            if mask.dtype != np.bool_ or tuple(mask.shape) != tuple(self.geometry.grid):
                raise ValueError(f"{name} mask must be bool {tuple(self.geometry.grid)}, got {mask.dtype} "
                                 f"{tuple(mask.shape)}")
        if len(self.budgets) != self.geometry.grid[0]:
            raise ValueError(f"budgets must have T = {self.geometry.grid[0]} entries, got {len(self.budgets)}")


def pack_mask(mask: np.ndarray) -> str:
    """Base64 of the bit-packed C-order flattening of a boolean mask."""
    return base64.b64encode(np.packbits(np.asarray(mask, dtype=bool).ravel()).tobytes()).decode("ascii")


def unpack_mask(text: str, shape: Sequence[int]) -> np.ndarray:
    """The boolean mask of ``shape`` that :func:`pack_mask` wrote."""
    count = int(np.prod(shape))
    packed = np.frombuffer(base64.b64decode(text), dtype=np.uint8)
    # unpackbits pads a short input with zeros: the byte count must be exactly the shape's.
    if packed.size != -(-count // 8):
        raise ValueError(f"a packed mask of {packed.size} bytes cannot fill shape {tuple(shape)} ({count} bits)")
    return np.unpackbits(packed, count=count).astype(bool).reshape(tuple(shape))


def to_json(record: KeptRecord) -> dict[str, Any]:
    """The JSON object of one record."""
    g = record.geometry
    return {
        "format": FORMAT, "task": record.task, "doc_id": int(record.doc_id), "video": int(record.video),
        "method": record.method, "family": g.family, "grid": list(g.grid), "frames_per_step": g.frames_per_step,
        "frame_size": list(g.frame_size), "frame_indices": [int(i) for i in record.frame_indices],
        "budgets": [int(b) for b in record.budgets], "kept": pack_mask(record.kept), "merged": bool(record.merged),
        "stages": [{"layer": int(layer), "kept": pack_mask(mask)} for layer, mask in record.stages],
    }


def from_json(data: dict[str, Any]) -> KeptRecord:
    """The record of one JSON object; ValueError names a format it does not read."""
    if data.get("format") != FORMAT:
        raise ValueError(f"kept-token record format {data.get('format')!r}; this vcast reads format {FORMAT}")
    geometry = Geometry(family=data["family"], grid=tuple(data["grid"]), frames_per_step=int(data["frames_per_step"]),
                        frame_size=tuple(data["frame_size"]))
    return KeptRecord(
        task=data["task"], doc_id=int(data["doc_id"]), video=int(data["video"]), method=data["method"],
        geometry=geometry, frame_indices=list(data["frame_indices"]), budgets=list(data["budgets"]),
        kept=unpack_mask(data["kept"], geometry.grid), merged=bool(data.get("merged", False)),
        stages=[(int(s["layer"]), unpack_mask(s["kept"], geometry.grid)) for s in data.get("stages", [])],
    )


def append_records(path: Path, records: Iterable[KeptRecord]) -> int:
    """Append ``records`` to the JSON-lines file ``path`` (created with its folder), one line each,
    flushed; returns how many were written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [json.dumps(to_json(r), separators=(",", ":")) + "\n" for r in records]
    if lines:
        with path.open("a", encoding="utf-8") as handle:
            handle.writelines(lines)
            handle.flush()
    return len(lines)


# From a generate call's stats ---------------------------------------------------------------------

def merged_grid_geometry(family: str, grid_thw: Sequence[int], patch_size: int, merge_size: int,
                         temporal_patch: int) -> Geometry:
    """A merging ViT (the Qwen families): a ``video_grid_thw`` row ``(t, h, w)`` (temporal patches,
    ``patch_size`` px patches) is the LLM grid ``(t, h / merge, w / merge)`` over frames of
    ``(h * patch, w * patch)`` pixels."""
    t, h, w = (int(side) for side in grid_thw)
    if h % merge_size or w % merge_size:
        raise ValueError(f"video grid {(t, h, w)} is not a multiple of the spatial merge {merge_size}")
    return Geometry(family, (t, h // merge_size, w // merge_size), int(temporal_patch),
                    (h * patch_size, w * patch_size))


def pooled_grid_geometry(family: str, frames: int, tokens_per_frame: int, image_size: int) -> Geometry:
    """A pooling tower (LLaVA-OneVision): ``frames`` frames of the pooled square grid of
    ``tokens_per_frame`` tokens (196 = 14 x 14 at 384 px; a trailing newline token is no grid token
    and always stays, so it is not recorded) over frames of ``image_size`` pixels square."""
    side = math.isqrt(int(tokens_per_frame))
    if side * side != tokens_per_frame:
        raise ValueError(f"a frame of {tokens_per_frame} pooled tokens is not a square grid")
    return Geometry(family, (int(frames), side, side), 1, (int(image_size), int(image_size)))


def _stage_mask(positions: np.ndarray, columns: Any, grid: tuple[int, int, int]) -> np.ndarray:
    """bool ``[T, H, W]``: the video tokens (prompt columns ``positions`` ``[T * H * W]``) among one
    row's stage survivors (their prompt columns)."""
    return np.isin(positions, np.asarray(columns, dtype=np.int64)).reshape(grid)


def call_records(stats: Any, method: str, geometries: Sequence[Geometry], frame_indices: Sequence[Sequence[int]],
                 tasks: Sequence[str], doc_ids: Sequence[int]) -> list[KeptRecord]:
    """One record per video of one ``generate`` call.

    Args:
        stats: the pruning handle's :class:`vcast.models.stats.CallStats` of the call; its video
            segments, in batch order, are the call's videos (images are not recorded).
        method: the registry method the cell runs (an input method runs the model as ``vanilla``).
        geometries: one per video, in the same order.
        frame_indices: one list per video: the source frames the model was given.
        tasks, doc_ids: per batch row (the segments' ``sample``).

    In-LLM drops map back through the stages' prompt columns (:attr:`LLMStageStats.prompt_columns`).
    ValueError when the stats and the plugin's videos disagree (a plugin bug, never a user's).
    """
    videos = [segment for segment in stats.segments if segment.kind == "video"]
    if not len(videos) == len(geometries) == len(frame_indices):
        raise ValueError(f"the model saw {len(videos)} video(s), the plugin prepared {len(geometries)} geometries "
                         f"and {len(frame_indices)} frame index lists")
    stages = list(getattr(stats, "llm_stages", []) or [])
    if any(len(stage.prompt_columns) != len(stage.columns) for stage in stages):
        raise ValueError("in-LLM stages were recorded without their prompt columns")
    seen: dict[int, int] = {}
    records = []
    for segment, geometry, indices in zip(videos, geometries, frame_indices):
        t, h, w = geometry.grid
        if segment.frames != t or segment.tokens_per_frame != h * w:
            raise ValueError(f"a video of {segment.frames} x {segment.tokens_per_frame} tokens does not fill the "
                             f"grid {geometry.grid}")
        if len(indices) != t * geometry.frames_per_step:
            raise ValueError(f"{len(indices)} frame indices for {t} steps of {geometry.frames_per_step} frame(s)")
        kept = np.zeros(t * h * w, dtype=bool)
        kept[np.asarray(segment.keep, dtype=np.int64)] = True
        positions = np.asarray(segment.positions, dtype=np.int64)
        row = int(segment.sample)
        video = seen.get(row, 0)
        seen[row] = video + 1
        records.append(KeptRecord(
            task=str(tasks[row]), doc_id=int(doc_ids[row]), video=video, method=method, geometry=geometry,
            frame_indices=[int(i) for i in indices], budgets=[int(b) for b in segment.budgets],
            kept=kept.reshape(geometry.grid), merged=bool(segment.merged),
            stages=[(int(stage.layer), _stage_mask(positions, stage.prompt_columns[row], geometry.grid))
                    for stage in stages],
        ))
    return records
