"""Gather the grid's state into a fair-share scenario, allocate, and apply the result.

Each cycle, in one transaction: queue the prologues and epilogues the JDLs ask for, read the
scenario (:func:`gather`), run :func:`fairshare.allocate`, mark the youngest jobs of every
campaign above its share for preemption (nikita kills them at the end of the cycle, and their
tasks go back to the head of the bag), and let the workqueue scheduler take the started jobs'
tasks from the bags, never letting more of a campaign's jobs wait on a cluster than its tap.
A campaign set aside (:mod:`cigri.faults`) is left out of all of it, and one whose data makes
this step raise is set aside, its share of the transaction undone.
"""

from __future__ import annotations

import heapq
import logging
import re
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from cigri import bag, cluster_caps
from cigri import db as database
from cigri import faults, predictor
from cigri.backends import Capacity
from cigri.config import Config
from cigri.cycle_context import CycleContext
from cigri.db import campaigns as stored_campaigns
from cigri.db import clusters as stored_clusters
from cigri.db import jobs as stored_jobs
from cigri.db import tasks as stored_tasks
from cigri.db.events import refused_clusters
from cigri.grid import Grid
from cigri.metascheduler import fairshare, gangs, windows
from cigri.metascheduler.schedulers import finalize, test, workqueue
from cigri.states import TASK_OPEN, CampaignState, TaskState

log = logging.getLogger("cigri.metascheduler")
_NODE_LEVELS = {"nodes", "host", "network_address"}
_LEVELS = _NODE_LEVELS | {"cpu", "core", "resource_id"}
_PART = re.compile(r"^\s*(\w+)\s*=\s*(\d+)\s*$")
DEFAULT_MAX_WAITING = 100
Amount = TypeVar("Amount", int, float)  # cores or GB
Isolation = Callable[[int], AbstractContextManager[None]]  # one campaign's share of the step (CycleContext.isolated)


@dataclass(frozen=True)
class Gathered:
    """A scenario and the ids the metascheduler needs to apply its allocation."""

    scenario: fairshare.Scenario
    cluster_ids: Mapping[str, int]
    names: Mapping[int, str]  # campaign names, for ``cigri shares``
    room: Mapping[int, int]  # capped clusters: how many more jobs each takes (cigri.cluster_caps)
    refused: Mapping[int, Mapping[str, str]]  # campaign -> cluster of its JDL -> why it never runs its jobs


def schedule(ctx: CycleContext) -> dict[tuple[int, str], int]:
    """One metascheduler pass; return ``{(campaign, cluster): jobs started}``."""
    config = ctx.grid.config
    with database.write(ctx.grid.db) as conn:
        def isolated(campaign_id: int) -> AbstractContextManager[None]:
            return ctx.isolated("metascheduler", campaign_id=campaign_id, conn=conn)

        _queue_scripts(conn, ctx, isolated)
        gathered = gather(ctx.grid, ctx.capacities, database.now(), isolated)
        allocation = allocate(config, gathered.scenario)
        for share in allocation.campaigns:
            for cluster, count in share.preempt.items():
                marked = _preempt(conn, share.id, gathered.cluster_ids[cluster], count)
                log.info("campaign %s: preempting %s job(s) on %s (%s)", share.id, marked, cluster, share.reason)
        gangs.kill_whole(conn)  # fair share's, flood control's or a user's kill of one member ends its gang
        room = dict(gathered.room)
        started = _start(conn, ctx, gathered, allocation, room)
        singles = [c.id for c in gathered.scenario.campaigns if c.gang == 1]  # a gang's member is never replicated
        refused = refused_clusters(conn)  # no replica where the campaign's jobs were refused
        replicable = {campaign_id: {k: v for k, v in clusters.items() if k not in refused.get(campaign_id, ())}
                      for campaign_id, clusters in ctx.grid.campaign_properties(singles).items()}
        finalize.replicate(conn, _within(ctx.capacities, room), replicable,
                           {c.name: c.finalize for c in config.classes}, config.metascheduler.replica_delay)
    return started


def allocate(config: Config, scenario: fairshare.Scenario) -> fairshare.Allocation:
    """The pure allocation with the configuration's preemption brakes, initialization cap and placement."""
    settings = config.metascheduler
    return fairshare.allocate(scenario, settings.preempt_fraction, attrition_seconds=settings.preempt_horizon,
                              deadzone=settings.preempt_deadzone, starvation=settings.preempt_threshold,
                              init_cap=settings.init_cap, placement=settings.placement)


