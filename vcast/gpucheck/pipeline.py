"""Where an evaluation's total time goes, and how much of the video reading prefetching hides.

The paper's efficiency table gives Qwen3-VL-8B a total of 1440 s against 524 s of prefill and
generation: the rest is reading and preprocessing the videos, serial with the model. This part
runs the same loop the lmms-eval plugins run, on the efficiency table's random-weight model:
for each item, read the video with the plugins' reader (:func:`vcast.eval.video.read_qwen_video`,
decord), resize it as they do (:func:`vcast.eval.video.qwen_resize`, the paper config's pixel
bounds), patchify it with transformers' ``Qwen3VLVideoProcessor``, then ``generate`` a fixed number
of new tokens under ``attach``. It runs once serially (``prefetch=0``) and once with the plugins'
:class:`vcast.eval.prefetch.Prefetcher` (``prefetch=2``), for vanilla and V-CAST, and records the
wall time of the loop, the summed preparation (read + resize + patchify) and the summed model
time (host-to-device copy + ``generate``, synchronised). ``total / max(prepare, model)`` is 1.0
when one hides the other completely, ``total / (prepare + model)`` is 1.0 when they run one after
the other.

Two things differ from a benchmark run, both said in docs/gpu.md: the prompt's text tokens are
stand-ins (the random model's vocabulary has no tokenizer here; the video tokens and their grid
are the processor's), and the clips are written here (mp4v, :func:`write_clips`), not a
benchmark's. lmms-eval itself is not on a bare GPU machine: the plugins' own loop is tested on the
CPU to give identical samples with and without prefetching (tests/test_eval_prefetch.py).

Needs decord, OpenCV (to write the clips) and qwen_vl_utils; without them the part is skipped and
says which is missing.
"""

from __future__ import annotations

import importlib.util
import math
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

import vcast
from vcast.gpucheck.efficiency import synchronize
from vcast.gpucheck.models import merged_patch_prompt
from vcast.gpucheck.results import FAIL, PASS, SKIPPED, Report, Table, fmt, markdown_table

RATIO = 0.25
DEPTHS = (0, 2)  # serial, then the plugins' default prefetch
METHODS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("vanilla", "vanilla", {}),
    ("vcast (official)", "vcast", {"variant": "official"}),
)
NEEDS = {"decord": "decord", "cv2": "opencv-python-headless", "qwen_vl_utils": "qwen-vl-utils"}
# The paper config's pixel bounds (configs/model/qwen3vl_8b.yaml): a 1280 x 720 frame is read at 640 x 352.
MIN_PIXELS, MAX_PIXELS = 200704, 12845056


@dataclass(frozen=True)
class Clips:
    """The clips the loop reads: ``count`` mp4 files of ``seconds`` at ``fps``, ``width`` x
    ``height``, each read twice (``items`` = 2 x ``count``), ``frames`` frames sampled per item."""

    count: int
    width: int
    height: int
    seconds: float
    fps: int
    frames: int

    @property
    def items(self) -> int:
        return 2 * self.count


GPU_CLIPS = Clips(count=6, width=1280, height=720, seconds=20.0, fps=30, frames=32)
CPU_CLIPS = Clips(count=2, width=160, height=96, seconds=2.0, fps=12, frames=8)


def missing_modules() -> list[str]:
    """The packages this part needs and cannot import, by their pip names."""
    return [package for module, package in NEEDS.items() if importlib.util.find_spec(module) is None]


