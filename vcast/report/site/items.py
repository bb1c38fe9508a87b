"""The item browser of the results site: per task item, every method's answer side by side, the
frames the model read and, where the cells recorded them, the kept tokens over those frames.

* Answers: each finished cell's lmms-eval samples (``*_samples_<lmms task>.jsonl``): the prompt the
  model got (``input``), the right answer (``target``), the raw reply (``filtered_resps``) and the
  parsed answer and correctness as the report reads them (:func:`vcast.report.per_sample.read_items`).
* Frames: the item's video from the task's own documents and ``doc_to_visual``
  (:mod:`vcast.report.task_docs`: the task as lmms-eval loads it, with vcast's task folder and the
  cell's ``include_paths``; a task that cannot be loaded shows no frames, and says why), read as
  the plugin reads it
  (:func:`vcast.eval.video.read_qwen_video` / :func:`~vcast.eval.video.read_llava_video`).
* Kept tokens: a cell's ``kept/rank*.jsonl`` (:meth:`vcast.results.tree.Cell.kept`): per item one
  image of every frame of each shown temporal step (:class:`KeptSheet`), shared by every method
  that read the same frames, over which the page's script dims each method's dropped tokens
  (the record's kept bits are in the page); and the per-step budget curve.
"""

from __future__ import annotations

import io
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from vcast.atomic_files import atomic_write_bytes
from vcast.report.per_sample import doc_order, read_items, sample_prompt, sample_reply
from vcast.report.scoring import MalformedCell, TaskScoring
from vcast.report.task_docs import item_visuals, load_task
from vcast.results.record import CellRecord
from vcast.results.tree import Cell, CellFileError
from vcast.sweep.cell import CellSpec
from vcast.viz import default_steps, record_grid

logger = logging.getLogger(__name__)

MAX_TILES = 32        # frames shown in one strip (evenly chosen when the model read more)
MAX_STEPS = 16        # temporal steps shown in one kept map
TILE_HEIGHT = 96      # pixels; larger frames are scaled down (never up)
GAP = 2               # pixels between tiles
JPEG_QUALITY = 90


@dataclass
class SiteCell:
    """One cell of an experiment as the site shows it."""

    source: Cell                      # the cell as the results tree reads it
    rel: str                          # relative to its experiment folder, '/'-separated
    status: str                       # vcast.sweep.status.cell_status
    state: str                        # done | partial | failed | missing | running
    record: Optional[CellRecord]      # None when it has none (planned, running) or it is unreadable

    @property
    def path(self) -> Path:
        return self.source.path

    @property
    def spec(self) -> Optional[CellSpec]:
        return self.record.spec if self.record is not None else None

    @property
    def task(self) -> str:
        return self.spec.task if self.spec is not None else ""

    @property
    def frames(self) -> Optional[int]:
        return self.spec.frames if self.spec is not None else None

    @property
    def scores(self) -> dict[str, dict[str, float]]:
        return dict(self.record.scores) if self.record is not None else {}

    @property
    def finished(self) -> bool:
        return self.state in ("done", "partial")


@dataclass
class Answer:
    """One cell's answer to one item."""

    cell: str           # SiteCell.rel
    label: str          # "V-CAST (r=0.25, 32f)"
    answer: str         # the parsed answer ("" when none parsed)
    reply: str          # the raw reply
    correct: Optional[bool]


@dataclass
class Item:
    """One question of a task and every cell's answer."""

    task: str           # the sweep's task config (vcast_synth)
    lmms_task: str
    doc_id: str
    question: str = ""  # the prompt the model was given
    target: str = ""
    answers: list[Answer] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.lmms_task} #{self.doc_id}"


def read_answers(cells: Sequence[tuple[SiteCell, str]], scorings: dict[str, TaskScoring]
                 ) -> tuple[dict[str, list[Item]], list[str]]:
    """``({task: items sorted by (lmms task, doc id)}, problems)`` of the finished ``(cell, label)``
    pairs, each item holding the answers in the order of ``cells``."""
    items: dict[tuple[str, str, str], Item] = {}
    problems: list[str] = []
    for cell, label in cells:
        task = cell.task
        try:
            if task not in scorings:
                raise MalformedCell(f"task {task!r} has no config in configs/task")
            samples = cell.source.samples()
            if not samples:
                raise MalformedCell("no samples files (lmms-eval ran without --log_samples?)")
            parsed = read_items(samples, scorings[task])
            verdict = {(row.lmms_task, row.doc_id): (row.answer, bool(row.correct))
                       for row in parsed.itertuples(index=False)}
            for lmms_task, records in sorted(samples.items()):
                for record in records:
                    doc_id = str(record.get("doc_id"))
                    item = items.setdefault((task, lmms_task, doc_id), Item(task, lmms_task, doc_id))
                    item.question = item.question or sample_prompt(record)
                    item.target = item.target or str(record.get("target", "") or "")
                    answer, correct = verdict.get((lmms_task, doc_id), ("", None))
                    item.answers.append(Answer(cell.rel, label, answer, sample_reply(record), correct))
        except (MalformedCell, CellFileError, OSError, KeyError, TypeError, ValueError) as error:
            problems.append(f"{cell.rel}: answers not read: {error}")
            logger.warning("item browser skips %s: %s", cell.rel, error)
    by_task: dict[str, list[Item]] = {}
    for key in sorted(items, key=lambda k: (k[0], k[1], doc_order(k[2]))):
        by_task.setdefault(key[0], []).append(items[key])
    return by_task, problems


