"""Bounded, ordered prefetching: prepare the next items in a background thread while the caller
works on the current one.

The lmms-eval plugins spend much of a benchmark's wall time reading videos (decord) and running
the Hugging Face processor, serially with the model: in the paper's efficiency table the total
latency of Qwen3-VL-8B on Video-MME is 1440 s against 524 s of prefill and generation.
:class:`Prefetcher` moves that preparation into one worker thread, so decoding batch k+1 overlaps
the model on batch k (decord and the processor's torch ops release the GIL for most of their
work), and a run takes about max(preparation, model) instead of their sum.

What it guarantees, so prefetching never changes a result:

* **Order.** Items come back in the order given, each with its own result; one worker prepares
  them one after the other (so per-item state such as a tokenizer's padding setting is never
  touched by two threads at once).
* **Bound.** At most ``depth`` items are started and not yet taken by the consumer: while the
  consumer works on item k, items k+1 .. k+depth may be prepared, nothing further.
* **Errors per item.** An exception raised by ``prepare(item)`` is raised to the consumer when it
  reaches that item (after every earlier item), with its original type and traceback; the worker
  then stops. Callers that recover from an item's error (the plugins' unreadable-video fallback)
  do so inside ``prepare``, exactly as without prefetching.
* **Shutdown.** Leaving the ``with`` block (the loop ended, broke or raised) stops the worker after
  the item in hand and joins it: no thread outlives the loop.

``depth=0`` prepares each item inline in the consumer's thread, when it is asked for: the serial
behaviour, with the same timings recorded.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass
from types import TracebackType
from typing import Callable, Generic, Iterable, Iterator, Optional, TypeVar

logger = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Prepared(Generic[T, R]):
    """One item and its prepared ``value``. ``prepare_s``: wall time of ``prepare(item)`` (in the
    worker, or inline); ``wait_s``: how long the consumer waited for it (with prefetching this
    falls towards 0 when preparation hides behind the consumer's own work; inline it equals
    ``prepare_s``)."""

    item: T
    value: R
    prepare_s: float
    wait_s: float


@dataclass(frozen=True)
class _Done:
    item: object
    value: object
    prepare_s: float


@dataclass(frozen=True)
class _Failed:
    error: BaseException


_END = object()


class Prefetcher(Generic[T, R]):
    """``prepare(item)`` for each of ``items`` in order, up to ``depth`` items ahead of the consumer
    in one background thread. Use as a context manager and iterate once::

        with Prefetcher(batches, prepare, depth=2) as prepared:
            for batch in prepared:
                run(batch.value)
    """

    def __init__(self, items: Iterable[T], prepare: Callable[[T], R], depth: int,
                 name: str = "vcast-prefetch") -> None:
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 0:
            raise ValueError(f"prefetch depth must be an integer >= 0, got {depth!r}")
        self.depth = depth
        self.name = name
        self._items = iter(items)
        self._prepare = prepare
        self._slots = threading.Semaphore(depth)  # items started and not yet taken, at most depth
        self._results: queue.Queue = queue.Queue()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._iterated = False

    # Context manager ---------------------------------------------------------------------------
    def __enter__(self) -> "Prefetcher[T, R]":
        return self

    def __exit__(self, kind: Optional[type[BaseException]], error: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self.close()

    def close(self) -> None:
        """Stop the worker after the item it is preparing (if any) and wait for it; idempotent."""
        self._stop.set()
        self._slots.release()  # wake a worker waiting for a free slot, so it sees the stop
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    # Iteration ---------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Prepared[T, R]]:
        if self._iterated:
            raise RuntimeError("a Prefetcher is iterated once")
        self._iterated = True
        if self.depth == 0:
            return self._inline()
        return self._prefetched()

    def _inline(self) -> Iterator[Prepared[T, R]]:
        for item in self._items:
            start = time.perf_counter()
            value = self._prepare(item)
            elapsed = time.perf_counter() - start
            yield Prepared(item, value, elapsed, elapsed)

    def _prefetched(self) -> Iterator[Prepared[T, R]]:
        self._thread = threading.Thread(target=self._work, name=self.name, daemon=True)
        self._thread.start()
        try:
            while True:
                start = time.perf_counter()
                outcome = self._results.get()
                wait = time.perf_counter() - start
                if outcome is _END:
                    return
                if isinstance(outcome, _Failed):
                    raise outcome.error
                self._slots.release()  # taken: the worker may start one more
                yield Prepared(outcome.item, outcome.value, outcome.prepare_s, wait)  # type: ignore[arg-type]
        finally:
            self.close()

    def _work(self) -> None:
        """The worker: take a slot, then the next item, prepare it, hand it over; stop at the end,
        on a close, or after the first error (handed over in the failing item's place)."""
        while True:
            self._slots.acquire()
            if self._stop.is_set():
                return
            try:
                item = next(self._items)
            except StopIteration:
                self._results.put(_END)
                return
            except BaseException as error:  # the items' own iterator failed: the consumer gets it
                self._results.put(_Failed(error))
                return
            start = time.perf_counter()
            try:
                value = self._prepare(item)
            except BaseException as error:  # noqa: BLE001 -- raised in the consumer, at this item
                logger.debug("%s: preparing an item raised %s; handed to the consumer", self.name,
                             type(error).__name__)
                self._results.put(_Failed(error))
                return
            self._results.put(_Done(item, value, time.perf_counter() - start))
