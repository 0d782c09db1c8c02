"""Where a mail may go: one plain address, and whether it is the user's own.

A user's own address (``notify.user_address``, ``{user}`` standing for their name) is taken as it
is; any other is sent nothing until its user confirms it with the code mailed there
(:mod:`cigri.api.notifications`), so no user has the site mail their campaigns' stderr, or
anything else, to someone else.
"""

from __future__ import annotations

import re

from cigri.config import NotifySettings

_ATOM = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+"
# One address, as RFC 5322's dot-atom local part and a host name: nothing a mail header would
# read as a second recipient (``a@x.org,victim``), a display name or a comment.
MAIL_ADDRESS = re.compile(rf"{_ATOM}(?:\.{_ATOM})*@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*")


def own_address(settings: NotifySettings, user: str) -> str | None:
    """``user``'s own mail address, lower case; None when the site names none or the user's name
    makes no address."""
    address = settings.user_address.replace("{user}", user)
    return address.lower() if settings.user_address and MAIL_ADDRESS.fullmatch(address) else None


def confirmed(settings: NotifySettings, user: str, kind: str, target: str, confirmed_at: float | None) -> bool:
    """Whether a subscription may be sent messages: a webhook, a mail to its user's own address,
    or one its user confirmed with the mailed code."""
    return kind != "mail" or confirmed_at is not None or target.lower() == own_address(settings, user)
