"""One simulated cluster: cores, memory, local users and cigri's jobs, in virtual time.

A small discrete-event model, advanced lazily to the clock's time whenever the backend is
asked something. Local users' jobs arrive as a Poisson process (or from a trace file) and
queue first-come first-served with cigri's normal jobs; cigri's best-effort jobs only start on
cores nobody else waits for, and the youngest are killed (``preempted``) as soon as a local job
needs their cores, as OAR's best-effort jobs are. A job that outlives its walltime is killed
(``timeout``). Every random draw comes from one generator seeded per cluster, so a run is
reproducible. :class:`World` places jobs on one pool of cores; :class:`NodeWorld`, for a
cluster with ``node_cores``, on nodes, as OAR and Slurm do, so that free cores may be too
scattered for a job.
"""

from __future__ import annotations

import heapq
import math
import random
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

# Gricad's CiGri tasks, 2017-2021 (anchors §1): median 63 s, p95 about 1 h 05, p99 about 7 h 30;
# a log-normal with this median and sigma 2.5 matches those quantiles within 20 %.
GRICAD_MEDIAN_SECONDS = 63.0
GRICAD_SIGMA = 2.5
# Local users' jobs: log-normal run times (median 1 h) and power-of-two widths. This is an
# assumption, not a measured law: the Gricad study describes CiGri's tasks, not local jobs.
LOCAL_MEDIAN_SECONDS = 3600.0
LOCAL_SIGMA = 1.2
MAX_SECONDS = 8 * 86400.0
WARM_UP_SECONDS = 24 * 3600.0


def lognormal(rng: random.Random, median: float, sigma: float) -> float:
    """A draw clipped to [1 s, 8 days], Gricad's observed range."""
    return min(max(rng.lognormvariate(math.log(median), sigma), 1.0), MAX_SECONDS)


@dataclass
class Job:
    """A job on the simulated cluster: cigri's (``key`` set) or a local user's."""

    id: str
    cores: int
    memory_gb: float
    duration: float
    walltime: float = math.inf
    best_effort: bool = False
    key: str = ""
    exit_code: int | None = 0
    state: str = "queued"  # queued, running, completed, timeout, cancelled, preempted
    submitted_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    nodes: tuple[int, ...] = ()  # where it runs, on a NodeWorld


@dataclass
class Usage:
    """Core-seconds integrated over simulated time."""

    local: float = 0.0  # cores busy with local users' jobs
    cigri: float = 0.0  # cores busy with cigri's jobs, whatever their end
    harvestable: float = 0.0  # cores not used by local users: what cigri could have had
    preempted: int = 0
    timeouts: int = 0


