"""The item browser's pages: one per item (every method's answer, the frames, the kept maps) and
an index per experiment."""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from tqdm import tqdm

import vcast.eval.video
from vcast.report.layouts import PAPER_BASELINES, REFERENCE
from vcast.report.scoring import load_task_scorings
from vcast.report.site import html as H
from vcast.report.site.discovery import Experiment, cell_label, cell_order
from vcast.report.site import scripts
from vcast.report.site.items import (Item, KeptSheet, SiteCell, TaskDocs, VideoTiles, read_answers,
                                       write_frames_strip, write_kept_sheet)
from vcast.report.site.writer import SiteWriter

logger = logging.getLogger(__name__)

# The methods an item page starts with when it has many: the reference, V-CAST and the paper's
# Qwen3-VL baselines (tab:qwen_results); the others are a click away.
PAPER_METHODS = {REFERENCE, "vcast", *PAPER_BASELINES}
PICK_ALL_UP_TO = 8


@dataclass
class KeptMap:
    """One method's kept map on an item page: drawn by the page's script over a frame sheet that
    every method with the same frames shares (:func:`vcast.report.site.html.kept_map`)."""

    label: str
    sheet: str = ""            # the frame sheet's site path; "" when there is no map (``caption`` says why)
    caption: str = ""
    layout: dict[str, Any] = field(default_factory=dict)  # the sheet's (vcast.report.site.items.sheet_jpeg)
    frames_per_step: int = 1
    grid: tuple[int, int] = (0, 0)
    kept: list[str] = field(default_factory=list)  # per shown step, the kept tokens' bits in hex


@dataclass
class Media:
    """What an item page shows besides the answers."""

    frames: list[tuple[str, str]] = field(default_factory=list)    # (site path, caption)
    frames_note: str = ""
    kept: list[KeptMap] = field(default_factory=list)
    curves: list[tuple[str, list[int], str]] = field(default_factory=list)  # (label, budgets, its cell's key)
    per_step: Optional[int] = None
    kept_note: str = ""


def item_stem(item: Item) -> str:
    return H.slug(f"{item.lmms_task}-{item.doc_id}")


def item_page(experiment: Experiment, item: Item) -> str:
    return f"{experiment.slug}/items/{H.slug(item.task)}/{item_stem(item)}.html"


def kept_caption(label: str, record: Any) -> str:
    """What a kept map shows: the tokens kept (of an in-LLM method: those its last stage's layers
    see, the map's mask), the grid, and whether the kept places hold merges."""
    t, h, w = record.geometry.grid
    total = int(record.kept.size)

    def share(mask: Any) -> str:
        return f"{int(mask.sum())}/{total} tokens ({100 * int(mask.sum()) / max(total, 1):.0f}%)"

    if record.stages:
        layer, mask = record.stages[-1]
        text = f"{label}: {share(record.kept)} enter the language model, {share(mask)} from layer {layer} on (shown)"
    else:
        text = f"{label}: {share(record.kept)} kept"
    per_step = record.geometry.frames_per_step
    text += f"; {t} temporal steps of {h}×{w} tokens"
    if per_step > 1:
        text += f", each covering {per_step} frames (all drawn, side by side)"
    return text + ("; the kept places hold merged tokens" if record.merged else "")


