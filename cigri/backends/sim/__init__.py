"""The ``sim`` backend: a simulated cluster in virtual time, for ``cigri simulate``.

It answers like a real resource manager (submit a batch, poll, cancel, capacity) but runs
nothing: each call first plays the cluster's :class:`~cigri.backends.sim.world.World` forward
to the clock's time (:mod:`cigri.clock`). A cigri job runs for the seconds given by its task's
first argument after the task name (``argv[2]``; the ``task_seconds`` key when absent) and
exits with ``argv[3]`` (default 0); it asks for the ``core=N`` / ``mem=NG`` of its resources.
The world lives in memory: it is meant for ``cigri simulate`` and tests, not for production.

Cluster keys: ``cores``, ``memory_gb`` (0: memory not limited), ``seed``, ``local_load`` (mean
fraction of the cores local users keep busy) or ``local_load_steps`` (``"HOURS:LOAD,..."``, a
step function), ``local_max_cores`` (widest local job; default a quarter of the cores),
``trace`` (local jobs replayed from a file, on top of that load: cigri's own lines or a
Standard Workload Format log; see :func:`~cigri.backends.sim.world.read_trace`),
``task_seconds``, ``max_waiting``, ``node_cores`` (the cores of each of its nodes: the world
places jobs on nodes, see :class:`~cigri.backends.sim.world.NodeWorld`, and reports their size
so that a ``reserve`` class takes nodes of exactly that size; unset: one pool of cores),
``submit_limit`` (the jobs cigri's account may have queued or running, as Slurm's
``MaxSubmitJobs``: a batch that would go beyond is refused whole, as Slurm refuses an array;
0: no limit). A batch holding a job the cluster could not run even empty (more cores or memory
than it has) is refused whole, as Slurm refuses a job no node can run.

A gang (``JobSpec.gang``) is one job of the world holding its members' cores and memory from
the start of them all to the end of the last one, as a Slurm job of N tasks does; each member
(``<gang job>+<n>``) ends at its own time, and shares the gang's fate when the gang is killed.
"""

from __future__ import annotations

import math
import random
import re
import zlib
from collections import deque
from dataclasses import dataclass
from functools import partial
from itertools import chain
from pathlib import Path

from cigri import clock
from cigri.backends import Capacity, JobSpec, RemoteJob, RemoteState
from cigri.backends import _grouping as grouping
from cigri.backends.sim.world import Job, NodeWorld, World, node_count, read_trace
from cigri.errors import ConfigError, SubmissionRefused, SubmitLimitReached

_STATES = {
    "queued": RemoteState.QUEUED,
    "running": RemoteState.RUNNING,
    "completed": RemoteState.COMPLETED,
    "timeout": RemoteState.TIMEOUT,
    "cancelled": RemoteState.CANCELLED,
    "preempted": RemoteState.PREEMPTED,
}
_CORES = re.compile(r"\bcores?=(\d+)")


@dataclass(frozen=True)
class _Member:
    """When a gang member ends after the gang starts, and how (None: at its walltime)."""

    seconds: float
    exit_code: int | None


def _cores(spec: JobSpec) -> int:
    match = _CORES.search(spec.resources)
    return int(match.group(1)) if match else 1


