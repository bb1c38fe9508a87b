"""A real, throw-away, single-node SLURM cluster for tests (``LocalSlurmCluster``).

The cluster runs Debian's ``slurm-wlm`` daemons (install them with ``scripts/install_slurm.sh``)
as root on 127.0.0.1, with every file it needs in a work directory:

* its own ``munged`` (own key, socket, pid, log and seed files; ``AuthInfo=socket=...`` points
  slurm at it), so it neither needs nor disturbs a system munge;
* ``slurm.conf`` with free, non-default ports, one node (this host, ``CPUs=os.cpu_count()``,
  ``RealMemory`` = MemTotal minus a margin) and one partition (``debug`` by default);
  ``proctrack/linuxproc`` + ``task/none`` (no cgroups, no systemd), no accounting daemon;
* ``slurmctld -D`` and ``slurmd -D`` as child processes (no systemd, no daemonizing).

Clients (``sbatch``, ``squeue``, submitit, hydra-submitit-launcher) find the cluster through the
``SLURM_CONF`` variable in :attr:`LocalSlurmCluster.env`; put it in ``os.environ`` (e.g. with
``monkeypatch.setenv``) for the duration of a test.

Job state for submitit. submitit's ``job.result()`` / ``job.done()`` first look for the job's
result pickle, so results come back without any accounting; while a job has no pickle yet it
polls ``sacct -o JobID,State,NodeList --parsable2 -j ID``. Without ``slurmdbd`` the real ``sacct``
fails ("Slurm accounting storage is disabled"; ``sacct --completion`` reads the job completion
log but mislabels array tasks), which submitit only logs as a warning -- but then a job that dies
without writing its pickle (cancelled, killed, failed sbatch script) would look ``UNKNOWN``, i.e.
still running, and ``job.result()`` would wait forever. So the cluster writes job completion
records (``JobCompType=jobcomp/filetxt``) and, with ``sacct_shim=True`` (the default), puts a small
``sacct`` script first on :attr:`env`'s ``PATH`` that answers submitit's query from those records
(finished jobs, array tasks as ``ID_TASK``) and from ``squeue`` (pending/running jobs). submitit
then sees the real states (``PENDING``, ``RUNNING``, ``COMPLETED``, ``FAILED``, ``CANCELLED``...).

``stop()`` cancels all jobs, terminates the daemons and then kills any process still carrying this
cluster's ``SLURM_CONF`` in its environment (``slurmstepd``, job scripts), so nothing is left.
The daemons also get SIGTERM when the thread that started them dies (``PR_SET_PDEATHSIG``: a
killed pytest leaves no cluster behind), and ``start()`` in a work dir whose earlier cluster was
killed first kills that cluster's leftovers; a work dir belongs to one cluster at a time (several
clusters in different work dirs can run side by side: own ports, own munged).

Process tracking is ``proctrack/linuxproc`` (no cgroups needed; fast: a finished or cancelled step
ends at once). Its limit: a process of a batch script whose parent shell died and that ignores
SIGTERM escapes a ``scancel`` (the job is done, the process lives on until ``stop()``); job steps
run by ``srun`` -- submitit's default -- are tracked fine. ``proctrack="proctrack/pgid"`` kills by
process group instead (no escape, but every step ends ~1-3 s later).
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import IO

logger = logging.getLogger(__name__)

__all__ = [
    "CLIENT_BINARIES",
    "DAEMON_BINARIES",
    "LocalSlurmCluster",
    "SlurmClusterError",
    "slurm_unavailable_reason",
]

CLIENT_BINARIES: tuple[str, ...] = (
    "sbatch",
    "srun",
    "squeue",
    "sinfo",
    "scancel",
    "sacct",
    "scontrol",
    "munge",
    "unmunge",
)
DAEMON_BINARIES: tuple[str, ...] = ("slurmctld", "slurmd", "munged")
_SBIN_DIRS: tuple[str, ...] = ("/usr/sbin", "/usr/local/sbin", "/sbin")
_MEMORY_MARGIN_MB = 1024
# Unix socket paths (munged's socket, slurmstepd's sockets in the spool dir) must stay below the
# 108-byte sun_path limit; longer work dirs get their runtime files in a short temporary dir.
_MAX_RUNTIME_DIR_LEN = 60
_INSTALL_HINT = (
    "install it with `bash scripts/install_slurm.sh` (Debian packages slurm-wlm and munge)"
)

_SACCT_SHIM = r'''#!{python} -I
"""sacct for a SLURM cluster without slurmdbd (written by tests.support.slurm_cluster).