def gather(grid: Grid, capacities: Mapping[int, Capacity], now: float,
           isolated: Isolation = lambda _: nullcontext()) -> Gathered:
    """Read the grid into a scenario (inside the caller's transaction, if any); nothing is written
    but, in a cycle, what ``isolated`` does to a campaign whose data raises (it is left out).
    A campaign set aside (:mod:`cigri.faults`) is not in the scenario.

    A campaign holds its active jobs (queued ones included) not already marked for a kill, and
    may use the clusters its JDL names where its prologue has run and its type may run now; it
    may be preempted only while its type sends best-effort jobs wherever it runs or may run. A
    cluster offers cigri cores (:func:`_offer`), and memory where it says
    (:func:`_memory_offer`), counted in the same units as the holdings. A cluster left out of
    this cycle (unreachable or blacklisted) where cigri holds jobs is in the scenario as
    ``left_out``, offering exactly what they hold: they still run, so they count in their
    campaigns' shares and their users' allotments, and nothing starts or is killed there. A
    capped cluster offers no more free slots than its room (:mod:`cigri.cluster_caps`). A
    cluster where the campaign's owner has no login (:mod:`cigri.backends.identity`) is not
    one it may use.


    Where a campaign's class has an initialization cap (its own ``init_cap``, else
    ``metascheduler.init_cap``), its ``succeeded`` are its jobs that ended successfully on each
    cluster, and where some did and the class expands by doubling its ``cap`` is twice the jobs
    it holds there (DUCC: "twice the number of resources a job currently has"); without
    doubling, no cap: its full fair share at once.

    A campaign some of whose tasks failed and none succeeded yet is ``failing``: no one's jobs
    are killed to make room for it.
    """
    conn, config = grid.db.conn, grid.config
    room = cluster_caps.room(conn, now)
    offered = _within(capacities, room)
    cluster_names = stored_clusters.names(conn)
    set_aside = faults.set_aside_campaigns(conn)
    rows = [r for r in stored_campaigns.scheduled(conn) if r[0] not in set_aside]
    settings = grid.campaign_properties([r[0] for r in rows])
    costs: dict[int, tuple[int, float]] = {}  # (cores, memory GB) per task
    for row in rows:
        with isolated(row[0]):
            costs[row[0]] = task_cost(settings[row[0]])
    rows = [r for r in rows if r[0] in costs]
    held: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))  # campaign -> cluster -> jobs
    queued: dict[int, dict[int, int]] = defaultdict(lambda: defaultdict(int))  # of which still in a queue
    running_cores: dict[int, int] = defaultdict(int)  # per cluster
    queued_cores: dict[int, int] = defaultdict(int)
    running_memory: dict[int, float] = defaultdict(float)  # GB, per cluster
    queued_memory: dict[int, float] = defaultdict(float)
    for campaign_id, cluster_id, running, count in stored_jobs.held_tasks_per_pair(conn):
        if campaign_id not in costs:
            continue
        cores, memory = costs[campaign_id]
        held[campaign_id][cluster_id] += count
        if not running:
            queued[campaign_id][cluster_id] += count
        (running_cores if running else queued_cores)[cluster_id] += count * cores
        (running_memory if running else queued_memory)[cluster_id] += count * memory
    left_out = sorted(cid for cid in {*running_cores, *queued_cores} if cid not in capacities)
    clusters = tuple(fairshare.ClusterSpec(
        cluster_names[cid], _offer(running_cores[cid], cap.free_slots, queued_cores[cid]),
        _memory_offer(cap, running_memory[cid], queued_memory[cid]),
        cap.node_cores, None if cap.node_memory_mb is None else cap.node_memory_mb / 1024)
        for cid, cap in sorted(offered.items())) + tuple(fairshare.ClusterSpec(
            cluster_names[cid], running_cores[cid] + queued_cores[cid], running_memory[cid] + queued_memory[cid],
            left_out=True)
        for cid in left_out)
    limit = max(1, sum(c.cores for c in clusters))
    night = windows.is_night(config.metascheduler, now)
    ready = _ready_clusters(conn, settings)
    classes = {c.name for c in config.classes} or {"default"}
    refusals = {user: grid.refusals(user) for user in {r[2] for r in rows}}
    refused = {r[0]: {cluster_names[k]: why for k in settings[r[0]] if (why := refusals[r[2]].get(cluster_names[k]))}
               for r in rows}
    penalties = predictor.affinity_penalties(conn, [r[0] for r in rows], now)  # after flood kills
    throughputs = predictor.throughputs(conn, [r[0] for r in rows], now)
    gang = gangs.sizes(conn, [r[0] for r in rows])
    failing = stored_tasks.failing(conn, [r[0] for r in rows])
    init_cap = {r[0]: config.init_cap(r[4]) for r in rows}
    succeeded: dict[int, dict[int, int]] = defaultdict(dict)
    if any(init_cap.values()):
        for campaign_id, cluster_id, count in stored_campaigns.terminated_per_cluster(
                conn, [r[0] for r in rows if init_cap[r[0]]]):
            succeeded[campaign_id][cluster_id] = count
    campaigns = []
    for campaign_id, _, user, state, class_name, priority in rows:
        with isolated(campaign_id):  # its spec, or nothing
            values = settings[campaign_id]
            held_on = held.get(campaign_id, {})
            running = {cluster_names[k]: n for k, n in held_on.items()}
            waiting = {cluster_names[k]: n for k, n in queued.get(campaign_id, {}).items()}
            usable = [k for k in values if k in capacities and state == CampaignState.IN_TREATMENT
                      and k in ready.get(campaign_id, ())
                      and windows.job_type(values[k].get("type"), night) is not None
                      and cluster_names[k] not in refused[campaign_id]]
            # up to the cores
            pending = bag.count(conn, campaign_id, (TaskState.PENDING,), limit=limit) if usable else 0
            if not running and not pending:
                continue
            sent_as = {windows.job_type(values[k].get("type"), night) for k in {*usable, *held_on} if k in values}
            campaigns.append(fairshare.CampaignSpec(
                id=campaign_id, user=user, pending=pending, class_name=class_name if class_name in classes else None,
                cores_per_task=costs[campaign_id][0], memory_gb_per_task=costs[campaign_id][1], priority=priority,
                running=running, queued=waiting,
                paused=state == CampaignState.PAUSED,
                best_effort=sent_as <= {windows.BEST_EFFORT},  # its jobs are sent so now: a normal one is never killed
                test_mode=any(test.is_test_mode(values[k]) for k in usable),
                max_jobs_per_cluster={cluster_names[k]: cap for k in usable
                                      if (cap := test.job_cap(values[k])) is not None},
                clusters=tuple(cluster_names[k] for k in usable) if usable else tuple(running),
                affinity={cluster_names[k]: config.users.of(user).affinity.get(cluster_names[k], 0.0)
                          - penalties[(campaign_id, k)] for k in usable if (campaign_id, k) in penalties},
                throughput={cluster_names[k]: throughputs[(campaign_id, k)] for k in usable
                            if (campaign_id, k) in throughputs},
                gang=gang[campaign_id],
                succeeded={cluster_names[k]: n for k, n in succeeded[campaign_id].items() if k in cluster_names}
                if init_cap[campaign_id] else None,
                cap={cluster_names[k]: max(init_cap[campaign_id], 2 * held_on.get(k, 0))
                     for k, n in succeeded[campaign_id].items() if n and k in cluster_names}
                if config.expands_by_doubling(class_name) else {},
                failing=campaign_id in failing))
    known = {c.name for c in clusters}
    scenario = fairshare.Scenario(
        clusters=clusters, campaigns=tuple(campaigns),
        classes=tuple(fairshare.ClassSpec(
            name=c.name, priority=c.priority, weight=c.weight, policy=fairshare.Policy(c.policy),
            users=None if c.users is None else frozenset(c.users),
            clusters=None if c.clusters is None else tuple(n for n in c.clusters if n in known),
            default=c.name == config.default_class(), pool=c.pool,
            min_user_limit_percent=c.min_user_limit_percent, init_cap=c.init_cap) for c in config.classes),
        users=tuple(_user(config, name, known) for name in sorted({c.user for c in campaigns})),
        pools=tuple(fairshare.PoolSpec(p.name, tuple(n for n in p.clusters if n in known), p.parent)
                    for p in config.pools))
    return Gathered(scenario, {name: cid for cid, name in cluster_names.items()}, {r[0]: r[1] for r in rows}, room,
                    {campaign_id: why for campaign_id, why in refused.items() if why})


