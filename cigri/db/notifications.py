"""The SQL of notification subscriptions, the confirmation codes mailed for them, and the
outbox of messages waiting to be sent.

:mod:`cigri.api.notifications` decides who may subscribe to what and checks the codes;
:mod:`cigri.notify.outbox` composes and sends the messages. Changes take the connection of the
caller's :func:`~cigri.db.store.write` transaction, so that a message is written with the
events it tells of, and a code with the subscription it confirms.
"""

from __future__ import annotations

import json

from typing import Any

from cigri.db import dialect
from cigri.db.rows import Connection, dicts


def count_others(conn: Connection, user: str, kind: str, target: str) -> int:
    """How many subscriptions ``user`` holds besides the one to ``kind`` and ``target`` (which
    subscribing again only changes): what ``limits.subscriptions_per_user`` bounds."""
    return conn.execute('SELECT count(*) FROM subscriptions WHERE "user" = ? AND NOT (kind = ? AND target = ?)',
                        [user, kind, target]).fetchone()[0]


def upsert(conn: Connection, *, user: str, kind: str, target: str, severity: str, now: float,
           confirmed_at: float | None) -> tuple[int, float | None]:
    """Subscribe ``user``, or give their subscription to the same target the new severity (a
    confirmed one stays confirmed); return its id and when it was confirmed (None: not yet)."""
    subscription_id, confirmed = conn.execute(
        'INSERT INTO subscriptions("user", kind, target, severity, created_at, confirmed_at) '
        'VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT("user", kind, target) DO UPDATE SET severity = excluded.severity, '
        "confirmed_at = coalesce(subscriptions.confirmed_at, excluded.confirmed_at) RETURNING id, confirmed_at",
        [user, kind, target, severity, now, confirmed_at]).fetchone()
    return subscription_id, confirmed


def import_mail(conn: Connection, user: str, address: str, severity: str, now: float) -> None:
    """Subscribe ``user``'s ``address`` as CiGri v3 had it (``cigri import-v3``), unless it is
    already. Not confirmed: an address other than the user's own waits for a code (m018)."""
    conn.execute('INSERT INTO subscriptions("user", kind, target, severity, created_at) '
                 "VALUES (?, 'mail', ?, ?, ?) "
                 'ON CONFLICT("user", kind, target) DO NOTHING', [user, address, severity, now])


def subscription(conn: Connection, subscription_id: int) -> tuple[str, str, str, str, float | None] | None:
    """``(user, kind, target, severity, confirmed_at)`` of the subscription; None if there is none."""
    row = conn.execute('SELECT "user", kind, target, severity, confirmed_at FROM subscriptions WHERE id = ?',
                       [subscription_id]).fetchone()
    return None if row is None else (row[0], row[1], row[2], row[3], row[4])


def confirm(conn: Connection, subscription_id: int, user: str, address: str, now: float) -> None:
    """The subscription is confirmed from ``now``; the codes mailed to its address are spent."""
    conn.execute("UPDATE subscriptions SET confirmed_at = ? WHERE id = ?", [now, subscription_id])
    conn.execute('DELETE FROM mail_codes WHERE "user" = ? AND address = ?', [user, address])


def delete(conn: Connection, subscription_id: int) -> None:
    """Remove the subscription; its messages not sent yet go with it (``ON DELETE CASCADE``)."""
    conn.execute("DELETE FROM subscriptions WHERE id = ?", [subscription_id])


def listing(conn: Connection, user: str | None) -> list[dict[str, Any]]:
    """``user``'s subscriptions (everyone's for None), oldest first, each with how many of its
    messages were ``sent``, are ``pending`` or ``failed`` for good, and its ``last_error``."""
    whose = "" if user is None else 'WHERE s."user" = ?'
    return dicts(conn.execute(
        'SELECT s.id, s."user", s.kind, s.target, s.severity, s.created_at, s.confirmed_at, '
        "count(o.id) FILTER (WHERE o.state = 'sent') AS sent, "
        "count(o.id) FILTER (WHERE o.state = 'pending') AS pending, "
        "count(o.id) FILTER (WHERE o.state = 'dead') AS failed, "
        "(SELECT last_error FROM outbox WHERE subscription_id = s.id AND last_error IS NOT NULL "
        " ORDER BY id DESC LIMIT 1) AS last_error "
        "FROM subscriptions s LEFT JOIN outbox o ON o.subscription_id = s.id "
        f'{whose} GROUP BY s.id, s."user", s.kind, s.target, s.severity, s.created_at, s.confirmed_at '
        "ORDER BY s.id", [] if user is None else [user]))


