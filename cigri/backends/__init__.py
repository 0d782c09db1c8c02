"""The cluster-backend interface: the only thing the core knows about a batch system.

A backend is small and typed: submit a batch, poll many jobs in one call, cancel, report
capacity, read an output tail, close. Each resource manager translates its own job states
into :class:`RemoteState` in one table; raw scheduler strings never reach the core.

Contract for :meth:`ClusterBackend.submit`: one call submits one batch (an array where the
resource manager has them), and it is idempotent per :attr:`JobSpec.key` and
:attr:`JobSpec.batch`. Submitting a batch the cluster already knows returns the existing
remote ids instead of starting the jobs again, so the runner can safely re-send a batch
interrupted by a crash; the runner always re-sends a batch with the same keys in the same order.

Temporal grouping: specs sharing a non-empty :attr:`JobSpec.group` (consecutive in the batch) may
run one after another inside one remote job. Each keeps its own remote id (the group's id, ``+``,
its position), exit status, output and walltime, so the core still sees one job per task
attempt. A backend that cannot read a group's per-task status runs each spec alone.

Identity (:mod:`cigri.backends.identity`): every spec names its owner (:attr:`JobSpec.user`, one
per batch), and :meth:`ClusterBackend.cancel` and :meth:`ClusterBackend.output_tail` are given
the owner of the jobs they act on; a backend acts as that owner's login where its cluster's
identity mode says so. :meth:`ClusterBackend.poll` sees every user's jobs, in one call.
Gangs: when those specs are marked :attr:`JobSpec.gang`, they start together instead, all or
none, in one remote job holding the resources of them all (Armada's gang scheduling; a Slurm
job of N tasks, an OAR job on one host, N local slots at once), each still with its own id,
status, output and walltime. A backend that cannot start them together refuses the batch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from cigri.backends.identity import remote_home

__all__ = ["Capacity", "ClusterBackend", "JobSpec", "RemoteJob", "RemoteState", "node_size", "open_backend",
           "remote_home"]


class RemoteState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"  # ended by itself; see exit_code
    TIMEOUT = "timeout"  # killed at walltime
    CANCELLED = "cancelled"
    PREEMPTED = "preempted"  # a best-effort job killed by the cluster for its own users
    UNKNOWN = "unknown"  # the cluster does not know this id (lost)


@dataclass(frozen=True)
class JobSpec:
    """What one remote job must run. ``argv[0]`` is the program; nothing goes through a shell."""

    key: str  # cigri's job id, unique in the database: the idempotency key
    batch: str  # every spec of one submit call shares it; RMs with arrays name the array after it
    name: str
    argv: tuple[str, ...]
    directory: str
    walltime_seconds: int
    resources: str
    environment: dict[str, str] = field(default_factory=dict)
    properties: str = ""
    project: str = ""
    best_effort: bool = False
    job_types: tuple[str, ...] = ()  # OAR job types (-t) beside besteffort; other batch systems have none
    group: str = ""  # specs sharing it run one after another in one remote job (temporal grouping)
    group_walltime_seconds: int = 0  # that remote job's walltime; each spec keeps its own too
    memory_mb: int = 0  # memory per node the job reserves (MiB); 0: the cluster's default
    user: str = ""  # the cigri user owning the job (one per batch); "": cigri's own, run as the cluster's account
    gang: bool = False  # the specs sharing its group start together, all or none (a gang)


@dataclass(frozen=True)
class RemoteJob:
    """A job as the cluster sees it at poll time."""

    remote_id: str
    state: RemoteState
    exit_code: int | None = None
    node: str | None = None
    started_at: float | None = None
    finished_at: float | None = None


@dataclass(frozen=True)
class Capacity:
    total_slots: int
    free_slots: int
    queued_jobs: int = 0
    free_memory_mb: int | None = None  # memory no job holds; None: the cluster does not say
    node_cores: int | None = None  # the size of every usable node, when they are all alike
    node_memory_mb: int | None = None
    allocated_memory_mb: int = 0  # memory the cluster counts as held by jobs (0 if not consumable)


def node_size(sizes: Iterable[tuple[int, int | None]]) -> tuple[int | None, int | None]:
    """``(CPUs, MiB)`` of a cluster's usable nodes, each None unless every node has the same."""
    cpus, memory = {c for c, _ in sizes}, {m for _, m in sizes}
    return (next(iter(cpus)) if len(cpus) == 1 else None, next(iter(memory)) if len(memory) == 1 else None)


class ClusterBackend(Protocol):
    """What every batch system must offer to cigri (local pool, Slurm, OAR, Grid Engine)."""

    name: str

    def submit(self, specs: list[JobSpec]) -> dict[str, str]:
        """Start every spec (one call for the batch); return ``{key: remote_id}``."""
        ...

    def poll(self, remote_ids: list[str]) -> dict[str, RemoteJob]:
        """Return the state of every given job in one call."""
        ...

    def cancel(self, remote_ids: list[str], user: str = "") -> None:
        """Kill (or dequeue) the given jobs of ``user``, as them; unknown or ended ids are ignored."""
        ...

    def capacity(self) -> Capacity:
        """Total and free slots right now."""
        ...

    def output_tail(self, remote_id: str, stream: str, lines: int, user: str = "") -> str:
        """The last ``lines`` lines of ``user``'s job's ``stdout`` or ``stderr``, read as them."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


# A user's own token for a cluster (``gridtoken``), None when they registered none.
TokenOf = Callable[[str], "str | None"]


def open_backend(name: str, backend: str, options: dict[str, object], spool_root: str,
                 token_of: TokenOf | None = None) -> ClusterBackend:
    """Build the backend a cluster row names (:mod:`cigri.backends.registry`); ``token_of(user)``
    reads its users' tokens."""
    from cigri.backends.registry import BACKENDS, Opening

    if backend not in BACKENDS:
        from cigri.errors import ConfigError

        raise ConfigError(f"cluster {name}: unknown backend {backend!r} (known: {', '.join(BACKENDS)})")
    return BACKENDS[backend].open(name, options, Opening(spool_root, token_of or (lambda _user: None)))
