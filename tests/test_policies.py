"""The seeds' remaining policies in the pure allocation: pools and squatters, the initialization
cap and expand-by-doubling, gangs, user weights, YARN's minimum user-limit percent and packing.

Each scenario's answer is worked out by hand in its docstring, from the seed passage it cites
(``../shared/seeds``); the properties at the end check the invariants of the allocation with
every policy switched on at random."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fairshare import USERS, next_cycle, scenarios, total
from test_shares import make_grid  # noqa: F401 (a fixture)

from cigri import api
from cigri.backends import Capacity
from cigri.db import now
from cigri.errors import ConfigError
from cigri.grid import Grid
from cigri.metascheduler.fairshare import (
    Allocation,
    CampaignShare,
    CampaignSpec,
    ClassSpec,
    ClusterSpec,
    Policy,
    PoolSpec,
    Scenario,
    UserSpec,
    allocate,
    allocation_to_json,
    scenario_from_json,
)
from cigri.metascheduler.metascheduler import gather


def shares(allocation: Allocation) -> dict[int, CampaignShare]:
    return {s.id: s for s in allocation.campaigns}


# --- Pools (DUCC, "Node Pools") -----------------------------------------------------------

P1_Q1 = (ClusterSpec("p1", 10), ClusterSpec("q1", 20))
POOLS = (PoolSpec("P", ("p1",)), PoolSpec("Q", ("q1",), parent="P"))
POOL_CLASSES = (ClassSpec("A", pool="P", default=True), ClassSpec("B", pool="Q"), ClassSpec("C", pool="Q"),
                ClassSpec("F", pool="P", policy=Policy.FIXED_SHARE))


def test_preemptable_work_squats_in_the_subpools_once_its_pool_is_full() -> None:
    """DUCC: "The scheduler will attempt to allocate preemptable work in the nodepool associated
    with the work's class. If this nodepool becomes exhausted, and there are subpools, the
    scheduler proceeds to try to allocate resources within the subpools". A (pool P) alone with
    40 tasks: p1's 10 as a resident, then q1's 20 as a squatter."""
    a = shares(allocate(Scenario(P1_Q1, (CampaignSpec(1, "ann", 40),), POOL_CLASSES, pools=POOLS)))[1]
    assert a.target == {"p1": 10, "q1": 20} and a.start == {"p1": 10, "q1": 20}
    assert a.reason == "at fair share; squatting in pool Q: residents first"


def test_non_preemptable_work_never_squats() -> None:
    """DUCC: "Non-preemptable work can only be allocated directly in the nodepool associated with
    the work's class. Such work can never become a squatter." F (fixed_share, pool P) stops at
    p1's 10 although q1 is idle."""
    f = shares(allocate(Scenario(P1_Q1, (CampaignSpec(1, "ann", 40, "F"),), POOL_CLASSES, pools=POOLS)))[1]
    assert f.target == {"p1": 10} and f.clusters == ("p1",)


def test_squatters_leave_a_pool_when_its_residents_arrive() -> None:
    """A squats 20 on q1 and holds 4 of p1; B (pool Q) arrives with 30 tasks. Residents come first
    in their pool: B's target is all of q1 (20), A's is p1 (10), so A's 20 squatting jobs are
    preempted (with no cap: all 20 at once) and A takes the 6 cores of p1 it did not use."""
    scenario = Scenario(P1_Q1, (CampaignSpec(1, "ann", 30, running={"p1": 4, "q1": 20}),
                                CampaignSpec(2, "bob", 30, "B")), POOL_CLASSES, pools=POOLS)
    a, b = allocate(scenario, 1.0).campaigns
    assert (a.target, a.preempt, a.start) == ({"p1": 10}, {"q1": 20}, {"p1": 6})
    assert (b.target, b.start) == ({"q1": 20}, {"q1": 20})
    assert a.reason == "at fair share; squatting in pool Q: residents first; above share: preempting 20"


def test_squatters_are_preempted_before_residents() -> None:
    """DUCC: "During eviction, the scheduler attempts to evict squatters first and only evicts
    residents once all the squatters are gone." On q1 (20 cores) A squats 2, resident B holds
    18; resident C arrives. Targets: B 10, C 10 (residents share q1 equally), A none there.
    B is furthest above its share (8 against A's 2), but under the cap of 3 kills (10 % of the
    30 running jobs, rounded up) A's 2 squatting jobs go first, then 1 of B's."""
    scenario = Scenario(P1_Q1, (CampaignSpec(1, "ann", 0, running={"p1": 10, "q1": 2}),
                                CampaignSpec(2, "bob", 0, "B", running={"q1": 18}), CampaignSpec(3, "cy", 20, "C")),
                        POOL_CLASSES, pools=POOLS)
    a, b, c = allocate(scenario).campaigns
    assert (a.target, b.target, c.target) == ({"p1": 10}, {"q1": 10}, {"q1": 10})
    assert (a.preempt, b.preempt) == ({"q1": 2}, {"q1": 1})
    without_pools = Scenario(P1_Q1, scenario.campaigns, tuple(replace(k, pool=None) for k in POOL_CLASSES))
    assert shares(allocate(without_pools))[1].preempt == {}  # the resident, furthest above, would go first


