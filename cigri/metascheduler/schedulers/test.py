"""The test scheduler: a test-mode campaign runs one job at a time on each cluster.

It lets a user check that a campaign works everywhere before flooding the grid; the
allocation already puts test-mode campaigns first, this module says how much they may hold.
"""

from typing import Any


def is_test_mode(settings: dict[str, Any]) -> bool:
    return bool(settings.get("test_mode"))


def job_cap(settings: dict[str, Any]) -> int | None:
    """At most one active job per cluster in test mode, else the JDL's ``max_jobs``."""
    return 1 if is_test_mode(settings) else settings.get("max_jobs")