@dataclass
class World:
    """The state of one simulated cluster at time ``now``."""

    name: str
    cores: int
    memory_gb: float
    start: float
    rng: random.Random
    local_load: list[tuple[float, float]]  # (from second, target fraction of cores), sorted
    local_max_cores: int
    trace: deque[tuple[float, int, float]] = field(default_factory=deque)
    now: float = 0.0
    jobs: dict[str, Job] = field(default_factory=dict)
    queue: list[Job] = field(default_factory=list)  # local and normal cigri jobs, FCFS
    best_effort_queue: list[Job] = field(default_factory=list)
    running: dict[str, Job] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    _ends: list[tuple[float, int, str]] = field(default_factory=list)
    _cores: int = 0  # held by running jobs, kept up to date on every start and end
    _memory: float = 0.0
    _local_cores: int = 0
    _best_effort_cores: int = 0
    _next_arrival: float = math.inf  # the next Poisson arrival of a local job
    _next_replay: float = math.inf  # the next local job of the trace
    _count: int = 0

    def __post_init__(self) -> None:
        # Warm up: local users have been working for a while when the simulation starts.
        self.now = self.start - WARM_UP_SECONDS
        self._next_arrival = self._draw_arrival(self.now)
        self.advance(self.start)
        self.usage = Usage()
        self._next_replay = self.start + self.trace[0][0] if self.trace else math.inf

    # --- what cigri sees ----------------------------------------------------------------

    def used(self) -> tuple[int, float]:
        return self._cores, self._memory

    def local_cores(self) -> int:
        return self._local_cores

    def never_fits(self, cores: int, memory_gb: float) -> bool:
        """Whether a job of this size could not run here even on an empty cluster."""
        return cores > self.cores or bool(self.memory_gb) and memory_gb > self.memory_gb

    def free_cores(self) -> int:
        cores, memory = self.used()
        if self.memory_gb and memory >= self.memory_gb:
            return 0
        return self.cores - cores

    def submit(self, job: Job) -> None:
        job.submitted_at = self.now
        self.jobs[job.id] = job
        (self.best_effort_queue if job.best_effort else self.queue).append(job)
        self._schedule()

    def cancel(self, job_id: str) -> None:
        job = self.jobs.get(job_id)
        if job is None or job.state not in ("queued", "running"):
            return
        self._end(job, "cancelled")
        self._schedule()

    # --- the discrete-event loop ----------------------------------------------------------

    def next_event(self) -> float:
        """When the world next changes by itself: a job ends or a local job arrives."""
        return min(self._ends[0][0] if self._ends else math.inf, self._next_arrival, self._next_replay)

    def advance(self, moment: float) -> None:
        """Play every event up to ``moment``, integrating the usage between events."""
        while (upcoming := self.next_event()) <= moment:
            self._integrate(upcoming)
            if self._ends and self._ends[0][0] == upcoming:
                _, _, job_id = heapq.heappop(self._ends)
                job = self.jobs[job_id]
                if job.state == "running" and job.finished_at is None:
                    self._end(job, "completed" if job.duration <= job.walltime else "timeout")
            elif self._next_replay == upcoming:
                self._replay()
            else:
                self._arrive()
            self._schedule()
        self._integrate(moment)

    def _integrate(self, moment: float) -> None:
        span = moment - self.now
        if span <= 0:
            return
        local = self._local_cores
        cigri = self._cores - local
        self.usage.local += local * span
        self.usage.cigri += cigri * span
        self.usage.harvestable += (self.cores - local) * span
        self.now = moment

    def _arrive(self) -> None:
        cores = min(self.local_max_cores, 2 ** self.rng.randint(0, max(0, int(math.log2(self.local_max_cores)))))
        self._local_job(cores, lognormal(self.rng, LOCAL_MEDIAN_SECONDS, LOCAL_SIGMA))
        self._next_arrival = self._draw_arrival(self.now)

    def _replay(self) -> None:
        _, cores, duration = self.trace.popleft()
        self._local_job(cores, duration)
        self._next_replay = self.start + self.trace[0][0] if self.trace else math.inf

    def _local_job(self, cores: int, duration: float) -> None:
        self._count += 1
        self.submit(Job(f"local-{self._count}", min(cores, self.cores), 0.0, duration))

    def _draw_arrival(self, after: float) -> float:
        """Poisson arrivals whose rate gives the configured mean local load; memoryless, so a
        draw that crosses a load change is drawn again from the change."""
        change = min((self.start + at for at, _ in self.local_load if self.start + at > after), default=math.inf)
        load = self.load_at(after)
        if load <= 0:
            return self._draw_arrival(change) if change < math.inf else math.inf
        widths = [min(self.local_max_cores, 2 ** k) for k in range(int(math.log2(self.local_max_cores)) + 1)]
        mean_duration = LOCAL_MEDIAN_SECONDS * math.exp(LOCAL_SIGMA ** 2 / 2)
        rate = load * self.cores / (sum(widths) / len(widths) * mean_duration)
        arrival = after + self.rng.expovariate(rate)
        return self._draw_arrival(change) if arrival > change else arrival

    def load_at(self, moment: float) -> float:
        level = self.local_load[0][1]
        for at, load in self.local_load:
            if self.start + at <= moment:
                level = load
        return level

    def _schedule(self) -> None:
        """Start queued jobs first-come first-served; a local job evicts best-effort jobs."""
        while self.queue:
            job = self.queue[0]
            if not self._make_room(job):
                break
            self.queue.pop(0)
            self._start(job)
        if self.queue:  # someone waits: best-effort jobs must not take the cores
            return
        while self.best_effort_queue and self._fits(self.best_effort_queue[0]):
            self._start(self.best_effort_queue.pop(0))

    def _fits(self, job: Job) -> bool:
        cores, memory = self.used()
        return cores + job.cores <= self.cores and (not self.memory_gb or memory + job.memory_gb <= self.memory_gb)

    def _make_room(self, job: Job) -> bool:
        """Whether ``job`` can start now, killing the youngest best-effort jobs if that suffices."""
        if self._fits(job):
            return True
        if self._cores - self._best_effort_cores + job.cores > self.cores:
            return False  # even killing every best-effort job would not make room
        victims = sorted((j for j in self.running.values() if j.best_effort),
                         key=lambda j: (j.started_at or 0.0, j.id), reverse=True)
        cores, memory = self.used()
        freed_cores, freed_memory, chosen = 0, 0.0, []
        for victim in victims:
            chosen.append(victim)
            freed_cores += victim.cores
            freed_memory += victim.memory_gb
            if cores - freed_cores + job.cores <= self.cores and \
                    (not self.memory_gb or memory - freed_memory + job.memory_gb <= self.memory_gb):
                for kill in chosen:
                    self._end(kill, "preempted")
                return True
        return False

    def _start(self, job: Job) -> None:
        job.state, job.started_at = "running", self.now
        self.running[job.id] = job
        self._hold(job, 1)
        heapq.heappush(self._ends, (self.now + min(job.duration, job.walltime), self._sequence(), job.id))

    def _hold(self, job: Job, sign: int) -> None:
        self._cores += sign * job.cores
        self._memory += sign * job.memory_gb
        if not job.key:
            self._local_cores += sign * job.cores
        if job.best_effort:
            self._best_effort_cores += sign * job.cores

    def _sequence(self) -> int:
        self._count += 1
        return self._count

    def _end(self, job: Job, state: str) -> None:
        if job.state == "queued":
            for queue in (self.queue, self.best_effort_queue):
                if job in queue:
                    queue.remove(job)
        elif job.state == "running":
            del self.running[job.id]
            self._hold(job, -1)
        if state == "preempted":
            self.usage.preempted += 1
        elif state == "timeout":
            self.usage.timeouts += 1
        job.state, job.finished_at = state, self.now
        if state == "timeout":
            job.exit_code = None


