"""Fair shares of the grid: how many jobs each campaign should hold on each cluster.

A pure function, scenario in, targets out: no database, no clock, no I/O. The metascheduler
gathers a :class:`Scenario`, calls :func:`allocate` and applies the result; ``cigri shares
--scenario FILE --json`` runs the same function on a hypothetical grid.

Scenario (JSON, read by :func:`scenario_from_json`; unknown keys are errors)::

    {"clusters":  [{"name": "c1", "cores": 64, "memory_gb": 256}],
     "classes":   [{"name": "default", "priority": 10, "weight": 1, "policy": "fair_share"}],
     "users":     [{"name": "alice", "allotment": null}],
     "campaigns": [{"id": 1, "user": "alice", "class": "default", "pending": 40,
                    "cores_per_task": 1, "memory_gb_per_task": 1, "max_jobs": null,
                    "running": {"c1": 32}, "priority": 0, "test_mode": false}]}

- ``clusters`` (required): ``name``, ``cores`` (what cigri may use there, its running jobs
  included), ``memory_gb`` (absent or null: memory is not limited there, and memory only
  counts in shares when every cluster declares it), ``node_cores`` / ``node_memory_gb``
  (optional size of one node, used by ``reserve`` classes), ``left_out`` (true: cigri cannot
  reach it this cycle; the jobs campaigns hold there keep their place and count in every share
  and allotment, and nothing starts or is killed there). A cluster may have 0 cores.
- ``pools`` (optional; DUCC's nodepools): ``name``, ``clusters`` (a cluster is in at most one
  pool), ``parent`` (absent or null: a subpool of the whole grid).
- ``classes`` (optional; absent: one fair-share class named ``default``): ``name``,
  ``priority`` (order of evaluation: lower numbers are served first; default 0), ``weight``
  (> 0, default 1), ``policy`` = ``fair_share`` (preemptable) | ``fixed_share`` (never
  preempted, subject to allotment) | ``reserve`` (never preempted, whole nodes of exactly
  the declared size), ``users`` (allowed users; absent: everyone), ``clusters`` (allowed
  clusters; absent: all), ``default`` (true on at most one class; if none is marked, the
  class named ``default`` is the default), ``pool`` (absent: the whole grid's),
  ``min_user_limit_percent`` (YARN's; fair_share classes only), ``init_cap`` (DUCC's
  initialization cap for its campaigns; absent or null: ``allocate``'s).
- ``users`` (optional registry; unlisted users have no allotment and no affinity): ``name``,
  ``allotment`` = null | cores | ``{"cores": n, "memory_gb": m}`` (the most the user may hold
  in non-preemptable classes), ``affinity`` = ``{cluster: weight}`` (higher is preferred),
  ``weight`` (its share against the class's other users; default 1).
- ``campaigns`` (required): ``id``, ``user``, ``pending`` (tasks in the bag), ``class``
  (absent or null: the default class), ``cores_per_task`` (default 1),
  ``memory_gb_per_task`` (default 0), ``max_jobs`` = null | n (whole grid) |
  ``{cluster: n}``, ``running`` = ``{cluster: jobs}`` (every cluster named must be listed),
  ``priority`` (higher is served first among the same user's campaigns, and preempted last;
  default 0), ``test_mode``, ``paused`` (its running jobs are never preempted, and its
  ``pending`` tasks start nowhere), ``best_effort`` (default true; false: its jobs are normal
  ones, which keep their fair share but are never preempted), ``clusters`` (usable clusters in
  the JDL's order; absent: all),
  ``affinity`` (overrides the user's, per cluster, for new jobs only: the live cigri puts the
  predictor's flood penalties here, and a penalty must not move running jobs), ``throughput``
  = ``{cluster: predicted jobs per hour}``, ``gang`` (its tasks start this many at a time on
  one cluster; default 1), ``succeeded`` = ``{cluster: jobs ended successfully}`` (absent:
  past its start, no initialization cap), ``cap`` = ``{cluster: n}`` (its expand-by-doubling
  cap this cycle; absent on a cluster: its fair share there at once, as DUCC without
  expand-by-doubling), ``failing`` (its latest jobs all failed: it keeps its fair share of the
  free cores, but no one's jobs are killed for it; default false).

Output (:func:`allocation_to_json`, one JSON value): ``campaigns`` by id, each with ``id``,
``user``, ``class``, ``policy``, ``test_mode``, ``demand`` (pending + running), ``running``
(its jobs running now on each cluster), ``queued`` (those it holds in a cluster's queue: the
input's ``running`` is both), ``target`` (jobs it should hold on each cluster once converged,
running and queued ones included),
``preempt`` (running jobs to kill there this cycle), ``start`` (jobs to start there this cycle,
after the kills), ``fair_share`` = ``{"jobs": n, "dominant": share of the grid}`` at target, and
``reason`` ("; "-joined: "test mode", "paused: never preempted", "fixed_share: never preempted",
"normal jobs: never preempted", "gang of N", "capped by demand",
"capped by max_jobs", "capped by allotment", "at fair share", "above share: preempting N [of E]",
"above share by E: preemption cap reached", "above share by E: N expected to end by themselves",
"above share by E: within the preemption deadzone", "above share by E: its user's own campaigns
wait for these to end", "above share by E: no one below share is starved (preempt_threshold)",
"above share by E: those below share are failing",
"below share: preempting N", "initialization cap on C: N job(s) until one ends successfully
there", "expanding by doubling on C: N job(s) this cycle", "squatting in pool P: residents
first", "at its user limit (min_user_limit_percent)", "waiting for older users
(min_user_limit_percent)", ...); then ``classes`` (by priority, then name) and ``users``,
each summing its campaigns' ``campaigns``, ``demand``, ``running``, ``queued``, ``target``,
``start`` and ``preempt`` jobs, with ``held`` (dominant share of the grid its jobs hold, running
or queued) and ``fair_share`` at target; ``clusters`` (capacity, jobs running, queued, at
target, started and killed there, the cores and memory the running ones use and the targets'
``left_out``), ``preempt_fraction`` and
``preempt_cap``. Per-cluster maps omit zeros.

How the targets are found (DUCC's how-much, Armada's cost and placement, DRF):

1. A job costs ``cores_per_task`` cores and ``memory_gb_per_task`` GB; shares compare the
   dominant resource (the larger fraction of the grid's cores or memory), so a campaign that
   cannot use more of one resource leaves it to the others (Manta's min-of-shares would idle it).
2. Running jobs of non-preemptable campaigns (fixed_share, reserve, test mode, paused, normal
   jobs: only best-effort jobs of fair-share classes are preempted) stay where they are, and
   so does every job on a left-out cluster. Running fair-share jobs are evicted in thought and
   re-placed first on their own cluster (Armada), so nothing moves unless fairness asks for it.
3. Test-mode campaigns come first, one job per usable cluster (CiGri 2009; their jobs count
   in their user's and class's shares). Then classes by
   priority: in each priority level, non-preemptable campaigns are filled in turn (campaign
   priority, then id, up to their allotment), then the fair-share classes by progressive
   filling: the next job goes to the class whose dominant share divided by its weight would be
   smallest after taking it, inside it to the user with the smallest share, inside the user to
   the campaign with the smallest share among those of the highest priority. A campaign stops
   at its demand (pending + running), ``max_jobs``, allotment, or when no usable cluster fits
   its next task; what it cannot use goes on to the others, so no slot stays idle while a
   campaign that may use it has tasks (work conservation).
4. Placement of each job ("what of"): the highest user affinity first; among equals a
   cluster where the campaign has a running job to re-place or where a new job displaces
   nobody's running job, then the highest campaign affinity for a new job (the user's, which a
   campaign may lower); then a cluster where the campaign has a running job to re-place (the
   one where it runs most), then one the user already has to itself, then an unused one
   (Armada's per-queue packing, so preemption stays between few users), then the best
   predicted throughput, the most room (``placement = "pack"``: the least room that fits,
   Armada's smallest fit), and the JDL's order.
5. The seeds' other policies (docs/policies.md), each off unless switched on: with pools, every
   pool is filled with its residents first (the campaigns of its classes), then preemptable
   campaigns squat in their pool's subpools on what is left, and squatters are killed first;
   a campaign with no success yet on a cluster holds at most ``init_cap`` jobs there, and after
   one at most its ``cap``; a gang campaign takes whole gangs, on one cluster each, counted
   whole in its share, and is killed by whole gangs (the last kill may pass the cap by less
   than a gang); a user's share inside its class is in proportion to its ``weight``; in a class
   with ``min_user_limit_percent`` the users are first filled up to YARN's user limits (a
   fraction of the class's share found by a first fill), in the order of their oldest
   campaign, then as usual.

Rounding: jobs are whole, and the fill hands them out one at a time, each checked against the
space left, so no fractional share is ever rounded and a cluster is never overcommitted. For
equal-cost jobs this is the highest-averages (D'Hondt) apportionment of the water level, which
is within a job of largest-remainder rounding in the usual cases but may give a last job to a
larger weight instead. Equal candidates are separated by who is re-placing a running job
(fewer kills), then by the lower campaign id; the input order never matters.

Preemption: a fair-share campaign holding more than its target on a cluster gives jobs back only
where others need the space (their targets there exceed the free space); otherwise it keeps them
until they end. Only another class, another user or a higher-priority campaign of the same user
counts as others (YARN-4945): a user's equal campaigns rebalance as jobs end. The kills go first
to the class evaluated last, then the user furthest above its share (YARN's user limit), then
the lowest campaign priority, then the campaign furthest above its share, then the youngest
campaign; at most ``ceil(fraction x running jobs)`` running jobs per cycle, counting the
clusters cigri reaches this cycle (default 10 %; the queued ones, killed first, cost nothing). Three brakes
(YARN's): the campaign keeps up to ``deadzone`` of its target there beyond it (killed down to
that edge only), above-target jobs expected to end within ``attrition_seconds`` by the
campaign's ``throughput`` free space without a kill, and only a campaign holding less than
``starvation`` of its target (over all its clusters) has jobs killed for it. The function gives
counts: nikita kills the youngest jobs, and their tasks return to the head of the bag before the
runner starts anything.
``start`` hands the space this cycle really frees to those below their targets, by the same fill
capped at the targets, so ``running - preempt + start`` always fits, and repeated cycles
converge. A kill can move a task to another cluster when that lets a campaign restricted to the
first one run.
"""

