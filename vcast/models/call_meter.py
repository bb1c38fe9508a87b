"""The meters of one pruning handle: the spans of a call and its peak memory, into a :class:`CallRecord`.

A *call* is a prefill and the decoding steps after it. The handle's hooks say when each part
starts and ends (the model's forward, the vision encoder, the selection, the language model's
prefill); this class marks the times (:class:`vcast.models.meters.Clock`: CUDA events on a GPU,
``perf_counter`` on the CPU) and reads the peak memory after every step, so the handle only wires
hooks. ``generate`` (transformers >= 5.18) runs the vision encoder *before* the prefill call: those
spans wait here and go to the call that starts next.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Optional

import torch

from vcast.models.call_record import CallRecord
from vcast.models.meters import Clock, Mark, PeakMemory


class CallMeter:
    """Times and peak memory of the calls of one model instance on ``device``."""

    def __init__(self, device: torch.device) -> None:
        self.clock = Clock(device)
        self.memory = PeakMemory(device)
        self.record: Optional[CallRecord] = None
        self.in_call = False  # inside the model's top-level forward
        self._step_is_decode = False
        self._step_start: Optional[Mark] = None
        self._vision_start: Optional[Mark] = None
        self._prefill_start: Optional[Mark] = None
        self._early_vision: list[tuple[Mark, Mark]] = []

    def start_call(self) -> bool:
        """A new call (a prefill): a fresh record holding any vision spans that came before it.
        Returns whether the call starts clean (no early encode), when the memory meter is reset here;
        after an early encode it was reset when that encode began."""
        early, self._early_vision = self._early_vision, []
        self.record = CallRecord(vision=early)
        if not early:
            self.memory.reset()
        return not early

    def step_start(self, decode: bool) -> None:
        """The model's forward begins (``decode``: a decoding step, decided before the forward fills the cache)."""
        self._step_is_decode = decode
        self.in_call = True
        self._step_start = self.clock.mark()

    def step_end(self) -> None:
        """The model's forward ended: a decoding step's span, and the peak memory so far."""
        self.in_call = False
        if self.record is None:
            return
        if self._step_is_decode and self._step_start is not None:
            self.record.decode.append((self._step_start, self.clock.mark()))
        self._step_start = None
        self.record.peak_memory = self.memory.read()

    def vision_start(self) -> None:
        if not self.in_call and not self._early_vision:  # an encode before the call: its memory counts
            self.memory.reset()
        self._vision_start = self.clock.mark()

    def vision_end(self) -> None:
        if self._vision_start is None:
            return
        span = (self._vision_start, self.clock.mark())
        self._vision_start = None
        if self.in_call and self.record is not None:
            self.record.vision.append(span)
        else:
            self._early_vision.append(span)

    @contextmanager
    def selection(self) -> Iterator[None]:
        """Times the block as the call's selection (finding, selecting and re-laying the tokens)."""
        start = self.clock.mark()
        yield
        if self.record is not None:
            self.record.selection.append((start, self.clock.mark()))

    def prefill_start(self) -> None:
        self._prefill_start = self.clock.mark()

    def prefill_end(self) -> None:
        if self._prefill_start is not None and self.record is not None:
            self.record.prefill.append((self._prefill_start, self.clock.mark()))
        self._prefill_start = None
