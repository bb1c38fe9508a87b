"""`vllm serve` under load, measured: what ``make bench-serve`` (``scripts/bench_serve.py``) starts and reports.

Three servers answer the same requests: ``stock`` (vLLM's own Qwen3-VL, every video token), ``evs``
(vLLM's own EVS pruning at the same retention as V-CAST: ``video_pruning_rate = 1 - r``) and
``vcast`` (the plugin, :func:`vcast.vllm.engine_kwargs`). Each point is one run of vLLM's own load
generator (``vllm.benchmarks.serve``) at a fixed number of requests in flight; the prompt tokens the
engine took in come from the server's Prometheus counters (the client counts text tokens only).

Nothing here imports vLLM: the flags, the counters' parsing and the outputs (CSV, Markdown, figure)
run in the main environment too, where the tests check them.
"""

from __future__ import annotations

import csv
import json
import logging
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from vcast.atomic_files import atomic_write_text

logger = logging.getLogger(__name__)

CONFIGS = ("stock", "evs", "vcast")
CONFIG_NAMES = {"stock": "stock vLLM", "evs": "stock EVS", "vcast": "V-CAST"}
CONCURRENCY = (1, 2, 4, 8, 16, 32)
# The engine's counters (vLLM 0.32, v1 metrics): prompt tokens received, and those of them found in
# the prefix cache (not computed again).
PROMPT_TOKENS = "vllm:prompt_tokens_total"
CACHED_PROMPT_TOKENS = "vllm:prompt_tokens_cached_total"


def stock_evs_kwargs(ratio: float, cpu: bool) -> dict[str, Any]:
    """vLLM's own EVS keeping ``ratio`` of each video's tokens; on the CPU build with the plugin's
    worker, without which vLLM 0.32's CPU runner crashes on any pruned video (docs/vllm.md, bug (a))."""
    if not 0.0 < ratio < 1.0:
        raise ValueError(f"ratio must be in (0, 1) for EVS, got {ratio!r}")
    kwargs: dict[str, Any] = {"video_pruning_rate": 1.0 - ratio, "video_pruning_method": "evs"}
    if cpu:
        from vcast.vllm import CPU_WORKER

        kwargs["worker_cls"] = CPU_WORKER
    return kwargs


def serve_flags(kwargs: Mapping[str, Any]) -> list[str]:
    """``vllm serve`` flags for engine keyword arguments (``{"hf_overrides": {...}, "enforce_eager": True}``
    -> ``["--hf-overrides", "{...}", "--enforce-eager"]``): mappings and lists as JSON, ``True`` as a
    bare flag, ``False`` / ``None`` left out (vLLM's defaults)."""
    flags: list[str] = []
    for key, value in kwargs.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            flags.append(flag)
        elif isinstance(value, (Mapping, list, tuple)):
            flags += [flag, json.dumps(value, sort_keys=True)]
        else:
            flags += [flag, str(value)]
    return flags


_SAMPLE = re.compile(r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)(?:\{[^}]*\})?\s+(?P<value>\S+)")


def metric_total(text: str, name: str) -> float:
    """The sum over labels of Prometheus metric ``name`` in a ``/metrics`` page (0 when absent)."""
    total = 0.0
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match and match["name"] == name:
            total += float(match["value"])
    return total


@dataclass(frozen=True)
class LoadPoint:
    """One server at one concurrency: what vLLM's load generator measured, and the prompt tokens
    the server's counters say it took in per request (all of them, and those not in the prefix cache)."""

    config: str
    concurrency: int
    requests: int
    completed: int
    failed: int
    requests_per_s: float
    output_tokens_per_s: float
    ttft_p50_ms: float
    ttft_p99_ms: float
    e2e_p50_ms: float
    e2e_p99_ms: float
    prompt_tokens_per_request: float
    computed_prompt_tokens_per_request: float


