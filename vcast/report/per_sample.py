"""Per-item answers and correctness of finished cells, read from lmms-eval's samples files.

Each lmms-eval task logs one JSON line per question (``*_samples_<lmms task>.jsonl``) holding
its ``process_results`` output under the metric's name. :data:`ITEM_FIELDS` says, per metric,
where that dict keeps the parsed answer and how correctness is read; a metric missing from the
table falls back to the filtered reply (``filtered_resps``) against ``target``.

An item is ``(lmms task, doc_id)``: MVBench's 20 subtasks each number their documents from 0.
The benchmark's score is rebuilt the way the tables get it (:mod:`vcast.report.scoring`):

* a metric pattern with a glob (``mvbench_*``) averages the matching lmms tasks, so such a
  benchmark's score is the mean of per-task accuracies (its *strata* are the lmms tasks);
* MLVU dev's M-Avg is lmms-eval's mean over its question types (``task_type``): strata again;
* every other benchmark is the plain accuracy over its items;
* a task config's ``breakdown`` (Video-MME's ``duration``) makes one more benchmark per group
  (``VideoMME-Short`` ...), each the accuracy over that group's items.

Nothing here raises on a bad cell: unreadable ones are listed in :attr:`CellItemsCollection.problems`.
"""

from __future__ import annotations

import fnmatch
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import pandas as pd

from vcast.report.scoring import CONFIG_DIR, MalformedCell, TaskScoring, load_task_scorings
from vcast.results.tree import Cell, CellFileError, ResultsTree

logger = logging.getLogger(__name__)

GLOB_CHARS = set("*?[")
# The item frame of one cell: one row per question, sorted by (stratum, lmms_task, doc_id), numeric
# ids in numeric order (the bootstrap's draws map to items in this order).
ITEM_COLUMNS = ["lmms_task", "doc_id", "answer", "correct", "stratum", "group"]


@dataclass(frozen=True)
class ItemFields:
    """Where one metric's per-sample dict keeps an item's parsed answer and its correctness.

    ``answer``: key of the parsed prediction. Correctness is ``dict[score] == 1`` when ``score``
    is set, else ``dict[answer] == dict[truth]`` (compared as stripped strings, as lmms-eval
    does). ``stratum``: key of the category the benchmark's score averages over (MLVU's
    M-Avg). ``raw_reply``: the ``answer`` field is the model's raw reply (MVBench), so loyalty
    compares its option letter (:func:`option_letter`). ``skip_empty``: an empty reply is not an
    item at all, as the benchmark's aggregate leaves it out (MVBench divides by answered items).
    """

    answer: str
    score: Optional[str] = None
    truth: Optional[str] = None
    stratum: Optional[str] = None
    raw_reply: bool = False
    skip_empty: bool = False


# lmms-eval 0.7.3's per-sample dicts (the ``process_results`` of each task's utils.py).
ITEM_FIELDS: dict[str, ItemFields] = {
    "videomme_perception_score": ItemFields("pred_answer", score="score"),
    "mvbench_accuracy": ItemFields("pred_answer", score="score", raw_reply=True, skip_empty=True),
    "mlvu_percetion_score": ItemFields("pred_answer", truth="answer", stratum="task_type"),
    "lvb_acc": ItemFields("parsed_pred", truth="answer"),
    "score": ItemFields("pred", truth="ground_truth"),  # EgoSchema (generation): option index
    "vcast_synth_acc": ItemFields("pred", score="score"),
}

# An option letter at the start ("B", "(B)", "B. red") or standing alone later ("The answer is B").
_LEADING_LETTER = re.compile(r"^[\s(\[*'\"]*([A-Ea-e])(?![A-Za-z0-9])")
_STANDALONE_LETTER = re.compile(r"(?<![A-Za-z0-9])([A-E])(?![A-Za-z0-9])")


def option_letter(reply: str) -> str:
    """The option letter a raw reply names (``"(b) red"`` -> ``B``, ``"The answer is C."`` -> ``C``),
    else the reply itself, stripped and lower-cased (so two equal free-form replies still agree).
    A capital ``A`` followed by a space and a word is the article, not an option."""
    text = str(reply).strip()
    leading = _LEADING_LETTER.match(text)
    if leading and not re.match(r"A\s+[A-Za-z]", text):
        return leading.group(1).upper()
    for match in _STANDALONE_LETTER.finditer(text):
        if match.group(1) == "A" and re.match(r"A\s+[A-Za-z]", text[match.start():]):
            continue
        return match.group(1)
    return text.lower()


