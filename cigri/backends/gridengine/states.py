"""Grid Engine's job states in cigri's words: qstat's state letters while a task has not ended,
and how an ended task's accounting record (``qacct``) and its own trace say it ended.

qstat shows a task only until it ends; its state is a word of letters (``qw``, ``hqw``, ``r``,
``t``, ``Rr``, ``dr``, ``Eqw``...). The accounting record of an ended task has ``failed`` (0: the
job script ran and ended by itself; 37: Grid Engine killed it at a limit, its ``h_rt``; 100: it
was killed by a signal, "assumedly after job"; others: it could not be started or set up) and
``exit_status``. A kill leaves the same record whoever killed it (qdel, the slot-wise
subordination of a best-effort queue, a job killing itself), so the task's trace tells them
apart: cigri submits with ``-notify``, so a ``qdel`` first sends SIGUSR2, which the job script
notes (``kill`` in its status file, :mod:`cigri.backends._grouping`) before it sends SIGTERM to
the task's processes; a subordinated best-effort task is killed without that warning.
"""

from __future__ import annotations

from dataclasses import dataclass

from cigri.backends import RemoteJob, RemoteState
from cigri.backends import _grouping as grouping
from cigri.errors import ClusterBadAnswer

LIMIT = 37  # failed: "qmaster enforced h_rt, h_cpu, or h_vmem limit"
KILLED = 100  # failed: "assumedly after job" (a signal ended the job script)
# Grid Engine counts h_rt from when the execution daemon took the task, which on a loaded host is
# seconds before the record's start time (the shepherd's): a warned kill this close to the
# walltime is the walltime's.
START_SLACK = 10
_LETTERS = set("dEhrRsStTwqz")


def qstat_state(code: str) -> RemoteState:
    """A task qstat lists: waiting (``q``, ``w``, ``h`` and no run), running (``r``, ``t``,
    suspended ``s``/``S``/``T``), or in error (``E``: it could not start, and stays so until an
    admin clears it), which is read as ended with a failure."""
    letters = set(code)
    if not letters or not letters <= _LETTERS:
        raise ClusterBadAnswer(f"unknown Grid Engine job state {code!r}")
    if "E" in letters:
        return RemoteState.COMPLETED
    if letters & set("rtsST"):
        return RemoteState.RUNNING
    return RemoteState.QUEUED


@dataclass(frozen=True)
class Record:
    """What an accounting record says of one task."""

    queue: str
    host: str
    failed: int
    exit_status: int
    started_at: float | None
    finished_at: float | None
    walltime: int | None  # its h_rt (seconds), from the record's category


def ended(job_id: str, record: Record, trace: str, best_effort_queue: str) -> RemoteJob:
    """How a task ended, from its record and its trace (see the module's docstring)."""
    killed = grouping.killed_at(trace)
    if record.failed == LIMIT:
        state, code = RemoteState.TIMEOUT, None
    elif killed is not None:
        at_walltime = bool(record.walltime and record.started_at
                           and killed - record.started_at >= record.walltime - START_SLACK)
        state, code = (RemoteState.TIMEOUT if at_walltime else RemoteState.CANCELLED), None
    elif record.failed == KILLED:
        preempted = bool(best_effort_queue) and record.queue == best_effort_queue
        state, code = (RemoteState.PREEMPTED if preempted else RemoteState.CANCELLED), None
    else:  # failed: set up or started, never run to its end by itself, so never a success
        state, code = RemoteState.COMPLETED, (record.exit_status or 1) if record.failed else record.exit_status
    return RemoteJob(job_id, state, code, record.host or None, record.started_at, record.finished_at)