Finished jobs come from the job completion log (JobCompType=jobcomp/filetxt), array tasks
named ARRAYID_TASK like the real sacct; jobs still pending/running come from squeue. Output is
always parsable (--parsable2 style). Supports -o/--format, -j/--jobs, -n/--noheader, -p/-P.
"""
import os
import subprocess
import sys

JOBCOMP = {jobcomp!r}
ENV = dict(os.environ, SLURM_CONF={conf!r})
CANONICAL = {{n.lower(): n for n in ("JobID", "JobIDRaw", "JobName", "State", "NodeList", "ExitCode",
                                     "Partition", "User", "Start", "End", "Elapsed")}}
SQUEUE = {{"jobid": "%i", "jobidraw": "%A", "jobname": "%j", "state": "%T", "nodelist": "%N",
           "partition": "%P", "user": "%u", "start": "%S", "end": "%e", "elapsed": "%M"}}
JOBCOMP_KEYS = {{"jobidraw": "JobId", "jobname": "Name", "state": "JobState", "nodelist": "NodeList",
                "exitcode": "ExitCode", "partition": "Partition", "user": "UserId",
                "start": "StartTime", "end": "EndTime"}}


def parse_args(argv):
    fields, ids, header, trailing = ["JobID", "JobName", "Partition", "State", "ExitCode"], [], True, False
    i = 0
    while i < len(argv):
        a = argv[i]
        value = None
        for opt in ("-o", "--format", "-j", "--jobs"):
            if a == opt and i + 1 < len(argv):
                value, i = argv[i + 1], i + 1
                break
            if a.startswith(opt + "=") or (len(opt) == 2 and a.startswith(opt) and len(a) > 2):
                value = a.split("=", 1)[1] if "=" in a and opt.startswith("--") else a[len(opt):]
                break
        if value is not None and opt in ("-o", "--format"):
            fields = [f.split("%")[0] for f in value.split(",") if f]
        elif value is not None:
            ids += [j for j in value.split(",") if j]
        elif a in ("-n", "--noheader"):
            header = False
        elif a in ("-p", "--parsable"):
            trailing = True
        i += 1
    return fields, ids, header, trailing


def wanted(job_ids, ids):
    return not ids or any(j in ids for j in job_ids)


def main():
    fields, ids, header, trailing = parse_args(sys.argv[1:])
    keys = [f.lower() for f in fields]
    rows = []
    fmt = "|".join(["%A", "%i"] + [SQUEUE.get(k, "") for k in keys])
    try:
        out = subprocess.run(
            ["squeue", "-h", "-r", "-o", fmt], capture_output=True, text=True, env=ENV
        ).stdout
    except OSError:
        out = ""
    for line in out.splitlines():
        raw, jid, *vals = line.split("|")
        if wanted({{raw, jid, jid.split("_")[0]}}, ids):
            vals = ["0:0" if k == "exitcode" else v for k, v in zip(keys, vals)]
            rows.append(vals)
    try:
        with open(JOBCOMP, encoding="utf-8", errors="replace") as f:
            records = f.read().splitlines()
    except OSError:
        records = []
    for rec in records:
        kv = dict(t.split("=", 1) for t in rec.split(" ") if "=" in t)
        raw = kv.get("JobId", "")
        jid = raw
        if kv.get("ArrayJobId") and kv.get("ArrayTaskId") not in (None, "", "4294967294"):
            jid = kv["ArrayJobId"] + "_" + kv["ArrayTaskId"]
        if not wanted({{raw, jid, kv.get("ArrayJobId", raw)}}, ids):
            continue
        vals = []
        for k in keys:
            if k == "jobid":
                vals.append(jid)
            else:
                v = kv.get(JOBCOMP_KEYS.get(k, ""), "")
                vals.append(v.split("(")[0] if k == "user" else v)
        rows.append(vals)
    end = "|" if trailing else ""
    if header:
        print("|".join(CANONICAL.get(k, f) for k, f in zip(keys, fields)) + end)
    for vals in rows:
        print("|".join(vals) + end)


main()
'''


class SlurmClusterError(RuntimeError):
    """The local SLURM cluster could not be started (the message says why, with log tails)."""


def _find_binary(name: str) -> str | None:
    path = shutil.which(name)
    if path is not None:
        return path
    for d in _SBIN_DIRS:
        candidate = Path(d) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def _static_unavailable_reason() -> str | None:
    if not sys.platform.startswith("linux"):
        return f"the local SLURM test cluster needs Linux (this is {sys.platform})"
    missing = [b for b in (*DAEMON_BINARIES, *CLIENT_BINARIES) if _find_binary(b) is None]
    if missing:
        return f"SLURM/munge binaries not found: {', '.join(missing)}; {_INSTALL_HINT}"
    if os.geteuid() != 0:
        return (
            "the local SLURM test cluster runs slurmctld/slurmd/munged as root "
            f"(SlurmUser=root) and this process is not root (euid {os.geteuid()})"
        )
    return None


def slurm_unavailable_reason(probe: bool = False) -> str | None:
    """Why a :class:`LocalSlurmCluster` cannot run here, or ``None`` if it can.

    Without ``probe`` only the cheap checks are done (Linux, binaries present, root). With
    ``probe=True`` a cluster is also started and stopped in a temporary directory (a few seconds)
    and a failure to start is reported with the tail of the failing daemon's log.
    """
    reason = _static_unavailable_reason()
    if reason is not None or not probe:
        return reason
    with tempfile.TemporaryDirectory(prefix="vslurm-probe-") as tmp:
        try:
            with LocalSlurmCluster(tmp):
                pass
        except SlurmClusterError as e:
            return str(e)
    return None


def _free_ports(n: int) -> list[int]:
    """``n`` distinct TCP ports that are free right now (bound together, then released)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _mem_total_mb() -> int:
    with open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) // 1024
    raise SlurmClusterError("MemTotal not found in /proc/meminfo")


