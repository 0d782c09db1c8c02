"""The local backend: runs jobs on this machine through a spool-directory pool daemon.

The backend never runs jobs itself: it drops specs into the spool and makes sure the pool
daemon (:mod:`cigri.backends.local.pool`) is alive, so jobs outlive the caller exactly as
they would on a real batch system. With ``pool_account`` the pool is a service of its own
(``cigri pool``, as root on a site, beside a server under its account): the backend never starts
it, and a pool that does not run is the cluster's failure, with its event. The pool runs each job
as its owner; cancelling and reading outputs act as the owner too: a user's cancel reaches only
their jobs, and an output is read only from a regular file the job's owner owns (their job could
have put a link there).
"""

from __future__ import annotations

import json
import os
import pwd
import re
import stat
import socket
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from cigri.backends import Capacity, JobSpec, RemoteJob, RemoteState, identity
from cigri.backends.local.pool import COMMAND, Spool, transaction, try_lock
from cigri.errors import BackendError, SubmissionRefused
from cigri.locks import held

# Remote ids name spool directories: no separators, no leading dot.
_VALID_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,199}\Z")
_TAIL_MAX = 1 << 20  # output_tail never reads more than this many bytes
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
_KILLED = {"walltime": RemoteState.TIMEOUT, "cancelled": RemoteState.CANCELLED}


