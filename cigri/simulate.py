"""``cigri simulate``: run cigri's real cycle against simulated clusters in virtual time.

A scenario (JSON, see README "Simulator") names the clusters (``sim`` backend: cores, memory,
local users' load), cigri's configuration (runner, classes, users: the same tables as in
``cigri.toml``) and the campaigns (user, size, task-duration law, submission time, type,
class, extra JDL keys). The simulator builds a private grid in a temporary directory, submits
each campaign through :func:`cigri.api.submit` when the virtual clock reaches its submission
time, and runs :func:`cigri.cycle.run_cycle` every ``cycle_period`` simulated seconds, so
what is measured is cigri itself: updator, colombo, metascheduler, runner and nikita.

A cycle that changed nothing is followed by a jump to the first cycle at which the simulated
world changes (a job ends, a local job arrives, a campaign is submitted), unless some of
cigri's jobs wait in a queue, as flood control acts on their age: no cycle that could act is
skipped, which is what makes thousands of simulated hours take seconds.
"""

from __future__ import annotations

import heapq
import json
import math
import random
import tempfile
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from cigri import api, bag, clock, predictor
from cigri import config as configuration
from cigri.backends.sim import SimBackend
from cigri.backends.sim.world import GRICAD_MEDIAN_SECONDS, GRICAD_SIGMA, lognormal
from cigri.cycle import run_cycle
from cigri.db import campaigns as stored_campaigns
from cigri.db import jobs as stored_jobs
from cigri.db import tasks as stored_tasks
from cigri.errors import InputError, shown
from cigri.grid import Grid, open_grid
from cigri.metascheduler import windows
from cigri.states import TASK_OPEN, TaskState

MOST_TASKS = 20_000_000  # of one campaign entry, all its copies: every run time is drawn up front (160 MB)
MOST_GRICAD_CAMPAIGNS = 10_000  # a few years of a Gricad-sized site's campaigns
START = 1_767_225_600.0  # 2026-01-01 00:00 UTC: every run starts at the same virtual time
LAWS = {"constant": ("seconds",), "lognormal": ("median", "sigma"), "exponential": ("mean",),
        "uniform": ("min", "max"), "gricad": ()}  # each law's parameters, all required
SCENARIO_KEYS = {"seed", "cycle_period", "max_hours", "sample_every", "clusters", "config", "campaigns", "gricad"}
CAMPAIGN_KEYS = {"user", "tasks", "duration", "submit_hours", "type", "class", "clusters", "walltime",
                 "cores_per_task", "jdl", "count", "order", "exit_code"}
GRICAD_KEYS = {"campaigns", "users", "over_hours", "max_tasks", "type"}
CONFIG_SECTIONS = {*configuration.SECTIONS, "classes", "users", "pools"}  # cigri.toml's, but clusters


@dataclass(frozen=True)
class CampaignPlan:
    """One campaign to submit during the run, with its tasks' run times already drawn."""

    user: str
    durations: tuple[float, ...]
    submit_at: float  # seconds after the start
    jdl: dict[str, Any]
    class_name: str | None  # the class its shares are measured in; None: the configured default
    cores_per_task: int = 1
    submit_as: str = ""  # the user cigri sees, when a policy is expressed through users (FIFO)
    exit_code: int = 0  # every task's exit status: not 0, a campaign whose tasks all fail


@dataclass(frozen=True)
class Scenario:
    seed: int
    cycle_period: float
    max_hours: float
    sample_every: int  # cycles between two share samples
    clusters: dict[str, dict[str, Any]]
    config: dict[str, dict[str, Any]]
    campaigns: tuple[CampaignPlan, ...]


# --- reading a scenario ---------------------------------------------------------------------

def load_scenario(path: Path) -> Scenario:
    """Read and check a scenario file; any problem is one :class:`InputError` naming the key."""
    return parse_scenario(api.read_scenario(path))


def parse_scenario(data: Any) -> Scenario:
    if not isinstance(data, dict):
        raise InputError("scenario: expected a JSON object")
    _no_unknown("scenario", data, SCENARIO_KEYS)
    seed = _number("scenario", data, "seed", 0, int)
    max_hours = _number("scenario", data, "max_hours", 10_000.0)
    clusters = data.get("clusters")
    if not isinstance(clusters, dict) or not clusters:
        raise InputError("scenario.clusters: expected an object of at least one cluster")
    for name, options in clusters.items():
        if not isinstance(options, dict):
            raise InputError(f"scenario.clusters.{name}: expected an object")
    config = data.get("config", {})
    if not isinstance(config, dict) or "clusters" in config:
        raise InputError("scenario.config: expected an object of configuration tables (clusters go in scenario.clusters)")
    _no_unknown("scenario.config", config, CONFIG_SECTIONS)
    rng = random.Random(seed)
    errors = random.Random(f"estimates {seed}")  # apart, so that ordering tasks leaves every run time as drawn
    plans = [plan for i, entry in enumerate(data.get("campaigns", []))
             for plan in _campaign_plans(f"scenario.campaigns[{i}]", entry, sorted(clusters), max_hours, rng, errors)]
    if "gricad" in data:
        plans += _gricad_campaigns(data["gricad"], sorted(clusters), max_hours, rng)
    if not plans:
        raise InputError("scenario.campaigns: no campaign to simulate")
    return Scenario(seed, _number("scenario", data, "cycle_period", 30.0, positive=True), max_hours,
                    _number("scenario", data, "sample_every", 1, int, positive=True),
                    {n: dict(o) for n, o in clusters.items()}, config, tuple(sorted(plans, key=lambda p: p.submit_at)))


