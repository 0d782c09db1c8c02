"""Fault isolation: a campaign, task or cluster whose stored data makes a cycle step raise is
set aside, and every other one goes on.

A step runs each campaign's or cluster's share of its work in
:meth:`~cigri.cycle_context.CycleContext.isolated`. An error there that is not the system's or
the database's (:data:`NOT_A_FAULT`: those stop the cycle, as does an error a step cannot
charge to one unit) sets the unit aside: its share of the step is undone (a savepoint inside
the step's transaction), the log has the traceback once, and an open ``SET_ASIDE`` event
names the unit, the step and the error in one line. That open event is the mark: a set-aside
campaign gets no new job, no decision and no end in any later cycle (its jobs already on a
cluster run on and are followed, and its owner may still cancel it); a set-aside cluster is
blacklisted: no job is sent there and none is polled (kills asked still go), and no automatic
re-check lifts it. Fixing the event (``gridevents --fix``: the campaign's owner or an admin, a
cluster's an admin) lifts it, and the next cycle tries the unit again, setting it aside again
if its data still fails.

A task is set aside by the runner alone, for the one piece of data that is the task's own: a
parameter line no shell could split (an unbalanced quote, a trailing backslash), which gridsub
and import-v3 refuse but a hand-edited database or an older cigri's import can hold. Its job
and the task fail under the campaign's ``SET_ASIDE`` event for such tasks; the campaign goes on.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from typing import Any

from cigri import db as database
from cigri.db import events as stored
from cigri.db import jobs as stored_jobs
from cigri.db import tasks as stored_tasks
from cigri.errors import CigriError, ConfigError, InputError
from cigri.events import record
from cigri.states import TaskState

CODE = "SET_ASIDE"
# The system's and the database's errors (a full disk, a lock held too long, memory, a cluster's
# call, the configuration): they say nothing of the unit being processed, so they stop the cycle
# as before. Bad input read from the unit's stored data (an InputError) is the unit's.
NOT_A_FAULT = (OSError, sqlite3.OperationalError, CigriError, MemoryError)


def is_fault(error: Exception) -> bool:
    """Whether ``error`` is the unit's own: its data, not the system, the database or a cluster."""
    if isinstance(error, InputError):
        return not isinstance(error, ConfigError)
    return not isinstance(error, NOT_A_FAULT)
_LONGEST = 300  # characters of the error kept in the event's one line


def describe(error: BaseException) -> str:
    """The error in one bounded line: its type and its words."""
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}"[:_LONGEST] if text else type(error).__name__


def set_aside_campaigns(conn: sqlite3.Connection) -> set[int]:
    """The campaigns set aside now (an open ``SET_ASIDE`` event of theirs)."""
    return set(set_aside_events(conn))


def set_aside_campaign(conn: sqlite3.Connection, campaign_id: int, step: str, error: BaseException) -> int:
    """Open the campaign's ``SET_ASIDE`` event; return its id."""
    return record(conn, CODE, f"campaign set aside: the {step} raised on its stored data ({describe(error)}); "
                              "no job starts and nothing is decided for it until this event is fixed "
                              "(gridevents --fix)", campaign_id=campaign_id, signature=step, kind="campaign")


def set_aside_cluster(conn: sqlite3.Connection, cluster_id: int, step: str, error: BaseException) -> int:
    """Open the cluster's ``SET_ASIDE`` event and blacklist the cluster under it (fixing the
    event lifts it; no automatic re-check does); return the event's id."""
    why = f"the {step} raised on its data ({describe(error)})"
    event_id = record(conn, CODE, f"cluster set aside: {why}; no job is sent there and none is polled until this "
                                  "event is fixed (gridevents --fix)", cluster_id=cluster_id, signature=step,
                      kind="cluster")
    stored.take_cluster(conn, cluster_id, event_id, f"set aside: {why}", database.now())
    return event_id


def set_aside_task(conn: sqlite3.Connection, job: Mapping[str, Any], why: str) -> None:
    """Fail a job not yet sent and its task; the campaign's one ``SET_ASIDE`` event for tasks
    failing so covers the job (``gridevents --fix --resubmit`` puts their tasks back)."""
    stored_jobs.fail_unsent(conn, job["id"], database.now())
    stored_tasks.set_state(conn, job["task_id"], TaskState.FAILED)
    record(conn, CODE, f"task {job['task']} set aside and failed: {why}; the rest of the campaign goes on "
                       f"(submit the line again, corrected: gridsub -c {job['campaign_id']} -F FILE)",
           campaign_id=job["campaign_id"], job_id=job["id"], task_id=job["task_id"], signature=why, kind="job")


def set_aside_events(conn: sqlite3.Connection, campaign_ids: list[int] | None = None) -> dict[int, tuple[int, str]]:
    """``{campaign: (event id, message)}`` of the campaigns under way set aside now (of
    ``campaign_ids`` only, when given): what ``gridstat --why`` and ``cigri shares`` say of them."""
    return stored.open_campaign_events(conn, CODE, campaign_ids)
