"""The SQL of API tokens (:mod:`cigri.api.tokens` decides who may do what with them).

Only a hash of each secret is stored. Writes take the connection of the caller's
:func:`~cigri.db.store.write` transaction, so a limit checked and the row it admits are one
state change; reads take the grid's connection.
"""

from __future__ import annotations

from typing import Any

from cigri.db.rows import Connection, dicts

COLUMNS = 'id, "user", note, created_by, created_at, expires_at, last_used_at, revoked_at'  # never the hash


def count_valid(conn: Connection, user: str, now: float) -> int:
    """How many of ``user``'s tokens are valid at ``now``: what ``limits.tokens_per_user`` bounds."""
    return conn.execute('SELECT count(*) FROM tokens WHERE "user" = ? AND revoked_at IS NULL AND expires_at > ?',
                        [user, now]).fetchone()[0]


def forget_ended(conn: Connection, user: str, now: float, keep: int) -> None:
    """Delete ``user``'s revoked or expired tokens but the newest ``keep``, so that a loop of
    creating and revoking tokens keeps a user's rows bounded."""
    conn.execute('DELETE FROM tokens WHERE "user" = ? AND (revoked_at IS NOT NULL OR expires_at <= ?) AND id NOT IN '
                 '(SELECT id FROM tokens WHERE "user" = ? AND (revoked_at IS NOT NULL OR expires_at <= ?) '
                 "ORDER BY id DESC LIMIT ?)", [user, now, user, now, keep])


def insert(conn: Connection, *, user: str, secret_hash: str, note: str, created_by: str, created_at: float,
           expires_at: float) -> int:
    """Store a new token (its secret's hash only); return its id."""
    token_id = conn.execute(
        'INSERT INTO tokens("user", hash, note, created_by, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?) '
        "RETURNING id", [user, secret_hash, note, created_by, created_at, expires_at]).fetchone()[0]
    assert isinstance(token_id, int)
    return token_id


def listing(conn: Connection, user: str | None) -> list[dict[str, Any]]:
    """``user``'s tokens (everyone's for None), oldest first, as rows of :data:`COLUMNS`."""
    whose = "" if user is None else 'WHERE "user" = ?'
    return dicts(conn.execute(f"SELECT {COLUMNS} FROM tokens {whose} ORDER BY id",
                              [] if user is None else [user]))


def owner(conn: Connection, token_id: int) -> str | None:
    """Whose token ``token_id`` is; None if there is no such token."""
    row = conn.execute('SELECT "user" FROM tokens WHERE id = ?', [token_id]).fetchone()
    return None if row is None else row[0]


def revoke(conn: Connection, token_id: int, now: float) -> None:
    """Revoke the token from ``now``; a token revoked already keeps its first revocation time."""
    conn.execute("UPDATE tokens SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?", [now, token_id])


def by_hash(conn: Connection, secret_hash: str) -> tuple[int, str, float, float | None, float | None] | None:
    """``(id, user, expires_at, revoked_at, last_used_at)`` of the token whose secret hashes to
    ``secret_hash``; None if none does."""
    row = conn.execute('SELECT id, "user", expires_at, revoked_at, last_used_at FROM tokens WHERE hash = ?',
                       [secret_hash]).fetchone()
    return None if row is None else (row[0], row[1], row[2], row[3], row[4])


def mark_used(conn: Connection, token_id: int, now: float) -> None:
    """Record that the token was used at ``now`` (``cigri token list`` shows it)."""
    conn.execute("UPDATE tokens SET last_used_at = ? WHERE id = ?", [now, token_id])
