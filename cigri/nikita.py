"""Nikita: kill every job someone asked to kill, in one cancel call per cluster and owner (each
call acts as the jobs' owner, :mod:`cigri.backends.identity`).

Whoever asks writes a :class:`KillReason` on the job (griddel, fair-share preemption, flood
control, a losing replica, a pause); the reason decides the job's end and so its task's fate:
a user's kill cancels the task, a preemption or flood kill ends the job ``preempted`` so that
colombo puts the task back at the head of the bag without charging an attempt (counted as a
preemption), a pause's withdrawal of a job not yet started puts its task back at the head of
the bag here, nothing counted, and a losing replica just stops. Each job gets a grace period
(SIGTERM, then kill): the local pool's, Slurm's ``KillWait``, or for OAR, whose ``oardel``
kills at once, the backend's ``kill_grace``.
CiGri v3 stopped after the first kill per cluster (its bug 11.21).
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from typing import NamedTuple

from cigri import db as database
from cigri.cycle_context import CycleContext
from cigri.db import jobs as stored_jobs
from cigri.db import tasks as stored_tasks
from cigri.states import KILL_REQUEUES, JobState, KillReason

log = logging.getLogger("cigri.nikita")


class _Kill(NamedTuple):
    job_id: int
    remote_id: str | None
    task_id: int | None
    reason: KillReason


def kill(ctx: CycleContext) -> int:
    """Cancel every job with a pending kill request; return how many were killed."""
    by_cluster: dict[tuple[int, str], list[_Kill]] = defaultdict(list)
    for job_id, cluster_id, user, remote_id, task_id, reason in stored_jobs.to_kill(ctx.grid.db.conn):
        by_cluster[(cluster_id, user)].append(_Kill(job_id, remote_id, task_id, KillReason(reason)))
    killed = 0
    for (cluster_id, user), jobs in by_cluster.items():
        if cluster_id in ctx.dormant:  # imported from CiGri, not lifted yet: the requests wait
            continue
        remote_ids = [k.remote_id for k in jobs if k.remote_id]
        if remote_ids:
            try:
                ctx.grid.backend(cluster_id).cancel(remote_ids, user)
            except Exception as error:  # retried next cycle: the requests stay
                ctx.cluster_failed(cluster_id, "cancel", error)
                continue
        with database.write(ctx.grid.db) as conn:
            for k in jobs:
                end = JobState.PREEMPTED if k.reason in KILL_REQUEUES else JobState.CANCELLED
                killed += stored_jobs.end_active(conn, k.job_id, end, database.now())
                if k.task_id is not None and k.reason == KillReason.USER:
                    stored_tasks.cancel(conn, k.task_id)
            stored_tasks.withdrawn(conn, [k.task_id for k in jobs if k.task_id is not None and k.reason == KillReason.PAUSE])
        log.info("cluster %s: killed %s", ctx.name(cluster_id),
                 ", ".join(f"{n} {reason}" for reason, n in Counter(k.reason.value for k in jobs).items()))
    return killed
