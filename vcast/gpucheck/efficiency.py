"""The paper's efficiency table at real size (tab:efficiency_comparison, and the LLaVA-OneVision
dimensions of fig:llava_ov_efficiency), on random weights made on the device.

Every method runs through :func:`vcast.models.attach` and ``generate(max_new_tokens=N,
min_new_tokens=N)`` (greedy, so exactly ``N`` new tokens) on the same prompt
(:func:`vcast.gpucheck.models.video_inputs`), batch 1. Per method, from ``handle.stats`` (CUDA
events on a GPU, ``perf_counter`` on the CPU): the vision encoder, the selection (finding the
video tokens, selecting and re-laying them; an in-LLM method's drops between layers are part of
the prefill), the LLM prefill, the ``N - 1`` decoding steps, the peak memory of the call (CUDA
max allocated, weights included, as the paper's); the total is the synchronised wall time of the
whole ``generate`` call, and items/s its inverse. Runs of the methods are interleaved, warm-up
rounds first, and each number is the median over the runs. The ratios to vanilla stand beside
the paper's (read from ``vcast/report/paper_tables.csv``); the paper does not say what its
"prefill latency" holds, so both the LLM prefill and the time to the first token (vision +
selection + prefill) are compared with it. The families the paper does not run (Qwen2.5-VL,
Qwen3.5, ...) get the same rows at their published sizes (:data:`FAMILY_METHODS`), without a
paper to compare with.
"""

from __future__ import annotations

import csv
import math
import statistics
import time
from pathlib import Path
from typing import Any, Optional

import torch

import vcast
from vcast.families import family_of
from vcast.gpucheck.models import video_inputs
from vcast.gpucheck.results import FAIL, PASS, SKIPPED, Report, Table, fmt, markdown_table
from vcast.report.names import method_name, paper_name

RATIO = 0.25
PAPER_TABLE = "tab:efficiency_comparison"
PAPER_CSV = Path(__file__).resolve().parents[1] / "report" / "paper_tables.csv"
PAPER_MODEL = "Qwen3-VL-8B-Instruct"
PAPER_FRAMES = 32
PAPER_METRICS = {"prefill": "PrefillLatency_s", "memory": "PeakMemory_MB", "throughput": "Throughput_items_per_s"}

# (row label, registry method, parameters): item 3 of the kit's issue.
QWEN_METHODS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("vanilla", "vanilla", {}),
    ("vcast (official)", "vcast", {"variant": "official"}),
    ("vcast (paper)", "vcast", {"variant": "paper"}),
    ("random", "random", {}),
    ("visionzip", "visionzip", {}),
    ("vidcom2", "vidcom2", {}),
    ("fastvid", "fastvid", {}),
    ("holitom", "holitom", {}),
    ("flashvid", "flashvid", {}),
    ("evs", "evs", {}),
)
LLAVA_METHODS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("vanilla", "vanilla", {}),
    ("vcast", "vcast", {}),
    ("fastvid", "fastvid", {}),
    ("vidcom2", "vidcom2", {}),
)
# The families beyond the paper's, at their published sizes: V-CAST and the baselines that prune
# before the LLM on every family.
FAMILY_METHODS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("vanilla", "vanilla", {}),
    ("vcast", "vcast", {}),
    ("visionzip", "visionzip", {}),
    ("vidcom2", "vidcom2", {}),
    ("fastvid", "fastvid", {}),
    ("holitom", "holitom", {}),
)


def paper_ratios(path: Path = PAPER_CSV) -> dict[str, dict[str, float]]:
    """``{registry method: {metric: published value / vanilla's}}`` of tab:efficiency_comparison
    (Qwen3-VL-8B, 32 frames, r = 0.25) for :data:`PAPER_METRICS`."""
    published: dict[tuple[str, str], float] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle):
            if row["table"] == PAPER_TABLE and row["model"] == PAPER_MODEL and int(row["frames"]) == PAPER_FRAMES:
                published[(row["method"], row["benchmark"])] = float(row["value"])
    out: dict[str, dict[str, float]] = {}
    for method in {m for _, m, _ in QWEN_METHODS} - {"vanilla"}:
        name = paper_name(method_name(method))
        ratios = {key: published[(name, metric)] / published[(PAPER_MODEL, metric)]
                  for key, metric in PAPER_METRICS.items() if (name, metric) in published}
        if ratios:
            out[method] = ratios
    return out