def _no_unknown(where: str, data: Mapping[str, Any], known: set[str]) -> None:
    for key in data:
        if key not in known:
            raise InputError(f"{where}.{key}: unknown key (known: {', '.join(sorted(known))})")


def _number(where: str, data: Mapping[str, Any], key: str, default: float, kind: type = float,
             least: float = 0.0, positive: bool = False, most: float = math.inf) -> Any:
    """``data[key]`` (``default`` if absent) as a finite ``kind`` of at least ``least`` (above
    it if ``positive``) and at most ``most``. Every number of the scenario's own keys goes
    through here (the cluster and config tables are the configuration's to check): NaN passes
    every comparison, and a negative duration or submission window ran as if it were valid."""
    value = data.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int if kind is int else (int, float)) \
            or (isinstance(value, float) and not math.isfinite(value)) or value < least \
            or (positive and value == least) or value > most:
        bound = f"{'>' if positive else '>='} {least:g}" + (f" and <= {most:,}" if most < math.inf else "")
        raise InputError(f"{where}.{key}: expected {'an integer' if kind is int else 'a number'} {bound}, "
                         f"got {shown(value, 40)}")
    return kind(value)


def _submission(where: str, data: Mapping[str, Any], key: str, default: float, max_hours: float) -> float:
    """Hours into the run: past ``max_hours`` the run would end before the submission."""
    hours: float = _number(where, data, key, default)
    if hours > max_hours:
        raise InputError(f"{where}.{key}: {hours:g} is past max_hours ({max_hours:g}): the run would end "
                         "before the submission")
    return hours


def _job_type(where: str, data: Mapping[str, Any]) -> str:
    kind = data.get("type", "best-effort")
    if kind not in windows.TYPES:
        raise InputError(f"{where}.type: expected one of {', '.join(windows.TYPES)}, got {kind!r}")
    return str(kind)


