#!/usr/bin/env python
"""`vllm serve` under load: stock vLLM, stock EVS and V-CAST at 1-32 requests in flight, on the same requests.

    make bench-serve                                              # bench-size random Qwen3-VL, CPU
    .venv-vllm/bin/python scripts/bench_serve.py --concurrency 1,4 --out /tmp/serve
    .venv-vllm/bin/python scripts/bench_serve.py --model-dir Qwen/Qwen3-VL-8B-Instruct --frames 32 --side 448

Runs in the vLLM environment (make setup-vllm). For each server (vcast.vllm.serve_load.CONFIGS) it
starts the real OpenAI-compatible server (``python -m vllm.entrypoints.openai.api_server``, the
module behind ``vllm serve``) on a loopback port with vLLM's defaults (chunked prefill and prefix
caching on), waits for ``/health``, answers two untimed warm-up requests, then runs vLLM's own load
generator (``vllm.benchmarks.serve``: chat completions with one random mp4 video each, ``--frames / 2``
seconds at 30 fps, which Qwen3-VL's processor samples at 2 fps into ``--frames`` frames; greedy, a
fixed number of output tokens) once per concurrency, and stops the server. Point ``c`` uses seed ``c``
for every server, so the servers answer the same requests and no point finds another's in the
prefix cache. Writes ``bench_serve.csv``, ``bench_serve.md`` and ``bench_serve.png`` into ``--out``
(and each server's log), and prints the table.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import tempfile
import urllib.request
from pathlib import Path
from typing import Any

from vcast.atomic_files import atomic_write_text
from vcast.vllm.serve_load import (
    CACHED_PROMPT_TOKENS,
    CONCURRENCY,
    CONFIGS,
    PROMPT_TOKENS,
    LoadPoint,
    load_point,
    markdown_table,
    metric_total,
    plot,
    stock_evs_kwargs,
    write_csv,
)
from vcast.vllm.server import running_server

logger = logging.getLogger("bench_serve")


def engine_kwargs(config: str, model_dir: str, ratio: float, cpu: bool) -> dict[str, Any]:
    """The engine arguments that make ``config`` of the same checkpoint."""
    import vcast.vllm

    if config == "stock":
        return {}
    if config == "evs":
        return stock_evs_kwargs(ratio, cpu)
    return vcast.vllm.engine_kwargs(model_dir, "vcast", ratio, cpu=cpu)


def server(model_dir: str, config: str, args: argparse.Namespace, cpu: bool,
           log_path: Path) -> contextlib.AbstractContextManager[str]:
    """The server of ``config`` on a free loopback port while the block runs; its base URL."""
    settings: dict[str, Any] = {
        "dtype": args.dtype, "seed": 0, "max_model_len": args.max_model_len,
        "enforce_eager": True, "limit_mm_per_prompt": {"video": 1, "image": 0},
        "media_io_kwargs": {"video": {"num_frames": args.frames}}, "uvicorn_log_level": "warning",
    }
    if cpu:
        settings["kv_cache_memory_bytes"] = args.kv_cache_mib * 2**20
    settings.update(engine_kwargs(config, model_dir, args.ratio, cpu))
    return running_server(model_dir, settings, log_path, name=config)


def counters(url: str) -> tuple[float, float]:
    """The server's prompt tokens so far: all, and those found in the prefix cache."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=30) as response:
        text = response.read().decode("utf-8")
    return metric_total(text, PROMPT_TOKENS), metric_total(text, CACHED_PROMPT_TOKENS)


def run_load(url: str, model_dir: str, concurrency: int, prompts: int, seed: int, args: argparse.Namespace
             ) -> dict[str, Any]:
    """vLLM's load generator against ``url``: ``prompts`` chat requests, ``concurrency`` in flight."""
    from vllm.benchmarks.serve import add_cli_args
    from vllm.benchmarks.serve import main as load_main
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser()
    add_cli_args(parser)
    # Clips of --frames / 2 seconds at vLLM's 30 fps: the server decodes --frames of them and Qwen3-VL's
    # processor samples them at its 2 fps, so all --frames reach the model (a 1-second clip gives 4).
    bucket = "{(%d, %d, %d): 1.0}" % (args.side, args.side, 15 * args.frames)
    options = parser.parse_args([
        "--backend", "openai-chat", "--endpoint", "/v1/chat/completions", "--base-url", url, "--model", model_dir,
        "--dataset-name", "random-mm", "--random-mm-bucket-config", bucket,
        "--random-mm-limit-mm-per-prompt", '{"image": 0, "video": 1}', "--random-mm-base-items-per-request", "1",
        "--random-mm-num-mm-items-range-ratio", "0", "--random-input-len", str(args.text_tokens),
        "--random-output-len", str(args.new_tokens), "--ignore-eos", "--temperature", "0",
        "--num-prompts", str(prompts), "--max-concurrency", str(concurrency), "--seed", str(seed),
        "--percentile-metrics", "ttft,e2el", "--metric-percentiles", "50,99", "--disable-tqdm",
    ])
    return load_main(options)