def _within(capacities: Mapping[int, Capacity], room: Mapping[int, int]) -> dict[int, Capacity]:
    """The capacities with no more free slots than each capped cluster's room for new jobs."""
    return {cid: replace(cap, free_slots=min(cap.free_slots, room[cid])) if cid in room else cap
            for cid, cap in capacities.items()}


def _user(config: Config, name: str, clusters: set[str]) -> fairshare.UserSpec:
    user = config.users.of(name)
    return fairshare.UserSpec(name, allotment_cores=user.allotment, allotment_memory_gb=user.allotment_memory_gb,
                              affinity={k: v for k, v in user.affinity.items() if k in clusters}, weight=user.weight)


def _offer(running: Amount, free: Amount, queued: Amount) -> Amount:
    """What a cluster offers cigri of a resource: what cigri's running jobs hold there, plus
    what is free or, when more, what cigri's queued jobs wait for. Not less: a full cluster's
    queued jobs would not fit the cluster they wait on, and the fill would place them elsewhere
    and kill running jobs there. Not both: a queued job takes free resources at the cluster's
    next scheduling pass (OAR's comes seconds later, and they show free until then), so counting
    both let every cycle send another wave and left the cluster's queue order, not the shares,
    to choose whose jobs ran."""
    return running + max(free, queued)


