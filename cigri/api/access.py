"""The rows every use case reads or moves, and who may see and act on them: a campaign (with
its tasks, jobs, outputs and events) is its owner's or an admin's. Another user's campaign is
answered exactly as one that does not exist, so that ids leak nothing. An id SQLite cannot hold
names no row."""

from __future__ import annotations

import sqlite3
from typing import Any

from cigri.db import campaigns as stored_campaigns
from cigri.errors import InputError, NotFound
from cigri.grid import Grid
from cigri.users import is_admin


def storable(row_id: int) -> bool:
    """Whether SQLite can hold ``row_id`` (a 64-bit integer): a larger one names no row, and
    binding it would raise OverflowError instead of the answer "no such ..."."""
    return -2**63 <= row_id < 2**63


def check_page(limit: int | None, offset: int) -> None:
    """A page's bounds as SQLite can bind them: a page past 2**63 (``?page=10**18`` on the
    dashboard, ``?offset=`` of the API) would raise OverflowError, a 500, instead of this one
    answer."""
    if limit is not None and not 0 <= limit < 2**63:
        raise InputError("limit: must be >= 0 and < 2**63", field="limit")
    if not 0 <= offset < 2**63:
        raise InputError("offset: must be >= 0 and < 2**63", field="offset")


def owned_campaign(grid: Grid, conn: sqlite3.Connection, campaign_id: int, user: str) -> dict[str, Any]:
    """The campaign's id, owner and state, read in ``conn`` (the caller's transaction), if
    ``user`` may see and act on it; otherwise NotFound, as for a campaign that does not exist."""
    row = stored_campaigns.owner_and_state(conn, campaign_id) if storable(campaign_id) else None
    if row is None or not may_see(grid, row[1], user):
        raise NotFound(f"campaign {campaign_id}: no such campaign")
    return {"id": row[0], "user": row[1], "state": row[2]}


def may_see(grid: Grid, owner: str, user: str) -> bool:
    """Whether ``user`` may see and act on what ``owner`` owns: their own, or an admin."""
    return owner == user or is_admin(grid.config, user)

def campaign_row(grid: Grid, campaign_id: int, user: str) -> dict[str, Any]:
    """The campaign's whole row, if ``user`` may see it (:func:`owned_campaign`)."""
    row = stored_campaigns.row(grid.db.conn, campaign_id) if storable(campaign_id) else None
    if row is None or not may_see(grid, row["user"], user):
        raise NotFound(f"campaign {campaign_id}: no such campaign")
    return row


def reopen(conn: sqlite3.Connection, where: str, args: list[Any]) -> None:
    """Put the ended campaigns matching ``where`` (a fixed SQL condition) back in treatment:
    new tasks or resubmitted ones. A cancelled campaign stays cancelled."""
    stored_campaigns.reopen(conn, where, args)
