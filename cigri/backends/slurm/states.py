"""Slurm's job states in cigri's words: the one table, how exit codes are read, and which
pending reasons mean a job will never start.

Every dialect (squeue/sacct over SSH, slurmrestd) reports the same state names; they all go
through :func:`translate`. A state Slurm may add later is refused loudly rather than guessed.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from cigri.backends import RemoteState
from cigri.errors import ClusterBadAnswer

STATES: dict[str, RemoteState] = {
    "PENDING": RemoteState.QUEUED,
    "REQUEUED": RemoteState.QUEUED,
    "REQUEUE_FED": RemoteState.QUEUED,
    "REQUEUE_HOLD": RemoteState.QUEUED,
    "SPECIAL_EXIT": RemoteState.QUEUED,  # requeued and held after a special exit code
    "RESV_DEL_HOLD": RemoteState.QUEUED,
    "CONFIGURING": RemoteState.RUNNING,
    "RUNNING": RemoteState.RUNNING,
    "COMPLETING": RemoteState.RUNNING,
    "SUSPENDED": RemoteState.RUNNING,
    "STOPPED": RemoteState.RUNNING,
    "SIGNALING": RemoteState.RUNNING,
    "STAGE_OUT": RemoteState.RUNNING,
    "RESIZING": RemoteState.RUNNING,
    "COMPLETED": RemoteState.COMPLETED,
    "FAILED": RemoteState.COMPLETED,
    "OUT_OF_MEMORY": RemoteState.COMPLETED,
    "NODE_FAIL": RemoteState.COMPLETED,
    "BOOT_FAIL": RemoteState.COMPLETED,
    "TIMEOUT": RemoteState.TIMEOUT,
    "DEADLINE": RemoteState.TIMEOUT,
    "CANCELLED": RemoteState.CANCELLED,
    "REVOKED": RemoteState.CANCELLED,  # a federation sibling started the job elsewhere
    "PREEMPTED": RemoteState.PREEMPTED,
}


def exit_code(wait_status: int) -> int:
    """A shell-style exit code from a raw wait status (Slurm's ``exit_code``: 768 is exit 3)."""
    signal = wait_status & 0x7F
    return 128 + signal if signal else (wait_status >> 8) & 0xFF


def translate(state: str, wait_status: int | None) -> tuple[RemoteState, int | None]:
    """cigri's state and exit code for a Slurm state (``CANCELLED by 1000`` as sacct says it).

    ``COMPLETED`` is exit 0 by definition. The failure states never report 0 (a node that
    died under a job leaves status 0): they fall back to 1 so the job is not taken for a success.
    """
    name = state.split(" ", 1)[0].rstrip("+")
    remote = STATES.get(name)
    if remote is None:
        raise ClusterBadAnswer(f"unknown Slurm job state {state!r}")
    if name == "COMPLETED":
        return remote, 0
    if remote == RemoteState.COMPLETED:
        return remote, exit_code(wait_status or 0) or 1
    return remote, None


# Pending reasons (shell patterns) slurmctld gives a job it accepted but can never start: a
# request no node or partition can meet, and a QOS or association per-job limit (wall time,
# CPUs, nodes, memory...) without DenyOnLimit, Slurm's default, where sbatch takes the job and
# it pends forever. Count limits (QOSMaxJobsPerUserLimit, AssocGrp*...) lift as jobs end: not here.
NEVER_STARTS = ("PartitionConfig", "PartitionNodeLimit", "PartitionTimeLimit", "BadConstraints",
                "InvalidAccount", "InvalidQOS", "QOSNotAllowed", "AccountNotAllowed", "MaxMemPerLimit",
                "QOSMax*PerJob*", "AssocMax*PerJob*", "QOSMin*")


def never_starts(reason: str) -> bool:
    """Whether a pending job with this reason waits for nothing that will ever happen."""
    return any(fnmatchcase(reason, pattern) for pattern in NEVER_STARTS)