def _campaign_plans(where: str, entry: Any, clusters: list[str], max_hours: float, rng: random.Random,
                    errors: random.Random) -> list[CampaignPlan]:
    if not isinstance(entry, dict):
        raise InputError(f"{where}: expected an object")
    _no_unknown(where, entry, CAMPAIGN_KEYS)
    for key in ("user", "tasks"):
        if key not in entry:
            raise InputError(f"{where}.{key}: required")
    tasks = _number(where, entry, "tasks", 1, int, 1, most=configuration.Settings.max_submission_tasks)
    count = _number(where, entry, "count", 1, int, 1, most=MOST_TASKS // tasks)
    named = entry.get("clusters", clusters)
    if not isinstance(named, list) or not named or any(c not in clusters for c in named):
        raise InputError(f"{where}.clusters: expected a list of the scenario's clusters, got {named!r}")
    submit = _submission(where, entry, "submit_hours", 0, max_hours)
    kind = _job_type(where, entry)
    extra = entry.get("jdl", {})
    if not isinstance(extra, dict):
        raise InputError(f"{where}.jdl: expected an object of JDL keys")
    cores = _number(where, entry, "cores_per_task", 1, int, 1)
    exit_code = _number(where, entry, "exit_code", 0, int, most=255)
    law = entry.get("duration", {"law": "constant", "seconds": 60})
    order = entry.get("order", "drawn")
    if order == "drawn":
        error_sigma = None
    elif order == "longest_first":
        error_sigma = 0.0
    elif isinstance(order, dict) and list(order) == ["longest_first"]:
        error_sigma = _number(f"{where}.order", order, "longest_first", 0.0)
    else:
        raise InputError(f"{where}.order: expected \"drawn\", \"longest_first\" or {{\"longest_first\": "
                         f"error sigma >= 0}}, got {order!r}")
    plans = []
    for _ in range(count):
        durations = tuple(draw_durations(f"{where}.duration", law, tasks, rng))
        if error_sigma is not None:
            durations = longest_first(durations, error_sigma, errors)
        jdl = {"clusters": {name: {} for name in named}, "type": kind, "resources": f"core={cores}",
               "walltime": _number(where, entry, "walltime", max(60, math.ceil(max(durations) * 2)), int, 1),
               **extra}
        if "class" in entry:
            jdl["class"] = entry["class"]
        plans.append(CampaignPlan(str(entry["user"]), durations, submit * 3600, jdl,
                                  None if entry.get("class") is None else str(entry["class"]), cores,
                                  exit_code=exit_code))
    return plans


def longest_first(durations: tuple[float, ...], error_sigma: float, rng: random.Random) -> tuple[float, ...]:
    """The tasks as a user who knows their run times to within a log-normal error of
    ``error_sigma`` (0: exactly) lists them: longest first (Graham's LPT order). Estimates are
    compared as logarithms, so no error is too large to draw."""
    logs = [(math.log(d) if d > 0 else -math.inf) + (rng.gauss(0.0, error_sigma) if error_sigma else 0.0)
            for d in durations]
    return tuple(durations[i] for i in sorted(range(len(durations)), key=lambda i: -logs[i]))


def draw_durations(where: str, law: Any, count: int, rng: random.Random) -> list[float]:
    """``count`` task run times (seconds) from one of :data:`LAWS`."""
    if not isinstance(law, dict) or law.get("law") not in LAWS:
        raise InputError(f"{where}.law: expected one of {', '.join(LAWS)}, got {law!r}")
    name = law["law"]
    _no_unknown(where, law, {"law", *LAWS[name]})
    for key in LAWS[name]:
        if key not in law:
            raise InputError(f"{where}.{key}: required by law {name!r}")
    if name == "constant":
        return [_number(where, law, "seconds", 0.0)] * count
    if name == "lognormal":
        median, sigma = _number(where, law, "median", 0.0, positive=True), _number(where, law, "sigma", 0.0)
        return [lognormal(rng, median, sigma) for _ in range(count)]
    if name == "exponential":
        mean = _number(where, law, "mean", 0.0, positive=True)
        return [max(1.0, rng.expovariate(1 / mean)) for _ in range(count)]
    if name == "uniform":
        low = _number(where, law, "min", 0.0)
        high = _number(where, law, "max", 0.0, least=low)
        return [rng.uniform(low, high) for _ in range(count)]
    return [lognormal(rng, GRICAD_MEDIAN_SECONDS, GRICAD_SIGMA) for _ in range(count)]


def _gricad_campaigns(spec: Any, clusters: list[str], max_hours: float, rng: random.Random) -> list[CampaignPlan]:
    """Campaigns drawn by the Gricad recipe (anchors §1): the number of tasks is log-normal with
    median 81 and p95 about 13,000; each campaign draws its own median run time (the median of
    campaign means is about 560 s); tasks vary around it (sigma 1); submissions are uniform."""
    where = "scenario.gricad"
    if not isinstance(spec, dict):
        raise InputError(f"{where}: expected an object")
    _no_unknown(where, spec, GRICAD_KEYS)
    users = spec.get("users", ["user"])
    if not isinstance(users, list) or not users:
        raise InputError(f"{where}.users: expected a list of user names")
    cap = _number(where, spec, "max_tasks", 100_000, int, 1, most=configuration.Settings.max_submission_tasks)
    count = _number(where, spec, "campaigns", 10, int, 1, most=MOST_GRICAD_CAMPAIGNS)
    hours, kind = _submission(where, spec, "over_hours", 24, max_hours), _job_type(where, spec)
    plans = []
    for i in range(count):
        tasks = int(min(max(1.0, rng.lognormvariate(math.log(81), 3.1)), float(cap)))
        median = lognormal(rng, 340.0, 1.5)
        durations = tuple(lognormal(rng, median, 1.0) for _ in range(tasks))
        plans.append(CampaignPlan(
            str(users[i % len(users)]), durations, rng.uniform(0, hours) * 3600,
            {"clusters": {name: {} for name in clusters}, "type": kind,
             "walltime": max(60, math.ceil(max(durations) * 2))}, None))
    return plans


# --- running it -----------------------------------------------------------------------------

@dataclass
class Sample:
    at: float  # hours since the start
    running: dict[str, int]  # cores held by cigri per user
    ideal: dict[str, float]  # the weighted max-min split of those cores
    by_class: dict[str, int]
    ideal_class: dict[str, float]
    harvestable: int  # cores not used by local users
    waiting: int  # cigri jobs queued on the clusters (the clusters' count, not cigri's view)
    busy: int  # cores running cigri jobs (the clusters' count: cigri's view misses jobs it has not polled yet)
    pending: int  # tasks in the bags (counted up to the harvestable cores)
    clusters: dict[str, dict[str, int]] = field(default_factory=dict)  # cores held per cluster and class
    demand: dict[str, dict[str, dict[int, float]]] = field(default_factory=dict)  # class -> user -> campaign -> cores


@dataclass
class Run:
    scenario: Scenario
    cycles: int = 0
    samples: list[Sample] = field(default_factory=list)
    harvest: list[tuple[float, float]] = field(default_factory=list)  # (seconds, harvestable core-s so far)
    cycle_seconds: list[float] = field(default_factory=list)
    etas: list[tuple[int, float, float]] = field(default_factory=list)  # (campaign, at, predicted end)


def simulate(scenario: Scenario, workdir: Path | None = None) -> dict[str, Any]:
    """Run the scenario to its end (or ``max_hours``) and return the report (see README)."""
    with tempfile.TemporaryDirectory(prefix="cigri-sim-", dir=workdir) as home, clock.virtual(START) as time:
        grid = _private_grid(scenario, Path(home))
        try:
            run = Run(scenario)
            _loop(grid, run, time, Path(home))
            return _report(grid, run)
        finally:
            grid.close()


_OUTSIDE = (*(f"cigri.{key}" for key in configuration.PATH_KEYS), "clusters")


def _private_grid(scenario: Scenario, home: Path) -> Grid:
    """A grid on ``home`` alone: a scenario's ``config`` cannot point it at a real database,
    spool or cluster (a copied ``cigri.toml`` table would make the simulation run real jobs)."""
    overrides: dict[str, Any] = {"cigri.home": str(home), "cigri.cycle_period": scenario.cycle_period}
    for section, table in scenario.config.items():
        if not isinstance(table, dict):
            raise InputError(f"scenario.config.{section}: expected a table")
        for key, value in table.items():
            if section in _OUTSIDE or f"{section}.{key}" in _OUTSIDE:
                raise InputError(f"scenario.config.{section}.{key}: a simulation keeps its own database, spool "
                                 "and clusters (the scenario's clusters); remove it")
            overrides[f"{section}.{key}"] = value
    for name, options in scenario.clusters.items():
        overrides[f"clusters.{name}"] = {"backend": "sim", "seed": scenario.seed, **options}
    return open_grid(configuration.load(overrides, environ={}, system_files=False))


def _worlds(grid: Grid) -> dict[int, SimBackend]:
    backends = {cid: grid.backend(cid) for cid in grid.cluster_ids().values()}
    return {cid: b for cid, b in backends.items() if isinstance(b, SimBackend)}


def _loop(grid: Grid, run: Run, time: clock.VirtualClock, home: Path) -> None:
    scenario = run.scenario
    worlds = _worlds(grid)
    waiting = list(scenario.campaigns)
    period, end = scenario.cycle_period, START + scenario.max_hours * 3600
    while time.time <= end:
        while waiting and START + waiting[0].submit_at <= time.time:
            _submit(grid, waiting.pop(0), home)
        report = run_cycle(grid)
        run.cycles += 1
        run.cycle_seconds.append(report.seconds)
        for backend in worlds.values():
            backend.world.advance(time.time)
        run.harvest.append((time.time - START, sum(b.world.usage.harvestable for b in worlds.values())))
        if run.cycles % scenario.sample_every == 0:
            run.samples.append(_sample(grid, run, worlds, time.time))
            run.etas += _predictions(grid, time.time)
        if not waiting and not _active_campaigns(grid):
            break
        step = period
        if not (report.updated or report.decided or report.submitted or report.killed or report.finished
                or _queued_jobs(grid)):
            upcoming = min((b.world.next_event() for b in worlds.values()), default=math.inf)
            if waiting:
                upcoming = min(upcoming, START + waiting[0].submit_at)
            if upcoming < math.inf:
                step = max(period, math.ceil((upcoming - time.time) / period) * period)
        following = time.time + step
        if time.time < end < following:  # a last cycle at max_hours: every campaign due by then is submitted
            following = end
        time.advance_to(following)


def _queued_jobs(grid: Grid) -> bool:
    """Some of cigri's jobs wait in a queue: flood control may kill them at any next cycle."""
    return stored_jobs.any_queued(grid.db.conn)


def _submit(grid: Grid, plan: CampaignPlan, home: Path) -> None:
    """Submit through the real use case; each task's argument is its simulated run time."""
    params = home / f"params-{stored_campaigns.count(grid.db.conn) + 1}.txt"
    status = f" {plan.exit_code}" if plan.exit_code else ""
    params.write_text("".join(f"t{i} {seconds:.3f}{status}\n" for i, seconds in enumerate(plan.durations)))
    document = {"name": f"sim-{plan.user}", "exec_file": "/bin/true", "exec_directory": str(home),
                "param_file": str(params), **plan.jdl}
    api.submit(grid, json.dumps(document), base_dir=home, user=plan.submit_as or plan.user, source="scenario")


def _active_campaigns(grid: Grid) -> bool:
    return stored_campaigns.any_active(grid.db.conn)


def _classes(config: configuration.Config) -> dict[str, tuple[int, float]]:
    """``{class: (priority, weight)}`` as the simulated cigri reads them."""
    return {c.name: (c.priority, c.weight) for c in config.classes}


def _sample(grid: Grid, run: Run, worlds: dict[int, SimBackend], now: float) -> Sample:
    """Who holds cigri's cores now, against the weighted max-min split of the same cores."""
    plans = run.scenario.campaigns  # campaign ids follow the order of submission
    default_class = grid.config.default_class()
    campaigns = {cid: (plans[cid - 1].user, plans[cid - 1].class_name or default_class)
                 for cid in stored_campaigns.active(grid.db.conn)}
    cores = {cid: plans[cid - 1].cores_per_task for cid in campaigns}
    held: dict[int, int] = defaultdict(int)
    names = {cid: name for name, cid in grid.cluster_ids().items()}
    where: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))  # cluster -> class -> cores
    for cid, cluster_id, n in stored_jobs.running_tasks_per_pair(grid.db.conn):
        if cid in campaigns:
            held[cid] += n * cores[cid]
            where[names[cluster_id]][campaigns[cid][1]] += n * cores[cid]
    total = sum(held.values())
    demand = {cid: cores[cid] * bag.count(grid.db, cid, TASK_OPEN, limit=total + 1) for cid in campaigns}
    tree: dict[str, dict[str, dict[int, float]]] = defaultdict(lambda: defaultdict(dict))
    for cid, (user, klass) in campaigns.items():
        tree[klass][user][cid] = demand[cid]
    ideal_campaign = _ideal(grid.config, total, tree)
    running: dict[str, int] = defaultdict(int)
    by_class: dict[str, int] = defaultdict(int)
    ideal: dict[str, float] = defaultdict(float)
    ideal_class: dict[str, float] = defaultdict(float)
    for cid, (user, klass) in campaigns.items():
        running[user] += held[cid]
        ideal[user] += ideal_campaign.get(cid, 0.0)
        by_class[klass] += held[cid]
        ideal_class[klass] += ideal_campaign.get(cid, 0.0)
    harvestable = sum(b.world.cores - b.world.local_cores() for b in worlds.values())
    # counted on the clusters: cigri's own view lags a poll (a job it just sent, which the
    # cluster started at once, still reads waiting until the next cycle's updator)
    queued = sum(1 for b in worlds.values() for job in (*b.world.queue, *b.world.best_effort_queue) if job.key)
    busy = sum(b.world.used()[0] - b.world.local_cores() for b in worlds.values())
    pending = sum(bag.count(grid.db, cid, (TaskState.PENDING,), limit=harvestable + 1) for cid in campaigns)
    return Sample((now - START) / 3600, dict(running), dict(ideal), dict(by_class), dict(ideal_class),
                  harvestable, queued, busy, pending, {name: dict(by) for name, by in sorted(where.items())},
                  {klass: {user: dict(c) for user, c in users.items()} for klass, users in tree.items()})


