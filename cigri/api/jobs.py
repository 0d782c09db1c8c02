"""Jobs: one job's record, its output's tail, a campaign's jobs, and killing one. A job is its
campaign owner's (or an admin's): anyone else is told it does not exist."""

from __future__ import annotations

from typing import Any

from cigri import db as database
from cigri.api.access import campaign_row, check_page, may_see, storable
from cigri.db import jobs as stored_jobs
from cigri.errors import InputError, NotFound, Refused
from cigri.events import record
from cigri.grid import Grid
from cigri.states import JOB_ACTIVE

STREAMS = ("stdout", "stderr")


def job_info(grid: Grid, job_id: int, *, user: str) -> dict[str, Any]:
    """One of ``user``'s jobs, with its cluster's and task's names and the task's parameters."""
    job = stored_jobs.by_id(grid.db.conn, job_id) if storable(job_id) else None
    if job is None or not may_see(grid, job["user"], user):
        raise NotFound(f"job {job_id}: no such job")
    return job


def campaign_jobs(grid: Grid, campaign_id: int, *, user: str, active_only: bool = False,
                  limit: int | None = None, offset: int = 0) -> list[dict[str, Any]]:
    """The jobs of one of ``user``'s campaigns in id order (``active_only``: those not ended),
    ``limit`` of them after ``offset``."""
    campaign_row(grid, campaign_id, user)
    check_page(limit, offset)
    return stored_jobs.of_campaign(grid.db.conn, campaign_id, active_only=active_only, limit=limit, offset=offset)


def job_output(grid: Grid, job_id: int, stream: str, *, user: str, lines: int = 1000) -> str:
    """The tail of one of ``user``'s jobs' stdout or stderr, read on its cluster as the job's
    owner."""
    if stream not in STREAMS:
        raise InputError(f"stream: expected stdout or stderr, got {stream!r}", field="stream")
    job = job_info(grid, job_id, user=user)
    if not job["remote_id"]:
        raise Refused(f"job {job_id} has not reached its cluster yet")
    return grid.backend(job["cluster_id"]).output_tail(job["remote_id"], stream, lines, job["user"])


def cancel_job(grid: Grid, job_id: int, *, user: str) -> None:
    """Ask nikita to kill one of ``user``'s jobs; its task is then cancelled, not resubmitted."""
    with database.write(grid.db) as conn:
        row = stored_jobs.owner_and_state(conn, job_id) if storable(job_id) else None
        if row is None or not may_see(grid, row[2], user):
            raise NotFound(f"job {job_id}: no such job")
        if row[1] not in JOB_ACTIVE:
            raise Refused(f"job {job_id} is already {row[1]}")
        stored_jobs.mark_cancelled(conn, job_id)
        record(conn, "USER_CANCEL", f"job cancelled by {user}", campaign_id=row[0], job_id=job_id, kind="job")


def job_on_cluster(grid: Grid, job_id: int, *, user: str) -> dict[str, Any]:
    """One of ``user``'s jobs as its cluster sees it now (CiGri's ``gridstat -j J -C``): its
    state in cigri's words, exit code, node and times, asked of the cluster in one poll."""
    job = job_info(grid, job_id, user=user)
    if not job["remote_id"]:
        raise Refused(f"job {job_id} has not reached its cluster yet")
    remote = grid.backend(job["cluster_id"]).poll([job["remote_id"]]).get(job["remote_id"])
    if remote is None:
        raise Refused(f"job {job_id}: cluster {job['cluster']} did not answer for remote job {job['remote_id']}")
    return {"id": job_id, "cluster": job["cluster"], "remote_id": remote.remote_id, "state": str(remote.state),
            "exit_code": remote.exit_code, "node": remote.node, "started_at": remote.started_at,
            "finished_at": remote.finished_at}
