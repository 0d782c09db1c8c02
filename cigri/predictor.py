"""The predictor (CiGri's *spritz*): what each campaign will do next, and how much to send.

Read side, for gridstat, the metascheduler and the simulator: functions of the database and a
clock value ``now`` giving, per campaign and cluster, the throughput over a sliding window
(whole minutes: the last hour's), the average and standard deviation of task durations, the
remaining time and ETA, and the same per campaign. They read ``campaign_stats``,
``throughput_minutes``, the bag's index, the ``jobs_terminated`` index and the campaign's
active jobs through ``jobs_by_campaign``, never a scan of jobs or tasks.

Control side, :func:`predict`, run each cycle between colombo and the metascheduler, in one
transaction:

1. *Stress*: a cluster whose own users queue more jobs than it has free slots
   (``others' waiting jobs / (free slots + 1)`` above its ``stress_factor``) gets no new job
   until the ratio falls to half the factor; a ``CLUSTER_STRESSED`` event stays open meanwhile.
2. *Taps*: how many of a campaign's jobs may wait on a cluster (``taps.rate``; 0 sends
   nothing; the metascheduler sends at most the rate minus what already waits), sized each
   cycle by the cluster's job-ratio algorithm from the 2009 design (:data:`JOB_RATIO`).
3. *Flood control*: a waiting job older than the cluster's ``remote_waiting_timeout``, or
   older than ``flood_grace`` where the tap is closed (stress, penalty), gets kill reason
   ``flood``. Killing the jobs beyond an open tap churned: in the simulator's shares scenario
   it cut utilization from 0.91 to 0.74. Nikita kills a flagged job at
   the end of the cycle and colombo puts its task back at the head of the bag, uncharged.
   Each one adds 1 to the campaign's penalty on that cluster, halved every
   ``penalty_half_life``: it lowers the cluster's affinity in the fair share, and while it
   exceeds by :data:`SHUN` the campaign's penalty on another usable cluster, the tap there is
   closed beyond the cluster's free slots: only jobs that start at once, so that a penalty
   never leaves a core idle.
"""

from __future__ import annotations

import logging
import math
import sqlite3
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from sqlite_utils import Database

from cigri import bag
from cigri import db as database
from cigri.config import JOB_RATIOS, RunnerSettings
from cigri.cycle_context import CycleContext
from cigri.db import campaigns as stored_campaigns
from cigri.db import jobs as stored_jobs
from cigri.db.events import stress_of, stressed_clusters
from cigri.db.store import connection
from cigri.events import close, open_event
from cigri.states import (
    CAMPAIGN_ACTIVE,
    TASK_OPEN,
    CampaignState,
    TaskState,
)

log = logging.getLogger("cigri.predictor")
WINDOW = 3600.0  # seconds of ended jobs the throughput is measured over
OPEN, CLOSED = "open", "closed"
Reader = Database | sqlite3.Connection  # the metascheduler reads inside its own transaction
SHUN = 0.5  # one flood kill shuns a cluster for a half-life; each doubling of the kills, one more


# --- job-ratio algorithms (pure) ----------------------------------------------------------

@dataclass(frozen=True)
class Observation:
    """What one cycle shows of a campaign on a cluster."""

    rate: int  # the tap so far: jobs allowed to wait
    waiting: int  # the campaign's jobs queued there (being submitted or waiting)
    free: int  # the cluster's free slots
    pending: bool  # tasks are left in the campaign's bag
    drain: int = 0  # the campaign's jobs expected to end there in one cycle period, each freeing a core


@dataclass(frozen=True)
class TapLimits:
    initial: int = 3
    factor: float = 1.5  # cigri_tap only
    maximum: int = 100


def two_way_adaptive(o: Observation, limits: TapLimits) -> int:
    """Move by the measured gap: up by the free slots nothing waits for, down by the jobs
    waiting beyond the free slots. Settles in a cycle or two without flooding."""
    gap = o.free - o.waiting
    return o.rate + gap if gap < 0 or o.pending else o.rate


def adaptive_down_exponential_up(o: Observation, limits: TapLimits) -> int:
    """Double while nothing waits beyond the free slots, and at least fill them (never less than
    two-way adaptive); shed exactly the excess otherwise. The aggressive one: fills a cluster
    fastest, overshoots, and relies on flood kills."""
    excess = o.waiting - o.free
    if excess > 0:
        return o.rate - excess
    return max(2 * o.rate, o.rate - excess) if o.pending else o.rate