class SimBackend:
    """One simulated cluster; see the module docstring for its keys."""

    def __init__(self, name: str, options: dict[str, object]) -> None:
        self.name = name
        check(name, options)
        cores = int(options["cores"])  # type: ignore[call-overload]
        seed = int(options.get("seed", 0))  # type: ignore[call-overload]
        trace = options.get("trace")
        self.node_cores = int(options["node_cores"]) if "node_cores" in options else None  # type: ignore[call-overload]
        world = World if self.node_cores is None else partial(NodeWorld, node_cores=self.node_cores)
        try:
            self.world = world(
                name=name, cores=cores, memory_gb=float(options.get("memory_gb", 0)),  # type: ignore[arg-type]
                start=clock.now(), rng=random.Random(seed * 1_000_003 + zlib.crc32(name.encode())),
                local_load=load_steps(options),
                local_max_cores=max(1, int(options.get("local_max_cores", max(1, cores // 4)))),  # type: ignore[call-overload]
                trace=read_trace(Path(str(trace))) if trace else deque())
        except ValueError as error:
            raise ConfigError(f"cluster {name}: {error}") from None
        self.task_seconds = float(options.get("task_seconds", 60))  # type: ignore[arg-type]
        self.submit_limit = int(options.get("submit_limit", 0))  # type: ignore[call-overload]
        self._keys: dict[str, str] = {}
        self._gangs: dict[str, list[_Member]] = {}  # gang job -> its members' ends
        self._count = 0

    def _now(self) -> World:
        self.world.advance(clock.now())
        return self.world

    def submit(self, specs: list[JobSpec]) -> dict[str, str]:
        world = self._now()
        new = sum(spec.key not in self._keys for spec in specs)
        if self.submit_limit and new and _held(world) + new > self.submit_limit:
            raise SubmitLimitReached(f"{self.name}: QOSMaxSubmitJobPerUserLimit (submit_limit {self.submit_limit})")
        jobs = grouping.split([spec for spec in specs if spec.key not in self._keys])  # re-sent: adopted
        for members in jobs:
            width = len(members) if members[0].gang else 1  # a temporal group's specs run one at a time
            if world.never_fits(_cores(members[0]) * width, members[0].memory_mb * width / 1024):
                raise SubmissionRefused(f"{self.name}: {members[0].resources} and {members[0].memory_mb} MB"
                                        f"{f' x {width}' if width > 1 else ''}: more than the cluster has "
                                        f"({world.cores} cores), the job would never run")
        for members in jobs:
            if members[0].gang:
                self._submit_gang(world, members)
                continue
            for spec in members:  # a temporal group's specs run alone here
                self._count += 1
                job_id = f"{self.name}.{self._count}"
                duration, exit_code = self._behaviour(spec.argv)
                world.submit(Job(job_id, _cores(spec), spec.memory_mb / 1024,
                                 duration, walltime=float(spec.walltime_seconds), best_effort=spec.best_effort,
                                 key=spec.key, exit_code=exit_code))
                self._keys[spec.key] = job_id
        return {spec.key: self._keys[spec.key] for spec in specs}

    def _submit_gang(self, world: World, members: list[JobSpec]) -> None:
        """One world job for the gang, lasting until its last member ends (each at its walltime
        at the latest); each member remembers its own end."""
        self._count += 1
        job_id = f"{self.name}.{self._count}"
        ends = []
        for n, spec in enumerate(members):
            duration, exit_code = self._behaviour(spec.argv)
            walltime = float(spec.walltime_seconds or math.inf)
            ends.append(_Member(min(duration, walltime), None if duration > walltime else exit_code))
            self._keys[spec.key] = grouping.member_id(job_id, n)
        world.submit(Job(job_id, sum(map(_cores, members)), sum(spec.memory_mb for spec in members) / 1024,
                         max(end.seconds for end in ends), best_effort=members[0].best_effort, key=members[0].group))
        self._gangs[job_id] = ends

    def _behaviour(self, argv: tuple[str, ...]) -> tuple[float, int]:
        """Run time and exit status from the task's arguments (``NAME SECONDS [EXIT]``)."""
        try:
            duration = float(argv[2]) if len(argv) > 2 else self.task_seconds
            exit_code = int(argv[3]) if len(argv) > 3 else 0
        except ValueError:
            return self.task_seconds, 0
        return max(duration, 0.0), exit_code

    def poll(self, remote_ids: list[str]) -> dict[str, RemoteJob]:
        world = self._now()
        answers = {}
        for remote_id in remote_ids:
            job = world.jobs.get(grouping.group_of(remote_id))
            if job is not None and remote_id in world.jobs:
                answers[remote_id] = RemoteJob(remote_id, _STATES[job.state],
                                               job.exit_code if job.state == "completed" else None,
                                               self.name if job.started_at is not None else None,
                                               job.started_at, job.finished_at)
            elif job is not None and (match := grouping.MEMBER_ID.match(remote_id)) and job.id in self._gangs:
                answers[remote_id] = self._member(remote_id, job, self._gangs[job.id][int(match[2])], world.now)
        return answers

    def _member(self, remote_id: str, gang: Job, member: _Member, now: float) -> RemoteJob:
        """A gang member: running with its gang until its own end, or sharing the gang's fate."""
        if gang.started_at is None:
            return RemoteJob(remote_id, _STATES[gang.state], None, None, None, gang.finished_at)
        end = gang.started_at + member.seconds
        if end <= min(now, gang.finished_at if gang.finished_at is not None else math.inf):
            state = RemoteState.COMPLETED if member.exit_code is not None else RemoteState.TIMEOUT
            return RemoteJob(remote_id, state, member.exit_code, self.name, gang.started_at, end)
        if gang.state == "running":
            return RemoteJob(remote_id, RemoteState.RUNNING, None, self.name, gang.started_at)
        return RemoteJob(remote_id, _STATES[gang.state], None, self.name, gang.started_at, gang.finished_at)

    def cancel(self, remote_ids: list[str], user: str = "") -> None:
        world = self._now()
        for remote_id in remote_ids:
            world.cancel(grouping.group_of(remote_id))  # a gang member's: the whole gang

    def capacity(self) -> Capacity:
        world = self._now()
        held = int(world.used()[1] * 1024)
        free = max(0, int(world.memory_gb * 1024) - held) if world.memory_gb else None
        node_memory = int(world.node_memory_gb * 1024) if isinstance(world, NodeWorld) and free is not None else None
        return Capacity(world.cores, max(0, world.free_cores()), len(world.queue) + len(world.best_effort_queue),
                        free_memory_mb=free, allocated_memory_mb=held, node_cores=self.node_cores,
                        node_memory_mb=node_memory)

    def output_tail(self, remote_id: str, stream: str, lines: int, user: str = "") -> str:
        return ""  # simulated jobs write nothing

    def close(self) -> None:
        return None


def check(name: str, options: dict[str, object]) -> None:
    """Refuse the options the cluster's world would refuse, without building it (that plays an
    hour of local load and reads the trace): the configuration calls it when it loads."""
    try:
        cores = int(options.get("cores", 0))  # type: ignore[call-overload]
        if cores < 1:
            raise ValueError("cores: a sim cluster needs at least one core")
        if "node_cores" in options:
            node_count(cores, int(options["node_cores"]))  # type: ignore[call-overload]
        load_steps(options)
    except ValueError as error:
        raise ConfigError(f"clusters.{name}.{error}") from None


def load_steps(options: dict[str, object]) -> list[tuple[float, float]]:
    """``local_load`` (constant) or ``local_load_steps`` ("HOURS:LOAD,...") as (second, load)."""
    steps = [(0.0, float(options.get("local_load", 0.0)))]  # type: ignore[arg-type]
    text = str(options.get("local_load_steps", "")).strip()
    for item in filter(None, (part.strip() for part in text.split(","))):
        hours, sep, level = item.partition(":")
        try:
            steps.append((float(hours) * 3600, float(level)))
        except ValueError:
            raise ValueError(f"local_load_steps: expected HOURS:LOAD items, got {item!r}") from None
        if not sep or not 0 <= steps[-1][0] < math.inf:  # also nan
            raise ValueError(f"local_load_steps: expected HOURS:LOAD items, HOURS >= 0 and finite, got {item!r}")
    for _, load in steps:
        if not 0 <= load <= 1:
            raise ValueError(f"local_load: expected a fraction between 0 and 1, got {load}")
    return sorted(steps)


def _held(world: World) -> int:
    """cigri's jobs queued or running on the world (local users' jobs have no key)."""
    return sum(1 for job in chain(world.queue, world.best_effort_queue, world.running.values()) if job.key)