class LocalBackend:
    """:class:`~cigri.backends.ClusterBackend` for the machine cigri runs on."""

    def __init__(self, name: str, options: dict[str, object], spool_root: str) -> None:
        self.name = name
        self.slots = slots(options)
        self.pool_account = str(options.get("pool_account") or "")
        self.spool = Spool(os.path.join(spool_root, name))
        self.spool.create()
        self.node = socket.gethostname()
        self.options = options
        self._conn: sqlite3.Connection | None = None

    def _login(self, user: str) -> str:
        """The Unix account ``user``'s jobs run as here (the cluster's ``logins``); "" for cigri's own."""
        if not user:
            return ""
        login = identity.login(self.options, user)
        if login is None:
            raise SubmissionRefused(f"{user} has no login on this cluster")
        return login

    @property
    def conn(self) -> sqlite3.Connection:
        if self._conn is None:
            self._conn = self.spool.connect()
        return self._conn

    def submit(self, specs: list[JobSpec]) -> dict[str, str]:
        """Remote id = key, so a key already in the spool is returned, not started again. A gang's
        members are queued together and the pool starts them together (each one slot)."""
        rows = []
        gangs = Counter(spec.group for spec in specs if spec.gang and spec.group)
        for spec in specs:
            if not _VALID_ID.match(spec.key):
                raise ValueError(f"job key {spec.key!r} cannot name a spool file")
            if gangs[spec.group] > self.slots:
                raise SubmissionRefused(f"{self.name}: a gang of {gangs[spec.group]} needs more than its "
                                        f"{self.slots} slots")
            gang = {"gang": spec.group, "gang_size": gangs[spec.group]} if spec.group in gangs else {}
            rows.append((spec.key, json.dumps({
                "argv": list(spec.argv), "directory": spec.directory, "environment": spec.environment,
                "walltime_seconds": spec.walltime_seconds, "name": spec.name, "user": self._login(spec.user),
                **gang})))
        with transaction(self.conn):
            self.conn.executemany("INSERT INTO jobs(key, spec) VALUES (?, ?) ON CONFLICT(key) DO NOTHING", rows)
        self._ensure_pool()
        return {spec.key: spec.key for spec in specs}

    def _ensure_pool(self) -> None:
        """Spawn the pool daemon unless one holds the spool lock; a pool that is a service of its
        own is only looked at."""
        if self.pool_account:
            if not held(Path(self.spool.lock)):
                raise BackendError(f"{self.name}: its pool does not run (cigri pool {self.name}, as "
                                   f"{self.pool_account}: conf/cigri-pool.service)")
            return
        fd = os.open(self.spool.lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if not try_lock(fd):
                return
        finally:
            os.close(fd)  # also releases the lock we may have taken
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, env.get("PYTHONPATH")]))
        with open(os.open(self.spool.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab") as log:
            # The child forks the daemon and exits at once; waiting leaves no zombie.
            subprocess.Popen(
                [sys.executable, "-c", COMMAND, self.spool.root, str(self.slots)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, close_fds=True,
                start_new_session=True, cwd="/", env=env,
            ).wait()

    def poll(self, remote_ids: list[str]) -> dict[str, RemoteJob]:
        """One query for all ids; a pool is (re)started so that no job waits on a dead one."""
        self._ensure_pool()
        found = {row[0]: row for row in self.conn.execute(
            "SELECT key, state, exit_code, started_at, ended_at, killed FROM jobs "
            "WHERE key IN (SELECT value FROM json_each(?))", [json.dumps(remote_ids)])}
        return {remote_id: self._job(remote_id, found.get(remote_id)) for remote_id in remote_ids}

    def _job(self, remote_id: str, row: tuple[Any, ...] | None) -> RemoteJob:
        if row is None:
            return RemoteJob(remote_id, RemoteState.UNKNOWN)
        _, state, exit_code, started_at, ended_at, killed = row
        if killed is not None:
            return RemoteJob(remote_id, _KILLED[killed], None, self.node, started_at, ended_at)
        if state == "ended":
            if exit_code is None:  # lost with a pool that could not record its end
                return RemoteJob(remote_id, RemoteState.UNKNOWN, started_at=started_at)
            return RemoteJob(remote_id, RemoteState.COMPLETED, exit_code, self.node, started_at, ended_at)
        if state == "running":
            return RemoteJob(remote_id, RemoteState.RUNNING, None, self.node, started_at)
        return RemoteJob(remote_id, RemoteState.QUEUED)

    def cancel(self, remote_ids: list[str], user: str = "") -> None:
        """Queued jobs end at once; started ones are left to the pool, which does the (slow) killing.
        Given a ``user``, only that user's jobs."""
        ids, login = json.dumps(remote_ids), identity.login(self.options, user) if user else ""
        mine = "AND (? = '' OR coalesce(json_extract(spec, '$.user'), '') = ?)"
        with transaction(self.conn):
            self.conn.execute("UPDATE jobs SET state = 'ended', killed = 'cancelled', ended_at = ? "
                              f"WHERE state = 'queued' AND key IN (SELECT value FROM json_each(?)) {mine}",
                              [time.time(), ids, user, login])
            self.conn.execute("UPDATE jobs SET cancel = 1 WHERE state IN ('starting', 'running') "
                              f"AND killed IS NULL AND key IN (SELECT value FROM json_each(?)) {mine}",
                              [ids, user, login])
        self._ensure_pool()

    def capacity(self) -> Capacity:
        """One node of ``slots`` cores; the pool neither reserves nor knows memory."""
        if self.pool_account:
            self._ensure_pool()
        running, queued = self.conn.execute(
            "SELECT count(*) FILTER (WHERE state != 'queued'), count(*) FILTER (WHERE state = 'queued') "
            "FROM jobs WHERE state != 'ended'").fetchone()
        return Capacity(self.slots, max(0, self.slots - running), queued, node_cores=self.slots)

    def output_tail(self, remote_id: str, stream: str, lines: int, user: str = "") -> str:
        """Read backwards from the end, so a huge output costs no more than its tail; only a
        regular file of the job's owner (``user``'s login, else this process's account) is read."""
        if stream not in ("stdout", "stderr"):
            raise ValueError(f"unknown stream {stream!r}")
        login = identity.login(self.options, user) if user else ""
        if lines <= 0 or not _VALID_ID.match(remote_id) or login is None:
            return ""
        try:
            fd = os.open(self.spool.job(remote_id, stream), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:  # absent, or a link
            return ""
        f = open(fd, "rb")
        with f:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_uid != _uid(login):
                return ""
            pos = f.seek(0, os.SEEK_END)
            data = b""
            while pos > 0 and data.count(b"\n") <= lines and len(data) < _TAIL_MAX:
                step = min(8192, pos)
                pos -= step
                f.seek(pos)
                data = f.read(step) + data
        tail = data.splitlines(keepends=True)[-lines:]
        return b"".join(tail).decode("utf-8", errors="replace")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def slots(options: dict[str, object]) -> int:
    """Jobs a local cluster runs at once: its ``slots``, or one per CPU."""
    return int(str(options.get("slots") or 0)) or os.cpu_count() or 1


def _uid(user: str) -> int | None:
    """The uid of the Unix user ``user`` (this process's own for ""); None: no such user."""
    if not user:
        return os.geteuid()
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return int(user) if user.isdigit() else None
