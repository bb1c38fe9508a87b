"""Per-call efficiency records of the plugins, and their per-cell summary (the columns of the
paper's efficiency table).

Each rank appends one JSON line per ``generate`` call to ``<dir>/rank<r>.jsonl``. Times are
seconds: ``vision_s`` / ``prefill_s`` / ``decode_s`` come from the pruning handle's meters (CUDA
events on GPU), ``generate_s`` is the wall time of the whole ``generate`` call (synchronised),
``prepare_s`` the wall time of reading and preprocessing the call's videos (maybe ahead, in the
prefetch thread) and ``wait_s`` how long the request loop waited for them.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CallRecord:
    """One ``generate`` call on ``items`` requests (a batch). ``task``: the batch's tasks, sorted
    and comma-joined; ``tasks[i]``: the task of ``doc_ids[i]`` (a task group's batch mixes them)."""

    task: str
    doc_ids: list[int]
    items: int
    vision_s: float
    selection_s: float
    prefill_s: float
    decode_s: float
    generate_s: float
    decode_steps: int
    output_tokens: int
    peak_memory_mb: Optional[float]
    memory_source: str
    timer: str
    video_tokens_total: int
    video_tokens_kept: int
    prompt_tokens_before: list[int] = field(default_factory=list)
    prompt_tokens_after: list[int] = field(default_factory=list)
    # In-LLM methods: video tokens the last layer sees, and the share each layer sees on average
    # (see vcast.models.stats.CallStats.layer_retention); for other methods these equal the kept ones.
    video_tokens_final: Optional[int] = None
    layer_retention: Optional[float] = None
    tasks: list[str] = field(default_factory=list)
    # Input methods (fewer_frames, downsample): per video, the frames and LLM token grid used and
    # those of the unpruned model (vcast.eval.input_budget); video_tokens_total is then the
    # unpruned model's count. None for every other method.
    input_budget: Optional[list[dict[str, Any]]] = None
    # The batch's video reading + preprocessing (decord, the HF processor) wall time, in the
    # prefetch worker or inline, and how long the request loop waited for it (vcast.eval.prefetch):
    # with prefetching, wait_s falls towards 0 as reading hides behind the model. None in records
    # from before they were kept, and from the vLLM plugin (which reads inside its own call).
    prepare_s: Optional[float] = None
    wait_s: Optional[float] = None
    # Theoretical prefill TFLOPs of the call, summed over its items (vcast.models.flops: from the
    # model config and the call's real token counts, per layer for in-LLM methods; the same on CPU
    # and GPU): the vision path and the language model. None in older records and from the vLLM plugin.
    vision_tflops: Optional[float] = None
    llm_tflops: Optional[float] = None
    # The attempt of a resumed cell that made the call (vcast.eval.resume; None outside a sweep's
    # resumable run): a cell's summary counts each item from the last attempt that computed it.
    attempt: Optional[int] = None


class EfficiencyLog:
    """Appends :class:`CallRecord` lines for one rank; ``directory=None`` keeps them in memory only."""

    def __init__(self, directory: Optional[str | Path], rank: int) -> None:
        self.records: list[CallRecord] = []
        self.path: Optional[Path] = None
        if directory is not None:
            self.path = Path(directory) / f"rank{rank}.jsonl"
            self.path.parent.mkdir(parents=True, exist_ok=True)

    def add(self, record: CallRecord) -> None:
        self.records.append(record)
        if self.path is not None:
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(asdict(record)) + "\n")


def read_jsonl(directory: str | Path, pattern: str) -> list[dict[str, Any]]:
    """The JSON lines of every file matching ``pattern`` in ``directory``, files in name order. A
    file's torn last line (its writer killed mid-line, then resumed) is skipped with a warning."""
    return [record for path in sorted(Path(directory).glob(pattern)) for record in read_json_lines(path)]


def read_json_lines(path: Path, *, strict: bool = False) -> list[Any]:
    """The JSON lines of the file ``path`` (blank lines skipped). A line that is not JSON, a torn
    write (its writer killed mid-line), is skipped with a warning, or with ``strict`` raises.

    Raises:
        ValueError: ``strict`` and a line is not JSON (the message names the file and line).
    """
    records = []
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except ValueError as error:
                if strict:
                    raise ValueError(f"{path}:{number}: not JSON ({error})") from error
                logger.warning("%s:%d: not a complete JSON line (a run cut off while writing?); skipped", path, number)
    return records


