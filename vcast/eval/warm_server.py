"""The warm start of lmms-eval runs: ``python -m vcast.eval.warm_server <socket fd>``.

A cell's ``python -m vcast.eval.run`` spends 8-10 s importing lmms-eval, transformers and torch
before it reads its first video (on 2 CPU cores, of a tiny cell's 12-14 s), and a
sweep on CPU runs dozens of such cells. This server does the imports once, then forks one child per
run; the child sets itself up as the cold process would (working folder, ``sys.argv``, output to the
pipe it is handed, SIGINT's disposition) and runs :func:`vcast.eval.run.main`, so that nothing of
one run reaches another (each is a fresh copy of the server, which never runs one itself).

Protocol (a ``SOCK_SEQPACKET`` Unix socket pair with the sweep, :mod:`vcast.sweep.warm_start`): the
server sends ``{"ready": true}`` once its imports are done (or ``{"error": ...}`` and exits); then,
one run at a time, a request ``{"args", "cwd", "env", "argv0", "orig_argv", "sigint_ignored"}`` with the
write end of the output pipe attached is answered with ``{"pid"}`` as the child starts and
``{"returncode"}`` (negative: the signal) when it ends. The server ends when the sweep closes the
socket. It ignores SIGINT (a Ctrl-C reaches the child and the sweep, in the same process group);
it never touches CUDA, and the sweep uses it only where no GPU is visible.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import sys
from typing import Any, Optional

from vcast.frozen_heap import freeze_heap

MAX_MESSAGE = 1 << 20  # bytes: a request is a command line (a few kB)
# What every run imports before its first item; the families' plugins are added from the registry.
PRELOAD = ("torch", "transformers", "lmms_eval.evaluator", "lmms_eval.loggers", "lmms_eval.models",
           "lmms_eval.tasks", "accelerate", "vcast.eval.run", "vcast.eval.resume")


def send(sock: socket.socket, message: dict[str, Any], fds: tuple[int, ...] = ()) -> None:
    data = json.dumps(message).encode("utf-8")
    if fds:
        socket.send_fds(sock, [data], list(fds))
    else:
        sock.send(data)


def receive(sock: socket.socket) -> tuple[Optional[dict[str, Any]], list[int]]:
    """The next message and the file descriptors sent with it; ``(None, [])`` when the peer is gone."""
    data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 4)
    if not data:
        return None, fds
    return json.loads(data.decode("utf-8")), fds


def preload() -> None:
    from vcast.families import all_families

    for name in (*PRELOAD, *sorted({family.plugin.partition(":")[0] for family in all_families()})):
        importlib.import_module(name)


def serve(sock: socket.socket) -> Optional[tuple[dict[str, Any], int]]:
    """Answer requests until the sweep closes ``sock``; returns only in a forked child: its request
    and the write end of its output pipe."""
    while True:
        request, fds = receive(sock)
        if request is None:
            return None
        pipe = fds[0]
        pid = os.fork()
        if pid == 0:
            sock.close()
            return request, pipe
        os.close(pipe)
        send(sock, {"pid": pid})
        _, status = os.waitpid(pid, 0)
        send(sock, {"pid": pid, "returncode": os.waitstatus_to_exitcode(status)})


def become_run(request: dict[str, Any], pipe: int) -> int:
    """In the forked child: the process ``python -m vcast.eval.run <args>`` would be, then its run."""
    os.dup2(pipe, 1)
    os.dup2(pipe, 2)
    os.close(pipe)
    os.environ.clear()
    os.environ.update(request["env"])  # the sweep's, of which the server's differs at most in what no import reads
    os.chdir(request["cwd"])
    sys.path[0] = request["cwd"]  # where ``python -m`` puts the working folder
    sys.argv = [request["argv0"], *request["args"]]
    sys.orig_argv = list(request["orig_argv"])
    signal.signal(signal.SIGINT, signal.SIG_IGN if request["sigint_ignored"] else signal.default_int_handler)
    from vcast.eval.run import main

    return main(request["args"])


def start(fd: int) -> int:
    sock = socket.socket(fileno=fd)
    try:
        preload()
    except BaseException as error:  # noqa: BLE001 - told to the sweep, which starts its runs cold instead
        send(sock, {"error": f"{type(error).__name__}: {error}"})
        return 1
    freeze_heap()  # each child forks from a heap the cycle collector no longer walks (vcast.frozen_heap)
    sys.stdout.flush()  # what an import printed must not reach every child's log
    sys.stderr.flush()
    send(sock, {"ready": True})
    try:
        child = serve(sock)
    except (OSError, ValueError):  # the sweep went away mid-message
        return 0
    if child is None:
        return 0
    status = become_run(*child)
    freeze_heap()  # what the run made, so that its exit walks nothing
    return status


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # before the imports: a Ctrl-C is the cell's and the sweep's
    raise SystemExit(start(int(sys.argv[1])))
