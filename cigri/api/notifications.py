"""Notification subscriptions: mail or webhook, per user.

A mail subscription to any address but the user's own (:mod:`cigri.notify.addresses`) is sent
nothing, not even events, until the user confirms it with the one-time code mailed there
(``gridnotify confirm``). A code is stored hashed, expires after :data:`CODE_SECONDS`, is void after
:data:`CODE_TRIES` wrong tries, and a user is mailed at most :data:`CODES_PER_DAY` codes a day.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
from email.utils import getaddresses
from typing import Any
from urllib.parse import urlsplit

from cigri import db as database
from cigri.api.access import may_see, storable
from cigri.db import notifications as stored
from cigri.errors import InputError, LimitExceeded, NotFound, Refused, Unavailable
from cigri.events import Severity
from cigri.grid import Grid
from cigri.notify import addresses, targets
from cigri.notify.addresses import MAIL_ADDRESS
from cigri.users import require_admin

NOTIFY_KINDS = ("mail", "webhook")
CODE_SECONDS = 86400.0  # how long a mailed code confirms its subscription
CODE_TRIES = 5  # wrong codes typed before a code is void
CODES_PER_DAY = 5  # codes mailed for one user within a day: no one floods an address through the site


def subscribe(grid: Grid, *, user: str, kind: str, target: str, severity: str) -> dict[str, Any]:
    """Subscribe ``user`` to notifications of at least ``severity``; an existing subscription
    to the same target gets the new severity. A mail address other than the user's own is
    confirmed first: a code is mailed there (unless one already waits) and nothing else is sent
    until :func:`confirm_subscription` takes it. Return the subscription (``confirmed``: whether it is)."""
    import httpx

    if severity not in {s.value for s in Severity}:
        raise InputError(f"severity: expected low, medium or high, got {severity!r}")
    if kind == "mail":
        if not MAIL_ADDRESS.fullmatch(target) or getaddresses([target]) != [("", target)]:
            raise InputError(f"mail address: {target!r} is not one address: user@domain, in ASCII, without "
                             "spaces, commas, semicolons, quotes, comments or angle brackets")
    elif kind == "webhook":
        try:
            url = httpx.URL(target)
        except httpx.InvalidURL:
            url = None
        if url is None or url.scheme not in ("http", "https") or not url.host:
            raise InputError("webhook URL: expected http://HOST/... or https://HOST/...")
        try:
            resolved = targets.resolve(url)
        except (OSError, UnicodeError):  # not resolvable now: every delivery checks it again
            resolved = []
        targets.check(resolved, grid.config.notify.webhook_allow)
    else:
        raise InputError(f"kind: expected one of {', '.join(NOTIFY_KINDS)}, got {kind!r}")
    if kind == "mail" and not grid.config.notify.smtp_host:  # what the notifier needs to send a mail
        raise Refused("notify.smtp_host is not set: mail notifications cannot be sent on this grid "
                      "(ask an admin, or subscribe a --webhook)")
    now = database.now()
    trusted = addresses.confirmed(grid.config.notify, user, kind, target, None)
    with database.write(grid.db) as conn:
        most = grid.config.limits.subscriptions_per_user
        held = stored.count_others(conn, user, kind, target)
        if held >= most:
            raise LimitExceeded(f"{user}: {held} subscriptions, the most one user holds "
                                "(limits.subscriptions_per_user); gridnotify unsubscribe one first")
        subscription_id, confirmed_at = stored.upsert(conn, user=user, kind=kind, target=target, severity=severity,
                                                      now=now, confirmed_at=now if trusted else None)
        code = None if confirmed_at is not None else _new_code(conn, user, target, now)
    if code is not None:
        _mail_code(grid, user, target, subscription_id, code)
    return {"id": subscription_id, "kind": kind, "target": shown_target(target), "severity": severity,
            "confirmed": confirmed_at is not None}


def _code_hash(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


def _new_code(conn: sqlite3.Connection, user: str, address: str, now: float) -> str | None:
    """A fresh code for ``user``'s ``address``, recorded hashed (in the caller's transaction);
    None when one mailed there still confirms it. LimitExceeded past the day's codes."""
    stored.forget_old_codes(conn, now - 2 * CODE_SECONDS)
    if stored.waiting_codes(conn, user, address, now, CODE_TRIES):
        return None
    mailed, first = stored.codes_since(conn, user, now - CODE_SECONDS)
    if mailed >= CODES_PER_DAY:
        raise LimitExceeded(f"mail address: {CODES_PER_DAY} confirmation codes were mailed for you within a day; "
                            "confirm one of them, or try again later", retry_after=(first or now) + CODE_SECONDS - now)
    code = secrets.token_hex(5)
    stored.add_code(conn, user, address, _code_hash(code), now, now + CODE_SECONDS)
    return code