def synchronize(device: torch.device) -> None:
    """Wait for ``device``'s queued work (CUDA); nothing on the CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def run_once(model: Any, inputs: dict[str, Any], method: str, params: dict[str, Any], new_tokens: int,
             ratio: float = RATIO) -> dict[str, Any]:
    """One ``generate`` of ``new_tokens`` tokens under ``attach``: the stats' numbers and the wall time."""
    device = inputs["input_ids"].device
    handle = vcast.models.attach(model, method, 1.0 if method == "vanilla" else ratio, **params)
    try:
        synchronize(device)
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(**inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False)
        synchronize(device)
        total = time.perf_counter() - start
        stats = handle.stats
    finally:
        handle.detach()
    generated = out.shape[1] - inputs["input_ids"].shape[1]
    if generated != new_tokens:
        raise RuntimeError(f"{method}: {generated} new tokens instead of {new_tokens}")
    return {
        "vision_s": stats.vision_s, "selection_s": stats.selection_s, "prefill_s": stats.prefill_s,
        "ttft_s": stats.vision_s + stats.selection_s + stats.prefill_s, "decode_s": stats.decode_s,
        "decode_steps": stats.decode_steps, "total_s": total, "peak_memory_bytes": stats.peak_memory_bytes,
        "video_tokens": stats.total_video_tokens, "kept_tokens": stats.kept_video_tokens,
        "final_tokens": stats.final_video_tokens, "prompt_tokens": stats.tokens_before[0],
        "kept_prompt_tokens": stats.tokens_after[0], "timer": stats.timer, "memory_source": stats.memory_source,
        **_prefill_tflops(model, inputs, stats),
        "tokens": out[0, inputs["input_ids"].shape[1]:].tolist(),
    }


def _prefill_tflops(model: Any, inputs: dict[str, Any], stats: Any) -> dict[str, Optional[float]]:
    """Theoretical prefill TFLOPs of the call (:mod:`vcast.models.flops`, docs/models.md#prefill-flops): the
    vision encoder over the prompt's video, the LLM over its per-layer lengths (an in-LLM method's
    drops included); None where the formula cannot say."""
    try:
        from vcast.models.flops import call_prefill_flops, vision_units

        layers = model.config.text_config.num_hidden_layers
        flops = call_prefill_flops(model.config, vision_units(model.config, inputs), stats.layer_lengths(layers))
        return {"vision_tflops": flops.vision / 1e12, "llm_tflops": flops.llm / 1e12}
    except Exception:  # noqa: BLE001 - extra columns; the timing does not depend on them
        return {"vision_tflops": None, "llm_tflops": None}


def _median(samples: list[dict[str, Any]], key: str) -> float:
    values = [s[key] for s in samples if s[key] is not None]
    return float(statistics.median(values)) if values else float("nan")


def measure(report: Report, model: Any, model_label: str, frame_counts: tuple[int, ...], side: int,
            methods: tuple[tuple[str, str, dict[str, Any]], ...], new_tokens: int, warmup: int, runs: int,
            first_block_s: float, compare_paper: bool = False) -> None:
    """Rows of the efficiency table for ``model`` at each of ``frame_counts``; a block (one frame
    count, every method) starts only when its estimate (``first_block_s`` for the first, then the
    last block's time scaled by the frames) fits in the report's budget. ``compare_paper``: put the
    paper's ratios (tab:efficiency_comparison) beside the rows at its 32 frames."""
    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    paper = paper_ratios() if compare_paper else {}
    table = report.tables.setdefault("efficiency", Table([]))
    last: Optional[tuple[int, float]] = None
    for frames in frame_counts:
        name = f"efficiency/{model_label}/{frames}-frames"
        estimate = first_block_s if last is None else last[1] * frames / last[0]
        if not report.budget.allows(estimate):
            report.check(name, SKIPPED, f"budget: about {estimate:.0f} s needed, {report.budget.left:.0f} s left")
            continue
        started = time.perf_counter()
        inputs = video_inputs(model.config, frames, side, device, dtype)
        report.log(f"efficiency: {model_label}, {frames} frames of {side} px, {inputs['input_ids'].shape[1]} prompt "
                   f"tokens, {len(methods)} methods x ({warmup} warm-up + {runs}) runs, {new_tokens} new tokens")
        samples: dict[str, list[dict[str, Any]]] = {label: [] for label, _, _ in methods}
        failed: dict[str, str] = {}
        for round_ in range(warmup + runs):
            for label, method, params in methods:
                if label in failed:
                    continue
                try:
                    sample = run_once(model, inputs, method, params, new_tokens)
                except Exception as error:  # noqa: BLE001 - that method's check fails; the others go on
                    failed[label] = f"{type(error).__name__}: {error}"
                    report.log(f"efficiency: {label} failed: {failed[label]}")
                    continue
                if round_ >= warmup:
                    samples[label].append(sample)
        del inputs
        if device.type == "cuda":
            torch.cuda.empty_cache()
        rows = _rows(model_label, model.config.model_type, frames, side, methods, samples, paper, device, dtype,
                     new_tokens, warmup)
        table.rows.extend(rows)
        table.markdown = markdown(table.rows, new_tokens)
        last = (frames, time.perf_counter() - started)
        problems = [f"{label}: {why}" for label, why in failed.items()]
        problems += [f"{r['method']}: non-finite numbers" for r in rows if not _finite(r)]
        summary = _summary(rows)
        report.check(name, FAIL if problems else PASS, "; ".join(problems) if problems else summary)
        report.flush()


