"""Notifications: events turned into messages for the users who subscribed (``gridnotify``).

The cycle's last step. :func:`collect` turns every event occurrence not yet notified into at
most one message per subscription, in the same transaction that marks those occurrences
notified: a thousand failures become one message, and a crash neither loses nor repeats them.
:func:`deliver` sends what is due from the persisted outbox (mail over SMTP, JSON over HTTP
POST), retrying with exponential backoff up to ``notify.max_tries``. A message sent just before
a crash, and not yet marked sent, is sent once more: it carries the same id (webhook ``id``,
mail ``Message-ID``) so the receiver can tell. Nothing here may break the cycle.
"""

from __future__ import annotations

import logging

from cigri.grid import Grid
from cigri.notify.outbox import collect, deliver

log = logging.getLogger("cigri.notify")

__all__ = ["collect", "deliver", "notify"]


def notify(grid: Grid) -> int:
    """Collect and deliver; return how many messages were sent. Never raises."""
    try:
        collect(grid)
        return deliver(grid)
    except Exception as error:  # a broken notifier must never stop the grid
        log.error("notifications: %s: %s", type(error).__name__, error)
        return 0
