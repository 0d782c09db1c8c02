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
DEFAULT_CHUNK = 100  # CiGri's array size; api_chunk_size per cluster


def run(ctx: CycleContext) -> int:
    """Submit every ``submitting`` job of the usable clusters; return how many were sent."""
    _form_batches(ctx)
    rows = list(ctx.grid.db.query(
        "SELECT j.id, j.campaign_id, j.cluster_id, j.kind, j.batch, t.name AS task, t.param, c.user "
        "FROM jobs j JOIN campaigns c ON c.id = j.campaign_id LEFT JOIN tasks t ON t.id = j.task_id "
        "WHERE j.state = ? AND j.kill_reason IS NULL ORDER BY j.cluster_id, j.batch, j.id",
        [JobState.SUBMITTING]))
    settings = campaign_properties(ctx.grid.db, sorted({r["campaign_id"] for r in rows}))
    sent = 0
    for (cluster_id, batch), group in groupby(rows, key=lambda r: (r["cluster_id"], r["batch"])):
        if cluster_id not in ctx.capacities:
            continue
        jobs = list(group)
        campaign_id = jobs[0]["campaign_id"]
        specs = [job_spec(job, settings[campaign_id][cluster_id]) for job in jobs]
        try:
            remote_ids = ctx.grid.backend(cluster_id).submit(specs)
        except Exception as error:  # the cluster refused: the jobs stay `submitting`, re-sent next cycle
            log.warning("campaign %s: submission to cluster %s failed: %s", campaign_id, cluster_id, error)
            with database.write(ctx.grid.db) as conn:
                open_event(conn, "cluster", getattr(error, "code", "SUBMISSION_ERROR"),
                           f"submission failed: {error}", campaign_id=campaign_id, cluster_id=cluster_id)
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


def _form_batches(ctx: CycleContext) -> None:
    """Give new ``submitting`` jobs their batch before any remote call (one per campaign,
    cluster and kind, at most ``api_chunk_size`` jobs), so a re-sent batch is the same batch."""
    rows = ctx.grid.db.execute(
        "SELECT id, cluster_id, campaign_id, kind FROM jobs WHERE state = ? AND batch IS NULL "
        "ORDER BY cluster_id, campaign_id, kind, id", [JobState.SUBMITTING]).fetchall()
    if not rows:
        return
    updates = []
    for (cluster_id, _, _), group in groupby(rows, key=lambda r: (r[1], r[2], r[3])):
        ids = [r[0] for r in group]
        size = int(ctx.cluster_options(cluster_id).get("api_chunk_size", DEFAULT_CHUNK))
        for start in range(0, len(ids), size):
            chunk = ids[start:start + size]
            updates += [(str(chunk[0]), job_id) for job_id in chunk]
    with database.write(ctx.grid.db) as conn:
        conn.executemany("UPDATE jobs SET batch = ? WHERE id = ? AND batch IS NULL", updates)


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
        key=str(job["id"]), batch=job["batch"], name=f"cigri.{job['campaign_id']}.{job['id']}", argv=argv, directory=directory,
        walltime_seconds=walltime, resources=settings["resources"], environment=environment,
        properties=settings.get("properties", ""), project=settings.get("project", ""),
        best_effort=settings.get("type") == "best-effort" and not settings.get("test_mode"),
    )