_NUMBERS = ("vision_ms", "selection_ms", "prefill_ms", "decode_ms", "total_ms", "peak_memory_mib", "items_per_s")


def _finite(row: dict[str, Any]) -> bool:
    return all(isinstance(row[k], (int, float)) and math.isfinite(row[k]) for k in _NUMBERS)


def _rows(model_label: str, model_type: str, frames: int, side: int,
          methods: tuple[tuple[str, str, dict[str, Any]], ...], samples: dict[str, list[dict[str, Any]]],
          paper: dict[str, dict[str, float]], device: torch.device, dtype: torch.dtype, new_tokens: int,
          warmup: int) -> list[dict[str, Any]]:
    family = family_of(model_type).display
    rows = []
    for label, method, params in methods:
        got = samples[label]
        if not got:
            continue
        total = _median(got, "total_s")
        peak = _median(got, "peak_memory_bytes")
        rows.append({
            "model": model_label, "family": family, "frames": frames, "side": side, "method": label,
            "registry_method": method,
            "variant": params.get("variant", "paper"), "ratio": 1.0 if method == "vanilla" else RATIO,
            "video_tokens": got[0]["video_tokens"], "kept_tokens": got[0]["kept_tokens"],
            "final_tokens": got[0]["final_tokens"], "prompt_tokens": got[0]["prompt_tokens"],
            "kept_prompt_tokens": got[0]["kept_prompt_tokens"],
            "vision_ms": _median(got, "vision_s") * 1e3, "selection_ms": _median(got, "selection_s") * 1e3,
            "prefill_ms": _median(got, "prefill_s") * 1e3, "ttft_ms": _median(got, "ttft_s") * 1e3,
            "decode_ms": _median(got, "decode_s") * 1e3, "decode_steps": got[0]["decode_steps"],
            "total_ms": total * 1e3, "peak_memory_mib": peak / 2**20, "items_per_s": 1.0 / total if total else math.nan,
            "vision_tflops": _median(got, "vision_tflops"), "llm_tflops": _median(got, "llm_tflops"),
            "new_tokens": new_tokens, "runs": len(got), "warmup": warmup,
            "same_tokens_runs": sum(g["tokens"] == got[0]["tokens"] for g in got),
            "device": str(device), "dtype": str(dtype).removeprefix("torch."), "timer": got[0]["timer"],
            "memory_source": got[0]["memory_source"],
        })
    base = next((r for r in rows if r["registry_method"] == "vanilla"), None)
    for row in rows:
        for key, column in (("prefill", "prefill_ms"), ("ttft", "ttft_ms"), ("memory", "peak_memory_mib"),
                            ("throughput", "items_per_s")):
            row[f"{key}_vs_vanilla"] = row[column] / base[column] if base and base[column] else math.nan
        published = paper.get(row["registry_method"], {}) if frames == PAPER_FRAMES else {}
        for key in PAPER_METRICS:
            row[f"paper_{key}_vs_vanilla"] = published.get(key, math.nan)
    return rows


def _down(ratio: float) -> str:
    """A ratio to vanilla as the paper annotates it: ``↓51.2%`` (or ``↑`` for more)."""
    if ratio is None or not math.isfinite(ratio):
        return "–"
    change = (1 - ratio) * 100
    return f"↓{change:.1f}%" if change >= 0 else f"↑{-change:.1f}%"


def _times(ratio: float) -> str:
    return "–" if ratio is None or not math.isfinite(ratio) else f"{ratio:.2f}×"


