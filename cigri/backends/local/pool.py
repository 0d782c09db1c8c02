"""The local pool daemon: a tiny batch system that runs queued jobs on this machine.

All state lives in the spool directory, so jobs, the daemon and its clients can each die
and restart without losing track of one another:

- ``spool.db`` (SQLite, WAL): one row per job with its spec, its state (``queued`` →
  ``starting`` → ``running`` → ``ended``), pid, start and end times, exit status, why the
  pool killed it, and a client's cancel request. Clients insert and cancel; the pool moves
  jobs along in one transaction per batch of starts or ends.
- ``jobs/<id>/``: the job's ``stdout`` and ``stderr``, created when it starts.
- ``pool.lock``: flocked by the one live pool, which writes its pid there.

Creating files is what a spool spends most of its time on, so a job costs one directory,
its two output files and one fork+exec; everything else is a row.

Exit statuses survive the pool: :func:`main` forks a *keeper* that makes itself the child
subreaper and forks the pool. Jobs are the pool's children; when the pool dies they become
the keeper's, which records how they end and leaves when none remain. A new pool adopts
the jobs still running.

Every job runs as its owner (the spec's ``user``; none: the account owning the spool, which
writes it). A pool running as root starts another user's job with that user's uid, gid,
supplementary groups, ``HOME``, ``USER``, ``SHELL`` and a clean environment, in a spool directory
and output files it owns and no one else may read (but the spool's account, which reads output
tails for its users), and lets the job itself create and enter its working directory: nothing is
done with root's rights on the user's behalf. A pool running as anyone else refuses another
user's job (it ends with status 127 and says why in its stderr). The spool's database and log
are the spool's account's alone.

On a site the pool runs as root beside a ``cigri server`` under its own account, which writes
the spool (:func:`run_service`, ``cigri pool``): the pool trusts the spool's ``user`` fields as
slurmd trusts slurmctld, so only that account may write the spool (:func:`spool_problems`), and
the pool gives it nothing more: it runs no job as root for it, reads and writes the spool's files
with its rights only (the file-system uid of the threads doing so), handles the jobs' directories
through descriptors, never by path, and signals only processes that are its jobs.

Run as ``python -m cigri.backends.local.pool SPOOLDIR SLOTS`` (or through :data:`COMMAND`);
it detaches at once.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import math
import os
import pwd
import select
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

KILL_GRACE = 2.0  # seconds between SIGTERM and SIGKILL
LOST_GRACE = 1.0  # an adopted job dead this long with no recorded end is lost
IDLE_EXIT = 60.0  # the daemon leaves after this long with nothing queued or running
TICK = 0.005  # longest sleep when nothing happened; a child's exit wakes us sooner
# Threads that start jobs: a fork+exec blocks its caller until the child is scheduled and
# has exec'd, so starting a few at once hides that latency on a busy machine.
SPAWNERS = 4
KEPT_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TZ", "TMPDIR")
OWNER_KEPT_ENV = ("LANG", "LC_ALL", "TZ")  # what another user's job gets of the pool's environment
OWNER_PATH = "/usr/local/bin:/usr/bin:/bin"
# How another user's job starts: as that user, it makes and enters its directory ($0), then
# becomes its program; a directory it cannot make or enter ends it with status 127.
AS_OWNER = 'mkdir -p -- "$0" && cd -- "$0" || exit 127; exec "$@"'
PR_SET_CHILD_SUBREAPER = 36
# How the backend starts the daemon: like ``-m``, minus runpy's warning about a module that
# its own package already imported.
COMMAND = "import sys; from cigri.backends.local.pool import main; sys.exit(main(sys.argv[1:]))"

SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    seq INTEGER PRIMARY KEY,                -- submission order, which is start order
    key TEXT NOT NULL UNIQUE,               -- the remote id
    spec TEXT NOT NULL,                     -- JSON: argv, directory, environment, walltime_seconds
    state TEXT NOT NULL DEFAULT 'queued',   -- queued, starting, running, ended
    pid INTEGER,
    started_at REAL,
    ended_at REAL,
    exit_code INTEGER,                      -- NULL once ended: killed, or lost with its pool
    killed TEXT,                            -- 'walltime' or 'cancelled', set when the pool kills
    cancel INTEGER NOT NULL DEFAULT 0       -- a client asked to cancel a started job
);
CREATE INDEX IF NOT EXISTS jobs_open ON jobs(state, seq) WHERE state != 'ended';
CREATE INDEX IF NOT EXISTS jobs_to_cancel ON jobs(seq) WHERE cancel = 1;
"""