# ---------------------------------------------------------------------------------------------
# The task's documents and videos
# ---------------------------------------------------------------------------------------------

class TaskDocs:
    """One lmms-eval task's ``doc_to_visual`` (:mod:`vcast.report.task_docs`: the task loaded as
    lmms-eval loads it, with vcast's task folder and the cell's ``include_paths``); ``reason`` says
    why not where the task cannot be loaded (a Hugging Face dataset offline, say)."""

    def __init__(self, lmms_task: str, include_paths: Sequence[str] = ()) -> None:
        self.lmms_task = lmms_task
        self.include_paths = tuple(str(p) for p in include_paths)
        self.reason = ""
        try:
            load_task(lmms_task, self.include_paths)
        except Exception as error:  # noqa: BLE001 - lmms-eval and datasets raise many kinds; the page says which
            self.reason = f"task {lmms_task!r} could not be loaded: {type(error).__name__}: {error}"

    def videos(self, doc_id: str) -> tuple[list[Path], str]:
        """(the item's video files, why none when empty)."""
        if self.reason:
            return [], self.reason
        try:
            visuals = item_visuals(self.lmms_task, doc_id, self.include_paths)
        except (OSError, ValueError, KeyError, IndexError) as error:
            return [], f"doc_to_visual: {error}"
        paths = [Path(v) for v in visuals if isinstance(v, (str, Path))]
        return paths, "" if paths else "doc_to_visual gave no video path"


# ---------------------------------------------------------------------------------------------
# Images
# ---------------------------------------------------------------------------------------------

class VideoTiles:
    """One video's frames as the site draws them (scaled to :data:`TILE_HEIGHT` pixels high when
    taller), each decoded and scaled once however many images of the item show it; the video is
    opened at the first frame asked for (an unchanged rebuild never opens it)."""

    def __init__(self, video: Path) -> None:
        self.video = Path(video)
        self._opened: Any = None
        self._tiles: dict[int, np.ndarray] = {}

    @property
    def opened(self) -> Any:
        """:func:`vcast.eval.video.open_video` of the video (its ``total`` frames, ``read``)."""
        if self._opened is None:
            from vcast.eval.video import open_video

            self._opened = open_video(str(self.video))
        return self._opened

    def frames(self, indices: Sequence[int]) -> np.ndarray:
        """uint8 ``[len(indices), h, w, 3]``: the frames at ``indices`` (repeats allowed), scaled."""
        from PIL import Image

        missing = sorted({int(i) for i in indices} - set(self._tiles))
        if missing:
            for index, frame in zip(missing, np.asarray(self.opened.read(missing), dtype=np.uint8)):
                height, width = frame.shape[:2]
                if height > TILE_HEIGHT:
                    size = (max(1, round(width * TILE_HEIGHT / height)), TILE_HEIGHT)
                    frame = np.asarray(Image.fromarray(frame).resize(size, Image.BILINEAR))
                self._tiles[index] = frame
        return np.stack([self._tiles[int(i)] for i in indices])

    def read_by(self, frames: int, plugin: str) -> list[int]:
        """The frame indices the plugin reads at ``frames`` (:func:`vcast.eval.video.read_qwen_video`,
        :func:`~vcast.eval.video.read_llava_video`)."""
        from vcast.eval.video import llava_read_indices, qwen_read_indices

        read = llava_read_indices if "llava" in plugin else qwen_read_indices
        return read(self.opened, frames)


def evenly(count: int, most: int) -> list[int]:
    """Up to ``most`` evenly spaced positions of ``count``, first and last included."""
    if count <= most:
        return list(range(count))
    return sorted({int(round(x)) for x in np.linspace(0, count - 1, most)})


