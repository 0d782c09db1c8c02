"""Whether anything runs the grid's cycles: without them no campaign moves, and a command says
so rather than leave a campaign at 0 % in silence. Through a server, its ``/healthz`` answers
the same question about the server's own cycles."""

from __future__ import annotations

from typing import Any

from cigri import db as database
from cigri.db import leader
from cigri.grid import Grid
from cigri.locks import cycle_lock_path, daemon_lock_path, held

QUIET_SECONDS = 600.0  # a cron running ``cigri cycle`` every few minutes still counts as running cycles


def cycles(grid: Grid, *, now: float | None = None) -> dict[str, Any]:
    """``ok`` while something runs cycles: a daemon (or server) holds its lock, a cycle runs
    now, or the last one ended less than three cycle periods or ten minutes ago (cron); with
    ``daemon``, ``running`` and ``last_ended_at`` (epoch seconds, None if no cycle ever ran).
    Reads two lock files (and the lease, on PostgreSQL): no cluster is asked, nothing is written."""
    moment = database.now() if now is None else now
    daemon, running = held(daemon_lock_path(grid.config.home)), held(cycle_lock_path(grid.config.home))
    try:
        last_ended_at: float | None = cycle_lock_path(grid.config.home).stat().st_mtime
    except FileNotFoundError:
        last_ended_at = None
    quiet = max(3 * grid.config.settings.cycle_period, QUIET_SECONDS)
    recent = last_ended_at is not None and moment - last_ended_at < quiet
    lead = cycle_leader(grid)
    return {"ok": daemon or running or recent or bool(lead and lead["expires_in"] >= 0), "daemon": daemon,
            "running": running, "last_ended_at": last_ended_at, "leader": lead}


def cycle_leader(grid: Grid) -> dict[str, Any] | None:
    """With several servers over one PostgreSQL store, the one that runs the cycles: its
    ``holder`` (host:pid), ``epoch``, ``since`` and the seconds its lease still holds
    (``expires_in``, negative once lapsed), by the store's clock; None on SQLite, or before any."""
    if not grid.config.database.url:
        return None
    lease = leader.current(grid.db.conn)
    if lease is None:
        return None
    return {"holder": lease["holder"], "epoch": lease["epoch"], "since": lease["since"],
            "expires_in": round(lease["expires_at"] - lease["now"], 1)}
