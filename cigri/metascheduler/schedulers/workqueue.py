"""The workqueue scheduler: take tasks from the head of a campaign's bag and make them jobs.

Picking tasks and creating their job rows is one transaction: a task is never both in the
bag and on a cluster, and a crash leaves either nothing or jobs in ``submitting`` that the
runner sends (idempotently) on the next cycle.
"""

from __future__ import annotations

import sqlite3

from cigri import bag
from cigri import db as database
from cigri.db import campaigns as stored_campaigns
from cigri.db import tasks as stored_tasks
from cigri.states import JobState


def take_tasks(conn: sqlite3.Connection, campaign_id: int, cluster_id: int, count: int) -> int:
    """Move up to ``count`` pending tasks into new ``submitting`` jobs; return how many."""
    task_ids = bag.take(conn, campaign_id, count)
    if not task_ids:
        return 0
    now = database.now()
    stored_tasks.take_up(conn, task_ids)
    conn.executemany(
        "INSERT INTO jobs(campaign_id, task_id, cluster_id, kind, state, created_at) VALUES (?, ?, ?, 'task', ?, ?)",
        [(campaign_id, t, cluster_id, JobState.SUBMITTING, now) for t in task_ids])
    stored_campaigns.started(conn, campaign_id, now)
    return len(task_ids)


def add_script_job(conn: sqlite3.Connection, campaign_id: int, cluster_id: int, kind: str) -> None:
    """Create a prologue or epilogue job for one cluster."""
    conn.execute(
        "INSERT INTO jobs(campaign_id, task_id, cluster_id, kind, state, created_at) VALUES (?, NULL, ?, ?, ?, ?)",
        [campaign_id, cluster_id, kind, JobState.SUBMITTING, database.now()])