@dataclass
class CellItems:
    """One finished cell and its items (:data:`ITEM_COLUMNS`)."""

    cell: str
    experiment: str
    model: str
    frames: int
    ratio: float
    method: str
    task: str
    profile: str
    variant: str
    limit: Optional[float]
    items: pd.DataFrame
    source: Optional[Cell] = field(default=None, repr=False, compare=False)  # the cell as the reader read it

    @property
    def key(self) -> tuple[str, str, str, int, str]:
        """What a method cell shares with its vanilla cell: profile, experiment, model, frames, task."""
        return self.profile, self.experiment, self.model, self.frames, self.task


@dataclass
class CellItemsCollection:
    """The finished cells read, and one line per cell whose samples could not be read."""

    cells: list[CellItems] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _as_str(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _sample_item(record: Mapping[str, Any], metric: str,
                 fields: Optional[ItemFields]) -> Optional[tuple[str, bool, str]]:
    """(answer, correct, stratum) of one samples line; None for an item the benchmark leaves out."""
    entry = record.get(metric)
    if fields is not None and isinstance(entry, Mapping) and fields.answer in entry:
        answer = _as_str(entry[fields.answer])
        if fields.skip_empty and answer == "":
            return None
        if fields.score is not None:
            if fields.score not in entry:
                raise MalformedCell(f"sample doc_id={record.get('doc_id')!r}: {metric} has no {fields.score!r}")
            correct = float(entry[fields.score]) == 1.0
        else:
            if fields.truth not in entry:
                raise MalformedCell(f"sample doc_id={record.get('doc_id')!r}: {metric} has no {fields.truth!r}")
            correct = answer == _as_str(entry[fields.truth])
        stratum = _as_str(entry.get(fields.stratum)) if fields.stratum else ""
        return (option_letter(answer) if fields.raw_reply else answer), correct, stratum
    # Unknown metric: the filtered reply's option letter against the target.
    reply = record.get("filtered_resps")
    reply = reply[0] if isinstance(reply, list) and reply else reply
    if reply is None or "target" not in record:
        raise MalformedCell(f"sample doc_id={record.get('doc_id')!r} has neither a {metric!r} dict with its "
                            "answer nor filtered_resps and target")
    answer = option_letter(_as_str(reply))
    return answer, answer == option_letter(_as_str(record["target"])), ""


def _metric_of(scoring: TaskScoring, lmms_task: str) -> tuple[str, bool]:
    """The metric logged by ``lmms_task`` and whether its benchmark averages several lmms tasks."""
    for pattern, metric in scoring.metrics.items():
        if fnmatch.fnmatchcase(lmms_task, pattern):
            return metric, bool(GLOB_CHARS & set(pattern))
    raise MalformedCell(f"samples of lmms task {lmms_task!r} match no metric pattern of task {scoring.name} "
                        f"({', '.join(scoring.metrics)})")


def doc_order(doc_id: str) -> tuple[int, float, str]:
    """Sort key of a doc id as text: numeric ids in numeric order, then the others by text."""
    try:
        return 0, float(doc_id), doc_id
    except ValueError:
        return 1, 0.0, doc_id


def sample_reply(record: Mapping[str, Any]) -> str:
    """The model's reply in one samples record (``filtered_resps``, unnested); empty when none."""
    reply = record.get("filtered_resps")
    while isinstance(reply, list) and reply:
        reply = reply[0]
    return "" if reply is None or isinstance(reply, list) else str(reply)


def sample_prompt(record: Mapping[str, Any]) -> str:
    """The prompt the model was given in one samples record (``input``; an older lmms-eval's
    request ``arguments``, context first); empty when neither holds text."""
    text = record.get("input")
    if isinstance(text, str):
        return text
    arguments = record.get("arguments")
    while isinstance(arguments, (list, dict)) and arguments:
        arguments = arguments[0] if isinstance(arguments, list) else next(iter(arguments.values()))
    return arguments if isinstance(arguments, str) else ""


def read_items(samples: Mapping[str, Sequence[Mapping[str, Any]]], scoring: TaskScoring) -> pd.DataFrame:
    """The items of one cell's samples (:data:`ITEM_COLUMNS`) from ``{lmms task: its samples
    records}`` (:meth:`vcast.results.tree.Cell.samples`: the first record of each ``doc_id``)."""
    rows: dict[tuple[str, Any], dict[str, Any]] = {}
    breakdown = scoring.breakdown
    skipped = 0
    for lmms_task, records in sorted(samples.items()):
        metric, by_task = _metric_of(scoring, lmms_task)
        fields = ITEM_FIELDS.get(metric)
        if fields is None:
            logger.warning("%s: no answer fields known for metric %r; comparing filtered replies with targets",
                           lmms_task, metric)
        for number, record in enumerate(records, 1):
            key = (lmms_task, record.get("doc_id", number))
            if key in rows:
                continue
            item = _sample_item(record, metric, fields)
            if item is None:
                skipped += 1
                continue
            answer, correct, stratum = item
            group = ""
            if breakdown is not None:
                entry = record.get(breakdown.field)
                if not isinstance(entry, Mapping) or breakdown.by not in entry:
                    raise MalformedCell(f"{lmms_task} samples: doc {key[1]}: no {breakdown.field}.{breakdown.by}")
                group = _as_str(entry[breakdown.by])
            rows[key] = {"lmms_task": lmms_task, "doc_id": key[1], "answer": answer, "correct": correct,
                         "stratum": lmms_task if by_task else stratum, "group": group}
    if skipped:
        logger.info("%s: %d empty repl(ies) left out, as the benchmark's score leaves them out", scoring.name, skipped)
    frame = pd.DataFrame(list(rows.values()), columns=ITEM_COLUMNS)
    if frame.empty:
        raise MalformedCell("the samples files hold no items")
    number = pd.to_numeric(frame["doc_id"], errors="coerce")  # numeric ids in numeric order
    frame["doc_id"] = frame["doc_id"].astype(str)  # ids compare as text (int or string ids alike)
    return (frame.assign(_number=number).sort_values(["stratum", "lmms_task", "_number", "doc_id"], kind="stable")
            .drop(columns="_number").reset_index(drop=True))


def benchmark_items(items: pd.DataFrame, scoring: TaskScoring) -> dict[str, pd.DataFrame]:
    """``{benchmark column: its items}``: every item for the task's benchmark, then one subset per
    breakdown group (``VideoMME-Short`` ...) that has items."""
    out = {scoring.benchmark: items}
    if scoring.breakdown is not None:
        for key, column in scoring.breakdown.columns.items():
            subset = items[items["group"] == key]
            if not subset.empty:
                out[column] = subset.reset_index(drop=True)
    return out


def collect_items(root: Path, *, experiments: Optional[Sequence[str]] = None, config_dir: Path = CONFIG_DIR,
                  scorings: Optional[dict[str, TaskScoring]] = None) -> CellItemsCollection:
    """Every finished cell under ``root`` (of ``experiments`` when given) with its items.

    Failed / OOM / unfinished cells have no items and are left out silently (the tables show
    them); a finished cell whose samples cannot be read is listed in ``problems``.
    """
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"no results folder {root}")
    scorings = scorings if scorings is not None else load_task_scorings(config_dir)
    out = CellItemsCollection()
    for cell in ResultsTree(root).cells():
        try:
            record = cell.record
            if record is None:
                continue
            spec = record.spec
            if experiments is not None and spec.experiment not in experiments:
                continue
            if record.status != "ok" or cell.why_incomplete():
                continue
            if spec.task not in scorings:
                raise MalformedCell(f"task {spec.task!r} has no config in {config_dir}/task")
            samples = cell.samples()
            if not samples:
                raise MalformedCell("no samples files (lmms-eval ran without --log_samples?)")
            items = read_items(samples, scorings[spec.task])
            out.cells.append(CellItems(
                cell=cell.rel, experiment=spec.experiment, model=spec.model, frames=int(spec.frames),
                ratio=float(spec.ratio), method=spec.method, task=spec.task, profile=spec.profile,
                variant=spec.variant, limit=None if spec.limit is None else float(spec.limit), items=items,
                source=cell))
        except (MalformedCell, CellFileError, OSError, KeyError, TypeError, ValueError) as error:
            out.problems.append(f"{cell.rel}: {error}")
            logger.warning("per-sample analysis skips %s: %s", cell.rel, error)
    return out


def strata_codes(strata: Sequence[str]) -> np.ndarray:
    """Integer codes ``[N]`` of ``strata`` (sorted names -> 0, 1, ...)."""
    names = sorted(set(strata))
    index = {name: code for code, name in enumerate(names)}
    return np.fromiter((index[s] for s in strata), dtype=np.int64, count=len(strata))
