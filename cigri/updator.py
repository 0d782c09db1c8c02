"""The updator: poll each cluster once for all of cigri's jobs there and record what changed.

A job that succeeded also ends its task here; every other ending is left for colombo to
judge (resubmit, fail, raise an event). The updator also records per-cluster counts each
cycle (kept ``cigri.counts_retention_days``) and, last in the cycle's analysis, terminates
campaigns whose work is over.
"""

from __future__ import annotations

import logging
import sqlite3
from collections import defaultdict

from cigri import bag
from cigri import db as database
from cigri import predictor
from cigri.backends import RemoteJob, RemoteState
from cigri.cycle_context import CycleContext
from cigri.db import campaigns as stored_campaigns
from cigri.db import counts as stored_counts
from cigri.db import jobs as stored_jobs
from cigri.db import tasks as stored_tasks
from cigri.db.events import refused_clusters
from cigri.events import record
from cigri.states import (
    EXIT_RESUBMIT_HEAD,
    EXIT_RESUBMIT_TAIL,
    JOB_ENDED,
    TASK_OPEN,
    CampaignState,
    JobState,
    TaskState,
)

log = logging.getLogger("cigri.updator")


def job_state(remote: RemoteJob) -> JobState:
    """cigri's state for a job from the backend-neutral remote state."""
    if remote.state == RemoteState.COMPLETED:
        if remote.exit_code == 0:
            return JobState.TERMINATED
        if remote.exit_code in (EXIT_RESUBMIT_HEAD, EXIT_RESUBMIT_TAIL):
            return JobState.RESUBMIT
        return JobState.FAILED
    return {
        RemoteState.QUEUED: JobState.WAITING,
        RemoteState.RUNNING: JobState.RUNNING,
        RemoteState.TIMEOUT: JobState.TIMEOUT,
        RemoteState.CANCELLED: JobState.CANCELLED,
        RemoteState.PREEMPTED: JobState.PREEMPTED,
        RemoteState.UNKNOWN: JobState.LOST,
    }[remote.state]


def update(ctx: CycleContext) -> int:
    """Poll every usable or draining cluster; return how many jobs changed state."""
    rows = stored_jobs.to_poll(ctx.grid.db.conn)
    by_cluster: dict[int, list[tuple[int, str, str, int | None]]] = defaultdict(list)
    for job_id, cluster_id, remote_id, state, task_id in rows:
        by_cluster[cluster_id].append((job_id, remote_id, state, task_id))
    changed = 0
    for cluster_id, jobs in by_cluster.items():
        if cluster_id not in ctx.capacities and cluster_id not in ctx.draining:
            continue
        try:
            answers = ctx.grid.backend(cluster_id).poll([remote_id for _, remote_id, _, _ in jobs])
        except Exception as error:  # the cluster is skipped this cycle; its jobs are polled later
            ctx.cluster_failed(cluster_id, "poll", error)
            continue
        with ctx.isolated("updator", cluster_id=cluster_id):  # an answer cigri cannot apply sets the cluster aside
            changed += _apply(ctx, jobs, answers)
    return changed


def _apply(ctx: CycleContext, jobs: list[tuple[int, str, str, int | None]], answers: dict[str, RemoteJob]) -> int:
    changed = 0
    started = False
    with database.write(ctx.grid.db) as conn:
        for job_id, remote_id, old_state, task_id in jobs:
            remote = answers.get(remote_id, RemoteJob(remote_id, RemoteState.UNKNOWN))
            new_state = job_state(remote)
            if new_state == old_state:
                continue
            changed += stored_jobs.move(conn, job_id, old_state, new_state, exit_code=remote.exit_code,
                                        node=remote.node, started_at=remote.started_at,
                                        finished_at=remote.finished_at)
            started |= new_state == JobState.RUNNING
            if task_id is None:
                continue
            if new_state in JOB_ENDED:
                stored_campaigns.record_ending(conn, job_id)
                stored_campaigns.count_minute(conn, job_id)
            if new_state == JobState.TERMINATED:
                stored_tasks.terminate(conn, task_id)
            elif new_state in (JobState.WAITING, JobState.RUNNING):
                stored_tasks.set_state(conn, task_id, new_state)
        if started:
            stored_jobs.run_on(conn)
    return changed


def record_counts(ctx: CycleContext) -> None:
    """Append this cycle's per-cluster job counts and slots to the time series (read by
    ``gridclusters --history``), and drop in the same transaction the samples older than
    ``cigri.counts_retention_days`` (0: kept forever), so that the series stays bounded."""
    now = database.now()
    retention = ctx.grid.config.settings.counts_retention_days * 86400
    with database.write(ctx.grid.db) as conn:
        if retention:
            stored_counts.forget_before(conn, now - retention)
        stored_campaigns.forget_minutes(conn, predictor.minutes_kept(now))
        jobs = stored_jobs.waiting_and_running_per_cluster(conn)
        stored_counts.add(conn, [(now, cluster_id, *jobs.get(cluster_id, (0, 0)), capacity.total_slots,
                                  capacity.free_slots) for cluster_id, capacity in ctx.capacities.items()])


def finish_campaigns(ctx: CycleContext) -> list[int]:
    """End campaigns with no open task, no active job and every epilogue run: ``terminated``, or
    ``failed`` when some task failed. Open events never hold a campaign back, nor the epilogue
    of a cluster that now refuses the owner's jobs or refused the campaign's (it is never
    queued there). A campaign set aside (:mod:`cigri.faults`) does not end until its event is
    fixed."""
    finished = []
    refused: dict[str, set[int]] = {}  # owner -> the clusters that refuse their jobs
    with database.write(ctx.grid.db) as conn:
        refused_jobs = refused_clusters(conn)  # campaign -> the clusters that refused its jobs
        candidates = stored_campaigns.under_way(conn)
        for campaign_id, owner in candidates:
            if campaign_id in ctx.set_aside:
                continue
            with ctx.isolated("updator", campaign_id=campaign_id, conn=conn):
                if _finish(ctx, conn, campaign_id, owner, refused, refused_jobs.get(campaign_id, set())):
                    finished.append(campaign_id)
    return finished


def _finish(ctx: CycleContext, conn: sqlite3.Connection, campaign_id: int, owner: str,
            refused: dict[str, set[int]], refused_jobs: set[int]) -> bool:
    """End the campaign if its work is over; whether it ended. ``refused``: the clusters that
    refuse each owner's jobs, as far as asked; ``refused_jobs``: those that refused this
    campaign's."""
    if bag.count(conn, campaign_id, TASK_OPEN, limit=1):
        return False
    if stored_jobs.any_active(conn, campaign_id):
        return False
    if owner not in refused:
        refused[owner] = ctx.grid.refused_cluster_ids(owner)
    if stored_campaigns.epilogues_due(conn, campaign_id) - refused[owner] - refused_jobs:
        return False
    failed = bag.count(conn, campaign_id, (TaskState.FAILED,))
    end = CampaignState.FAILED if failed else CampaignState.TERMINATED
    stored_campaigns.finish(conn, campaign_id, end, database.now())
    record(conn, "CAMPAIGN_FAILED" if failed else "CAMPAIGN_FINISHED",
           f"campaign {campaign_id} {end}" + (f": {failed} task(s) failed" if failed else ""), campaign_id=campaign_id)
    log.info("campaign %s %s", campaign_id, end)
    return True