def test_a_class_without_pool_squats_everywhere_and_its_fixed_work_stays_out_of_pools() -> None:
    """With pools configured, a class without one belongs to the whole grid: its own clusters are
    those in no pool, and every pool is one of its subpools (a pool without parent nests in the
    grid). The fair-share class D takes r1 (in no pool) then squats in P and Q; the fixed-share
    class G only has r1."""
    grid = (*P1_Q1, ClusterSpec("r1", 4))
    classes = (*POOL_CLASSES, ClassSpec("D"), ClassSpec("G", policy=Policy.FIXED_SHARE))
    result = shares(allocate(Scenario(grid, (CampaignSpec(1, "ann", 50, "D"), CampaignSpec(2, "bob", 50, "G")),
                                      classes, pools=POOLS)))
    assert result[2].target == {"r1": 4} and result[2].clusters == ("r1",)
    assert result[1].target == {"p1": 10, "q1": 20}
    assert result[1].reason.endswith("squatting in pool P, Q: residents first")


@pytest.mark.parametrize(("pools", "message"), [
    ([{"name": "P", "clusters": ["c1"]}, {"name": "Q", "clusters": ["c1"]}],
     "pools[1].clusters: 'c1' is already in pool 'P'; pools never overlap"),
    ([{"name": "P", "clusters": ["c1"], "parent": "X"}], "pools[0].parent: unknown pool 'X'"),
    ([{"name": "P", "clusters": [], "parent": "Q"}, {"name": "Q", "clusters": [], "parent": "P"}],
     "pools[0].parent: pools nest in a loop through 'P'"),
    ([{"name": "P", "clusters": ["c9"]}], "pools[0].clusters.c9: unknown cluster"),
    ([{"name": "P", "clusters": ["c1"]}, {"name": "P", "clusters": []}], "pools[1].name: duplicate 'P'"),
])
def test_bad_pools_name_the_json_path(pools: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ValueError) as error:
        scenario_from_json({"clusters": [{"name": "c1", "cores": 4}], "pools": pools, "campaigns": []})
    assert str(error.value) == message


def test_a_class_names_a_known_pool() -> None:
    with pytest.raises(ValueError, match=r"classes\[0\]\.pool: unknown pool 'P'"):
        scenario_from_json({"clusters": [{"name": "c1", "cores": 4}], "classes": [{"name": "default", "pool": "P"}],
                            "campaigns": []})


# --- Initialization cap and expand-by-doubling (DUCC, "Scheduling Classes") ----------------

def test_until_a_job_succeeds_a_campaign_holds_at_most_the_initialization_cap() -> None:
    """DUCC: "The initialization cap is used to limit the number of processes assigned to a job
    until it is known that at least one process has successfully passed from initialization to
    running." A campaign with no success yet on c1 holds 2 jobs there (init_cap 2); where it has
    succeeded (c2) it takes the rest of its share of the 32 cores, 14, and B its 16 (14 + 2)."""
    grid = (ClusterSpec("c1", 16), ClusterSpec("c2", 16))
    scenario = Scenario(grid, (CampaignSpec(1, "ann", 40, succeeded={"c1": 0, "c2": 3}),
                               CampaignSpec(2, "bob", 40)))
    a, b = allocate(scenario, init_cap=2).campaigns
    assert (a.target, b.target) == ({"c1": 2, "c2": 14}, {"c1": 14, "c2": 2})
    assert a.reason == "at fair share; initialization cap on c1: 2 job(s) until one ends successfully there"
    assert allocate(scenario).campaigns == allocate(scenario, init_cap=0).campaigns  # 0: no cap
    without = replace(scenario, campaigns=(replace(scenario.campaigns[0], succeeded=None), scenario.campaigns[1]))
    assert allocate(without, init_cap=2).campaigns == allocate(without).campaigns  # absent: as if past its start


def test_the_initialization_cap_limits_starts_and_kills_nothing() -> None:
    """DUCC's cap limits "the number of processes assigned to a job": a campaign running 8 jobs
    when the cap is turned on, none succeeded yet, keeps them (no kill for the cap) and starts
    nothing more; B gets the rest of the 16 cores."""
    scenario = Scenario((ClusterSpec("c1", 16),), (CampaignSpec(1, "ann", 40, running={"c1": 8}, succeeded={}),
                                                  CampaignSpec(2, "bob", 40)))
    a, b = allocate(scenario, 1.0, init_cap=2).campaigns
    assert (a.target, a.preempt, a.start, b.target) == ({"c1": 8}, {}, {}, {"c1": 8})


def test_a_campaign_whose_jobs_all_fail_never_floods_a_cluster() -> None:
    """Cycle after cycle its two jobs fail (none succeeds): it never holds more than 2 of the
    64 cores, however many tasks it has."""
    scenario = Scenario((ClusterSpec("c1", 64),), (CampaignSpec(1, "ann", 1000, succeeded={"c1": 0}),))
    for _ in range(5):
        a = allocate(scenario, init_cap=2).campaigns[0]
        assert a.target == {"c1": 2}
        scenario = replace(scenario, campaigns=(replace(scenario.campaigns[0], running={"c1": 2}),))


