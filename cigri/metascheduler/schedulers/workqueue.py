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
from cigri.db import jobs as stored_jobs
from cigri.db import tasks as stored_tasks


def take_tasks(conn: sqlite3.Connection, campaign_id: int, cluster_id: int, count: int) -> int:
    """Move up to ``count`` pending tasks into new ``submitting`` jobs; return how many."""
    task_ids = bag.take(conn, campaign_id, count)
    if not task_ids:
        return 0
    now = database.now()
    stored_tasks.take_up(conn, task_ids)
    stored_jobs.add_task_jobs(conn, campaign_id, cluster_id, task_ids, now)
    stored_campaigns.started(conn, campaign_id, now)
    return len(task_ids)


def add_script_job(conn: sqlite3.Connection, campaign_id: int, cluster_id: int, kind: str) -> None:
    """Create a prologue or epilogue job for one cluster."""
    stored_jobs.add_script_job(conn, campaign_id, cluster_id, kind, database.now())
