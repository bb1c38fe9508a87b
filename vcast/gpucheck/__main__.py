"""``python -m vcast.gpucheck``: run the GPU check kit (see :mod:`vcast.gpucheck` and docs/gpu.md)."""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Optional

if __name__ == "__main__":  # before the imports below: a Ctrl-C while they load ends with one line too
    from vcast.interrupt_guard import guard_imports

    guard_imports()

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402

from vcast.closed_pipe import run_command  # noqa: E402
from vcast.gpucheck import PARTS  # noqa: E402
from vcast.gpucheck.pipeline import CPU_CLIPS, GPU_CLIPS  # noqa: E402
from vcast.gpucheck.results import FAIL, OUTPUT_FILES, SKIPPED, Budget, Report  # noqa: E402

DEFAULT_OUT = Path("results") / "gpu"
GPU_BUDGET_S = 450.0  # new steps start only while they fit: the whole run stays under 8 minutes on one H100


@dataclass(frozen=True)
class Settings:
    """Sizes and repeats of one mode (``gpu``: the real sizes; ``cpu-small``: the same code, small)."""

    mode: str
    device: torch.device
    dtype: torch.dtype
    smoke_full: tuple[str, ...]          # families that get every method (the others: a sample)
    memory_size: str                     # tiny-checkpoint size for the peak-memory check
    memory_side: int
    model_size: str                      # vcast.gpucheck.models size of the efficiency models
    qwen_frames: tuple[int, ...]
    qwen_side: int
    llava_frames: tuple[int, ...]
    family_frames: tuple[int, ...]       # the other families' efficiency rows (at qwen_side)
    selection_frames: tuple[int, ...]
    selection_grid: int
    selection_dim: int
    new_tokens: int
    warmup: int
    runs: int
    budget_s: Optional[float]
    first_block_s: float                 # expected seconds of the first efficiency block (budget)
    selection_s: float                   # expected seconds of the selection part (budget)
    clips: Any                           # vcast.gpucheck.pipeline.Clips of the pipeline part
    pipeline_s: float                    # expected seconds of the pipeline part (budget)

    @property
    def label(self) -> str:
        return "" if self.model_size == "real" else " (tiny config)"


def gpu_settings(device: torch.device) -> Settings:
    from vcast.families import all_archs

    return Settings(mode="gpu", device=device, dtype=torch.bfloat16, smoke_full=all_archs(), memory_size="bench",
                    memory_side=448, model_size="real", qwen_frames=(32, 64), qwen_side=448, llava_frames=(32,),
                    family_frames=(32,),
                    selection_frames=(32, 64, 128), selection_grid=14, selection_dim=4096, new_tokens=16, warmup=1,
                    runs=5, budget_s=GPU_BUDGET_S, first_block_s=60.0, selection_s=45.0,
                    clips=GPU_CLIPS, pipeline_s=60.0)


def cpu_settings() -> Settings:
    # The same code at the least work that runs all of it (its numbers are not the point): one Qwen3-VL
    # frame count, no warm-up.
    return Settings(mode="cpu-small", device=torch.device("cpu"), dtype=torch.float32, smoke_full=("qwen3_vl",),
                    memory_size="tiny", memory_side=64, model_size="tiny", qwen_frames=(32,), qwen_side=128,
                    llava_frames=(32,), family_frames=(32,), selection_frames=(32, 64, 128), selection_grid=4, selection_dim=64,
                    new_tokens=4, warmup=0, runs=2, budget_s=None, first_block_s=0.0, selection_s=0.0,
                    clips=CPU_CLIPS, pipeline_s=0.0)


