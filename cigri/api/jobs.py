"""Jobs: one job's record, its output's tail, and killing it."""

from __future__ import annotations

from typing import Any

from cigri import db as database
from cigri.api.access import campaign_row, owned_campaign, storable
from cigri.errors import NotFound, Refused
from cigri.events import record
from cigri.grid import Grid
from cigri.states import JOB_ACTIVE, KillReason
from cigri.users import is_admin


def cancel_job(grid: Grid, job_id: int, *, user: str) -> None:
    """Ask nikita to kill one job; its task is then cancelled, not resubmitted."""
    with database.write(grid.db) as conn:
        row = conn.execute("SELECT campaign_id, state FROM jobs WHERE id = ?", [job_id]).fetchone() \
            if storable(job_id) else None
        if row is None:
            raise NotFound(f"job {job_id}: no such job")
        owned_campaign(grid, conn, row[0], user)
        if row[1] not in JOB_ACTIVE:
            raise Refused(f"job {job_id} is already {row[1]}")
        conn.execute("UPDATE jobs SET kill_reason = ? WHERE id = ?", [KillReason.USER, job_id])
        record(conn, "USER_CANCEL", f"job cancelled by {user}", campaign_id=row[0], job_id=job_id, kind="job")


def job_info(grid: Grid, job_id: int) -> dict[str, Any]:
    rows = list(grid.db.query(
        "SELECT j.*, c.name AS cluster, t.name AS task, t.param FROM jobs j JOIN clusters c ON c.id = j.cluster_id "
        "LEFT JOIN tasks t ON t.id = j.task_id WHERE j.id = ?", [job_id])) if storable(job_id) else []
    if not rows:
        raise NotFound(f"job {job_id}: no such job")
    return rows[0]


def job_output(grid: Grid, job_id: int, stream: str, *, user: str, lines: int = 1000) -> str:
    """The tail of a job's stdout or stderr; only its owner (or an admin) may read it, and it is
    read on the cluster as the owner."""
    job = job_info(grid, job_id)
    campaign = campaign_row(grid, job["campaign_id"])
    if campaign["user"] != user and not is_admin(grid.config, user):
        raise Refused(f"job {job_id}: belongs to {campaign['user']}, not to {user}")
    if not job["remote_id"]:
        raise Refused(f"job {job_id} has not reached its cluster yet")
    return grid.backend(job["cluster_id"]).output_tail(job["remote_id"], stream, lines, campaign["user"])
