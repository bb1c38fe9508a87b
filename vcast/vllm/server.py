"""A `vllm serve` process on a loopback port for the length of a ``with`` block: what ``make bench-serve``
(``scripts/bench_serve.py``) and the serving tests (``tests/test_vllm_serve.py``) start.

The server is vLLM's OpenAI-compatible one (``python -m vllm.entrypoints.openai.api_server``, the module
behind ``vllm serve``: the CPU build's ``vllm`` command fails on its own version lookup), started with
this process's Python, so in the vLLM environment. Nothing here imports vLLM.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator, Mapping

from vcast.ports import free_port
from vcast.vllm.serve_load import serve_flags

logger = logging.getLogger(__name__)

READY_TIMEOUT_S = 600.0


@contextlib.contextmanager
def running_server(model_dir: str, settings: Mapping[str, Any], log_path: Path, name: str = "vllm",
                   ready_timeout_s: float = READY_TIMEOUT_S) -> Iterator[str]:
    """A server of ``model_dir`` with ``settings`` (engine and server arguments, as
    :func:`vcast.vllm.serve_load.serve_flags` writes them) on a free loopback port, ready (``/health``
    answers 200) for the block; its base URL. Its output goes to ``log_path``. RuntimeError, with the
    log's end, when it exits or is not ready within ``ready_timeout_s``; stopped (SIGTERM, then SIGKILL
    after a minute) when the block ends, however it ends."""
    port = free_port()
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_dir,
               *serve_flags({"host": "127.0.0.1", "port": port, **settings})]
    logger.info("%s: %s", name, " ".join(command))
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=dict(os.environ))  # the child keeps its own copy of the log
    url = f"http://127.0.0.1:{port}"
    try:
        started = time.perf_counter()
        while not _healthy(url):
            if process.poll() is not None:
                tail = log_path.read_text(encoding="utf-8")[-3000:]
                raise RuntimeError(f"the {name} server exited with code {process.returncode}:\n{tail}")
            if time.perf_counter() - started > ready_timeout_s:
                raise RuntimeError(f"the {name} server was not ready after {ready_timeout_s:.0f} s ({log_path})")
            time.sleep(1.0)
        logger.info("%s: ready in %.0f s", name, time.perf_counter() - started)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False