def _ideal(config: configuration.Config, capacity: float,
           tree: Mapping[str, Mapping[str, Mapping[int, float]]]) -> dict[int, float]:
    """The split of ``capacity`` over campaigns that the configuration asks for: classes by
    priority and weight, users by weight and YARN's user limits, campaigns equally."""
    users = {user for by_user in tree.values() for user in by_user}
    return weighted_max_min_tree(capacity, tree, _classes(config), {user: config.users.of(user).weight for user in users},
                                 {c.name: c.min_user_limit_percent for c in config.classes
                                  if c.min_user_limit_percent is not None})


def _predictions(grid: Grid, now: float) -> list[tuple[int, float, float]]:
    """The predictor's ETA of every campaign past 10 % of its tasks (issue 4 §3 measures from there)."""
    result = []
    for cid, total in stored_campaigns.active_sizes(grid.db.conn):
        done = stored_campaigns.ended_jobs(grid.db.conn, cid)
        if total and done >= 0.1 * total:
            eta = predictor.campaign_figures(grid.db, cid, now).eta
            if eta is not None:
                result.append((cid, now, eta))
    return result


def eta_mape(etas: list[tuple[int, float, float]], finished: Mapping[int, float]) -> float | None:
    """Mean absolute percentage error of the predicted remaining time against the real one."""
    errors = [abs(eta - finished[cid]) / (finished[cid] - at) for cid, at, eta in etas
              if cid in finished and finished[cid] > at]
    return sum(errors) / len(errors) if errors else None