from __future__ import annotations

import functools
import heapq
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match

_EPSILON = 1e-9
_INF = math.inf

Vector = tuple[float, float]  # (cores, memory in GB)
_ZERO: Vector = (0.0, 0.0)


class Policy(StrEnum):
    FAIR_SHARE = "fair_share"
    FIXED_SHARE = "fixed_share"
    RESERVE = "reserve"


class Placement(StrEnum):
    """Where a new job goes among equally good clusters: the one with the most room left
    (``spread``) or the smallest one it fits (``pack``, Armada's: whole clusters stay free for
    wide tasks)."""

    SPREAD = "spread"
    PACK = "pack"


@dataclass(frozen=True)
class PoolSpec:
    """A named set of clusters (DUCC's nodepool); pools nest through ``parent`` (None: a subpool
    of the whole grid) and never share a cluster."""

    name: str
    clusters: tuple[str, ...]
    parent: str | None = None


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    cores: int
    memory_gb: float | None = None  # None: memory is not limited there
    node_cores: int | None = None  # one node's size: a reserve job must ask for exactly this
    node_memory_gb: float | None = None
    left_out: bool = False  # unreachable or blacklisted this cycle: its jobs count, nothing moves there


@dataclass(frozen=True)
class ClassSpec:
    name: str
    priority: int = 0  # lower is evaluated first
    weight: float = 1.0
    policy: Policy = Policy.FAIR_SHARE
    users: frozenset[str] | None = None  # None: every user
    clusters: tuple[str, ...] | None = None  # None: every cluster
    default: bool = False
    pool: str | None = None  # its pool; None: the whole grid's (the clusters in no pool)
    min_user_limit_percent: float | None = None  # YARN's: the least share of the class a user is served
    init_cap: int | None = None  # DUCC's initialization cap for its campaigns; None: allocate's


@dataclass(frozen=True)
class UserSpec:
    name: str
    allotment_cores: int | None = None  # most cores held in non-preemptable classes
    allotment_memory_gb: float | None = None
    affinity: Mapping[str, float] = field(default_factory=dict)
    weight: float = 1.0  # its share inside a class, against the class's other users


@dataclass(frozen=True)
class CampaignSpec:
    id: int
    user: str
    pending: int
    class_name: str | None = None  # None: the default class
    cores_per_task: int = 1
    memory_gb_per_task: float = 0.0
    max_jobs: int | None = None  # over the whole grid
    max_jobs_per_cluster: Mapping[str, int] = field(default_factory=dict)
    running: Mapping[str, int] = field(default_factory=dict)  # jobs it holds, queued ones included
    queued: Mapping[str, int] = field(default_factory=dict)  # of those, the ones still waiting in a queue
    priority: int = 0  # higher is served first among the user's campaigns
    test_mode: bool = False
    paused: bool = False  # its running jobs go on and are never preempted; it starts nothing
    best_effort: bool = True  # its jobs are sent best-effort; normal jobs are never preempted
    clusters: tuple[str, ...] | None = None  # usable clusters in the JDL's order; None: all
    affinity: Mapping[str, float] = field(default_factory=dict)  # overrides the user's
    throughput: Mapping[str, float] = field(default_factory=dict)  # predicted jobs per hour
    gang: int = 1  # its tasks start this many at a time on one cluster, all or none
    succeeded: Mapping[str, int] | None = None  # jobs ended successfully per cluster; None: past its start
    cap: Mapping[str, int] = field(default_factory=dict)  # expand-by-doubling: most jobs per cluster now
    failing: bool = False  # its latest jobs all failed: it takes free cores, never another's

    @property
    def demand(self) -> int:
        """Jobs it could hold: its running ones, plus its pending tasks unless it is paused."""
        return (0 if self.paused else self.pending) + sum(self.running.values())


_IMPLICIT_CLASS = ClassSpec("default")


@dataclass(frozen=True)
class Scenario:
    """The grid as the allocation sees it; references are checked when it is built."""

    clusters: tuple[ClusterSpec, ...]
    campaigns: tuple[CampaignSpec, ...]
    classes: tuple[ClassSpec, ...] = ()
    users: tuple[UserSpec, ...] = ()
    pools: tuple[PoolSpec, ...] = ()

    def __post_init__(self) -> None:
        clusters = _unique("clusters", (c.name for c in self.clusters), "name")
        classes = _unique("classes", (c.name for c in self.classes), "name") or {_IMPLICIT_CLASS.name}
        _unique("users", (u.name for u in self.users), "name")
        _unique("campaigns", (c.id for c in self.campaigns), "id")
        _check_pools(self.pools, clusters)
        pools = {p.name for p in self.pools}
        for i, klass in enumerate(self.classes):
            _known(f"classes[{i}].clusters", klass.clusters or (), clusters)
            if klass.default and any(c.default for c in self.classes[:i]):
                raise ValueError(f"classes[{i}].default: only one class may be the default")
            if klass.pool is not None and klass.pool not in pools:
                raise ValueError(f"classes[{i}].pool: unknown pool {klass.pool!r}")
            if klass.init_cap is not None and klass.init_cap < 0:
                raise ValueError(f"classes[{i}].init_cap: {klass.init_cap} is not >= 0")
            if klass.min_user_limit_percent is not None and klass.policy is not Policy.FAIR_SHARE:
                raise ValueError(f"classes[{i}].min_user_limit_percent: only a fair_share class shares among users")
        for i, user in enumerate(self.users):
            _known(f"users[{i}].affinity", user.affinity, clusters)
        for i, campaign in enumerate(self.campaigns):
            where = f"campaigns[{i}]"
            if campaign.class_name is None and self.default_class is None:
                raise ValueError(f"{where}.class: missing, and no class is the default")
            if campaign.class_name is not None and campaign.class_name not in classes:
                raise ValueError(f"{where}.class: unknown class {campaign.class_name!r}")
            for name in ("clusters", "running", "queued", "max_jobs_per_cluster", "affinity", "throughput",
                         "succeeded", "cap"):
                _known(f"{where}.{'max_jobs' if name == 'max_jobs_per_cluster' else name}",
                       getattr(campaign, name) or (), clusters)
            for name, count in campaign.queued.items():
                if count > campaign.running.get(name, 0):
                    raise ValueError(f"{where}.queued.{name}: {count} queued of {campaign.running.get(name, 0)} held")

    @property
    def default_class(self) -> ClassSpec | None:
        if not self.classes:
            return _IMPLICIT_CLASS
        marked = [c for c in self.classes if c.default] or [c for c in self.classes if c.name == "default"]
        return marked[0] if marked else None

    def class_of(self, campaign: CampaignSpec) -> ClassSpec:
        if campaign.class_name is None:
            default = self.default_class
            assert default is not None  # checked in __post_init__
            return default
        return next((c for c in self.classes if c.name == campaign.class_name), _IMPLICIT_CLASS)

    def user(self, name: str) -> UserSpec:
        return next((u for u in self.users if u.name == name), UserSpec(name))