def sheet_jpeg(frames: np.ndarray, per_row: int = 8) -> tuple[bytes, dict[str, Any]]:
    """uint8 ``[N, H, W, 3]`` frames (scaled already: :meth:`VideoTiles.frames`) laid out left to
    right, ``per_row`` a row: ``(JPEG bytes, layout)``, the layout a JSON-ready
    ``{"columns", "tile": [w, h], "gap", "count", "size": [w, h]}`` (tile ``i`` at column
    ``i % columns``, row ``i // columns``, ``gap`` pixels apart). JPEG: these are video frames, a
    lossy picture already, and a third of the PNG's bytes on the demo's items."""
    from PIL import Image

    frames = np.asarray(frames, dtype=np.uint8)
    count, height, width = frames.shape[:3]
    columns = min(per_row, count)
    rows = -(-count // columns)
    sheet = np.full((rows * height + (rows - 1) * GAP, columns * width + (columns - 1) * GAP, 3), 255, np.uint8)
    for index, frame in enumerate(frames):
        r, c = divmod(index, columns)
        sheet[r * (height + GAP):r * (height + GAP) + height, c * (width + GAP):c * (width + GAP) + width] = frame
    out = io.BytesIO()
    Image.fromarray(sheet).save(out, format="JPEG", quality=JPEG_QUALITY)
    layout = {"columns": columns, "tile": [width, height], "gap": GAP, "count": count,
              "size": [sheet.shape[1], sheet.shape[0]]}
    return out.getvalue(), layout


def write_frames_strip(path: Path, video: VideoTiles, frames: int, plugin: str) -> str:
    """The frames the plugin reads from ``video`` at ``frames`` (at most :data:`MAX_TILES`), as
    a JPEG at ``path`` (atomically); returns the caption."""
    indices = video.read_by(frames, plugin)
    shown = evenly(len(indices), MAX_TILES)
    atomic_write_bytes(path, sheet_jpeg(video.frames([indices[i] for i in shown]))[0])
    picked = "" if len(shown) == len(indices) else f"{len(shown)} of them shown, "
    return (f"the {len(indices)} frames the model read ({picked}video frames "
            f"{', '.join(str(indices[i]) for i in shown)})")


@dataclass(frozen=True)
class KeptSheet:
    """What a record's kept map shows: its temporal steps (at most :data:`MAX_STEPS`, evenly
    chosen) and, for each, every frame the step's tokens cover (a Qwen3-VL token covers two: both
    are drawn, so content in one of them only, a brief event, shows)."""

    steps: tuple[int, ...]         # the shown temporal steps
    tiles: tuple[int, ...]         # per tile (a frame of the sheet): its frame's position in record.frame_indices;
    #                                tile i shows a frame of step steps[i // frames_per_step]

    @classmethod
    def of(cls, record: Any) -> "KeptSheet":
        per_step, count = record.geometry.frames_per_step, len(record.frame_indices)
        steps = tuple(default_steps(record.geometry.grid[0], MAX_STEPS))
        # only a last step can be short (a clip that ends inside it): every other has its per_step tiles
        return cls(steps, tuple(s * per_step + k for s in steps for k in range(per_step) if s * per_step + k < count))

    def key(self, record: Any) -> dict[str, Any]:
        """What the sheet's pixels depend on besides the video: every record with this key shares it."""
        return {"frames": [int(record.frame_indices[t]) for t in self.tiles], "per_row": self.per_row(record)}

    @staticmethod
    def per_row(record: Any) -> int:
        return 8 * record.geometry.frames_per_step  # 8 temporal steps a row, a step's frames side by side

    def kept_hex(self, record: Any) -> list[str]:
        """Per shown step, its kept tokens (the last in-LLM stage's where the record has stages:
        :func:`vcast.viz.record_grid`) as row-major bits, most significant first, in hex."""
        grid = record_grid(record)
        return [np.packbits(grid[step].ravel()).tobytes().hex() for step in self.steps]


def write_kept_sheet(path: Path, video: VideoTiles, record: Any) -> str:
    """The frames of ``record``'s kept map (:class:`KeptSheet`), undimmed, as a JPEG at ``path``
    (atomically); returns its layout (:func:`sheet_jpeg`) as JSON. The page's script dims each
    method's dropped tokens over it (:data:`vcast.report.site.scripts.KEPT_MAPS`), so one image
    serves every method of the item that read the same frames."""
    sheet = KeptSheet.of(record)
    image, layout = sheet_jpeg(video.frames([int(record.frame_indices[t]) for t in sheet.tiles]),
                               per_row=KeptSheet.per_row(record))
    atomic_write_bytes(path, image)
    return json.dumps(layout, sort_keys=True)
