"""Events: what went wrong, recorded for users (gridevents) and admins.

Codes used so far (the catalogue lives in README, "Events"):
``EXIT_ERROR`` (a task ended with a non-zero status; the stderr tail is kept),
``WALLTIME`` (killed at its walltime), ``LOST_JOB`` (the cluster forgot the job),
``PROLOGUE_FAILED`` / ``EPILOGUE_FAILED``, ``TOO_MANY_ATTEMPTS``,
``CLUSTER_UNREACHABLE`` (capacity, poll or cancel failed), ``SUBMISSION_ERROR``.
"""

from __future__ import annotations

import sqlite3

from cigri import db as database


def open_event(conn: sqlite3.Connection, kind: str, code: str, message: str, *,
               campaign_id: int | None = None, cluster_id: int | None = None, job_id: int | None = None,
               task_id: int | None = None, stderr_tail: str | None = None) -> None:
    """Record an event; a cluster problem already open is not recorded twice."""
    if kind == "cluster" and conn.execute(
            "SELECT 1 FROM events WHERE class = 'cluster' AND code = ? AND cluster_id IS ? AND state = 'open'",
            [code, cluster_id]).fetchone():
        return
    conn.execute(
        "INSERT INTO events(class, code, campaign_id, cluster_id, job_id, task_id, message, stderr_tail, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [kind, code, campaign_id, cluster_id, job_id, task_id, message, stderr_tail, database.now()])


def close_cluster_events(conn: sqlite3.Connection, cluster_id: int, code: str) -> None:
    """A cluster problem that went away closes its open event."""
    conn.execute("UPDATE events SET state = 'closed', closed_at = ? WHERE class = 'cluster' AND cluster_id = ? "
                 "AND code = ? AND state = 'open'", [database.now(), cluster_id, code])
