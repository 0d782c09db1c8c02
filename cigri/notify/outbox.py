"""The outbox: messages written with the events they report, then sent and retried."""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from typing import Any

from cigri import db as database
from cigri.db import events as stored_events
from cigri.db import notifications as stored
from cigri.events import Severity
from cigri.grid import Grid
from cigri.notify import addresses
from cigri.notify.targets import TargetRefused
from cigri.users import is_admin

log = logging.getLogger("cigri.notify")
DELIVER_PER_CYCLE = 100  # a backlog drains over several cycles instead of stretching one
# A message taken for a send is not due again before this: longer than any send may take, so
# that two senders (a server that lost the cycles, the next) never both send it; a sender that
# dies with it leaves it to be sent after this.
RESERVED_SECONDS = 300.0


def collect(grid: Grid) -> int:
    """Turn un-notified event occurrences into one outbox message per subscription; return how
    many messages were written."""
    if not stored_events.any_unnotified(grid.db.conn):
        return 0  # the usual cycle: no write lock taken
    with database.write(grid.db) as conn:
        events = stored_events.unnotified(conn)
        if not events:
            return 0
        stored_events.mark_notified(conn, events)
        subscriptions = [(i, user, least) for i, user, least, kind, target, confirmed_at
                         in stored.every_subscription(conn)
                         if addresses.confirmed(grid.config.notify, user, kind, target, confirmed_at)]
        admins = {user for _, user, _ in subscriptions if is_admin(grid.config, user)}
        chosen: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for subscription_id, user, least in subscriptions:
            for event in events:
                readers = {event["owner"]} if event["owner"] else set()
                if event["class"] == "cluster" or event["code"] in ("BLACKLISTED", "SET_ASIDE"):
                    readers |= admins
                if user in readers and Severity(event["severity"]).rank >= Severity(least).rank:
                    chosen[subscription_id].append(event)
        now = database.now()
        for subscription_id, chosen_events in chosen.items():
            document = _document(chosen_events)
            stored.post(conn, subscription_id, document["severity"], document["subject"], json.dumps(document), now)
    return len(chosen)


def _document(events: list[dict[str, Any]]) -> dict[str, Any]:
    """One message for many events: the worst severity, a subject naming what happened."""
    severity = max((Severity(e["severity"]) for e in events), key=lambda s: s.rank)
    campaigns = sorted({e["campaign_id"] for e in events if e["campaign_id"]})
    where = f" on campaign #{campaigns[0]}" if len(campaigns) == 1 else (
        f" on {len(campaigns)} campaigns" if campaigns else "")
    if len(events) == 1:
        event = events[0]
        subject = (f"{event['new']} {event['code']} event(s){where}" if event["new"] > 1
                   else f"{event['code']}{where}: {event['message']}")
    else:
        counts: dict[str, int] = defaultdict(int)
        for event in events:
            counts[event["code"]] += event["new"]
        subject = ", ".join(f"{n} {code}" for code, n in counts.items()) + where
    return {
        "severity": str(severity), "subject": subject[:200],
        "events": [{"id": e["id"], "code": e["code"], "severity": e["severity"], "class": e["class"],
                    "campaign_id": e["campaign_id"], "cluster": e["cluster"], "message": e["message"],
                    "count": e["count"], "new": e["new"], "examples": e["examples"],
                    "stderr_tail": e["stderr_tail"]} for e in events],
    }


def deliver(grid: Grid) -> int:
    """Send the due messages; each outcome is recorded in its own transaction. Return how many were sent."""
    # Here, not at the top: smtplib, ssl and httpx are two thirds of a tenth of a second that
    # every command in direct mode paid to start, for a cycle that may have nothing to send.
    from cigri.notify.senders import send_mail, send_webhook

    settings = grid.config.notify
    due = stored.due(grid.db.conn, database.now(), DELIVER_PER_CYCLE)
    if not due:
        return 0
    with database.write(grid.db) as conn:  # fenced: a server that lost the cycles sends nothing more
        now = database.now()
        taken = stored.reserve(conn, [message["id"] for message in due], now, now + RESERVED_SECONDS)
    sent = 0
    for message in (m for m in due if m["id"] in taken):
        document = {"id": message["id"], "user": message["user"], **json.loads(message["document"])}
        try:
            if message["kind"] == "mail":
                send_mail(settings, message["target"], document, message["created_at"])
            else:
                send_webhook(settings, message["target"], document)
        except Exception as error:  # recorded and retried; never raised into the cycle
            tries = message["tries"] + 1
            dead = tries >= settings.max_tries
            # the subscriber's business, shown by gridnotify list: the log keeps it, while the
            # terminal of whoever drives this cycle (gridsub --wait) does not
            log.info("notification %s (%s, try %s/%s) failed: %s", message["id"], message["kind"], tries,
                     settings.max_tries, _reason(error))
            with database.write(grid.db) as conn:
                stored.failed(conn, message["id"], tries=tries, error=_shown_reason(message["kind"], error), dead=dead,
                              retry_at=database.now() + settings.retry_delay * 2 ** (tries - 1))
            continue
        with database.write(grid.db) as conn:
            stored.sent(conn, message["id"], database.now())
        sent += 1
    return sent


def _reason(error: Exception) -> str:
    """Why a send failed, for the log: without the webhook's URL (it may embed a token) or any
    credential."""
    import httpx

    if isinstance(error, httpx.HTTPStatusError):
        return f"HTTP {error.response.status_code}"
    return f"{type(error).__name__}: {' '.join(str(error).split())}"[:300]


def _shown_reason(kind: str, error: Exception) -> str:
    """Why a send failed, for its subscriber (``gridnotify list``). Of a webhook, only the HTTP
    status its server answered, or that delivery failed: how a connection failed (refused, timed
    out, reset, not HTTP) would tell any host's open ports from its closed ones."""
    import httpx

    if kind == "mail":  # the site's own SMTP server: its answer is no one's secret
        return _reason(error)
    if isinstance(error, httpx.HTTPStatusError):
        return f"HTTP {error.response.status_code}"
    if isinstance(error, TargetRefused):
        return "delivery failed: the URL leads to an address this site does not allow"
    return "delivery failed"
