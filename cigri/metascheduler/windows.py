"""Day and night: how a campaign's JDL ``type`` runs at a given moment.

CiGri documented two types it never built: ``semi-best-effort`` (best-effort by day, normal
by night) and ``nightly`` (normal, only at night). The night is ``metascheduler.night``
(``HH:MM-HH:MM`` in the server's local time, may wrap midnight; empty: never night), and with
``metascheduler.weekend`` all of Saturday and Sunday count as night.
"""

from __future__ import annotations

from datetime import datetime

from cigri.config import MetaschedulerSettings, parse_window

BEST_EFFORT = "best-effort"
NORMAL = "normal"
SEMI_BEST_EFFORT = "semi-best-effort"
NIGHTLY = "nightly"
TYPES = (BEST_EFFORT, NORMAL, SEMI_BEST_EFFORT, NIGHTLY)  # the JDL also takes "besteffort"


def is_night(settings: MetaschedulerSettings, at: float) -> bool:
    """Whether the epoch ``at`` (cigri's clock, virtual in the simulator) falls in the night."""
    moment = datetime.fromtimestamp(at)
    if settings.weekend and moment.weekday() >= 5:
        return True
    window = parse_window(settings.night)
    if window is None:
        return False
    start, end = window
    now = moment.time()
    return start <= now < end if start < end else now >= start or now < end


def job_type(jdl_type: str | None, night: bool) -> str | None:
    """``best-effort`` or ``normal`` for a job sent now, or None when the type may not run now."""
    if jdl_type in (None, BEST_EFFORT, "besteffort"):
        return BEST_EFFORT
    if jdl_type == SEMI_BEST_EFFORT:
        return NORMAL if night else BEST_EFFORT
    if jdl_type == NIGHTLY:
        return NORMAL if night else None
    return NORMAL