def write_clips(folder: Path, clips: Clips, seed: int = 0) -> list[Path]:
    """``clips.count`` mp4 files (OpenCV's mp4v) in ``folder``: a textured background that pans, a
    square that moves, and a scene cut half-way (a new texture), so consecutive frames differ as in
    a video and the decoder does real work."""
    import cv2

    frames = max(2, round(clips.seconds * clips.fps))

    def write(index: int) -> Path:
        rng = np.random.default_rng(seed + index)
        textures = [rng.integers(0, 256, (clips.height // 8 + 1, clips.width // 8 + 1, 3), dtype=np.uint8)
                    for _ in range(2)]
        textures = [cv2.resize(t, (clips.width + 64, clips.height + 64), interpolation=cv2.INTER_LINEAR)
                    for t in textures]
        path = folder / f"clip{index}.mp4"
        writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), clips.fps, (clips.width, clips.height))
        if not writer.isOpened():
            raise RuntimeError(f"OpenCV cannot write mp4v to {path}")
        try:
            for t in range(frames):
                texture = textures[0 if t < frames // 2 else 1]
                shift = (2 * t) % 64
                frame = np.ascontiguousarray(texture[shift:shift + clips.height, shift:shift + clips.width])
                side = max(4, clips.height // 6)
                x = (7 * t) % max(1, clips.width - side)
                y = (3 * t) % max(1, clips.height - side)
                frame[y:y + side, x:x + side] = (255, 255, 255)
                writer.write(frame)
        finally:
            writer.release()
        return path

    # One thread per clip: OpenCV's encoder releases the GIL, and each clip's frames are its own.
    with ThreadPoolExecutor(max_workers=min(clips.count, os.cpu_count() or 1)) as pool:
        return list(pool.map(write, range(clips.count)))


def make_prepare(config: Any, frames: int) -> Callable[[Path], dict[str, torch.Tensor]]:
    """The per-item work the plugins do before the model, on the CPU: read ``frames`` frames,
    resize, patchify, lay out the prompt (:func:`vcast.gpucheck.models.merged_patch_prompt`, Qwen3-VL's timestamped layout)."""
    from transformers import Qwen3VLVideoProcessor

    from vcast.eval.video import qwen_resize, read_qwen_video

    vision = config.vision_config
    processor = Qwen3VLVideoProcessor(patch_size=vision.patch_size, temporal_patch_size=vision.temporal_patch_size,
                                      merge_size=vision.spatial_merge_size)

    def prepare(path: Path) -> dict[str, torch.Tensor]:
        decoded = read_qwen_video(str(path), frames)
        resized = qwen_resize(decoded.frames, MIN_PIXELS, MAX_PIXELS, patch_size=vision.patch_size)
        patches = processor(videos=[resized], do_resize=False, do_sample_frames=False, return_tensors="pt")
        return merged_patch_prompt(config, patches["video_grid_thw"], patches["pixel_values_videos"],
                                   torch.Generator().manual_seed(0), timestamps=True)

    return prepare


def run_loop(model: Any, paths: list[Path], prepare: Callable[[Path], dict[str, torch.Tensor]], method: str,
             params: dict[str, Any], depth: int, new_tokens: int) -> dict[str, Any]:
    """One pass over ``paths``: prepared through :class:`vcast.eval.prefetch.Prefetcher` at ``depth``,
    each item's ``generate`` run here. Returns the loop's wall time, the summed preparation, waits
    and model times, and per item the prepared inputs (CPU), the kept token indices and the new
    tokens. Reading the kept indices is not timed (``total_s`` leaves it out)."""
    from vcast.eval.prefetch import Prefetcher

    device = next(model.parameters()).device
    dtype = next(model.parameters()).dtype
    handle = vcast.models.attach(model, method, 1.0 if method == "vanilla" else RATIO, **params)
    prepare_s = wait_s = model_s = untimed_s = 0.0
    tokens: list[list[int]] = []
    prepared_inputs: list[dict[str, torch.Tensor]] = []
    keeps: list[list[torch.Tensor]] = []
    try:
        synchronize(device)
        start = time.perf_counter()
        with Prefetcher(paths, prepare, depth, name="vcast-gpucheck-prefetch") as prepared:
            for item in prepared:
                prepare_s += item.prepare_s
                wait_s += item.wait_s
                begin = time.perf_counter()
                inputs = {k: v.to(device=device, dtype=dtype if v.is_floating_point() else v.dtype)
                          for k, v in item.value.items()}
                with torch.no_grad():
                    out = model.generate(**inputs, max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                         do_sample=False)
                synchronize(device)
                model_s += time.perf_counter() - begin
                begin = time.perf_counter()
                tokens.append(out[0, inputs["input_ids"].shape[1]:].tolist())
                prepared_inputs.append(item.value)
                keeps.append([segment.keep for segment in handle.stats.segments])
                untimed_s += time.perf_counter() - begin
        total = time.perf_counter() - start - untimed_s
        video_tokens, kept = handle.stats.total_video_tokens, handle.stats.kept_video_tokens
    finally:
        handle.detach()
    return {"total_s": total, "prepare_s": prepare_s, "wait_s": wait_s, "model_s": model_s, "tokens": tokens,
            "inputs": prepared_inputs, "keeps": keeps, "video_tokens": video_tokens, "kept_tokens": kept}


def same_items(a: dict[str, Any], b: dict[str, Any]) -> tuple[bool, bool, int]:
    """Whether two passes prepared bit-identical inputs and kept the same tokens for every item,
    and on how many items their new tokens agree."""
    if len(a["inputs"]) != len(b["inputs"]):
        return False, False, 0
    inputs = all(x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)
                 for x, y in zip(a["inputs"], b["inputs"]))
    keeps = all(len(x) == len(y) and all(torch.equal(i, j) for i, j in zip(x, y))
                for x, y in zip(a["keeps"], b["keeps"]))
    return inputs, keeps, sum(x == y for x, y in zip(a["tokens"], b["tokens"]))


def run(report: Report, model: Any, model_label: str, clips: Clips, new_tokens: int, estimate_s: float) -> None:
    """The ``pipeline`` part: both methods, serial then prefetched, on clips written to a temporary
    folder, and the ``pipeline`` table. One check per method: prefetching gives every item the
    same inputs (bit for bit) and the same kept tokens; on the CPU also the same new tokens. On
    CUDA the new tokens are only counted: bf16 ``generate`` there is not bitwise deterministic
    from run to run (the efficiency table's ``same tokens`` column shows it on identical
    inputs), so a differing token says nothing about prefetching."""
    missing = missing_modules()
    if missing:
        report.check("pipeline", SKIPPED, f"needs {', '.join(missing)} (not installed here; docs/gpu.md says how to "
                                          "carry them to a bare GPU machine)")
        return
    if not report.budget.allows(estimate_s):
        report.check("pipeline", SKIPPED, f"budget: about {estimate_s:.0f} s needed, {report.budget.left:.0f} s left")
        return
    device = next(model.parameters()).device
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="vcast-gpucheck-clips-") as folder:
        started = time.perf_counter()
        paths = write_clips(Path(folder), clips)
        written = time.perf_counter() - started
        items = paths * 2
        prepare = make_prepare(model.config, clips.frames)
        report.log(f"pipeline: {clips.count} clips of {clips.seconds:g} s, {clips.width}x{clips.height} at "
                   f"{clips.fps} fps written in {written:.1f} s; {len(items)} items of {clips.frames} frames, "
                   f"prefetch {' vs '.join(map(str, DEPTHS))}, {new_tokens} new tokens, {model_label}")
        run_loop(model, items[:1], prepare, "vanilla", {}, 0, new_tokens)  # warm-up: decoder, kernels, caches
        for label, method, params in METHODS:
            results = {depth: run_loop(model, items, prepare, method, params, depth, new_tokens) for depth in DEPTHS}
            serial = results[DEPTHS[0]]
            for depth, result in results.items():
                rows.append(_row(model_label, device, clips, label, depth, len(items), new_tokens, result, serial))
            same_inputs, same_keeps, same_tokens = same_items(serial, results[DEPTHS[-1]])
            tokens_required = device.type != "cuda"
            last = rows[-1]
            last["same_tokens_items"] = same_tokens
            problems = [what for what, ok in (("inputs differ", same_inputs), ("kept tokens differ", same_keeps),
                                              ("new tokens differ", same_tokens == len(items) or not tokens_required))
                        if not ok]
            detail = (f"{len(items)} items: serial {serial['total_s']:.2f} s, prefetch={DEPTHS[-1]} "
                      f"{last['total_s']:.2f} s ({last['speedup']:.2f}x); prepare {last['prepare_s']:.2f} s, model "
                      f"{last['model_s']:.2f} s; total / max(prepare, model) {last['total_vs_max']:.2f}; "
                      f"new tokens equal on {same_tokens}/{len(items)} items")
            report.check(f"pipeline/{label}", FAIL if problems else PASS,
                         f"{', '.join(problems)} between prefetch depths; {detail}" if problems
                         else f"same inputs and kept tokens; {detail}")
            report.tables["pipeline"] = Table(rows, markdown(rows))
            report.flush()