def _unique(where: str, keys: Iterable[Any], key: str) -> set[Any]:
    seen: set[Any] = set()
    for i, value in enumerate(keys):
        if value in seen:
            raise ValueError(f"{where}[{i}].{key}: duplicate {value!r}")
        seen.add(value)
    return seen


def _known(where: str, names: Iterable[str], clusters: set[str]) -> None:
    for name in names:
        if name not in clusters:
            raise ValueError(f"{where}.{name}: unknown cluster")


def _check_pools(pools: Sequence[PoolSpec], clusters: set[str]) -> None:
    """Pools have known clusters, none in two pools, and parents that nest without a loop."""
    _unique("pools", (p.name for p in pools), "name")
    parents = {p.name: p.parent for p in pools}
    owner: dict[str, str] = {}
    for i, pool in enumerate(pools):
        _known(f"pools[{i}].clusters", pool.clusters, clusters)
        for name in pool.clusters:
            if owner.setdefault(name, pool.name) != pool.name:
                raise ValueError(f"pools[{i}].clusters: {name!r} is already in pool {owner[name]!r}; "
                                 "pools never overlap")
        if pool.parent is not None and pool.parent not in parents:
            raise ValueError(f"pools[{i}].parent: unknown pool {pool.parent!r}")
        seen, above = {pool.name}, pool.parent
        while above is not None:
            if above in seen:
                raise ValueError(f"pools[{i}].parent: pools nest in a loop through {above!r}")
            seen.add(above)
            above = parents[above]


@dataclass(frozen=True)
class CampaignShare:
    """One campaign's result; per-cluster maps omit zeros."""

    id: int
    user: str
    class_name: str
    policy: Policy
    test_mode: bool
    demand: int
    clusters: tuple[str, ...]  # where it may run: usable, allowed by its class, of a reservation's node size
    running: Mapping[str, int]  # jobs running now
    queued: Mapping[str, int]  # jobs it holds in a cluster's queue
    target: Mapping[str, int]  # jobs to hold once converged, running and queued ones included
    start: Mapping[str, int]  # new jobs this cycle: running - preempt + start fits now
    preempt: Mapping[str, int]  # running jobs to kill this cycle
    fair_share_jobs: int
    fair_share_dominant: float  # dominant-resource share of the grid at target
    reason: str


@dataclass(frozen=True)
class GroupShare:
    """A class's or a user's campaigns summed: jobs, and the dominant shares of the grid that
    its jobs hold (running or queued) and that its targets give it (its fair share)."""

    name: str
    campaigns: int
    demand: int
    running: int
    queued: int
    target: int
    start: int
    preempt: int
    held_dominant: float
    fair_share_dominant: float


@dataclass(frozen=True)
class ClusterUse:
    """What the campaigns hold on a cluster now and at target, in jobs and resources."""

    name: str
    cores: int
    memory_gb: float | None
    running: int
    queued: int
    running_cores: int
    running_memory_gb: float
    target: int
    target_cores: int
    target_memory_gb: float
    start: int
    preempt: int
    left_out: bool


@dataclass(frozen=True)
class Allocation:
    campaigns: tuple[CampaignShare, ...]  # by id
    classes: tuple[GroupShare, ...]  # by priority, then name (the implicit ``default`` if none)
    users: tuple[GroupShare, ...]  # by name, those with campaigns
    clusters: tuple[ClusterUse, ...]
    preempt_fraction: float
    preempt_cap: int


