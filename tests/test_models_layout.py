"""Unit tests of the pure re-layout functions in :mod:`vcast.models.layout`."""

from __future__ import annotations

from typing import Optional

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vcast.models.layout import SequenceLayout, compact_positions, plan_layout


def padded_mask(pads: list[int], length: int, left: bool) -> torch.Tensor:
    """LongTensor ``[B, length]`` attention mask with ``pads[b]`` pad columns on the given side."""
    columns = torch.arange(length)[None, :]
    pads_t = torch.tensor(pads)[:, None]
    real = columns >= pads_t if left else columns < (length - pads_t)
    return real.long()


def check_layout(layout: SequenceLayout, keep: torch.Tensor, mask: Optional[torch.Tensor]) -> None:
    """Assert every documented property of ``layout = plan_layout(keep, mask)``."""
    batch, length = keep.shape
    real = torch.ones_like(keep) if mask is None else mask.bool()
    kept = keep & real
    counts = kept.sum(1)
    width = int(counts.max()) if batch else 0
    right_padded = mask is not None and bool((~real[:, -1]).any())

    assert layout.width == width
    assert layout.index.shape == (batch, width) and layout.valid.shape == (batch, width)
    assert layout.index.dtype == torch.long and layout.valid.dtype == torch.bool
    assert layout.pad_left == (not right_padded)
    assert torch.equal(layout.dropped, real.sum(1) - counts)
    assert torch.equal(layout.valid.sum(1), counts)
    if width:
        assert int(layout.index.min()) >= 0 and int(layout.index.max()) < length

    slots = torch.arange(width)
    for b in range(batch):
        n = int(counts[b])
        # Pad slots are all on the padded side.
        expected_valid = slots >= width - n if layout.pad_left else slots < n
        assert torch.equal(layout.valid[b], expected_valid), (b, layout.valid[b])

    # Gathered valid tokens are the kept tokens, in order, for every supported tensor layout.
    values_2d = torch.arange(batch * length).view(batch, length) * 10 + 7
    values_3d = torch.stack([values_2d, -values_2d, values_2d * 3], -1)  # [B, L, 3]
    values_rbl = torch.stack([values_2d, values_2d + 1000])  # [R=2, B, L]
    out_2d = layout.gather(values_2d, dim=1)
    out_3d = layout.gather(values_3d, dim=1)
    out_rbl = layout.gather(values_rbl, dim=2)
    assert out_2d.shape == (batch, width)
    assert out_3d.shape == (batch, width, 3)
    assert out_rbl.shape == (2, batch, width)
    for b in range(batch):
        valid, row = layout.valid[b], kept[b]
        assert torch.equal(out_2d[b][valid], values_2d[b][row])
        assert torch.equal(out_3d[b][valid], values_3d[b][row])
        for r in range(2):
            assert torch.equal(out_rbl[r, b][valid], values_rbl[r, b][row])


# Keep-all ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("left", [True, False], ids=["left_pad", "right_pad"])
def test_keep_all_is_identity_on_padded_batch(left: bool) -> None:
    """Keeping every real token reproduces the padded batch: index = arange, valid = mask."""
    length = 7
    mask = padded_mask([2, 0, 5, 1], length, left=left)
    keep = torch.ones(4, length, dtype=torch.bool)
    layout = plan_layout(keep, mask)
    assert torch.equal(layout.index, torch.arange(length).expand(4, length))
    assert torch.equal(layout.valid, mask.bool())
    assert torch.equal(layout.dropped, torch.zeros(4, dtype=torch.long))
    assert layout.pad_left is left
    assert layout.needs_mask is True
    values = torch.randn(4, length, 5, generator=torch.Generator().manual_seed(0))
    assert torch.equal(layout.gather(values, dim=1), values)


def test_keep_all_without_mask_is_identity() -> None:
    """No mask, keep-all: identity index, all valid, no mask needed."""
    keep = torch.ones(3, 6, dtype=torch.bool)
    layout = plan_layout(keep, None)
    assert torch.equal(layout.index, torch.arange(6).expand(3, 6))
    assert bool(layout.valid.all())
    assert layout.pad_left is True and layout.needs_mask is False
    assert torch.equal(layout.dropped, torch.zeros(3, dtype=torch.long))


def test_keep_ignores_pad_tokens() -> None:
    """``keep`` True on a pad column does not make it survive."""
    mask = padded_mask([2, 0], 5, left=True)
    keep = torch.ones(2, 5, dtype=torch.bool)
    keep[1, 0] = False
    layout = plan_layout(keep, mask)
    assert layout.width == 4
    assert torch.equal(layout.valid.sum(1), torch.tensor([3, 4]))
    assert torch.equal(layout.dropped, torch.tensor([0, 1]))
    assert torch.equal(layout.index[1], torch.tensor([1, 2, 3, 4]))
    assert torch.equal(layout.index[0][layout.valid[0]], torch.tensor([2, 3, 4]))


# Random keep masks ------------------------------------------------------------------------------
@pytest.mark.parametrize("batch,length", [(1, 1), (1, 9), (2, 5), (3, 16), (5, 33), (8, 64)])
@pytest.mark.parametrize("padding", ["none", "left", "right"])
def test_random_keep_seeded(batch: int, length: int, padding: str) -> None:
    """Seeded random keep masks: every layout property holds on every row."""
    generator = torch.Generator().manual_seed(1000 * batch + length)
    for trial in range(5):
        keep = torch.rand(batch, length, generator=generator) < (0.2 + 0.15 * trial)
        mask = None
        if padding != "none":
            pads = torch.randint(0, length, (batch,), generator=generator)
            pads[int(torch.randint(0, batch, (1,), generator=generator))] = 0  # one row unpadded
            mask = padded_mask(pads.tolist(), length, left=padding == "left")
        layout = plan_layout(keep, mask)
        check_layout(layout, keep, mask)
        assert layout.needs_mask is (mask is not None or bool((keep.sum(1) != keep.sum(1).max()).any()))