def test_after_the_first_success_the_cap_doubles_each_cycle_until_the_share() -> None:
    """DUCC: "When expand-by-doubling is enabled, the scheduler allocates either twice the number
    of resources a job currently has, or its fair-share of resources, whichever is smallest."
    The live cigri gives ``cap`` = 2 x the jobs held: 2, 4, 8, 16, 32, then its share of 40."""
    scenario = Scenario((ClusterSpec("c1", 40),), (CampaignSpec(1, "ann", 1000, running={"c1": 2},
                                                                  succeeded={"c1": 1}),))
    held = []
    for _ in range(6):
        spec = scenario.campaigns[0]
        spec = replace(spec, cap={"c1": 2 * spec.running["c1"]})
        a = allocate(replace(scenario, campaigns=(spec,)), init_cap=2).campaigns[0]
        held.append(total(a.target))
        scenario = replace(scenario, campaigns=(replace(spec, running={"c1": total(a.target)}),))
    assert held == [4, 8, 16, 32, 40, 40]
    assert a.reason == "at fair share"
    spec = replace(scenario.campaigns[0], running={"c1": 4}, cap={"c1": 8})
    assert allocate(replace(scenario, campaigns=(spec,))).campaigns[0].reason == \
        "expanding by doubling on c1: 8 job(s) this cycle"


def test_a_class_sets_its_own_initialization_cap() -> None:
    """DUCC's initialization cap is a class rule: with the grid's cap of 2, a class of cap 1
    holds its unproven campaign to 1 job, a class of cap 0 turns it off (its campaign takes its
    share, 8 of the 16 cores), and a class that says nothing keeps the grid's 2."""
    classes = (ClassSpec("careful", init_cap=1), ClassSpec("trusted", init_cap=0), ClassSpec("plain", default=True))
    unproven = {"succeeded": {"c1": 0}}
    scenario = Scenario((ClusterSpec("c1", 16),), (CampaignSpec(1, "ann", 40, class_name="careful", **unproven),
                                                  CampaignSpec(2, "bob", 40, class_name="trusted", **unproven),
                                                  CampaignSpec(3, "cid", 40, **unproven)), classes)
    careful, trusted, plain = allocate(scenario, init_cap=2).campaigns
    assert (careful.target, plain.target) == ({"c1": 1}, {"c1": 2}) and total(trusted.target) == 13
    assert careful.reason.endswith("initialization cap on c1: 1 job(s) until one ends successfully there")
    assert "initialization cap" not in trusted.reason
    with pytest.raises(ValueError, match=r"classes\[0\]\.init_cap: -1 is not >= 0"):
        Scenario((ClusterSpec("c1", 1),), (), (ClassSpec("x", init_cap=-1),))


def test_test_mode_and_the_initialization_cap_compose() -> None:
    """Test mode's one job per cluster (CiGri 2009) is below the cap of 2: it wins; a gang of 4
    under the cap of 2 holds one whole gang (the cap never splits a gang)."""
    grid = (ClusterSpec("c1", 16),)
    result = shares(allocate(Scenario(grid, (CampaignSpec(1, "ann", 10, test_mode=True, succeeded={"c1": 0}),
                                             CampaignSpec(2, "bob", 10, gang=4, succeeded={"c1": 0}))), init_cap=2))
    assert result[1].target == {"c1": 1} and result[2].target == {"c1": 4}


# --- Gangs (Armada, "gang scheduling") ------------------------------------------------------

def test_a_gang_starts_whole_on_one_cluster_and_targets_are_multiples_of_it() -> None:
    """Armada: "all jobs in the gang are scheduled onto the same cluster at the same time or not
    at all". Gangs of 4 on clusters of 10 and 6 cores: 2 gangs on c1 and 1 on c2, 12 jobs;
    the 4 cores left are less than a gang. Its last tasks (10 pending) form a smaller gang."""
    grid = (ClusterSpec("c1", 10), ClusterSpec("c2", 6))
    a = allocate(Scenario(grid, (CampaignSpec(1, "ann", 100, gang=4),))).campaigns[0]
    assert (a.target, a.reason) == ({"c1": 8, "c2": 4}, "gang of 4; at fair share")
    tail = allocate(Scenario(grid, (CampaignSpec(1, "ann", 10, gang=4),))).campaigns[0]
    assert tail.target == {"c1": 10}  # 4 + 4 + the last 2


def test_a_gang_that_fits_on_no_cluster_starts_nowhere_and_leaves_the_space() -> None:
    grid = (ClusterSpec("c1", 10), ClusterSpec("c2", 6))
    a, b = allocate(Scenario(grid, (CampaignSpec(1, "ann", 100, gang=12), CampaignSpec(2, "bob", 100)))).campaigns
    assert (a.target, a.reason) == ({}, "gang of 12; gang larger than any usable cluster")
    assert b.target == {"c1": 10, "c2": 6}


def test_a_gang_is_preempted_whole_even_past_the_cap() -> None:
    """Armada's two-queue example with A's 40 jobs as gangs of 8: A must give node2's 8 back.
    The cap (10 % of 40 running: 4) would never let a gang of 8 go, so the last kill of a cycle
    may overshoot the cap by less than a gang: the whole gang goes, and B starts 32."""
    scenario = Scenario((ClusterSpec("node1", 32), ClusterSpec("node2", 32)),
                        (CampaignSpec(1, "A", 0, running={"node1": 32, "node2": 8}, gang=8), CampaignSpec(2, "B", 50)))
    first = allocate(scenario)
    a, b = first.campaigns
    assert (first.preempt_cap, a.preempt, b.start) == (4, {"node2": 8}, {"node2": 32})


