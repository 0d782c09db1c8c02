"""What a CiGri site's admins did by hand: purging ended campaigns, marking a job with a manual
event, cancelling every running campaign of a cluster (CiGri's ``delete_running_campaigns``, but
with their jobs killed). The per-user submission logs (CiGri's ``LOG_JOBS``) are
:mod:`cigri.joblog`'s."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from cigri import db as database
from cigri.api.access import owned_campaign
from cigri.api.campaigns import cancel
from cigri.api.jobs import job_info
from cigri.db import campaigns as stored_campaigns
from cigri.db import events as stored
from cigri.db import jobs as stored_jobs
from cigri.db import tasks as stored_tasks
from cigri.errors import InputError, NotFound, Refused
from cigri.events import record
from cigri.grid import Grid
from cigri.states import CampaignState
from cigri.users import require_admin

ENDED = (CampaignState.TERMINATED, CampaignState.FAILED, CampaignState.CANCELLED)


def purge(grid: Grid, campaign_ids: Sequence[int], *, user: str) -> list[int]:
    """Delete ended campaigns with their tasks, jobs and events (CiGri's ``griddel --purge``,
    which its API never let through); the owner or an admin. All or none: a campaign still
    running, or another's, refuses the whole call. Return the ids purged."""
    with database.write(grid.db) as conn:
        for campaign_id in campaign_ids:
            campaign = owned_campaign(grid, conn, campaign_id, user)
            if campaign["state"] not in ENDED:
                raise Refused(f"campaign {campaign_id} is {campaign['state']}: only an ended campaign is purged "
                              "(griddel it first)")
        for campaign_id in campaign_ids:
            _delete(conn, campaign_id)
    return list(campaign_ids)


def purge_ended(grid: Grid, *, days: float, user: str) -> list[int]:
    """Purge every campaign that ended more than ``days`` days ago; admins only."""
    if not 0 <= days < float("inf"):
        raise InputError("ended_days: must be >= 0 and finite", field="ended_days")
    require_admin(grid.config, user, "purging every ended campaign")
    before = database.now() - days * 86400
    ids = stored_campaigns.ended_before(grid.db.conn, ENDED, before)
    return purge(grid, ids, user=user)


def _delete(conn: sqlite3.Connection, campaign_id: int) -> None:
    stored_campaigns.delete_kept(conn, campaign_id)
    stored.delete_campaign_events(conn, campaign_id)
    stored_jobs.delete_campaign_jobs(conn, campaign_id)
    stored_tasks.delete_campaign(conn, campaign_id)
    stored_campaigns.delete(conn, campaign_id)


def mark_job_event(grid: Grid, job_id: int, message: str, *, user: str) -> int:
    """Open a ``MANUAL_EVENT`` on a job (CiGri's ``gridevents --mark-job-event``); admins only.
    Return the event's id; it stays open until fixed."""
    job_info(grid, job_id, user=user)  # another's job is answered as one that does not exist, as everywhere
    require_admin(grid.config, user, "marking a job with an event")
    with database.write(grid.db) as conn:
        row = stored_jobs.placement(conn, job_id)
        if row is None:
            raise NotFound(f"job {job_id}: no such job")
        return record(conn, "MANUAL_EVENT", message or f"marked by {user}", campaign_id=row[0], cluster_id=row[1],
                      job_id=job_id, task_id=row[2])


def cancel_cluster_campaigns(grid: Grid, cluster: str, *, user: str) -> list[int]:
    """Cancel every running campaign (in treatment or paused) that may use ``cluster``, their
    jobs killed everywhere as with griddel; admins only. Return their ids."""
    require_admin(grid.config, user, "cancelling a cluster's campaigns")
    cluster_id = grid.cluster_ids().get(cluster)
    if cluster_id is None:
        raise NotFound(f"cluster {cluster}: no such cluster")
    ids = stored_campaigns.active_on(grid.db.conn, cluster_id)
    for campaign_id in ids:
        cancel(grid, campaign_id, user=user)
    return ids