def weighted_max_min(capacity: float, demands: Mapping[Any, float], weights: Mapping[Any, float]) -> dict[Any, float]:
    """Progressive filling: each gets ``weight x level``, capped by its demand; what the capped
    leave is shared again among the others."""
    result = {key: 0.0 for key in demands}
    open_keys = {key for key, d in demands.items() if d > 0}
    left = capacity
    while open_keys and left > 1e-9:
        level = left / sum(weights[k] for k in open_keys)
        capped = {k for k in open_keys if demands[k] - result[k] <= weights[k] * level}
        if not capped:
            for k in open_keys:
                result[k] += weights[k] * level
            break
        for k in capped:
            left -= demands[k] - result[k]
            result[k] = demands[k]
        open_keys -= capped
    return result


def weighted_max_min_tree(capacity: float, tree: Mapping[str, Mapping[str, Mapping[int, float]]],
                          classes: Mapping[str, tuple[int, float]],
                          user_weights: Mapping[str, float] | None = None,
                          user_limits: Mapping[str, float] | None = None) -> dict[int, float]:
    """The ideal split of ``capacity`` over campaigns: classes by priority (lower first), by
    weight within a priority; among a class's users by their weights (default 1), first up to
    YARN's user limits in a class with ``min_user_limit_percent`` (:func:`yarn_user_split`),
    equal shares among a user's campaigns."""
    result: dict[int, float] = {}
    left = capacity
    for priority in sorted({classes.get(k, (0, 1.0))[0] for k in tree}):
        level = [k for k in tree if classes.get(k, (0, 1.0))[0] == priority]
        demand = {k: sum(sum(c.values()) for c in tree[k].values()) for k in level}
        split = weighted_max_min(left, demand, {k: classes.get(k, (0, 1.0))[1] for k in level})
        left -= sum(split.values())
        for klass, amount in split.items():
            users = tree[klass]
            demands = {u: sum(c.values()) for u, c in users.items()}
            weights = {u: (user_weights or {}).get(u, 1.0) for u in users}
            percent = (user_limits or {}).get(klass)
            per_user = (weighted_max_min(amount, demands, weights) if percent is None else
                        yarn_user_split(amount, demands, weights, percent, {u: min(c) for u, c in users.items()}))
            for user, share in per_user.items():
                result.update(weighted_max_min(share, users[user], dict.fromkeys(users[user], 1.0)))
    return result