def measure(config: str, model_dir: str, args: argparse.Namespace, cpu: bool, out: Path) -> list[LoadPoint]:
    points = []
    with server(model_dir, config, args, cpu, out / f"server_{config}.log") as url:
        run_load(url, model_dir, 1, 2, 10_000, args)  # warm-up, untimed: first-call initialisation
        for concurrency in args.concurrency:
            prompts = max(args.min_prompts, args.prompts_per_slot * concurrency)
            before = counters(url)
            result = run_load(url, model_dir, concurrency, prompts, concurrency, args)
            after = counters(url)
            point = load_point(config, concurrency, prompts, result, after[0] - before[0], after[1] - before[1])
            logger.info("%s at %d in flight: %.3f requests/s, p99 end-to-end %.0f ms, %d failed", config,
                        concurrency, point.requests_per_s, point.e2e_p99_ms, point.failed)
            points.append(point)
    return points


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model-dir", default=None, help="checkpoint (default: build the bench-size random Qwen3-VL)")
    parser.add_argument("--servers", default=",".join(CONFIGS), help=f"comma-separated, from {CONFIGS}")
    parser.add_argument("--concurrency", default=",".join(map(str, CONCURRENCY)), help="requests in flight, comma-separated")
    parser.add_argument("--prompts-per-slot", type=int, default=2, help="requests per point = this x concurrency ...")
    parser.add_argument("--min-prompts", type=int, default=8, help="... and at least this many")
    parser.add_argument("--frames", type=int, default=16, help="frames per video that reach the model")
    parser.add_argument("--side", type=int, default=224, help="frame side in pixels")
    parser.add_argument("--text-tokens", type=int, default=16, help="random text tokens beside the video")
    parser.add_argument("--new-tokens", type=int, default=16, help="output tokens per request (EOS ignored)")
    parser.add_argument("--ratio", type=float, default=0.25, help="V-CAST's retention; EVS prunes 1 - ratio")
    parser.add_argument("--dtype", default=None, help="float32 on CPU, bfloat16 on GPU by default")
    parser.add_argument("--max-model-len", type=int, default=8192)
    parser.add_argument("--kv-cache-mib", type=int, default=2048, help="CPU: vLLM's KV cache size")
    parser.add_argument("--out", type=Path, default=Path("results/bench_serve"))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    args.concurrency = [int(value) for value in args.concurrency.split(",")]
    servers = [name.strip() for name in args.servers.split(",") if name.strip()]
    unknown = sorted(set(servers) - set(CONFIGS))
    if unknown or not servers:
        parser.error(f"--servers: unknown {unknown}; choose from {', '.join(CONFIGS)}")
    if any(value < 1 for value in args.concurrency):
        parser.error(f"--concurrency must be positive integers, got {args.concurrency}")
    if args.model_dir is None:  # the checkpoint is built here: nothing to fetch (a hub id may need the network)
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from vllm.platforms import current_platform

    cpu = current_platform.is_cpu()
    args.dtype = args.dtype or ("float32" if cpu else "bfloat16")
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model_dir
        size = "the given checkpoint"
        if model_dir is None:
            from vcast.tiny_checkpoints import build_tiny_checkpoint

            model_dir = str(build_tiny_checkpoint("qwen3_vl", "bench", Path(tmp) / "bench", seed=0))
            size = "bench-size random Qwen3-VL (text: hidden 512, 4 layers; vision: depth 4)"
        points = [point for config in servers for point in measure(config, model_dir, args, cpu, args.out)]
    device = "CPU" if cpu else current_platform.get_device_name()
    title = (f"{size}, {args.frames} frames {args.side}px, {args.new_tokens} new tokens, {args.dtype}, {device}, "
             f"r = {args.ratio}")
    write_csv(points, args.out / "bench_serve.csv")
    table = markdown_table(points)
    atomic_write_text(args.out / "bench_serve.md", f"{title}\n\n{table}")
    plot(points, args.out / "bench_serve.png", title)
    print(title)
    print(table)
    print(f"wrote {args.out / 'bench_serve.csv'}, {args.out / 'bench_serve.md'}, {args.out / 'bench_serve.png'}")
    return 0 if all(point.failed == 0 for point in points) else 1


if __name__ == "__main__":
    sys.exit(main())
