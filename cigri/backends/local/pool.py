"""The local pool daemon: a tiny batch system that runs queued jobs on this machine.

All state lives in the spool directory, so jobs, the daemon and its clients can each die
and restart without losing track of one another:

- ``jobs/<id>/``: ``spec.json``, ``stdout``, ``stderr``, ``pid`` ("pid start_epoch"),
  ``exit`` (written by the job's own shell wrapper), ``killed`` ("walltime"/"cancelled").
- ``queue/<id>``: jobs to start; ``running/<id>``: jobs claimed by the pool;
  ``cancel/<id>``: cancel requests; ``pool.lock``: flocked by the one live pool.

Every job always has at least one marker among queue, running, pid, exit, killed: each is
written before the previous one goes away (queue to running is one rename), and readers
check them in that order, so a job that moves on while being looked at is never lost.

Run as ``python -m cigri.backends.local.pool SPOOLDIR SLOTS`` (or through :data:`COMMAND`);
it detaches at once.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass

# Parameters reach the program as argv; the shell only runs "$@" and records its status,
# so the status survives the pool dying.
WRAPPER = '"$@"; echo $? > "$CIGRI_JOB_SPOOL/exit"'
KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL
IDLE_EXIT = 60.0  # the daemon leaves after this long with nothing queued or running
TICK = 0.005  # longest sleep when nothing happened; a child's exit wakes us sooner
KEPT_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR")
# How the backend starts the daemon: like ``-m``, minus runpy's warning about a module that
# its own package already imported.
COMMAND = "import sys; from cigri.backends.local.pool import main; sys.exit(main(sys.argv[1:]))"


class Spool:
    """Paths of one spool directory, shared by the daemon and the backend."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.jobs = os.path.join(self.root, "jobs")
        self.queue = os.path.join(self.root, "queue")
        self.running = os.path.join(self.root, "running")
        self.cancel = os.path.join(self.root, "cancel")
        self.lock = os.path.join(self.root, "pool.lock")
        self.log = os.path.join(self.root, "pool.log")

    def create(self) -> None:
        os.makedirs(self.root, mode=0o700, exist_ok=True)
        for path in (self.jobs, self.queue, self.running, self.cancel):
            os.makedirs(path, exist_ok=True)

    def job(self, remote_id: str, name: str = "") -> str:
        return os.path.join(self.jobs, remote_id, name)


def touch(path: str) -> None:
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))