def test_armada_counts_the_whole_gang_in_the_share_it_would_take() -> None:
    """Armada: "Including the next schedulable job in the computation ... is important since the
    next job may be a gang job". 16 cores, gang campaign A (gangs of 4) and B (single jobs):
    A's turn comes when its share after a whole gang is the smaller, so the split is 8 and 8
    (with packing: spreading B's jobs may leave no cluster a gang's room, see the next test)."""
    grid = (ClusterSpec("c1", 10), ClusterSpec("c2", 6))
    a, b = allocate(Scenario(grid, (CampaignSpec(1, "ann", 100, gang=4), CampaignSpec(2, "bob", 100))),
                    placement="pack").campaigns
    assert (a.target, b.target) == ({"c1": 8}, {"c1": 2, "c2": 6})


def test_spreading_single_jobs_can_leave_no_room_for_a_gang() -> None:
    """The same grid with ``spread``: B's jobs go where the room is largest, fragmenting both
    clusters; after A's first gang no cluster has 4 cores free, and B takes the rest (work
    conservation). This is why grids with gangs want ``placement = "pack"`` (docs/policies.md)."""
    grid = (ClusterSpec("c1", 10), ClusterSpec("c2", 6))
    a, b = allocate(Scenario(grid, (CampaignSpec(1, "ann", 100, gang=4), CampaignSpec(2, "bob", 100)))).campaigns
    assert (total(a.target), total(b.target)) == (4, 12)


# --- User weights (Armada's per-queue weights, inside a class) -------------------------------

def test_users_of_a_class_share_in_proportion_to_their_weights() -> None:
    """Armada: "the fair share of each of the N queues is w_1 / w, ..., w_N / w". Weights 2, 1
    and 0.5 on 100 cores: 57.1, 28.6 and 14.3, in whole jobs 58, 28, 14 (the fill hands jobs
    out one at a time to the smallest share per weight: D'Hondt). Another class is unaffected."""
    users = (UserSpec("u1", weight=2), UserSpec("u3", weight=0.5))
    result = allocate(Scenario((ClusterSpec("n1", 100),), tuple(CampaignSpec(i, f"u{i}", 200) for i in (1, 2, 3)),
                               users=users))
    assert [total(s.target) for s in result.campaigns] == [58, 28, 14]
    two_classes = Scenario((ClusterSpec("n1", 100),),
                           (CampaignSpec(1, "u1", 200, "x"), CampaignSpec(2, "u2", 200, "y")),
                           (ClassSpec("x", default=True), ClassSpec("y")), users)
    assert [total(s.target) for s in allocate(two_classes).campaigns] == [50, 50]  # weights act inside a class


def test_a_heavier_user_keeps_its_share_when_a_lighter_one_arrives() -> None:
    """u1 (weight 3) holds all 64 cores; u2 (weight 1) arrives: the targets are 48 and 16, so
    16 of u1's jobs are preempted (no cap)."""
    scenario = Scenario((ClusterSpec("n1", 64),), (CampaignSpec(1, "u1", 100, running={"n1": 64}),
                                                  CampaignSpec(2, "u2", 100)), users=(UserSpec("u1", weight=3),))
    a, b = allocate(scenario, 1.0).campaigns
    assert (a.target, a.preempt, b.start) == ({"n1": 48}, {"n1": 16}, {"n1": 16})


# --- YARN's minimum user-limit percent -------------------------------------------------------

YARN_LIMIT = (CampaignSpec(1, "u1", 20, "qA", running={"n1": 25}), CampaignSpec(2, "u2", 20, "qA", running={"n1": 25}),
              CampaignSpec(3, "u3", 30, "qA", running={"n1": 50}))


def test_yarn_user_limit_with_preemption_is_the_seeds_answer_at_33_percent() -> None:
    """YARN-4945, "Limite: com preemption": Minimum-user-limit-percent = 33 %, 3 users using 25,
    25, 50: the user limit is max(100 / 3, 33) = 33.3, so u1 and u2 reach 33 and u3 gives 16."""
    classes = (ClassSpec("qA", min_user_limit_percent=33),)
    result = allocate(Scenario((ClusterSpec("n1", 100),), YARN_LIMIT, classes), 1.0)
    assert [total(s.target) for s in result.campaigns] == [33, 33, 34]
    assert [total(s.preempt) for s in result.campaigns] == [0, 0, 16]


def test_a_minimum_user_limit_above_an_equal_split_serves_the_oldest_users_first() -> None:
    """The same users with Minimum-user-limit-percent = 50: the limit is max(100 / 3, 50) = 50,
    handed out in the order of the users' oldest campaign: u1 and u2 want 45 each (25 + 20) and
    get them, u3 gets the 10 left (its 40 others are preempted); at 40 %, the limit is 40 each,
    and u3 the 20 left."""
    for percent, targets in ((50, [45, 45, 10]), (40, [40, 40, 20])):
        classes = (ClassSpec("qA", min_user_limit_percent=percent),)
        result = allocate(Scenario((ClusterSpec("n1", 100),), YARN_LIMIT, classes), 1.0)
        assert [total(s.target) for s in result.campaigns] == targets
        assert total(result.campaigns[2].preempt) == 50 - targets[2]
    assert result.campaigns[0].reason == "at its user limit (min_user_limit_percent)"