def _mean_per_item(records: list[dict[str, Any]], key: str, items: int) -> Optional[float]:
    values = [r.get(key) for r in records]
    if not items or any(v is None for v in values):
        return None
    return sum(values) / items


def _sum_or_none(records: list[dict[str, Any]], key: str) -> Optional[float]:
    """Sum of ``key`` over ``records``; None when there are none or any lacks it (older records)."""
    values = [r.get(key) for r in records]
    if not values or any(v is None for v in values):
        return None
    return float(sum(values))


def _weighted_retention(records: list[dict[str, Any]]) -> Optional[float]:
    """The layer-averaged retention over every video token of the cell (calls weighted by their tokens)."""
    pairs = [(r.get("layer_retention"), r["video_tokens_total"]) for r in records]
    if not pairs or any(share is None for share, _ in pairs) or not sum(total for _, total in pairs):
        return None
    return sum(share * total for share, total in pairs) / sum(total for _, total in pairs)


def summarize(records: Iterable[dict[str, Any]], wall_s: Optional[float]) -> dict[str, Any]:
    """Cell-level figures, as in the paper's efficiency table.

    ``prefill_latency_s`` and ``generation_latency_s`` are sums over every call (over all ranks
    in a data-parallel cell: device time, not wall time); ``total_latency_s`` is the wall time
    of the whole evaluation (``wall_s``), ``throughput_items_per_s`` = items / that;
    ``peak_memory_mb`` the maximum over calls and ranks; token counts are means per item.
    ``prepare_latency_s`` sums the calls' video reading + preprocessing (where total time goes
    besides the model: with prefetching it overlaps the model, and ``prepare_wait_s``, the loop's
    waits for it, is the part that does not); None for records that lack them.
    ``vision_tflops_per_item`` / ``llm_tflops_per_item`` / ``prefill_tflops_per_item`` (their sum)
    are the theoretical prefill TFLOPs per item (:mod:`vcast.models.flops`); None when a record lacks them.

    In a data-parallel run lmms-eval pads the ranks to equal request counts by repeating a
    request; a call whose documents were all seen already is such padding and is left out, so a
    cell's figures do not depend on its number of processes.
    """
    records = unique_calls(records)
    items = len({item for record in records for item in record_items(record)})
    peaks = [r["peak_memory_mb"] for r in records if r.get("peak_memory_mb") is not None]
    out: dict[str, Any] = {
        "items": items,
        "calls": len(records),
        "vision_latency_s": sum(r["vision_s"] for r in records),
        "selection_latency_s": sum(r["selection_s"] for r in records),
        "prefill_latency_s": sum(r["prefill_s"] for r in records),
        "generation_latency_s": sum(r["decode_s"] for r in records),
        "generate_latency_s": sum(r["generate_s"] for r in records),
        "prepare_latency_s": _sum_or_none(records, "prepare_s"),
        "prepare_wait_s": _sum_or_none(records, "wait_s"),
        "total_latency_s": wall_s,
        "throughput_items_per_s": (items / wall_s) if wall_s and items else None,
        "peak_memory_mb": max(peaks) if peaks else None,
        "memory_source": records[0]["memory_source"] if records else None,
        "timer": records[0]["timer"] if records else None,
        "mean_video_tokens_total": (sum(r["video_tokens_total"] for r in records) / items) if items else None,
        "mean_video_tokens_kept": (sum(r["video_tokens_kept"] for r in records) / items) if items else None,
        "output_tokens": sum(r["output_tokens"] for r in records),
        "mean_video_tokens_final": _mean_per_item(records, "video_tokens_final", items),
        "layer_retention": _weighted_retention(records),
        "vision_tflops_per_item": _mean_per_item(records, "vision_tflops", items),
        "llm_tflops_per_item": _mean_per_item(records, "llm_tflops", items),
        "per_task": per_task(records),
    }
    vision, llm = out["vision_tflops_per_item"], out["llm_tflops_per_item"]
    out["prefill_tflops_per_item"] = None if vision is None or llm is None else vision + llm
    return out


