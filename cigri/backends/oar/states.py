"""OAR 2.5 job states in cigri's words: one table, plus how an ``Error`` job ended.

OAR ends every job that did not finish by itself in ``Error``; why is only in its events
(as CiGri's colombo reads them): the meta-scheduler kills a best-effort job for a normal one
(``BESTEFFORT_KILL``), sarko kills a job at its walltime (``WALLTIME``), and every kill,
including those two, is a frag request (``FRAG_JOB_REQUEST``: ``oardel``, a dead node).
Anything else in ``Error`` (working directory, output files, prologue...) failed by itself.
Events are read for ``Error`` jobs only: ``oardel`` on an ended job still records a frag
request (cigri cancels what it no longer needs), and a ``Terminated`` job stays completed.
"""

from __future__ import annotations

from collections.abc import Iterable

from cigri.backends import RemoteJob, RemoteState
from cigri.errors import ClusterBadAnswer

ERROR = "Error"

STATES: dict[str, RemoteState] = {
    "Waiting": RemoteState.QUEUED,
    "Hold": RemoteState.QUEUED,
    "toLaunch": RemoteState.QUEUED,
    "toAckReservation": RemoteState.QUEUED,
    "Launching": RemoteState.QUEUED,
    "Running": RemoteState.RUNNING,
    "Finishing": RemoteState.RUNNING,
    "Suspended": RemoteState.RUNNING,
    "Resuming": RemoteState.RUNNING,
    "toError": RemoteState.RUNNING,  # on its way to Error: not ended yet
    "Terminated": RemoteState.COMPLETED,
    ERROR: RemoteState.COMPLETED,  # unless one of ERROR_EVENTS says otherwise
}

# First match wins: a best-effort kill and a walltime kill are also frag requests.
ERROR_EVENTS: tuple[tuple[str, RemoteState], ...] = (
    ("BESTEFFORT_KILL", RemoteState.PREEMPTED),
    ("WALLTIME", RemoteState.TIMEOUT),
    ("FRAG_JOB_REQUEST", RemoteState.CANCELLED),
)


def remote_state(state: str, events: Iterable[str] = ()) -> RemoteState:
    """The neutral state of a job in OAR ``state`` with the given event types."""
    try:
        neutral = STATES[state]
    except KeyError:
        raise ClusterBadAnswer(f"unknown OAR job state {state!r}") from None
    if state == ERROR:
        seen = set(events)
        for event, meaning in ERROR_EVENTS:
            if event in seen:
                return meaning
    return neutral


def exit_status(raw: object) -> int | None:
    """OAR stores the raw wait status; a signal becomes 128 + its number, like a shell."""
    if raw is None or isinstance(raw, bool) or not str(raw).strip().isdigit():
        return None
    status = int(str(raw))
    return 128 + (status & 0x7F) if status & 0x7F else status >> 8


def remote_job(remote_id: str, state: str, events: Iterable[str], raw_exit: object,
               node: str | None, start: object, stop: object) -> RemoteJob:
    """A :class:`RemoteJob` from the fields both dialects read (times are epoch seconds, 0 = unset)."""
    neutral = remote_state(state, events)
    code = exit_status(raw_exit) if neutral == RemoteState.COMPLETED else None
    ended = neutral not in (RemoteState.QUEUED, RemoteState.RUNNING)  # Finishing has a stop time already
    return RemoteJob(remote_id, neutral, code, node or None, _epoch(start), _epoch(stop) if ended else None)


def _epoch(value: object) -> float | None:
    try:
        seconds = float(str(value))
    except ValueError:
        return None
    return seconds if seconds > 0 else None