def allocate(scenario: Scenario, preempt_fraction: float = 0.10, *, attrition_seconds: float = 0.0,
             deadzone: float = 0.0, starvation: float = 1.0, init_cap: int = 0,
             placement: Placement | str = Placement.SPREAD) -> Allocation:
    """Targets, kills and starts for every campaign; deterministic (ties go to the lower id).

    ``init_cap`` (DUCC's initialization cap; 0: none): a campaign holds at most this many jobs
    on a cluster where its ``succeeded`` says none of its jobs ended successfully yet (a gang:
    at least one gang), unless its class sets its own. ``placement``: see :class:`Placement`.

    Three brakes on preemption, all YARN's: ``attrition_seconds`` (``preempt_horizon``): the
    above-target jobs that a campaign's ``throughput`` says will end by themselves within it
    free space without a kill (natural termination); ``deadzone``: a campaign may hold this
    fraction of its target on a cluster (rounded down) beyond it before it is preempted there
    (max_ignored_over_capacity), so kills do not chase one-job rounding moves of the targets;
    ``starvation`` (``preempt_threshold``): jobs are killed for a campaign only while it holds
    less than this fraction of its target (fairSharePreemptionThreshold), and then up to all of
    it; above, it takes the space others' jobs free as they end. The defaults brake nothing:
    the seeds' worked examples preempt to the fair share."""
    if not 0 <= preempt_fraction <= 1:
        raise ValueError(f"preempt_fraction: {preempt_fraction} is not between 0 and 1")
    if not 0 <= starvation <= 1:
        raise ValueError(f"starvation: {starvation} is not between 0 and 1")
    if not 0 <= attrition_seconds < _INF:
        raise ValueError(f"attrition_seconds: {attrition_seconds} is not a finite number >= 0")
    if not 0 <= deadzone < _INF:
        raise ValueError(f"deadzone: {deadzone} is not a finite number >= 0")
    if isinstance(init_cap, bool) or not isinstance(init_cap, int) or init_cap < 0:
        raise ValueError(f"init_cap: {init_cap!r} is not an integer >= 0")
    plan = _Plan(scenario, init_cap, Placement(placement))
    none = {k.id: [0] * plan.size for k in plan.campaigns}
    running = {k.id: plan.counts(k.spec.running) for k in plan.campaigns}
    frozen = {k.id: [n if plan.left_out[c] else 0 for c, n in enumerate(running[k.id])] for k in plan.campaigns}
    movable = {k.id: [r - f for r, f in zip(running[k.id], frozen[k.id])] for k in plan.campaigns}

    def ideal_fill(limits: Mapping[tuple[str, str], float]) -> _Fill:
        fill = _Fill(plan, pinned={k.id: frozen[k.id] if k.preemptable else running[k.id] for k in plan.campaigns},
                     evicted={k.id: movable[k.id] if k.preemptable else none[k.id] for k in plan.campaigns},
                     cluster_caps={k.id: k.cluster_caps for k in plan.campaigns},
                     total_caps={k.id: k.total_cap for k in plan.campaigns}, limits=limits)
        fill.run()
        return fill

    ideal = ideal_fill({})
    if plan.limited:  # YARN's user limits are fractions of the class's share: known once it is filled
        ideal = ideal_fill(_user_limits(plan, ideal))
    target = ideal.placed
    queued = {k.id: plan.counts(k.spec.queued) for k in plan.campaigns}
    # the running (not queued) jobs kills can reach: a left-out cluster's are out of reach
    reachable = sum(r - q for k in plan.campaigns for r, q, out in zip(running[k.id], queued[k.id], plan.left_out)
                    if not out)
    cap = math.ceil(preempt_fraction * reachable - _EPSILON)
    ending = {k.id: [min(max(0, r - t), math.floor(k.spec.throughput.get(c.name, 0.0) * attrition_seconds / 3600))
                     if k.preemptable else 0 for r, t, c in zip(running[k.id], target[k.id], scenario.clusters)]
              for k in plan.campaigns}
    tolerated = {k.id: [t + math.floor(deadzone * t + _EPSILON) for t in target[k.id]] for k in plan.campaigns}
    below = {k.id for k in plan.campaigns if sum(running[k.id]) < starvation * sum(target[k.id]) - _EPSILON}
    starved = {k.id for k in plan.campaigns if k.id in below and not k.spec.failing}
    preempt, spared, capped = (_preemptions(plan, running, queued, target, cap, ending, tolerated, starved, below)
                               if preempt_fraction > 0 else (none, {}, False))  # 0 disables preemption
    kept = {k.id: [r - p for r, p in zip(running[k.id], preempt[k.id])] for k in plan.campaigns}
    now = _Fill(plan, pinned=kept, evicted=none, cluster_caps=target,
                total_caps={k.id: sum(target[k.id]) for k in plan.campaigns})
    now.run()
    killed_on = [sum(preempt[k.id][c] for k in plan.campaigns) for c in range(plan.size)]
    started = {k.id: [h - p for h, p in zip(now.placed[k.id], kept[k.id])] for k in plan.campaigns}
    running_now = {k.id: [r - q for r, q in zip(running[k.id], queued[k.id])] for k in plan.campaigns}
    shares = []
    for k in sorted(plan.campaigns, key=lambda k: k.id):
        shares.append(CampaignShare(
            id=k.id, user=k.user, class_name=k.klass.name, policy=k.klass.policy, test_mode=k.spec.test_mode,
            demand=k.spec.demand,
            clusters=tuple(plan.scenario.clusters[i].name for i in k.clusters) if k.allowed_user else (),
            running=plan.named(running_now[k.id]), queued=plan.named(queued[k.id]), target=plan.named(target[k.id]),
            start=plan.named(started[k.id]), preempt=plan.named(preempt[k.id]), fair_share_jobs=sum(target[k.id]),
            fair_share_dominant=plan.share(_times(k.cost, sum(target[k.id]))),
            reason=_reason(plan, k, ideal, running[k.id], target[k.id], preempt[k.id], now.placed[k.id], killed_on,
                           capped, sum(ending[k.id]), sum(tolerated[k.id]), spared.get(k.id))))
    jobs = {"running": running_now, "queued": queued, "target": target, "start": started, "preempt": preempt}
    used = [_sum(_times(k.cost, running_now[k.id][c]) for k in plan.campaigns) for c in range(plan.size)]
    clusters = tuple(ClusterUse(
        name=c.name, cores=c.cores, memory_gb=c.memory_gb, running=sum(running_now[k.id][i] for k in plan.campaigns),
        queued=sum(queued[k.id][i] for k in plan.campaigns), running_cores=round(used[i][0]),
        running_memory_gb=used[i][1], target=sum(target[k.id][i] for k in plan.campaigns),
        target_cores=round(ideal.used[i][0]), target_memory_gb=ideal.used[i][1],
        start=sum(started[k.id][i] for k in plan.campaigns), preempt=killed_on[i], left_out=c.left_out)
        for i, c in enumerate(scenario.clusters))
    classes = [c.name for c in sorted(scenario.classes, key=lambda c: (c.priority, c.name))] or [_IMPLICIT_CLASS.name]
    users = sorted({k.user for k in plan.campaigns})
    return Allocation(tuple(shares), _groups(plan, classes, lambda k: k.klass.name, jobs),
                      _groups(plan, users, lambda k: k.user, jobs), clusters, preempt_fraction, cap)


def _groups(plan: _Plan, names: list[str], group_of: Callable[[_Campaign], str],
            jobs: Mapping[str, Mapping[int, list[int]]]) -> tuple[GroupShare, ...]:
    """Each group's campaigns summed; ``jobs`` maps running, queued, target, start and preempt
    to the per-campaign, per-cluster counts."""
    members: defaultdict[str, list[_Campaign]] = defaultdict(list)
    for k in sorted(plan.campaigns, key=lambda k: k.id):  # sums in one order, whatever the input's
        members[group_of(k)].append(k)

    def use(key: str, name: str) -> Vector:
        return _sum(_times(k.cost, sum(jobs[key][k.id])) for k in members[name])

    return tuple(GroupShare(
        name=name, campaigns=len(members[name]), demand=sum(k.spec.demand for k in members[name]),
        **{key: sum(sum(jobs[key][k.id]) for k in members[name]) for key in jobs},
        held_dominant=plan.share(_add(use("running", name), use("queued", name))),
        fair_share_dominant=plan.share(use("target", name)))
        for name in names)


def _add(a: Vector, b: Vector) -> Vector:
    return (a[0] + b[0], a[1] + b[1])


def _sum(vectors: Iterable[Vector]) -> Vector:
    return functools.reduce(_add, vectors, _ZERO)


def _times(a: Vector, n: float) -> Vector:
    return (a[0] * n, a[1] * n)


def _fits(used: Vector, cost: Vector, capacity: Vector) -> bool:
    """A resource the task does not ask for never stops it, even on an overfull cluster."""
    return all(need == 0 or have + need <= limit + _EPSILON for have, need, limit in zip(used, cost, capacity))


class _Campaign:
    """A campaign with everything the fill needs precomputed."""

    def __init__(self, plan: _Plan, spec: CampaignSpec) -> None:
        scenario = plan.scenario
        self.spec, self.id, self.user, self.priority = spec, spec.id, spec.user, spec.priority
        self.klass = scenario.class_of(spec)
        self.cost: Vector = (float(spec.cores_per_task), float(spec.memory_gb_per_task))
        self.preemptable = (self.klass.policy is Policy.FAIR_SHARE and spec.best_effort and not spec.test_mode
                            and not spec.paused)
        self.counts_allotment = self.klass.policy is not Policy.FAIR_SHARE
        self.allowed_user = self.klass.users is None or spec.user in self.klass.users
        user = scenario.user(spec.user)
        self.allotment: Vector = (_INF if user.allotment_cores is None else float(user.allotment_cores),
                                  _INF if user.allotment_memory_gb is None else user.allotment_memory_gb)
        names = spec.clusters if spec.clusters is not None else [c.name for c in scenario.clusters]
        usable = [plan.index[n] for n in names if not plan.left_out[plan.index[n]]
                  and (self.klass.clusters is None or n in self.klass.clusters) and self._fits_reserve(plan, n)]
        # DUCC's nodepools: residents in the class's own pool; preemptable work also squats in its subpools
        self.resident = [c for c in usable if plan.owner[c] == self.klass.pool]
        self.squat: dict[int, str] = {c: pool for c in usable if (pool := plan.owner[c]) is not None
                                      and self.preemptable and plan.below(pool, self.klass.pool)}
        self.clusters = [c for c in usable if c in self.squat or plan.owner[c] == self.klass.pool]
        self.affinity = [spec.affinity.get(c.name, user.affinity.get(c.name, 0.0)) for c in scenario.clusters]
        self.claim = [user.affinity.get(c.name, 0.0) for c in scenario.clusters]  # what may move a running job
        self.throughput = [spec.throughput.get(c.name, 0.0) for c in scenario.clusters]
        self.gang = spec.gang
        self.cluster_caps: list[float] = []
        self.capped_by: list[str] = []  # which cap each cluster's is: max_jobs, init or doubling
        init_cap = plan.init_cap if self.klass.init_cap is None else self.klass.init_cap
        for c in scenario.clusters:
            self.cluster_caps.append(spec.max_jobs_per_cluster.get(c.name, _INF))
            self.capped_by.append("max_jobs")
            if spec.test_mode:  # one job per cluster; a gang: one gang
                self._cap_at(self.gang, "max_jobs")
            if init_cap and spec.succeeded is not None and not spec.succeeded.get(c.name, 0):
                # it limits what starts: jobs already running (the cap just turned on) are not killed for it
                self._cap_at(max(init_cap, self.gang, spec.running.get(c.name, 0)), "init")
            elif c.name in spec.cap:
                self._cap_at(max(spec.cap[c.name], self.gang), "doubling")
            self.cluster_caps[-1] = _whole_gangs(self.cluster_caps[-1], self.gang)
        total = _INF if spec.max_jobs is None else _whole_gangs(spec.max_jobs, self.gang)
        self.total_cap = min(spec.demand, total)

    def _cap_at(self, cap: float, why: str) -> None:
        if cap < self.cluster_caps[-1]:
            self.cluster_caps[-1], self.capped_by[-1] = cap, why

    def _fits_reserve(self, plan: _Plan, name: str) -> bool:
        """A reservation takes whole nodes of exactly its size: never promoted to a bigger node."""
        cluster = plan.scenario.clusters[plan.index[name]]
        if self.klass.policy is not Policy.RESERVE or cluster.node_cores is None:
            return True
        return self.spec.cores_per_task == cluster.node_cores and (
            cluster.node_memory_gb is None or self.spec.memory_gb_per_task <= cluster.node_memory_gb)