def latest_first(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` from the last attempt's to the first's (records without an attempt count as
    attempt 0, before any resumable one; file order within an attempt): an item's first record
    in this order is the one whose answer the cell reports."""
    return sorted(records, key=lambda r: -(r.get("attempt") or 0))


def throughput_payload(records: Sequence[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """What the plugins hand lmms-eval's ``log_metrics`` for ``records`` (calls as JSON objects):
    generate seconds and output tokens summed, the per-item means of the meters, the peak memory;
    None without records."""
    if not records:
        return None
    items = sum(r["items"] for r in records)
    elapsed = sum(r["generate_s"] for r in records)
    tokens = sum(r["output_tokens"] for r in records)
    peaks = [r["peak_memory_mb"] for r in records if r.get("peak_memory_mb") is not None]
    return {
        "total_elapsed_time": elapsed, "total_gen_tokens": tokens, "avg_speed": tokens / elapsed if elapsed else 0.0,
        "additional_metrics": {
            "prefill_s": sum(r["prefill_s"] for r in records) / items,
            "decode_s": sum(r["decode_s"] for r in records) / items,
            "vision_s": sum(r["vision_s"] for r in records) / items,
            "peak_memory_mb": max(peaks) if peaks else 0.0,
            "kept_video_tokens": sum(r["video_tokens_kept"] for r in records) / items,
            "total_video_tokens": sum(r["video_tokens_total"] for r in records) / items,
            "total_requests": items,
        },
    }


def attempts_throughput(records: Iterable[dict[str, Any]]) -> Optional[dict[str, Any]]:
    """lmms-eval's ``results["throughput"]`` block over every attempt of a resumed cell: each item
    counted once, from the last attempt that computed it (as :func:`summarize`), in the form
    lmms-eval's ``summarize_logged_metrics`` gives one logged entry (``total_gen_tokens``,
    ``total_elapsed_time``, ``avg_speed``, ``avg_latency``, ``avg_<metric>``), with ``attempts``:
    how many attempts' calls it covers. None without records."""
    calls = unique_calls(latest_first(records))
    payload = throughput_payload(calls)
    if payload is None:
        return None
    extra = dict(payload["additional_metrics"])
    requests = extra.pop("total_requests")
    tokens, elapsed = payload["total_gen_tokens"], payload["total_elapsed_time"]
    block: dict[str, Any] = {"total_gen_tokens": tokens, "total_elapsed_time": elapsed,
                             "avg_speed": tokens / elapsed if elapsed > 0 else payload["avg_speed"]}
    if requests > 0:
        block["avg_latency"] = elapsed / requests
    block.update({f"avg_{key}": value for key, value in extra.items()})
    block["attempts"] = len({r.get("attempt") for r in calls})
    return block


def unique_calls(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` without the calls whose items were all seen in an earlier one: lmms-eval's
    padding of data-parallel ranks, and (given :func:`latest_first` order) an earlier attempt's
    calls for items a later attempt computed again."""
    seen: set[tuple[str, int]] = set()
    unique = []
    for record in records:
        docs = set(record_items(record))
        if docs - seen:
            unique.append(record)
            seen |= docs
    return unique


def record_items(record: dict[str, Any]) -> list[tuple[str, int]]:
    """``(task, doc_id)`` of each item of a call (records from before ``tasks`` carry one task)."""
    tasks = record.get("tasks") or [record["task"]] * len(record["doc_ids"])
    return list(zip(tasks, record["doc_ids"]))


def per_task(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Items, prefill and generation seconds per task; a batch that mixes tasks (a task group)
    shares its call's time equally among its items."""
    out: dict[str, dict[str, float]] = {}
    for record in records:
        items = record_items(record)
        for task, _ in items:
            entry = out.setdefault(task, {"items": 0, "prefill_latency_s": 0.0, "generation_latency_s": 0.0})
            entry["items"] += 1
            entry["prefill_latency_s"] += record["prefill_s"] / len(items)
            entry["generation_latency_s"] += record["decode_s"] / len(items)
    return dict(sorted(out.items()))