@dataclass
class Node:
    """One node of a :class:`NodeWorld`: what its jobs leave free, and which jobs they are."""

    index: int
    free_cores: int
    free_memory_gb: float  # math.inf when the cluster's memory is not limited
    jobs: dict[str, Job] = field(default_factory=dict)


@dataclass
class NodeWorld(World):
    """A simulated cluster cut into ``cores / node_cores`` alike nodes, memory split evenly.

    A job of at most ``node_cores`` cores runs on one node, the one with the fewest free cores
    that fits it (then the lowest index), so jobs pack and leave whole nodes free; a wider job
    holds whole nodes, its cores rounded up to them, its memory spread evenly over them. Local
    and normal jobs still start first come, first served, and best-effort jobs only when nobody
    waits; a job that does not fit kills best-effort jobs only on the nodes it gets: on each
    node the youngest until it fits there, and it takes the nodes that need the fewest victims,
    then the least run time lost, then the fewest free cores, then the lowest index.
    """

    node_cores: int = field(kw_only=True)
    node_memory_gb: float = field(init=False)  # math.inf when the cluster's memory is not limited
    nodes: list[Node] = field(init=False)

    def __post_init__(self) -> None:
        count = node_count(self.cores, self.node_cores)
        self.node_memory_gb = self.memory_gb / count if self.memory_gb else math.inf
        self.nodes = [Node(index, self.node_cores, self.node_memory_gb) for index in range(count)]
        super().__post_init__()

    def never_fits(self, cores: int, memory_gb: float) -> bool:
        """As :meth:`World.never_fits`, with a job's memory spread over the whole nodes it takes."""
        span = max(1, -(-cores // self.node_cores))
        return span > len(self.nodes) or memory_gb / span > self.node_memory_gb

    def free_cores(self) -> int:
        """Free cores summed over the nodes; a node whose memory is all held offers none."""
        return sum(node.free_cores for node in self.nodes if node.free_memory_gb > 0)

    def submit(self, job: Job) -> None:
        """As :meth:`World.submit`; a job wider than a node holds whole nodes, so its cores are
        rounded up to them."""
        if job.cores > self.node_cores:
            job.cores = self._span(job) * self.node_cores
        super().submit(job)

    def _span(self, job: Job) -> int:
        """How many nodes ``job`` takes (a job of no cores still sits on one)."""
        return max(1, -(-job.cores // self.node_cores))

    def _share(self, job: Job) -> tuple[int, float]:
        """The cores and memory ``job`` holds on each of its nodes."""
        return min(job.cores, self.node_cores), job.memory_gb / self._span(job)

    def _fits(self, job: Job) -> bool:
        return self._place(job, evict=False)

    def _make_room(self, job: Job) -> bool:
        return self._place(job, evict=True)

    def _place(self, job: Job, evict: bool) -> bool:
        """Whether ``job`` can start now, and if so set ``job.nodes``; with ``evict``, after
        killing the best-effort jobs the class docstring's rule picks."""
        span, (cores, memory) = self._span(job), self._share(job)
        offers = []
        for node in self.nodes:
            victims = self._victims(node, cores, memory, evict)
            if victims is not None:
                lost = sum(self.now - (victim.started_at or 0.0) for victim in victims)
                offers.append((len(victims), lost, node.free_cores, node.index, victims))
        if len(offers) < span:
            return False
        chosen = sorted(offers, key=lambda offer: offer[:4])[:span]
        for victim in {victim.id: victim for *_, victims in chosen for victim in victims}.values():
            self._end(victim, "preempted")  # once, even if it spans several chosen nodes
        job.nodes = tuple(sorted(index for _, _, _, index, _ in chosen))
        return True

    def _victims(self, node: Node, cores: int, memory: float, evict: bool) -> list[Job] | None:
        """The youngest best-effort jobs of ``node`` whose end leaves ``cores`` and ``memory``
        free there (none if it has them); None if it cannot have them (without killing, or at all)."""
        free_cores, free_memory = node.free_cores, node.free_memory_gb
        if free_cores >= cores and free_memory >= memory:
            return []
        if not evict:
            return None
        victims = []
        for victim in sorted((j for j in node.jobs.values() if j.best_effort),
                             key=lambda j: (j.started_at or 0.0, j.id), reverse=True):
            victims.append(victim)
            freed_cores, freed_memory = self._share(victim)
            free_cores, free_memory = free_cores + freed_cores, free_memory + freed_memory
            if free_cores >= cores and free_memory >= memory:
                return victims
        return None

    def _hold(self, job: Job, sign: int) -> None:
        super()._hold(job, sign)
        cores, memory = self._share(job)
        for index in job.nodes:
            node = self.nodes[index]
            node.free_cores -= sign * cores
            node.free_memory_gb -= sign * memory
            if sign > 0:
                node.jobs[job.id] = job
            else:
                del node.jobs[job.id]


def node_count(cores: int, node_cores: int) -> int:
    """How many nodes of ``node_cores`` make the ``cores``; a ValueError when they cannot."""
    if node_cores < 1 or cores % node_cores:
        raise ValueError(f"node_cores: {node_cores} does not divide the {cores} cores into nodes")
    return cores // node_cores


def read_trace(path: Path) -> deque[tuple[float, int, float]]:
    """A local-load trace, submit times relative to the start. A ``.swf`` file is a log in the
    Parallel Workloads Archive's Standard Workload Format: each job that ran replays its submit
    time (field 2), run time (4) and allocated processors (5; the requested ones, 8, where the
    log has none); ``;`` starts a header comment, and jobs that never ran (run time -1 or 0, or
    no processor count) are left out. Any other file has one job per line, ``submit_seconds
    cores duration_seconds`` (spaces or commas; ``#`` starts a comment). Times are finite and
    not negative; a line that breaks the format is named."""
    try:
        lines = path.read_text().splitlines()
    except OSError as error:
        raise ValueError(f"trace {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise ValueError(f"trace {path}: not a text file") from None
    rows = _swf_rows(path, lines) if path.suffix.lower() == ".swf" else _plain_rows(path, lines)
    rows.sort()
    return deque(rows)


def _plain_rows(path: Path, lines: list[str]) -> list[tuple[float, int, float]]:
    rows = []
    for number, line in enumerate(lines, 1):
        words = line.split("#", 1)[0].replace(",", " ").split()
        if not words:
            continue
        row = _numbers(words, (0, 1, 2)) if len(words) >= 3 else None
        if row is None or row[1] < 1 or not row[1].is_integer() or row[2] < 0:
            raise ValueError(f"trace {path}:{number}: expected 'submit_seconds cores duration_seconds' "
                             "(times >= 0, cores >= 1)")
        rows.append((row[0], int(row[1]), row[2]))
    return rows


def _swf_rows(path: Path, lines: list[str]) -> list[tuple[float, int, float]]:
    rows = []
    for number, line in enumerate(lines, 1):
        words = line.split()
        if not words or words[0].startswith(";"):
            continue
        fields = _numbers(words, (1, 3, 4, 7)) if len(words) == 18 else None
        if fields is None or (fields[1] < 0 and fields[1] != -1):
            raise ValueError(f"trace {path}:{number}: expected the 18 numbers of a Standard Workload Format job "
                             "(submit time >= 0, run time >= 0 or -1)")
        submit, run, allocated, requested = fields
        cores = int(allocated if allocated > 0 else requested)
        if run > 0 and cores > 0:
            rows.append((submit, cores, run))
    return rows


def _numbers(words: list[str], indexes: tuple[int, ...]) -> tuple[float, ...] | None:
    """The words at ``indexes`` as finite numbers, the first one (a submit time) not negative;
    None if one is not."""
    try:
        values = tuple(float(words[i]) for i in indexes)
    except ValueError:
        return None
    if not all(math.isfinite(v) for v in values) or values[0] < 0:
        return None
    return values