def _whole_gangs(cap: float, gang: int) -> float:
    """A cap in jobs, down to whole gangs."""
    return cap if cap == _INF else cap - cap % gang


@dataclass
class _Level:
    """One class priority: non-preemptable campaigns in turn, then fair-share ones together."""

    turns: list[_Campaign] = field(default_factory=list)
    fair: list[_Campaign] = field(default_factory=list)


class _Plan:
    """The scenario indexed for the fill: cluster indices, capacities, evaluation order."""

    def __init__(self, scenario: Scenario, init_cap: int = 0, placement: Placement = Placement.SPREAD) -> None:
        self.scenario, self.init_cap, self.pack = scenario, init_cap, placement is Placement.PACK
        self.size = len(scenario.clusters)
        self.index = {c.name: i for i, c in enumerate(scenario.clusters)}
        self.left_out = [c.left_out for c in scenario.clusters]
        pool_of = {name: p.name for p in scenario.pools for name in p.clusters}
        self.owner: list[str | None] = [pool_of.get(c.name) for c in scenario.clusters]
        self.parent = {p.name: p.parent for p in scenario.pools}
        self.user_weight = {u.name: u.weight for u in scenario.users}
        self.capacity: list[Vector] = [(float(c.cores), _INF if c.memory_gb is None else c.memory_gb)
                                       for c in scenario.clusters]
        memory = [c.memory_gb for c in scenario.clusters]
        self.total: Vector = (float(sum(c.cores for c in scenario.clusters)),
                              _INF if None in memory else float(sum(m for m in memory if m is not None)))
        self.inverse = tuple(1 / t if 0 < t < _INF else 0.0 for t in self.total)
        self.campaigns = [_Campaign(self, spec) for spec in scenario.campaigns]
        self.squatters = any(k.squat for k in self.campaigns)
        self.limited = {c.name: c.min_user_limit_percent for c in scenario.classes
                        if c.min_user_limit_percent is not None}
        self.weight = {c.name: c.weight for c in scenario.classes} or {_IMPLICIT_CLASS.name: 1.0}
        self.test = sorted((k for k in self.campaigns if k.spec.test_mode), key=lambda k: k.id)
        levels: dict[int, _Level] = {}
        for k in sorted(self.campaigns, key=lambda k: (-k.priority, k.id)):
            if not k.spec.test_mode:
                level = levels.setdefault(k.klass.priority, _Level())
                (level.fair if k.klass.policy is Policy.FAIR_SHARE else level.turns).append(k)
        self.levels = [levels[p] for p in sorted(levels)]

    def below(self, pool: str | None, ancestor: str | None) -> bool:
        """Whether ``pool`` is a strict subpool of ``ancestor`` (None: the whole grid's)."""
        while pool is not None:
            pool = self.parent[pool]
            if pool == ancestor:
                return True
        return False

    def counts(self, per_name: Mapping[str, int]) -> list[int]:
        return [per_name.get(c.name, 0) for c in self.scenario.clusters]

    def named(self, counts: list[int]) -> dict[str, int]:
        return {c.name: n for c, n in zip(self.scenario.clusters, counts) if n}

    def share(self, use: Vector) -> float:
        """Dominant share of the grid; a resource the grid does not count is ignored."""
        return max(use[0] * self.inverse[0], use[1] * self.inverse[1])


class _Queue:
    """A priority queue whose items can be re-keyed or dropped; stale heap entries are skipped."""

    def __init__(self) -> None:
        self.heap: list[tuple[Any, Any]] = []
        self.keys: dict[Any, Any] = {}

    def set(self, item: Any, key: Any) -> None:
        self.keys[item] = key
        heapq.heappush(self.heap, (key, item))

    def drop(self, item: Any) -> None:
        self.keys.pop(item, None)

    def top(self) -> Any:
        while self.heap:
            key, item = self.heap[0]
            if self.keys.get(item) == key:
                return item
            heapq.heappop(self.heap)
        return None