def _mail_code(grid: Grid, user: str, address: str, subscription_id: int, code: str) -> None:
    """Mail the code now (never stored in clear, so it cannot wait in the outbox); when it
    cannot be sent, the code is void and the user is told."""
    from cigri.notify.senders import send_code

    try:
        send_code(grid.config.notify, address, user=user, subscription_id=subscription_id, code=code)
    except Exception as error:  # whatever the SMTP server or the network answered
        with database.write(grid.db) as conn:
            stored.drop_code(conn, user, address, _code_hash(code))
        raise Unavailable(f"mail address: the confirmation code could not be mailed to {address} "
                          f"({type(error).__name__}: {' '.join(str(error).split())[:200]}); subscribe again later") from None


def confirm_subscription(grid: Grid, subscription_id: int, code: str, *, user: str) -> dict[str, Any]:
    """Confirm one of ``user``'s mail subscriptions with the code mailed to its address; a wrong
    code spends one of the tries of every code waiting for that address."""
    now = database.now()
    with database.write(grid.db) as conn:
        row = stored.subscription(conn, subscription_id) if storable(subscription_id) else None
        if row is None or row[0] != user:  # another's, even to an admin: as none
            raise NotFound(f"subscription {subscription_id}: no such subscription")
        _, kind, target, severity, confirmed_at = row
        waiting = stored.waiting_codes(conn, user, target, now, CODE_TRIES)
        typed = _code_hash(code.strip().lower())
        right = any(hmac.compare_digest(typed, stored) for _, stored in waiting)
        if confirmed_at is None and right:
            stored.confirm(conn, subscription_id, user, target, now)
        elif confirmed_at is None:
            stored.spend_tries(conn, [i for i, _ in waiting])
    if confirmed_at is None and not waiting:
        raise Refused(f"subscription {subscription_id}: no code waits for {target} (it expired, or too many wrong "
                      f"ones were typed); gridnotify subscribe --mail {target} mails a new one")
    if confirmed_at is None and not right:
        raise InputError(f"code: not the one mailed to {target}")
    return {"id": subscription_id, "kind": kind, "target": shown_target(target), "severity": severity,
            "confirmed": True}


def unsubscribe(grid: Grid, subscription_id: int, *, user: str) -> None:
    """Remove a subscription (its unsent messages go with it): its owner's or, for an admin, any."""
    with database.write(grid.db) as conn:
        row = stored.subscription(conn, subscription_id) if storable(subscription_id) else None
        if row is None or not may_see(grid, row[0], user):
            raise NotFound(f"subscription {subscription_id}: no such subscription")
        stored.delete(conn, subscription_id)


def list_subscriptions(grid: Grid, *, user: str, all_users: bool = False) -> list[dict[str, Any]]:
    """``user``'s subscriptions (an admin may ask for everyone's) with their messages' fate."""
    if all_users:
        require_admin(grid.config, user, "listing everyone's subscriptions")
    rows = stored.listing(grid.db.conn, None if all_users else user)
    for row in rows:
        row["confirmed"] = addresses.confirmed(grid.config.notify, row["user"], row["kind"], row["target"],
                                               row.pop("confirmed_at"))
        row["target"] = shown_target(row["target"])
    return rows


def shown_target(target: str) -> str:
    """A subscription's target as shown to people: the password in a webhook URL's userinfo
    masked (``https://bot:***@host/...``), since secrets never appear in output."""
    parts = urlsplit(target)
    if parts.password is None:
        return target
    userinfo, _, host = parts.netloc.rpartition("@")
    return target.replace(parts.netloc, f"{userinfo.split(':', 1)[0]}:***@{host}", 1)