def test_users_beyond_the_limit_wait_for_older_users() -> None:
    """Three users with endless demand at 50 %: two users get 50 each, the third nothing; the
    order is the users' oldest campaign (u3's campaign 1 is the oldest), not their names."""
    classes = (ClassSpec("qA", min_user_limit_percent=50),)
    scenario = Scenario((ClusterSpec("n1", 100),), (CampaignSpec(1, "u3", 200, "qA"), CampaignSpec(2, "u1", 200, "qA"),
                                                   CampaignSpec(3, "u2", 200, "qA")), classes)
    result = allocate(scenario).campaigns
    assert [total(s.target) for s in result] == [50, 50, 0]
    assert result[2].reason == "waiting for older users (min_user_limit_percent)"


def test_the_user_limit_leaves_no_core_idle() -> None:
    """Work conservation beats the limit: at 50 %, u1 wants only 10, so u2 gets 50 and u3 40."""
    classes = (ClassSpec("qA", min_user_limit_percent=50),)
    campaigns = (CampaignSpec(1, "u1", 10, "qA"), CampaignSpec(2, "u2", 200, "qA"), CampaignSpec(3, "u3", 200, "qA"))
    result = allocate(Scenario((ClusterSpec("n1", 100),), campaigns, classes)).campaigns
    assert [total(s.target) for s in result] == [10, 50, 40]


def test_only_a_fair_share_class_has_a_user_limit() -> None:
    with pytest.raises(ValueError, match=r"classes\[0\]\.min_user_limit_percent: only a fair_share class"):
        Scenario((ClusterSpec("n1", 1),), (), (ClassSpec("x", policy=Policy.FIXED_SHARE, min_user_limit_percent=50),))


# --- Placement: spread or pack (Armada's smallest node that fits) -----------------------------

def test_pack_puts_small_tasks_on_the_smallest_cluster_that_fits() -> None:
    """Armada: "Armada attempts to schedule the job onto the node with the smallest amount of
    available resources on which the job fits ... to increase the amount of contiguous resources
    available, thus facilitating scheduling large jobs later". Clusters of 32, 16 and 8 cores,
    6 single-core tasks: spread puts them on the 32-core cluster, pack on the 8-core one; then a
    campaign of 32-core tasks gets the big cluster with no kill."""
    grid = (ClusterSpec("big", 32), ClusterSpec("mid", 16), ClusterSpec("small", 8))
    small = CampaignSpec(1, "ann", 0, running={"small": 6})
    assert allocate(Scenario(grid, (replace(small, pending=6, running={}),))).campaigns[0].target == {"big": 6}
    assert allocate(Scenario(grid, (replace(small, pending=6, running={}),)), placement="pack").campaigns[0].target == \
        {"small": 6}
    a, b = allocate(Scenario(grid, (small, CampaignSpec(2, "bob", 1, cores_per_task=32))), placement="pack").campaigns
    assert (a.preempt, b.target) == ({}, {"big": 1})


def test_placement_is_spread_or_pack() -> None:
    with pytest.raises(ValueError, match="'tight' is not a valid Placement"):
        allocate(Scenario((ClusterSpec("n1", 1),), ()), placement="tight")


# --- The seeds' answers cigri deliberately differs from (docs/policies.md) ----------------

def test_yarn_patch_example_takes_from_the_campaign_above_its_share() -> None:
    """YARN-4945's patch test: in queue b (apps 3 and 4 at priority 4, 5 and 6 above), YARN
    preempts 19 containers of app3 and 1 of app4. cigri splits a user's campaigns of the same
    priority equally (DUCC), so app4 (2 held of a share of 7) is below its share and loses
    nothing; all of it comes from app3, the one above its share: 21 with no cap (the room apps 5
    and 6 lack), 20 under a cap of 20 (YARN's per-round limit there)."""
    classes = tuple(ClassSpec(name, weight=weight) for name, weight in (("a", 11), ("b", 40), ("c", 20), ("d", 29)))
    apps = (CampaignSpec(1, "user", 25, "a", running={"n1": 6}, priority=1),
            CampaignSpec(2, "user", 25, "a", running={"n1": 5}, priority=1),
            CampaignSpec(3, "user", 20, "b", running={"n1": 34}, priority=4),
            CampaignSpec(4, "user", 10, "b", running={"n1": 2}, priority=4),
            CampaignSpec(5, "user", 20, "b", running={"n1": 1}, priority=5),
            CampaignSpec(6, "user", 10, "b", running={"n1": 1}, priority=6),
            CampaignSpec(7, "user", 10, "c", running={"n1": 10}, priority=1),
            CampaignSpec(8, "user", 0, "d", running={"n1": 20}, priority=1))
    scenario = Scenario((ClusterSpec("n1", 100),), apps, classes)
    for fraction, killed in ((1.0, 21), (0.25, 20)):
        result = shares(allocate(scenario, fraction))
        assert (total(result[3].preempt), total(result[4].preempt)) == (killed, 0)
        assert (total(result[3].target), total(result[4].target)) == (8, 7)


def test_a_reservation_takes_a_node_of_its_cores_with_at_least_its_memory() -> None:
    """DUCC: "The memory size specified in the reservation must match machine size exactly,
    within the limits of rounding to the next highest multiple of the quantum." cigri has no
    quantum and sizes a node by its cores: the cores must match exactly, the memory must fit
    (docs/policies.md says why); 8 cores and 20 GB is granted a node of 8 cores and 32 GB,
    16 cores is not."""
    grid = (ClusterSpec("c", 32, memory_gb=128, node_cores=8, node_memory_gb=32),)
    classes = (ClassSpec("r", policy=Policy.RESERVE),)
    result = shares(allocate(Scenario(grid, (CampaignSpec(1, "a", 1, "r", cores_per_task=8, memory_gb_per_task=20),
                                             CampaignSpec(2, "b", 1, "r", cores_per_task=16)), classes)))
    assert result[1].target == {"c": 1} and result[2].target == {}


