"""Temporal grouping: how many short tasks to run one after another inside one remote job.

A cluster's batch system pays a fixed cost per job (scheduling, prologue, accounting): for
tasks of a second, that cost is the throughput. Grouping ``n`` tasks into one job pays it once.
Each task still gets its own jobs row, exit status, output and walltime (the backends' side is
:mod:`cigri.backends._grouping`); only the remote job is shared.

When: on clusters with ``group_seconds`` (the target length of one grouped job) unless the
campaign says ``"temporal_grouping": false``; with ``"temporal_grouping": true`` on any cluster,
the target being the JDL's ``temporal_grouping_batch_duration``.

How many: the target over the average duration of the campaign's terminated tasks (on that
cluster, else anywhere), as CiGri does, at most :data:`MAX_GROUP`, and never so many that the
free slots would be left idle (the tasks are spread over them). Without an average yet, a
campaign that asked for grouping gets :data:`MAX_GROUP` (CiGri's choice: the user said the tasks
are short); one grouped only by its cluster waits for its first durations.
"""

from __future__ import annotations

from typing import Any

from sqlite_utils import Database

from cigri.db import campaigns as stored_campaigns

MAX_GROUP = 50  # CiGri's RUNNER_MAX_TEMPORAL_GROUPED_JOBS


def target_seconds(settings: dict[str, Any], cluster_options: dict[str, Any]) -> int:
    """The length one grouped job should have for this campaign on this cluster; 0: no grouping."""
    asked = settings.get("temporal_grouping")
    if asked is False:
        return 0
    if asked is True:
        return int(settings.get("temporal_grouping_batch_duration", 900))
    return int(cluster_options.get("group_seconds", 0))


def average_duration(db: Database, campaign_id: int, cluster_id: int) -> float | None:
    """Mean duration of the campaign's terminated tasks on the cluster, else on every cluster."""
    for on in (cluster_id, None):
        total, count = stored_campaigns.duration_and_terminated(db.conn, campaign_id, on)
        if count and total is not None:
            return float(total) / count
    return None


def group_size(target: int, average: float | None, asked: bool, jobs: int, free_slots: int) -> int:
    """How many of ``jobs`` new tasks each remote job should run (1: no grouping)."""
    if target <= 0 or jobs <= 1:
        return 1
    if average is None:
        if not asked:
            return 1
        by_duration = MAX_GROUP
    else:
        by_duration = int(target / max(average, 0.01))
    spread = -(-jobs // max(1, free_slots))
    return max(1, min(MAX_GROUP, by_duration, spread))


def group_walltime(size: int, walltime: int, target: int) -> int:
    """Walltime of a grouped job: room for every task's full walltime, but no more than one
    walltime beyond the target (clusters cap walltimes); a task the group's end interrupts is
    requeued without costing an attempt."""
    return min(size * walltime, walltime + target)
