"""The metascheduler: gather the scenario, allocate, and hand each share to a campaign scheduler."""

from cigri.metascheduler.allocation import CampaignView, ClusterView, allocate
from cigri.metascheduler.metascheduler import schedule

__all__ = ["CampaignView", "ClusterView", "allocate", "schedule"]
