"""Nikita: kill what users cancelled (whole campaigns or single jobs), every job of them.

CiGri v3 stopped after the first kill per cluster (its bug 11.21); here every active job
with a kill request is cancelled in one call per cluster and then marked cancelled.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from cigri import db as database
from cigri.cycle_context import CycleContext
from cigri.states import JOB_ACTIVE, JobState, TaskState, sql_in

log = logging.getLogger("cigri.nikita")


def kill(ctx: CycleContext) -> int:
    """Cancel every job with a pending kill request; return how many were killed."""
    rows = ctx.grid.db.execute(
        f"SELECT id, cluster_id, remote_id, task_id FROM jobs WHERE kill_requested = 1 AND state IN {sql_in(JOB_ACTIVE)}"
    ).fetchall()
    by_cluster: dict[int, list[tuple[int, str | None, int | None]]] = defaultdict(list)
    for job_id, cluster_id, remote_id, task_id in rows:
        by_cluster[cluster_id].append((job_id, remote_id, task_id))
    killed = 0
    for cluster_id, jobs in by_cluster.items():
        remote_ids = [r for _, r, _ in jobs if r]
        if remote_ids:
            try:
                ctx.grid.backend(cluster_id).cancel(remote_ids)
            except Exception as error:  # retried next cycle: the requests stay
                ctx.cluster_failed(cluster_id, "cancel", error)
                continue
        with database.write(ctx.grid.db) as conn:
            for job_id, _, task_id in jobs:
                killed += conn.execute(
                    f"UPDATE jobs SET state = ?, finished_at = ? WHERE id = ? AND state IN {sql_in(JOB_ACTIVE)}",
                    [JobState.CANCELLED, database.now(), job_id]).rowcount
                if task_id is not None:
                    conn.execute("UPDATE tasks SET state = ? WHERE id = ? AND state IN (?, ?, ?)",
                                 [TaskState.CANCELLED, task_id, TaskState.PENDING, TaskState.WAITING,
                                  TaskState.RUNNING])
        log.info("cluster %s: killed %s job(s)", cluster_id, len(jobs))
    return killed
