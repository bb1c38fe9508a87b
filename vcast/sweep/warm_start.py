"""A cell's lmms-eval run forked from a warm server instead of started as a new Python process.

A one-process cell's ``python -m vcast.eval.run`` imports lmms-eval, transformers and torch for 8-10 s
before its first item, most of a small cell on CPU (of a tiny model's 12-14 s on 2 cores).
:mod:`vcast.eval.warm_server` does those imports once per sweep process and forks a child per cell
that is the cold process in all that the run sees (working folder, ``sys.argv``, environment, output,
SIGINT's disposition, process group), so a cell's files are the same either way
(``tests/test_warm_start.py``). ``cell.json`` says which way a cell started (``warm_start``).

``VCAST_WARM_START``: ``auto`` (the default) starts warm where no GPU is visible (no ``/dev/nvidiactl``
or ``/dev/kfd``, or ``CUDA_VISIBLE_DEVICES`` empty): on a GPU node a cell's model time dwarfs its
imports, and a forked child must not inherit a CUDA context (the server never touches CUDA, but that is
only checked on CPU here). ``1`` always, ``0`` never. A cell with its own environment or several
processes (``accelerate launch``) always starts cold, and so does every cell when the server cannot
start (said once in the log): warm start only saves time, it never fails a cell.

``VCAST_WARM_SERVER=<socket path>``: use the standing server listening there
(``python -m vcast.eval.warm_server --listen <path>``) instead of starting one, where it can serve this
sweep (same python, same environment as far as imports read it, same session); else, said once in the
log, the sweep starts its own. Many small sweeps on one CPU machine (the test suite's) then pay the
imports once.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, BinaryIO, Optional

from vcast.eval.warm_server import SHARED_ENV, WARM_START_ENV, env_problem, import_time_env, receive, send

logger = logging.getLogger("vcast.sweep")

ENV = WARM_START_ENV
RUN_MODULE = "vcast.eval.run"
READY_TIMEOUT_S = 600.0  # the server's imports (8-10 s on 2 cores; minutes on a loaded shared disk)
GPU_DEVICES = ("/dev/nvidiactl", "/dev/kfd")  # NVIDIA's and AMD ROCm's device nodes
_ON, _OFF = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def warm_start_wanted() -> bool:
    """Whether one-process cells start warm here (``VCAST_WARM_START``, module docstring)."""
    value = os.environ.get(ENV, "auto").strip().lower()
    if value in _ON:
        return True
    if value in _OFF:
        return False
    if value != "auto":
        logger.warning("%s=%r is not one of auto, 1, 0: taken as auto", ENV, value)
    return not _gpu_visible()


def _gpu_visible() -> bool:
    if os.environ.get("CUDA_VISIBLE_DEVICES") in ("", "-1"):
        return False
    return any(Path(device).exists() for device in GPU_DEVICES)


class WarmChild:
    """A run the server forked, with what the cell runner uses of ``subprocess.Popen``: ``pid``,
    ``stdout`` (its output, stdout and stderr together), ``returncode``, :meth:`wait`, :meth:`kill`."""

    def __init__(self, server: "WarmServer", pid: int, stdout: BinaryIO, args: list[str]) -> None:
        self.server = server
        self.pid = pid
        self.stdout = stdout
        self.args = args
        self.returncode: Optional[int] = None

    def wait(self, timeout: Optional[float] = None) -> int:
        """The run's exit code (negative: the signal that ended it) once it has ended; raises
        ``subprocess.TimeoutExpired`` after ``timeout`` seconds, as ``Popen.wait`` does."""
        if self.returncode is not None:
            return self.returncode
        try:
            message = self.server.next_message(timeout)
        except socket.timeout:
            raise subprocess.TimeoutExpired(self.args, timeout) from None
        if message is None or message.get("pid") != self.pid or "returncode" not in message:
            # The server died under the run (killed, out of memory): stop the orphan, which would
            # go on writing into the cell's folder, and report the run killed.
            logger.error("the warm-start server ended while its run (pid %d) was going; the run is stopped", self.pid)
            self.kill()
            self.server.close()
            self.returncode = -signal.SIGKILL
            return self.returncode
        self.returncode = int(message["returncode"])
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


class WarmServer:
    """A :mod:`vcast.eval.warm_server` serving this sweep (``python`` with ``env``, as far as imports read
    it): its own (:meth:`start`, over a socket pair; ``process``) or a standing one's handler
    (:meth:`connect`; ``address``)."""

    def __init__(self, python: str, env: dict[str, str], sock: socket.socket,
                 process: Optional[subprocess.Popen] = None, address: Optional[str] = None) -> None:
        self.python = python
        self.env = dict(env)  # the environment its imports ran in (a standing server's: from its ready message)
        self.env_after = dict(env)  # and what they left (some imports set variables)
        self.sock = sock
        self.process = process
        self.address = address
        self.pid: Optional[int] = None  # of the process that forks the runs (its own server, or the handler)
        self.alive = True

    @classmethod
    def start(cls, python: str, env: dict[str, str]) -> "WarmServer":
        """A new server process, ``python`` in ``env``."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            # Same process group as the sweep: a Ctrl-C or a kill of the group reaches the runs it forks.
            process = subprocess.Popen([python, "-m", "vcast.eval.warm_server", str(theirs.fileno())],
                                       pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        return cls(python, env, ours, process=process)

    @classmethod
    def connect(cls, address: str, python: str, env: dict[str, str]) -> "WarmServer":
        """A handler of the standing server at ``address``, asked to serve this sweep (whose runs it
        forks into this process's group)."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            sock.connect(address)
            send(sock, {"python": python, "env": env, "pgid": os.getpgrp()})
        except BaseException:
            sock.close()
            raise
        return cls(python, env, sock, address=address)

    def wait_ready(self) -> Optional[str]:
        """None once the server's imports are done; else why it cannot serve (it is then closed)."""
        try:
            message = self.next_message(READY_TIMEOUT_S)
        except socket.timeout:
            message = {"error": f"its imports took over {READY_TIMEOUT_S:.0f} s"}
        except BaseException:  # a Ctrl-C while it imports: no half-started server is kept
            self.close()
            raise
        if message is not None and message.get("ready"):
            self.pid = message.get("pid")
            self.env = dict(message.get("env_before", self.env))
            self.env_after = dict(message.get("env_after", self.env))
            return None
        self.close()
        gone = "it closed the connection" if self.process is None else f"it exited with code {self.process.poll()}"
        return (message or {}).get("error") or gone

    def serves(self, python: str, env: dict[str, str]) -> bool:
        """Whether its runs are what ``python`` in ``env`` (import-time) would run (:func:`env_problem`)."""
        return python == self.python and env_problem(env, self.env, self.env_after) is None

    def next_message(self, timeout: Optional[float]) -> Optional[dict[str, Any]]:
        """The server's next message (None: it is gone); ``socket.timeout`` after ``timeout`` s."""
        self.sock.settimeout(None if timeout is None else max(timeout, 1e-3))  # 0 would make it non-blocking
        try:
            message, fds = receive(self.sock)
        except ConnectionError:
            message, fds = None, []
        for fd in fds:
            os.close(fd)
        if message is None:
            self.alive = False
        return message

    def start_child(self, args: list[str], cwd: Path, output: int) -> int:
        """Fork the run ``python -m vcast.eval.run <args>`` in ``cwd`` with its output to the pipe
        end ``output``; its pid. (The sweep's Ctrl-C handler waits until this returns.)"""
        request = {"args": args, "cwd": str(cwd), "env": dict(os.environ), "argv0": _run_module_file(),
                   "orig_argv": [self.python, "-m", RUN_MODULE, *args],
                   "sigint_ignored": signal.getsignal(signal.SIGINT) == signal.SIG_IGN}
        self.sock.settimeout(None)
        send(self.sock, request, fds=(output,))
        message = self.next_message(None)
        if message is None or "pid" not in message:
            raise ConnectionError(f"the warm-start server did not start the run: {message}")
        return int(message["pid"])

    def close(self) -> None:
        self.alive = False
        self.sock.close()  # the server ends when it sees the socket closed


def _run_module_file() -> str:
    import vcast.eval.run

    return str(Path(vcast.eval.run.__file__).resolve())


class WarmStarts:
    """This process's warm server (the standing one of ``VCAST_WARM_SERVER`` where it can serve, else
    its own), found or started with the first warm cell and kept while the environment stays the same
    (a changed environment gets a new one); once none can start, cells start cold."""

    def __init__(self) -> None:
        self.server: Optional[WarmServer] = None
        self.refused: Optional[tuple[str, dict[str, str]]] = None  # (python, env) whose server failed
        self.shared_refused: Optional[tuple[str, str, dict[str, str]]] = None  # (address, python, env)

    def start(self, command: list[str], cwd: Path) -> Optional[WarmChild]:
        """``command`` (``python -m vcast.eval.run ...``) forked from the server in ``cwd``; None when
        it is to start cold (another command, warm start off, or no server)."""
        if len(command) < 3 or command[1:3] != ["-m", RUN_MODULE] or not warm_start_wanted():
            return None
        server = self._server(command[0], import_time_env(os.environ))
        if server is None:
            return None
        read, write = os.pipe()
        try:
            pid = server.start_child(command[3:], cwd, write)
        except (OSError, ValueError) as error:
            os.close(read)
            server.close()
            logger.warning("the warm-start server failed (%s); this cell starts cold", error)
            return None
        finally:
            os.close(write)
        logger.debug("forked from the warm-start server: pid %d", pid)
        return WarmChild(server, pid, os.fdopen(read, "rb"), command)

    def _server(self, python: str, env: dict[str, str]) -> Optional[WarmServer]:
        server = self.server
        if (server is not None and server.alive and server.serves(python, env)
                and server.address in (None, os.environ.get(SHARED_ENV, "").strip())):
            return server  # its own server, or the standing one VCAST_WARM_SERVER still names
        if self.server is not None:
            self.server.close()
        self.server = self._shared(python, env)
        if self.server is not None or self.refused == (python, env):
            return self.server
        started = time.perf_counter()
        try:
            server = WarmServer.start(python, env)
        except OSError as error:  # no process to be had (out of memory, process limit)
            problem: Optional[str] = f"{type(error).__name__}: {error}"
        else:
            problem = server.wait_ready()
        if problem is not None:
            self.refused = (python, env)
            logger.warning("the warm-start server (%s) could not start: %s; cells start as new processes",
                           ENV, problem)
            return None
        logger.info("warm start: lmms-eval, transformers and torch imported once, in %.1f s (server pid %d); "
                    "each one-process cell is forked from it (%s=0: a new process each)",
                    time.perf_counter() - started, server.process.pid, ENV)
        self.server = server
        return server

    def _shared(self, python: str, env: dict[str, str]) -> Optional[WarmServer]:
        """The standing server of ``VCAST_WARM_SERVER``, serving this sweep; None where there is none
        or it cannot serve this sweep (said once)."""
        address = os.environ.get(SHARED_ENV, "").strip()
        if not address or self.shared_refused == (address, python, env):
            return None
        try:
            server = WarmServer.connect(address, python, env)
        except OSError as error:  # no server there (yet), or it went away
            problem: Optional[str] = f"{type(error).__name__}: {error}"
        else:
            problem = server.wait_ready()
        if problem is not None:
            self.shared_refused = (address, python, env)
            logger.info("the standing warm-start server %s (%s) cannot serve this sweep: %s; it starts its own",
                        address, SHARED_ENV, problem)
            return None
        logger.info("warm start: each one-process cell is forked from the standing server %s (%s)",
                    address, SHARED_ENV)
        return server


WARM_STARTS = WarmStarts()