class _Fill:
    """One progressive-filling pass; ``placed`` holds the result per campaign and cluster.

    With pools, in two rounds (DUCC): first every campaign on its own pool's clusters, then the
    preemptable ones also squat in its subpools, so that squatters only take what residents
    leave. ``limits``: YARN's user limits, a dominant share per (class, user) of a limited class.
    """

    def __init__(self, plan: _Plan, pinned: Mapping[int, list[int]], evicted: Mapping[int, list[int]],
                 cluster_caps: Mapping[int, Sequence[float]], total_caps: Mapping[int, float],
                 limits: Mapping[tuple[str, str], float] | None = None) -> None:
        self.plan, self.cluster_caps, self.total_caps = plan, cluster_caps, total_caps
        self.limits = limits or {}
        self.squatting = False
        self.evicted = {k: list(counts) for k, counts in evicted.items()}
        self.evicted_use: list[Vector] = [_ZERO] * plan.size
        self.placed = {k.id: [0] * plan.size for k in plan.campaigns}
        self.used: list[Vector] = [_ZERO] * plan.size
        self.users_on = [Counter[str]() for _ in range(plan.size)]
        self.use: defaultdict[Any, Vector] = defaultdict(lambda: _ZERO)  # by campaign id, (class, user), class
        self.held: defaultdict[str, Vector] = defaultdict(lambda: _ZERO)  # non-preemptable use, for allotments
        for k in plan.campaigns:
            for c in range(plan.size):
                self.evicted_use[c] = _add(self.evicted_use[c], _times(k.cost, self.evicted[k.id][c]))
                if pinned[k.id][c]:
                    self._place(k, c, pinned[k.id][c])

    def run(self) -> None:
        for k in self.plan.test:
            self._in_turn(k)
        for level in self.plan.levels:
            for k in level.turns:
                self._in_turn(k)
            self._progressive(level.fair)
        if self.plan.squatters:  # non-preemptable work never squats: only the fair-share levels again
            self.squatting = True
            for level in self.plan.levels:
                self._progressive(level.fair)

    def _in_turn(self, k: _Campaign) -> None:
        while self._can_take(k) and (choice := self._choose(k)) is not None:
            self._place(k, *choice)

    def _progressive(self, campaigns: list[_Campaign]) -> None:
        """Hierarchical max-min: each job goes to the smallest class share per weight, inside it
        to the smallest user share per weight (users under their limit first), inside that to the
        smallest campaign share."""
        by_id = {k.id: k for k in campaigns}
        users: defaultdict[tuple[str, str], _Queue] = defaultdict(_Queue)
        classes: defaultdict[str, _Queue] = defaultdict(_Queue)
        level = _Queue()

        def refresh(user: tuple[str, str]) -> None:
            """Re-key the user and its class after one of its campaigns changed."""
            top = users[user].top()
            if top is None:
                classes[user[0]].drop(user)
            else:
                classes[user[0]].set(user, self._user_key(user, by_id[top]))
            best = classes[user[0]].top()
            if best is None:
                level.drop(user[0])
            else:
                level.set(user[0], self._key(user[0], by_id[users[best].top()], self.plan.weight[user[0]]))

        for k in campaigns:
            if self._can_take(k):
                users[(k.klass.name, k.user)].set(k.id, (-k.priority, *self._key(k.id, k)))
        for user in list(users):
            refresh(user)
        while (name := level.top()) is not None:
            user = classes[name].top()
            k = by_id[users[user].top()]
            choice = self._choose(k)
            if choice is not None:
                self._place(k, *choice)
            if choice is None or not self._can_take(k):
                users[user].drop(k.id)
            else:
                users[user].set(k.id, (-k.priority, *self._key(k.id, k)))
            refresh(user)

    def _unit(self, k: _Campaign) -> int:
        """Jobs k takes at once: one, or a gang (the last one of its demand may be smaller)."""
        return int(min(k.gang, self.total_caps[k.id] - sum(self.placed[k.id])))

    def _key(self, entity: Any, k: _Campaign, weight: float = 1.0) -> tuple[float, bool, int]:
        """Share after taking k's next job or gang (Armada), re-placing before starting, then id."""
        return (self.plan.share(_add(self.use[entity], _times(k.cost, self._unit(k)))) / weight,
                not any(self.evicted[k.id]), k.id)

    def _user_key(self, user: tuple[str, str], k: _Campaign) -> tuple[Any, ...]:
        """A user's place in its class: by share per weight; in a limited class the users still
        under their limit first (YARN's minimum user-limit percent)."""
        key = self._key(user, k, self.plan.user_weight.get(user[1], 1.0))
        if user[0] not in self.plan.limited:
            return key
        share = self.plan.share(_add(self.use[user], _times(k.cost, self._unit(k))))
        return (share > self.limits.get(user, 0.0) + _EPSILON, *key)

    def _can_take(self, k: _Campaign) -> bool:
        if not k.allowed_user or sum(self.placed[k.id]) >= self.total_caps[k.id]:
            return False
        cores, memory = _add(self.held[k.user], _times(k.cost, self._unit(k)))
        return not k.counts_allotment or (cores <= k.allotment[0] + _EPSILON and memory <= k.allotment[1] + _EPSILON)

    def _choose(self, k: _Campaign) -> tuple[int, int] | None:
        """The cluster for k's next job or gang and how many jobs go there, or None when no usable
        cluster has room under its caps (a gang: for all of it, on one cluster).

        Written out in scalars: it runs once per job placed.
        """
        best: tuple[Any, ...] | None = None
        chosen = None
        need_cores, need_memory = k.cost
        unit = self._unit(k)
        placed, caps, evicted = self.placed[k.id], self.cluster_caps[k.id], self.evicted[k.id]
        pack = self.plan.pack
        for order, c in enumerate(k.clusters if self.squatting else k.resident):
            n = min(unit, evicted[c]) if evicted[c] else unit  # a running gang is re-placed whole
            (cores, memory), (used_cores, used_memory) = self.plan.capacity[c], self.used[c]
            if (placed[c] + n > caps[c] or used_cores + n * need_cores > cores + _EPSILON
                    or (need_memory and used_memory + n * need_memory > memory + _EPSILON)):
                continue
            affinity = -k.affinity[c]
            claim = -k.claim[c]
            if evicted[c]:  # a running job moves only for its user's affinity: the move restarts its task
                key: tuple[Any, ...] = (claim, False, claim, 0, -evicted[c] - placed[c], order)
            elif best is not None and best[:4] <= (claim, False, affinity, 0):
                continue  # re-placing a running job beats any new placement of no higher affinity
            else:
                other_cores, other_memory = self.evicted_use[c]
                room = int((cores - used_cores - other_cores) / need_cores + _EPSILON)
                if need_memory and memory < _INF:
                    room = min(room, int((memory - used_memory - other_memory) / need_memory + _EPSILON))
                users = self.users_on[c]
                tier = 1 if not users else 0 if len(users) == 1 and k.user in users else 2
                # only the user's affinity displaces others' running jobs: the campaign's (flood
                # penalties) goes where there is room first, or cycles would kill each other's jobs
                key = (claim, room < n, affinity, 1, tier, -k.throughput[c],
                       max(room, 0) if pack else -max(room, 0), order)
            if best is None or key < best:
                best, chosen = key, (c, n)
        return chosen

    def _place(self, k: _Campaign, c: int, n: int = 1) -> None:
        cost = _times(k.cost, n)
        replaced = min(n, self.evicted[k.id][c])
        self.evicted[k.id][c] -= replaced
        self.evicted_use[c] = _add(self.evicted_use[c], _times(k.cost, -replaced))
        self.placed[k.id][c] += n
        self.used[c] = _add(self.used[c], cost)
        self.users_on[c][k.user] += n
        for entity in (k.id, (k.klass.name, k.user), k.klass.name):
            self.use[entity] = _add(self.use[entity], cost)
        if k.counts_allotment:
            self.held[k.user] = _add(self.held[k.user], cost)


def _user_limits(plan: _Plan, fill: _Fill) -> dict[tuple[str, str], float]:
    """YARN's user limits in each limited class: max(class share / active users, class share x
    percent / 100), times the user's weight, handed out to the users in the order of their oldest
    campaign (the lowest id) until the class's share, as ``fill`` gave it, is spent."""
    limits: dict[tuple[str, str], float] = {}
    for name, percent in plan.limited.items():
        oldest: dict[str, int] = {}
        demand: defaultdict[str, Vector] = defaultdict(lambda: _ZERO)
        for k in plan.campaigns:
            if k.klass.name == name and k.allowed_user and not k.spec.test_mode and k.total_cap > 0:
                oldest[k.user] = min(oldest.get(k.user, k.id), k.id)
                demand[k.user] = _add(demand[k.user], _times(k.cost, min(k.total_cap, k.spec.demand)))
        if not oldest:
            continue
        share = plan.share(fill.use[name])
        weights = {u: plan.user_weight.get(u, 1.0) for u in oldest}
        limit = max(share / sum(weights.values()), share * percent / 100)
        left = share
        for user in sorted(oldest, key=lambda u: (oldest[u], u)):
            limits[(name, user)] = mine = min(weights[user] * limit, left)
            left -= min(mine, plan.share(demand[user]))
    return limits


