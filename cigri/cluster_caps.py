"""How many jobs a cluster takes from cigri's account at once, when a site caps it.

Sites bound the jobs one account may have queued or running (Slurm's ``MaxSubmitJobs`` on an
association or a QOS), and cigri sends all its users' jobs through one account per cluster.
Two sources give a cluster its cap, and the lower one counts:

- the admin's ``max_jobs`` cluster option (0: none), for a limit known in advance (HTCondor-G's
  ``GRIDMANAGER_MAX_SUBMITTED_JOBS_PER_RESOURCE``);
- the cluster itself: when it refuses a batch for its limit, the runner halves the batch until
  it fits (:mod:`cigri.runner`), and the jobs cigri then holds there are the limit it learns.
  A learned limit lasts :data:`LEARNED_SECONDS`, so a raised limit is found again.

The metascheduler offers fair share no more of a capped cluster than its room (a job counts at
least one core) and creates no job beyond it; only the refusal itself is sent past it.
"""

from __future__ import annotations

import json
import sqlite3

from cigri.db import clusters as stored_clusters
from cigri.db import jobs as stored_jobs

LEARNED_SECONDS = 3600.0


def caps(conn: sqlite3.Connection, now: float) -> dict[int, int]:
    """Each capped cluster's cap: the lower of ``max_jobs`` and a limit learned within the hour."""
    result = {}
    for cluster_id, options, learned, learned_at in stored_clusters.submit_limits(conn):
        bounds = [int(v) for v in [json.loads(options).get("max_jobs")] if v]
        if learned is not None and now - learned_at < LEARNED_SECONDS:
            bounds.append(learned)
        if bounds:
            result[cluster_id] = min(bounds)
    return result


def room(conn: sqlite3.Connection, now: float) -> dict[int, int]:
    """How many more jobs each capped cluster takes from cigri (uncapped clusters are absent)."""
    bounds = caps(conn, now)
    if not bounds:
        return {}
    held = stored_jobs.active_per_cluster(conn)
    return {cid: max(0, cap - held.get(cid, 0)) for cid, cap in bounds.items()}


def learn(conn: sqlite3.Connection, cluster_id: int, now: float) -> int:
    """The cluster refused one more job: what cigri holds there is its limit; return it."""
    limit = stored_jobs.active_per_cluster(conn).get(cluster_id, 0)
    stored_clusters.set_submit_limit(conn, cluster_id, limit, now)
    return limit
