"""Gangs (Armada's gang scheduling): a campaign whose tasks start ``gang`` at a time on one
cluster, all or none.

The JDL's ``gang: N`` is kept in the campaign's JDL. The allocation hands such a campaign whole
gangs (:mod:`.fairshare`); the runner gives each gang's jobs one ``run_group`` and sends them as
one remote job that starts them together (``JobSpec.gang``: one Slurm job of N tasks, one OAR
job, N local slots at once). Killing one member ends that remote job, so a kill asked for one
member is a kill of the whole gang (:func:`kill_whole`). A gang that fits on no cluster of its
campaign is refused at submission, against the cores each cluster was last seen with
(:func:`cluster_cores`).
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterable

from cigri.db import campaigns as stored_campaigns
from cigri.db import clusters as stored_clusters
from cigri.db import jobs as stored_jobs
from cigri.states import KillReason


def sizes(conn: sqlite3.Connection, campaign_ids: Iterable[int]) -> dict[int, int]:
    """Each campaign's gang size (1: no gang)."""
    ids = list(campaign_ids)
    found = stored_campaigns.gangs(conn, ids)
    return {i: int(found.get(i) or 1) for i in ids}


def cluster_cores(conn: sqlite3.Connection) -> dict[str, int]:
    """The cores of each cluster as cigri last saw them: the updator's latest count, else a local
    pool's ``slots`` (0: one per CPU) or a simulated cluster's ``cores``; a cluster never seen
    is left out (a gang is then not checked against it)."""
    result = {}
    for name, backend, options, seen in stored_clusters.latest_cores(conn):
        values = json.loads(options)
        if seen is not None:
            result[name] = int(seen)
        elif backend == "local":
            result[name] = int(values.get("slots") or 0) or os.cpu_count() or 1
        elif backend == "sim":
            result[name] = int(values["cores"])
    return result


def kill_whole(conn: sqlite3.Connection) -> int:
    """Mark the still active members of every gang one of whose members is marked for a kill:
    nikita's cancel of one member ends the remote job running the gang. A user's kill of one
    task sends the others back to the head of the bag (a preemption); any other reason is
    theirs too. Return how many were marked."""
    marked = stored_jobs.gangs_marked(conn)
    gang = sizes(conn, {campaign_id for campaign_id, _, _ in marked})
    return sum(stored_jobs.mark_group(conn, campaign_id, group,
                                      KillReason.PREEMPT if reason == KillReason.USER else reason)
               for campaign_id, group, reason in marked if gang[campaign_id] > 1)
