"""Timers and peak-memory meters that cost nothing on the hot path.

On CUDA a time mark is a recorded event, resolved only when the numbers are read (so hooks
never synchronise the device); on CPU it is ``time.perf_counter()``. Peak memory is CUDA's
max-allocated counter, or on CPU the process's peak resident set size, reset per call through
``/proc/self/clear_refs`` where Linux allows it. :func:`measure` times one whole call from the
outside (the benchmarks and :mod:`vcast.gpucheck`).
"""

from __future__ import annotations

import ctypes
import logging
import resource
import time
from typing import Any, Callable, Union

import torch

logger = logging.getLogger(__name__)

Mark = Union[float, "torch.cuda.Event"]


class Clock:
    """Marks points in time on ``device``'s stream (CUDA events) or the host (perf_counter)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cuda = device.type == "cuda"

    @property
    def kind(self) -> str:
        return "cuda_events" if self.cuda else "perf_counter"

    def mark(self) -> Mark:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record(torch.cuda.current_stream(self.device))
            return event
        return time.perf_counter()

    @staticmethod
    def seconds(start: Mark, end: Mark) -> float:
        """Seconds from ``start`` to ``end`` (waits for ``end`` on CUDA)."""
        if isinstance(start, float):
            return float(end) - start
        end.synchronize()
        return start.elapsed_time(end) / 1000.0


def _read_vm_hwm() -> int | None:
    """Peak resident set size in bytes from /proc/self/status, or None off Linux."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


class PeakMemory:
    """Peak memory over one call: CUDA max allocated, or CPU peak RSS.

    ``source`` says what was measured: ``cuda_max_allocated``, ``process_peak_rss`` (reset at
    the start of each call) or ``process_peak_rss_since_start`` (when the reset is not allowed,
    the lifetime peak of the process).
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.source = "cuda_max_allocated" if device.type == "cuda" else "process_peak_rss"

    def reset(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)
            return
        if self.source != "process_peak_rss":
            return
        try:
            with open("/proc/self/clear_refs", "w") as clear_refs:
                clear_refs.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)
        except OSError as error:
            logger.info("cannot reset the peak RSS (%s); reporting the process lifetime peak", error)
            self.source = "process_peak_rss_since_start"

    def read(self) -> int:
        """Bytes."""
        if self.device.type == "cuda":
            return int(torch.cuda.max_memory_allocated(self.device))
        peak = _read_vm_hwm() if self.source == "process_peak_rss" else None
        if peak is None:
            # ru_maxrss is in KiB on Linux.
            return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
        return peak


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def _release_free_memory() -> None:
    """Hand freed heap pages back to the OS (glibc), so the next call's peak RSS shows what it
    allocates instead of reusing what an earlier variant left in the heap."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def measure(run: Callable[[], Any], device: torch.device, meter: PeakMemory) -> tuple[float, int, Any]:
    """(seconds, peak bytes above the memory in use before the call, what ``run`` returned): one
    call timed from the outside (CUDA synchronised before and after)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
    else:
        _release_free_memory()
        before = _rss_bytes()
    meter.reset()
    start = time.perf_counter()
    result = run()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    return seconds, max(meter.read() - before, 0), result
