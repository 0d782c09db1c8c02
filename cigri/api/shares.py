"""Fair share explained (live or for a scenario), classes and users."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cigri import bag, faults
from cigri import db as database
from cigri.db import campaigns as stored_campaigns
from cigri.db import clusters as stored_clusters
from cigri.db import events as stored
from cigri.db import jobs as stored_jobs
from cigri.config import ClassConfig, Config, UserConfig
from cigri.api.access import campaign_row
from cigri.errors import InputError
from cigri.grid import Grid
from cigri.users import require_admin
from cigri.states import CAMPAIGN_ACTIVE, CampaignState, TaskState

if TYPE_CHECKING:
    from cigri.metascheduler.fairshare import Allocation, Scenario


def current_shares(grid: Grid, *, user: str) -> dict[str, Any]:
    """The live allocation explained: what the next cycle would give every class, user,
    campaign and cluster, asking each cluster its capacity now; nothing is written. An admin's
    view: it names every user's campaigns."""
    require_admin(grid.config, user, "cigri shares")
    return _live(grid)


def campaign_share(grid: Grid, campaign_id: int, *, user: str) -> dict[str, Any]:
    """Why one campaign gets what it gets (``gridstat -c N --why``): its line of ``cigri
    shares`` — class, demand, and per cluster its running and queued jobs, target, starts and preemptions,
    its fair share and the reason — with the clusters it never runs on and those left out of
    the next cycle. Its owner's or an admin's: it shows nothing of anyone else's campaigns. An
    ended campaign is not scheduled: its state is the reason."""
    row = campaign_row(grid, campaign_id, user)
    base = {"id": row["id"], "name": row["name"], "user": row["user"], "state": row["state"]}
    if row["state"] not in CAMPAIGN_ACTIVE:
        return {**base, "scheduled": False, "reason": f"{row['state']}: the campaign has ended"}
    result = _live(grid)
    around = {"clusters_refused": [{"cluster": r["cluster"], "why": r["why"]} for r in result["clusters_refused"]
                                   if r["campaign"] == campaign_id],
              "clusters_left_out": result["clusters_left_out"], "blocked_by": stored.blocking(grid.db.conn, campaign_id)}
    entry = next((c for c in result["campaigns"] if c["id"] == campaign_id), None)
    if entry is None:  # the allocation leaves out a campaign with nothing to hold and nowhere to start
        return {**base, "scheduled": False, "reason": _left_out(grid, campaign_id, row["state"]), **around}
    return {**entry, **base, "scheduled": True, **around}


def _left_out(grid: Grid, campaign_id: int, state: str) -> str:
    if set_aside := faults.set_aside_events(grid.db.conn, [campaign_id]):
        event_id, message = set_aside[campaign_id]
        return f"{message} (event {event_id}: gridevents --fix -e {event_id})"
    if state == CampaignState.PAUSED:
        return f"paused: starts no job until it is resumed (griddel -r {campaign_id})"
    if not bag.count(grid.db, campaign_id, (TaskState.PENDING,), limit=1):
        return "nothing to start: no task waits in its bag"
    return (f"no cluster takes its jobs now (blacklisted for it, unreachable, its prologue failed, the cluster "
            f"refused its jobs, or its type waits for the night): see gridevents -c {campaign_id}")


def _live(grid: Grid) -> dict[str, Any]:
    """The allocation the next cycle would make, with the clusters' capacities asked now."""
    from cigri.metascheduler.metascheduler import allocate, gather

    capacities, unreachable = {}, []
    for cluster_id, name, blacklisted, reason in stored_clusters.blacklists(grid.db.conn):
        if blacklisted:
            unreachable.append({"name": name, "error": f"blacklisted: {reason}" if reason else "blacklisted"})
            continue
        try:
            capacities[cluster_id] = grid.backend(cluster_id).capacity()
        except Exception as error:  # a broken cluster is left out, as the cycle does
            unreachable.append({"name": name, "error": str(error)})
    gathered = gather(grid, capacities, database.now())
    result = explain(gathered.scenario, allocate(grid.config, gathered.scenario))
    for campaign in result["campaigns"]:
        campaign["name"] = gathered.names.get(campaign["id"])
    result["clusters_left_out"] = unreachable
    result["clusters_refused"] = [{"campaign": campaign_id, "cluster": cluster, "why": why}
                                  for campaign_id, clusters in sorted(gathered.refused.items())
                                  for cluster, why in sorted(clusters.items())]
    result["campaigns_set_aside"] = [{"campaign": campaign_id, "event": event_id, "message": message}
                                     for campaign_id, (event_id, message) in faults.set_aside_events(grid.db.conn).items()]
    return result