class Spool:
    """Paths of one spool directory and its database, shared by the daemon and the backend."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.jobs = os.path.join(self.root, "jobs")
        self.db = os.path.join(self.root, "spool.db")
        self.lock = os.path.join(self.root, "pool.lock")
        self.log = os.path.join(self.root, "pool.log")

    def create(self) -> None:
        os.makedirs(self.root, mode=0o700, exist_ok=True)
        os.makedirs(self.jobs, exist_ok=True)

    def connect(self) -> sqlite3.Connection:
        """A connection in autocommit mode; :func:`transaction` groups writes. The database is
        private (SQLite gives its journal files the database's mode)."""
        os.close(os.open(self.db, os.O_RDWR | os.O_CREAT, 0o600))
        conn = sqlite3.connect(self.db, timeout=60, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.executescript(SCHEMA)  # IF NOT EXISTS: concurrent first opens agree
        return conn

    def job(self, remote_id: str, name: str = "") -> str:
        return os.path.join(self.jobs, remote_id, name)


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction holding the lock from its start (see :mod:`cigri.db`)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def alive(pid: int) -> bool:
    """Whether ``pid`` still runs; a zombie counts as dead (its end is being recorded)."""
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


def running_pids(root: str) -> list[int]:
    """Pids of the spool's started jobs, for whoever must clean up after a test or a crash."""
    spool = Spool(root)
    if not os.path.exists(spool.db):
        return []
    conn = sqlite3.connect(spool.db, timeout=60)
    try:
        return [r[0] for r in conn.execute("SELECT pid FROM jobs WHERE state = 'running' AND pid IS NOT NULL")]
    finally:
        conn.close()


def exit_status(code: int) -> int:
    """A shell's ``$?`` for a process's status: its exit code, or 128 + the killing signal."""
    return 128 - code if code < 0 else code


@dataclass
class Running:
    """A started job; ``proc`` is None when a previous pool instance started it."""

    seq: int
    remote_id: str
    pid: int
    started: float
    walltime: float
    proc: subprocess.Popen[bytes] | None
    kill_at: float | None = None
    hard_killed: bool = False
    dead_since: float | None = None  # adopted jobs only: when we first saw it gone


class Pool:
    """Start, watch, time out and cancel jobs, up to ``slots`` at once; leave after ``idle_exit``
    seconds with nothing to do."""

    def __init__(self, spool: Spool, slots: int, idle_exit: float = IDLE_EXIT) -> None:
        self.spool = spool
        self.slots = slots
        self.idle_exit = idle_exit
        self.writer = spool_account(spool)  # the account that writes the spool (see act_as_writer)
        self.conn = spool.connect()
        os.makedirs(spool.jobs, exist_ok=True)
        self.jobs_dir = os.open(spool.jobs, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        self.jobs: dict[int, Running] = {}
        self.children: dict[int, Running] = {}
        self.pending: deque[int] = deque()
        # the spawners act on the jobs' directories through descriptors, with all of the pool's rights
        self.spawner = ThreadPoolExecutor(max_workers=min(slots, SPAWNERS), thread_name_prefix="spawn",
                                          initializer=_set_fs_ids, initargs=(os.geteuid(), os.getegid()))
        self.starting: dict[Future[Running], int] = {}  # -> seq
        self.early: dict[int, int] = {}  # pid -> exit status, reaped before its start was collected
        self.cancel_on_start: set[int] = set()  # cancelled while being started
        self.last_seq = 0
        self.version = -1
        self.stop = False
        self.home = os.path.expanduser("~")
        self.base_env = {k: os.environ[k] for k in KEPT_ENV if k in os.environ}
        self.base_env.setdefault("PATH", os.defpath)
        self.uid = os.geteuid()
        self.account = _name(self.uid)
        self.devnull = os.open(os.devnull, os.O_RDONLY)
        self.wake, self.wake_w = os.pipe()
        os.set_blocking(self.wake, False)
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w, warn_on_full_buffer=False)
        # A Python-level handler (not SIG_IGN, which children would inherit) so that
        # SIGCHLD writes to the wakeup pipe.
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._on_sigterm)

    def _on_sigterm(self, *_: object) -> None:
        self.stop = True

    def run(self) -> None:
        """Loop until SIGTERM or until idle for IDLE_EXIT seconds; jobs being started are
        always recorded first, so that no started job is left looking unstarted."""
        idle_since = time.monotonic()
        while not self.stop or self.starting:
            busy = self.read_requests()
            busy = self.collect_started() or busy
            busy = self.reap() or busy
            busy = self.enforce_walltime() or busy
            busy = self.start_queued() or busy
            now = time.monotonic()
            if self.jobs or self.pending or self.starting:
                idle_since = now
            elif now - idle_since > self.idle_exit:
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
        """Take over the jobs a previous pool left: started ones are watched, claimed ones lost."""
        rows = self.conn.execute(
            "SELECT seq, key, state, pid, started_at, killed, spec FROM jobs WHERE state IN ('starting', 'running')"
        ).fetchall()
        with transaction(self.conn):
            for seq, key, state, pid, started, killed, spec in rows:
                if state == "starting" or not self._is_job(pid, json.loads(spec)):  # never started, or not ours
                    self.conn.execute("UPDATE jobs SET state = 'ended', ended_at = ? WHERE seq = ?",
                                      [time.time(), seq])
                    continue
                job = Running(seq, key, pid, started, float(json.loads(spec)["walltime_seconds"] or 0), None)
                self.jobs[seq] = job
                if killed is not None:
                    job.kill_at = time.time()
                    signal_group(pid, signal.SIGTERM)

    def _is_job(self, pid: int, spec: dict[str, object]) -> bool:
        """Whether the live ``pid`` a previous pool recorded is that job's: the leader of its own
        session, run by the job's owner. The pool signals the process group of every job it
        watches, so no pid written in the spool may lead it to signal anything else."""
        try:
            owner = self.owner(str(spec.get("user") or ""))
            with open(f"/proc/{pid}/status", "rb") as status:
                real_uid = int(next(line for line in status if line.startswith(b"Uid:")).split()[1])
            return os.getsid(pid) == pid and real_uid == (self.uid if owner is None else owner.pw_uid)
        except (OSError, KeyError, StopIteration, ValueError):
            return False  # gone, not ours, or an owner the pool refuses

    def read_requests(self) -> bool:
        """When a client committed something: queue new jobs, act on cancel requests."""
        version = self.conn.execute("PRAGMA data_version").fetchone()[0]
        if version == self.version:
            return False
        self.version = version
        rows = self.conn.execute("SELECT seq FROM jobs WHERE state = 'queued' AND seq > ? ORDER BY seq",
                                 [self.last_seq]).fetchall()
        if rows:
            self.pending.extend(r[0] for r in rows)
            self.last_seq = rows[-1][0]
        cancels = [r[0] for r in self.conn.execute("SELECT seq FROM jobs WHERE cancel = 1")]
        if cancels:
            starting = set(self.starting.values())
            with transaction(self.conn):
                for seq in cancels:
                    if seq in starting:
                        self.cancel_on_start.add(seq)  # killed once its start is collected
                        continue
                    job = self.jobs.get(seq)
                    if job is not None and job.kill_at is None:
                        self._kill(job, "cancelled")
                    self.conn.execute("UPDATE jobs SET cancel = 0 WHERE seq = ?", [seq])
        return True

    def _kill(self, job: Running, reason: str) -> None:
        """Record the kill (inside the caller's transaction), then ask the job to stop."""
        job.kill_at = time.time()
        self.conn.execute("UPDATE jobs SET killed = ?, ended_at = ? WHERE seq = ? AND killed IS NULL",
                          [reason, job.kill_at, job.seq])
        signal_group(job.pid, signal.SIGTERM)

    def reap(self) -> bool:
        ended: list[tuple[Running, int | None]] = []
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            job = self.children.pop(pid, None)
            if job is None:
                self.early[pid] = status  # a start not collected yet
            elif job.proc is not None:
                ended.append((job, self._returned(job, status)))
        for pid in [p for p in self.early if p in self.children]:
            job = self.children.pop(pid)
            ended.append((job, self._returned(job, self.early.pop(pid))))
        ended += self._adopted_ends()
        if not ended:
            return False
        now = time.time()
        with transaction(self.conn):
            self.conn.executemany(
                "UPDATE jobs SET state = 'ended', exit_code = ?, ended_at = coalesce(ended_at, ?) "
                "WHERE seq = ? AND state = 'running'", [(code, now, job.seq) for job, code in ended])
        for job, _ in ended:
            if job.kill_at is not None:
                signal_group(job.pid, signal.SIGKILL)  # leftovers of a killed job's group
            del self.jobs[job.seq]
        return True

    @staticmethod
    def _returned(job: Running, status: int) -> int:
        assert job.proc is not None
        job.proc.returncode = os.waitstatus_to_exitcode(status)  # Popen must not reap again
        return exit_status(job.proc.returncode)

    def _adopted_ends(self) -> list[tuple[Running, int | None]]:
        """Adopted jobs that are gone: their keeper recorded the end, or after a grace, lost."""
        ended: list[tuple[Running, int | None]] = []
        now = time.monotonic()
        for job in self.jobs.values():
            if job.proc is not None or alive(job.pid):
                continue
            row = self.conn.execute("SELECT state FROM jobs WHERE seq = ?", [job.seq]).fetchone()
            if row[0] == "ended":
                ended.append((job, None))  # the update below leaves the keeper's record alone
            elif job.dead_since is None:
                job.dead_since = now
            elif now - job.dead_since > LOST_GRACE:
                ended.append((job, None))
        return ended

    def enforce_walltime(self) -> bool:
        now = time.time()
        expired = [j for j in self.jobs.values() if j.kill_at is None and 0 < j.walltime < now - j.started]
        if expired:
            with transaction(self.conn):
                for job in expired:
                    self._kill(job, "walltime")
        busy = bool(expired)
        for job in self.jobs.values():
            if job.kill_at is not None and not job.hard_killed and now - job.kill_at >= KILL_GRACE:
                signal_group(job.pid, signal.SIGKILL)
                job.hard_killed = True
                busy = True
        return busy

    def start_queued(self) -> bool:
        """Claim the oldest queued jobs while slots are free (one transaction) and start them. A
        gang's members (queued together) are claimed together once there are slots for all those
        still queued, and until then nothing queued behind them starts (first come, first served)."""
        free = self.slots - len(self.jobs) - len(self.starting)
        if free <= 0 or not self.pending or self.stop:
            return False
        claimed: list[tuple[int, str, str]] = []
        with transaction(self.conn):
            while self.pending and len(claimed) < free:
                members = self._gang_at_head()
                if len(claimed) + len(members) > free:
                    break
                for seq in members or [self.pending[0]]:
                    self.pending.remove(seq)
                    row = self.conn.execute("UPDATE jobs SET state = 'starting' WHERE seq = ? AND state = 'queued' "
                                            "RETURNING key, spec", [seq]).fetchone()
                    if row is not None:  # else cancelled while waiting in our list
                        claimed.append((seq, row[0], row[1]))
        for seq, key, spec in claimed:
            future = self.spawner.submit(self.start, seq, key, spec)
            self.starting[future] = seq
            future.add_done_callback(self._wake_up)
        return bool(claimed)

    def _gang_at_head(self) -> list[int]:
        """The queued members of the gang of the first pending job ([] when it is not in a gang)."""
        row = self.conn.execute("SELECT json_extract(spec, '$.gang'), json_extract(spec, '$.gang_size') FROM jobs "
                                "WHERE seq = ?", [self.pending[0]]).fetchone()
        if row is None or row[0] is None:
            return []
        following = list(self.pending)[:row[1]]
        return [seq for seq, in self.conn.execute(
            "SELECT seq FROM jobs WHERE seq IN (SELECT value FROM json_each(?)) AND state = 'queued' "
            "AND json_extract(spec, '$.gang') = ? ORDER BY seq", [json.dumps(following), row[0]])] or following[:1]

    def _wake_up(self, _: object) -> None:
        try:
            os.write(self.wake_w, b"s")
        except BlockingIOError:
            pass  # the pipe is full: the loop is awake already

    def collect_started(self) -> bool:
        """Record the jobs started since the last look (one transaction)."""
        done = [future for future in self.starting if future.done()]
        if not done:
            return False
        started, failed = [], []
        for future in done:
            seq = self.starting.pop(future)
            try:
                job = future.result()
            except (OSError, ValueError, KeyError, TypeError, subprocess.SubprocessError):
                failed.append(seq)  # start() said why in the job's stderr
                continue
            self.jobs[seq] = self.children[job.pid] = job
            started.append((job.pid, job.started, seq))
        now = time.time()
        with transaction(self.conn):
            self.conn.executemany("UPDATE jobs SET state = 'running', pid = ?, started_at = ? WHERE seq = ?", started)
            for seq in self.cancel_on_start.intersection(self.jobs):
                self._kill(self.jobs[seq], "cancelled")
                self.conn.execute("UPDATE jobs SET cancel = 0 WHERE seq = ?", [seq])
            self.cancel_on_start.difference_update(self.jobs, failed)
            # A job that cannot start ends with status 127, like a missing command.
            self.conn.executemany("UPDATE jobs SET state = 'ended', exit_code = 127, started_at = ?, ended_at = ? "
                                  "WHERE seq = ?", [(now, now, seq) for seq in failed])
        return True

    def start(self, seq: int, key: str, spec_json: str) -> Running:
        """Spawn the job as its owner in its own session, its outputs in its spool directory (in
        a spawner thread); a job that cannot start says why in its stderr, then this raises."""
        spec = json.loads(spec_json)
        owner = None
        try:
            owner = self.owner(str(spec.get("user") or ""))
            return self._spawn(seq, key, spec, owner)
        except (OSError, ValueError, KeyError, TypeError, subprocess.SubprocessError) as error:
            self._report_failure(key, owner, f"cigri: cannot start job {key}: {error}\n")
            raise

    def _spawn(self, seq: int, key: str, spec: dict[str, Any], owner: pwd.struct_passwd | None) -> Running:
        out, err = self.outputs(key, owner)
        walltime = float(str(spec["walltime_seconds"] or 0))
        try:
            if owner is None:
                directory = os.path.join(self.home, os.path.expanduser(str(spec["directory"])))
                os.makedirs(directory, exist_ok=True)
                env = {**self.base_env, **spec["environment"], "CIGRI_JOB_SPOOL": self.spool.job(key)}
                proc = subprocess.Popen(spec["argv"], cwd=directory, env=env, stdin=self.devnull, stdout=out,
                                        stderr=err, start_new_session=True)
            else:
                directory = os.path.join(owner.pw_dir, str(spec["directory"]))
                env = {**{k: v for k, v in self.base_env.items() if k in OWNER_KEPT_ENV},
                       "HOME": owner.pw_dir, "USER": owner.pw_name, "LOGNAME": owner.pw_name,
                       "SHELL": owner.pw_shell or "/bin/sh", "PATH": OWNER_PATH,
                       **spec["environment"], "CIGRI_JOB_SPOOL": self.spool.job(key)}
                proc = subprocess.Popen(["/bin/sh", "-c", AS_OWNER, directory, *spec["argv"]], cwd="/", env=env,
                                        stdin=self.devnull, stdout=out, stderr=err, start_new_session=True,
                                        user=owner.pw_uid, group=owner.pw_gid,
                                        extra_groups=os.getgrouplist(owner.pw_name, owner.pw_gid))
        finally:
            os.close(out)
            os.close(err)
        return Running(seq, key, proc.pid, time.time(), walltime, proc)

    def owner(self, user: str) -> pwd.struct_passwd | None:
        """The account to switch to for ``user``'s job; None: the pool's own. A job naming no one
        is the spool's account's. As root the pool switches to anyone but root, unless root owns
        the spool: the account writing it never has a job run as root."""
        if user in ("", self.writer.pw_name, str(self.writer.pw_uid)):
            entry = self.writer
        elif self.uid != 0:
            raise PermissionError(f"the pool runs as {self.account}, not root: it runs no one else's job "
                                  f"(this one is {user}'s)")
        else:
            entry = pwd.getpwnam(user)
            if entry.pw_uid == 0 and self.writer.pw_uid != 0:
                raise PermissionError(f"the pool runs no job as root: its spool is {self.writer.pw_name}'s")
        if entry.pw_uid == self.uid:
            return None
        if self.uid != 0:
            raise PermissionError(f"the pool runs as {self.account}, not root: it runs no one else's job "
                                  f"(this one is {entry.pw_name}'s)")
        return entry

    def _files_for(self, owner: pwd.struct_passwd | None) -> tuple[int, int, int]:
        """Who owns a job's spool directory and outputs, and their mode: the job's owner alone, but
        the group of the spool's account when that account is not root, for it reads the outputs'
        tails for its users (``gridstat -O``, a failed job's stderr)."""
        if owner is None:
            return -1, -1, 0o600
        if self.writer.pw_uid in (0, owner.pw_uid):
            return owner.pw_uid, owner.pw_gid, 0o600
        return owner.pw_uid, self.writer.pw_gid, 0o640

    def _job_dir(self, key: str, owner: pwd.struct_passwd | None) -> int:
        """The job's spool directory, made if missing, opened (never through a link), its owner's."""
        uid, gid, mode = self._files_for(owner)
        with suppress(FileExistsError):
            os.mkdir(key, 0o700, dir_fd=self.jobs_dir)
        directory = os.open(key, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=self.jobs_dir)
        try:
            if owner is not None:
                os.fchown(directory, uid, gid)
                os.fchmod(directory, mode | (mode & 0o444) >> 2)  # 0700, or 0750
        except BaseException:
            os.close(directory)
            raise
        return directory

    def outputs(self, key: str, owner: pwd.struct_passwd | None) -> tuple[int, int]:
        """The job's spool directory and fresh ``stdout`` and ``stderr`` in it, the job's owner's
        (:meth:`_files_for`); both opened here. Names already there are removed, never written
        through."""
        uid, gid, mode = self._files_for(owner)
        directory = self._job_dir(key, owner)
        fds: list[int] = []
        try:
            for name in ("stdout", "stderr"):
                with suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=directory)
                fds.append(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode, dir_fd=directory))
                if owner is not None:
                    os.fchown(fds[-1], uid, gid)
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        finally:
            os.close(directory)
        return fds[0], fds[1]

    def _report_failure(self, key: str, owner: pwd.struct_passwd | None, message: str) -> None:
        """Append to the job's stderr, which its owner (or, when none could be told, the spool's
        account) can read, why it did not start."""
        try:
            reader = owner if owner is not None or self.writer.pw_uid == self.uid else self.writer
            uid, gid, mode = self._files_for(reader)
            directory = self._job_dir(key, reader)
            try:
                fd = os.open("stderr", os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, mode, dir_fd=directory)
            finally:
                os.close(directory)
            with open(fd, "a") as err:
                if reader is not None:
                    os.fchown(fd, uid, gid)
                err.write(message)
        except OSError:
            sys.stderr.write(message)


