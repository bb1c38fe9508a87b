"""The report's figures: plotted data equals the results frame, files are real PNG/PDF written
atomically, and the budget profiles come from the tokens the pruning hooks really see."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

import vcast
from vcast import atomic_files
from vcast.report import budget_profiles_figure, figure_common, figures
from vcast.budget_profiles import VideoTokenReader, budget_profiles, video_profiles, video_tokens
from vcast.report.figure_common import artists_with_gid

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
QWEN_PIXELS = {"max_pixels": 16384, "min_pixels": 4096}  # 128 x 128 clips: 16 merged tokens per patch
NAN = math.nan


def frame(*rows: tuple) -> pd.DataFrame:
    """Tidy rows ``(model, frames, ratio, method, benchmark, value, status[, task, experiment])``."""
    records = []
    for row in rows:
        model, frames, ratio, method, benchmark, value, status, *rest = row
        task, experiment = (rest + ["videomme", "exp_a"][len(rest):])[:2]
        records.append(dict(experiment=experiment, model=model, frames=frames, ratio=ratio, method=method,
                            task=task, benchmark=benchmark, value=value, status=status))
    return pd.DataFrame(records)


# ---------------------------------------------------------------------------------------------
# fig:frame_scaling
# ---------------------------------------------------------------------------------------------

Q = "qwen3vl_8b"


@pytest.fixture
def scaling() -> pd.DataFrame:
    return frame(
        (Q, 32, 1.0, "vanilla", "MLVU", 60.0, "ok"),
        (Q, 64, 1.0, "vanilla", "MLVU", 62.0, "ok"),
        (Q, 128, 1.0, "vanilla", "MLVU", 63.5, "ok"),
        (Q, 256, 1.0, "vanilla", "MLVU", NAN, "oom"),
        (Q, 32, 0.25, "vcast", "MLVU", 58.0, "ok"),
        (Q, 64, 0.25, "vcast", "MLVU", 61.0, "ok"),
        (Q, 128, 0.25, "vcast", "MLVU", 64.0, "ok"),
        (Q, 256, 0.25, "vcast", "MLVU", 65.5, "ok"),
        (Q, 32, 0.25, "fastvid", "MLVU", 57.0, "ok"),
        (Q, 64, 0.25, "fastvid", "MLVU", NAN, "failed"),  # skipped
        (Q, 256, 0.25, "fastvid", "MLVU", NAN, "oom"),
        # Distractors that must not be plotted: another ratio, another model, another benchmark.
        (Q, 32, 0.35, "vcast", "MLVU", 99.0, "ok"),
        ("qwen3vl_32b", 32, 0.25, "vcast", "MLVU", 98.0, "ok"),
        (Q, 32, 0.25, "vcast", "MVBench", 97.0, "ok"),
        # The same cell from an overlapping experiment, OOM there: the ok value wins.
        (Q, 128, 0.25, "vcast", "MLVU", NAN, "oom", "videomme", "exp_0"),
        (Q, 64, 1.0, "vanilla", "EgoSchema", 70.0, "ok"),
        (Q, 32, 0.25, "vcast_uniform", "MLVU", 50.0, "ok"),  # an ablation row: not a default line
    )


def test_frame_scaling_plots_each_method_at_its_ratio(scaling: pd.DataFrame) -> None:
    fig = figures.build_frame_scaling(scaling, model=Q, ratio=0.25, benchmarks=("MLVU", "EgoSchema"))
    mlvu, ego = fig.axes[:2]
    assert [mlvu.get_title(), ego.get_title()] == ["MLVU", "EgoSchema"]

    def xy(gid: str, ax) -> tuple[list, list]:
        (line,) = [line for line in ax.get_lines() if line.get_gid() == gid]
        return list(line.get_xdata()), list(line.get_ydata())

    assert xy("line:vcast", mlvu) == ([32, 64, 128, 256], [58.0, 61.0, 64.0, 65.5])
    assert xy("line:vanilla", mlvu) == ([32, 64, 128], [60.0, 62.0, 63.5])
    assert xy("line:fastvid", mlvu) == ([32], [57.0])  # the failed 64 is skipped, 256 is an OOM mark
    assert xy("line:vanilla", ego) == ([64], [70.0])
    assert not [line for line in ego.get_lines() if line.get_gid() == "line:vcast"]

    # OOM: an "x" at the bottom (axes coordinates in y), stacked when two methods share a frame count.
    ooms = {line.get_gid(): line for line in mlvu.get_lines() if line.get_gid().startswith("oom:")}
    assert sorted(ooms) == ["oom:fastvid", "oom:vanilla"]
    heights = sorted(float(line.get_ydata()[0]) for line in ooms.values())
    assert heights == pytest.approx([figures.OOM_Y, figures.OOM_Y + figures.OOM_STEP])
    for line in ooms.values():
        assert list(line.get_xdata()) == [256] and line.get_marker() == "x"
        assert line.get_transform().contains_branch_seperately(mlvu.transData) == (True, False)
    assert [text.get_text() for text in mlvu.texts] == ["OOM"]

    assert mlvu.get_xscale() == "log" and list(mlvu.get_xticks()) == [32, 64, 128, 256]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["Vanilla", "FastVID", "V-CAST"]


def test_frame_scaling_methods_argument_and_no_data(scaling: pd.DataFrame) -> None:
    fig = figures.build_frame_scaling(scaling, ratio=0.25, benchmarks=("MLVU",), methods=("vcast",))
    assert sorted(line.get_gid() for line in fig.axes[0].get_lines()) == ["line:vanilla", "line:vcast", "oom:vanilla"]
    fig = figures.build_frame_scaling(scaling, ratio=0.25, benchmarks=("MLVU",), methods=("vcast_uniform",))
    assert [line.get_gid() for line in fig.axes[0].get_lines() if line.get_gid().startswith("line:")] == [
        "line:vanilla", "line:vcast_uniform"]
    with pytest.raises(ValueError, match="llava_ov_7b"):
        figures.build_frame_scaling(scaling, model="llava_ov_7b")
    with pytest.raises(ValueError, match="ratio=0.5"):
        figures.build_frame_scaling(scaling.query("method != 'vanilla'"), ratio=0.5, benchmarks=("MLVU",))
    with pytest.raises(ValueError, match="lacks column"):
        figures.build_frame_scaling(scaling.drop(columns="status"))


# ---------------------------------------------------------------------------------------------
# fig:ablation_budget_others
# ---------------------------------------------------------------------------------------------

def test_budget_gains_bars_and_gains() -> None:
    df = frame(
        (Q, 32, 0.25, "visionzip", "MVBench", 60.0, "ok"),
        (Q, 32, 0.25, "visionzip_vcast", "MVBench", 62.5, "ok"),
        (Q, 32, 0.25, "visionzip", "MLVU", 55.0, "ok"),
        (Q, 32, 0.25, "visionzip_vcast", "MLVU", 54.0, "ok"),
        (Q, 32, 0.25, "vidcom2", "MVBench", 58.0, "ok"),  # no partner: a bar, no gain
        (Q, 32, 0.25, "vidcom2_vcast", "MLVU", NAN, "failed"),
        (Q, 64, 0.25, "visionzip_vcast", "MVBench", 90.0, "ok"),  # other frame count
    )
    fig = figures.build_budget_gains(df, benchmarks=("MVBench", "MLVU"))
    zip_ax, com_ax = fig.axes[:2]
    heights = {gid: [bar.get_height() for bar in artists_with_gid(fig, gid)]
               for gid in ("bar:visionzip:MVBench", "bar:visionzip_vcast:MVBench", "bar:visionzip:MLVU",
                           "bar:visionzip_vcast:MLVU", "bar:vidcom2:MVBench", "bar:vidcom2_vcast:MLVU")}
    assert heights == {"bar:visionzip:MVBench": [60.0], "bar:visionzip_vcast:MVBench": [62.5],
                       "bar:visionzip:MLVU": [55.0], "bar:visionzip_vcast:MLVU": [54.0],
                       "bar:vidcom2:MVBench": [58.0], "bar:vidcom2_vcast:MLVU": []}
    # The + V-CAST bar sits right of the original one.
    (left,) = artists_with_gid(fig, "bar:visionzip:MVBench")
    (right,) = artists_with_gid(fig, "bar:visionzip_vcast:MVBench")
    assert left.get_x() < right.get_x()
    assert [t.get_text() for t in zip_ax.texts] == ["+2.5", "\u22121.0"]
    # No gain for VidCom² (no pair); its three empty slots say "no data" rather than look like zero.
    assert sorted(t.get_gid() for t in com_ax.texts) == [
        "nodata:vidcom2:MLVU", "nodata:vidcom2_vcast:MLVU", "nodata:vidcom2_vcast:MVBench"]
    assert {t.get_text() for t in com_ax.texts} == {"no data"} and com_ax.get_title() == "VidCom²"
    with pytest.raises(ValueError, match="frames=16"):
        figures.build_budget_gains(df, frames=16)


# ---------------------------------------------------------------------------------------------
# fig:llava_ov_efficiency
# ---------------------------------------------------------------------------------------------

L = "llava_ov_7b"


def test_efficiency_bars_and_relative_annotations() -> None:
    df = frame(
        (L, 32, 1.0, "vanilla", "PrefillLatency_s", 3.6, "ok"),
        (L, 32, 0.25, "vcast", "PrefillLatency_s", 1.0, "ok"),
        (L, 32, 0.25, "fastvid", "PrefillLatency_s", 1.8, "ok"),
        (L, 32, 1.0, "vanilla", "PeakMemory_MB", 1000.0, "ok"),
        (L, 32, 0.25, "vcast", "PeakMemory_MB", 886.0, "ok"),
        (L, 32, 0.25, "vcast", "TotalLatency_s", 5.0, "ok"),  # no vanilla value: bar without annotation
        (L, 32, 0.25, "vcast", "PeakMemory_MB", 10.0, "ok", "mlvu"),  # another task
    )
    fig = figures.build_efficiency_bars(df)
    prefill, total, memory = fig.axes[:3]
    assert [prefill.get_title(), total.get_title(), memory.get_title()] == [
        "Prefill latency (s)", "Total latency (s)", "Peak memory (MB)"]
    assert [bar.get_height() for bar in prefill.patches] == [3.6, 1.8, 1.0]
    assert [bar.get_gid() for bar in prefill.patches] == [
        "bar:vanilla:PrefillLatency_s", "bar:fastvid:PrefillLatency_s", "bar:vcast:PrefillLatency_s"]
    def labels(ax):  # annotations, apart from the "no data" marks of empty slots
        return [t.get_text() for t in ax.texts if not (t.get_gid() or "").startswith("nodata:")]

    def empty(ax):
        return sorted(t.get_gid() for t in ax.texts if (t.get_gid() or "").startswith("nodata:"))

    assert labels(prefill) == ["2.0\u00d7", "3.6\u00d7"] and empty(prefill) == ["nodata:vidcom2:PrefillLatency_s"]
    assert [bar.get_height() for bar in total.patches] == [5.0] and labels(total) == []
    assert empty(total) == ["nodata:fastvid:TotalLatency_s", "nodata:vanilla:TotalLatency_s",
                            "nodata:vidcom2:TotalLatency_s"]
    assert [bar.get_height() for bar in memory.patches] == [1000.0, 886.0]
    assert labels(memory) == ["\u221211.4%"]
    assert [t.get_text() for t in prefill.get_xticklabels()] == ["Vanilla", "FastVID", "VidCom²", "V-CAST"]
    with pytest.raises(ValueError, match="task='egoschema'"):
        figures.build_efficiency_bars(df, task="egoschema")


def test_relative_to_vanilla() -> None:
    assert figures.relative_to_vanilla("GenerationLatency_s", 2.0, 5.0) == "2.5\u00d7"
    assert figures.relative_to_vanilla("Throughput_items_per_s", 3.0, 1.5) == "2.0\u00d7"
    assert figures.relative_to_vanilla("PeakMemory_MB", 1100.0, 1000.0) == "+10.0%"


# ---------------------------------------------------------------------------------------------
# fig:temporal_allocation (hand-made profiles) and the files
# ---------------------------------------------------------------------------------------------

PROFILES = {"uniform": np.array([4, 4, 4, 4]), "uniqueness": np.array([5, 5, 3, 3]),
            "curvature": np.array([6, 2, 2, 6])}


def test_budget_profile_curves_and_colours() -> None:
    fig = budget_profiles_figure.build_budget_profiles([("a.mp4", PROFILES), ("b.mp4", {"curvature": np.array([1, 2])})],
                                        ratio=0.25)
    first, second = fig.axes[:2]
    assert [first.get_title(), second.get_title()] == ["a.mp4", "b.mp4"]
    assert first.get_xlabel() == "Frame index"  # the default: one point per frame (LLaVA)
    for name, budgets in PROFILES.items():
        (line,) = [line for line in first.get_lines() if line.get_gid() == f"profile:{name}"]
        assert list(line.get_ydata()) == list(budgets) and list(line.get_xdata()) == [0, 1, 2, 3]
        assert line.get_color() == figure_common.ALLOCATION_COLORS[name]
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [
        "Uniform Allocation", "Global Uniqueness", "Curvature-Aware (V-CAST)"]
    with pytest.raises(ValueError, match="same number"):
        budget_profiles_figure.build_budget_profiles({"uniform": np.array([1, 2]), "curvature": np.array([3])}, ratio=0.25)
    with pytest.raises(ValueError, match="nothing to plot"):
        budget_profiles_figure.build_budget_profiles([], ratio=0.25)


def test_budget_profile_title_axes_and_panels_name_the_same_unit() -> None:
    """Issue 24, finding 5: the title said "per-frame" over an axis of temporal patches, and the
    panels' "(8×16)" was not explained."""
    from vcast.budget_profiles import panel_title

    fig = budget_profiles_figure.build_budget_profiles([(panel_title("a.mp4", 4, 16, 2), PROFILES)], ratio=0.25, frames_per_step=2)
    ax = fig.axes[0]
    texts = {"title": fig.get_suptitle(), "x": ax.get_xlabel(), "y": ax.get_ylabel()}
    assert texts == {"title": "Token budget per temporal patch (2 frames), R = 25%",
                     "x": "Temporal patch index (2 frames each)", "y": "Tokens kept per temporal patch"}
    assert ax.get_title() == "a.mp4: 4 temporal patches \u00d7 16 tokens"
    fig = budget_profiles_figure.build_budget_profiles([(panel_title("b.mp4", 4, 196, 1), PROFILES)], ratio=0.25)
    ax = fig.axes[0]
    assert (fig.get_suptitle(), ax.get_xlabel(), ax.get_ylabel()) == (
        "Token budget per frame, R = 25%", "Frame index", "Tokens kept per frame")
    assert ax.get_title() == "b.mp4: 4 frames \u00d7 196 tokens"
    assert panel_title("c.mp4", 1, 16, 2) == "c.mp4: 1 temporal patch \u00d7 16 tokens"