def read_scenario(path: Path) -> Any:
    """A scenario file of ``cigri shares --scenario`` or ``cigri simulate``, parsed: both read
    it here, so both refuse the same bad files, each with one line naming the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise InputError(f"{path}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not valid UTF-8: {error}") from None
    except (ValueError, RecursionError) as error:  # too deep, or an integer of too many digits
        raise InputError(f"{path}: not valid JSON: {error}") from None
    _refuse_non_finite(path, data)
    return data


def _refuse_non_finite(path: Path, data: Any) -> None:
    """Python's json reads NaN, Infinity and 1e999, which JSON has not: NaN passes every bound a
    schema or a check sets, and an allocation or report printed them back as invalid JSON."""
    stack = [("scenario", data)]
    while stack:  # not recursive: the parser takes nesting nearly as deep as the interpreter allows
        where, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"{path}: {where}: expected a finite number, got {json.dumps(value)}")
        if isinstance(value, dict):
            stack.extend((f"{where}.{key}", item) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((f"{where}[{index}]", item) for index, item in reversed(list(enumerate(value))))


def shares_of_scenario(path: Path, config: Config) -> dict[str, Any]:
    """``cigri shares --scenario``: the allocation of a hypothetical grid read from a JSON file."""
    from cigri.metascheduler import fairshare
    from cigri.metascheduler.metascheduler import allocate

    data = read_scenario(path)
    try:
        scenario = fairshare.scenario_from_json(data)
    except ValueError as error:
        raise InputError(f"{path}: {error}") from None
    return explain(scenario, allocate(config, scenario))


def explain(scenario: Scenario, allocation: Allocation) -> dict[str, Any]:
    """The allocation's JSON, with each class's priority, weight, policy, pool, user limit and init cap,
    each user's weight, and the pools."""
    from cigri.metascheduler import fairshare

    result = fairshare.allocation_to_json(allocation)
    specs = {c.name: c for c in scenario.classes or (fairshare.ClassSpec("default"),)}
    for entry in result["classes"]:
        spec = specs[entry["name"]]
        entry.update(priority=spec.priority, weight=spec.weight, policy=str(spec.policy), pool=spec.pool,
                     min_user_limit_percent=spec.min_user_limit_percent, init_cap=spec.init_cap)
    for entry in result["users"]:
        entry["weight"] = scenario.user(entry["name"]).weight
    result["pools"] = [{"name": p.name, "clusters": list(p.clusters), "parent": p.parent} for p in scenario.pools]
    return result


@dataclass(frozen=True)
class _Load:
    """One active campaign: its class as the metascheduler reads it, its tasks in the bag and
    its held jobs (task jobs not marked for a kill; submitting ones count as waiting)."""

    id: int
    user: str
    class_name: str
    pending: int
    waiting: int
    running: int


def _loads(grid: Grid) -> list[_Load]:
    """Every active campaign's load, from the database only (no cluster is asked), in the class
    it is scheduled in (:meth:`Config.class_of`)."""
    jobs: dict[tuple[int, bool], int] = defaultdict(int)
    for campaign_id, running, count in stored_jobs.held_tasks_per_campaign(grid.db.conn):
        jobs[(campaign_id, bool(running))] = count
    campaigns = stored_campaigns.active_by_class(grid.db.conn)
    return [_Load(i, user, grid.config.class_of(name).name, bag.count(grid.db, i, (TaskState.PENDING,)),
                  jobs[(i, False)], jobs[(i, True)]) for i, user, name in campaigns]


def _in_order(config: Config) -> list[ClassConfig]:
    """The classes in the metascheduler's evaluation order; without any, its implicit fair-share ``default``."""
    return sorted(config.classes or (ClassConfig("default"),), key=lambda c: (c.priority, c.name))


def _totals(loads: list[_Load]) -> dict[str, int]:
    return {"pending": sum(load.pending for load in loads), "waiting": sum(load.waiting for load in loads),
            "running": sum(load.running for load in loads)}


def list_classes(grid: Grid) -> list[dict[str, Any]]:
    """Every class as configured (its initialization cap and doubling as they apply), in
    evaluation order, with what its active campaigns hold and wait for now (``cigri classes``):
    read from the configuration and the database only, so it answers while clusters are down."""
    loads, default = _loads(grid), grid.config.default_class()
    result = []
    for klass in _in_order(grid.config):
        members = [load for load in loads if load.class_name == klass.name]
        result.append({"name": klass.name, "priority": klass.priority, "weight": klass.weight, "policy": klass.policy,
                       "users": None if klass.users is None else list(klass.users),
                       "clusters": None if klass.clusters is None else list(klass.clusters),
                       "default": klass.name == default, "finalize": klass.finalize,
                       "init_cap": grid.config.init_cap(klass.name),
                       "expand_by_doubling": grid.config.expands_by_doubling(klass.name), "campaigns": len(members),
                       "users_active": len({load.user for load in members}), **_totals(members)})
    return result


def _user_settings(user: UserConfig) -> dict[str, Any]:
    return {"allotment": user.allotment, "allotment_memory_gb": user.allotment_memory_gb,
            "affinity": dict(user.affinity)}


def list_users(grid: Grid) -> dict[str, Any]:
    """The ``[users]`` defaults, and every user configured or with an active campaign (by name)
    with the effective allotment and affinity, the classes it may submit to, its load, and the
    cores and memory its jobs hold in fixed_share and reserve classes: what the allotment caps,
    each task costing what the metascheduler charges it (``cigri users``). No cluster is asked."""
    from cigri.metascheduler.metascheduler import task_cost

    config, loads = grid.config, _loads(grid)
    ordered = _in_order(config)
    capped = [load for load in loads if config.class_of(load.class_name).counts_allotment]
    costs = {i: task_cost(values) for i, values in grid.campaign_properties([load.id for load in capped]).items()}
    result = []
    for name in sorted(set(config.users.named) | {load.user for load in loads}):
        mine = [load for load in loads if load.user == name]
        held = [(load.waiting + load.running, *costs[load.id]) for load in mine if load.id in costs]
        memory_gb = sum((jobs * memory for jobs, _, memory in held), 0.0)
        result.append({"name": name, "configured": name in config.users.named, **_user_settings(config.users.of(name)),
                       "classes": [c.name for c in ordered if c.users is None or name in c.users],
                       "campaigns": len(mine), **_totals(mine),
                       "held_non_preemptable": {"cores": sum(jobs * cores for jobs, cores, _ in held),
                                                "memory_gb": round(memory_gb, 3)}})
    return {"default": _user_settings(config.users.default), "users": result}
