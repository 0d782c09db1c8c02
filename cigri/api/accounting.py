"""Accounting: the core-hours cigri's jobs used, per user, cluster and day."""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import datetime, timezone
from typing import Any

from cigri import db as database
from cigri.db import jobs as stored_jobs
from cigri.errors import InputError
from cigri.grid import Grid
from cigri.users import is_admin

DAY = 86400.0


def core_hours(grid: Grid, hours: float, *, user: str) -> list[dict[str, Any]]:
    """The core-hours of cigri's jobs over the last ``hours``, per user, cluster and day (UTC),
    from each job's start and end times (a running job's until now) and the cores its campaign
    asks for on that cluster (what the metascheduler charges a task). Days in order, then users
    and clusters; a day counts the part of each job that ran in it. An admin sees every user's,
    anyone else their own."""
    from cigri.metascheduler.metascheduler import task_cost

    if not 0 < hours < math.inf:  # also rejects nan
        raise InputError(f"hours: must be > 0 and finite, got {hours!r}")
    until = database.now()
    since = until - hours * 3600
    everyone = is_admin(grid.config, user)
    rows = stored_jobs.ran_between(grid.db.conn, since, until, everyone=everyone, user=user)
    settings = grid.campaign_properties(sorted({r[0] for r in rows}))
    used: dict[tuple[float, str, str], list[float]] = defaultdict(lambda: [0.0, 0])
    for campaign_id, cluster_id, cluster, owner, started, finished in rows:
        cores = task_cost({cluster_id: settings[campaign_id].get(cluster_id, {})})[0]
        start, end = max(started, since), min(finished, until)
        while start < end:
            day = start - start % DAY
            slice_end = min(end, day + DAY)
            entry = used[(day, owner, cluster)]
            entry[0] += cores * (slice_end - start) / 3600
            entry[1] += 1
            start = slice_end
    return [{"day": datetime.fromtimestamp(day, timezone.utc).strftime("%Y-%m-%d"), "user": owner, "cluster": cluster,
             "core_hours": round(total, 3), "jobs": int(jobs)}
            for (day, owner, cluster), (total, jobs) in sorted(used.items())]