def item_media(writer: SiteWriter, experiment: Experiment, item: Item, cells: dict[str, tuple[SiteCell, str]],
               docs: TaskDocs, records: dict[str, dict[tuple[str, str], list[tuple[int, Any]]]], problems: list[str]
               ) -> Media:
    """Draw (or keep) the item's frame strips and kept maps; what its page shows of them. ``records``:
    per cell, per ``(lmms task, doc id)``, its ``(video number, kept record)`` pairs (:func:`records_by_item`)."""
    media = Media()
    videos, why = docs.videos(item.doc_id)
    media_dir = f"{experiment.slug}/items/{H.slug(item.task)}/media"
    answered = [cells[a.cell] for a in item.answers if a.cell in cells]
    if not videos:
        media.frames_note = f"No frames: {why}."
    readings = sorted({(c.spec.frames, c.spec.plugin) for c, _ in answered if c.spec is not None})
    tiles = [VideoTiles(video) for video in videos]  # each frame decoded once for all of the item's images
    for number, video in enumerate(videos):
        for frames, plugin in readings:
            reader = "llava" if "llava" in plugin else "qwen"
            rel = f"{media_dir}/{item_stem(item)}-v{number}-{frames}f-{reader}.jpg"
            try:
                caption = writer.produce(rel, [video], {"frames": frames, "reader": reader},
                                         lambda path: write_frames_strip(path, tiles[number], frames, plugin))
            except (OSError, ValueError, RuntimeError) as error:
                problems.append(f"{item.name}: frames of {video} not read: {error}")
                media.frames_note = f"No frames: {video}: {error}."
                continue
            media.frames.append((rel, f"{video.name}: {caption}"))
    with_records = [(c, label) for c, label in answered if records.get(c.rel)]
    if not with_records:
        media.kept_note = ("No kept-token records in these cells (<cell>/kept/rank*.jsonl: the plugins write them "
                           "when the run records kept tokens).")
        return media
    sheet_inputs = [Path(vcast.eval.video.__file__)]  # a change in the frame reading redraws the sheets
    for cell, label in answered:
        found = records.get(cell.rel, {}).get((item.lmms_task, item.doc_id), [])
        if not found:
            media.kept.append(KeptMap(label, caption="no kept-token records in this cell" if not records.get(cell.rel)
                                      else "no kept-token record of this item in this cell"))
            continue
        for number, record in found:
            media.curves.append((label if len(found) == 1 else f"{label} video {number}", list(record.budgets),
                                 H.slug(label)))
            media.per_step = record.geometry.grid[1] * record.geometry.grid[2]
            if number >= len(videos):
                media.kept.append(KeptMap(label, caption=f"kept map not drawn: no video {number} "
                                                         f"({why or 'not found'})"))
                continue
            sheet = KeptSheet.of(record)
            key = {**sheet.key(record), "video": number}
            digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]
            rel = f"{media_dir}/{item_stem(item)}-v{number}-kept-frames-{digest}.jpg"
            try:  # one sheet for every method that read these frames; each map is the page's drawing
                layout = json.loads(writer.produce(rel, [videos[number], *sheet_inputs], key,
                                                   lambda path, video=tiles[number], record=record:
                                                   write_kept_sheet(path, video, record)))
                kept = sheet.kept_hex(record)
            except (OSError, ValueError, RuntimeError) as error:
                problems.append(f"{item.name}: kept map of {cell.rel} not drawn: {error}")
                media.kept.append(KeptMap(label, caption=f"kept map not drawn: {error}"))
                continue
            media.kept.append(KeptMap(label, rel, kept_caption(label, record), layout,
                                      record.geometry.frames_per_step, tuple(record.geometry.grid[1:]), kept))
    return media


