"""The warm start of lmms-eval runs: ``python -m vcast.eval.warm_server <socket fd>``.

A cell's ``python -m vcast.eval.run`` spends 8-10 s importing lmms-eval, transformers and torch
before it reads its first video (on 2 CPU cores, of a tiny cell's 12-14 s), and a
sweep on CPU runs dozens of such cells. This server does the imports once, then forks one child per
run; the child sets itself up as the cold process would (working folder, ``sys.argv``, output to the
pipe it is handed, SIGINT's disposition) and runs :func:`vcast.eval.run.main`, so that nothing of
one run reaches another (each is a fresh copy of the server, which never runs one itself).

Protocol (a ``SOCK_SEQPACKET`` Unix socket pair with the sweep, :mod:`vcast.sweep.warm_start`): the
server sends ``{"ready": true, "pid"}`` once its imports are done (or ``{"error": ...}`` and exits); then,
one run at a time, a request ``{"args", "cwd", "env", "argv0", "orig_argv", "sigint_ignored"}`` with the
write end of the output pipe attached is answered with ``{"pid"}`` as the child starts and
``{"returncode"}`` (negative: the signal) when it ends. The server ends when the sweep closes the
socket. It ignores SIGINT (a Ctrl-C reaches the child and the sweep, in the same process group);
it never touches CUDA, and the sweep uses it only where no GPU is visible.

**A standing server** for many sweeps: ``python -m vcast.eval.warm_server --listen <socket path>`` does
the imports once, then listens on that Unix socket; a sweep whose ``VCAST_WARM_SERVER`` names it connects
instead of starting a server of its own. Each connection gets a handler forked from the listener, which
first reads ``{"python", "env", "pgid"}``: it serves the sweep (the protocol above, from ``{"ready"}`` on)
only if the sweep's python is the server's, its environment is the server's as far as imports read it
(:func:`env_problem`), and the handler can join the sweep's process group (so a Ctrl-C or a
kill of that group reaches the handler and its runs, as with a sweep's own server: the sweep must be in
the server's session); else it answers ``{"error"}``, and the sweep starts its own server.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import socket
import sys
from typing import Any, Mapping, Optional

from vcast.frozen_heap import freeze_heap

MAX_MESSAGE = 1 << 20  # bytes: a request is a command line (a few kB)
WARM_START_ENV = "VCAST_WARM_START"  # auto / 1 / 0 (vcast.sweep.warm_start)
SHARED_ENV = "VCAST_WARM_SERVER"  # the socket path of a standing server (--listen)
# Variables that change between runs without needing new imports: a change of these keeps the server
# (pytest sets the first at every test; the sweep reads the others); the run gets their current values.
NOT_IMPORT_TIME = frozenset({"PYTEST_CURRENT_TEST", WARM_START_ENV, SHARED_ENV})
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


def import_time_env(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` as far as a server's imports may read it (all but :data:`NOT_IMPORT_TIME`)."""
    return {key: value for key, value in environ.items() if key not in NOT_IMPORT_TIME}


def env_problem(theirs: Mapping[str, str], before: Mapping[str, str], after: Mapping[str, str]) -> Optional[str]:
    """Why a sweep's import-time environment ``theirs`` is not the one a server imported in, or None.
    The server's imports ran in ``before`` and left ``after``: some imports set a variable where it is
    unset (torch's ``TORCHINDUCTOR_CACHE_DIR``, scikit-learn's ``KMP_DUPLICATE_LIB_OK``), which a
    sweep that made the same imports has too; either value is the same environment."""
    differing = sorted(key for key in set(theirs) | set(before) | set(after)
                       if theirs.get(key) not in (before.get(key), after.get(key)))
    if not differing:
        return None
    shown = ", ".join(differing[:5]) + (f" and {len(differing) - 5} more" if len(differing) > 5 else "")
    return f"the sweep's environment differs from the server's in {shown}"


