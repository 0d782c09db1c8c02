"""A campaign's past: its tasks terminated over time, per cluster, and its progress.

Read from the terminated jobs' index (``jobs_terminated``: campaign, finished_at, cluster),
one range of it per call, never the jobs themselves: the same for a ten-task campaign as, a
few hundred milliseconds at most, for a million-task one. Its failed tasks are read through
the bag's index, each with its last job. ``throughput_minutes`` keeps only two
hours, so a campaign's whole life is read here.
"""

from __future__ import annotations

import math
from typing import Any

from cigri import db as database
from cigri.api.access import campaign_row
from cigri.db import campaigns as stored_campaigns
from cigri.db import jobs as stored_jobs
from cigri.db import tasks as stored_tasks
from cigri.errors import InputError
from cigri.grid import Grid

MIN_STEP = 60.0  # seconds: no bucket is shorter (a young campaign's plot is in minutes)



def campaign_history(grid: Grid, campaign_id: int, *, user: str, since: float | None = None,
                     until: float | None = None, points: int = 200) -> dict[str, Any]:
    """One of ``user``'s campaigns over time, between ``since`` and ``until`` (epoch seconds;
    default its whole life: from its first start, or its submission, to its end (or its last
    job's, which a cancel's kill may end later) or now), in at
    most ``points`` buckets of equal length (at least :data:`MIN_STEP`):

    - ``clusters``: per cluster, the tasks terminated in each bucket and that as tasks per hour
      (its throughput; the last bucket's over its part before ``until``), for buckets where some
      were;
    - ``progress``: for every bucket, the tasks terminated in it on all clusters (and per hour)
      and those that failed in it (at their last job's end), the campaign's terminated tasks by
      its end (``cumulative``), its tasks ended either way by then (``ended``), and that in percent of
      its tasks (``percent``): its progress as its summary counts it, which the last bucket
      reaches.
    """
    row = campaign_row(grid, campaign_id, user)
    now = database.now()
    if until is None:
        last_end = stored_campaigns.last_end(grid.db.conn, campaign_id)
        until = now if row["finished_at"] is None else max(row["finished_at"], last_end or 0) + 1
    if since is None:  # its start, and at least one bucket before the end
        since = min(row["started_at"] or row["submitted_at"], until - MIN_STEP)
    if not (math.isfinite(since) and math.isfinite(until) and since < until):
        raise InputError("from, to: expected epoch seconds with from < to", field="from")
    if points < 1:
        raise InputError("points: must be >= 1", field="points")
    step = max(MIN_STEP, (until - since) / points)
    names = {cluster_id: name for name, cluster_id in grid.cluster_ids().items()}
    buckets = math.ceil((until - since) / step)
    per_bucket = [0] * buckets
    clusters: dict[str, list[dict[str, Any]]] = {}

    def per_hour(bucket: int, terminated: int) -> float:  # over the bucket's part before ``until``
        return round(3600 * terminated / min(step, until - since - bucket * step), 3)

    for cluster_id, bucket, terminated in stored_jobs.terminated_per_bucket(grid.db.conn, campaign_id, since, until,
                                                                           step):
        clusters.setdefault(names[cluster_id], []).append(
            {"at": round(since + bucket * step, 3), "terminated": terminated, "per_hour": per_hour(bucket, terminated)})
        per_bucket[bucket] += terminated
    failed = stored_tasks.failed_per_bucket(grid.db.conn, campaign_id, since, until, step, row["finished_at"] or now)
    cumulative = stored_jobs.terminated_before(grid.db.conn, campaign_id, since)
    ended = cumulative + failed.get(-1, 0)
    progress = []
    for bucket, terminated in enumerate(per_bucket):
        cumulative += terminated
        ended += terminated + failed.get(bucket, 0)
        progress.append({"at": round(since + bucket * step, 3), "terminated": terminated,
                         "per_hour": per_hour(bucket, terminated), "failed": failed.get(bucket, 0),
                         "cumulative": cumulative, "ended": ended,
                         "percent": round(100 * ended / row["nb_tasks"], 2) if row["nb_tasks"] else None})
    return {"id": campaign_id, "from": since, "to": until, "step": step, "tasks": row["nb_tasks"],
            "clusters": {name: clusters[name] for name in sorted(clusters)}, "progress": progress}
