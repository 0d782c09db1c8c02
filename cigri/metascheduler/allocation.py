"""How many new jobs each campaign may start on each cluster this cycle: a pure function.

No database, no clock, no I/O: the metascheduler gathers a :class:`Scenario`, calls
:func:`allocate`, and applies the result. The policy is CiGri's: test-mode campaigns first,
then FIFO by campaign id; each (campaign, cluster) pair is capped by the cluster's budget,
the campaign's job cap there (``max_jobs``, 1 in test mode), its remaining pending tasks,
and its tap, which bounds how many of its jobs may wait in the cluster's queue.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ClusterView:
    name: str
    free_slots: int
    max_waiting: int  # how many cigri jobs may queue on the cluster beyond its free slots
    cigri_waiting: int  # cigri jobs queued there now


@dataclass(frozen=True)
class CampaignView:
    id: int
    pending: int
    clusters: tuple[str, ...]  # usable clusters, in the JDL's order
    test_mode: bool = False
    max_jobs: dict[str, int] = field(default_factory=dict)  # cap on active jobs (1 in test mode)
    active: dict[str, int] = field(default_factory=dict)  # jobs submitted, queued or running
    waiting: dict[str, int] = field(default_factory=dict)  # jobs queued on the cluster
    tap: dict[str, int] = field(default_factory=dict)  # jobs the tap lets wait per cluster (absent: no bound)


def allocate(clusters: list[ClusterView], campaigns: list[CampaignView]) -> dict[tuple[int, str], int]:
    """Return ``{(campaign id, cluster): jobs to start}``; pairs with 0 are omitted."""
    budget = {c.name: max(0, c.free_slots + c.max_waiting - c.cigri_waiting) for c in clusters}
    result: dict[tuple[int, str], int] = {}
    ordered = sorted(campaigns, key=lambda c: (not c.test_mode, c.id))
    for campaign in ordered:
        remaining = campaign.pending
        for cluster in campaign.clusters:
            if remaining <= 0 or cluster not in budget:
                continue
            active = campaign.active.get(cluster, 0)
            limit = min(budget[cluster], remaining)
            tap = campaign.tap.get(cluster)
            if tap is not None:
                limit = min(limit, tap - campaign.waiting.get(cluster, 0))
            cap = campaign.max_jobs.get(cluster)
            if cap is not None:
                limit = min(limit, cap - active)
            if limit > 0:
                result[(campaign.id, cluster)] = limit
                budget[cluster] -= limit
                remaining -= limit
    return result