def parse(argv: Optional[list[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m vcast.gpucheck", description=__doc__)
    parser.add_argument("--cpu-small", action="store_true",
                        help="the CPU mode with small dimensions even where CUDA is there (the default without CUDA)")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"output folder (default: $OUT when set, else {DEFAULT_OUT})")
    parser.add_argument("--only", nargs="+", choices=PARTS, default=None, metavar="PART",
                        help=f"run only these parts, of {', '.join(PARTS)}")
    parser.add_argument("--budget", type=float, default=None,
                        help=f"seconds after which no new step starts (default: {GPU_BUDGET_S:.0f} on a GPU, "
                             "none on the CPU)")
    parser.add_argument("--runs", type=int, default=None, help="timed runs per efficiency / selection cell")
    parser.add_argument("--new-tokens", type=int, default=None, help="new tokens per generate in the efficiency table")
    return parser.parse_args(argv)


def settings_for(args: argparse.Namespace) -> tuple[Settings, str]:
    """The mode's settings and why that mode."""
    if args.cpu_small or not torch.cuda.is_available():
        why = "--cpu-small" if args.cpu_small else "no CUDA device: CPU mode, small dimensions"
        settings = cpu_settings()
    else:
        settings, why = gpu_settings(torch.device("cuda", torch.cuda.current_device())), "CUDA device found"
    changes: dict[str, Any] = {}
    if args.budget is not None:
        changes["budget_s"] = args.budget
    if args.runs is not None:
        changes["runs"] = max(1, args.runs)
    if args.new_tokens is not None:
        changes["new_tokens"] = max(2, args.new_tokens)
    return replace(settings, **changes), why


def _part(report: Report, name: str, step: Callable[[], None]) -> None:
    """Run one part; an exception fails it (its traceback goes to the log) and the run goes on."""
    started = time.perf_counter()
    try:
        step()
    except Exception as error:  # noqa: BLE001
        report.lines += ["    " + line for line in traceback.format_exc().splitlines()]
        report.check(name, FAIL, f"{type(error).__name__}: {error}")
    report.log(f"{name}: done in {time.perf_counter() - started:.1f} s")
    report.flush()


def _free(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def main(argv: Optional[list[str]] = None) -> int:
    args = parse(argv)
    settings, why = settings_for(args)
    parts = tuple(args.only or PARTS)
    out = args.out or (Path(os.environ["OUT"]) if os.environ.get("OUT") else DEFAULT_OUT)
    report = Report(out, Budget(settings.budget_s))

    from vcast.gpucheck import cuda_tests, efficiency, memory, models, pipeline, selection, smoke
    from vcast.gpucheck.environment import describe

    s = settings
    if s.device.type == "cpu":
        # One thread: on a small machine shared with other jobs, two threads contend and a tiny
        # generate takes tens of times longer (the CPU mode's numbers are not the point).
        torch.set_num_threads(1)
    report.environment = describe(s.device, s.dtype, s.mode)
    env = report.environment
    report.log(f"vcast GPU check kit, mode {s.mode} ({why}); parts: {', '.join(parts)}; output: {out} "
               f"({len(OUTPUT_FILES)} files)")
    report.log(f"device {s.device} ({env['card'] or 'CPU'}; driver {env['driver']}), torch {env['torch']} "
               f"(CUDA {env['torch_cuda']}), transformers {env['transformers']}, commit {env['commit']}; budget "
               f"{'none' if s.budget_s is None else f'{s.budget_s:.0f} s'}")
    report.flush()

    if "tests" in parts:
        _part(report, "cuda-tests", lambda: cuda_tests.run(report, s.device.type == "cuda"))
    if "smoke" in parts:
        _part(report, "smoke", lambda: smoke.run(report, s.device, s.dtype, full=s.smoke_full))
    if "memory" in parts:
        _part(report, "memory", lambda: memory.run(report, s.device, s.dtype, s.memory_size, s.memory_side, s.warmup,
                                                   max(2, s.runs - 2)))

    if {"efficiency", "selection", "pipeline"} & set(parts):
        def qwen() -> None:
            started = time.perf_counter()
            model = models.random_model(models.model_config("qwen3_vl", s.model_size), s.device, s.dtype)
            label = f"{efficiency.PAPER_MODEL}{s.label}"
            report.log(f"built {label}: {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters, random "
                       f"weights on {s.device} in {time.perf_counter() - started:.1f} s")
            if "efficiency" in parts:
                efficiency.measure(report, model, label, s.qwen_frames, s.qwen_side, efficiency.QWEN_METHODS,
                                   s.new_tokens, s.warmup, s.runs, s.first_block_s, compare_paper=True)
            if "selection" in parts:
                selection.run(report, s.device, s.dtype, s.selection_frames, temporal_patch=2, grid=s.selection_grid,
                              dim=s.selection_dim, warmup=s.warmup, repeats=s.runs, model=model, side=s.qwen_side,
                              label=label, estimate_s=s.selection_s)
            if "pipeline" in parts:
                pipeline.run(report, model, label, s.clips, s.new_tokens, s.pipeline_s)
            del model
            _free(s.device)

        _part(report, "efficiency-qwen3-vl" if "efficiency" in parts else "+".join(
            p for p in ("selection", "pipeline") if p in parts), qwen)

    if "efficiency" in parts:
        def llava() -> None:
            if not report.budget.allows(s.first_block_s):
                report.check("efficiency/LLaVA-OV-7B", SKIPPED, f"budget: {report.budget.left:.0f} s left")
                return
            started = time.perf_counter()
            config = models.model_config("llava_onevision", s.model_size)
            model = models.random_model(config, s.device, s.dtype)
            label = f"LLaVA-OV-7B{s.label}"
            report.log(f"built {label}: {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters, random "
                       f"weights on {s.device} in {time.perf_counter() - started:.1f} s")
            efficiency.measure(report, model, label, s.llava_frames, config.vision_config.image_size,
                               efficiency.LLAVA_METHODS, s.new_tokens, s.warmup, s.runs, s.first_block_s)
            del model
            _free(s.device)

        _part(report, "efficiency-llava-ov", llava)

        for family, published in models.other_published_models():
            def other(family: Any = family, published: Any = published) -> None:
                label = f"{published.display}{s.label}"
                if not report.budget.allows(s.first_block_s):
                    report.check(f"efficiency/{label}", SKIPPED, f"budget: {report.budget.left:.0f} s left")
                    return
                config = models.model_config(published.arch, s.model_size)
                too_big = models.does_not_fit(config, s.device, s.dtype)
                if too_big:
                    report.check(f"efficiency/{label}", SKIPPED, too_big)
                    return
                started = time.perf_counter()
                model = models.random_model(config, s.device, s.dtype)
                report.log(f"built {label}: {sum(p.numel() for p in model.parameters()) / 1e9:.2f} B parameters, "
                           f"random weights on {s.device} in {time.perf_counter() - started:.1f} s")
                efficiency.measure(report, model, label, s.family_frames, models.fitting_side(config, s.qwen_side),
                                   efficiency.FAMILY_METHODS, s.new_tokens, s.warmup, s.runs, s.first_block_s)
                del model
                _free(s.device)

            _part(report, f"efficiency-{published.config}", other)

    counts = report.counts()
    report.log(f"done in {report.budget.elapsed:.0f} s: {counts['pass']} passed, {counts['fail']} failed, "
               f"{counts['skipped']} skipped; files in {out}")
    for check in report.failed:
        report.log(f"FAILED {check.name}: {check.detail}")
    report.flush()
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(run_command(main))
