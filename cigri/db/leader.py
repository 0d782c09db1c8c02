"""The SQL of the lease: which process runs the cycles, until when, and its fencing epoch.

Times are the store's clock, never a host's: servers on several hosts compare one clock.
"""

from __future__ import annotations

from typing import Any

from cigri.db.dialect import clock
from cigri.db.rows import Connection


def claim(conn: Connection, holder: str, lease: float) -> int | None:
    """Take the lease if nobody holds it or it has expired (the epoch one more), or keep it if
    ``holder`` has it; its epoch, or None while another holds it."""
    now = clock(conn)
    row = conn.execute(
        f"INSERT INTO leader(id, holder, epoch, since, expires_at) VALUES (1, ?, 1, {now}, {now} + ?) "
        "ON CONFLICT (id) DO UPDATE SET holder = excluded.holder, "
        "epoch = CASE WHEN leader.holder = excluded.holder AND leader.expires_at >= excluded.since "
        "THEN leader.epoch ELSE leader.epoch + 1 END, "
        "since = CASE WHEN leader.holder = excluded.holder AND leader.expires_at >= excluded.since "
        "THEN leader.since ELSE excluded.since END, expires_at = excluded.expires_at "
        "WHERE leader.holder = excluded.holder OR leader.expires_at < excluded.since RETURNING epoch",
        [holder, lease]).fetchone()
    return None if row is None else int(row[0])


def renew(conn: Connection, epoch: int, lease: float) -> bool:
    """Extend the lease of ``epoch``; False if it has expired or another holds it (fenced)."""
    now = clock(conn)
    return conn.execute(f"UPDATE leader SET expires_at = {now} + ? WHERE id = 1 AND epoch = ? AND expires_at >= {now}",
                        [lease, epoch]).rowcount == 1


def release(conn: Connection, epoch: int) -> None:
    """Give the lease up at once (a server stopping): the next one need not wait for it to expire."""
    conn.execute(f"UPDATE leader SET expires_at = {clock(conn)} - 1 WHERE id = 1 AND epoch = ?", [epoch])


def current(conn: Connection) -> dict[str, Any] | None:
    """The lease as it stands: holder, epoch, since, expires_at, and the store's time now."""
    row = conn.execute(f"SELECT holder, epoch, since, expires_at, {clock(conn)} FROM leader WHERE id = 1").fetchone()
    if row is None:
        return None
    return dict(zip(("holder", "epoch", "since", "expires_at", "now"), row))
