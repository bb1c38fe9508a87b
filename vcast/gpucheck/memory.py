"""Memory: the eager-score memory guard on the run's device, and the peak memory of in-LLM methods
with our attention rows against vanilla's.

- ``memory/eager-guard``: :func:`vcast.models.eager_memory.free_memory_bytes` reads the device
  (on CUDA: the driver's free memory plus what PyTorch's allocator holds unused, at most the
  card's memory), and a real eager-attention model given a 2^18-token prompt under FastV with
  ``scores="eager"`` is refused before its first decoder layer with a ValueError naming the
  estimate and the device's free memory (terabytes of attention: nothing of that size is
  allocated), while ``scores="rows"`` on a short prompt runs.
- ``memory/<method>``: FastV and PDrop (with its own ratio λ = 0.5: on these 3- and 4-layer
  models its default cannot reach r = 0.25) with our recomputed attention rows (``scores="rows"``,
  the model on SDPA) at 64 frames, one prefill forward each as ``generate`` runs it (vision encoder
  included), interleaved with vanilla's after a warm-up: the median peak above the memory in use
  before the call must be at most 1.05 x vanilla's (``scripts/bench_memory.py`` prints the same
  with more variants). On the CPU the peak resident set of a tiny model is mostly noise, so there
  the numbers are reported and the 1.05 bound is not judged.
"""

from __future__ import annotations

import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

import torch

import vcast
from vcast.gpucheck.models import video_inputs
from vcast.gpucheck.results import FAIL, PASS, SKIPPED, Report
from vcast.gpucheck.smoke import LLM_PARAMS
from vcast.models.eager_memory import eager_attention_bytes, free_memory_bytes
from vcast.models.meters import PeakMemory, measure
from vcast.registry import method_params
from vcast.tiny_checkpoints import build_tiny_checkpoint

PEAK_BOUND = 1.05
FRAMES = 64
METHODS = ("fastv", "pdrop")


def prefill(model: Any, inputs: Any, method: str, ratio: float, scores: str,
            **params: Any) -> tuple[float, float, int, Any]:
    """(LLM prefill seconds, whole-call seconds, peak bytes above the memory in use before, stats) of
    one prefill forward (``use_cache=True``, last-token logits, as ``generate`` does) through
    ``attach``; ``scores`` goes to the methods that take it (vanilla runs at ratio 1), ``params``
    to the method."""
    params = {**params, "scores": scores} if "scores" in method_params(method) else params
    handle = vcast.models.attach(model, method, 1.0 if method == "vanilla" else ratio, **params)
    try:
        device = next(model.parameters()).device
        seconds, peak, _ = measure(lambda: model(**inputs, use_cache=True, logits_to_keep=1).logits, device,
                                   PeakMemory(device))
        stats = handle.stats
    finally:
        handle.detach()
    return stats.prefill_s, seconds, peak, stats


def _load(folder: Path, device: torch.device, dtype: torch.dtype, attention: str) -> Any:
    from transformers import AutoModelForImageTextToText

    return AutoModelForImageTextToText.from_pretrained(folder, dtype=dtype, attn_implementation=attention) \
        .to(device).eval()


def eager_guard(report: Report, folder: Path, device: torch.device, dtype: torch.dtype) -> None:
    """``memory/eager-guard`` on ``folder``'s (tiny Qwen3-VL) model."""
    free = free_memory_bytes(device)
    limit = torch.cuda.get_device_properties(device).total_memory if device.type == "cuda" else None
    if free is None or free <= 0 or (limit is not None and free > limit):
        report.check("memory/eager-guard", FAIL, f"free memory on {device} read as {free} (card: {limit})")
        return
    model = _load(folder, device, dtype, "eager")
    length = 2**18
    needed = eager_attention_bytes(1, model.config.text_config.num_attention_heads, length, dtype)
    input_ids = torch.full((1, length), 65, dtype=torch.long, device=device)
    try:
        with vcast.models.attach(model, "fastv", 0.25, layer=1, scores="eager"), torch.no_grad():
            model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids))
        report.check("memory/eager-guard", FAIL, f"a {length}-token eager prefill ({needed / 2**30:.0f} GiB of "
                                                 "attention per layer) was not refused")
        return
    except ValueError as error:
        message = str(error)
    expected = (f"about {needed / 2**30:.2f} GiB per layer", f"free on {device}")
    if not all(part in message for part in expected):
        report.check("memory/eager-guard", FAIL, f"refused, but the message lacks {expected}: {message}")
        return
    short = input_ids[:, :16]
    with vcast.models.attach(model, "fastv", 0.25, layer=1, scores="rows"), torch.no_grad():
        model(input_ids=short, attention_mask=torch.ones_like(short))
    report.check("memory/eager-guard", PASS,
                 f"{device}: {free / 2**30:.1f} GiB free read; a {length}-token eager prefill "
                 f"({needed / 2**30:.0f} GiB per layer) refused before the first layer; rows on 16 tokens ran")


