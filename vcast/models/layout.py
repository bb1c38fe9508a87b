"""Re-lay a padded batch after pruning: each row keeps its surviving tokens, in order, re-padded.

Pure tensor code. Given which of the ``[B, L]`` tokens survive, :func:`plan_layout` returns a
gather index ``[B, L']`` (``L'`` = the longest surviving row) and a validity mask; padding goes
on the side the batch was padded on. When every real token survives, the plan is the identity
on the real tokens and puts pad slots exactly where the original pads were, so a keep-all
pruning reproduces the input bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch


@dataclass(frozen=True)
class SequenceLayout:
    """Where each token of the pruned batch comes from.

    Attributes:
        index: LongTensor ``[B, L']``: column of the original ``[B, L]`` batch each slot reads.
            Pad slots read some valid column (their content is masked out).
        valid: BoolTensor ``[B, L']``: True where a surviving token sits, False in pad slots.
        dropped: LongTensor ``[B]``: real tokens removed from each row.
        pad_left: whether pad slots come first (left padding, the generation convention).
        needs_mask: whether any row has pad slots (then an attention mask is required).
    """

    index: torch.Tensor
    valid: torch.Tensor
    dropped: torch.Tensor
    pad_left: bool
    needs_mask: bool

    @property
    def width(self) -> int:
        """``L'``."""
        return int(self.index.shape[1])

    def gather(self, values: torch.Tensor, dim: int) -> torch.Tensor:
        """Re-lay ``values`` whose dims ``dim - 1, dim`` are ``[B, L]`` into ``[B, L']``.

        ``dim`` is the sequence dimension (1 for ``[B, L, D]`` or ``[B, L]``; 2 for ``[R, B, L]``).
        """
        if dim < 1 or values.shape[dim - 1] != self.index.shape[0]:
            raise ValueError(f"expected batch {self.index.shape[0]} at dim {dim - 1}, got shape {tuple(values.shape)}")
        index = self.index.to(values.device)
        shape = [1] * values.dim()
        shape[dim - 1], shape[dim] = index.shape
        index = index.view(shape).expand(*values.shape[:dim], index.shape[1], *values.shape[dim + 1 :])
        return values.gather(dim, index)


def plan_layout(keep: torch.Tensor, attention_mask: Optional[torch.Tensor]) -> SequenceLayout:
    """Plan the pruned batch.

    Args:
        keep: BoolTensor ``[B, L]``: True for tokens that survive. Pad tokens (attention mask 0)
            are never kept, whatever ``keep`` says.
        attention_mask: ``[B, L]`` 2-D mask (1 real, 0 pad) or None (no padding).
    Returns:
        :class:`SequenceLayout`. Costs one host sync (the new width and padding side).
    """
    if keep.dim() != 2 or keep.dtype != torch.bool:
        raise ValueError(f"keep must be a 2-D bool tensor [B, L], got {keep.dtype} {tuple(keep.shape)}")
    batch, length = keep.shape
    real = torch.ones_like(keep) if attention_mask is None else attention_mask.to(keep.device).bool()
    if real.shape != keep.shape:
        raise ValueError(f"attention_mask shape {tuple(real.shape)} does not match keep {tuple(keep.shape)}")
    keep = keep & real
    counts = keep.sum(1)
    dropped = real.sum(1) - counts
    longest = counts.max()
    # Right-padded when some row with real tokens ends in a pad (an all-pad row says nothing).
    right_padded = (~real[:, -1] & real.any(1)).any()
    width, right, ragged = torch.stack([longest, right_padded.long(), (counts != longest).any().long()]).tolist()
    pad_left = not right

    slots = torch.arange(width, device=keep.device)
    pads = width - counts
    rank = keep.long().cumsum(1) - 1
    column = rank + pads[:, None] if pad_left else rank
    # Pad slots read the original column at the same distance from the padded edge, so a
    # keep-all plan reads every original pad from where it was.
    base = slots if pad_left else slots + (length - width)
    index = base.clamp(0, length - 1).expand(batch, width).clone()
    sink = torch.full_like(column, width)  # dropped tokens scatter into a discarded extra column
    target = torch.where(keep, column, sink)
    source = torch.arange(length, device=keep.device).expand(batch, length)
    index = torch.cat([index, index.new_zeros(batch, 1)], 1).scatter(1, target, source)[:, :width]
    if pad_left:
        valid = slots[None, :] >= pads[:, None]
    else:
        valid = slots[None, :] < counts[:, None]
    return SequenceLayout(index=index, valid=valid, dropped=dropped, pad_left=pad_left,
                          needs_mask=attention_mask is not None or bool(ragged))


def compact_positions(valid: torch.Tensor) -> torch.Tensor:
    """LongTensor ``[B, L']``: 0, 1, 2, ... over each row's valid slots, 0 in pad slots.

    The same rule ``generate`` uses to number a left-padded prompt (mask cumsum - 1).
    """
    positions = valid.long().cumsum(1) - 1
    return positions.masked_fill(~valid, 0)
