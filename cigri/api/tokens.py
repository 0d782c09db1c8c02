"""API tokens: how remote users prove who they are to ``cigri server``.

A token is a random secret shown once, at creation; only its SHA-256 is stored (a 256-bit
secret needs no slow hash), with its owner, who made it, an expiry and when it was last used,
so tokens can be listed and revoked without ever being readable again. A user makes tokens for
themself; an admin for anyone.
"""

from __future__ import annotations

import hashlib
import secrets
import sqlite3
from typing import Any

from cigri import db as database
from cigri.api.access import may_see, storable
from cigri.config import parse_duration
from cigri.db import tokens as stored
from cigri.errors import InputError, LimitExceeded, NotFound, Unauthenticated
from cigri.grid import Grid
from cigri.users import require_admin

PREFIX = "cigri_"  # what a secret starts with: a leaked one is recognisable by scanners
LAST_USED_STEP = 60.0  # seconds: last_used_at is rewritten at most this often, not at every request


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def create_token(grid: Grid, *, user: str, owner: str | None = None, ttl: str | None = None,
                 note: str = "") -> dict[str, Any]:
    """A new token for ``owner`` (``user`` themself unless an admin names another), valid for
    ``ttl`` (``30d``, ``12h``...; default ``server.token_ttl``, at most ``server.max_token_ttl``).
    The answer is the only place the secret ever appears."""
    owner = owner or user
    if owner != user:
        require_admin(grid.config, user, f"a token for {owner}")
    server = grid.config.server
    try:
        seconds = parse_duration(ttl or server.token_ttl)
    except ValueError as error:
        raise InputError(f"ttl: {error}", field="ttl") from None
    if seconds > parse_duration(server.max_token_ttl):
        raise InputError(f"ttl: at most {server.max_token_ttl} (server.max_token_ttl)", field="ttl")
    if len(note) > 200 or not note.isprintable():
        raise InputError("note: at most 200 printable characters", field="note")
    secret = PREFIX + secrets.token_urlsafe(32)
    now = database.now()
    with database.write(grid.db) as conn:
        _room_for_one(conn, grid.config.limits.tokens_per_user, owner, now)
        token_id = stored.insert(conn, user=owner, secret_hash=_hash(secret), note=note, created_by=user,
                                 created_at=now, expires_at=now + seconds)
    return {"id": token_id, "user": owner, "token": secret, "note": note, "created_at": now,
            "expires_at": now + seconds}


ENDED_KEPT = 100  # revoked or expired tokens of a user still listed; older ones are forgotten


def _room_for_one(conn: sqlite3.Connection, most: int, owner: str, now: float) -> None:
    """LimitExceeded if ``owner`` holds ``most`` valid tokens; and their ended tokens beyond the
    newest :data:`ENDED_KEPT` are forgotten, so that a loop of creating and revoking tokens
    keeps a user's rows bounded."""
    valid = stored.count_valid(conn, owner, now)
    if valid >= most:
        raise LimitExceeded(f"{owner}: {valid} valid tokens, the most one user holds (limits.tokens_per_user); "
                            "revoke one first (cigri token list, cigri token revoke ID)")
    stored.forget_ended(conn, owner, now, ENDED_KEPT)


def list_tokens(grid: Grid, *, user: str, all_users: bool = False) -> list[dict[str, Any]]:
    """``user``'s tokens (an admin may ask for everyone's), newest last; never a secret."""
    if all_users:
        require_admin(grid.config, user, "listing everyone's tokens")
    now = database.now()
    rows = stored.listing(grid.db.conn, None if all_users else user)
    for row in rows:
        row["state"] = "revoked" if row["revoked_at"] else "expired" if row["expires_at"] <= now else "valid"
    return rows


def revoke_token(grid: Grid, token_id: int, *, user: str) -> None:
    """Revoke one of ``user``'s tokens (an admin: anyone's); it is refused from then on."""
    with database.write(grid.db) as conn:
        owner = stored.owner(conn, token_id) if storable(token_id) else None
        if owner is None or not may_see(grid, owner, user):
            raise NotFound(f"token {token_id}: no such token")
        stored.revoke(conn, token_id, database.now())


def token_user(grid: Grid, secret: str) -> str:
    """Whose ``secret`` is; Unauthenticated (401) if it is unknown, expired or revoked, all
    told apart only in the server's log, never to the caller."""
    now = database.now()
    row = stored.by_hash(grid.db.conn, _hash(secret)) if secret.startswith(PREFIX) else None
    if row is None or row[3] is not None or row[2] <= now:
        raise Unauthenticated("the token is unknown, expired or revoked (cigri token create makes a new one)")
    if row[4] is None or now - row[4] >= LAST_USED_STEP:
        with database.write(grid.db) as conn:
            stored.mark_used(conn, row[0], now)
    return row[1]