def load_point(config: str, concurrency: int, requests: int, result: Mapping[str, Any], prompt_tokens: float,
               cached_tokens: float) -> LoadPoint:
    """A :class:`LoadPoint` from ``vllm.benchmarks.serve.main``'s result and the counters' increase."""
    if config not in CONFIGS:
        raise ValueError(f"config must be one of {CONFIGS}, got {config!r}")
    completed = int(result["completed"])
    per_request = prompt_tokens / completed if completed else 0.0
    return LoadPoint(
        config=config, concurrency=concurrency, requests=requests, completed=completed,
        failed=int(result.get("failed", requests - completed)),
        requests_per_s=float(result["request_throughput"]), output_tokens_per_s=float(result["output_throughput"]),
        ttft_p50_ms=float(result["median_ttft_ms"]), ttft_p99_ms=float(result["p99_ttft_ms"]),
        e2e_p50_ms=float(result["median_e2el_ms"]), e2e_p99_ms=float(result["p99_e2el_ms"]),
        prompt_tokens_per_request=per_request,
        computed_prompt_tokens_per_request=(prompt_tokens - cached_tokens) / completed if completed else 0.0)


def write_csv(points: Sequence[LoadPoint], path: Path) -> None:
    """Every point, one row each (the columns are :class:`LoadPoint`'s fields), written atomically."""
    import io

    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=[field.name for field in fields(LoadPoint)], lineterminator="\n")
    writer.writeheader()
    for point in points:
        writer.writerow(asdict(point))
    atomic_write_text(path, buffer.getvalue())


def read_csv(path: Path) -> list[LoadPoint]:
    """The points :func:`write_csv` wrote."""
    types = {field.name: field.type for field in fields(LoadPoint)}
    casts = {"str": str, "int": int, "float": float}
    with open(path, newline="", encoding="utf-8") as handle:
        return [LoadPoint(**{key: casts[types[key]](value) for key, value in row.items()})
                for row in csv.DictReader(handle)]


def _by_key(points: Iterable[LoadPoint]) -> dict[tuple[str, int], LoadPoint]:
    return {(point.config, point.concurrency): point for point in points}


def markdown_table(points: Sequence[LoadPoint]) -> str:
    """One row per concurrency x server, in :data:`CONFIGS` order, with requests/s over stock vLLM's
    at the same concurrency (when stock was measured there)."""
    table = _by_key(points)
    lines = ["| in flight | server | requests/s | vs stock | output tok/s | TTFT p50 / p99 (ms) | "
             "end-to-end p50 / p99 (ms) | prompt tokens / request | failed |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for concurrency in sorted({point.concurrency for point in points}):
        stock = table.get(("stock", concurrency))
        for config in CONFIGS:
            point = table.get((config, concurrency))
            if point is None:
                continue
            ratio = f"{point.requests_per_s / stock.requests_per_s:.2f}x" if stock and stock.requests_per_s else "–"
            lines.append(f"| {concurrency} | {CONFIG_NAMES[config]} | {point.requests_per_s:.3f} | {ratio} | "
                         f"{point.output_tokens_per_s:.1f} | {point.ttft_p50_ms:.0f} / {point.ttft_p99_ms:.0f} | "
                         f"{point.e2e_p50_ms:.0f} / {point.e2e_p99_ms:.0f} | "
                         f"{point.prompt_tokens_per_request:.0f} | {point.failed} |")
    return "\n".join(lines) + "\n"


def plot(points: Sequence[LoadPoint], path: Path, title: str) -> None:
    """Requests/s and p99 end-to-end latency against requests in flight, one line per server (PNG)."""
    import textwrap

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from vcast.viz import save

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4.4))
    ticks = sorted({point.concurrency for point in points})
    for config in CONFIGS:
        mine = sorted((point for point in points if point.config == config), key=lambda point: point.concurrency)
        if not mine:
            continue
        x = [point.concurrency for point in mine]
        left.plot(x, [point.requests_per_s for point in mine], marker="o", label=CONFIG_NAMES[config])
        right.plot(x, [point.e2e_p99_ms / 1000 for point in mine], marker="o", label=CONFIG_NAMES[config])
    for axis, label in ((left, "requests/s"), (right, "p99 end-to-end latency (s)")):
        axis.set_xscale("log", base=2)
        axis.set_xticks(ticks, [str(tick) for tick in ticks])
        axis.set_xlabel("requests in flight")
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
        axis.legend()
    figure.suptitle("\n".join(textwrap.wrap(title, 110)), fontsize=10)
    figure.tight_layout()
    save(figure, path)
    plt.close(figure)
