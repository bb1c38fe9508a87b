"""The paper's qualitative figures (fig:badcase, fig:more_badcase) from finished cells.

Items are chosen from the per-sample analysis (:mod:`vcast.report.per_sample`): V-CAST answers
them right and every chosen baseline (and, optionally, the unpruned model) answers them wrong, at
the same ratio and frame count. Each chosen item is one figure: the question and its options,
then one row per method (vanilla first, V-CAST last) with a strip of its frames (the steps where
V-CAST spent most, and evenly spaced ones), the tokens it dropped dimmed
(:func:`vcast.viz.kept_frames`, from the cell's kept-token records, :mod:`vcast.kept_records`),
its answer marked right or wrong, and below them each method's per-frame (per temporal patch)
budget. Answers and kept records come from the results reader's cells
(:attr:`vcast.report.per_sample.CellItems.source`), the video through the task's own
``doc_to_visual`` (:mod:`vcast.report.task_docs`) at the frames the cell recorded
(:func:`item_evidence`); :func:`draw_item` draws only what it is given.

    python -m vcast.report qualitative demo --baselines uniform,random --items 3
"""

from __future__ import annotations

import logging
import random
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
from matplotlib.figure import Figure

from vcast.kept_records import KeptRecord
from vcast.results.tree import Cell
from vcast.report.collect import usual_frames
from vcast.report.names import method_name
from vcast.report.per_sample import CellItems, CellItemsCollection, doc_order, sample_prompt, sample_reply
from vcast.viz import kept_frames, record_frames, record_grid

logger = logging.getLogger(__name__)

DEFAULT_BASELINES = ("visionzip", "vidcom2", "fastvid")
DEFAULT_STEPS = 8
RIGHT, WRONG = (0.15, 0.55, 0.25), (0.80, 0.15, 0.15)


@dataclass(frozen=True)
class Choice:
    """One item to draw: its lmms task and doc id, and the cell of each method (vanilla first,
    then the baselines in the order given, V-CAST last)."""

    lmms_task: str
    doc_id: str
    cells: dict[str, CellItems]


def choose_items(collection: CellItemsCollection, experiment: str, *, ratio: float = 0.25,
                 frames: Optional[int] = None, baselines: Sequence[str] = DEFAULT_BASELINES,
                 vanilla_wrong: bool = False, count: int = 3, seed: int = 0,
                 model: Optional[str] = None) -> list[Choice]:
    """Up to ``count`` items, drawn with ``seed`` from those V-CAST answers right and every one of
    ``baselines`` wrong (and vanilla too with ``vanilla_wrong``), in sorted order.

    Raises:
        ValueError: a method has no finished cell, or no item qualifies (the message gives each
            method's count of right answers among V-CAST's right ones).
    """
    cells = [c for c in collection.cells if c.experiment == experiment and (model is None or c.model == model)]
    if not cells:
        raise ValueError(f"no finished cell of experiment {experiment!r}"
                         f"{'' if model is None else f' and model {model}'}")
    if frames is None:
        frames = usual_frames(c.frames for c in cells)
    wanted = {"vanilla": 1.0, **{b: ratio for b in baselines}, "vcast": ratio}

    def cell_of(method: str, at: float) -> CellItems:
        found = [c for c in cells if c.method == method and c.frames == frames and np.isclose(c.ratio, at)]
        if not found:
            raise ValueError(f"no finished {method} cell of {experiment} at {frames} frames, r = {at:g}")
        return sorted(found, key=lambda c: c.cell)[0]

    chosen_cells = {method: cell_of(method, at) for method, at in wanted.items()}
    correct = {method: {(r.lmms_task, r.doc_id): bool(r.correct) for r in cell.items.itertuples()}
               for method, cell in chosen_cells.items()}
    vcast_right = {key for key, ok in correct["vcast"].items() if ok}
    candidates = set(vcast_right)
    for method in baselines:
        candidates &= {key for key, ok in correct[method].items() if not ok}
    if vanilla_wrong:
        candidates &= {key for key, ok in correct["vanilla"].items() if not ok}
    if not candidates:
        also = {m: sum(correct[m].get(key, False) for key in vcast_right) for m in ["vanilla", *baselines]}
        raise ValueError(f"no item of {experiment} ({frames} frames, r = {ratio:g}) that V-CAST answers right "
                         f"({len(vcast_right)} items) and {', '.join(baselines)}"
                         f"{' and vanilla' if vanilla_wrong else ''} all answer wrong; of V-CAST's right items "
                         f"these answer right too: {also}. Choose other --baselines")
    ordered = sorted(candidates, key=lambda key: (key[0], doc_order(key[1])))
    picked = sorted(random.Random(seed).sample(ordered, min(count, len(ordered))),
                    key=lambda key: (key[0], doc_order(key[1])))
    logger.info("qualitative: %d of %d qualifying items of %s chosen (seed %d)", len(picked), len(ordered),
                experiment, seed)
    return [Choice(task, doc_id, chosen_cells) for task, doc_id in picked]