def yarn_user_split(amount: float, demands: Mapping[str, float], weights: Mapping[str, float], percent: float,
                    oldest: Mapping[str, int]) -> dict[str, float]:
    """A limited class's share among its users, as the fair share fills it: each user, in the
    order of its oldest campaign, up to its weight times YARN's user limit, max(share / users,
    share x percent / 100), while the share lasts; what is left by weighted max-min."""
    active = [u for u in demands if demands[u] > 0]
    if not active:
        return dict.fromkeys(demands, 0.0)
    limit = max(amount / sum(weights[u] for u in active), amount * percent / 100)
    first: dict[str, float] = dict.fromkeys(demands, 0.0)
    left = amount
    for user in sorted(active, key=lambda u: (oldest[u], u)):
        first[user] = min(weights[user] * limit, left, demands[user])
        left -= first[user]
    rest = weighted_max_min(left, {u: demands[u] - first[u] for u in demands}, weights)
    return {u: first[u] + rest[u] for u in demands}


def jain(actual: Mapping[str, float], ideal: Mapping[str, float]) -> float | None:
    """Jain's fairness index of actual/ideal over those with an ideal share (1 is perfect)."""
    ratios = [actual.get(k, 0.0) / v for k, v in ideal.items() if v > 0]
    if not ratios or not any(ratios):
        return None
    return sum(ratios) ** 2 / (len(ratios) * sum(r * r for r in ratios))


# --- the report -----------------------------------------------------------------------------

def _report(grid: Grid, run: Run) -> dict[str, Any]:
    worlds = _worlds(grid)
    db = grid.db
    first, last = stored_campaigns.span_of_all(db.conn, clock.now())
    makespan = last - first
    work = sum(sum(p.durations) * p.cores_per_task for p in run.scenario.campaigns)
    cores = {i: plan.cores_per_task for i, plan in enumerate(run.scenario.campaigns, 1)}  # ids follow submission
    useful = sum(seconds * cores.get(cid, 1) for cid, seconds in stored_jobs.terminated_seconds(db.conn))
    wasted = _wasted(db, cores)
    failed = sum(seconds * cores.get(cid, 1) for cid, seconds in stored_jobs.failed_seconds(db.conn))
    bound = _makespan_bound(run, work, first - START)
    listed_end = list_schedule(run.scenario.campaigns, [(t0, (h1 - h0) / (t1 - t0)) for (t0, h0), (t1, h1)
                                                        in pairwise(run.harvest) if t1 > t0])
    listed = None if listed_end is None else listed_end - (first - START)
    harvestable = sum(b.world.usage.harvestable for b in worlds.values())
    cigri = sum(b.world.usage.cigri for b in worlds.values())
    jobs = stored_jobs.task_jobs_by_state(db.conn)
    kills = stored_jobs.kills_by_reason(db.conn)
    tasks = stored_tasks.state_totals(db.conn)
    started_tasks = stored_jobs.tasks_with_jobs(db.conn)
    user_actual, user_ideal, class_actual, class_ideal = _shares(grid, run, cores)
    # over: terminated, failed (some task failed) or cancelled; nothing is left to run
    over = stored_campaigns.count_over(db.conn)
    finished = over == len(run.scenario.campaigns)  # else the run stopped at max_hours: no makespan to measure
    measured = finished and makespan > 0
    ends = stored_campaigns.terminated_ends(db.conn)
    mape = eta_mape(run.etas, ends)
    return {
        "scenario": {"seed": run.scenario.seed, "cycle_period": run.scenario.cycle_period,
                     "max_hours": run.scenario.max_hours, "campaigns": len(run.scenario.campaigns),
                     "tasks": sum(len(p.durations) for p in run.scenario.campaigns),
                     "clusters": {n: o.get("cores") for n, o in run.scenario.clusters.items()}},
        "finished": finished,
        "cycles": run.cycles,
        "simulated_hours": round((clock.now() - START) / 3600, 3),
        "makespan_hours": round(makespan / 3600, 4) if finished else None,
        "makespan_bound_hours": round(bound / 3600, 4),
        "bound_ratio": round(bound / makespan, 4) if measured else None,
        "list_schedule_hours": _round(None if listed is None else listed / 3600),
        "list_schedule_ratio": round(listed / makespan, 4) if measured and listed is not None else None,
        "bag_drained_hours": _round(_bag_drained(db, first)) if finished else None,
        "utilization": round(cigri / harvestable, 4) if harvestable else None,
        "useful_utilization": round(useful / harvestable, 4) if harvestable else None,
        "harvested_core_seconds": round(cigri),
        "useful_core_seconds": round(useful),
        "wasted_core_seconds": round(sum(wasted.values())),
        "wasted_by": {killer: round(seconds) for killer, seconds in sorted(wasted.items())},
        "failed_core_seconds": round(failed),
        "gangs": _gangs(db),
        "idle_core_seconds": round(harvestable - cigri),
        "work_core_seconds": round(work),
        "jobs": jobs,
        "tasks": tasks,
        "kills": {"cluster_preemptions": sum(b.world.usage.preempted for b in worlds.values()),
                  "walltime": sum(b.world.usage.timeouts for b in worlds.values()), **kills},
        "resubmissions": sum(jobs.values()) - started_tasks,
        "eta_mape": _round(mape),
        "eta_predictions": len(run.etas),
        "max_wait_seconds": stored_jobs.longest_wait(db.conn),
        "share": {
            "users": {u: {"core_hours": round(user_actual[u], 3), "ideal_core_hours": round(user_ideal[u], 3)}
                      for u in sorted(user_ideal)},
            "classes": {k: {"core_hours": round(class_actual[k], 3), "ideal_core_hours": round(class_ideal[k], 3)}
                        for k in sorted(class_ideal)},
            "jain_users": _round(jain(user_actual, user_ideal)),
            "jain_classes": _round(jain(class_actual, class_ideal)),
        },
        "timeline": [{"hour": round(s.at, 4), "running": s.running, "ideal": {k: round(v, 2) for k, v in s.ideal.items()},
                      "harvestable": s.harvestable, "waiting": s.waiting, "busy": s.busy, "pending": s.pending,
                      "clusters": s.clusters} for s in run.samples],
        "cycle_seconds": _spread(run.cycle_seconds),
    }