def every_subscription(conn: Connection) -> list[tuple[int, str, str, str, str, float | None]]:
    """``(id, user, severity, kind, target, confirmed_at)`` of every subscription: whom the
    outbox may write to."""
    return [(row[0], row[1], row[2], row[3], row[4], row[5]) for row in conn.execute(
        'SELECT id, "user", severity, kind, target, confirmed_at FROM subscriptions')]


def forget_old_codes(conn: Connection, before: float) -> None:
    """Delete the codes mailed before ``before``: neither a confirmation nor the day's count needs them."""
    conn.execute("DELETE FROM mail_codes WHERE sent_at < ?", [before])


def waiting_codes(conn: Connection, user: str, address: str, now: float,
                  tries: int) -> list[tuple[int, str]]:
    """``(id, hash)`` of the codes mailed for ``user``'s ``address`` that still confirm it: not
    expired at ``now``, fewer than ``tries`` wrong ones typed."""
    return [(row[0], row[1]) for row in conn.execute(
        'SELECT id, hash FROM mail_codes WHERE "user" = ? AND address = ? AND expires_at > ? AND tries < ?',
        [user, address, now, tries])]


def codes_since(conn: Connection, user: str, since: float) -> tuple[int, float | None]:
    """How many codes were mailed for ``user`` after ``since``, and when the first of them was."""
    mailed, first = conn.execute('SELECT count(*), min(sent_at) FROM mail_codes WHERE "user" = ? AND sent_at > ?',
                                 [user, since]).fetchone()
    return mailed, first


def add_code(conn: Connection, user: str, address: str, code_hash: str, now: float,
             expires_at: float) -> None:
    """Record a code mailed at ``now`` (its hash, never the code)."""
    conn.execute('INSERT INTO mail_codes("user", address, hash, sent_at, expires_at) VALUES (?, ?, ?, ?, ?)',
                 [user, address, code_hash, now, expires_at])


def drop_code(conn: Connection, user: str, address: str, code_hash: str) -> None:
    """Forget a code that could not be mailed: it confirms nothing and counts for nothing."""
    conn.execute('DELETE FROM mail_codes WHERE "user" = ? AND address = ? AND hash = ?', [user, address, code_hash])


def spend_tries(conn: Connection, code_ids: list[int]) -> None:
    """A wrong code was typed: one try fewer for each of these codes."""
    conn.executemany("UPDATE mail_codes SET tries = tries + 1 WHERE id = ?", [(i,) for i in code_ids])


def post(conn: Connection, subscription_id: int, severity: str, subject: str, document: str,
         now: float) -> None:
    """Put a message (``document``, JSON text) in the outbox, due at ``now``."""
    conn.execute("INSERT INTO outbox(subscription_id, severity, subject, document, next_try_at, created_at) "
                 "VALUES (?, ?, ?, ?, ?, ?)", [subscription_id, severity, subject, document, now, now])


def due(conn: Connection, now: float, most: int) -> list[dict[str, Any]]:
    """The first ``most`` messages due at ``now``, with their subscription's kind, target and
    user; through the index of pending messages, never the sent ones."""
    return dicts(conn.execute(
        'SELECT o.id, o.severity, o.subject, o.document, o.tries, o.created_at, s.kind, s.target, s."user" '
        f"FROM outbox o {dialect.indexed_by(conn, 'outbox_due')} JOIN subscriptions s ON s.id = o.subscription_id "
        "WHERE o.state = 'pending' AND o.next_try_at <= ? ORDER BY o.id LIMIT ?", [now, most]))


def reserve(conn: Connection, message_ids: list[int], now: float, until: float) -> set[int]:
    """Take the messages due at ``now`` for one send each: not due again before ``until`` (a
    sender that dies meanwhile leaves them to the next). The ids taken: not those another
    sender has, nor those no longer pending."""
    return {row[0] for row in conn.execute(
        f"UPDATE outbox SET next_try_at = ? WHERE id IN {dialect.ids_in(conn)} AND state = 'pending' "
        "AND next_try_at <= ? RETURNING id", [until, json.dumps(message_ids), now])}


def failed(conn: Connection, message_id: int, *, tries: int, error: str, dead: bool, retry_at: float) -> None:
    """A send of the pending message failed: try again at ``retry_at``, or never (``dead``)."""
    conn.execute("UPDATE outbox SET tries = ?, last_error = ?, state = ?, next_try_at = ? "
                 "WHERE id = ? AND state = 'pending'",
                 [tries, error, "dead" if dead else "pending", retry_at, message_id])


def sent(conn: Connection, message_id: int, now: float) -> None:
    """The message was sent at ``now``."""
    conn.execute("UPDATE outbox SET state = 'sent', sent_at = ?, tries = tries + 1 WHERE id = ?", [now, message_id])