def _memory_offer(capacity: Capacity, running_gb: float, queued_gb: float) -> float | None:
    """GB a cluster offers cigri (:func:`_offer`), its running jobs' only as far as the cluster
    counts them held: Slurm does only where memory is a consumable resource (``CR_Core_Memory``;
    not with ``CR_Core``, where its free memory already includes them). None: the cluster does
    not say."""
    if capacity.free_memory_mb is None:
        return None
    counted = min(running_gb * 1024, capacity.allocated_memory_mb)
    return _offer(counted / 1024, capacity.free_memory_mb / 1024, queued_gb)


def task_cost(values: Mapping[int, Mapping[str, Any]]) -> tuple[int, float]:
    """``(cores, memory GB)`` one task asks for, the largest over its clusters. Cores: the
    product of the levels of its OAR ``resources`` (a request cigri cannot read counts as one
    core). Memory: the JDL's ``memory`` (per node, as Slurm's ``--mem``) times its nodes."""
    most_cores, most_memory = 1, 0.0
    for settings in values.values():
        cores = nodes = 1
        for part in re.split(r"[/,]", str(settings.get("resources", ""))):
            match = _PART.match(part)
            if match and match[1] in _LEVELS:
                cores *= max(1, int(match[2]))
                if match[1] in _NODE_LEVELS:
                    nodes *= max(1, int(match[2]))
        most_cores = max(most_cores, cores)
        most_memory = max(most_memory, int(settings.get("memory", 0)) * nodes / 1024)
    return most_cores, most_memory


def _ready_clusters(conn: sqlite3.Connection, settings: dict[int, dict[int, dict[str, Any]]]) -> dict[int, set[int]]:
    """Per campaign, the clusters where tasks may run: no prologue asked, or it terminated,
    colombo has not blacklisted the cluster for the campaign, and the cluster has not refused
    its jobs (:func:`refused_clusters`)."""
    ready: dict[int, set[int]] = {}
    done = stored_campaigns.prologues_done(conn)
    blacklisted = stored_campaigns.blacklisted_pairs(conn)
    blacklisted |= {(c, k) for c, clusters in refused_clusters(conn).items() for k in clusters}
    for campaign_id, clusters in settings.items():
        ready[campaign_id] = {k for k, values in clusters.items()
                              if (not values.get("prologue") or (campaign_id, k) in done)
                              and (campaign_id, k) not in blacklisted}
    return ready