def _shares(grid: Grid, run: Run, cores: Mapping[int, int]
            ) -> tuple[dict[str, float], dict[str, float], dict[str, float], dict[str, float]]:
    """Core-hours per user and per class, held and ideal. Held: from the jobs' own start and
    end (the jobs table's, not cigri's lagging view at the samples). Ideal: between two samples,
    the cores cigri held then, split as the configuration asks (:func:`_ideal`) over the
    demands of the interval's first sample."""
    plans = run.scenario.campaigns
    default_class = grid.config.default_class()
    owner = {cid: (plan.user, plan.class_name or default_class) for cid, plan in enumerate(plans, 1)}
    end = clock.now()
    taken = [START + s.at * 3600 for s in run.samples]
    bounds = sorted({START, end, *taken})
    held: dict[int, list[float]] = {}
    for cid, started, finished in stored_jobs.task_runs(grid.db.conn, end):
        spread(held.setdefault(cid, [0.0] * (len(bounds) - 1)), bounds, cores.get(cid, 1), started, finished)
    user_actual: dict[str, float] = defaultdict(float)
    class_actual: dict[str, float] = defaultdict(float)
    for cid, seconds in held.items():
        user, klass = owner[cid]
        user_actual[user] += sum(seconds) / 3600
        class_actual[klass] += sum(seconds) / 3600
    user_ideal: dict[str, float] = defaultdict(float)
    class_ideal: dict[str, float] = defaultdict(float)
    for k in range(len(bounds) - 1):
        span = bounds[k + 1] - bounds[k]
        total = sum(seconds[k] for seconds in held.values())
        if total <= 0 or not run.samples:
            continue
        latest = max(0, bisect_right(taken, bounds[k]) - 1)  # the sample at the interval's start, else the first
        tree = run.samples[latest].demand
        for cid, cores_held in _ideal(grid.config, total / span, tree).items():
            user, klass = owner[cid]
            user_ideal[user] += cores_held * span / 3600
            class_ideal[klass] += cores_held * span / 3600
    return user_actual, user_ideal, class_actual, class_ideal


def spread(into: list[float], bounds: list[float], cores: float, start: float, stop: float) -> None:
    """Add a job's core-seconds, ``cores`` from ``start`` to ``stop``, to the intervals between
    ``bounds`` it overlaps."""
    k = max(0, bisect_right(bounds, start) - 1)
    while start < stop and k < len(into):
        edge = min(stop, bounds[k + 1])
        if edge > start:
            into[k] += cores * (edge - start)
            start = edge
        k += 1


def _wasted(db: Database, cores: Mapping[int, int]) -> dict[str, float]:
    """Core-seconds run by task jobs that ended before their task did, by killer (the keys of
    the report's ``kills``): the cluster's preemptions and walltime kills, and cigri's own."""
    result: dict[str, float] = defaultdict(float)
    for killer, campaign_id, seconds in stored_jobs.killed_seconds(db.conn):
        result[killer] += seconds * cores.get(campaign_id, 1)
    return {killer: seconds for killer, seconds in result.items() if seconds > 0}


def _gangs(db: Database) -> dict[str, int]:
    """The gangs that started (a member ran), and of those the ones partly started: some member
    never ran, or members started at different times (Armada's all-or-nothing broken)."""
    started = partly = 0
    for ran, members, first, last in stored_jobs.gang_starts(db.conn):
        if ran:
            started += 1
            partly += ran < members or last > first
    return {"started": started, "partly_started": partly}


def _bag_drained(db: Database, first: float) -> float | None:
    """Hours from the first submission until the last task first started: what dispatch can
    shorten. The rest of the makespan is the tail of tasks still running then, which no
    scheduler that does not know run times in advance can shorten (replicas run as long)."""
    last = stored_jobs.last_first_start(db.conn)
    return None if last is None else (last - first) / 3600


