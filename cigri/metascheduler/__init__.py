"""The metascheduler: gather the scenario, allocate fair shares, and hand them to the campaign schedulers."""

from cigri.metascheduler.metascheduler import gather, schedule

__all__ = ["gather", "schedule"]