@dataclass(frozen=True)
class Answer:
    """One method's reply to the item and whether it is right."""

    reply: str
    correct: bool


def _reader(cell: CellItems) -> Cell:
    if cell.source is None:
        raise ValueError(f"{cell.cell}: not read from a results tree (collect_items gives each cell its reader)")
    return cell.source


def answers(choice: Choice) -> tuple[str, str, dict[str, Answer]]:
    """``(prompt text, target, {method: Answer})`` of a chosen item, from each cell's samples."""
    prompt, target, out = "", "", {}
    for method, cell in choice.cells.items():
        record = next((r for r in _reader(cell).samples(choice.lmms_task).get(choice.lmms_task, [])
                       if str(r.get("doc_id")) == str(choice.doc_id)), None)
        if record is None:
            raise ValueError(f"{cell.cell}: no sample of {choice.lmms_task} doc {choice.doc_id}")
        row = cell.items[(cell.items["lmms_task"] == choice.lmms_task) & (cell.items["doc_id"] == choice.doc_id)]
        out[method] = Answer(sample_reply(record).strip(), bool(row["correct"].iloc[0]))
        prompt = prompt or sample_prompt(record)
        target = target or str(record.get("target") or "")
    return prompt, target, out


def item_records(choice: Choice) -> dict[str, KeptRecord]:
    """Each method's kept-token record of the item's first video (methods without one are left out)."""
    out = {}
    for method, cell in choice.cells.items():
        record = _reader(cell).kept(choice.lmms_task).get(
            (choice.lmms_task, int(choice.doc_id) if str(choice.doc_id).isdigit() else choice.doc_id, 0))
        if record is None:
            logger.warning("qualitative: %s has no kept-token record of %s doc %s", cell.cell, choice.lmms_task,
                           choice.doc_id)
            continue
        out[method] = record
    return out


@dataclass(frozen=True)
class ItemEvidence:
    """What the figure of one chosen item shows, as the results reader (answers, kept records) and
    the task's documents (the video, at the frames the cells recorded) give it."""

    prompt: str
    target: str
    replies: dict[str, Answer]
    records: dict[str, KeptRecord]
    video: Path
    frames: np.ndarray  # uint8 [N, H, W, 3]: the frames V-CAST's cell was given


def item_evidence(choice: Choice) -> ItemEvidence:
    """Everything :func:`draw_item` needs of ``choice``.

    Raises:
        ValueError: the V-CAST cell recorded no kept tokens for the item, or its video is not found.
    """
    from vcast.eval.video import open_video
    from vcast.report.task_docs import item_visuals

    name = f"{choice.lmms_task} doc {choice.doc_id}"
    records = item_records(choice)
    if "vcast" not in records:
        raise ValueError(f"{name}: the V-CAST cell recorded no kept tokens for it (rerun it: record_kept is on "
                         "by default)")
    videos = [Path(v) for v in item_visuals(choice.lmms_task, choice.doc_id) if isinstance(v, (str, Path))]
    if not videos or not videos[0].exists():
        raise ValueError(f"{name}: video {videos[0] if videos else '(none)'} not found")
    prompt, target, replies = answers(choice)
    frames = np.asarray(open_video(str(videos[0])).read(list(records["vcast"].frame_indices)))
    return ItemEvidence(prompt, target, replies, records, videos[0], frames)