def test_files_are_png_and_pdf_written_atomically_and_reproducibly(tmp_path: Path, scaling: pd.DataFrame) -> None:
    stem = tmp_path / "out" / "fig.frame_scaling"  # a dot in the stem must not be taken for a suffix
    paths = figures.plot_frame_scaling(scaling, stem, benchmarks=("MLVU",))
    assert paths == [tmp_path / "out" / "fig.frame_scaling.png", tmp_path / "out" / "fig.frame_scaling.pdf"]
    png, pdf = (path.read_bytes() for path in paths)
    assert png.startswith(PNG_MAGIC) and pdf.startswith(b"%PDF") and pdf.rstrip().endswith(b"%%EOF")
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["fig.frame_scaling.pdf", "fig.frame_scaling.png"]
    assert all(path.stat().st_mode & 0o044 for path in paths)  # readable by others, not mkstemp's 0600
    again = figures.plot_frame_scaling(scaling, stem, benchmarks=("MLVU",))
    assert [path.read_bytes() for path in again] == [png, pdf]  # no dates in the files

    other = budget_profiles_figure.plot_budget_profiles(PROFILES, tmp_path / "profiles", ratio=0.25)
    assert other[0].read_bytes().startswith(PNG_MAGIC) and other[1].read_bytes().startswith(b"%PDF")


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stem = tmp_path / "profiles"
    old = budget_profiles_figure.plot_budget_profiles(PROFILES, stem, ratio=0.25)
    before = [path.read_bytes() for path in old]

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(atomic_files.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        budget_profiles_figure.plot_budget_profiles({"uniform": np.array([1, 1])}, stem, ratio=0.5)
    assert [path.read_bytes() for path in old] == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["profiles.pdf", "profiles.png"]


# ---------------------------------------------------------------------------------------------
# Budget profiles from a model's real tokens (tiny random-weight checkpoints, synthetic clips)
# ---------------------------------------------------------------------------------------------

def _clip(synth_data: Path, question_id: str) -> tuple[Path, dict]:
    items = [json.loads(line) for line in (synth_data / "vcast_synth.jsonl").read_text().splitlines()]
    (item,) = [item for item in items if item["question_id"] == question_id]
    return synth_data / item["video"], item


def _plugin_selection(arch: str, model_dir: Path, clip: Path, frames: int, temporal: str) -> tuple[Any, dict]:
    """What the lmms-eval plugin's hooks selected on ``clip`` (its one video's SegmentStats), and
    the processor inputs."""
    if arch == "llava_onevision":
        from vcast.families.llava_onevision.plugin import VCastLlavaOV as Plugin

        extra: dict = {}
    else:
        from vcast.families.qwen3_vl.plugin import VCastQwen3VL as Plugin

        extra = dict(QWEN_PIXELS)
    plugin = Plugin(pretrained=str(model_dir), method="vcast", ratio=0.25, temporal=temporal, max_num_frames=frames,
                    device="cpu", warmup=False, **extra)
    prepared = plugin._prepare(["Which colour?"], [[str(clip)]])
    inputs = prepared.tensors
    with torch.inference_mode():
        plugin.model(**inputs)
    (video,) = plugin.handle.stats.videos
    plugin.handle.detach()
    return video, dict(inputs)


@pytest.mark.parametrize("arch", ["qwen3_vl", "llava_onevision"])
def test_profiles_are_what_the_hooks_select(arch: str, tiny_dirs: dict, synth_data: Path) -> None:
    """Same tokens as the pruning hooks see: V-CAST's budgets on them equal the budgets the
    plugin's hooks chose inside the model, for every allocation."""
    clip, item = _clip(synth_data, "cut_000")
    assert item["category"] == "cut" and item["num_frames"] > 32
    frames = 32
    reader = VideoTokenReader.load(tiny_dirs[arch])
    tokens = reader.tokens(clip, frames, **QWEN_PIXELS)
    assert tokens.dtype == torch.float32 and tokens.dim() == 3
    profiles = budget_profiles(tokens, 0.25)
    assert list(profiles) == ["uniform", "uniqueness", "curvature"]
    for name, budgets in profiles.items():
        hooked, inputs = _plugin_selection(arch, tiny_dirs[arch], clip, frames, name)
        assert budgets.tolist() == list(hooked.budgets), name
        # The kept tokens themselves agree too, so the tokens (not just their count) are the same.
        assert torch.equal(vcast.select(tokens, 0.25, "vcast", temporal=name).keep, hooked.keep), name
        assert tuple(tokens.shape[:2]) == (hooked.frames, hooked.tokens_per_frame)

    if arch == "qwen3_vl":
        # T = temporal patches (2 frames each), P = merged 2x2 patches of one frame.
        grid_t, grid_h, grid_w = inputs["video_grid_thw"][0].tolist()
        assert (grid_t, grid_h * grid_w // 4) == tuple(tokens.shape[:2]) == (frames // 2, 16)
    else:
        # T = frames, P = the n x n SigLIP grid pooled 2x (ceil), the newline token left out.
        vision = reader.model.config.vision_config
        side = vision.image_size // vision.patch_size
        assert tuple(tokens.shape[:2]) == (inputs["pixel_values_videos"].shape[1], math.ceil(side / 2) ** 2)
        assert tokens.shape[0] == frames
    total = math.floor(0.25 * tokens.shape[0] * tokens.shape[1])
    assert {int(b.sum()) for b in profiles.values()} == {total}
    assert np.ptp(profiles["uniform"]) <= 1  # flat up to the remainder of the floor
    assert not np.array_equal(profiles["curvature"], profiles["uniform"])
    assert not np.array_equal(profiles["curvature"], profiles["uniqueness"])


def test_budget_profiles_of_ones_own_videos_end_to_end(tiny_dirs: dict, synth_data: Path, tmp_path: Path) -> None:
    """The library path for a video of one's own: vcast.budget_profiles.video_profiles, drawn by
    plot_budget_profiles (the report itself draws what its cells recorded)."""
    clips = [_clip(synth_data, "cut_000")[0], _clip(synth_data, "cut_001")[0]]
    panels, group = video_profiles(tiny_dirs["qwen3_vl"], clips, frames=16, ratio=0.25, **QWEN_PIXELS)
    assert group == 2
    paths = budget_profiles_figure.plot_budget_profiles(panels, tmp_path / "temporal_allocation", ratio=0.25, frames_per_step=group)
    assert [p.name for p in paths] == ["temporal_allocation.png", "temporal_allocation.pdf"]
    assert paths[0].read_bytes().startswith(PNG_MAGIC) and paths[1].read_bytes().startswith(b"%PDF")

    fig = budget_profiles_figure.build_budget_profiles(panels, ratio=0.25, frames_per_step=group)
    assert [ax.get_title() for ax in fig.axes] == ["cut_000.mp4: 8 temporal patches \u00d7 16 tokens",
                                                   "cut_001.mp4: 8 temporal patches \u00d7 16 tokens"]
    # 16 frames make 8 points: Qwen3-VL's temporal patches of 2 frames, and the title and axes say so.
    assert fig.axes[0].get_xlabel() == "Temporal patch index (2 frames each)"
    assert fig.get_suptitle() == "Token budget per temporal patch (2 frames), R = 25%"
    tokens = video_tokens(tiny_dirs["qwen3_vl"], clips[1], 16, **QWEN_PIXELS)
    expected = budget_profiles(tokens, 0.25)
    for name, budgets in expected.items():
        (line,) = [line for line in fig.axes[1].get_lines() if line.get_gid() == f"profile:{name}"]
        assert list(line.get_ydata()) == budgets.tolist()


def test_budget_profiles_rejects_unknown_allocations() -> None:
    tokens = torch.randn(4, 3, 8, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="curvy"):
        budget_profiles(tokens, 0.5, allocations=("uniform", "curvy"))
    profiles = budget_profiles(tokens, 0.5, allocations=("random",))
    assert list(profiles) == ["random"] and int(profiles["random"].sum()) == 6