def ready(before: Mapping[str, str], after: Mapping[str, str]) -> dict[str, Any]:
    """The message a server sends once its imports, run in ``before`` and leaving ``after``, are done
    (with the pid of the process that forks the sweep's runs)."""
    return {"ready": True, "pid": os.getpid(), "env_before": dict(before), "env_after": dict(after)}


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


def _served_run(sock: socket.socket) -> int:
    """Serve the sweep on ``sock``: 0 in this process once the sweep has gone, the run's exit code
    in each forked child."""
    try:
        child = serve(sock)
    except (OSError, ValueError):  # the sweep went away mid-message
        return 0
    if child is None:
        return 0
    status = become_run(*child)
    freeze_heap()  # what the run made, so that its exit walks nothing
    return status


def _imported() -> tuple[dict[str, str], dict[str, str]]:
    """The imports every run makes, done once: the import-time environment they ran in and the one they
    left (some of them add to os.environ). Raises what an import raised."""
    before = import_time_env(os.environ)
    preload()
    freeze_heap()  # each child forks from a heap the cycle collector no longer walks (vcast.frozen_heap)
    sys.stdout.flush()  # what an import printed must not reach every child's log
    sys.stderr.flush()
    return before, import_time_env(os.environ)


def start(fd: int) -> int:
    sock = socket.socket(fileno=fd)
    try:
        before, after = _imported()
    except BaseException as error:  # noqa: BLE001 - told to the sweep, which starts its runs cold instead
        send(sock, {"error": f"{type(error).__name__}: {error}"})
        return 1
    send(sock, ready(before, after))
    return _served_run(sock)


def mismatch(hello: Mapping[str, Any], python: str, before: Mapping[str, str],
             after: Mapping[str, str]) -> Optional[str]:
    """Why a standing server (``python``, its imports run in ``before``, leaving ``after``) cannot serve
    the sweep that sent ``hello``, or None."""
    if hello.get("python") != python:
        return f"it runs {python}, the sweep {hello.get('python')}"
    return env_problem(hello.get("env") or {}, before, after)


def _handle(sock: socket.socket, before: Mapping[str, str], after: Mapping[str, str]) -> int:
    """A standing server's handler of one sweep (module docstring), in a child of the listener."""
    try:
        hello, _ = receive(sock)
        if hello is None:
            return 0
        problem = mismatch(hello, sys.executable, before, after)
        if problem is None:
            try:
                os.setpgid(0, int(hello["pgid"]))
            except OSError as error:
                problem = (f"its runs cannot join the sweep's process group {hello['pgid']} ({error.strerror}: "
                           "the sweep runs in another session)")
        if problem is not None:
            send(sock, {"error": problem})
            return 0
        send(sock, ready(before, after))
    except (OSError, ValueError):  # the sweep went away mid-message
        return 0
    return _served_run(sock)


def listen(path: str) -> int:
    """A standing server on the Unix socket ``path`` (module docstring): bound once the imports are
    done, so that a sweep finds it only when it can serve; ends on SIGTERM, removing ``path``."""
    try:
        before, after = _imported()
    except BaseException as error:  # noqa: BLE001
        sys.stderr.write(f"warm server: the imports failed: {type(error).__name__}: {error}\n")
        return 1
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    umask = os.umask(0o177)  # only its owner may connect: a connection runs commands as the owner
    try:
        listener.bind(path)
    finally:
        os.umask(umask)
    listener.listen(16)
    me = os.getpid()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps each handler when it ends
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            sock, _ = listener.accept()
            if os.fork() == 0:
                listener.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the handler waits for its runs itself
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                return _handle(sock, before, after)
            sock.close()
    finally:
        if os.getpid() == me:
            listener.close()
            os.unlink(path)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # before the imports: a Ctrl-C is the cell's and the sweep's
    if sys.argv[1:2] == ["--listen"] and len(sys.argv) == 3:
        raise SystemExit(listen(sys.argv[2]))
    raise SystemExit(start(int(sys.argv[1])))
