"""The finalize scheduler: at a campaign's tail, run its stragglers twice and keep the first.

A campaign's last tasks decide when it ends, and one slow node or a long task in the tail can
double its makespan while the grid sits idle. When a campaign's bag is empty and its open
tasks are fewer than the free slots of its clusters, each *straggler* (a task running with a
single copy for longer than the campaign's mean task duration so far, plus
``metascheduler.replica_delay``) gets a replica on a free slot (another cluster first). A task
that has not yet outlived the mean is left alone: a copy of it would most likely lose, and would
only burn a slot. The delay (Spark's ``speculation.minTaskRuntime``, at a batch cluster's scale)
keeps short tasks from being copied: a copy needs time to start and win, and a task of a second
may have ended since the updator's poll, so that its copy would only run it twice. The first
copy to finish ends the task (the updator); every other copy still active is then marked
``kill_reason = 'replica'`` and nikita cancels it at the end of the cycle, so the task counts once. Colombo judges a
task's ending only once no copy of it is active, so a replica that fails decides nothing while
another copy runs.

A replica is a job of the same task: it is not an attempt (``attempts`` is untouched) and
``gridstat`` counts it under ``replicas``. On by default only for best-effort campaigns (their
slots cost nobody anything); a class's ``finalize`` key turns it on or off for its campaigns,
and the JDL's ``finalize`` per campaign and cluster, over the class.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Mapping
from typing import Any

from cigri import bag
from cigri import db as database
from cigri.backends import Capacity
from cigri.db import campaigns as stored_campaigns
from cigri.db import jobs as stored_jobs
from cigri.states import TaskState

log = logging.getLogger("cigri.finalize")
BEST_EFFORT = ("best-effort", "besteffort")


def enabled(settings: Mapping[str, Any], by_class: bool | None = None) -> bool:
    """Whether replicas may run on a cluster with these JDL settings, given the class's choice."""
    if settings.get("test_mode"):
        return False
    if "finalize" in settings:
        return bool(settings["finalize"])
    if by_class is not None:
        return by_class
    return settings.get("type") in BEST_EFFORT


def kill_losers(conn: sqlite3.Connection) -> int:
    """Mark every still-active copy of an already terminated task for nikita."""
    return stored_jobs.mark_losers(conn)


def free_slots(conn: sqlite3.Connection, capacities: Mapping[int, Capacity]) -> dict[int, int]:
    """Slots nobody will take: free now, less cigri's jobs already queued or being sent there."""
    queued = stored_jobs.queued_per_cluster(conn)
    return {cid: max(0, cap.free_slots - queued.get(cid, 0)) for cid, cap in capacities.items()}


def replicate(conn: sqlite3.Connection, capacities: Mapping[int, Capacity],
              settings: Mapping[int, Mapping[int, Mapping[str, Any]]], classes: Mapping[str, bool | None],
              replica_delay: float) -> int:
    """Give each straggler of each campaign at its tail one replica on a free slot; return how many.

    ``settings`` is :func:`cigri.db.campaigns.properties` of the active campaigns and
    ``classes`` each class's ``finalize``. Runs after the allocation in the metascheduler's
    transaction, so it only uses slots no campaign with tasks in its bag could take this cycle.
    """
    kill_losers(conn)
    free = free_slots(conn, capacities)
    made = 0
    for campaign_id, class_name in stored_campaigns.classes_in_treatment(conn):
        clusters = [cid for cid, values in settings.get(campaign_id, {}).items()
                    if cid in free and enabled(values, classes.get(class_name))]
        room = sum(free[cid] for cid in clusters)
        if room == 0 or _tail_size(conn, campaign_id, room) >= room:
            continue
        for task_id, original in _stragglers(conn, campaign_id, database.now() - replica_delay):
            target = max((cid for cid in clusters if free[cid] > 0),
                         key=lambda cid: (cid != original, free[cid], -cid), default=None)
            if target is None:
                break
            stored_jobs.add_task_jobs(conn, campaign_id, target, [task_id], database.now())
            free[target] -= 1
            made += 1
    if made:
        log.info("finalize: %s replica(s) started", made)
    return made


def _tail_size(conn: sqlite3.Connection, campaign_id: int, room: int) -> int:
    """The campaign's open tasks, counted up to ``room``; a non-empty bag counts as no tail."""
    if bag.count(conn, campaign_id, (TaskState.PENDING,), limit=1):
        return room
    return bag.count(conn, campaign_id, (TaskState.WAITING, TaskState.RUNNING), limit=room)


def _stragglers(conn: sqlite3.Connection, campaign_id: int, since: float) -> list[tuple[int, int]]:
    """Tasks running with a single active copy from before ``since`` less the campaign's mean
    task duration, longest running first, with that copy's cluster; none before a task has ended,
    and never a task a copy of which has failed or hit its walltime: its replica would end the
    same way, and colombo judges only a task's latest copy, so a chain of replicas each
    outliving the one before would keep the timeouts from ever counting (a livelock)."""
    done, total = stored_campaigns.terminated_and_duration(conn, campaign_id)
    if not done:
        return []
    return stored_jobs.stragglers(conn, campaign_id, since - total / done)