def _queue_scripts(conn: sqlite3.Connection, ctx: CycleContext, isolated: Isolation) -> None:
    """Queue each prologue before a cluster's first task, and each epilogue after the last, on
    the clusters that take the campaign's jobs."""
    owners = {c: user for c, user in stored_campaigns.owners_in_treatment(conn) if c not in ctx.set_aside}
    refusals: dict[str, set[int]] = {}  # user -> the clusters that refuse their jobs
    refused = refused_clusters(conn)  # campaign -> the clusters that refused its jobs
    queued = stored_campaigns.scripts_queued(conn)
    for campaign_id, clusters in ctx.grid.campaign_properties(list(owners)).items():
        with isolated(campaign_id):
            if not any(values.get("prologue") or values.get("epilogue") for values in clusters.values()):
                continue
            open_tasks = bag.count(conn, campaign_id, TASK_OPEN, limit=1) > 0
            if owners[campaign_id] not in refusals:
                refusals[owners[campaign_id]] = ctx.grid.refused_cluster_ids(owners[campaign_id])
            for cluster_id, values in clusters.items():
                kind = "prologue" if open_tasks else "epilogue"
                if cluster_id in ctx.capacities and values.get(kind) and (campaign_id, cluster_id, kind) not in queued \
                        and cluster_id not in refusals[owners[campaign_id]] \
                        and cluster_id not in refused.get(campaign_id, ()):
                    workqueue.add_script_job(conn, campaign_id, cluster_id, kind)


def _preempt(conn: sqlite3.Connection, campaign_id: int, cluster_id: int, count: int) -> int:
    """Mark the campaign's ``count`` youngest jobs on the cluster (queued ones first)."""
    job_ids = stored_jobs.youngest(conn, campaign_id, cluster_id, count)
    stored_jobs.mark_preempted(conn, job_ids)
    return len(job_ids)