@st.composite
def keep_and_mask(draw: st.DrawFn) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
    """A bool keep ``[B, L]`` and a left-/right-padded mask (every row has a real token) or None."""
    batch = draw(st.integers(1, 5))
    length = draw(st.integers(1, 12))
    bits = draw(st.lists(st.lists(st.booleans(), min_size=length, max_size=length), min_size=batch, max_size=batch))
    keep = torch.tensor(bits, dtype=torch.bool).view(batch, length)
    padding = draw(st.sampled_from(["none", "left", "right"]))
    if padding == "none":
        return keep, None
    pads = draw(st.lists(st.integers(0, length - 1), min_size=batch, max_size=batch))
    return keep, padded_mask(pads, length, left=padding == "left")


@settings(max_examples=300, deadline=None)
@given(keep_and_mask())
def test_random_keep_property(case: tuple[torch.Tensor, Optional[torch.Tensor]]) -> None:
    """Property: the plan keeps exactly the surviving real tokens, in order, padded on the input's side."""
    keep, mask = case
    layout = plan_layout(keep, mask)
    check_layout(layout, keep, mask)
    if mask is not None:
        assert layout.needs_mask is True


def test_everything_dropped_gives_empty_layout() -> None:
    """No surviving token: width 0, every real token counted as dropped."""
    mask = padded_mask([1, 0], 4, left=True)
    layout = plan_layout(torch.zeros(2, 4, dtype=torch.bool), mask)
    assert layout.width == 0
    assert torch.equal(layout.dropped, torch.tensor([3, 4]))
    assert layout.gather(torch.randn(2, 4, 3), dim=1).shape == (2, 0, 3)


# needs_mask -------------------------------------------------------------------------------------
def test_needs_mask_without_mask_and_ragged_rows() -> None:
    """No attention mask but rows pruned to different lengths: a mask is now needed."""
    keep = torch.tensor([[True, True, False, True], [True, False, False, True]])
    layout = plan_layout(keep, None)
    assert layout.needs_mask is True
    assert layout.width == 3
    assert torch.equal(layout.valid, torch.tensor([[True, True, True], [False, True, True]]))


def test_needs_mask_false_without_mask_and_equal_rows() -> None:
    """No attention mask and every row pruned to the same length: no mask needed."""
    keep = torch.tensor([[True, False, True, False], [False, True, True, False]])
    layout = plan_layout(keep, None)
    assert layout.needs_mask is False
    assert bool(layout.valid.all())
    assert torch.equal(layout.index, torch.tensor([[0, 2], [1, 2]]))


def test_needs_mask_true_with_mask() -> None:
    """With an attention mask the plan always asks for one, even without padding or raggedness."""
    keep = torch.tensor([[True, False, True], [True, True, False]])
    layout = plan_layout(keep, torch.ones(2, 3, dtype=torch.long))
    assert layout.needs_mask is True
    assert bool(layout.valid.all())


# compact_positions ------------------------------------------------------------------------------
def test_compact_positions_left_and_right() -> None:
    """Valid slots are numbered 0..n-1 in order; pad slots get 0."""
    valid = torch.tensor([[False, False, True, True, True], [True, True, True, True, True],
                          [True, True, False, False, False]])
    expected = torch.tensor([[0, 0, 0, 1, 2], [0, 1, 2, 3, 4], [0, 1, 0, 0, 0]])
    positions = compact_positions(valid)
    assert positions.dtype == torch.long
    assert torch.equal(positions, expected)


def test_compact_positions_of_random_layouts() -> None:
    """On planned layouts, valid slots read 0..n-1 and pad slots 0."""
    generator = torch.Generator().manual_seed(7)
    for left in (True, False):
        keep = torch.rand(6, 20, generator=generator) < 0.5
        mask = padded_mask([0, 3, 7, 1, 0, 12], 20, left=left)
        valid = plan_layout(keep, mask).valid
        positions = compact_positions(valid)
        for b in range(6):
            n = int(valid[b].sum())
            assert torch.equal(positions[b][valid[b]], torch.arange(n))
            assert bool((positions[b][~valid[b]] == 0).all())


# Bad input --------------------------------------------------------------------------------------
def test_non_bool_keep_raises() -> None:
    with pytest.raises(ValueError, match=r"keep must be a 2-D bool tensor.*torch\.int64"):
        plan_layout(torch.ones(2, 3, dtype=torch.long), None)


def test_one_dimensional_keep_raises() -> None:
    with pytest.raises(ValueError, match=r"keep must be a 2-D bool tensor.*\(5,\)"):
        plan_layout(torch.ones(5, dtype=torch.bool), None)


def test_mask_shape_mismatch_raises() -> None:
    with pytest.raises(ValueError, match=r"attention_mask shape \(2, 4\) does not match keep \(2, 3\)"):
        plan_layout(torch.ones(2, 3, dtype=torch.bool), torch.ones(2, 4, dtype=torch.long))


def test_gather_wrong_batch_raises() -> None:
    layout = plan_layout(torch.ones(2, 3, dtype=torch.bool), None)
    with pytest.raises(ValueError, match=r"expected batch 2 at dim 0"):
        layout.gather(torch.zeros(3, 3), dim=1)
    with pytest.raises(ValueError, match=r"expected batch 2 at dim -1"):
        layout.gather(torch.zeros(2, 3), dim=0)
