"""Events: what went wrong, who may read it, and fixing it (closing, resubmitting)."""

from __future__ import annotations

import sqlite3
from typing import Any

from cigri import db as database
from cigri.api.access import check_page, may_see, owned_campaign, reopen, storable
from cigri.db import campaigns as stored_campaigns
from cigri.db import events as stored
from cigri.db import tasks as stored_tasks
from cigri.errors import InputError, NotFound, Refused
from cigri.grid import Grid
from cigri.users import is_admin, require_admin


def _event_rows(grid: Grid, *, limit: int | None = None, offset: int = 0, **which: Any) -> list[dict[str, Any]]:
    """The events :func:`cigri.db.events.listing` finds for ``which``, each with its ``summary``
    and its examples' task names."""
    check_page(limit, offset)
    rows = stored.listing(grid.db.conn, limit=limit, offset=offset, **which)
    for row in rows:
        row["summary"] = row["signature"] if row["stderr_tail"] is not None and row["signature"] else row["message"]
    _name_tasks(grid, [example for row in rows for example in row["examples"]])
    return rows


def _name_tasks(grid: Grid, examples: list[dict[str, Any]]) -> None:
    """Give each example its task's name (``task``), read in one query."""
    ids = sorted({example["task_id"] for example in examples if example.get("task_id") is not None})
    names: dict[Any, str] = stored.task_names(grid.db.conn, ids)
    for example in examples:
        example["task"] = names.get(example.get("task_id"))


def list_events(grid: Grid, *, user: str, campaign_id: int | None = None, global_only: bool = False,
                include_closed: bool = False, limit: int | None = None, offset: int = 0) -> list[dict[str, Any]]:
    """Events ``user`` may read, oldest first: a campaign's (its owner's or an admin's), the
    clusters' own (``global_only``; anyone), or by default every event of the user's campaigns
    plus the clusters' (an admin: every event); ``limit`` of them after ``offset``."""
    which: dict[str, Any] = {"include_closed": include_closed}
    if campaign_id is not None:
        owned_campaign(grid, grid.db.conn, campaign_id, user)
        which["campaign_id"] = campaign_id
    elif global_only:
        which["global_only"] = True
    elif not is_admin(grid.config, user):
        which["readable_by"] = user
    return _event_rows(grid, limit=limit, offset=offset, **which)


def event(grid: Grid, event_id: int, *, user: str) -> dict[str, Any]:
    """One event with every detail; a campaign's event only for its owner or an admin."""
    rows = _event_rows(grid, event_id=event_id) if storable(event_id) else []
    if not rows:
        raise NotFound(f"event {event_id}: no such event")
    _may_fix_or_read(grid, rows[0], user, fixing=False)
    return rows[0]


def _may_fix_or_read(grid: Grid, row: dict[str, Any], user: str, *, fixing: bool) -> None:
    """A campaign's event is its owner's (anyone else is told it does not exist); the clusters'
    own events are anyone's to read and an admin's to fix."""
    if row["campaign_id"] is not None:
        owner = stored_campaigns.owner(grid.db.conn, row["campaign_id"])
        if not may_see(grid, owner, user):
            raise NotFound(f"event {row['id']}: no such event")
    elif fixing:
        require_admin(grid.config, user, f"fixing cluster event {row['id']}")


def fix_events(grid: Grid, *, user: str, event_id: int | None = None, campaign_id: int | None = None,
               global_only: bool = False, resubmit: bool = False) -> dict[str, int]:
    """Close open events (lifting the blacklists they hold) and, with ``resubmit``, put the
    failed tasks they cover back at the head of the bag; one transaction. Nothing to close is
    refused (exit 1)."""
    if sum([event_id is not None, campaign_id is not None, global_only]) != 1:
        raise InputError("--fix needs exactly one of -e EVENT, -c CAMPAIGN or -g")
    if event_id is not None:
        row = event(grid, event_id, user=user)
        _may_fix_or_read(grid, row, user, fixing=True)
    elif campaign_id is None:
        require_admin(grid.config, user, "fixing the clusters' events")
    with database.write(grid.db) as conn:
        if campaign_id is not None:
            owned_campaign(grid, conn, campaign_id, user)
        ids = stored.close(conn, *stored.fixable(event_id=event_id, campaign_id=campaign_id), database.now())
        if not ids:  # nothing was closed: the transaction changes nothing
            raise Refused("nothing to fix: " + (f"event {event_id} is not open" if event_id is not None else
                                                "no open event"))
        resubmitted = _resubmit_failed(conn, ids) if resubmit else 0
        resubmitted += _retry_prologues(conn, ids, resubmit)
    return {"closed": len(ids), "resubmitted": resubmitted}


def _retry_prologues(conn: sqlite3.Connection, event_ids: list[int], resubmit: bool) -> int:
    """A fixed PROLOGUE_FAILED event runs its prologue again on its cluster (the failure may
    have been the cluster's: a file system down, a module server away); with ``resubmit``, the
    tasks the failure ended without running them go back to the bag first. Return those."""
    from cigri.metascheduler.schedulers import workqueue  # the metascheduler's import cost, only when fixing

    resubmitted = 0
    for campaign_id, cluster_id in stored.prologue_failures(conn, event_ids):
        if resubmit and (requeued := stored_tasks.requeue_never_run(conn, campaign_id)):
            resubmitted += requeued
            reopen(conn, "id = ?", [campaign_id])
        if stored_campaigns.is_active(conn, campaign_id):
            workqueue.add_script_job(conn, campaign_id, cluster_id, "prologue")
    return resubmitted


def _resubmit_failed(conn: sqlite3.Connection, event_ids: list[int]) -> int:
    """The failed tasks of these events go back to the head of the bag with fresh counters; their
    ended campaigns (not cancelled ones) are in treatment again."""
    tasks, covering = stored.covered_tasks(event_ids)
    reopen(conn, *stored_tasks.failed_among(tasks, covering))
    return stored_tasks.requeue_failed(conn, tasks, covering)