def _start(conn: sqlite3.Connection, ctx: CycleContext, gathered: Gathered,
           allocation: fairshare.Allocation, cluster_room: dict[int, int]) -> dict[tuple[int, str], int]:
    """Take each campaign's started jobs from its bag, then queue some ahead on the clusters.

    No more of a campaign's jobs ever wait on a cluster than its tap. Beyond the free cores,
    each cluster takes up to its queue depth of cigri jobs (:func:`_queue_depth`: a slot freed
    between two cycles finds a job ready), handed out to the fair-share campaigns in
    proportion to their targets there: a campaign holds at most its target plus its slice of
    the depth, so one whose tap is full does not hand its slice to the others. A cluster that
    offers cigri nothing now splits its queue equally among the campaigns that may use it. On a
    cluster where this cycle preempts, nobody queues beyond its target: those jobs would be the
    next cycle's kills (a campaign's queued job there started on a freed core and was killed
    again, every cycle). No job is created beyond a capped cluster's room, which this spends.
    A gang campaign takes whole gangs (its tap lets at least one wait) and never queues ahead:
    its jobs start together, on cores the allocation found for all of them.
    """
    taps = stored_campaigns.open_taps(conn)
    waiting = stored_jobs.queued_tasks(conn)
    specs = {c.id: c for c in gathered.scenario.campaigns}
    share_of = {s.id: s for s in allocation.campaigns}
    tap_initial = ctx.grid.config.runner.tap_initial
    started: dict[tuple[int, str], int] = {}

    def take(campaign_id: int, cluster: str, count: int) -> int:
        key, gang = (campaign_id, gathered.cluster_ids[cluster]), specs[campaign_id].gang
        tap = taps.get(key, tap_initial)
        tap = max(tap, gang) if tap else 0  # an open tap lets a whole gang wait; a closed one, nothing
        allowed = min(count, tap - waiting.get(key, 0), cluster_room.get(key[1], count))
        if gang > 1:  # whole gangs; only the allocation's own last gang, whole, may be smaller
            count = allowed if allowed == count < gang else allowed - allowed % gang
        else:
            count = allowed
        taken = workqueue.take_tasks(conn, campaign_id, key[1], count) if count > 0 else 0
        waiting[key] = waiting.get(key, 0) + taken
        if key[1] in cluster_room:
            cluster_room[key[1]] -= taken
        if taken:
            started[(campaign_id, cluster)] = started.get((campaign_id, cluster), 0) + taken
        return taken

    for share in sorted(allocation.campaigns, key=lambda s: (not s.test_mode, s.id)):  # test mode first (CiGri)
        for name, count in share.start.items():
            take(share.id, name, count)
    contested = {use.name for use in allocation.clusters if use.preempt}
    for cluster in (c for c in gathered.scenario.clusters if not c.left_out):
        cluster_id = gathered.cluster_ids[cluster.name]
        depth = _queue_depth(ctx, cluster_id)
        budget = depth - sum(n for (_, k), n in waiting.items() if k == cluster_id)
        targets = {c: n for c, n in _queue_weights(allocation, cluster.name, specs).items() if specs[c].gang == 1}
        total = sum(targets.values())
        room: dict[int, int] = {}
        for c in targets:
            if specs[c].pending:  # counted only up to the cores: any pending task may queue
                target = share_of[c].target.get(cluster.name, 0)
                quota = target if cluster.name in contested else target + -(-depth * targets[c] // total)
                cap = specs[c].max_jobs_per_cluster.get(cluster.name, quota)
                if (succeeded := specs[c].succeeded) is not None:  # DUCC's caps: none ahead before a success
                    cap = min(cap, specs[c].cap.get(cluster.name, quota) if succeeded.get(cluster.name) else target)
                held = specs[c].running.get(cluster.name, 0) + started.get((c, cluster.name), 0)
                room[c] = min(quota, cap) - held
        ahead = {c: 0 for c, n in room.items() if n > 0}
        while budget > 0 and ahead:  # each round ends with the budget spent or a campaign out
            for campaign_id, count in _weighted_split(budget, ahead, targets, room).items():
                taken = take(campaign_id, cluster.name, count)
                ahead[campaign_id] += taken
                budget -= taken
                if taken < count or ahead[campaign_id] >= room[campaign_id]:  # bag empty or tap full
                    del ahead[campaign_id]
    for (campaign_id, name), taken in started.items():
        log.info("campaign %s: %s new job(s) on %s", campaign_id, taken, name)
    return started


def _queue_depth(ctx: CycleContext, cluster_id: int) -> int:
    """How many cigri jobs may queue on a cluster beyond its free slots: the admin's
    ``max_waiting``, else :data:`DEFAULT_MAX_WAITING` plus the jobs expected to end there within
    a cycle period (a queue the cluster empties within a cycle floods nobody; without it, the
    cores 1-minute tasks free between two cycles of a 1,000-core cluster sat idle)."""
    options = ctx.cluster_options(cluster_id)
    if "max_waiting" in options:
        return int(options["max_waiting"])
    return DEFAULT_MAX_WAITING + sum(n for (_, k), n in ctx.drains.items() if k == cluster_id)


def _weighted_split(budget: int, ahead: dict[int, int], targets: dict[int, int], room: dict[int, int]) -> dict[int, int]:
    """Hand ``budget`` queue places out one at a time to the campaign least ahead for its
    weight (ties: the oldest), each up to its room; one SQL take per campaign, not per place."""
    plan = dict.fromkeys(ahead, 0)
    heap = [(ahead[c] / targets[c], c) for c in ahead]
    heapq.heapify(heap)
    while budget > 0 and heap:
        _, c = heapq.heappop(heap)
        plan[c] += 1
        budget -= 1
        if ahead[c] + plan[c] < room[c]:
            heapq.heappush(heap, ((ahead[c] + plan[c]) / targets[c], c))
    return {c: n for c, n in plan.items() if n}


def _queue_weights(allocation: fairshare.Allocation, cluster: str,
                   specs: Mapping[int, fairshare.CampaignSpec]) -> dict[int, int]:
    """Who queues ahead on a cluster, weighted by its target there; on a cluster where nobody
    has a target, every campaign that may use it, equally, if its task would wait there: one
    that would start at once on cores the allocation left free would undo its placement (with
    ``placement = "pack"``, the whole cluster kept for a wide task or a gang). Only fair-share
    campaigns: a job queued beyond the target of a fixed-share or reserve campaign would exceed
    its user's allotment the moment it starts, and nothing would take it back."""
    eligible = {share.id: share.target.get(cluster, 0) for share in allocation.campaigns
                if share.policy is fairshare.Policy.FAIR_SHARE and not share.test_mode and cluster in share.clusters}
    if not any(eligible.values()):
        use = next(u for u in allocation.clusters if u.name == cluster)
        free = use.cores - use.target_cores
        return {c: 1 for c in eligible if specs[c].cores_per_task > free}
    return {c: target for c, target in eligible.items() if target}
