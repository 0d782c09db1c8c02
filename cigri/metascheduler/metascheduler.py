"""Gather the grid's state into a scenario, allocate, and apply the shares.

Applying a share means: run the prologue first where the JDL has one, then let the
workqueue scheduler take tasks from the bag, and at a campaign's end queue its epilogues.
"""

from __future__ import annotations

import logging
from typing import Any

from cigri import db as database
from cigri.cycle_context import CycleContext
from cigri.metascheduler.allocation import CampaignView, ClusterView, allocate
from cigri.metascheduler.schedulers import finalize, test, workqueue
from cigri.properties import campaign_properties
from cigri.states import JOB_ACTIVE, CampaignState, JobState, TaskState, sql_in

log = logging.getLogger("cigri.metascheduler")
DEFAULT_MAX_WAITING = 100


def schedule(ctx: CycleContext) -> dict[tuple[int, str], int]:
    """One metascheduler pass; return the allocation it applied (for logs and tests)."""
    db = ctx.grid.db
    campaign_ids = [r[0] for r in db.execute("SELECT id FROM campaigns WHERE state = ? ORDER BY id",
                                             [CampaignState.IN_TREATMENT])]
    settings = campaign_properties(db, campaign_ids)
    names = {cid: name for name, cid in ctx.grid.cluster_ids().items()}
    active = _active_jobs(ctx, campaign_ids)
    taps = {(c, k): rate for c, k, rate in db.execute("SELECT campaign_id, cluster_id, rate FROM taps")}
    script_jobs = _script_jobs(ctx, campaign_ids)
    clusters = [ClusterView(names[cid], cap.free_slots,
                            int(ctx.cluster_options(cid).get("max_waiting", DEFAULT_MAX_WAITING)),
                            sum(n for (_, k, state), n in active.items() if k == cid and state != JobState.RUNNING))
                for cid, cap in ctx.capacities.items()]
    views = []
    with database.write(db) as conn:
        for campaign_id in campaign_ids:
            usable = []
            open_tasks = _has_open_tasks(conn, campaign_id)
            for cluster_id, values in settings[campaign_id].items():
                if cluster_id not in ctx.capacities:
                    continue
                if not open_tasks:
                    _queue_epilogue(conn, campaign_id, cluster_id, values, script_jobs)
                elif _prologue_done(conn, campaign_id, cluster_id, values, script_jobs):
                    usable.append(cluster_id)
            if not usable:
                continue
            views.append(CampaignView(
                id=campaign_id,
                pending=_pending(conn, campaign_id, limit=sum(c.free_slots + c.max_waiting for c in clusters)),
                clusters=tuple(names[k] for k in usable),
                test_mode=any(test.is_test_mode(settings[campaign_id][k]) for k in usable),
                max_jobs={names[k]: cap for k in usable
                          if (cap := test.job_cap(settings[campaign_id][k])) is not None},
                active={names[k]: _count(active, campaign_id, k, JOB_ACTIVE) for k in usable},
                waiting={names[k]: _count(active, campaign_id, k, (JobState.SUBMITTING, JobState.WAITING))
                         for k in usable},
                tap={names[k]: taps.get((campaign_id, k), ctx.grid.config.runner.tap_initial) for k in usable},
            ))
        shares = allocate(clusters, views)
        ids = {name: cid for cid, name in names.items()}
        for (campaign_id, cluster), count in shares.items():
            taken = workqueue.take_tasks(conn, campaign_id, ids[cluster], count)
            log.info("campaign %s: %s new job(s) on %s", campaign_id, taken, cluster)
        finalize.replicate(conn, ctx.capacities, settings)
    return shares


def _active_jobs(ctx: CycleContext, campaign_ids: list[int]) -> dict[tuple[int, int, str], int]:
    """``{(campaign, cluster, state): count}`` of task jobs not yet ended."""
    return {(c, k, s): n for c, k, s, n in ctx.grid.db.execute(
        f"SELECT campaign_id, cluster_id, state, count(*) FROM jobs WHERE state IN {sql_in(JOB_ACTIVE)} "
        f"AND kind = 'task' GROUP BY campaign_id, cluster_id, state")}


def _count(active: dict[tuple[int, int, str], int], campaign_id: int, cluster_id: int, states: tuple[Any, ...]) -> int:
    return sum(active.get((campaign_id, cluster_id, s), 0) for s in states)


def _script_jobs(ctx: CycleContext, campaign_ids: list[int]) -> dict[tuple[int, int, str], list[str]]:
    """States of every prologue/epilogue job, keyed by (campaign, cluster, kind)."""
    result: dict[tuple[int, int, str], list[str]] = {}
    for c, k, kind, state in ctx.grid.db.execute(
            "SELECT campaign_id, cluster_id, kind, state FROM jobs WHERE kind != 'task' ORDER BY id"):
        result.setdefault((c, k, kind), []).append(state)
    return result


def _prologue_done(conn: Any, campaign_id: int, cluster_id: int, values: dict[str, Any],
                   script_jobs: dict[tuple[int, int, str], list[str]]) -> bool:
    """True when tasks may run on the cluster; queue the prologue job the first time."""
    if not values.get("prologue"):
        return True
    states = script_jobs.get((campaign_id, cluster_id, "prologue"), [])
    if JobState.TERMINATED in states:
        return True
    if not states:
        workqueue.add_script_job(conn, campaign_id, cluster_id, "prologue")
    return False


def _queue_epilogue(conn: Any, campaign_id: int, cluster_id: int, values: dict[str, Any],
                    script_jobs: dict[tuple[int, int, str], list[str]]) -> None:
    if values.get("epilogue") and not script_jobs.get((campaign_id, cluster_id, "epilogue")):
        workqueue.add_script_job(conn, campaign_id, cluster_id, "epilogue")


def _has_open_tasks(conn: Any, campaign_id: int) -> bool:
    return conn.execute("SELECT 1 FROM tasks WHERE campaign_id = ? AND state IN ('pending','waiting','running') "
                        "LIMIT 1", [campaign_id]).fetchone() is not None


def _pending(conn: Any, campaign_id: int, limit: int) -> int:
    """Pending tasks, counted only up to what could be started (cheap on huge bags)."""
    return conn.execute("SELECT count(*) FROM (SELECT 1 FROM tasks WHERE campaign_id = ? AND state = ? LIMIT ?)",
                        [campaign_id, TaskState.PENDING, limit]).fetchone()[0]