def render_item(experiment: Experiment, item: Item, media: Media, previous: Optional[Item], following: Optional[Item]
                ) -> str:
    page = item_page(experiment, item)
    body = []
    links = []
    if previous is not None:
        links.append(H.link(H.href(page, item_page(experiment, previous)), f"← {H.esc(previous.name)}"))
    if following is not None:
        links.append(H.link(H.href(page, item_page(experiment, following)), f"{H.esc(following.name)} →"))
    if links:
        body.append(H.paragraph(" · ".join(links)))
    body.append(method_picker(item))
    body.append(H.heading(2, "Question") + H.preformatted(item.question or "(not logged)", css="question") + "\n"
                + H.paragraph(f"Right answer: {H.strong(item.target or '(not logged)', css='target')}"))
    body.append(H.heading(2, "Frames"))
    for rel, caption in media.frames:
        body.append(H.figure(H.href(page, rel), "frames", H.esc(caption)))
    if media.frames_note:
        body.append(H.note(media.frames_note))
    rows = []
    for answer in item.answers:
        verdict = (H.element("span", "right", css="right") if answer.correct else
                   H.element("span", "wrong", css="wrong") if answer.correct is not None else "")
        cell_link = H.link(H.href(page, experiment.cell_page(answer.cell)), "cell")
        rows.append([H.esc(answer.label), H.esc(answer.answer), H.esc(answer.reply), verdict, cell_link])
    keys = [H.slug(answer.label) for answer in item.answers]
    body.append(H.heading(2, "Answers") + H.table(["method", "answer", "reply", "correct", "cell"], rows, raw=True,
                                                  table_id="answers", row_keys=keys))
    body.append(H.heading(2, "Kept tokens"))
    if media.kept_note:
        body.append(H.note(media.kept_note))
    if media.curves:
        body.append(H.heading(3, "Tokens kept per temporal step") + H.budget_svg(
            [(label, budgets) for label, budgets, _ in media.curves], media.per_step,
            keys=[key for _, _, key in media.curves]))
    for shown in media.kept:
        key = H.slug(shown.label)
        if shown.sheet:
            body.append(H.kept_map(H.href(page, shown.sheet), shown.layout, shown.frames_per_step, shown.grid,
                                   shown.kept, shown.label, H.esc(shown.caption), method=key))
        else:
            body.append(H.element("p", f"{H.strong(shown.label)}: {H.muted(shown.caption)}",
                                  attrs={"data-method": key}) + "\n")
    crumbs = [("Results", "index.html"), (experiment.name, experiment.page), ("Items", experiment.items_page),
              (item.name, None)]
    title = item.name if item.task == item.lmms_task else f"{item.task}: {item.name}"
    return H.page(page, title, "".join(body), crumbs,
                  script=scripts.PICK + (scripts.KEPT_MAPS if any(k.sheet for k in media.kept) else ""))


def method_picker(item: Item) -> str:
    """A checkbox per cell answering ``item``: what its answer row, kept map and budget curve show.
    With more than :data:`PICK_ALL_UP_TO` cells only vanilla, V-CAST and the paper's baselines
    start checked (a reader adds the others); without a script every one is shown."""
    everyone = len(item.answers) <= PICK_ALL_UP_TO
    boxes = []
    for answer in item.answers:
        method = answer.cell.split("/")[2] if answer.cell.count("/") >= 4 else ""
        box = H.element("input", css="pick", void=True, attrs={
            "type": "checkbox", "value": H.slug(answer.label), "checked": True if everyone or method in PAPER_METHODS
            else None})
        boxes.append(H.element("label", f"{box} {H.esc(answer.label)}"))
    return H.element("details", H.element("summary", f"Methods shown ({len(boxes)})") + "\n"
                     + H.element("p", " ".join(boxes)), css="picker", attrs={"open": True}) + "\n"


def render_items_index(experiment: Experiment, by_task: dict[str, list[Item]], totals: dict[str, int]) -> str:
    page = experiment.items_page
    body = [H.paragraph("One page per question: the prompt, every method's answer side by side, the frames the "
                        "model read and, where recorded, the tokens each method kept. Type to filter the rows.")]
    for task, items in by_task.items():
        table_id = f"items-{H.slug(task)}"
        shown = f"{len(items)} items" if len(items) == totals[task] else (
            f"the first {len(items)} of {totals[task]} items (--max-items)")
        body.append(H.heading(2, f"{task} ({shown})") + H.element("input", css="filter", void=True, attrs={
            "type": "search", "placeholder": "filter: words in any column", "data-table": table_id}) + "\n")
        rows = []
        for item in items:
            right = sum(1 for a in item.answers if a.correct)
            wrong = [a.label for a in item.answers if a.correct is False]
            first = (item.question.strip().splitlines() or [""])[0]
            rows.append([H.link(H.href(page, item_page(experiment, item)), H.esc(item.name)),
                         H.esc(first), H.esc(item.target), H.esc(f"{right}/{len(item.answers)}"),
                         H.esc(", ".join(wrong))])
        body.append(H.table(["item", "question", "answer", "right", "wrong"], rows, raw=True, table_id=table_id))
    crumbs = [("Results", "index.html"), (experiment.name, experiment.page), ("Items", None)]
    return H.page(page, f"Items of {experiment.name}", "".join(body), crumbs, script=scripts.FILTER)


