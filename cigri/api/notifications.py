"""Notification subscriptions: mail or webhook, per user."""

from __future__ import annotations

import re
from email.utils import getaddresses
from typing import Any
from urllib.parse import urlsplit

from cigri import db as database
from cigri.api.access import may_see, storable
from cigri.errors import InputError, NotFound, Refused
from cigri.events import Severity
from cigri.grid import Grid
from cigri.notify import targets
from cigri.users import require_admin

NOTIFY_KINDS = ("mail", "webhook")
_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
# One address, as RFC 5322's dot-atom local part and a host name: nothing a mail header would
# read as a second recipient (``a@x.org,victim``), a display name or a comment.
_MAIL_ADDRESS = re.compile(rf"{_ATOM}(?:\.{_ATOM})*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*")


def subscribe(grid: Grid, *, user: str, kind: str, target: str, severity: str) -> int:
    """Subscribe ``user`` to notifications of at least ``severity``; an existing subscription
    to the same target gets the new severity. Return its id."""
    import httpx

    if severity not in {s.value for s in Severity}:
        raise InputError(f"severity: expected low, medium or high, got {severity!r}")
    if kind == "mail":
        if not _MAIL_ADDRESS.fullmatch(target) or getaddresses([target]) != [("", target)]:
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
            addresses = targets.resolve(url)
        except (OSError, UnicodeError):  # not resolvable now: every delivery checks it again
            addresses = []
        targets.check(addresses, grid.config.notify.webhook_allow)
    else:
        raise InputError(f"kind: expected one of {', '.join(NOTIFY_KINDS)}, got {kind!r}")
    if kind == "mail" and not grid.config.notify.smtp_host:  # what the notifier needs to send a mail
        raise Refused("notify.smtp_host is not set: mail notifications cannot be sent on this grid "
                      "(ask an admin, or subscribe a --webhook)")
    with database.write(grid.db) as conn:
        return conn.execute(
            "INSERT INTO subscriptions(user, kind, target, severity, created_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(user, kind, target) DO UPDATE SET severity = excluded.severity RETURNING id",
            [user, kind, target, severity, database.now()]).fetchone()[0]


def unsubscribe(grid: Grid, subscription_id: int, *, user: str) -> None:
    """Remove a subscription (its unsent messages go with it): its owner's or, for an admin, any."""
    with database.write(grid.db) as conn:
        row = conn.execute("SELECT user FROM subscriptions WHERE id = ?", [subscription_id]).fetchone() \
            if storable(subscription_id) else None
        if row is None or not may_see(grid, row[0], user):
            raise NotFound(f"subscription {subscription_id}: no such subscription")
        conn.execute("DELETE FROM subscriptions WHERE id = ?", [subscription_id])


def list_subscriptions(grid: Grid, *, user: str, all_users: bool = False) -> list[dict[str, Any]]:
    """``user``'s subscriptions (an admin may ask for everyone's) with their messages' fate."""
    if all_users:
        require_admin(grid.config, user, "listing everyone's subscriptions")
    rows = list(grid.db.query(
        "SELECT s.id, s.user, s.kind, s.target, s.severity, s.created_at, "
        "count(o.id) FILTER (WHERE o.state = 'sent') AS sent, "
        "count(o.id) FILTER (WHERE o.state = 'pending') AS pending, "
        "count(o.id) FILTER (WHERE o.state = 'dead') AS failed, "
        "(SELECT last_error FROM outbox WHERE subscription_id = s.id AND last_error IS NOT NULL "
        " ORDER BY id DESC LIMIT 1) AS last_error "
        "FROM subscriptions s LEFT JOIN outbox o ON o.subscription_id = s.id "
        f"{'' if all_users else 'WHERE s.user = ?'} GROUP BY s.id ORDER BY s.id", [] if all_users else [user]))
    for row in rows:
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