def _preemptions(plan: _Plan, running: dict[int, list[int]], queued: dict[int, list[int]],
                 target: dict[int, list[int]], cap: int, ending: dict[int, list[int]],
                 tolerated: dict[int, list[int]], starved: set[int], below: set[int]
                 ) -> tuple[dict[int, list[int]], dict[int, str], bool]:
    """Kill fair-share jobs above ``tolerated`` (the target and its deadzone) only where others
    entitled to them need the space that the ``ending`` jobs (above target, expected to end by
    themselves this cycle) do not free, at most ``cap`` running ones: a campaign's queued jobs
    go first (nikita kills the youngest) and cost nothing.

    Entitled: a ``starved`` campaign (``below`` its preemption threshold and not failing) of
    another class, another user, or of the same user with a higher priority (YARN-4945: within
    a user only priority preempts). A user's equal
    campaigns never kill each other's jobs: that would trade one of the user's tasks for another
    and lose the work; the one below its share takes over as the other's jobs end. Returns the
    kills, for the campaigns spared only by these rules why, and whether the cap stopped a kill.

    Order: squatters first (DUCC: residents only once the squatters are gone; on the clusters
    where they squat first), then the class evaluated last, the user furthest above its share
    (YARN's user limit), the lowest campaign priority, the campaign furthest above its share,
    the youngest campaign. A gang is killed whole.
    """
    preempt = {k.id: [0] * plan.size for k in plan.campaigns}
    free: list[Vector] = []
    needy: list[list[tuple[_Campaign, Vector]]] = []
    for c in range(plan.size):
        room, wants = plan.capacity[c], []
        for k in plan.campaigns:
            room = _add(room, _times(k.cost, ending[k.id][c] - running[k.id][c]))
            if target[k.id][c] > running[k.id][c]:
                wants.append((k, _times(k.cost, target[k.id][c] - running[k.id][c])))
        free.append(room)
        needy.append(wants)

    @functools.cache
    def need(c: int, klass: str, user: str, priority: int, among: frozenset[int] | None, others: bool) -> Vector:
        """What those below target on c ask for there, as seen by a victim of that class, user and
        priority; fixed for the whole pass, so worked out once per victim's kind and cluster."""
        total = _ZERO
        for j, wants in needy[c]:
            if (among is None or j.id in among) and (not others or j.klass.name != klass or j.user != user
                                                     or j.priority > priority):
                total = _add(total, wants)
        return total

    entitled, threshold = frozenset(starved), frozenset(below)

    def short_for(victim: _Campaign, c: int, among: frozenset[int] | None = entitled, others: bool = True) -> bool:
        """Whether someone below target on c lacks space there: only the campaigns ``among`` (None:
        all) and only ``others`` than the victim's user's equal campaigns, unless told otherwise."""
        wanted = need(c, victim.klass.name, victim.user, victim.priority, among, others)
        return any(n > 0 and n - f > _EPSILON and cost > 0 for n, f, cost in zip(wanted, free[c], victim.cost))

    now: defaultdict[Any, Vector] = defaultdict(lambda: _ZERO)
    goal: defaultdict[Any, Vector] = defaultdict(lambda: _ZERO)
    members: defaultdict[tuple[str, str], list[_Campaign]] = defaultdict(list)
    for k in plan.campaigns:
        members[(k.klass.name, k.user)].append(k)
        for entity in (k.id, (k.klass.name, k.user)):
            now[entity] = _add(now[entity], _times(k.cost, sum(running[k.id])))
            goal[entity] = _add(goal[entity], _times(k.cost, sum(target[k.id])))

    def over(entity: Any) -> float:
        return plan.share(now[entity]) - plan.share(goal[entity])

    def above(k: _Campaign, c: int) -> bool:
        return running[k.id][c] - preempt[k.id][c] - ending[k.id][c] > tolerated[k.id][c]

    def key(k: _Campaign) -> tuple[float, ...]:
        resident = not any(above(k, c) for c in k.squat)
        return (resident, -k.klass.priority, -over((k.klass.name, k.user)), k.priority, -over(k.id), -k.id)

    queue = _Queue()
    by_id = {k.id: k for k in plan.campaigns if k.preemptable}
    for k in by_id.values():
        queue.set(k.id, key(k))
    killed, spared, capped = 0, {}, False
    while (top := queue.top()) is not None:
        k = by_id[top]
        over_on = [c for c in range(plan.size) if above(k, c)]
        useful = [c for c in over_on if short_for(k, c)]
        if not useful:
            if any(short_for(k, c, among=threshold) for c in over_on):
                spared[k.id] = "those below share are failing"
            elif any(short_for(k, c, among=None) for c in over_on):
                spared[k.id] = "no one below share is starved (preempt_threshold)"
            elif any(short_for(k, c, among=None, others=False) for c in over_on):
                spared[k.id] = "its user's own campaigns wait for these to end"
            queue.drop(k.id)
            continue
        c = min(useful, key=lambda c: (c not in k.squat, tolerated[k.id][c] + preempt[k.id][c] - running[k.id][c], c))
        unit = min(k.gang, running[k.id][c] - preempt[k.id][c])  # a gang, or what is left of one
        losing = unit - max(0, min(unit, queued[k.id][c] - preempt[k.id][c]))  # its queued jobs go first, free
        if losing and killed >= cap:  # a gang goes whole: the last one may overshoot the cap
            capped = True
            queue.drop(k.id)
            continue
        killed += losing
        preempt[k.id][c] += unit
        free[c] = _add(free[c], _times(k.cost, unit))
        for entity in (k.id, (k.klass.name, k.user)):
            now[entity] = _add(now[entity], _times(k.cost, -unit))
        for j in members[(k.klass.name, k.user)]:
            if j.id in queue.keys:
                queue.set(j.id, key(j))
    return preempt, spared, capped


def _reason(plan: _Plan, k: _Campaign, fill: _Fill, running: list[int], target: list[int],
            preempt: list[int], hold: list[int], killed_on: list[int], cap_reached: bool, ending: int,
            tolerated: int, spared: str | None) -> str:
    """Why the campaign gets what it gets, in the words an admin would look for."""
    parts = []
    if k.spec.test_mode:
        parts.append("test mode")
    elif k.spec.paused:
        parts.append("paused: never preempted")
    elif k.klass.policy is not Policy.FAIR_SHARE:
        parts.append(f"{k.klass.policy}: never preempted")
    elif not k.spec.best_effort:
        parts.append("normal jobs: never preempted")
    if k.gang > 1:
        parts.append(f"gang of {k.gang}")
    total = sum(target)
    at_cap = [c for c in k.clusters if target[c] >= k.cluster_caps[c]]
    user = (k.klass.name, k.user)
    limit = fill.limits.get(user)
    if not k.allowed_user:
        parts.append(f"user {k.user} not allowed in class {k.klass.name}")
    elif not k.clusters:
        parts.append("no usable cluster")
    elif total >= k.spec.demand:
        parts.append("capped by demand")
    elif total >= fill.total_caps[k.id] or (not k.spec.test_mode and len(at_cap) == len(k.clusters)):
        if total >= fill.total_caps[k.id] or any(k.capped_by[c] == "max_jobs" for c in at_cap):
            parts.append("capped by max_jobs")
    elif not fill._can_take(k):
        parts.append("capped by allotment")
    elif not any(_fits(_ZERO, _times(k.cost, k.gang), plan.capacity[c]) for c in k.clusters):
        parts.append(f"{'gang' if k.gang > 1 else 'task'} larger than any usable cluster")
    elif limit is not None and limit <= _EPSILON:
        parts.append("waiting for older users (min_user_limit_percent)")
    elif limit is not None and abs(plan.share(fill.use[user]) - limit) <= _EPSILON:
        parts.append("at its user limit (min_user_limit_percent)")
    elif k.preemptable:
        parts.append("at fair share")
    elif len(at_cap) < len(k.clusters):
        parts.append("waiting for space")
    if "capped by demand" not in parts:
        parts += _expansion(plan, k, at_cap)
    squatting = sorted({pool for c, pool in k.squat.items() if target[c] or running[c]})
    if squatting:
        parts.append(f"squatting in pool {', '.join(squatting)}: residents first")
    excess = max(0, sum(running) - total) if k.preemptable else 0
    killed = sum(preempt)
    if killed:
        parts.append(("above share" if excess else "leaving a cluster others need") + f": preempting {killed}"
                     + (f" of {excess}" if excess > killed else ""))
    elif excess:
        parts.append(f"above share by {excess}: " + ("preemption cap reached" if cap_reached else
                                                     f"{ending} expected to end by themselves" if ending else
                                                     "within the preemption deadzone" if sum(running) <= tolerated else
                                                     spared if spared else
                                                     "kept while nobody needs the space"))
    if sum(hold) < total:
        waiting_on = sum(killed_on[c] for c in range(plan.size) if hold[c] < target[c])
        parts.append(f"below share: preempting {waiting_on}" if waiting_on else "below share: waiting for space")
    return "; ".join(parts)


def _expansion(plan: _Plan, k: _Campaign, at_cap: list[int]) -> list[str]:
    """What holds the campaign back on the clusters where DUCC's initialization cap or its
    expand-by-doubling cap binds."""
    words = []
    for why, text in (("init", "initialization cap on {}: {} job(s) until one ends successfully there"),
                      ("doubling", "expanding by doubling on {}: {} job(s) this cycle")):
        names = [plan.scenario.clusters[c].name for c in at_cap if k.capped_by[c] == why]
        if names:
            caps = sorted({int(k.cluster_caps[plan.index[n]]) for n in names})
            words.append(text.format(", ".join(names), "/".join(map(str, caps))))
    return words


