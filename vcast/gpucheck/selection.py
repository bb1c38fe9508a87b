"""Selection time of every compressor at several video lengths, beside the LLM prefill it saves.

Each method runs :func:`vcast.select` on the same ``[T, P, D]`` tokens (a video-like clip,
:func:`make_clip` ``"scenes"``; stand-in vision-encoder inputs where a method declares them), on
the run's device; the time is the median wall time of the whole call, the device synchronised
before and after (``scripts/bench_baselines.py`` uses the same functions). In-LLM methods select
inside the language model (their cost is part of its prefill: see the efficiency table), and input
methods select nothing, so neither is here.

The prefill saved is measured on the efficiency table's model at the same frame count: vanilla's
LLM prefill minus V-CAST's at the same ratio (``handle.stats.prefill_s``, one prefill forward as
``generate`` runs it). Every method here keeps the same share of the tokens, so that saving is the
same for all of them; the table shows each method's selection time as a share of it.
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch

import vcast
from vcast.gpucheck.models import video_inputs
from vcast.gpucheck.results import FAIL, PASS, SKIPPED, Report, Table, fmt, markdown_table
from vcast.models.vision_probe import stand_in_inputs
from vcast.registry import is_token_method, method_inputs
from vcast.synthetic_features import synthetic_video_features

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
CLIPS = ("noise", "scenes")
SCENE_CUTS = (0.30, 0.55, 0.80)  # clip "scenes": where the scenes change, as fractions of T
KEY_DIM = 72  # the stand-in vision keys' width (the SigLIP / Qwen3-VL towers' head size)


def timed(call: Callable[[], Any], device: str, repeats: int, warmup: int) -> tuple[float, Any]:
    """(median seconds of ``repeats`` calls after ``warmup``, the last result); CUDA synchronised."""
    for _ in range(warmup):
        call()
    seconds, result = [], None
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        result = call()
        if device == "cuda":
            torch.cuda.synchronize()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), result


def make_clip(clip: str, frames: int, tokens: int, dim: int) -> torch.Tensor:
    """``[T, P, D]`` float32 tokens of ``clip`` (seed 0): ``noise`` (i.i.d. Gaussian: no two frames
    alike) or ``scenes`` (:func:`vcast.synthetic_features.synthetic_video_features`: four scenes cut
    at 30%, 55% and 80% of the frames, slow drift inside a scene, an event at 10%)."""
    if clip == "noise":
        return torch.randn(frames, tokens, dim, generator=torch.Generator().manual_seed(0))
    cuts = tuple(sorted({max(1, round(frames * f)) for f in SCENE_CUTS} - {frames})) if frames > 1 else ()
    return synthetic_video_features(frames, tokens, dim, scene_cuts=cuts, event_start=frames // 10,
                                    event_length=max(1, frames // 32), seed=0).features


def token_methods() -> list[str]:
    """Every compressor ``vcast.select`` runs (not vanilla, not in-LLM, not input), V-CAST first."""
    methods = [m for m in vcast.available_methods() if m != "vanilla" and is_token_method(m)]
    return ["vcast", *[m for m in methods if m != "vcast"]]


def time_methods(methods: list[str], num_frames: int, side: int, dim: int, ratio: float, dtype: str, device: str,
                 clip: str, repeats: int, warmup: int) -> dict[str, tuple[float, int, bool]]:
    """``{method: (median seconds, tokens kept, merges)}`` of each method on one ``[num_frames,
    side * side, dim]`` clip of ``dtype`` on ``device`` (the 2x2 methods at their own 0.25)."""
    frames = make_clip(clip, num_frames, side * side, dim).to(device, DTYPES[dtype])
    results = {}
    for method in methods:
        method_ratio = 0.25 if method.endswith("_2x2") else ratio  # these fix their own ratio
        extra = {name: value.to(device) if isinstance(value, torch.Tensor) else value
                 for name, value in stand_in_inputs(method_inputs(method), num_frames, (side, side), KEY_DIM,
                                                    torch.Generator().manual_seed(1)).items()}
        seconds, selection = timed(lambda: vcast.select(frames, method_ratio, method=method, **extra), device,
                                   repeats, warmup)
        results[method] = (seconds, int(selection.keep.numel()), selection.merges)
    return results


def prefill_saved(model: Any, frame_counts: tuple[int, ...], side: int, ratio: float, warmup: int,
                  repeats: int) -> dict[int, tuple[float, float]]:
    """``{frames: (vanilla's LLM prefill s, V-CAST's)}``: medians, the two interleaved after warm-up."""
    from vcast.gpucheck.memory import prefill

    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    out = {}
    with torch.no_grad():
        for frames in frame_counts:
            inputs = video_inputs(model.config, frames, side, device, dtype)
            times: dict[str, list[float]] = {"vanilla": [], "vcast": []}
            for round_ in range(warmup + repeats):
                for method in times:
                    llm_s, _, _, _ = prefill(model, inputs, method, ratio, "rows")
                    if round_ >= warmup:
                        times[method].append(llm_s)
            out[frames] = (statistics.median(times["vanilla"]), statistics.median(times["vcast"]))
            del inputs
    return out


def run(report: Report, device: torch.device, dtype: torch.dtype, frame_counts: tuple[int, ...],
        temporal_patch: int, grid: int, dim: int, warmup: int, repeats: int, model: Any = None,
        side: int = 0, ratio: float = 0.25, label: str = "", estimate_s: float = 0.0) -> None:
    """Selection times at ``frame_counts`` video frames (``T = frames / temporal_patch`` units of
    ``grid x grid`` tokens of width ``dim``), and, given ``model``, the prefill each count saves;
    nothing when ``estimate_s`` does not fit in the report's budget."""
    if not report.budget.allows(estimate_s):
        report.check("selection", SKIPPED, f"budget: about {estimate_s:.0f} s needed, {report.budget.left:.0f} s left")
        return
    methods = token_methods()
    dtype_name = str(dtype).removeprefix("torch.")
    runs: dict[int, dict[str, tuple[float, int, bool]]] = {}
    for frames in frame_counts:
        steps = frames // temporal_patch
        report.log(f"selection: {len(methods)} methods on [{steps}, {grid * grid}, {dim}] {dtype_name} "
                   f"({frames} frames) on {device}")
        try:
            runs[frames] = time_methods(methods, steps, grid, dim, ratio, dtype_name, device.type, "scenes", repeats,
                                        warmup)
        except Exception as error:  # noqa: BLE001
            report.check(f"selection/{frames}-frames", FAIL, f"{type(error).__name__}: {error}")
            continue
        report.check(f"selection/{frames}-frames", PASS,
                     f"{len(methods)} methods timed; V-CAST {runs[frames]['vcast'][0] * 1e3:.2f} ms")
    saved: dict[int, tuple[float, float]] = {}
    if model is not None and runs:
        report.log(f"selection: prefill saved, vanilla vs V-CAST on {label} at {', '.join(map(str, runs))} frames")
        try:
            saved = prefill_saved(model, tuple(runs), side, ratio, warmup, repeats)
            report.check("selection/prefill-saved", PASS, "; ".join(
                f"{f} frames: {(v - c) * 1e3:.1f} ms ({v * 1e3:.1f} -> {c * 1e3:.1f})" for f, (v, c) in saved.items()))
        except Exception as error:  # noqa: BLE001
            report.check("selection/prefill-saved", FAIL, f"{type(error).__name__}: {error}")
    rows = []
    for frames, results in runs.items():
        vanilla_s, vcast_s = saved.get(frames, (float("nan"), float("nan")))
        for method, (seconds, kept, merges) in results.items():
            rows.append({"frames": frames, "T": frames // temporal_patch, "P": grid * grid, "D": dim,
                         "method": method, "kind": "merge" if merges else "prune", "kept": kept,
                         "selection_ms": seconds * 1e3, "vanilla_prefill_ms": vanilla_s * 1e3,
                         "vcast_prefill_ms": vcast_s * 1e3, "prefill_saved_ms": (vanilla_s - vcast_s) * 1e3,
                         "share_of_saving": seconds / (vanilla_s - vcast_s) if vanilla_s > vcast_s else float("nan"),
                         "device": str(device), "dtype": dtype_name, "repeats": repeats, "warmup": warmup})
    report.tables["selection"] = Table(rows, _markdown(rows, list(runs), saved, methods, label, device, dtype_name,
                                                       repeats, warmup, ratio))
    report.flush()


