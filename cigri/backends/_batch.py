"""The backend of every batch system, written once: Slurm, OAR and Grid Engine are dialects on it.

A :class:`BatchBackend` is the :class:`~cigri.backends.ClusterBackend` of a resource manager
reached one way, its :class:`Via`: its commands over SSH (:class:`cigri.backends._commands.Commands`,
a dialect of pure argv builders and parsers on the SSH transport) or its REST API (a dialect of
payloads and parsers on the HTTP transport). What every batch system does alike is here:

- submission: one call per batch (the runner's chunk of ``api_chunk_size`` jobs), as one array
  where the resource manager has them, acting as the jobs' owner (:mod:`.identity`); the via
  returns one remote id per remote job, which temporal grouping turns into one id per job
  (:mod:`._grouping`); a via that cannot read a group's status file runs every job alone and
  refuses a gang;
- polling: one call for any number of jobs, then one read of the status files of the groups
  that started, then, for the jobs the cluster no longer knows (Slurm without accounting past
  ``MinJobAge``, Grid Engine before its accounting file has them), one read of their traces
  (:func:`._grouping.forgotten`): a job that ended is never taken for lost and run again;
- cancel (a grouped job's whole group), capacity and output tails, each one call;
- ``calls``, the operations paid, by name, so that tests hold the core to its budget.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from cigri.backends import Capacity, JobSpec, RemoteJob, RemoteState, identity
from cigri.backends import _grouping as grouping
from cigri.errors import SubmissionRefused

STREAMS = ("stdout", "stderr")


@dataclass(frozen=True)
class Acting:
    """Whom a call acts as: the jobs' owner (the cigri user, "" for cigri's own jobs) and the login it
    acts as there (the owner's in a per-user identity mode, else the cluster's account)."""

    user: str
    login: str

    @classmethod
    def of(cls, options: dict[str, Any], user: str) -> Acting:
        return cls(user, identity.acting_login(options, user))


@dataclass(frozen=True)
class Polled:
    """What one poll said: the remote jobs the cluster knows (``jobs``), where each writes
    (``files``: ``{job id: (owner's login, file prefix)}``, see :mod:`._commands`), and the status
    files it already read (``texts``: ``{job id: text}``, Grid Engine's for its ended jobs)."""

    jobs: dict[str, RemoteJob]
    files: dict[str, tuple[str, str]] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)


class Via(Protocol):
    """One resource manager reached one way; ``acting`` says whom a call acts as."""

    def groups(self, directory: str) -> str:
        """Why jobs in ``directory`` cannot run grouped here ("": they can)."""
        ...

    def submit(self, specs: list[JobSpec], acting: Acting) -> list[str]:
        """Submit the batch (or adopt what an interrupted earlier call submitted); one remote id per
        remote job, in the order of :func:`._grouping.split`."""
        ...

    def poll(self, job_ids: list[str]) -> Polled:
        ...

    def statuses(self, group_ids: list[str], polled: Polled) -> dict[str, str]:
        """The status files of these started groups, ``{group id: text}``."""
        ...

    def traces(self, job_ids: list[str]) -> dict[str, str]:
        """The status files of jobs the cluster no longer knows, ``{job id: text}`` (none where the
        resource manager remembers every job, or where the via reads no file)."""
        ...

    def cancel(self, job_ids: list[str], acting: Acting) -> None:
        ...

    def capacity(self) -> Capacity:
        ...

    def output_tail(self, remote_id: str, stream: str, lines: int, acting: Acting) -> str:
        ...

    def close(self) -> None:
        ...


class BatchBackend:
    """:class:`~cigri.backends.ClusterBackend` for a batch system, through its via."""

    def __init__(self, name: str, options: dict[str, Any], via: Via, remote_id: re.Pattern[str]) -> None:
        self.name, self.options, self.via = name, options, via
        self.remote_id = remote_id  # a well-formed remote id of this system (+ a position in a group)
        self.calls: Counter[str] = Counter()

    def submit(self, specs: list[JobSpec]) -> dict[str, str]:
        """One call for the batch (see the interface: idempotent per key and batch)."""
        if not specs:
            return {}
        why = self.via.groups(specs[0].directory)
        if why and any(spec.group for spec in specs):
            if any(spec.gang for spec in specs):
                raise SubmissionRefused(f"{self.name}: a gang's members report through status files, but {why}")
            specs = [replace(spec, group="", group_walltime_seconds=0) for spec in specs]
        acting = Acting.of(self.options, specs[0].user)
        self.calls["submit"] += 1
        return grouping.ids(grouping.split(specs), self.via.submit(specs, acting))

    def poll(self, remote_ids: list[str]) -> dict[str, RemoteJob]:
        """One poll of the remote jobs, plus one read of the started groups' status files and one
        of the traces of the jobs the cluster forgot, when there are such."""
        valid = [i for i in dict.fromkeys(remote_ids) if self.remote_id.match(i)]
        if not valid:
            return {i: RemoteJob(i, RemoteState.UNKNOWN) for i in remote_ids}
        self.calls["poll"] += 1
        jobs = list(dict.fromkeys(grouping.group_of(i) for i in valid))
        polled = self.via.poll(jobs)
        texts = dict(polled.texts)
        started = [group for group in grouping.needing_status(valid, polled.jobs) if group not in texts]
        if started:
            texts.update(self.via.statuses(started, polled))
        forgotten = [job for job in jobs if job not in polled.jobs and job not in texts]
        if forgotten:
            texts.update(self.via.traces(forgotten))
        statuses = {job: grouping.parse_status(text) for job, text in texts.items() if job in polled.jobs}
        traced = {job for job in texts if job not in polled.jobs}  # ended where only their traces say how
        known = grouping.members([i for i in remote_ids if grouping.group_of(i) not in traced], polled.jobs, statuses)
        return {i: grouping.forgotten(i, texts[grouping.group_of(i)]) if grouping.group_of(i) in traced else known[i]
                for i in remote_ids}

    def cancel(self, remote_ids: list[str], user: str = "") -> None:
        """Cancelling a grouped job cancels its whole group (see :mod:`._grouping`)."""
        jobs = grouping.remote_jobs(remote_ids, self.remote_id)
        if jobs:
            self.calls["cancel"] += 1
            self.via.cancel(jobs, Acting.of(self.options, user))

    def capacity(self) -> Capacity:
        self.calls["capacity"] += 1
        return self.via.capacity()

    def output_tail(self, remote_id: str, stream: str, lines: int, user: str = "") -> str:
        """The end of the job's ``stdout`` or ``stderr``, read as its owner."""
        if stream not in STREAMS:
            raise ValueError(f"unknown stream {stream!r}")
        if lines <= 0 or not self.remote_id.match(remote_id):
            return ""
        self.calls["tail"] += 1
        return self.via.output_tail(remote_id, stream, lines, Acting.of(self.options, user))

    def close(self) -> None:
        self.via.close()
