"""Kill (or slow down) this process at a chosen point of lmms-eval's response cache write (tests only).

A test puts this folder first on the PYTHONPATH of an lmms-eval run it starts (Python imports
``sitecustomize`` at start-up) and names the point in ``VCAST_KILL_AT``:

* ``journal:<n>`` -- the n-th answer's journal line is half written (no newline), then SIGKILL;
* ``upsert:<n>`` -- the n-th answer is in the journal (fsynced) but not yet in SQLite: SIGKILL.

``VCAST_SLOW_ANSWER_S=<seconds>`` slows the process's answers down instead: it sleeps that long
before each answer's SQLite write (the answer is already journaled, so a kill during the sleep
keeps it), once per answer (lmms-eval writes every answer a second time at the end of the run:
that write is not slowed). A test makes a cell longer than a SLURM job's time limit so. Only
lmms-eval's child process writes answers, so the sweep and submitit processes that inherit the
variable are not slowed.

Only the process given the variable is affected; the wrap is of this process's own class.
"""

from __future__ import annotations

import os
import signal
import time

_POINT = os.environ.get("VCAST_KILL_AT", "")
_SLOW_S = os.environ.get("VCAST_SLOW_ANSWER_S", "")

if _POINT:
    from lmms_eval.caching import response_cache as _cache

    _where, _, _count = _POINT.partition(":")
    _target = int(_count)
    _seen = {"journal": 0, "upsert": 0}
    _original_journal = _cache.ResponseCache._log_to_audit
    _original_store = _cache.ResponseCache._store

    def _journal(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        _seen["journal"] += 1
        if _where == "journal" and _seen["journal"] == _target:
            self._audit_file.write('{"cache_key": "torn by the test, no newline')
            self._audit_file.flush()
            os.fsync(self._audit_file.fileno())
            os.kill(os.getpid(), signal.SIGKILL)
        return _original_journal(self, *args, **kwargs)

    def _store(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        _seen["upsert"] += 1
        if _where == "upsert" and _seen["upsert"] == _target:
            os.kill(os.getpid(), signal.SIGKILL)
        return _original_store(self, *args, **kwargs)

    _cache.ResponseCache._log_to_audit = _journal
    _cache.ResponseCache._store = _store

if _SLOW_S:
    from lmms_eval.caching import response_cache as _slow_cache

    _delay_s = float(_SLOW_S)
    _slowed: set = set()
    _store_unslowed = _slow_cache.ResponseCache._store

    def _slow_store(self, cache_key, *args, **kwargs):  # type: ignore[no-untyped-def]
        if cache_key not in _slowed:
            _slowed.add(cache_key)
            time.sleep(_delay_s)
        return _store_unslowed(self, cache_key, *args, **kwargs)

    _slow_cache.ResponseCache._store = _slow_store