def _spread(seconds: list[float]) -> dict[str, float] | None:
    """Wall-clock seconds per cycle: what a cycle of cigri costs, whatever the simulated time."""
    if not seconds:
        return None
    ordered = sorted(seconds)
    return {"mean": round(sum(ordered) / len(ordered), 5), "p50": round(ordered[len(ordered) // 2], 5),
            "p95": round(ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)], 5),
            "max": round(ordered[-1], 5)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _makespan_bound(run: Run, work: float, offset: float) -> float:
    """No schedule ends before the cores local users leave free have added up to the work, nor
    before a campaign's longest task has run from its submission."""
    longest = max(p.submit_at + max(p.durations) for p in run.scenario.campaigns) - offset
    base = next((h for t, h in run.harvest if t >= offset), 0.0)
    previous = (offset, base)
    for moment, harvested in run.harvest:
        if moment < offset:
            continue
        if harvested - base >= work:
            t0, h0 = previous
            fraction = (work - (h0 - base)) / (harvested - h0) if harvested > h0 else 1.0
            return max(longest, t0 + fraction * (moment - t0) - offset)
        previous = (moment, harvested)
    return max(longest, run.harvest[-1][0] - offset if run.harvest else 0.0)


def list_schedule(plans: tuple[CampaignPlan, ...], capacity: list[tuple[float, float]]) -> float | None:
    """When the last task ends if each task starts, in the order listed (campaigns in their
    submission order), the instant enough of the cores local users leave free are, and is never
    killed: Graham's list scheduling on ``capacity`` ((seconds, cores) steps, the last held; the
    report's are each cycle's mean free cores, from the record the bound is computed from).

    The reference for a dispatcher that knows no run time in advance: with run times that do not
    depend on a task's place in the list, every such dispatcher that leaves no core idle starts
    tasks in the same pattern, so the gap between the makespan and this is cigri's own (its
    cycle, its kills, cores left idle), and the gap between this and the bound is the workload's.
    Tasks running when the capacity drops run on, so this is an optimistic reference.
    None when some task needs more cores than ever come free."""
    queue = sorted((plan.submit_at, index, plan) for index, plan in enumerate(plans))
    tasks = [(at, duration, plan.cores_per_task) for at, _, plan in queue for duration in plan.durations]
    steps = sorted(capacity) or [(0.0, 0)]
    ends: list[tuple[float, int]] = []  # (when, cores) of the running tasks
    used, step, now, last = 0, 0, min((t[0] for t in tasks), default=0.0), 0.0
    for at, duration, cores in tasks:
        now = max(now, at)
        while True:
            while ends and ends[0][0] <= now:
                used -= heapq.heappop(ends)[1]
            while step + 1 < len(steps) and steps[step + 1][0] <= now:
                step += 1
            if used + cores <= steps[step][1] + 1e-9:
                break
            now = min(ends[0][0] if ends else math.inf, steps[step + 1][0] if step + 1 < len(steps) else math.inf)
            if now == math.inf:
                return None
        heapq.heappush(ends, (now + duration, cores))
        used += cores
        last = max(last, now + duration)
    return last


def stopped(report: dict[str, Any]) -> str:
    """What an unfinished run's report says instead of a makespan."""
    return f"stopped at max_hours ({report['scenario']['max_hours']:g} h) before every campaign ended"


def plotter(path: Path) -> Any:
    """matplotlib's pyplot, to draw into ``path`` (PNG or SVG, from its suffix); refused in one
    line without it or for another suffix. Asked before a run, which may take minutes."""
    if path.suffix.lower() not in (".png", ".svg"):
        raise InputError(f"--plot {path}: expected a .png or .svg file")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("--plot needs matplotlib: pip install 'cigri[sim]'") from None
    return plt


def plot(report: dict[str, Any], path: Path) -> None:
    """Draw utilization and per-user shares over time (PNG or SVG, from the file's suffix)."""
    plt = plotter(path)
    timeline = report["timeline"]
    hours = [point["hour"] for point in timeline]
    users = sorted({user for point in timeline for user in point["ideal"]})
    figure, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(9, 6))
    top.plot(hours, [sum(p["running"].values()) for p in timeline], label="cigri's cores")
    top.plot(hours, [p["harvestable"] for p in timeline], label="cores free of local jobs", linestyle="--")
    top.plot(hours, [p["waiting"] for p in timeline], label="cigri jobs waiting", linestyle=":")
    top.set_ylabel("cores / jobs")
    top.set_title(f"utilization {report['utilization']}, "
                  + (f"makespan {report['makespan_hours']} h" if report["finished"] else stopped(report))
                  + f" (bound {report['makespan_bound_hours']} h)")
    top.legend(loc="upper right", fontsize="small")
    for user in users:
        line, = bottom.plot(hours, [p["running"].get(user, 0) for p in timeline], label=user)
        bottom.plot(hours, [p["ideal"].get(user, 0) for p in timeline], color=line.get_color(), linestyle="--")
    bottom.set_xlabel("simulated hours")
    bottom.set_ylabel("cores per user (dashed: ideal)")
    bottom.set_title(f"Jain's index {report['share']['jain_users']}")
    bottom.legend(loc="upper right", fontsize="small")
    figure.tight_layout()
    try:
        figure.savefig(path)
    except OSError as error:
        raise InputError(f"--plot {path}: {error.strerror}") from None
    finally:
        plt.close(figure)