def unlink(path: str) -> bool:
    """Remove ``path``; False if it was already gone (someone else took it)."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def write_atomic(path: str, text: str) -> None:
    """Readers see the whole content or no file, never a half-written one."""
    tmp = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def read_marker(path: str) -> tuple[str, float] | None:
    """Content and mtime of a marker file; None when absent or still empty."""
    try:
        with open(path) as f:
            text = f.read().strip()
            mtime = os.fstat(f.fileno()).st_mtime
    except FileNotFoundError:
        return None
    return (text, mtime) if text else None


def read_pid(jobdir: str) -> tuple[int, float] | None:
    """The job's process id and start time, once the pool has started it."""
    marker = read_marker(os.path.join(jobdir, "pid"))
    if marker is None:
        return None
    pid, started = marker[0].split()
    return int(pid), float(started)


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs; a zombie nobody reaps (e.g. in a container) counts as dead."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel directly
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def signal_group(pid: int, sig: int) -> None:
    """Signal the job's whole session (it leads its own process group)."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


@dataclass
class Running:
    """A started job; ``proc`` is None when a previous pool instance started it."""

    remote_id: str
    pid: int
    started: float
    walltime: float
    proc: subprocess.Popen[bytes] | None
    kill_at: float | None = None
    hard_killed: bool = False


class Pool:
    """Start, watch, time out and cancel jobs, up to ``slots`` at once."""

    def __init__(self, spool: Spool, slots: int) -> None:
        self.spool = spool
        self.slots = slots
        self.jobs: dict[str, Running] = {}
        self.children: dict[int, Running] = {}
        self.pending: deque[str] = deque()
        self.stop = False
        self.home = os.path.expanduser("~")
        self.base_env = {k: os.environ[k] for k in KEPT_ENV if k in os.environ}
        self.base_env.setdefault("PATH", os.defpath)
        self.devnull = os.open(os.devnull, os.O_RDONLY)
        self.wake, wake_w = os.pipe()
        os.set_blocking(self.wake, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        # A Python-level handler (not SIG_IGN, which children would inherit) so that
        # SIGCHLD writes to the wakeup pipe.
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self, *_: object) -> None:
        self.stop = True

    def run(self) -> None:
        """Loop until SIGTERM or until idle for IDLE_EXIT seconds."""
        idle_since = time.monotonic()
        while not self.stop:
            busy = self.handle_cancels()
            busy = self.reap() or busy
            busy = self.enforce_walltime() or busy
            busy = self.start_queued() or busy
            now = time.monotonic()
            if self.jobs or self.pending:
                idle_since = now
            elif now - idle_since > IDLE_EXIT:
                return
            if not busy:
                self.sleep(TICK)

    def sleep(self, timeout: float) -> None:
        select.select([self.wake], [], [], timeout)
        try:
            while os.read(self.wake, 512):
                pass
        except BlockingIOError:
            pass

    def adopt(self) -> None:
        """Rebuild the running set left by a previous pool from ``running/`` and pid files."""
        for entry in os.scandir(self.spool.running):
            remote_id = entry.name
            jobdir = self.spool.job(remote_id)
            started = read_pid(jobdir)
            ended = read_marker(os.path.join(jobdir, "exit")) is not None
            if started is None or ended or not alive(started[0]):
                # Never started (now lost), or over while no pool watched it.
                unlink(entry.path)
                continue
            job = Running(remote_id, started[0], started[1], self._walltime(jobdir), None)
            self.jobs[remote_id] = job
            if os.path.exists(os.path.join(jobdir, "killed")):
                job.kill_at = time.time()
                signal_group(job.pid, signal.SIGTERM)

    def _walltime(self, jobdir: str) -> float:
        try:
            with open(os.path.join(jobdir, "spec.json")) as f:
                return float(json.load(f)["walltime_seconds"])
        except (OSError, ValueError, KeyError):
            return 0.0

    def handle_cancels(self) -> bool:
        with os.scandir(self.spool.cancel) as it:
            names = [e.name for e in it if not e.name.startswith(".")]
        for remote_id in names:
            job = self.jobs.get(remote_id)
            jobdir = self.spool.job(remote_id)
            if job is not None:
                if job.kill_at is None and not os.path.exists(os.path.join(jobdir, "exit")):
                    self.kill(job, "cancelled")
            elif os.path.exists(os.path.join(self.spool.queue, remote_id)):
                write_atomic(os.path.join(jobdir, "killed"), "cancelled")
                unlink(os.path.join(self.spool.queue, remote_id))
            unlink(os.path.join(self.spool.cancel, remote_id))
        return bool(names)

    def kill(self, job: Running, reason: str) -> None:
        write_atomic(self.spool.job(job.remote_id, "killed"), reason)
        job.kill_at = time.time()
        signal_group(job.pid, signal.SIGTERM)

    def reap(self) -> bool:
        busy = False
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            job = self.children.pop(pid, None)
            if job is not None and job.proc is not None:
                job.proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must not reap again
                self.finish(job, job.proc.returncode)
                busy = True
        for job in [j for j in self.jobs.values() if j.proc is None]:
            if os.path.exists(self.spool.job(job.remote_id, "exit")) or not alive(job.pid):
                self.finish(job, None)
                busy = True
        return busy

    def finish(self, job: Running, code: int | None) -> None:
        jobdir = self.spool.job(job.remote_id)
        ended = any(os.path.exists(os.path.join(jobdir, m)) for m in ("exit", "killed"))
        if code is not None and not ended:
            # The wrapper shell itself died (e.g. killed by a signal): record its status.
            write_atomic(os.path.join(jobdir, "exit"), str(128 - code if code < 0 else code))
        if job.kill_at is not None:
            signal_group(job.pid, signal.SIGKILL)  # leftovers of a killed job's group
        unlink(os.path.join(self.spool.running, job.remote_id))
        del self.jobs[job.remote_id]

    def enforce_walltime(self) -> bool:
        busy = False
        now = time.time()
        for job in self.jobs.values():
            if job.kill_at is None:
                if job.walltime > 0 and now - job.started > job.walltime:
                    self.kill(job, "walltime")
                    busy = True
            elif not job.hard_killed and now - job.kill_at >= KILL_GRACE:
                signal_group(job.pid, signal.SIGKILL)
                job.hard_killed = True
                busy = True
        return busy

    def start_queued(self) -> bool:
        """Start the oldest queued jobs while slots are free."""
        started = scanned = False
        while len(self.jobs) < self.slots and not self.stop:
            if not self.pending:
                if scanned:
                    break
                with os.scandir(self.spool.queue) as it:
                    names = [e.name for e in it if not e.name.startswith(".")]
                self.pending.extend(sorted(names, key=lambda n: (len(n), n)))
                scanned = True
                continue
            remote_id = self.pending.popleft()
            try:
                # The claim: one atomic rename, so the job is always in queue/ or running/.
                os.rename(os.path.join(self.spool.queue, remote_id), os.path.join(self.spool.running, remote_id))
            except FileNotFoundError:
                continue  # cancelled while waiting in our list
            self.start(remote_id)
            started = True
        return started

    def start(self, remote_id: str) -> None:
        jobdir = self.spool.job(remote_id)
        try:
            with open(os.path.join(jobdir, "spec.json")) as f:
                spec = json.load(f)
            walltime = float(spec["walltime_seconds"] or 0)
            directory = os.path.join(self.home, os.path.expanduser(spec["directory"]))
            os.makedirs(directory, exist_ok=True)
            env = {**self.base_env, **spec["environment"], "CIGRI_JOB_SPOOL": jobdir}
            proc = self.spawn(["/bin/sh", "-c", WRAPPER, "cigri-job", *spec["argv"]], directory, env, jobdir)
        except (OSError, ValueError, KeyError, TypeError) as error:
            self.fail(remote_id, f"cigri: cannot start job {remote_id}: {error}\n")
            return
        started = time.time()
        write_atomic(os.path.join(jobdir, "pid"), f"{proc.pid} {started!r}\n")
        job = Running(remote_id, proc.pid, started, walltime, proc)
        self.jobs[remote_id] = job
        self.children[proc.pid] = job

    def spawn(self, argv: list[str], directory: str, env: dict[str, str], jobdir: str) -> subprocess.Popen[bytes]:
        """Start the job in its own session, outputs into files the backend already created
        (creating inodes here is what would slow starts down)."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        out = os.open(os.path.join(jobdir, "stdout"), flags, 0o644)
        try:
            err = os.open(os.path.join(jobdir, "stderr"), flags, 0o644)
            try:
                return subprocess.Popen(
                    argv, cwd=directory, env=env, stdin=self.devnull, stdout=out, stderr=err,
                    start_new_session=True,
                )
            finally:
                os.close(err)
        finally:
            os.close(out)

    def fail(self, remote_id: str, message: str) -> None:
        """End a job that could not start with status 127, like a missing command."""
        jobdir = self.spool.job(remote_id)
        try:
            with open(os.path.join(jobdir, "stderr"), "a") as err:
                err.write(message)
            write_atomic(os.path.join(jobdir, "exit"), "127\n")
        except OSError:
            sys.stderr.write(message)
        unlink(os.path.join(self.spool.running, remote_id))


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        sys.stderr.write("usage: python -m cigri.backends.local.pool SPOOLDIR SLOTS\n")
        return 2
    spool = Spool(argv[0])
    spool.create()
    if os.fork():
        return 0  # detach: whoever spawned us reaps this parent at once
    lock = os.open(spool.lock, os.O_RDWR | os.O_CREAT, 0o600)
    if not try_lock(lock):
        return 0  # another pool serves this spool
    pool = Pool(spool, max(1, int(argv[1])))
    pool.adopt()
    while True:
        os.ftruncate(lock, 0)
        os.pwrite(lock, f"{os.getpid()}\n".encode(), 0)
        pool.run()
        if pool.stop:
            return 0
        # Idle: unlock first, then look once more, so a job queued meanwhile is either
        # seen here or finds the lock free and spawns a new pool.
        fcntl.flock(lock, fcntl.LOCK_UN)
        if not os.listdir(spool.queue) or not try_lock(lock):
            return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
