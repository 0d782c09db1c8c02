"""The pure allocation policy: who may start how many jobs where, this cycle."""

from __future__ import annotations

from cigri.metascheduler.allocation import CampaignView, ClusterView, allocate


def cluster(name: str = "c", free: int = 10, max_waiting: int = 0, waiting: int = 0) -> ClusterView:
    return ClusterView(name, free_slots=free, max_waiting=max_waiting, cigri_waiting=waiting)


def campaign(id: int, pending: int = 100, clusters: tuple[str, ...] = ("c",), **kwargs) -> CampaignView:
    return CampaignView(id=id, pending=pending, clusters=clusters, **kwargs)


def test_fifo_by_campaign_id() -> None:
    assert allocate([cluster(free=10)], [campaign(2), campaign(1, pending=6)]) == {(1, "c"): 6, (2, "c"): 4}


def test_test_mode_campaigns_go_first() -> None:
    result = allocate([cluster(free=3)], [campaign(1), campaign(2, test_mode=True, max_jobs={"c": 1})])
    assert result == {(2, "c"): 1, (1, "c"): 2}
    assert list(result) == [(2, "c"), (1, "c")]


def test_max_jobs_caps_active_jobs() -> None:
    assert allocate([cluster()], [campaign(1, max_jobs={"c": 3})]) == {(1, "c"): 3}
    assert allocate([cluster()], [campaign(1, max_jobs={"c": 3}, active={"c": 2})]) == {(1, "c"): 1}
    assert allocate([cluster()], [campaign(1, max_jobs={"c": 3}, active={"c": 5})]) == {}


def test_budget_is_free_plus_max_waiting_minus_cigri_waiting_shared_by_campaigns() -> None:
    clusters = [cluster(free=4, max_waiting=5, waiting=3)]  # budget 6
    assert allocate(clusters, [campaign(1, pending=4), campaign(2), campaign(3)]) == {(1, "c"): 4, (2, "c"): 2}
    assert allocate([cluster(free=0, max_waiting=2, waiting=5)], [campaign(1)]) == {}


def test_tap_bounds_waiting_jobs() -> None:
    assert allocate([cluster()], [campaign(1, tap={"c": 4})]) == {(1, "c"): 4}
    assert allocate([cluster()], [campaign(1, tap={"c": 4}, waiting={"c": 3})]) == {(1, "c"): 1}
    assert allocate([cluster()], [campaign(1, tap={"c": 4}, waiting={"c": 4})]) == {}


def test_no_tap_means_no_tap_bound() -> None:
    assert allocate([cluster()], [campaign(1, pending=8, waiting={"c": 5})]) == {(1, "c"): 8}


def test_pending_bounds_across_clusters_in_jdl_order() -> None:
    clusters = [cluster("a", free=3), cluster("b", free=10)]
    assert allocate(clusters, [campaign(1, pending=5, clusters=("a", "b"))]) == {(1, "a"): 3, (1, "b"): 2}
    assert allocate(clusters, [campaign(1, pending=5, clusters=("b", "a"))]) == {(1, "b"): 5}
    assert allocate(clusters, [campaign(1, pending=0, clusters=("a", "b"))]) == {}


def test_clusters_without_budget_are_ignored() -> None:
    result = allocate([cluster("a", free=2)], [campaign(1, clusters=("gone", "a"), max_jobs={"gone": 5})])
    assert result == {(1, "a"): 2}


def test_each_limit_per_cluster() -> None:
    clusters = [cluster("a", free=10), cluster("b", free=10)]
    view = campaign(1, clusters=("a", "b"), max_jobs={"a": 2}, tap={"b": 3}, waiting={"b": 1})
    assert allocate(clusters, [view]) == {(1, "a"): 2, (1, "b"): 2}


def test_nothing_to_do() -> None:
    assert allocate([], []) == {}
    assert allocate([cluster()], []) == {}
    assert allocate([], [campaign(1)]) == {}
