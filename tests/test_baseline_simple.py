"""The simple reference compressors: random, uniform, first_2x2, random_2x2, avgpool_2x2."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

import vcast
from vcast.registry import method_inputs, method_params

PRUNERS = ("random", "uniform")
CELL_METHODS = ("first_2x2", "random_2x2", "avgpool_2x2")

# (T, P, r) -> floor(r * T * P), worked by hand: 32, floor(36.75), 126, floor(10.5).
BUDGET_CASES = [((8, 16, 0.25), 32), ((5, 49, 0.15), 36), ((12, 30, 0.35), 126), ((3, 7, 0.5), 10)]

# (h, w) -> ceil(h/2) * ceil(w/2) cells per frame.
CELL_CASES = [((4, 4), 4), ((3, 5), 6), ((5, 3), 6), ((7, 7), 16), ((6, 10), 15), ((16, 26), 104),
              ((1, 1), 1), ((1, 2), 1), ((1, 3), 2), ((3, 1), 2), ((2, 2), 1)]


def video(num_frames: int, tokens_per_frame: int, dim: int = 8, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(num_frames, tokens_per_frame, dim, generator=generator)


def check_selection(sel: vcast.Selection, num_frames: int, tokens_per_frame: int, expected: int) -> None:
    """Count, order, uniqueness, range and per-frame budgets of a selection."""
    keep = sel.keep
    assert keep.dtype == torch.long
    assert keep.numel() == expected
    assert int(sel.budgets.sum()) == expected
    assert sel.budgets.shape == (num_frames,)
    if keep.numel() > 1:
        assert bool((keep[1:] > keep[:-1]).all()), "keep must be strictly ascending (sorted, unique)"
    if keep.numel():
        assert 0 <= int(keep.min()) and int(keep.max()) < num_frames * tokens_per_frame
    counted = torch.bincount(keep // tokens_per_frame, minlength=num_frames)
    assert torch.equal(counted, sel.budgets)


def cells_of(h: int, w: int) -> list[list[int]]:
    """The 2x2 cells of an (h, w) grid, by plain Python arithmetic (independent of the helper)."""
    cells = []
    for a in range(0, h, 2):
        for b in range(0, w, 2):
            cells.append([r * w + c for r in range(a, min(a + 2, h)) for c in range(b, min(b + 2, w))])
    return cells


# ---------------------------------------------------------------- registration

def test_registered_with_their_inputs_and_params() -> None:
    names = vcast.available_methods()
    for name in PRUNERS + CELL_METHODS:
        assert name in names
    assert method_inputs("random") == () and method_inputs("uniform") == ()
    for name in CELL_METHODS:
        assert method_inputs(name) == ("grid",)
    assert method_params("random") == {"seed": 0}
    assert method_params("uniform") == {}
    assert method_params("random_2x2") == {"seed": 0}
    assert method_params("first_2x2") == {} and method_params("avgpool_2x2") == {}


# ---------------------------------------------------------------- random / uniform: counts

@pytest.mark.parametrize("method", PRUNERS)
@pytest.mark.parametrize("shape_ratio, expected", BUDGET_CASES)
def test_pruners_keep_exactly_floor_rTP(method: str, shape_ratio: tuple, expected: int) -> None:
    num_frames, tokens_per_frame, ratio = shape_ratio
    sel = vcast.select(video(num_frames, tokens_per_frame), ratio, method=method)
    check_selection(sel, num_frames, tokens_per_frame, expected)
    assert sel.tokens is None  # pruning


@pytest.mark.parametrize("method", PRUNERS)
@pytest.mark.parametrize("tokens_per_frame, ratio, expected", [(1, 0.5, 0), (1, 1.0, 1), (2, 0.5, 1),
                                                               (3, 0.5, 1), (3, 0.7, 2), (3, 1.0, 3)])
def test_pruners_single_frame_tiny_p(method: str, tokens_per_frame: int, ratio: float, expected: int) -> None:
    sel = vcast.select(video(1, tokens_per_frame), ratio, method=method)
    check_selection(sel, 1, tokens_per_frame, expected)


@pytest.mark.parametrize("method", PRUNERS)
def test_pruners_ratio_one_keeps_everything(method: str) -> None:
    sel = vcast.select(video(4, 9), 1.0, method=method)
    assert torch.equal(sel.keep, torch.arange(36))


@pytest.mark.parametrize("method", PRUNERS)
def test_pruners_deterministic_and_bf16_same_keep(method: str) -> None:
    frames = video(6, 20, seed=3)
    first = vcast.select(frames, 0.3, method=method)
    again = vcast.select(frames, 0.3, method=method)
    assert torch.equal(first.keep, again.keep)
    low = vcast.select(frames.to(torch.bfloat16), 0.3, method=method)
    assert torch.equal(low.keep, first.keep)
    assert torch.equal(low.budgets, first.budgets)


@pytest.mark.parametrize("method", PRUNERS)
def test_pruners_ignore_the_features(method: str) -> None:
    # Content-blind: a different video of the same shape gives the same keep.
    a = vcast.select(video(5, 12, seed=1), 0.4, method=method)
    b = vcast.select(video(5, 12, seed=2) * 100, 0.4, method=method)
    assert torch.equal(a.keep, b.keep)


# ---------------------------------------------------------------- random

def test_random_seeded() -> None:
    frames = video(8, 16)
    same = [vcast.select(frames, 0.25, method="random", seed=7).keep for _ in range(2)]
    assert torch.equal(same[0], same[1])
    other = vcast.select(frames, 0.25, method="random", seed=8).keep
    default = vcast.select(frames, 0.25, method="random").keep
    assert not torch.equal(same[0], other)
    assert torch.equal(default, vcast.select(frames, 0.25, method="random", seed=0).keep)


def test_random_is_a_cpu_randperm_prefix() -> None:
    # The definition: the first B entries of randperm(T * P) from a CPU generator seeded with seed.
    frames = video(5, 49)
    expected = torch.randperm(5 * 49, generator=torch.Generator().manual_seed(11))[:36]
    sel = vcast.select(frames, 0.15, method="random", seed=11)
    assert torch.equal(sel.keep, torch.sort(expected).values)


def test_random_roughly_uniform_over_frames_and_tokens() -> None:
    # T=10, P=100, r=0.3: 300 kept, 30 per frame and 3 per token column expected.
    num_frames, tokens_per_frame, seeds = 10, 100, 40
    frames = video(num_frames, tokens_per_frame, dim=2)
    per_frame = torch.zeros(num_frames)
    per_token = torch.zeros(tokens_per_frame)
    for seed in range(seeds):
        sel = vcast.select(frames, 0.3, method="random", seed=seed)
        assert int(sel.budgets.sum()) == 300
        # One draw: hypergeometric, sd ~ 4.3 per frame; 30 +- 15 is > 3 sd.
        assert int(sel.budgets.min()) >= 15 and int(sel.budgets.max()) <= 45
        assert int(sel.budgets.max()) > int(sel.budgets.min())  # not a per-frame quota
        per_frame += sel.budgets.float()
        per_token += torch.bincount(sel.keep % tokens_per_frame, minlength=tokens_per_frame).float()
    # Over 40 seeds: mean 30 per frame (sd ~0.7), 3 per token (sd ~0.26).
    assert torch.allclose(per_frame / seeds, torch.full((num_frames,), 30.0), atol=3.0)
    assert torch.allclose(per_token / seeds, torch.full((tokens_per_frame,), 3.0), atol=1.5)


@pytest.mark.parametrize("method", ["random", "random_2x2"])
@pytest.mark.parametrize("seed", [-1, 1.5, True, "0", 2**64])
def test_bad_seed_names_seed(method: str, seed: object) -> None:
    with pytest.raises(ValueError, match="seed"):
        vcast.select(video(2, 16), 0.25, method=method, seed=seed)


@pytest.mark.parametrize("method", PRUNERS + CELL_METHODS)
def test_unknown_parameter_is_named(method: str) -> None:
    with pytest.raises(ValueError, match="bogus"):
        vcast.select(video(2, 16), 0.25, method=method, bogus=1)


# ---------------------------------------------------------------- uniform

@pytest.mark.parametrize("shape_ratio, expected", BUDGET_CASES)
def test_uniform_budgets_equal_remainder_to_earliest(shape_ratio: tuple, expected: int) -> None:
    num_frames, tokens_per_frame, ratio = shape_ratio
    sel = vcast.select(video(num_frames, tokens_per_frame), ratio, method="uniform")
    base, extra = divmod(expected, num_frames)
    want = torch.tensor([base + 1] * extra + [base] * (num_frames - extra))
    assert torch.equal(sel.budgets, want)
    assert int(sel.budgets.max()) - int(sel.budgets.min()) <= 1
    assert torch.allclose(sel.frame_weights, torch.full((num_frames,), 1.0 / num_frames))


def test_uniform_known_indices() -> None:
    # P=16, b=4: (j + 0.5) * 4 = 2, 6, 10, 14 in every frame.
    sel = vcast.select(video(8, 16), 0.25, method="uniform")
    assert torch.equal(sel.mask().nonzero()[:, 1].view(8, 4), torch.tensor([[2, 6, 10, 14]] * 8))
    # T=3, P=7, r=0.5: B=10 -> budgets (4, 3, 3); b=4: floor(0.875, 2.625, 4.375, 6.125) = 0, 2, 4, 6;
    # b=3: floor(1.17, 3.5, 5.83) = 1, 3, 5.
    sel = vcast.select(video(3, 7), 0.5, method="uniform")
    assert sel.keep.tolist() == [0, 2, 4, 6, 7 + 1, 7 + 3, 7 + 5, 14 + 1, 14 + 3, 14 + 5]


@pytest.mark.parametrize("tokens_per_frame, ratio", [(49, 0.15), (30, 0.35), (196, 0.1), (100, 0.73)])
def test_uniform_evenly_spread_in_each_frame(tokens_per_frame: int, ratio: float) -> None:
    num_frames = 4
    sel = vcast.select(video(num_frames, tokens_per_frame, dim=2), ratio, method="uniform")
    mask = sel.mask()
    for t in range(num_frames):
        b = int(sel.budgets[t])
        kept = mask[t].nonzero().view(-1).tolist()
        assert kept == [math.floor((j + 0.5) * tokens_per_frame / b) for j in range(b)]
        gaps = [y - x for x, y in itertools.pairwise(kept)]
        assert max(gaps) - min(gaps) <= 1  # evenly spaced
        assert set(gaps) <= {tokens_per_frame // b, -(-tokens_per_frame // b)}


# ---------------------------------------------------------------- 2x2 cell methods: counts, shapes

def grid_video(num_frames: int, grid: tuple[int, int], dim: int = 4, seed: int = 0) -> torch.Tensor:
    return video(num_frames, grid[0] * grid[1], dim=dim, seed=seed)


@pytest.mark.parametrize("method", CELL_METHODS)
@pytest.mark.parametrize("grid, cells", CELL_CASES)
@pytest.mark.parametrize("num_frames", [1, 3])
def test_cell_methods_keep_one_per_cell(method: str, grid: tuple, cells: int, num_frames: int) -> None:
    frames = grid_video(num_frames, grid)
    sel = vcast.select(frames, 0.25, method=method, grid=grid)
    check_selection(sel, num_frames, grid[0] * grid[1], num_frames * cells)
    assert torch.equal(sel.budgets, torch.full((num_frames,), cells))
    if method == "avgpool_2x2":
        assert sel.tokens is not None and sel.tokens.shape == (num_frames * cells, frames.shape[-1])
        assert sel.tokens.dtype == torch.float32
    else:
        assert sel.tokens is None


@pytest.mark.parametrize("method", CELL_METHODS)
@pytest.mark.parametrize("tokens_per_frame", [1, 4, 16, 49])
def test_cell_methods_square_grid_when_none(method: str, tokens_per_frame: int) -> None:
    side = math.isqrt(tokens_per_frame)
    frames = video(2, tokens_per_frame)
    inferred = vcast.select(frames, 0.25, method=method)
    given = vcast.select(frames, 0.25, method=method, grid=(side, side))
    assert torch.equal(inferred.keep, given.keep)
    assert inferred.keep.numel() == 2 * ((side + 1) // 2) ** 2


@pytest.mark.parametrize("method", CELL_METHODS)
def test_cell_methods_grid_as_list_or_tensor(method: str) -> None:
    frames = grid_video(2, (3, 5))
    base = vcast.select(frames, 0.25, method=method, grid=(3, 5)).keep
    assert torch.equal(vcast.select(frames, 0.25, method=method, grid=[3, 5]).keep, base)
    assert torch.equal(vcast.select(frames, 0.25, method=method, grid=torch.tensor([3, 5])).keep, base)


@pytest.mark.parametrize("method", CELL_METHODS)
def test_cell_methods_deterministic_and_bf16(method: str) -> None:
    frames = grid_video(4, (6, 10), dim=16, seed=5)
    first = vcast.select(frames, 0.25, method=method, grid=(6, 10))
    again = vcast.select(frames, 0.25, method=method, grid=(6, 10))
    assert torch.equal(first.keep, again.keep)
    low_frames = frames.to(torch.bfloat16)
    low = vcast.select(low_frames, 0.25, method=method, grid=(6, 10))
    upcast = vcast.select(low_frames.float(), 0.25, method=method, grid=(6, 10))
    assert torch.equal(low.keep, first.keep) and torch.equal(low.keep, upcast.keep)
    if method == "avgpool_2x2":
        assert torch.equal(first.tokens, again.tokens)
        assert low.tokens.dtype == torch.float32
        assert torch.equal(low.tokens, upcast.tokens)  # computed in float32 from the exact upcast


# ---------------------------------------------------------------- 2x2 cell methods: validation

@pytest.mark.parametrize("method", CELL_METHODS)
@pytest.mark.parametrize("ratio", [0.1, 0.24, 0.3, 0.5, 1.0])
def test_cell_methods_refuse_other_ratios(method: str, ratio: float) -> None:
    with pytest.raises(ValueError, match=r"ratio.*0\.25|0\.25.*ratio"):
        vcast.select(video(2, 16), ratio, method=method)


@pytest.mark.parametrize("method", CELL_METHODS)
def test_cell_methods_need_grid_when_p_not_square(method: str) -> None:
    with pytest.raises(ValueError, match="grid"):
        vcast.select(video(2, 15), 0.25, method=method)
    with pytest.raises(ValueError, match="grid"):
        vcast.select(video(1, 2), 0.25, method=method)


@pytest.mark.parametrize("method", CELL_METHODS)
@pytest.mark.parametrize("grid", [(3, 4), (5, 5), (15,), (1, 3, 5), (0, 15), (-3, -5), (3.0, 5.0),
                                  (True, 15), "35", 15])
def test_cell_methods_bad_grid_names_grid(method: str, grid: object) -> None:
    with pytest.raises(ValueError, match="grid"):
        vcast.select(video(2, 15), 0.25, method=method, grid=grid)


# ---------------------------------------------------------------- 2x2 cell methods: known answers

def test_first_2x2_known_indices() -> None:
    sel = vcast.select(grid_video(3, (4, 4)), 0.25, method="first_2x2", grid=(4, 4))
    for t in range(3):
        assert sel.mask()[t].nonzero().view(-1).tolist() == [0, 2, 8, 10]
    # 3x5: rows 0 and 2, columns 0, 2, 4 -> 0, 2, 4, 10, 12, 14.
    sel = vcast.select(grid_video(2, (3, 5)), 0.25, method="first_2x2", grid=(3, 5))
    assert sel.keep.tolist() == [0, 2, 4, 10, 12, 14, 15, 17, 19, 25, 27, 29]
    # 5x3 (transposed): rows 0, 2, 4 and columns 0, 2 -> 0, 2, 6, 8, 12, 14.
    sel = vcast.select(grid_video(1, (5, 3)), 0.25, method="first_2x2", grid=(5, 3))
    assert sel.keep.tolist() == [0, 2, 6, 8, 12, 14]


@pytest.mark.parametrize("grid", [(4, 4), (3, 5), (5, 3), (7, 7), (1, 3), (2, 6)])
def test_random_2x2_one_member_of_every_cell(grid: tuple) -> None:
    h, w = grid
    num_frames = 6
    for seed in range(3):
        sel = vcast.select(grid_video(num_frames, grid), 0.25, method="random_2x2", grid=grid, seed=seed)
        mask = sel.mask()
        for t in range(num_frames):
            for cell in cells_of(h, w):
                assert int(mask[t, cell].sum()) == 1, f"frame {t} cell {cell}"


def test_random_2x2_seeded_and_not_just_first() -> None:
    frames = grid_video(8, (6, 6))
    a = vcast.select(frames, 0.25, method="random_2x2", grid=(6, 6), seed=4).keep
    b = vcast.select(frames, 0.25, method="random_2x2", grid=(6, 6), seed=4).keep
    c = vcast.select(frames, 0.25, method="random_2x2", grid=(6, 6), seed=5).keep
    default = vcast.select(frames, 0.25, method="random_2x2", grid=(6, 6)).keep
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert torch.equal(default, vcast.select(frames, 0.25, method="random_2x2", grid=(6, 6), seed=0).keep)
    first = vcast.select(frames, 0.25, method="first_2x2", grid=(6, 6)).keep
    assert not torch.equal(a, first)
    # Frames draw independently: not the same pattern in every frame.
    mask = vcast.select(frames, 0.25, method="random_2x2", grid=(6, 6), seed=4).mask()
    assert any(not torch.equal(mask[0], mask[t]) for t in range(1, 8))


def test_random_2x2_uniform_within_cells() -> None:
    # 3x3 grid: cells {0,1,3,4}, {2,5}, {6,7}, {8}. Over 4000 frames each member of the full cell
    # is kept ~1000 times (sd ~27), each member of a 2-cell ~2000 times (sd ~32), token 8 always.
    num_frames = 4000
    sel = vcast.select(grid_video(num_frames, (3, 3), dim=1), 0.25, method="random_2x2", grid=(3, 3))
    hits = sel.mask().sum(dim=0).float()
    for token in (0, 1, 3, 4):
        assert abs(float(hits[token]) - 1000) < 150
    for token in (2, 5, 6, 7):
        assert abs(float(hits[token]) - 2000) < 180
    assert float(hits[8]) == num_frames


def hand_pooled(frames: torch.Tensor, grid: tuple[int, int]) -> tuple[list[int], torch.Tensor]:
    """Per-frame top-left positions and cell means, one cell at a time (reference)."""
    num_frames, tokens_per_frame, _ = frames.shape
    positions, means = [], []
    for t in range(num_frames):
        for cell in cells_of(*grid):
            positions.append(t * tokens_per_frame + min(cell))
            means.append(frames[t, cell].double().mean(dim=0))
    return positions, torch.stack(means).float()


def test_avgpool_2x2_small_example_by_hand() -> None:
    # 2x4 grid, D=1, tokens 0..7 valued 1, 2, 3, 4 / 5, 6, 7, 8 (rows).
    # Cells {0,1,4,5} -> (1+2+5+6)/4 = 3.5 at 0; {2,3,6,7} -> (3+4+7+8)/4 = 5.5 at 2.
    frames = torch.arange(1.0, 9.0).view(1, 8, 1)
    sel = vcast.select(frames, 0.25, method="avgpool_2x2", grid=(2, 4))
    assert sel.keep.tolist() == [0, 2]
    assert torch.equal(sel.tokens, torch.tensor([[3.5], [5.5]]))
    # 3x5 grid, D=1, value = index: cells {0,1,5,6} 3.0, {2,3,7,8} 5.0, {4,9} 6.5, {10,11} 10.5,
    # {12,13} 12.5, {14} 14.0 at top-lefts 0, 2, 4, 10, 12, 14.
    frames = torch.arange(15.0).view(1, 15, 1)
    sel = vcast.select(frames, 0.25, method="avgpool_2x2", grid=(3, 5))
    assert sel.keep.tolist() == [0, 2, 4, 10, 12, 14]
    assert torch.equal(sel.tokens.view(-1), torch.tensor([3.0, 5.0, 6.5, 10.5, 12.5, 14.0]))


@pytest.mark.parametrize("grid", [(4, 4), (3, 5), (5, 3), (7, 7), (1, 1), (1, 3)])
def test_avgpool_2x2_equals_cell_means(grid: tuple) -> None:
    frames = grid_video(3, grid, dim=6, seed=9)
    sel = vcast.select(frames, 0.25, method="avgpool_2x2", grid=grid)
    positions, means = hand_pooled(frames, grid)
    assert sel.keep.tolist() == positions
    assert torch.allclose(sel.tokens, means, atol=1e-6)
    # Same places as first_2x2 (the merged token sits at its cell's top-left source).
    assert torch.equal(sel.keep, vcast.select(frames, 0.25, method="first_2x2", grid=grid).keep)


def test_avgpool_2x2_output_is_what_the_llm_gets() -> None:
    frames = grid_video(2, (4, 4), dim=3).to(torch.bfloat16)
    sel = vcast.select(frames, 0.25, method="avgpool_2x2", grid=(4, 4))
    out = sel.output(frames)
    assert out.dtype == torch.bfloat16 and out.shape == (8, 3)
    assert sel.merges
