"""``make bench-serve``'s pieces that need no server: the engine settings as ``vllm serve`` flags, stock
EVS at V-CAST's retention, the Prometheus counters, and the CSV / Markdown / figure of the points."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vcast.vllm.serve_load import (
    CACHED_PROMPT_TOKENS,
    PROMPT_TOKENS,
    load_point,
    markdown_table,
    metric_total,
    plot,
    read_csv,
    serve_flags,
    stock_evs_kwargs,
    write_csv,
)


def test_engine_settings_become_serve_flags() -> None:
    overrides = {"architectures": ["VCastQwen3VLForConditionalGeneration"],
                 "vcast": {"method": "vcast", "ratio": 0.25, "params": {}}}
    flags = serve_flags({"hf_overrides": overrides, "video_pruning_rate": 0.5, "enforce_eager": True,
                         "enable_prefix_caching": False, "seed": 0, "worker_cls": None,
                         "limit_mm_per_prompt": {"video": 1, "image": 0}})
    assert flags[:2] == ["--hf-overrides", json.dumps(overrides, sort_keys=True)]
    assert json.loads(flags[1]) == overrides
    assert flags[2:] == ["--video-pruning-rate", "0.5", "--enforce-eager", "--seed", "0",
                         "--limit-mm-per-prompt", '{"image": 0, "video": 1}']


def test_stock_evs_prunes_what_vcast_drops() -> None:
    assert stock_evs_kwargs(0.25, cpu=False) == {"video_pruning_rate": 0.75, "video_pruning_method": "evs"}
    assert stock_evs_kwargs(0.25, cpu=True)["worker_cls"] == "vcast.vllm.worker.VCastCPUWorker"
    for ratio in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match=repr(ratio)):
            stock_evs_kwargs(ratio, cpu=False)


METRICS = """# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="m"} 1200.0
vllm:prompt_tokens_total{engine="1",model_name="m"} 34.0
vllm:prompt_tokens_cached_total{engine="0",model_name="m"} 96.0
vllm:prompt_tokens_by_source_total{engine="0",model_name="m",source="local"} 5000.0
vllm:prompt_tokens_created 1.7e9
"""


def test_counters_sum_over_engines_and_only_the_named_metric() -> None:
    assert metric_total(METRICS, PROMPT_TOKENS) == 1234.0
    assert metric_total(METRICS, CACHED_PROMPT_TOKENS) == 96.0
    assert metric_total(METRICS, "vllm:generation_tokens_total") == 0.0


def _result(requests_per_s: float, completed: int = 8, failed: int = 0) -> dict:
    return {"completed": completed, "failed": failed, "request_throughput": requests_per_s,
            "output_throughput": 16 * requests_per_s, "median_ttft_ms": 100.0, "p99_ttft_ms": 250.0,
            "median_e2el_ms": 900.0, "p99_e2el_ms": 2100.0}


def test_points_table_csv_and_figure(tmp_path: Path) -> None:
    points = [load_point("stock", 4, 8, _result(1.0), prompt_tokens=3200, cached_tokens=160),
              load_point("evs", 4, 8, _result(1.5), prompt_tokens=1000, cached_tokens=0),
              load_point("vcast", 4, 8, _result(2.0), prompt_tokens=1000, cached_tokens=0),
              load_point("vcast", 8, 16, _result(3.0, completed=15, failed=1), prompt_tokens=1500, cached_tokens=0)]
    stock = points[0]
    assert (stock.prompt_tokens_per_request, stock.computed_prompt_tokens_per_request) == (400.0, 380.0)
    assert points[3].failed == 1 and points[3].prompt_tokens_per_request == 100.0

    rows = markdown_table(points).splitlines()[2:]
    assert [row.split("|")[1:5] for row in rows] == [
        [" 4 ", " stock vLLM ", " 1.000 ", " 1.00x "], [" 4 ", " stock EVS ", " 1.500 ", " 1.50x "],
        [" 4 ", " V-CAST ", " 2.000 ", " 2.00x "], [" 8 ", " V-CAST ", " 3.000 ", " – "]]
    assert rows[3].rstrip(" |").endswith("| 1")

    write_csv(points, tmp_path / "points.csv")
    assert read_csv(tmp_path / "points.csv") == points
    plot(points, tmp_path / "figure" / "serve.png", "test")
    assert (tmp_path / "figure" / "serve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="'vanilla'"):
        load_point("vanilla", 1, 1, _result(1.0), prompt_tokens=1, cached_tokens=0)