# --- The scenario format -------------------------------------------------------------------

def test_the_policies_round_trip_through_the_scenario_format() -> None:
    data = {
        "clusters": [{"name": "p1", "cores": 10}, {"name": "q1", "cores": 20}],
        "pools": [{"name": "P", "clusters": ["p1"]}, {"name": "Q", "clusters": ["q1"], "parent": "P"}],
        "classes": [{"name": "A", "pool": "P", "default": True},
                    {"name": "B", "pool": "Q", "min_user_limit_percent": 50}],
        "users": [{"name": "ann", "weight": 2}],
        "campaigns": [{"id": 1, "user": "ann", "pending": 40, "gang": 2, "succeeded": {"p1": 1, "q1": 0},
                       "cap": {"p1": 4}},
                      {"id": 2, "user": "bob", "pending": 4, "class": "B"}],
    }
    scenario = scenario_from_json(data)
    assert scenario.pools == (PoolSpec("P", ("p1",)), PoolSpec("Q", ("q1",), "P"))
    assert (scenario.classes[1].pool, scenario.classes[1].min_user_limit_percent) == ("Q", 50.0)
    assert scenario.users[0].weight == 2.0
    assert (scenario.campaigns[0].gang, scenario.campaigns[0].succeeded, scenario.campaigns[0].cap) == \
        (2, {"p1": 1, "q1": 0}, {"p1": 4})
    a, b = allocation_to_json(allocate(scenario, init_cap=2))["campaigns"]
    assert a["target"] == {"p1": 4, "q1": 2} and b["target"] == {"q1": 4}
    assert a["reason"] == ("gang of 2; initialization cap on q1: 2 job(s) until one ends successfully there; "
                           "expanding by doubling on p1: 4 job(s) this cycle; squatting in pool Q: residents first")


@pytest.mark.parametrize(("change", "message"), [
    (lambda c: c.update(gang=0), "campaigns[0].gang: 0 is less than the minimum of 1"),
    (lambda c: c.update(succeeded={"c1": -1}), "campaigns[0].succeeded.c1: -1 is less than the minimum of 0"),
    (lambda c: c.update(cap={"c9": 1}), "campaigns[0].cap.c9: unknown cluster"),
])
def test_bad_policy_keys_name_the_json_path(change: Any, message: str) -> None:
    campaign: dict[str, Any] = {"id": 1, "user": "a", "pending": 1}
    change(campaign)
    with pytest.raises(ValueError) as error:
        scenario_from_json({"clusters": [{"name": "c1", "cores": 4}], "campaigns": [campaign]})
    assert str(error.value) == message


# --- The configuration and the live scenario ------------------------------------------------

POLICY_CONFIG = """
[clusters.a]
backend = "local"
slots = 8
[clusters.b]
backend = "local"
slots = 4
[pools.P]
clusters = ["a"]
[pools.Q]
clusters = ["b", "gone"]
parent = "P"
[classes.A]
pool = "P"
default = true
[classes.B]
pool = "Q"
min_user_limit_percent = 50
[users]
weight = 2
[users.bob]
weight = 0.5
[metascheduler]
init_cap = 2
placement = "pack"
night = ""
weekend = false
"""


def test_gather_reads_pools_limits_weights_gangs_successes_and_doubling_caps(
        make_grid: Callable[[str], Grid], tmp_path: Path) -> None:  # noqa: F811
    """The live scenario: the configured pools (a cluster cigri does not know left out), classes
    and user weights; a campaign's gang from its JDL; its successes per cluster from its ended
    jobs, and where it has some, a doubling cap of twice the jobs it holds there."""
    grid = make_grid(POLICY_CONFIG)
    ids = grid.cluster_ids()
    work = tmp_path / "work"
    work.mkdir()
    document = {"name": "g", "exec_file": "/bin/true", "exec_directory": str(work),
                "params": [str(i) for i in range(8)], "clusters": {"a": {}, "b": {}}, "gang": 4}
    ann = api.submit(grid, json.dumps(document), base_dir=work, user="ann")[0]
    bob = api.submit(grid, json.dumps({**document, "gang": 1}), base_dir=work, user="bob")[0]
    grid.db.conn.executemany("INSERT INTO jobs(campaign_id, cluster_id, kind, state, created_at) "
                             "VALUES (?, ?, 'task', 'running', 0)", [(ann, ids["a"])] * 4)
    grid.db.conn.execute("INSERT INTO campaign_stats(campaign_id, cluster_id, terminated) VALUES (?, ?, 3)",
                         [ann, ids["a"]])
    scenario = gather(grid, {ids["a"]: Capacity(8, 4), ids["b"]: Capacity(4, 4)}, now()).scenario
    assert scenario.pools == (PoolSpec("P", ("a",)), PoolSpec("Q", ("b",), "P"))
    assert [(c.name, c.pool, c.min_user_limit_percent) for c in scenario.classes] == [("A", "P", None),
                                                                                        ("B", "Q", 50.0)]
    assert [(u.name, u.weight) for u in scenario.users] == [("ann", 2.0), ("bob", 0.5)]
    campaigns = {c.id: c for c in scenario.campaigns}
    assert (campaigns[ann].gang, campaigns[ann].succeeded, campaigns[ann].cap) == (4, {"a": 3}, {"a": 8})
    assert (campaigns[bob].gang, campaigns[bob].succeeded, campaigns[bob].cap) == (1, {}, {})
    assert (grid.config.metascheduler.init_cap, grid.config.metascheduler.placement) == (2, "pack")


