"""The demo and the benchmarks run end to end as users run them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*args: str) -> str:
    result = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow
def test_demo_prints_budgets_and_kept_counts():
    out = run("-m", "vcast.demo", "--frames", "12", "--tokens", "16", "--dim", "32", "--ratio", "0.25")
    rows = [line.split() for line in out.splitlines() if re.match(r"\s*\d+\s+\d+\.\d{3}\s", line)]
    assert len(rows) == 12
    budgets = [int(row[3]) for row in rows]
    kept = [int(row[4]) for row in rows]
    assert budgets == kept and sum(budgets) == 48  # floor(0.25 * 12 * 16)
    assert "kept 48 of 192 tokens (25.0%)" in out


@pytest.mark.slow
def test_bench_select_reports_speedups_and_agreement():
    out = run(
        "scripts/bench_select.py", "--frames", "4", "8", "--tokens", "12", "--dim", "16",
        "--repeats", "1", "--warmup", "0",
    )
    rows = [line.split() for line in out.splitlines() if re.match(r"\s*\d+\s+(float32|bfloat16)\s", line)]
    assert [(r[0], r[1]) for r in rows] == [("4", "float32"), ("4", "bfloat16"), ("8", "float32"), ("8", "bfloat16")]
    for row in rows:
        assert row[4].endswith("x") and float(row[4][:-1]) > 0
        assert row[5] == "True", f"loop and vcast budgets differ: {row}"
        assert float(row[6]) == 1.0, f"loop and vcast keep different tokens: {row}"


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["qwen3_vl", "llava_onevision"])
def test_bench_prefill_runs_and_checks_the_ideal_matches(arch: str, tiny_dirs: dict) -> None:
    """Small settings on a tiny checkpoint: the table, both ratios, and (b) == (c) logits (exit 0)."""
    out = run("scripts/bench_prefill.py", "--arch", arch, "--checkpoint", str(tiny_dirs[arch]), "--frames", "8",
              "--side", "64", "--repeats", "1", "--warmup", "0")
    for label in ("(a) vanilla", "(b) vcast via attach", "(c) ideal"):
        assert label in out
    ratios = dict(re.findall(r"(b/[ac]) = ([0-9.]+)", out))
    assert set(ratios) == {"b/a", "b/c"} and all(float(v) > 0 for v in ratios.values())
    difference = float(re.search(r"max \|logits b - c\| = (\S+)", out).group(1))
    assert difference <= 1e-4


@pytest.mark.slow
def test_bench_baselines_times_every_method_next_to_vcast():
    out = run("scripts/bench_baselines.py", "--frames", "6", "--side", "4", "--dim", "16", "--repeats", "1",
              "--warmup", "0", "--dtype", "float32")
    rows = {line.split()[0]: line.split() for line in out.splitlines()[2:]}
    import vcast
    from vcast.registry import is_token_method

    # every compressor; the in-LLM methods need the model (scripts/bench_memory.py)
    assert set(rows) == {m for m in vcast.available_methods() if m != "vanilla" and is_token_method(m)}
    assert rows["vcast"][1:3] == ["prune", "24"] and float(rows["vcast"][4]) == 1.0  # floor(0.25 * 6 * 16)
    assert rows["avgpool_2x2"][1:3] == ["merge", "24"] and rows["visionzip"][1:3] == ["merge", "24"]


@pytest.mark.slow
def test_bench_baselines_sweeps_frame_counts_side_by_side():
    """Several --frames: one row per method with ms at each T, ms per frame at each T, and the
    per-frame growth from the fewest to the most frames (columns consistent with each other)."""
    counts = (4, 8, 12)
    out = run("scripts/bench_baselines.py", "--frames", *map(str, counts), "--side", "4", "--dim", "16",
              "--repeats", "1", "--warmup", "0", "--dtype", "float32", "--clip", "scenes",
              "--methods", "fastvid", "holitom", "uniform")
    lines = out.splitlines()
    assert lines[0].startswith("T=4,8,12 P=16 D=16 float32") and "clip scenes" in lines[0]
    assert lines[1].split() == ["method", "kind", "ms@4", "ms@8", "ms@12", "ms/f@4", "ms/f@8", "ms/f@12",
                                "growth", "12/4"]
    rows = {line.split()[0]: line.split() for line in lines[2:]}
    assert list(rows) == ["vcast", "fastvid", "holitom", "uniform"]  # V-CAST first, then as asked
    assert [rows[m][1] for m in rows] == ["prune", "merge", "merge", "prune"]
    for method, row in rows.items():
        ms, per_frame, growth = [float(v) for v in row[2:5]], [float(v) for v in row[5:8]], float(row[8])
        for total, each, frames in zip(ms, per_frame, counts):
            assert each == pytest.approx(total / frames, abs=0.01 + 0.06 / frames), (method, row)
        low = (per_frame[-1] - 0.005) / (per_frame[0] + 0.005)  # the printed values are rounded to 0.01
        high = (per_frame[-1] + 0.005) / max(per_frame[0] - 0.005, 1e-9)
        assert low - 0.005 <= growth <= high + 0.005, (method, row)


@pytest.mark.slow
def test_bench_memory_prints_every_method_both_ways():
    out = run("scripts/bench_memory.py", "--frames", "8", "--side", "128", "--repeats", "1", "--warmup", "0")
    rows = {(line.split()[0], line.split()[1]): line.split() for line in out.splitlines()
            if line.split()[:1] and line.split()[0] in ("vanilla", "vcast", "flashvid", "fastv")}
    assert set(rows) == {(m, s) for m in ("vanilla", "vcast", "flashvid", "fastv") for s in ("ours", "eager")}
    assert rows[("vanilla", "ours")][5] == "1.000"  # the reference of every ratio
    # layer-averaged retention: V-CAST keeps 25% before the LLM; FastV keeps 25% from layer 2 of 4
    assert rows[("vcast", "ours")][-1] == "25.0" and rows[("fastv", "ours")][-1] == "62.5"
    assert rows[("fastv", "eager")][-1] == "62.5" and "worst peak with our scores" in out