def _tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"({path} not readable)"
    return "\n".join(text.splitlines()[-lines:]) or f"({path} is empty)"


def _proc_environ_has(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                return False  # a zombie: nothing to kill, its parent (or init) reaps it
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in f.read().split(b"\0")
    except OSError:
        return False


def _die_with_parent() -> None:
    """preexec_fn: SIGTERM the daemon when the process that started it dies (e.g. a killed
    pytest), so an interrupted test run does not leave a cluster behind."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _describe(pids: list[int]) -> str:
    parts = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            cmd = "?"
        parts.append(f"{pid} ({cmd[:120]})")
    return ", ".join(parts)


def _own_ancestors() -> set[int]:
    pids = {os.getpid()}
    pid = os.getpid()
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                pid = int(f.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        pids.add(pid)
    return pids


class LocalSlurmCluster:
    """A single-node SLURM cluster (slurmctld + slurmd + munged) living in ``work_dir``.

    Use as a context manager (or call :meth:`start` / :meth:`stop`)::

        with LocalSlurmCluster(tmp_path) as cluster:
            subprocess.run(["sbatch", "--wait", "--wrap", "true"], env={**os.environ, **cluster.env})

    Attributes:
        work_dir: where slurm.conf, the munge key, state, spool, logs and pid files live.
        partition: the (only, default) partition's name.
        node_name: the node's SLURM name (this host's short hostname).
        env: variables for clients (``SLURM_CONF``; ``PATH`` with the sacct shim first).
    """

    def __init__(
        self,
        work_dir: str | os.PathLike[str],
        *,
        partition: str = "debug",
        cpus: int | None = None,
        start_timeout_s: float = 60.0,
        sacct_shim: bool = True,
        probe_job: bool = True,
        proctrack: str = "proctrack/linuxproc",
    ) -> None:
        self.work_dir = Path(work_dir).resolve()
        self.partition = partition
        self.cpus = cpus or os.cpu_count() or 1
        self.start_timeout_s = start_timeout_s
        self.sacct_shim = sacct_shim
        self.probe_job = probe_job
        self.proctrack = proctrack
        self.node_name = socket.gethostname().split(".")[0]
        self.first_job_id = secrets.randbelow(60_000_000) + 1_000
        self.env: dict[str, str] = {}
        self._procs: dict[str, subprocess.Popen[bytes]] = {}
        self._outs: list[IO[bytes]] = []
        self._short_dir: Path | None = None
        self._started = False
        self.run_dir = self.work_dir
        self.conf_path = self.work_dir / "slurm.conf"
        self.munge_socket = self.work_dir / "munge" / "munge.socket"

    # ------------------------------------------------------------------ paths and config
    def _prepare_dirs(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        if len(str(self.work_dir)) > _MAX_RUNTIME_DIR_LEN:
            self._short_dir = Path(tempfile.mkdtemp(prefix="vslurm-"))
            self.run_dir = self._short_dir
        else:
            self.run_dir = self.work_dir
        for sub in ("munge", "state", "spool", "log", "run", "bin"):
            d = (self.run_dir if sub in ("munge", "spool") else self.work_dir) / sub
            d.mkdir(parents=True, exist_ok=True)
            os.chmod(d, 0o700 if sub in ("munge", "state") else 0o755)
        self.munge_socket = self.run_dir / "munge" / "munge.socket"
        self.conf_path = self.work_dir / "slurm.conf"

    @property
    def _jobcomp_path(self) -> Path:
        return self.work_dir / "log" / "jobcomp.txt"

    def _clear_stale(self) -> None:
        """Leftovers of an earlier cluster in the same work dir: its processes (if that run was
        killed) are killed, its socket, pid files and job completion records removed (job ids
        restart at 1, and the sacct shim must not report the old jobs' states)."""
        stale = self._stray_pids()
        if stale:
            logger.warning(
                "killing processes of an earlier cluster in %s: %s", self.work_dir, _describe(stale)
            )
            for pid in stale:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        for path in (
            self.munge_socket,
            self.munge_socket.with_name(self.munge_socket.name + ".lock"),
            self._jobcomp_path,
            *(self.work_dir / "run").glob("*.pid"),
        ):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def _write_munge_key(self) -> Path:
        key = self.run_dir / "munge" / "munge.key"
        if key.exists():
            key.chmod(0o600)
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        return key

    def slurm_conf_text(self, ctld_port: int, slurmd_port: int) -> str:
        """The slurm.conf for this cluster (ports given by the caller)."""
        w, r = self.work_dir, self.run_dir
        real_memory = max(1, _mem_total_mb() - _MEMORY_MARGIN_MB)
        lines = [
            "# Written by tests.support.slurm_cluster.LocalSlurmCluster: a throw-away test cluster.",
            "ClusterName=vcasttest",
            # Job ids unique across clusters: submitit's job state cache is process-wide
            # (SlurmJob.watcher), so a later cluster's job 2 must not look like an earlier one's.
            f"FirstJobId={self.first_job_id}",
            f"SlurmctldHost={self.node_name}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}",
            f"SlurmdPort={slurmd_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            # A requeued job may start again once its launch credential expired (default 120 s,
            # then the next backfill tick): 10 s, with a backfill tick every second (below), keeps a
            # requeue test's requeues to ~11 s each.
            f"AuthInfo=cred_expire=10,socket={self.munge_socket}",
            f"StateSaveLocation={w / 'state'}",
            f"SlurmdSpoolDir={r / 'spool'}",
            f"SlurmctldPidFile={w / 'run' / 'slurmctld.pid'}",
            f"SlurmdPidFile={w / 'run' / 'slurmd.pid'}",
            f"SlurmctldLogFile={w / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={w / 'log' / 'slurmd.log'}",
            "SlurmctldDebug=info",
            "SlurmdDebug=info",
            f"PlugStackConfig={w / 'plugstack.conf'}",
            f"ProctrackType={self.proctrack}",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/filetxt",
            f"JobCompLoc={self._jobcomp_path}",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/backfill",
            # Schedule a submitted batch job at once (default: up to 3 s later, which makes
            # `sbatch --wait` miss its first 2 s poll and sleep 8 s more); the backfill scheduler,
            # which starts a requeued job once it may run again, every second (default 30 s).
            "SchedulerParameters=batch_sched_delay=0,bf_interval=1",
            "MpiDefault=none",
            "ReturnToService=2",
            "SlurmdParameters=config_overrides",
            "SwitchType=switch/none",
            # Fast start/stop for tests.
            "SlurmctldTimeout=10",
            "SlurmdTimeout=30",
            "MessageTimeout=10",
            "InactiveLimit=0",
            "KillWait=2",
            "MinJobAge=300",
            "Waittime=0",
            "TCPTimeout=2",
            (
                f"NodeName={self.node_name} NodeAddr=127.0.0.1 NodeHostname={self.node_name} "
                f"CPUs={self.cpus} RealMemory={real_memory} State=UNKNOWN"
            ),
            (
                f"PartitionName={self.partition} Nodes={self.node_name} Default=YES "
                "MaxTime=INFINITE State=UP OverSubscribe=NO"
            ),
        ]
        return "\n".join(lines) + "\n"

    def _write_sacct_shim(self) -> None:
        shim = self.work_dir / "bin" / "sacct"
        shim.write_text(
            _SACCT_SHIM.format(
                python=sys.executable, jobcomp=str(self._jobcomp_path), conf=str(self.conf_path)
            )
        )
        shim.chmod(shim.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)

    # ------------------------------------------------------------------ processes
    def _daemon_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env["SLURM_CONF"] = str(self.conf_path)
        return env

    def _spawn(self, name: str, argv: list[str]) -> None:
        out = open(self.work_dir / "log" / f"{name}.out", "wb")  # noqa: SIM115 (closed in stop)
        self._outs.append(out)
        logger.debug("starting %s: %s", name, " ".join(argv))
        self._procs[name] = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=self._daemon_env(),
            cwd=self.work_dir,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 (no threads are started by this class)
        )

    def _daemon_log(self, name: str) -> Path:
        return self.work_dir / "log" / f"{name}.log"

    def _failure(self, what: str, name: str | None = None) -> SlurmClusterError:
        parts = [what]
        names = [name] if name else list(self._procs)
        for n in names:
            proc = self._procs.get(n)
            status = (
                "not started"
                if proc is None
                else ("running" if proc.poll() is None else f"exited with {proc.returncode}")
            )
            log_tail = _tail(self._daemon_log(n))
            parts.append(f"--- {n} ({status}); tail of {self._daemon_log(n)}:\n{log_tail}")
            # stdout/stderr: errors from before the log file was opened (often the same lines).
            out = self.work_dir / "log" / f"{n}.out"
            out_tail = _tail(out, 15) if out.exists() and out.stat().st_size else ""
            if out_tail and out_tail.splitlines()[-1].split(": ", 1)[-1] not in log_tail:
                parts.append(f"--- tail of {out}:\n{out_tail}")
        return SlurmClusterError("\n".join(parts))

    def _check_alive(self, name: str) -> None:
        proc = self._procs[name]
        if proc.poll() is not None:
            raise self._failure(f"{name} failed to start (exit code {proc.returncode})", name)

    def client(
        self, *args: str, check: bool = True, timeout: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        """Runs a SLURM client command (``sinfo``, ``squeue``...) against this cluster."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        return subprocess.run(
            list(args),
            env={**env, **self.env},
            capture_output=True,
            text=True,
            check=check,
            timeout=timeout,
        )

    def _start_munged(self) -> None:
        key = self._write_munge_key()
        munged = _find_binary("munged")
        assert munged is not None
        self._spawn(
            "munged",
            [
                munged,
                "--foreground",
                "--force",
                f"--socket={self.munge_socket}",
                f"--key-file={key}",
                f"--pid-file={self.work_dir / 'run' / 'munged.pid'}",
                f"--log-file={self._daemon_log('munged')}",
                f"--seed-file={self.run_dir / 'munge' / 'munged.seed'}",
                "--num-threads=2",
            ],
        )
        deadline = time.monotonic() + 15
        while True:
            self._check_alive("munged")
            if self.munge_socket.exists():
                cred = subprocess.run(
                    [_find_binary("munge") or "munge", "-n", f"--socket={self.munge_socket}"],
                    capture_output=True,
                    check=False,
                )
                if cred.returncode == 0:
                    dec = subprocess.run(
                        [_find_binary("unmunge") or "unmunge", f"--socket={self.munge_socket}"],
                        input=cred.stdout,
                        capture_output=True,
                        check=False,
                    )
                    if dec.returncode == 0:
                        return
            if time.monotonic() > deadline:
                raise self._failure("munged did not answer on its socket within 15 s", "munged")
            time.sleep(0.1)

    def start(self) -> LocalSlurmCluster:
        """Starts munged, slurmctld and slurmd; returns once the node is idle."""
        if self._started:
            return self
        reason = _static_unavailable_reason()
        if reason is not None:
            raise SlurmClusterError(reason)
        t0 = time.monotonic()
        self._prepare_dirs()
        self._clear_stale()
        ctld_port, slurmd_port = _free_ports(2)
        self.conf_path.write_text(self.slurm_conf_text(ctld_port, slurmd_port))
        (self.work_dir / "plugstack.conf").write_text("")
        self.env = {"SLURM_CONF": str(self.conf_path)}
        if self.sacct_shim:
            self._write_sacct_shim()
            self.env["PATH"] = (
                f"{self.work_dir / 'bin'}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
            )
        self._started = True
        try:
            self._start_munged()
            slurmctld, slurmd = _find_binary("slurmctld"), _find_binary("slurmd")
            assert slurmctld is not None and slurmd is not None
            self._spawn("slurmctld", [slurmctld, "-D", "-c", "-f", str(self.conf_path)])
            self._wait_for_controller()
            self._spawn("slurmd", [slurmd, "-D", "-N", self.node_name, "-f", str(self.conf_path)])
            self._wait_for_idle_node()
            if self.probe_job:
                self._run_probe_job()
        except BaseException:
            self.stop()
            raise
        logger.info(
            "local SLURM cluster up in %.1f s: SLURM_CONF=%s, partition %s, node %s (%d CPUs), "
            "slurmctld port %d",
            time.monotonic() - t0,
            self.conf_path,
            self.partition,
            self.node_name,
            self.cpus,
            ctld_port,
        )
        return self

    def _wait_for_controller(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while True:
            self._check_alive("slurmctld")
            if "UP" in self.client("scontrol", "ping", check=False, timeout=15).stdout:
                return
            if time.monotonic() > deadline:
                raise self._failure(
                    f"slurmctld did not answer `scontrol ping` within {self.start_timeout_s:.0f} s"
                )
            time.sleep(0.2)

    def _wait_for_idle_node(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        state = ""
        while True:
            self._check_alive("slurmctld")
            self._check_alive("slurmd")
            res = self.client("sinfo", "-h", "-N", "-n", self.node_name, "-o", "%T", check=False)
            state = res.stdout.strip()
            if state == "idle":
                return
            if time.monotonic() > deadline:
                raise self._failure(
                    f"node {self.node_name} not idle within {self.start_timeout_s:.0f} s "
                    f"(sinfo: {state or res.stderr.strip()!r})"
                )
            time.sleep(0.2)

    def _run_probe_job(self) -> None:
        """Runs a trivial batch job so that a cluster that cannot launch jobs fails at start (with
        the reason) rather than in a test; also gets the scheduler past its start-up delay."""
        out = self.work_dir / "log" / "probe-%j.out"
        res = self.client(
            "sbatch",
            "--parsable",
            "--job-name=vcast-probe",
            f"--output={out}",
            f"--chdir={self.work_dir}",
            "--wrap",
            "true",
            check=False,
        )
        if res.returncode != 0:
            raise self._failure(f"sbatch of a probe job failed: {res.stderr.strip()}")
        job_id = res.stdout.strip().split(";")[0]
        deadline = time.monotonic() + self.start_timeout_s
        state = ""
        while True:
            show = self.client("scontrol", "show", "job", "-o", job_id, check=False)
            fields = dict(t.split("=", 1) for t in show.stdout.split() if "=" in t)
            state = fields.get("JobState", "")
            if state == "COMPLETED":
                return
            if state in (
                "FAILED",
                "CANCELLED",
                "NODE_FAIL",
                "TIMEOUT",
                "BOOT_FAIL",
                "OUT_OF_MEMORY",
            ):
                raise self._failure(
                    f"probe job {job_id} ended {state} (reason {fields.get('Reason')}); output:\n"
                    + _tail(self.work_dir / "log" / f"probe-{job_id}.out")
                )
            if time.monotonic() > deadline:
                raise self._failure(
                    f"probe job {job_id} did not complete within {self.start_timeout_s:.0f} s "
                    f"(state {state or show.stderr.strip()!r})"
                )
            time.sleep(0.1)

    # ------------------------------------------------------------------ teardown
    def _cancel_all_jobs(self) -> None:
        proc = self._procs.get("slurmctld")
        if proc is None or proc.poll() is not None:
            return
        try:
            self.client("scancel", "--partition", self.partition, check=False, timeout=15)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                res = self.client("squeue", "-h", "-o", "%i", check=False, timeout=15)
                if res.returncode != 0 or not res.stdout.strip():
                    return
                time.sleep(0.3)
            logger.warning("jobs still in the queue at shutdown: %s", res.stdout.split())
        except (OSError, subprocess.SubprocessError) as e:
            logger.warning("could not cancel the jobs: %s", e)

    def _stray_pids(self) -> list[int]:
        """Processes (slurmstepd, job steps) that carry this cluster's SLURM_CONF."""
        needle = f"SLURM_CONF={self.conf_path}".encode()
        skip = _own_ancestors()
        pids = []
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) not in skip and _proc_environ_has(int(entry), needle):
                pids.append(int(entry))
        return pids

    def stop(self) -> None:
        """Cancels all jobs and stops every process this cluster started. Idempotent."""
        if not self._started:
            return
        self._cancel_all_jobs()
        logger.debug("jobs cancelled")
        # slurmd first (it reaps job steps), then the controller, munged last (both need it).
        for name in ("slurmd", "slurmctld", "munged"):
            proc = self._procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                logger.warning("%s did not stop on SIGTERM, killing it", name)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        # Job steps that were being cancelled may take a moment to exit on their own.
        deadline = time.monotonic() + 3
        while (strays := self._stray_pids()) and time.monotonic() < deadline:
            logger.debug("waiting for leftover processes to exit: %s", _describe(strays))
            time.sleep(0.1)
        for _ in range(3):
            strays = self._stray_pids()
            if not strays:
                break
            logger.warning("killing leftover processes of the cluster: %s", _describe(strays))
            for pid in strays:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        for out in self._outs:
            out.close()
        self._outs.clear()
        self._procs.clear()
        if self._short_dir is not None:
            shutil.rmtree(self._short_dir, ignore_errors=True)
            self._short_dir = None
        self._started = False
        logger.info("local SLURM cluster in %s stopped", self.work_dir)

    def __enter__(self) -> LocalSlurmCluster:  # noqa: PYI034
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