def test_a_class_without_doubling_gets_no_cap_after_its_first_success(
        make_grid: Callable[[str], Grid], tmp_path: Path) -> None:  # noqa: F811
    """DUCC: "If expand-by-doubling is disabled, jobs are allocated their full fair-share
    immediately." The live scenario, with the grid's init_cap of 2 and doubling on: a campaign
    of a class without doubling has its successes (its initialization cap still holds where it
    has none) but no doubling cap; one of a class whose init_cap is 0 has neither; one of the
    default class has both. ``cigri classes`` says what applies to each class."""
    grid = make_grid('[clusters.a]\nbackend = "local"\n[clusters.b]\nbackend = "local"\n'
                     "[metascheduler]\ninit_cap = 2\n[classes.plain]\ndefault = true\n"
                     "[classes.fast]\nexpand_by_doubling = false\n[classes.trusted]\ninit_cap = 0\n")
    ids = grid.cluster_ids()
    work = tmp_path / "work"
    work.mkdir()
    made = {}
    for klass in ("plain", "fast", "trusted"):
        document = {"name": klass, "exec_file": "/bin/true", "exec_directory": str(work), "class": klass,
                    "params": [str(i) for i in range(8)], "clusters": {"a": {}, "b": {}}}
        made[klass] = api.submit(grid, json.dumps(document), base_dir=work, user="ann")[0]
        grid.db.conn.executemany("INSERT INTO jobs(campaign_id, cluster_id, kind, state, created_at) "
                                 "VALUES (?, ?, 'task', 'running', 0)", [(made[klass], ids["a"])] * 3)
        grid.db.conn.execute("INSERT INTO campaign_stats(campaign_id, cluster_id, terminated) VALUES (?, ?, 1)",
                             [made[klass], ids["a"]])
    scenario = gather(grid, {ids["a"]: Capacity(8, 2), ids["b"]: Capacity(4, 4)}, now()).scenario
    campaigns = {c.id: c for c in scenario.campaigns}
    assert [(campaigns[made[k]].succeeded, campaigns[made[k]].cap) for k in ("plain", "fast", "trusted")] == [
        ({"a": 1}, {"a": 6}), ({"a": 1}, {}), (None, {})]
    assert [(c["name"], c["init_cap"], c["expand_by_doubling"]) for c in api.list_classes(grid)] == [
        ("fast", 2, False), ("plain", 2, True), ("trusted", 0, True)]


def test_gather_marks_failing_a_campaign_with_failed_tasks_and_no_success_yet(
        make_grid: Callable[[str], Grid], tmp_path: Path) -> None:  # noqa: F811
    """From the campaigns' task counts: failed tasks and no terminated one is failing; a
    campaign with a success too, or with nothing ended yet, is not."""
    grid = make_grid('[clusters.a]\nbackend = "local"\n')
    ids = grid.cluster_ids()
    work = tmp_path / "work"
    work.mkdir()
    made = {}
    for name, ended in (("broken", ["failed", "failed"]), ("mixed", ["failed", "terminated"]), ("fresh", [])):
        document = {"name": name, "exec_file": "/bin/true", "exec_directory": str(work),
                    "params": [str(i) for i in range(4)], "clusters": {"a": {}}}
        made[name] = api.submit(grid, json.dumps(document), base_dir=work, user="ann")[0]
        task_ids = [row[0] for row in grid.db.conn.execute("SELECT id FROM tasks WHERE campaign_id = ? ORDER BY id",
                                                           [made[name]])]
        for task_id, state in zip(task_ids, ended):
            grid.db.conn.execute("UPDATE tasks SET state = ? WHERE id = ?", [state, task_id])
    scenario = gather(grid, {ids["a"]: Capacity(8, 8)}, now()).scenario
    assert {c.id: c.failing for c in scenario.campaigns} == {made["broken"]: True, made["mixed"]: False,
                                                             made["fresh"]: False}


@pytest.mark.parametrize(("text", "message"), [
    ('[pools.P]\nclusters = ["a"]\n[pools.Q]\nclusters = ["a"]\n',
     "pools.Q.clusters: a is already in pool P; pools never overlap"),
    ('[pools.P]\nparent = "X"\n', "pools.P.parent: unknown pool 'X'"),
    ('[pools.P]\nparent = "Q"\n[pools.Q]\nparent = "P"\n', "pools.P.parent: pools nest in a loop through"),
    ('[pools.P]\ncolour = 1\n', "unknown key pools.P.colour"),
    ('[classes.default]\npool = "Z"\n', "classes.default.pool: unknown pool 'Z' (known: none)"),
    ("[classes.default]\nmin_user_limit_percent = 0\n", "classes.default.min_user_limit_percent: must be > 0"),
    ('[classes.default]\npolicy = "reserve"\nmin_user_limit_percent = 10\n',
     "classes.default.min_user_limit_percent: only a fair_share class"),
    ("[users]\nweight = 0\n", "users.weight: must be > 0"),
    ("[users.bob]\nweight = -1\n", "users.bob.weight: must be >= 0"),
    ("[metascheduler]\ninit_cap = -1\n", "metascheduler.init_cap: must be >= 0"),
    ("[classes.default]\ninit_cap = -2\n", "classes.default.init_cap: must be >= 0"),
    ('[classes.default]\nexpand_by_doubling = "no"\n', "classes.default.expand_by_doubling: expected bool"),
    ('[metascheduler]\nexpand_by_doubling = 1\n', "metascheduler.expand_by_doubling: expected bool"),
    ('[metascheduler]\nplacement = "tight"\n', "metascheduler.placement: expected one of spread, pack"),
])
def test_bad_policy_configuration_names_the_key(make_grid: Callable[[str], Grid], text: str,  # noqa: F811
                                                message: str) -> None:
    with pytest.raises(ConfigError) as error:
        make_grid('[clusters.a]\nbackend = "local"\n' + text)
    assert str(error.value).startswith(message)