def _row(model_label: str, device: torch.device, clips: Clips, label: str, depth: int, items: int, new_tokens: int,
         result: dict[str, Any], serial: dict[str, Any]) -> dict[str, Any]:
    total, prepare, model = result["total_s"], result["prepare_s"], result["model_s"]
    return {
        "model": model_label, "device": str(device), "method": label, "prefetch": depth, "items": items,
        "frames": clips.frames, "clip": f"{clips.width}x{clips.height}, {clips.seconds:g} s at {clips.fps} fps, mp4v",
        "video_tokens": result["video_tokens"], "kept_tokens": result["kept_tokens"], "new_tokens": new_tokens,
        "total_s": total, "prepare_s": prepare, "wait_s": result["wait_s"], "model_s": model,
        "total_vs_max": total / max(prepare, model) if max(prepare, model) else math.nan,
        "total_vs_sum": total / (prepare + model) if prepare + model else math.nan,
        "items_per_s": items / total if total else math.nan,
        "speedup": serial["total_s"] / total if total else math.nan,
    }


def markdown(rows: list[dict[str, Any]]) -> str:
    """The pipeline table, with how to read it."""
    if not rows:
        return ""
    first = rows[0]
    text = [f"# Where the total time goes ({first['model']}, {first['device']})", "",
            f"{first['items']} items of {first['frames']} frames from clips of {first['clip']}; each item read "
            f"(decord), resized and patchified on the CPU (prepare), then generate of {first['new_tokens']} new "
            "tokens (model); prefetch 0 is serial, 2 is the plugins' default. total / max = 1.00 is perfect "
            "overlap, total / sum = 1.00 fully serial. Same new tokens: items whose new tokens equal the serial "
            "pass's (the inputs and kept tokens are checked equal; on CUDA, generate itself is not bitwise "
            "deterministic from run to run).", ""]
    text.append(markdown_table(
        ["method", "prefetch", "kept / video tokens", "total s", "prepare s", "waited s", "model s",
         "total / max", "total / sum", "items/s", "speed-up", "same new tokens"],
        [[r["method"], r["prefetch"], f"{r['kept_tokens']} / {r['video_tokens']}", fmt(r["total_s"], 2),
          fmt(r["prepare_s"], 2), fmt(r["wait_s"], 2), fmt(r["model_s"], 2), fmt(r["total_vs_max"], 2),
          fmt(r["total_vs_sum"], 2), fmt(r["items_per_s"], 2), f"{fmt(r['speedup'], 2)}×",
          "–" if r.get("same_tokens_items") is None else f"{r['same_tokens_items']} / {r['items']}"] for r in rows]))
    return "\n".join(text) + "\n"