def build_items(writer: SiteWriter, experiment: Experiment, problems: list[str], max_items: Optional[int] = None
                ) -> bool:
    """The item browser of ``experiment`` (the first ``max_items`` items of each task, all by
    default); whether it has any item."""
    several = len({c.frames for c in experiment.cells}) > 1
    finished = [(c, cell_label(c, several)) for c in sorted(experiment.cells, key=cell_order) if c.finished]
    by_task, trouble = read_answers(finished, load_task_scorings())
    problems += [f"{experiment.name}: {p}" for p in trouble]
    if not by_task:
        return False
    totals = {task: len(items) for task, items in by_task.items()}
    if max_items is not None:
        by_task = {task: items[:max_items] for task, items in by_task.items()}
    cells = {c.rel: (c, label) for c, label in finished}
    records: dict[str, dict[tuple[str, str], list[tuple[int, Any]]]] = {}
    for cell, _ in finished:
        try:
            records[cell.rel] = records_by_item(cell.source.kept())
        except (OSError, ValueError, KeyError) as error:
            problems.append(f"{experiment.name}: {cell.rel}: kept-token records not read: {error}")
            records[cell.rel] = {}
    kept_files = {cell.rel: cell.source.kept_files() for cell, _ in finished}
    # the long part of a build (each item reads its video): one progress line, on a terminal only
    progress = tqdm(total=sum(len(items) for items in by_task.values()), desc=f"site {experiment.name}: items",
                    unit="item", file=sys.stderr, disable=None, leave=False)
    pages = 0
    for task, items in by_task.items():
        docs: dict[str, TaskDocs] = {}
        inputs = [p for c, _ in finished if c.task == task for p in (c.source.record_path, *kept_files[c.rel])]
        for index, item in enumerate(items):
            progress.update()
            pages += 1
            if item.lmms_task not in docs:
                include = next((c.spec.include_paths for c, _ in finished
                                if c.spec is not None and c.spec.task == task), [])
                docs[item.lmms_task] = TaskDocs(item.lmms_task, include)
            media = item_media(writer, experiment, item, cells, docs[item.lmms_task], records, problems)
            previous = items[index - 1] if index else None
            following = items[index + 1] if index + 1 < len(items) else None
            key = {"item": item_json(item), "media": media_json(media), "experiment": experiment.name,
                   "previous": previous.name if previous else None, "next": following.name if following else None}
            writer.text(item_page(experiment, item), inputs, key,
                        lambda item=item, media=media, previous=previous, following=following:
                        render_item(experiment, item, media, previous, following))
    progress.close()
    logger.info("site %s: %d item page(s) of %d task(s)", experiment.name, pages, len(by_task))
    key = {"items": {task: [item_json(i) for i in items] for task, items in by_task.items()},
           "experiment": experiment.name, "totals": totals}
    writer.text(experiment.items_page, [c.source.record_path for c, _ in finished], key,
                lambda: render_items_index(experiment, by_task, totals))
    return True


def records_by_item(kept: dict[tuple[str, Any, int], Any]) -> dict[tuple[str, str], list[tuple[int, Any]]]:
    """A cell's kept records (:meth:`vcast.results.tree.Cell.kept`: by ``(lmms task, doc id, video)``)
    by item: ``{(lmms task, doc id as text): [(video number, record), ...]}``, videos in order."""
    out: dict[tuple[str, str], list[tuple[int, Any]]] = {}
    for (lmms_task, doc_id, number), record in sorted(kept.items(), key=lambda pair: pair[0][2]):
        out.setdefault((lmms_task, str(doc_id)), []).append((number, record))
    return out


def media_json(media: Media) -> dict[str, Any]:
    """What an item page shows of its media, for its fingerprint (plain lists: no deep copies)."""
    kept = [[k.label, k.sheet, k.caption, k.layout, k.frames_per_step, k.grid, k.kept] for k in media.kept]
    return {"frames": media.frames, "frames_note": media.frames_note, "kept": kept, "curves": media.curves,
            "per_step": media.per_step, "kept_note": media.kept_note}


def item_json(item: Item) -> dict[str, Any]:
    return {"task": item.task, "lmms_task": item.lmms_task, "doc_id": item.doc_id, "question": item.question,
            "target": item.target, "answers": [a.__dict__ for a in item.answers]}