# --- Properties with every policy switched on at random -------------------------------------

@st.composite
def with_policies(draw: st.DrawFn) -> Scenario:
    """A random grid of test_fairshare's, then pools, gangs, user weights, user limits and the
    initialization cap on top; running gangs are whole."""
    scenario = draw(scenarios())
    names = [c.name for c in scenario.clusters]
    pools: list[PoolSpec] = []
    if draw(st.booleans()):
        owners = [draw(st.sampled_from([None, "P", "Q"])) for _ in names]
        pools = [PoolSpec("P", tuple(n for n, o in zip(names, owners) if o == "P")),
                 PoolSpec("Q", tuple(n for n, o in zip(names, owners) if o == "Q"), draw(st.sampled_from([None, "P"])))]
    classes = tuple(replace(k, pool=draw(st.sampled_from([None, *(p.name for p in pools)])),
                            min_user_limit_percent=draw(st.sampled_from([None, 30.0, 50.0, 100.0]))
                            if k.policy is Policy.FAIR_SHARE else None) for k in scenario.classes)
    weights = {u: draw(st.sampled_from([0.5, 1.0, 3.0])) for u in USERS}
    users = tuple(UserSpec(u, weight=weights[u]) for u in USERS)
    campaigns = []
    for c in scenario.campaigns:
        gang = draw(st.sampled_from([1, 1, 2, 3]))
        running = {n: r - r % gang for n, r in c.running.items() if r - r % gang}
        queued = {n: min(q, running.get(n, 0)) for n, q in c.queued.items() if min(q, running.get(n, 0))}
        succeeded = draw(st.none() | st.dictionaries(st.sampled_from(names), st.integers(0, 2)))
        cap = draw(st.dictionaries(st.sampled_from(names), st.integers(0, 12)))
        campaigns.append(replace(c, gang=gang, running=running, queued=queued, succeeded=succeeded, cap=cap))
    return Scenario(scenario.clusters, tuple(campaigns), classes, users, tuple(pools))


POLICY_RUNS = settings(max_examples=60, deadline=None)


@POLICY_RUNS
@given(with_policies(), st.sampled_from([0.1, 1.0]), st.sampled_from(["spread", "pack"]), st.sampled_from([0, 2]))
def test_with_every_policy_targets_fit_gangs_stay_whole_and_kills_stay_bounded(
        scenario: Scenario, fraction: float, placement: str, init_cap: int) -> None:
    allocation = allocate(scenario, fraction, init_cap=init_cap, placement=placement)
    by_id = {c.id: c for c in scenario.campaigns}
    kills, biggest = 0, 1
    for s in allocation.campaigns:
        spec = by_id[s.id]
        biggest = max(biggest, spec.gang)
        assert sum(n % spec.gang for n in s.start.values()) < spec.gang  # whole gangs, the last may be smaller
        for name, n in s.preempt.items():
            assert n % spec.gang == 0 and 0 < n <= spec.running.get(name, 0)
            kills += max(0, n - spec.queued.get(name, 0))
    assert kills <= allocation.preempt_cap + biggest - 1  # a gang goes whole: it may overshoot by less than one
    for cluster in scenario.clusters:
        held = sum((s.running.get(cluster.name, 0) - s.preempt.get(cluster.name, 0) + s.start.get(cluster.name, 0))
                   * by_id[s.id].cores_per_task for s in allocation.campaigns)
        assert held <= cluster.cores
    assert allocate(scenario, fraction, init_cap=init_cap, placement=placement) == allocation


@POLICY_RUNS
@given(with_policies())
def test_with_every_policy_applying_the_result_reaches_a_fixed_point(scenario: Scenario) -> None:
    for _ in range(40):
        allocation = allocate(scenario, 0.1, init_cap=2)
        if not any(s.preempt or s.start for s in allocation.campaigns):
            return
        scenario = next_cycle(scenario, allocation)
    raise AssertionError("still preempting or starting after 40 cycles")


@POLICY_RUNS
@given(with_policies())
def test_non_preemptable_work_only_uses_its_own_pools_clusters(scenario: Scenario) -> None:
    """DUCC: non-preemptable work "can never become a squatter"."""
    owner = {name: p.name for p in scenario.pools for name in p.clusters}
    for s, spec in zip(allocate(scenario).campaigns, sorted(scenario.campaigns, key=lambda c: c.id)):
        klass = scenario.class_of(spec)
        if klass.policy is not Policy.FAIR_SHARE or spec.test_mode or not spec.best_effort:
            assert all(owner.get(name) == klass.pool for name in s.clusters)