def _name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def spool_account(spool: Spool) -> pwd.struct_passwd:
    """The account owning the spool (before it is made, its parent directory): the one that
    writes it, the backend's (cigri's own)."""
    uid = os.stat(spool.root if os.path.exists(spool.root) else os.path.dirname(spool.root)).st_uid
    try:
        return pwd.getpwuid(uid)
    except KeyError:
        raise PermissionError(f"{spool.root} belongs to uid {uid}, which no account has") from None


def _set_fs_ids(uid: int, gid: int) -> None:
    """Have the calling thread reach files as ``uid``/``gid`` (Linux: its file-system ids; the
    other threads keep theirs). OSError when the kernel did not take them."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.setfsgid(gid)
    libc.setfsuid(uid)
    if libc.setfsuid(-1) != uid or libc.setfsgid(-1) != gid:  # -1: asks without changing
        raise OSError(f"cannot take the file-system ids {uid}/{gid}")


def act_as_writer(spool: Spool) -> None:
    """A root process serving another account's spool reaches files (the spool's database, its
    lock, its log) with that account's rights only and no supplementary group: a link the account
    plants there leads nowhere it could not go itself. Nothing to do for anyone else."""
    writer = spool_account(spool)
    if os.geteuid() == 0 and writer.pw_uid != 0:
        os.setgroups([])
        _set_fs_ids(writer.pw_uid, writer.pw_gid)


def spool_problems(root: str) -> list[str]:
    """Why a pool running as root must not serve the spool ``root``: a pool runs jobs as the users
    its spool names, so no one but the spool's account (and root) may write the spool, or any
    directory above it (but one of root's with the sticky bit, as /tmp). Empty: it may."""
    path = os.path.realpath(root)
    if not os.path.exists(path):  # made by the pool, as the account owning the directory above
        path = os.path.dirname(path)
    try:
        info = os.stat(path)
    except OSError as error:
        return [f"{path}: {error.strerror} (cigri db upgrade, as the grid's account, makes it)"]
    account = _name(info.st_uid)
    problems = []
    for name in ("", "spool.db", "jobs"):
        entry = os.path.join(path, name) if name else path
        try:
            found = os.lstat(entry)
        except FileNotFoundError:
            continue
        if found.st_uid != info.st_uid or found.st_mode & 0o022 or stat.S_ISLNK(found.st_mode):
            problems.append(f"{entry}: {account}'s alone, not writable by group or others, nor a link "
                            f"(it is {_name(found.st_uid)}'s, mode {stat.S_IMODE(found.st_mode):04o})")
    for parent in Path(path).parents:
        found = os.stat(parent)
        sticky = found.st_uid == 0 and found.st_mode & stat.S_ISVTX
        if found.st_uid not in (0, info.st_uid) or (found.st_mode & 0o022 and not sticky):
            problems.append(f"{parent}: {_name(found.st_uid)}'s, mode {stat.S_IMODE(found.st_mode):04o}: someone "
                            f"but root and {account} could replace the spool under it")
    return problems


def keep(spool: Spool, pool_pid: int) -> None:
    """Reap until no child is left, recording how the dead pool's orphaned jobs ended.

    The status is read without reaping (``WNOWAIT``) and the zombie reaped only once the end
    is committed, so whoever sees the process gone also sees its end.
    """
    act_as_writer(spool)
    conn = None
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None:
            continue
        if info.si_pid != pool_pid:  # a job, or a process a job left behind
            code = info.si_status if info.si_code == os.CLD_EXITED else 128 + info.si_status
            conn = conn or spool.connect()
            with transaction(conn):
                conn.execute("UPDATE jobs SET state = 'ended', exit_code = ?, ended_at = coalesce(ended_at, ?) "
                             "WHERE pid = ? AND state = 'running'", [code, time.time(), info.si_pid])
        os.waitpid(info.si_pid, 0)


def _become_subreaper() -> None:
    """Orphaned descendants come to us instead of init (Linux; elsewhere they are lost)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def serve(spool: Spool, slots: int, idle_exit: float = IDLE_EXIT, wait_lock: float = 0.0) -> bool:
    """The pool process: hold the lock (waiting up to ``wait_lock`` seconds for it), adopt, run;
    False when another pool serves."""
    act_as_writer(spool)
    spool.create()
    lock = os.open(spool.lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    deadline = time.monotonic() + wait_lock
    while not try_lock(lock):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    pool = Pool(spool, slots, idle_exit)
    pool.adopt()
    while True:
        os.ftruncate(lock, 0)
        os.pwrite(lock, f"{os.getpid()}\n".encode(), 0)
        pool.run()
        if pool.stop:
            return True
        # Idle: unlock first, then look once more, so a job queued meanwhile is either
        # seen here or finds the lock free and spawns a new pool.
        fcntl.flock(lock, fcntl.LOCK_UN)
        if not pool.conn.execute("SELECT 1 FROM jobs WHERE state = 'queued' LIMIT 1").fetchone() \
                or not try_lock(lock):
            return True


def run_service(root: str, slots: int) -> int:
    """``cigri pool``: the pool of a site's local cluster as a service of its own, as root beside a
    server under its account: in the foreground until SIGTERM, never leaving when idle. The
    spool must be one only its account writes (:func:`spool_problems`, checked by the caller).
    Its jobs outlive it: a pool started after adopts them (those that ended in between are lost,
    and run again). 1 when another pool serves the spool."""
    spool = Spool(os.path.realpath(root))
    if serve(spool, slots, idle_exit=math.inf, wait_lock=10.0):
        return 0
    with open(spool.lock) as lock:
        sys.stderr.write(f"cigri: another pool (pid {lock.read().strip() or '?'}) serves {spool.root}\n")
    return 1


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not argv[1].isdigit():
        sys.stderr.write("usage: python -m cigri.backends.local.pool SPOOLDIR SLOTS\n")
        return 2
    spool = Spool(argv[0])
    spool.create()
    if os.fork():
        return 0  # detach: whoever spawned us reaps this parent at once
    _become_subreaper()
    pool_pid = os.fork()
    if pool_pid == 0:
        code = 1
        try:
            serve(spool, max(1, int(argv[1])))
            code = 0
        finally:
            os._exit(code)
    keep(spool, pool_pid)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