def slow_start(o: Observation, limits: TapLimits) -> int:
    """TCP's slow start: double while nothing waits beyond the free slots, but never past them
    (never more than two-way adaptive), back to one job as soon as some wait. The cautious one,
    for clusters shared with demanding local users: the fewest jobs queued ahead of theirs."""
    if o.waiting > o.free:
        return 1
    return min(2 * o.rate, o.rate + o.free - o.waiting) if o.pending else o.rate


def cigri_tap(o: Observation, limits: TapLimits) -> int:
    """CiGri v3's tap, for comparison: ×factor while none of the campaign's jobs waits, up to the
    maximum (v3's ``RUNNER_TAP_INCREASE_MAX``, whatever the cluster's size), ÷factor (not below
    the initial rate) while any does, free slots or not."""
    if o.waiting > 0:
        return max(limits.initial, int(o.rate / limits.factor))
    return min(limits.maximum, max(o.rate + 1, int(o.rate * limits.factor))) if o.pending else o.rate


JOB_RATIO: dict[str, Callable[[Observation, TapLimits], int]] = {
    "two_way_adaptive": two_way_adaptive,
    "adaptive_down_exponential_up": adaptive_down_exponential_up,
    "slow_start": slow_start,
    "cigri_tap": cigri_tap,
}
assert tuple(JOB_RATIO) == JOB_RATIOS


def next_rate(algorithm: str, o: Observation, limits: TapLimits) -> int:
    """The tap for the next cycle: at least 1 (a cluster is always probed).

    Never below the measured drain while tasks are pending, plus a margin: the free slots seen
    at a cycle's start say nothing of the slots that short tasks free during the cycle, and a
    queue that the cluster empties within one cycle period floods nobody (it is the throughput
    floor). Jobs end at random, so a cycle sees about drain +- sqrt(drain) of them end (Poisson):
    a queue of the mean alone leaves slots idle in half the cycles.

    The maximum bounds the jobs beyond what the cluster takes within a cycle (its free slots and
    that floor), not the tap itself: a fixed ceiling of 100 took ten cycles to fill an idle
    1,000-core cluster and then kept 63-second tasks on a fifth of it."""
    floor = o.drain + math.ceil(math.sqrt(o.drain)) if o.pending else 0
    ceiling = o.free + floor + limits.maximum
    return max(1, min(ceiling, max(floor, JOB_RATIO[algorithm](o, limits))))


# --- stress, penalties and flood (pure) ---------------------------------------------------

def stress(others_waiting: int, free: int) -> float:
    """How much the cluster's own users wait for it: their queued jobs per free slot (+1)."""
    return others_waiting / (free + 1)


def stressed(value: float, factor: float, was_stressed: bool) -> bool:
    """Above the factor; once stressed, until the value falls to half of it. 0 turns it off."""
    if factor <= 0:
        return False
    return value > factor or (was_stressed and value > factor / 2)


def decayed(penalty: float, since: float, now: float, half_life: float) -> float:
    return penalty * 0.5 ** (max(0.0, now - since) / half_life)


def flood_victims(waiting: Iterable[tuple[int, float | None]], closed: bool, now: float,
                  timeout: float, grace: float) -> list[int]:
    """Jobs to kill among a campaign's waiting jobs on a cluster, given as ``(job id,
    submitted_at)``: every one waiting past ``timeout`` (0: never) and, where the tap is
    ``closed``, every one that waited ``grace``. A job not yet sent has no age."""
    victims = []
    for job_id, since in waiting:
        age = 0.0 if since is None else now - since
        if (timeout > 0 and age > timeout) or (closed and age > grace):
            victims.append(job_id)
    return victims


# --- reading: throughput, durations, ETA --------------------------------------------------

@dataclass(frozen=True)
class ClusterFigures:
    cluster_id: int
    terminated: int
    ended_otherwise: int
    average_duration: float | None
    duration_stddev: float | None
    throughput_per_hour: float | None  # terminated tasks per hour over the window


@dataclass(frozen=True)
class CampaignFigures:
    clusters: dict[int, ClusterFigures]
    average_duration: float | None
    duration_stddev: float | None
    throughput_per_hour: float | None
    remaining_tasks: int
    remaining_seconds: float | None  # None: nothing measured yet, or the campaign stalls
    eta: float | None  # epoch seconds


def _mean_stddev(n: int, total: float, squares: float) -> tuple[float | None, float | None]:
    if not n:
        return None, None
    mean = total / n
    return mean, math.sqrt(max(0.0, squares / n - mean * mean))


