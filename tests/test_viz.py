"""vcast.viz: dimmed cells by known answer, cell edges that cover every pixel once, frames per step,
masks from a Selection and a KeptRecord, figures written as PNG and PDF, and bad shapes named."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import vcast
from vcast.kept_records import Geometry, KeptRecord, from_json, to_json
from vcast.viz import (cell_edges, default_steps, draw_kept, draw_record, kept_every_frame, kept_frames, kept_grid,
                       record_frames, record_grid, selection_grid)


def _frames(n: int, height: int = 8, width: int = 8, seed: int = 0) -> np.ndarray:
    """Random uint8 frames [n, height, width, 3], none of them dark (so dimming always changes them)."""
    return np.random.default_rng(seed).integers(100, 256, size=(n, height, width, 3), dtype=np.uint8)


def _record(t: int = 4, h: int = 2, w: int = 3, fps: int = 2, stages: bool = True, seed: int = 0) -> KeptRecord:
    rng = np.random.default_rng(seed)
    kept = rng.random((t, h, w)) < 0.5
    first = kept & (rng.random((t, h, w)) < 0.7)  # each stage keeps a subset of the one before
    stage_masks = [(3, first), (9, first & (rng.random((t, h, w)) < 0.5))] if stages else []
    geometry = Geometry(family="qwen3_vl", grid=(t, h, w), frames_per_step=fps, frame_size=(64, 96))
    return KeptRecord(task="synth", doc_id=7, video=0, method="fastv", geometry=geometry,
                      frame_indices=list(range(0, 2 * t * fps, 2)), budgets=[int(m.sum()) for m in kept],
                      kept=kept, stages=stage_masks)


def test_known_answer_2x2_grid_on_8x8_frame() -> None:
    frames = _frames(1)
    mask = np.array([[[True, False], [True, True]]])  # the top-right quarter dropped (rows first)
    out = kept_frames(frames, mask, dim=0.5)
    assert out.shape == (1, 8, 8, 3) and out.dtype == np.uint8
    dropped = np.zeros((8, 8), bool)
    dropped[:4, 4:] = True
    assert np.array_equal(out[0][~dropped], frames[0][~dropped])
    expected = np.rint(frames[0][dropped].astype(np.float32) * 0.5).astype(np.uint8)
    assert np.array_equal(out[0][dropped], expected)


def test_fill_blends_dropped_cells_to_grey() -> None:
    frames = _frames(1)
    out = kept_frames(frames, np.zeros((1, 2, 2), bool), dim=0.0, fill=128)
    assert (out == 128).all()
    assert np.array_equal(kept_frames(frames, np.ones((1, 2, 2), bool)), frames)


@pytest.mark.parametrize("pixels, cells", [(10, 3), (7, 7), (100, 6), (5, 4), (448, 14)])
def test_uneven_cells_cover_every_pixel_once(pixels: int, cells: int) -> None:
    edges = cell_edges(pixels, cells)
    assert edges[0] == 0 and edges[-1] == pixels and (np.diff(edges) >= 1).all()
    assert np.diff(edges).max() - np.diff(edges).min() <= 1  # as equal as whole pixels allow


def test_uneven_cells_on_a_frame() -> None:
    # 10 x 7 pixels, 3 x 2 tokens: dropping each token alone dims exactly its cell, and the cells
    # of all tokens together are every pixel once.
    frames = _frames(1, height=10, width=7)
    count = np.zeros((10, 7), int)
    for i in range(3):
        for j in range(2):
            mask = np.ones((1, 3, 2), bool)
            mask[0, i, j] = False
            changed = (kept_frames(frames, mask) != frames)[0].any(axis=-1)
            count += changed
            rows, cols = np.nonzero(changed)
            assert rows.min() == cell_edges(10, 3)[i] and rows.max() == cell_edges(10, 3)[i + 1] - 1
            assert cols.min() == cell_edges(7, 2)[j] and cols.max() == cell_edges(7, 2)[j + 1] - 1
    assert (count == 1).all()


def test_frames_per_step_picks_each_steps_first_frame() -> None:
    frames = np.stack([np.full((4, 4, 3), 10 * (i + 1), np.uint8) for i in range(6)])  # frame i is 10(i+1)
    out = kept_frames(frames, np.ones((3, 2, 2), bool), frames_per_step=2)
    assert [int(f[0, 0, 0]) for f in out] == [10, 30, 50]
    # a last partial step (Qwen3-VL pads it) is allowed; a frame short of a whole step is not
    assert kept_frames(frames[:5], np.ones((3, 2, 2), bool), frames_per_step=2).shape[0] == 3
    with pytest.raises(ValueError, match="4 frames do not make T = 3"):
        kept_frames(frames[:4], np.ones((3, 2, 2), bool), frames_per_step=2)


def test_selection_grid_is_the_selection_mask() -> None:
    features = torch.randn(6, 12, 16, generator=torch.Generator().manual_seed(0))
    sel = vcast.select(features, 0.3)
    grid = selection_grid(sel, (3, 4))
    assert grid.shape == (6, 3, 4) and grid.dtype == np.bool_
    assert np.array_equal(grid, sel.mask().numpy().reshape(6, 3, 4))
    assert grid.reshape(6, -1).sum(axis=1).tolist() == sel.budgets.tolist()
    with pytest.raises(ValueError, match=r"grid_hw \(4, 4\) holds 16 tokens.*P = 12"):
        selection_grid(sel, (4, 4))


def test_record_round_trips_and_draws(tmp_path) -> None:
    record = _record()
    again = from_json(to_json(record))
    assert np.array_equal(record_grid(again), record.stages[-1][1])  # default: the last stage
    assert np.array_equal(record_grid(again, None), record.kept)
    assert np.array_equal(record_grid(again, 3), record.stages[0][1])
    with pytest.raises(ValueError, match=r"stage 5.*layers \[3, 9\]"):
        record_grid(again, 5)
    frames = _frames(8, height=64, width=96)  # T * frames_per_step = 4 * 2 given frames
    shown = record_frames(again, frames, stage=None)
    assert np.array_equal(shown, kept_frames(frames, record.kept, frames_per_step=2))
    # the whole video: frame_indices (0, 2, 4, ...) pick the given frames
    video = np.repeat(frames, 2, axis=0)
    assert np.array_equal(record_frames(again, video, source=True), record_frames(again, frames))
    figure = draw_record(again, frames, path=tmp_path / "record.png")
    assert (tmp_path / "record.png").stat().st_size > 0
    labels = [ax.get_ylabel() for ax in figure.axes if (ax.get_gid() or "").startswith("frame:")]
    kept = int(record.stages[-1][1].sum())
    assert labels[0].startswith(f"fastv\n{kept}/24") and "layers \u2265 9" in labels[0]


def test_record_without_stages_draws_its_kept_set() -> None:
    record = _record(stages=False)
    assert np.array_equal(record_grid(record), record.kept)


def test_draw_kept_writes_png_and_pdf_with_a_row_per_method(tmp_path) -> None:
    features = torch.randn(10, 16, 8, generator=torch.Generator().manual_seed(1))
    frames = _frames(10, height=32, width=48)
    masks = {"vcast": vcast.select(features, 0.25), "random": vcast.select(features, 0.25, method="random", seed=0),
             "array": np.ones((10, 4, 4), bool)}
    for suffix in ("png", "pdf"):
        path = tmp_path / "out" / f"kept.{suffix}"
        figure = draw_kept(frames, masks, grid_hw=(4, 4), steps=[0, 4, 9], title="t", path=path)
        assert path.stat().st_size > 0
        assert not list(path.parent.glob(".*.tmp"))  # the atomic write left no temporary
    frame_axes = [ax.get_gid() for ax in figure.axes if ax.get_gid().startswith("frame:")]
    assert frame_axes == [f"frame:{m}:{t}" for m in masks for t in (0, 4, 9)]
    assert [ax.get_gid() for ax in figure.axes if ax.get_gid().startswith("budget:")] == [f"budget:{m}" for m in masks]
    rows = {round(ax.get_position().y0, 4) for ax in figure.axes if ax.get_gid().startswith("frame:")}
    assert len(rows) == len(masks)  # one row of frame axes per method
    bars = [ax for ax in figure.axes if ax.get_gid() == "budget:vcast"][0].patches
    assert [int(b.get_height()) for b in bars] == masks["vcast"].budgets.tolist()
    first_of_array = [ax for ax in figure.axes if ax.get_gid() == "frame:array:0"][0]
    assert first_of_array.get_ylabel() == "array\n160/160 (100%)"
    plain = draw_kept(frames, masks, grid_hw=(4, 4), budgets=False)
    assert not [ax for ax in plain.axes if ax.get_gid().startswith("budget:")]
    assert len(plain.axes) == 3 * 8  # default: 8 evenly spaced steps of 10


def test_default_steps() -> None:
    assert default_steps(5) == [0, 1, 2, 3, 4]
    steps = default_steps(64)
    assert len(steps) == 8 and steps[0] == 0 and steps[-1] == 63


@pytest.mark.parametrize("frames, mask, match", [
    (np.zeros((2, 8, 8), np.uint8), np.ones((2, 2, 2), bool), r"uint8 \[N, H, W, 3\], got uint8 \(2, 8, 8\)"),
    (np.zeros((2, 8, 8, 3), np.float32), np.ones((2, 2, 2), bool), r"got float32"),
    (np.zeros((2, 8, 8, 3), np.uint8), np.ones((2, 4), bool), r"shape \(2, 4\)"),
    (np.zeros((2, 8, 8, 3), np.uint8), np.ones((2, 2, 2), np.uint8), r"dtype uint8"),
    (np.zeros((3, 8, 8, 3), np.uint8), np.ones((2, 2, 2), bool), r"3 frames do not make T = 2"),
    (np.zeros((1, 4, 4, 3), np.uint8), np.ones((1, 8, 2), bool), r"8 x 2 token grid on 4 x 4 pixel"),
])
def test_bad_shapes_are_named(frames: np.ndarray, mask: np.ndarray, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        kept_frames(frames, mask)


def test_draw_kept_refusals(tmp_path) -> None:
    frames = _frames(4)
    sel = vcast.select(torch.randn(4, 4, 8, generator=torch.Generator().manual_seed(0)), 0.5)
    with pytest.raises(ValueError, match="pass grid_hw"):
        draw_kept(frames, {"vcast": sel})
    with pytest.raises(ValueError, match=r"different numbers of temporal steps T: \{'a': 4, 'b': 2\}"):
        draw_kept(frames[:2], {"a": np.ones((4, 2, 2), bool), "b": np.ones((2, 2, 2), bool)})
    with pytest.raises(ValueError, match=r"steps \[4\]"):
        draw_kept(frames, {"vcast": sel}, grid_hw=(2, 2), steps=[4])
    with pytest.raises(ValueError, match=r"kept\.svg"):
        draw_kept(frames, {"vcast": sel}, grid_hw=(2, 2), path=tmp_path / "kept.svg")
    with pytest.raises(ValueError, match=r"mask shape \(4, 4\).*grid_hw \(3, 2\)"):
        kept_grid(np.ones((4, 4), bool), (3, 2))
    with pytest.raises(ValueError, match="dim must be in"):
        kept_frames(frames, np.ones((4, 2, 2), bool), dim=1.5)
    assert not list(tmp_path.iterdir())


def test_every_frame_of_a_step_is_drawn_so_a_brief_event_shows() -> None:
    """A Qwen3-VL token covers two frames: a yellow square only in frame 3 (the second frame of step
    1) is in no first-of-step frame, but every-frame drawing shows it, under its step's mask (kept:
    as it was; dropped: dimmed), and a last partial step (5 frames for 3 steps) is drawn too."""
    frames = np.full((5, 8, 8, 3), 40, np.uint8)
    frames[3, 2:6, 2:6] = (250, 220, 0)  # the brief event
    kept = np.ones((3, 2, 2), bool)
    firsts = kept_frames(frames, kept, frames_per_step=2)
    assert not (firsts == (250, 220, 0)).all(axis=-1).any()  # the first frames of steps never show it
    every = kept_every_frame(frames, kept, frames_per_step=2)
    assert every.shape == frames.shape and np.array_equal(every, frames)
    dropped = kept.copy()
    dropped[1] = False  # the event's step dropped: both its frames dimmed alike
    dimmed = kept_every_frame(frames, dropped, frames_per_step=2, dim=0.5)
    assert np.array_equal(dimmed[2], (frames[2] * 0.5).astype(np.uint8))
    assert np.array_equal(dimmed[3], (frames[3] * 0.5).astype(np.uint8))
    assert np.array_equal(dimmed[[0, 1, 4]], frames[[0, 1, 4]])
    with pytest.raises(ValueError, match="do not make T = 3 steps"):
        kept_every_frame(frames[:3], kept, frames_per_step=2)