def _summary(rows: list[dict[str, Any]]) -> str:
    parts = []
    for row in rows:
        if row["registry_method"] == "vanilla":
            parts.append(f"vanilla total {row['total_ms']:.0f} ms, peak {row['peak_memory_mib']:.0f} MiB")
        elif row["registry_method"] == "vcast":
            paper = ""
            if math.isfinite(row["paper_prefill_vs_vanilla"]):
                paper = (f" (paper: {_down(row['paper_prefill_vs_vanilla'])}, {_down(row['paper_memory_vs_vanilla'])}, "
                         f"{_times(row['paper_throughput_vs_vanilla'])})")
            parts.append(f"{row['method']}: prefill {_down(row['prefill_vs_vanilla'])} (TTFT "
                         f"{_down(row['ttft_vs_vanilla'])}), memory {_down(row['memory_vs_vanilla'])}, throughput "
                         f"{_times(row['throughput_vs_vanilla'])}{paper}")
    steady = [row["method"] for row in rows if row["same_tokens_runs"] == row["runs"]]
    parts.append(f"the same new tokens in every run for {len(steady)} of {len(rows)} methods")
    return "; ".join(parts)


def markdown(rows: list[dict[str, Any]], new_tokens: int) -> str:
    """Per model and frame count, the measured table; then the ratios to vanilla beside the paper's."""
    if not rows:
        return "No efficiency row was measured.\n"
    first = rows[0]
    text = [f"# Efficiency ({first['device']}, {first['dtype']}, r = {RATIO}, batch 1)", "",
            f"Random weights made on the device (the published configs; in CPU mode their tiny versions, as "
            f"labelled); medians of {first['runs']} runs after {first['warmup']} warm-up, "
            f"{new_tokens} new tokens each (min_new_tokens = max_new_tokens); timer {first['timer']}, memory "
            f"{first['memory_source']}. TTFT = vision + selection + LLM prefill; total = wall time of generate. "
            f"The CSV's same_tokens_runs counts the runs whose new tokens equal the first run's (identical "
            f"inputs: on CUDA, bf16 generate is not bitwise deterministic from run to run).", ""]
    header = ["method", "kept / video tokens", "vision ms", "selection ms", "prefill ms", "TTFT ms",
              f"decode ms ({new_tokens - 1} steps)", "total ms", "peak MiB", "items/s", "prefill TFLOPs (vision + LLM)",
              "prefill", "TTFT", "memory", "throughput"]
    blocks: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in rows:
        blocks.setdefault((row["model"], row["frames"]), []).append(row)
    for (model, frames), block in blocks.items():
        text += [f"## {model}, {frames} frames of {block[0]['side']} px", ""]
        text.append(markdown_table(header, [[
            r["method"], f"{r['kept_tokens']} / {r['video_tokens']}", fmt(r["vision_ms"]), fmt(r["selection_ms"], 2),
            fmt(r["prefill_ms"]), fmt(r["ttft_ms"]), fmt(r["decode_ms"]), fmt(r["total_ms"]),
            fmt(r["peak_memory_mib"], 0), fmt(r["items_per_s"], 3),
            f"{fmt(r['vision_tflops'], 2)} + {fmt(r['llm_tflops'], 2)}", _down(r["prefill_vs_vanilla"]),
            _down(r["ttft_vs_vanilla"]), _down(r["memory_vs_vanilla"]), _times(r["throughput_vs_vanilla"]),
        ] for r in block]))
    compared = [r for r in rows if math.isfinite(r["paper_prefill_vs_vanilla"])]
    if compared:
        text += [f"## Against the paper ({PAPER_TABLE}: {PAPER_MODEL}, {PAPER_FRAMES} frames; ours: "
                 f"{compared[0]['model']})", "",
                 "Ratios to vanilla; the paper's on real videos and weights (its V-CAST row stands for both variants).",
                 ""]
        text.append(markdown_table(
            ["method", "LLM prefill (ours)", "TTFT (ours)", "prefill (paper)", "memory (ours)", "memory (paper)",
             "throughput (ours)", "throughput (paper)"],
            [[r["method"], _down(r["prefill_vs_vanilla"]), _down(r["ttft_vs_vanilla"]),
              _down(r["paper_prefill_vs_vanilla"]), _down(r["memory_vs_vanilla"]), _down(r["paper_memory_vs_vanilla"]),
              _times(r["throughput_vs_vanilla"]), _times(r["paper_throughput_vs_vanilla"])] for r in compared]))
    if any(r["family"] == "LLaVA-OneVision" for r in rows):
        text += ["The paper gives fig:llava_ov_efficiency as a figure only (no numbers in paper_tables.csv): compare "
                 "the LLaVA-OneVision ratios above with it.", ""]
    return "\n".join(text) + "\n"