@dataclass(frozen=True)
class Phase:
    """Which throughput a campaign has: measured over the window while it runs, none while it
    is paused, that of its own life once it is over (``end``: its ``finished_at``)."""

    paused: bool
    end: float | None  # None while the campaign is active


def phase(db: Reader, campaign_id: int) -> Phase:
    state, finished_at = stored_campaigns.phase(connection(db), campaign_id)
    return Phase(state == CampaignState.PAUSED, None if state in CAMPAIGN_ACTIVE else finished_at)


def _life(first_start: float | None, last_end: float | None, end: float) -> float:
    """Seconds from a first start to a last end, not past the campaign's end (the jobs a
    cancel kills end a cycle later)."""
    return 0.0 if first_start is None or last_end is None else min(last_end, end) - first_start


def minutes_kept(now: float) -> int:
    """The oldest minute whose terminated tasks are kept counted (``throughput_minutes``): two windows back."""
    return int((now - 2 * WINDOW) // 60)


def terminated_since(db: Reader, campaign_id: int, minute: int) -> dict[int, int]:
    """Per cluster, the campaign's tasks terminated from the start of ``minute`` (epoch minutes)
    on: a row of ``throughput_minutes`` a minute, however fast the campaign drains, so a read
    costs the same for ten tasks an hour as for thousands a minute."""
    return stored_campaigns.terminated_since(connection(db), campaign_id, minute)


def cluster_figures(db: Reader, campaign_id: int, now: float, window: float = WINDOW) -> dict[int, ClusterFigures]:
    """Per cluster where the campaign has ended jobs: counts, durations and throughput.

    While the campaign runs, the throughput counts tasks terminated since the window's start,
    the first whole minute at most ``window`` ago, over the time the campaign has run there
    since (so a young campaign is not diluted). A paused campaign has none: it starts nothing, and the rate of its last jobs
    ending would move its ETA with the clock. A campaign that is over keeps the throughput of
    its own life there, whenever it is asked: its tasks terminated there over the time from its
    first start to its last end there.
    """
    when = phase(db, campaign_id)
    first_minute = math.ceil((now - window) / 60)
    recent = {} if when.paused or when.end is not None else terminated_since(db, campaign_id, first_minute)
    result = {}
    for cluster_id, terminated, failed, total, squares, first_start, last_end in stored_campaigns.figures_per_cluster(
            connection(db), campaign_id):
        if when.end is not None:
            done, span = terminated, _life(first_start, last_end, when.end)
        elif when.paused:
            done, span = 0, 0.0
        else:
            done = recent.get(cluster_id, 0)
            span = now - max(60.0 * first_minute, first_start) if first_start is not None else 0.0
        mean, stddev = _mean_stddev(terminated, total, squares)
        result[cluster_id] = ClusterFigures(cluster_id, terminated, failed, mean, stddev,
                                            3600 * done / span if span > 0 else None)
    return result


def campaign_figures(db: Reader, campaign_id: int, now: float, *, remaining: int | None = None,
                     window: float = WINDOW) -> CampaignFigures:
    """The campaign's throughput, durations, remaining time and ETA.

    While it runs, the throughput is the sum of its clusters'; paused, it has none and so no
    remaining time or ETA; over, it is its tasks terminated over its own life (first start to
    last end, on any cluster), its remaining time 0 and its ETA its end. ``remaining`` (open
    tasks) may be passed by a caller that already counted them.
    """
    when = phase(db, campaign_id)
    clusters = cluster_figures(db, campaign_id, now, window)
    left = bag.count(db, campaign_id, TASK_OPEN) if remaining is None else remaining
    done = sum(c.terminated for c in clusters.values())
    total, squares, first_start, last_end = stored_campaigns.figures(connection(db), campaign_id)
    mean, stddev = _mean_stddev(done, total, squares)
    if when.end is not None:
        life = _life(first_start, last_end, when.end)
        return CampaignFigures(clusters, mean, stddev, 3600 * done / life if life > 0 else None, left, 0.0, when.end)
    rates = [c.throughput_per_hour for c in clusters.values() if c.throughput_per_hour is not None]
    throughput = sum(rates) if rates else None
    seconds = None if when.paused else 0.0 if not left else (3600 * left / throughput if throughput else None)
    return CampaignFigures(clusters, mean, stddev, throughput, left, seconds,
                           None if seconds is None else now + seconds)


@dataclass(frozen=True)
class ClusterRemaining:
    cluster_id: int
    held: int  # the campaign's task jobs there now: being submitted, waiting or running
    part: float  # what the cluster has left to run: held, plus its share of the bag
    remaining_seconds: float | None  # None: no throughput measured there
    eta: float | None  # epoch seconds


def cluster_remaining(db: Reader, campaign_id: int, now: float, clusters: dict[int, ClusterFigures] | None = None,
                      *, pending: int | None = None, held: dict[int, int] | None = None,
                      window: float = WINDOW) -> dict[int, ClusterRemaining]:
    """Per cluster where the campaign has run or holds jobs: its part of the campaign's
    remaining work, the time it needs for it, and its ETA.

    A cluster's part is the campaign's jobs it holds now plus a share of the tasks still in the
    bag in proportion to its throughput, ``part = held + pending * throughput / sum of the
    throughputs``, and its remaining time is ``3600 * part / throughput``. Why: a job already
    sent can only end where it is, at that cluster's pace, while the bag's tasks go to whichever
    cluster frees a slot, so each takes them at its own rate. A cluster whose queue holds many
    of the campaign's jobs compared with what it runs per hour thus shows a later ETA than the
    others: it is the one the campaign waits for. The campaign's own remaining time (open tasks
    over the summed throughput, :func:`campaign_figures`) is left as it is, its error being a
    measured figure; when each open task out of the bag has one job, on a cluster with a
    throughput, it is the throughput-weighted mean of these, so they bracket it. Without a
    measured throughput (None or 0) a cluster's remaining time and ETA are unknown (None), as
    the campaign's are, unless nothing is left for it (it holds none of the campaign's jobs and
    the bag is empty): 0, as the campaign's is once no task is open.

    A paused campaign's clusters have no remaining time or ETA; a finished campaign's have 0
    and its end.

    ``clusters`` (:func:`cluster_figures`), ``pending`` (tasks in the bag) and ``held`` (the
    campaign's active task jobs per cluster) may be passed by a caller that already has them.
    """
    when = phase(db, campaign_id)
    clusters = cluster_figures(db, campaign_id, now, window) if clusters is None else clusters
    in_bag = bag.count(db, campaign_id, (TaskState.PENDING,)) if pending is None else pending
    if held is None:
        held = stored_jobs.active_tasks_per_cluster(connection(db), campaign_id)
    rates = {k: c.throughput_per_hour for k, c in clusters.items() if c.throughput_per_hour}
    total = sum(rates.values())
    result = {}
    for cluster_id in clusters.keys() | held.keys():
        rate, mine = rates.get(cluster_id), held.get(cluster_id, 0)
        part = mine + (in_bag * rate / total if rate else 0.0)
        if when.paused:
            seconds, eta = None, None
        elif when.end is not None:
            seconds, eta = 0.0, when.end
        else:
            seconds = 0.0 if not mine and not in_bag else (3600 * part / rate if rate else None)
            eta = None if seconds is None else now + seconds
        result[cluster_id] = ClusterRemaining(cluster_id, mine, part, seconds, eta)
    return result


def throughputs(db: Reader, campaign_ids: Iterable[int], now: float,
                window: float = WINDOW) -> dict[tuple[int, int], float]:
    """``{(campaign, cluster): tasks per hour}`` where measured: the fair share's placement hint."""
    return {(campaign_id, cluster_id): figures.throughput_per_hour
            for campaign_id in campaign_ids
            for cluster_id, figures in cluster_figures(db, campaign_id, now, window).items()
            if figures.throughput_per_hour is not None}


def drains(db: Reader, campaign_ids: Iterable[int], now: float, period: float) -> dict[tuple[int, int], int]:
    """``{(campaign, cluster): jobs expected to end there in the next period}``, each freeing a
    core for a queued one: how fast the cluster takes the campaign's queue. Two views of it,
    the larger wins:

    - Little's law: the jobs running there now over their mean duration there. It follows a
      step of the cluster's load at once (the running jobs change in the cycle the local users
      take their cores), where counting recent starts lagged by its window and, as clusters kill
      the youngest best-effort jobs first, fell to nothing at the step.
    - The jobs started there in the last period that are running or terminated, each ending
      within a period with odds ``min(1, period / mean)``: a job shorter than a cycle is seldom
      seen running by a poll, so Little's law alone would starve a cluster of short tasks.

    The mean duration counts the running jobs' ages too, as run time of jobs that last at least
    that long: total time run over jobs ended (at least one), the exponential law's estimate
    from censored durations. The ended jobs alone are the short ones at first: a campaign whose
    long tasks come first queued a whole cycle's starts behind cores busy for half an hour,
    which waited past the flood timeout. Until a job has ended there, at most the running jobs
    are expected to end. Reads the running jobs, the index of the latest terminated ones and
    ``campaign_stats``, never a scan."""
    ids = list(campaign_ids)
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    ended = stored_campaigns.durations_per_pair(connection(db), ids)
    since = now - period
    running: dict[tuple[int, int], int] = defaultdict(int)
    ages: dict[tuple[int, int], float] = defaultdict(float)
    started: dict[tuple[int, int], int] = defaultdict(int)
    for c, k, n, age, recent in stored_jobs.running_tasks_with_ages(connection(db), ids, now, since):
        running[(c, k)], ages[(c, k)], started[(c, k)] = n, age or 0.0, recent
    for c, k, n in stored_jobs.terminated_tasks_since(connection(db), ids, since):
        started[(c, k)] += n
    result = {}
    for key in running.keys() | started.keys():
        total, n = ended.get(key, (0.0, 0))
        mean = (total + ages[key]) / max(1, n)
        if mean <= 0:  # nothing has run a measurable time: every start ends within the period
            drain = started[key]
        else:
            drain = max(int(running[key] * period / mean), int(started[key] * min(1.0, period / mean)))
        result[key] = drain if n else min(drain, running[key])
    return {key: n for key, n in result.items() if n}


def affinity_penalties(db: Reader, campaign_ids: Iterable[int],
                       now: float | None = None) -> dict[tuple[int, int], float]:
    """``{(campaign, cluster): penalty}`` now (flood-killed jobs, decayed); absent means 0.
    The metascheduler subtracts it from the campaign's affinity for the cluster."""
    ids = list(campaign_ids)
    if not ids:
        return {}
    moment = database.now() if now is None else now
    return {(c, k): decayed(p, since, moment, half_life)
            for c, k, p, since, half_life in stored_campaigns.penalties(connection(db), ids)}


def taps(db: Reader, campaign_id: int) -> dict[int, int]:
    """``{cluster: jobs allowed to wait}`` of a campaign as last sized."""
    return stored_campaigns.taps(connection(db), campaign_id)


# --- the cycle step ------------------------------------------------------------------------

@dataclass(frozen=True)
class _Pair:
    campaign_id: int
    cluster_id: int


def _setting(runner: RunnerSettings, options: dict[str, Any], key: str) -> Any:
    """A per-cluster key, else the ``[runner]`` default."""
    return options.get(key, getattr(runner, key))


def predict(ctx: CycleContext) -> int:
    """Size every tap, judge stress and flag flooding jobs; return how many jobs were flagged."""
    db, runner, now = ctx.grid.db, ctx.grid.config.runner, database.now()
    limits = TapLimits(runner.tap_initial, runner.tap_factor, runner.tap_max)
    campaign_ids = [c for c in stored_campaigns.in_treatment(db.conn) if c not in ctx.set_aside]
    pairs = [_Pair(c, k) for c, clusters in ctx.grid.campaign_properties(campaign_ids).items() for k in clusters
             if k in ctx.capacities]
    queued = stored_jobs.queued_tasks(db.conn)
    waiting = _waiting_jobs(db, list(ctx.capacities))
    pending = {c for c in campaign_ids if bag.count(db, c, (TaskState.PENDING,), limit=1)}
    period = ctx.grid.config.settings.cycle_period
    drain = ctx.drains = drains(db, campaign_ids, now, period)
    flagged = 0
    with database.write(db) as conn:
        hot = _judge_stress(ctx, conn)
        penalties = affinity_penalties(db, campaign_ids, now)
        previous = stored_campaigns.taps_in_treatment(conn)
        rates: dict[tuple[int, int], int] = {}
        closed: set[tuple[int, int]] = set()
        lowest = _lowest_penalties(pairs, penalties, hot)
        for pair in pairs:
            key = (pair.campaign_id, pair.cluster_id)
            options = ctx.cluster_options(pair.cluster_id)
            rate, state = previous.get(key, (limits.initial, CLOSED))
            if pair.cluster_id in hot:
                rates[key], state = 0, CLOSED
            elif _shunned(pair, lowest, penalties):  # only jobs that start at once: no idle core for a penalty
                rates[key], state = ctx.capacities[pair.cluster_id].free_slots, CLOSED
            elif state == CLOSED:  # new, or reopening after stress or a penalty: start again
                rates[key], state = limits.initial, OPEN
            else:
                seen = Observation(rate, queued.get(key, 0), ctx.capacities[pair.cluster_id].free_slots,
                                   pair.campaign_id in pending, drain.get(key, 0))
                rates[key] = next_rate(_setting(runner, options, "job_ratio"), seen, limits)
            if state == CLOSED:
                closed.add(key)
            stored_campaigns.set_tap(conn, *key, rates[key], state)
        for (campaign_id, cluster_id), jobs in waiting.items():
            options = ctx.cluster_options(cluster_id)
            timeout = float(_setting(runner, options, "remote_waiting_timeout"))
            # the last cycle before the timeout kills, so no job waits past it (never before half)
            timeout = max(timeout / 2, timeout - ctx.grid.config.settings.cycle_period)
            victims = flood_victims(jobs, (campaign_id, cluster_id) in closed, now, timeout,
                                    runner.flood_grace)
            if victims:
                _flag(conn, campaign_id, cluster_id, victims, now, runner.penalty_half_life)
                flagged += len(victims)
                log.info("campaign %s: %s job(s) flooding cluster %s killed", campaign_id, len(victims),
                         ctx.name(cluster_id))
    return flagged


def _waiting_jobs(db: Database, cluster_ids: list[int]) -> dict[tuple[int, int], list[tuple[int, float | None]]]:
    """Task jobs queued on each usable cluster, not already asked to die. Jobs
    of a temporal group are left out: they are one remote job, running its members in turn."""
    result: dict[tuple[int, int], list[tuple[int, float | None]]] = defaultdict(list)
    for cluster_id in cluster_ids:
        for job_id, campaign_id, since in stored_jobs.waiting_alone(db.conn, cluster_id):
            result[(campaign_id, cluster_id)].append((job_id, since))
    return result


def _judge_stress(ctx: CycleContext, conn: sqlite3.Connection) -> set[int]:
    """The stressed clusters; open or close their CLUSTER_STRESSED events. The cluster's
    queue minus cigri's own waiting jobs is what its users wait with."""
    runner = ctx.grid.config.runner
    ours = stored_jobs.waiting_per_cluster(conn)
    was = stressed_clusters(conn)
    hot = set()
    for cluster_id, capacity in ctx.capacities.items():
        factor = float(_setting(runner, ctx.cluster_options(cluster_id), "stress_factor"))
        value = stress(max(0, capacity.queued_jobs - ours.get(cluster_id, 0)), capacity.free_slots)
        if stressed(value, factor, cluster_id in was):
            hot.add(cluster_id)
            if cluster_id not in was:
                open_event(conn, "cluster", "CLUSTER_STRESSED",
                           f"cluster under stress ({value:.2f} > {factor:g}: its users' waiting jobs per free "
                           "slot); no new job until it falls to half", cluster_id=cluster_id)
        elif cluster_id in was:
            close(conn, *stress_of(cluster_id))
    return hot


def _lowest_penalties(pairs: list[_Pair], penalties: dict[tuple[int, int], float], hot: set[int]) -> dict[int, float]:
    """Each campaign's lowest penalty over its usable clusters that are not stressed."""
    lowest: dict[int, float] = {}
    for pair in pairs:
        if pair.cluster_id not in hot:
            penalty = penalties.get((pair.campaign_id, pair.cluster_id), 0.0)
            lowest[pair.campaign_id] = min(penalty, lowest.get(pair.campaign_id, penalty))
    return lowest


def _shunned(pair: _Pair, lowest: dict[int, float], penalties: dict[tuple[int, int], float]) -> bool:
    """Penalised on this cluster at least :data:`SHUN` more than on another usable one."""
    mine = penalties.get((pair.campaign_id, pair.cluster_id), 0.0)
    return pair.campaign_id in lowest and mine - lowest[pair.campaign_id] >= SHUN


def _flag(conn: sqlite3.Connection, campaign_id: int, cluster_id: int, job_ids: list[int], now: float,
          half_life: float) -> None:
    """Ask nikita to kill the jobs and add them to the (decayed) penalty, in the caller's transaction."""
    stored_jobs.mark_flooding(conn, job_ids)
    row = stored_campaigns.penalty(conn, campaign_id, cluster_id)
    penalty = (decayed(row[0], row[1], now, row[2]) if row else 0.0) + len(job_ids)
    stored_campaigns.set_penalty(conn, campaign_id, cluster_id, penalty, now, half_life)
