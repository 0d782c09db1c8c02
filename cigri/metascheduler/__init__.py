"""The metascheduler: gather the scenario, allocate fair shares, and hand them to the campaign schedulers."""

from cigri.metascheduler.metascheduler import allocate, gather, schedule

__all__ = ["allocate", "gather", "schedule"]