def peak_vs_vanilla(report: Report, folder: Path, device: torch.device, dtype: torch.dtype, side: int,
                    warmup: int, repeats: int, ratio: float = 0.25) -> None:
    """``memory/<method>`` for :data:`METHODS` at :data:`FRAMES` frames of ``side`` px."""
    model = _load(folder, device, dtype, "sdpa")
    inputs = video_inputs(model.config, FRAMES, side, device, dtype)
    variants = ("vanilla", *METHODS)
    peaks: dict[str, list[int]] = {m: [] for m in variants}
    described: dict[str, Any] = {}
    failed: dict[str, str] = {}
    with torch.no_grad():
        for round_ in range(warmup + repeats):
            for method in variants:
                if method in failed:
                    continue
                try:
                    _, _, peak, stats = prefill(model, inputs, method, ratio, "rows", **LLM_PARAMS.get(method, {}))
                except Exception as error:  # noqa: BLE001 - reported as this method's check
                    failed[method] = f"{type(error).__name__}: {error}"
                    continue
                described[method] = stats
                if round_ >= warmup:
                    peaks[method].append(peak)
    base = statistics.median(peaks["vanilla"]) if peaks["vanilla"] else None
    video = described["vanilla"].total_video_tokens if "vanilla" in described else "?"
    unit = "MiB above the memory in use" if device.type == "cuda" else "MiB of peak RSS above the start"
    for method in METHODS:
        name = f"memory/{method}"
        if method in failed or "vanilla" in failed:
            report.check(name, FAIL, failed.get(method) or f"vanilla failed: {failed['vanilla']}")
            continue
        peak = statistics.median(peaks[method])
        ratio_ = peak / base if base else float("nan")
        stats = described[method]
        detail = (f"{FRAMES} frames of {side} px ({video} video tokens), scores=rows: peak {peak / 2**20:.1f} vs "
                  f"vanilla {base / 2**20:.1f} {unit} = {ratio_:.3f} x (bound {PEAK_BOUND}); last layer sees "
                  f"{stats.final_video_tokens} video tokens; medians of {repeats} after {warmup} warm-up")
        if device.type != "cuda":
            report.check(name, SKIPPED, f"CPU: bound not judged (peak RSS at tiny size is noise); {detail}")
        else:
            report.check(name, PASS if ratio_ <= PEAK_BOUND else FAIL, detail)


def run(report: Report, device: torch.device, dtype: torch.dtype, size: str, side: int, warmup: int,
        repeats: int) -> None:
    """Both checks: the guard on the tiny Qwen3-VL, the peaks on the ``size`` one (``bench`` on a GPU)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory(prefix="vcast-gpucheck-") as scratch:
        tiny = build_tiny_checkpoint("qwen3_vl", "tiny", Path(scratch) / "tiny", seed=0)
        try:
            eager_guard(report, tiny, device, dtype)
        except Exception as error:  # noqa: BLE001
            report.check("memory/eager-guard", FAIL, f"{type(error).__name__}: {error}")
        report.flush()
        folder = tiny if size == "tiny" else build_tiny_checkpoint("qwen3_vl", size, Path(scratch) / size, seed=0)
        report.log(f"memory: qwen3_vl {size}, {FRAMES} frames of {side} px, vanilla vs {', '.join(METHODS)}")
        peak_vs_vanilla(report, folder, device, dtype, side, warmup, repeats)
    if device.type == "cuda":
        torch.cuda.empty_cache()
    report.flush()