_COUNT = {"type": "integer", "minimum": 0}
_GB = {"type": "number", "minimum": 0}
_NAMES = {"type": ["array", "null"], "items": {"type": "string", "minLength": 1}, "uniqueItems": True}
_PER_CLUSTER = {"type": "object", "additionalProperties": {"type": "number", "minimum": 0}}


def _record(required: list[str], **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": required, "additionalProperties": False, "properties": properties}


_SCHEMA = _record(
    ["clusters", "campaigns"],
    clusters={"type": "array", "items": _record(
        ["name", "cores"], name={"type": "string", "minLength": 1}, cores=_COUNT,
        memory_gb={**_GB, "type": ["number", "null"]},
        node_cores={"type": ["integer", "null"], "minimum": 1}, node_memory_gb={**_GB, "type": ["number", "null"]},
        left_out={"type": "boolean"})},
    pools={"type": "array", "items": _record(
        ["name", "clusters"], name={"type": "string", "minLength": 1}, clusters={**_NAMES, "type": "array"},
        parent={"type": ["string", "null"], "minLength": 1})},
    classes={"type": "array", "items": _record(
        ["name"], name={"type": "string", "minLength": 1}, priority={"type": "integer"},
        weight={"type": "number", "exclusiveMinimum": 0}, policy={"enum": [p.value for p in Policy]},
        users=_NAMES, clusters=_NAMES, default={"type": "boolean"}, pool={"type": ["string", "null"], "minLength": 1},
        min_user_limit_percent={"type": ["number", "null"], "exclusiveMinimum": 0, "maximum": 100},
        init_cap={**_COUNT, "type": ["integer", "null"]})},
    users={"type": "array", "items": _record(
        ["name"], name={"type": "string", "minLength": 1}, affinity={"type": "object",
                                                                     "additionalProperties": {"type": "number"}},
        allotment={"anyOf": [{"type": "null"}, _COUNT, _record(
            [], cores={**_COUNT, "type": ["integer", "null"]}, memory_gb={**_GB, "type": ["number", "null"]})]},
        weight={"type": "number", "exclusiveMinimum": 0})},
    campaigns={"type": "array", "items": _record(
        ["id", "user", "pending"], id={"type": "integer"}, user={"type": "string", "minLength": 1},
        pending=_COUNT, cores_per_task={"type": "integer", "minimum": 1}, memory_gb_per_task=_GB,
        max_jobs={"anyOf": [{"type": "null"}, _COUNT, {"type": "object", "additionalProperties": _COUNT}]},
        running={"type": "object", "additionalProperties": _COUNT},
        queued={"type": "object", "additionalProperties": _COUNT}, priority={"type": "integer"},
        test_mode={"type": "boolean"}, paused={"type": "boolean"}, best_effort={"type": "boolean"}, clusters=_NAMES,
        affinity={"type": "object", "additionalProperties": {"type": "number"}},
        throughput=_PER_CLUSTER, gang={"type": "integer", "minimum": 1},
        succeeded={"type": "object", "additionalProperties": _COUNT},
        cap={"type": "object", "additionalProperties": _COUNT}, failing={"type": "boolean"},
        **{"class": {"type": ["string", "null"]}})},
)
_VALIDATOR = Draft202012Validator(_SCHEMA)


def scenario_from_json(data: Any) -> Scenario:
    """Build a scenario from parsed JSON; a bad one raises a one-line ValueError naming its path."""
    error = best_match(_VALIDATOR.iter_errors(data))
    if error is not None:
        raise ValueError(f"{error.json_path.removeprefix('$.').removeprefix('$') or 'scenario'}: {error.message}")
    return Scenario(
        clusters=tuple(ClusterSpec(
            name=c["name"], cores=c["cores"], memory_gb=_float(c.get("memory_gb")), node_cores=c.get("node_cores"),
            node_memory_gb=_float(c.get("node_memory_gb")), left_out=c.get("left_out", False))
            for c in data["clusters"]),
        classes=tuple(ClassSpec(
            name=c["name"], priority=c.get("priority", 0), weight=float(c.get("weight", 1)),
            policy=Policy(c.get("policy", Policy.FAIR_SHARE)),
            users=None if c.get("users") is None else frozenset(c["users"]),
            clusters=None if c.get("clusters") is None else tuple(c["clusters"]),
            default=c.get("default", False), pool=c.get("pool"),
            min_user_limit_percent=_float(c.get("min_user_limit_percent")), init_cap=c.get("init_cap"))
            for c in data.get("classes", [])),
        users=tuple(_user(u) for u in data.get("users", [])),
        campaigns=tuple(_campaign(c) for c in data["campaigns"]),
        pools=tuple(PoolSpec(p["name"], tuple(p["clusters"]), p.get("parent")) for p in data.get("pools", [])),
    )


def _float(value: float | None) -> float | None:
    return None if value is None else float(value)


def _user(data: dict[str, Any]) -> UserSpec:
    allotment = data.get("allotment")
    if not isinstance(allotment, dict):
        allotment = {"cores": allotment}
    return UserSpec(name=data["name"], allotment_cores=allotment.get("cores"),
                    allotment_memory_gb=_float(allotment.get("memory_gb")), affinity=data.get("affinity", {}),
                    weight=float(data.get("weight", 1)))


def _campaign(data: dict[str, Any]) -> CampaignSpec:
    max_jobs = data.get("max_jobs")
    return CampaignSpec(
        id=data["id"], user=data["user"], pending=data["pending"], class_name=data.get("class"),
        cores_per_task=data.get("cores_per_task", 1), memory_gb_per_task=float(data.get("memory_gb_per_task", 0)),
        max_jobs=max_jobs if not isinstance(max_jobs, dict) else None,
        max_jobs_per_cluster=max_jobs if isinstance(max_jobs, dict) else {},
        running=data.get("running", {}), queued=data.get("queued", {}), priority=data.get("priority", 0),
        test_mode=data.get("test_mode", False),
        paused=data.get("paused", False), best_effort=data.get("best_effort", True),
        clusters=None if data.get("clusters") is None else tuple(data["clusters"]),
        affinity=data.get("affinity", {}), throughput=data.get("throughput", {}), gang=data.get("gang", 1),
        succeeded=data.get("succeeded"), cap=data.get("cap", {}), failing=data.get("failing", False))


def allocation_to_json(allocation: Allocation) -> dict[str, Any]:
    """The one JSON value ``cigri shares --json`` prints."""
    return {
        "campaigns": [{
            "id": s.id, "user": s.user, "class": s.class_name, "policy": str(s.policy), "test_mode": s.test_mode,
            "demand": s.demand, "clusters": list(s.clusters), "running": dict(s.running), "queued": dict(s.queued),
            "target": dict(s.target),
            "start": dict(s.start),
            "preempt": dict(s.preempt),
            "fair_share": {"jobs": s.fair_share_jobs, "dominant": round(s.fair_share_dominant, 6)},
            "reason": s.reason,
        } for s in allocation.campaigns],
        "classes": [_group_to_json(g) for g in allocation.classes],
        "users": [_group_to_json(g) for g in allocation.users],
        "clusters": [{
            "name": c.name, "cores": c.cores, "memory_gb": c.memory_gb, "running": c.running, "queued": c.queued,
            "running_cores": c.running_cores, "running_memory_gb": round(c.running_memory_gb, 6),
            "target": c.target, "target_cores": c.target_cores, "target_memory_gb": round(c.target_memory_gb, 6),
            "start": c.start, "preempt": c.preempt, "left_out": c.left_out,
        } for c in allocation.clusters],
        "preempt_fraction": allocation.preempt_fraction,
        "preempt_cap": allocation.preempt_cap,
    }


def _group_to_json(group: GroupShare) -> dict[str, Any]:
    return {"name": group.name, "campaigns": group.campaigns, "demand": group.demand, "running": group.running,
            "queued": group.queued,
            "target": group.target, "start": group.start, "preempt": group.preempt,
            "held": round(group.held_dominant, 6),
            "fair_share": {"jobs": group.target, "dominant": round(group.fair_share_dominant, 6)}}
