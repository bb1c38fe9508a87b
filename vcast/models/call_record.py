"""What one call (a prefill and the decode steps after it) recorded, and the stats it resolves to.

The hooks (:mod:`vcast.models.handle`) append time spans and the pruner's segments to a
:class:`CallRecord` while the call runs, on the device, without waiting for it; :func:`resolve`
turns the record into :class:`~vcast.models.stats.CallStats` when the stats are read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from vcast.models.meters import Clock, Mark, PeakMemory
from vcast.models.stats import CallStats, LLMStageStats, SegmentStats


@dataclass
class PendingSegment:
    """One segment's selection, still on the device (``keep`` [K], ``budgets`` [T], ``columns`` [T * P])."""

    sample: int
    kind: str
    frames: int
    tokens_per_frame: int
    keep: torch.Tensor
    budgets: torch.Tensor
    columns: torch.Tensor
    merged: bool


@dataclass
class CallRecord:
    """Spans of each phase, the segments selected, the prompt lengths before and after ``[B]``."""

    vision: list[tuple[Mark, Mark]] = field(default_factory=list)
    selection: list[tuple[Mark, Mark]] = field(default_factory=list)
    prefill: list[tuple[Mark, Mark]] = field(default_factory=list)
    decode: list[tuple[Mark, Mark]] = field(default_factory=list)
    segments: list[PendingSegment] = field(default_factory=list)
    tokens_before: Optional[torch.Tensor] = None
    tokens_after: Optional[torch.Tensor] = None
    peak_memory: Optional[int] = None
    pruned: bool = False
    llm_stages: list[LLMStageStats] = field(default_factory=list)


def resolve(record: CallRecord, method: str, ratio: float, clock: Clock, memory: PeakMemory,
            num_layers: Optional[int]) -> CallStats:
    """The call's stats: spans timed by ``clock`` (CUDA events resolved here), segments on the CPU."""
    def total(spans: list[tuple[Mark, Mark]]) -> float:
        return sum(clock.seconds(start, end) for start, end in spans)

    segments = [
        SegmentStats(
            sample=p.sample, kind=p.kind, frames=p.frames, tokens_per_frame=p.tokens_per_frame,
            total=p.frames * p.tokens_per_frame, kept=int(p.keep.numel()),
            budgets=[int(b) for b in p.budgets.tolist()], keep=p.keep.cpu(), positions=p.columns.cpu(),
            merged=p.merged,
        )
        for p in record.segments
    ]
    before = record.tokens_before.tolist() if record.tokens_before is not None else []
    after = record.tokens_after.tolist() if record.tokens_after is not None else before
    return CallStats(
        method=method, ratio=ratio, segments=segments, tokens_before=before, tokens_after=after,
        vision_s=total(record.vision), selection_s=total(record.selection), prefill_s=total(record.prefill),
        decode_s=total(record.decode), decode_steps=len(record.decode), peak_memory_bytes=record.peak_memory,
        memory_source=memory.source, timer=clock.kind, pruned=record.pruned, num_layers=num_layers,
        llm_stages=list(record.llm_stages),
    )