def _markdown(rows: list[dict[str, Any]], frame_counts: list[int], saved: dict[int, tuple[float, float]],
              methods: list[str], label: str, device: torch.device, dtype: str, repeats: int, warmup: int,
              ratio: float) -> str:
    if not rows:
        return "No selection time was measured.\n"
    first = rows[0]
    value = {(r["frames"], r["method"]): r for r in rows}
    header = ["method", "kind", *[f"ms @{f}" for f in frame_counts], *[f"% of saved @{f}" for f in frame_counts]]
    table = []
    for method in methods:
        cells = [value.get((f, method)) for f in frame_counts]
        kind = next((c["kind"] for c in cells if c), "")
        table.append([method, kind, *[fmt(c["selection_ms"], 2) if c else "–" for c in cells],
                      *[fmt(100 * c["share_of_saving"], 1) if c else "–" for c in cells]])
    text = [f"# Selection time (r = {ratio}, {device}, {dtype})", "",
            f"`vcast.select` on [T, {first['P']}, {first['D']}] tokens, T = frames / "
            f"{first['frames'] // first['T']} (a video-like clip); median of {repeats} after {warmup} warm-up, "
            "synchronised wall time.", ""]
    if saved:
        text += [f"LLM prefill on {label}, vanilla -> V-CAST (the same for every method here, all keeping "
                 "the same share): " + "; ".join(f"{f} frames {v * 1e3:.1f} -> {c * 1e3:.1f} ms (saves "
                                                 f"{(v - c) * 1e3:.1f} ms)" for f, (v, c) in saved.items()), ""]
    return "\n".join(text) + "\n" + markdown_table(header, table)