def shown_steps(records: dict[str, KeptRecord], total: int, count: int = DEFAULT_STEPS) -> list[int]:
    """The temporal steps a row shows: V-CAST's ``count // 2`` largest budgets (where it saw the
    video change; lower step on ties), the rest evenly spaced, in order; all when ``count >= total``."""
    if count >= total:
        return list(range(total))
    chosen: set[int] = set()
    if "vcast" in records:
        budgets = np.asarray(records["vcast"].budgets)
        chosen |= {int(i) for i in np.argsort(-budgets, kind="stable")[: count // 2]}
    for step in np.linspace(0, total - 1, count).round().astype(int):
        if len(chosen) >= count:
            break
        chosen.add(int(step))
    return sorted(chosen)


def draw_item(frames: np.ndarray, prompt: str, target: str, replies: dict[str, Answer],
              records: dict[str, KeptRecord], *, steps: int = DEFAULT_STEPS, title: str = "") -> Figure:
    """The paper's layout for one item.

    Args:
        frames: uint8 ``[N, H, W, 3]``: the frames the cells were given (the records' ``frame_indices``).
        prompt: the question and options as the model saw them.
        target: the right option.
        replies: each method's answer, in row order.
        records: each method's kept-token record (a method without one shows its frames undimmed,
            labelled so); an in-LLM method shows its last drop stage.
        steps: temporal steps shown per row (:func:`shown_steps`).
    """
    methods = list(replies)
    first = next(iter(records.values()))
    total_steps = first.geometry.grid[0]
    shown = shown_steps(records, total_steps, steps)
    question = "\n".join(textwrap.fill(line, 110) for line in prompt.strip().splitlines()[:8])
    figure = Figure(figsize=(1.45 * len(shown) + 2.6, 1.25 * len(methods) + 3.4), layout="constrained")
    grid = figure.add_gridspec(len(methods) + 2, len(shown) + 1,
                               height_ratios=[1.1, *[1.0] * len(methods), 1.3], width_ratios=[*[1] * len(shown), 1.6])
    head = figure.add_subplot(grid[0, :])
    head.axis("off")
    head.text(0, 1, f"{title}\n{question}\nAnswer: {target}", va="top", ha="left", fontsize=8, family="monospace",
              transform=head.transAxes)
    for row, method in enumerate(methods, start=1):
        record = records.get(method)
        # In-LLM methods: the tokens the last layers still see (their last drop stage).
        mask = record_grid(record) if record is not None else np.ones(first.geometry.grid, dtype=bool)
        strip = (record_frames(record, frames) if record is not None
                 else kept_frames(frames, mask, frames_per_step=first.geometry.frames_per_step))
        for column, step in enumerate(shown):
            ax = figure.add_subplot(grid[row, column])
            ax.imshow(strip[step])
            ax.set_xticks([])
            ax.set_yticks([])
            if row == 1:
                ax.set_title(f"t = {step}", fontsize=7)
            ax.set_gid(f"frame:{method}:{step}")
            if column == 0:
                kept = int(mask.sum())
                ax.set_ylabel(f"{method_name(method)}\n{kept}/{mask.size}" + ("" if record else "\n(no record)"),
                              fontsize=7)
        answer = replies[method]
        side = figure.add_subplot(grid[row, len(shown)])
        side.axis("off")
        side.text(0.02, 0.5, f"{'✓' if answer.correct else '✗'} {textwrap.shorten(answer.reply, 28) or '(empty)'}",
                  va="center", fontsize=8, color=RIGHT if answer.correct else WRONG, transform=side.transAxes)
    curve = figure.add_subplot(grid[len(methods) + 1, :])
    for index, method in enumerate(methods):
        if method in records and method != "vanilla":  # vanilla keeps every token: a flat line at the top
            curve.plot(records[method].budgets, label=method_name(method), linewidth=2.0 if method == "vcast" else 1.2,
                       color=(0.851, 0.353, 0.373) if method == "vcast" else f"C{index}", gid=f"budget:{method}")
    step = "frame" if first.geometry.frames_per_step == 1 else "temporal patch"
    curve.set_xlabel(f"{step} index")
    curve.set_ylabel(f"tokens per {step}")
    curve.legend(fontsize=7, ncol=min(len(methods), 5), frameon=False)
    curve.grid(alpha=0.3)
    return figure


def write_qualitative(results: Path, experiment: str, out: Path, *, ratio: float = 0.25,
                      frames: Optional[int] = None, baselines: Sequence[str] = DEFAULT_BASELINES,
                      vanilla_wrong: bool = False, items: int = 3, seed: int = 0,
                      model: Optional[str] = None) -> tuple[list[Path], list[str]]:
    """Choose the items (:func:`choose_items`) among the cells the results reader gives
    (:func:`vcast.report.per_sample.collect_items`), gather each one's evidence (:func:`item_evidence`)
    and write ``<out>/qualitative-<experiment>-<task>-<doc>.{png,pdf}``; ``(files written, problems)``:
    an item whose video is missing or whose cells recorded no kept tokens is named and skipped."""
    from vcast.report.figure_common import save_figure
    from vcast.report.per_sample import collect_items

    collection = collect_items(results, experiments=[experiment])
    choices = choose_items(collection, experiment, ratio=ratio, frames=frames, baselines=baselines,
                           vanilla_wrong=vanilla_wrong, count=items, seed=seed, model=model)
    written: list[Path] = []
    problems: list[str] = list(collection.problems)
    for choice in choices:
        try:
            evidence = item_evidence(choice)
        except ValueError as error:
            problems.append(f"{error}; skipped")
            logger.warning("qualitative: %s", problems[-1])
            continue
        figure = draw_item(evidence.frames, evidence.prompt, evidence.target, evidence.replies, evidence.records,
                           title=f"{experiment}: {choice.lmms_task} doc {choice.doc_id} ({evidence.video.name}), "
                                 f"r = {ratio:g}")
        stem = out / f"qualitative-{experiment}-{choice.lmms_task}-{choice.doc_id}"
        written += save_figure(figure, stem)
    return written, problems
