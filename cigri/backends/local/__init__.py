"""The local backend: runs jobs on this machine through a spool-directory pool daemon.

The backend never runs jobs itself: it drops specs into the spool and makes sure the pool
daemon (:mod:`cigri.backends.local.pool`) is alive, so jobs outlive the caller exactly as
they would on a real batch system.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

from cigri.backends import Capacity, JobSpec, RemoteJob, RemoteState
from cigri.backends.local.pool import COMMAND, Spool, alive, read_marker, read_pid, touch, try_lock

# Remote ids are file names in the spool: no separators, no leading dot (temporary files).
_VALID_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,199}\Z")
_TAIL_MAX = 1 << 20  # output_tail never reads more than this many bytes
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))


class LocalBackend:
    """:class:`~cigri.backends.ClusterBackend` for the machine cigri runs on."""

    def __init__(self, name: str, options: dict[str, object], spool_root: str) -> None:
        self.name = name
        self.slots = int(str(options.get("slots") or 0)) or os.cpu_count() or 1
        self.spool = Spool(os.path.join(spool_root, name))
        self.spool.create()
        self.node = socket.gethostname()

    def submit(self, specs: list[JobSpec]) -> dict[str, str]:
        """Remote id = key, so a key already in the spool is returned, not started again."""
        ids: dict[str, str] = {}
        for spec in specs:
            if not _VALID_ID.match(spec.key):
                raise ValueError(f"job key {spec.key!r} cannot name a spool file")
            jobdir = self.spool.job(spec.key)
            if not os.path.exists(jobdir):
                self._write_job(spec)
            if not self._markers(spec.key):
                touch(os.path.join(self.spool.queue, spec.key))
            ids[spec.key] = spec.key
        self._ensure_pool()
        return ids

    def _write_job(self, spec: JobSpec) -> None:
        """Build the job directory aside and rename it in, so the pool never sees half a job."""
        tmp = tempfile.mkdtemp(prefix=f".tmp-{spec.key}-", dir=self.spool.jobs)
        try:
            with open(os.path.join(tmp, "spec.json"), "w") as f:
                json.dump(dataclasses.asdict(spec), f)
            for stream in ("stdout", "stderr"):
                touch(os.path.join(tmp, stream))
            os.rename(tmp, self.spool.job(spec.key))
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if not os.path.exists(self.spool.job(spec.key)):
                raise  # not a concurrent submit of the same key

    def _markers(self, remote_id: str) -> bool:
        """Whether the job is anywhere in its life cycle (checked in lifecycle order)."""
        paths = (
            os.path.join(self.spool.queue, remote_id),
            os.path.join(self.spool.running, remote_id),
            self.spool.job(remote_id, "pid"),
            self.spool.job(remote_id, "exit"),
            self.spool.job(remote_id, "killed"),
        )
        return any(os.path.exists(p) for p in paths)

    def _ensure_pool(self) -> None:
        """Spawn the pool daemon unless one holds the spool lock."""
        fd = os.open(self.spool.lock, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if not try_lock(fd):
                return
        finally:
            os.close(fd)  # also releases the lock we may have taken
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [_PACKAGE_ROOT, env.get("PYTHONPATH")]))
        with open(self.spool.log, "ab") as log:
            # The child forks the daemon and exits at once; waiting leaves no zombie.
            subprocess.Popen(
                [sys.executable, "-c", COMMAND, self.spool.root, str(self.slots)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, close_fds=True,
                start_new_session=True, cwd="/", env=env,
            ).wait()

    def poll(self, remote_ids: list[str]) -> dict[str, RemoteJob]:
        self._ensure_pool()
        return {remote_id: self._job(remote_id) for remote_id in remote_ids}

    def _job(self, remote_id: str, recheck: bool = True) -> RemoteJob:
        if not _VALID_ID.match(remote_id):
            return RemoteJob(remote_id, RemoteState.UNKNOWN)
        jobdir = self.spool.job(remote_id)
        # Lifecycle order: a marker only disappears once the next one exists.
        waiting = os.path.exists(os.path.join(self.spool.queue, remote_id))
        claimed = os.path.exists(os.path.join(self.spool.running, remote_id))
        started = read_pid(jobdir)
        exit_status = read_marker(os.path.join(jobdir, "exit"))
        killed = read_marker(os.path.join(jobdir, "killed"))
        started_at = started[1] if started else None
        if killed is not None:
            state = RemoteState.TIMEOUT if killed[0] == "walltime" else RemoteState.CANCELLED
            return RemoteJob(remote_id, state, None, self.node, started_at, killed[1])
        if exit_status is not None:
            code = int(exit_status[0])
            return RemoteJob(remote_id, RemoteState.COMPLETED, code, self.node, started_at, exit_status[1])
        if started is not None:
            if alive(started[0]):
                return RemoteJob(remote_id, RemoteState.RUNNING, None, self.node, started_at)
            if recheck:
                return self._job(remote_id, recheck=False)  # it may have just ended
            if claimed:  # dead, but the pool has not recorded its end yet
                return RemoteJob(remote_id, RemoteState.RUNNING, None, self.node, started_at)
            return RemoteJob(remote_id, RemoteState.UNKNOWN, started_at=started_at)
        if waiting or claimed:
            return RemoteJob(remote_id, RemoteState.QUEUED)
        return RemoteJob(remote_id, RemoteState.UNKNOWN)

    def cancel(self, remote_ids: list[str]) -> None:
        """Leave cancel requests for the pool, which does the (slow) killing."""
        for remote_id in remote_ids:
            if not _VALID_ID.match(remote_id) or not os.path.isdir(self.spool.job(remote_id)):
                continue
            if self._job(remote_id).state in (RemoteState.QUEUED, RemoteState.RUNNING):
                touch(os.path.join(self.spool.cancel, remote_id))
        self._ensure_pool()

    def capacity(self) -> Capacity:
        running = len(os.listdir(self.spool.running))
        queued = len(os.listdir(self.spool.queue))
        return Capacity(self.slots, max(0, self.slots - running), queued)

    def output_tail(self, remote_id: str, stream: str, lines: int) -> str:
        """Read backwards from the end, so a huge output costs no more than its tail."""
        if stream not in ("stdout", "stderr"):
            raise ValueError(f"unknown stream {stream!r}")
        if lines <= 0 or not _VALID_ID.match(remote_id):
            return ""
        try:
            f = open(self.spool.job(remote_id, stream), "rb")
        except FileNotFoundError:
            return ""
        with f:
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
        """Nothing to release: every call opens and closes what it uses."""
