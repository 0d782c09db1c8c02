"""The runner: send the jobs the schedulers created, one submit call per campaign and cluster.

Jobs are created in ``submitting`` before any remote call, keyed by cigri's job id. If the
process dies during the call, the next runner sends the same keys again and the backend's
idempotent submit adopts what already started instead of starting it twice.
"""

from __future__ import annotations

import logging
from itertools import groupby
from typing import Any

from cigri import db as database
from cigri.backends import JobSpec
from cigri.cycle_context import CycleContext
from cigri.events import open_event
from cigri.jdl import split_param
from cigri.jdl.parser import home_of
from cigri.jdl.walltime import format_walltime
from cigri.properties import campaign_properties
from cigri.states import JobState

log = logging.getLogger("cigri.runner")


def run(ctx: CycleContext) -> int:
    """Submit every ``submitting`` job of the usable clusters; return how many were sent."""
    rows = list(ctx.grid.db.query(
        "SELECT j.id, j.campaign_id, j.cluster_id, j.kind, t.name AS task, t.param, c.user "
        "FROM jobs j JOIN campaigns c ON c.id = j.campaign_id LEFT JOIN tasks t ON t.id = j.task_id "
        "WHERE j.state = ? AND j.kill_requested = 0 ORDER BY j.cluster_id, j.campaign_id, j.id",
        [JobState.SUBMITTING]))
    settings = campaign_properties(ctx.grid.db, sorted({r["campaign_id"] for r in rows}))
    sent = 0
    for (cluster_id, campaign_id), group in groupby(rows, key=lambda r: (r["cluster_id"], r["campaign_id"])):
        if cluster_id not in ctx.capacities:
            continue
        jobs = list(group)
        specs = [job_spec(job, settings[campaign_id][cluster_id]) for job in jobs]
        try:
            remote_ids = ctx.grid.backend(cluster_id).submit(specs)
        except Exception as error:  # the cluster refused: the jobs stay `submitting`, retried next cycle
            log.warning("campaign %s: submission to cluster %s failed: %s", campaign_id, cluster_id, error)
            with database.write(ctx.grid.db) as conn:
                open_event(conn, "cluster", "SUBMISSION_ERROR", f"submission failed: {error}",
                           campaign_id=campaign_id, cluster_id=cluster_id)
            ctx.capacities.pop(cluster_id, None)
            continue
        now = database.now()
        with database.write(ctx.grid.db) as conn:
            conn.executemany(
                "UPDATE jobs SET state = ?, remote_id = ?, submitted_at = ? WHERE id = ? AND state = ?",
                [(JobState.WAITING, remote_ids[spec.key], now, int(spec.key), JobState.SUBMITTING)
                 for spec in specs])
        sent += len(specs)
    return sent


def job_spec(job: dict[str, Any], settings: dict[str, Any]) -> JobSpec:
    """Translate one job row and its campaign's settings on that cluster into a JobSpec."""
    kind = job["kind"]
    walltime = settings["walltime"] if kind == "task" else settings.get(f"{kind}_walltime", settings["walltime"])
    directory = settings["exec_directory"]
    if kind == "task":
        argv = (settings["exec_file"], *split_param(job["param"]))
        name = job["task"]
    else:  # prologue/epilogue: the user's own shell lines, run from their home (CiGri issue #35)
        argv = ("/bin/sh", "-c", settings[kind])
        name = kind
        directory = home_of(job["user"])
    environment = {
        "CIGRI_JOB_ID": str(job["id"]),
        "CIGRI_CAMPAIGN_ID": str(job["campaign_id"]),
        "CIGRI_CAMPAIGNID": str(job["campaign_id"]),
        "CIGRI_JOB_NAME": name,
        "CIGRI_USER": job["user"],
        "CIGRI_WORKDIR": directory,
        "CIGRI_RESOURCES": settings["resources"],
        "CIGRI_WALLTIME": format_walltime(walltime),
        "CIGRI_WALLTIME_SECONDS": str(walltime),
    }
    return JobSpec(
        key=str(job["id"]), name=f"cigri.{job['campaign_id']}.{job['id']}", argv=argv, directory=directory,
        walltime_seconds=walltime, resources=settings["resources"], environment=environment,
        properties=settings.get("properties", ""), project=settings.get("project", ""),
        best_effort=settings.get("type") == "best-effort" and not settings.get("test_mode"),
    )
