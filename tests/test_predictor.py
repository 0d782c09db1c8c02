"""The predictor: job-ratio algorithms, stress and flood choices (pure), and its figures read
from a real database (throughput over the window, durations, remaining time, ETA)."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest
from test_submit import grid  # noqa: F401  (a fixture: two local clusters, "local" and "other")

from cigri import api, bag, config, predictor
from cigri.cycle import run_cycle
from cigri.db import campaigns as stored_campaigns
from cigri.grid import Grid, open_grid
from cigri.predictor import Observation, TapLimits, next_rate
from cigri.states import JobState, TaskState
from cigri.users import acting_user

LIMITS = TapLimits(initial=3, factor=1.5, maximum=100)


def grow(algorithm: str, rate: int, cycles: int, free: int = 0) -> list[int]:
    """Rates over cycles in which nothing waits and tasks are pending."""
    rates = [rate]
    for _ in range(cycles):
        rates.append(next_rate(algorithm, Observation(rates[-1], waiting=0, free=free, pending=True), LIMITS))
    return rates


# --- growth and shrink sequences -------------------------------------------------------------

def test_cigri_tap_reproduces_cigri_v3s_documented_sequence() -> None:
    assert grow("cigri_tap", 3, 10) == [3, 4, 6, 9, 13, 19, 28, 42, 63, 94, 100]
    rates = [100]
    for _ in range(9):
        rates.append(next_rate("cigri_tap", Observation(rates[-1], waiting=1, free=50, pending=True), LIMITS))
    assert rates == [100, 66, 44, 29, 19, 12, 8, 5, 3, 3]  # shrinks while any job waits, free slots or not


def test_exponential_up_doubles_to_the_maximum_and_fills_the_free_slots_at_least() -> None:
    assert grow("adaptive_down_exponential_up", 3, 6) == [3, 6, 12, 24, 48, 96, 100]
    assert grow("adaptive_down_exponential_up", 1, 3) == [1, 2, 4, 8]
    assert grow("adaptive_down_exponential_up", 3, 2, free=10) == [3, 13, 26]


def test_slow_start_doubles_but_never_past_the_free_slots() -> None:
    assert grow("slow_start", 3, 6, free=1000) == [3, 6, 12, 24, 48, 96, 192]
    assert grow("slow_start", 3, 4, free=10) == [3, 6, 12, 22, 32]
    assert grow("slow_start", 3, 2) == [3, 3, 3]  # a full cluster: nothing more queued ahead of its users


@pytest.mark.parametrize("rate, waiting, free, drain", [
    (1, 0, 0, 0), (3, 0, 8, 0), (20, 4, 10, 0), (40, 30, 5, 0), (10, 30, 0, 36), (600, 0, 50, 20), (3, 3, 997, 0)])
def test_the_seeds_order_slow_start_cautious_exponential_up_aggressive(rate: int, waiting: int, free: int,
                                                                      drain: int) -> None:
    """The 2009 design's ordering, cycle by cycle: slow start never queues more than two-way
    adaptive, exponential-up never less."""
    seen = Observation(rate, waiting, free, pending=True, drain=drain)
    cautious, adaptive, aggressive = (next_rate(a, seen, LIMITS) for a in
                                      ("slow_start", "two_way_adaptive", "adaptive_down_exponential_up"))
    assert cautious <= adaptive <= aggressive


def test_two_way_adaptive_grows_by_the_free_slots_nothing_waits_for() -> None:
    assert grow("two_way_adaptive", 3, 3, free=10) == [3, 13, 23, 33]
    assert next_rate("two_way_adaptive", Observation(20, waiting=4, free=10, pending=True), LIMITS) == 26
    assert grow("two_way_adaptive", 3, 2, free=0) == [3, 3, 3]  # a full cluster: no evidence, no change


def test_shrinking_sheds_the_excess_or_falls_to_one() -> None:
    congested = Observation(40, waiting=30, free=5, pending=True)  # 25 jobs wait beyond the free slots
    assert next_rate("two_way_adaptive", congested, LIMITS) == 15
    assert next_rate("adaptive_down_exponential_up", congested, LIMITS) == 15
    assert next_rate("slow_start", congested, LIMITS) == 1
    assert next_rate("two_way_adaptive", Observation(10, waiting=60, free=0, pending=True), LIMITS) == 1  # floor


@pytest.mark.parametrize("algorithm", predictor.JOB_RATIO)
def test_every_algorithm_grows_while_nothing_waits_and_tasks_are_pending_even_if_nothing_runs(algorithm: str) -> None:
    """The old tap only grew when a job of the campaign ran: a campaign with nothing running
    yet (first cycles, after a prologue) stayed at the initial rate."""
    assert next_rate(algorithm, Observation(3, waiting=0, free=8, pending=True), LIMITS) > 3


@pytest.mark.parametrize("algorithm", predictor.JOB_RATIO)
def test_the_tap_never_falls_below_what_the_cluster_drains_in_a_cycle(algorithm: str) -> None:
    """Short tasks: jobs wait at the cycle's start, yet the cluster starts 36 per period, give or
    take 6 (the ends of random run times): the queue holds 36 + 6."""
    congested = Observation(10, waiting=30, free=0, pending=True, drain=36)
    assert next_rate(algorithm, congested, LIMITS) == 42
    assert next_rate(algorithm, Observation(10, waiting=30, free=0, pending=True, drain=500), LIMITS) == 523
    assert next_rate(algorithm, Observation(10, waiting=30, free=0, pending=False, drain=36), LIMITS) < 36


def test_the_maximum_bounds_only_the_jobs_beyond_what_the_cluster_takes_within_a_cycle() -> None:
    """An idle 1,000-core cluster: the probe's 3 jobs wait, 997 slots are free; the next cycle
    fills them. A fixed ceiling of ``tap_max`` sent 100 a cycle: ten cycles to fill it."""
    assert next_rate("two_way_adaptive", Observation(3, waiting=3, free=997, pending=True), LIMITS) == 997
    doubled = Observation(600, waiting=0, free=50, pending=True, drain=20)
    assert next_rate("adaptive_down_exponential_up", doubled, LIMITS) == 50 + 25 + LIMITS.maximum
    assert next_rate("cigri_tap", Observation(94, waiting=0, free=997, pending=True), LIMITS) == LIMITS.maximum


@pytest.mark.parametrize("algorithm", predictor.JOB_RATIO)
def test_no_pending_task_no_growth(algorithm: str) -> None:
    assert next_rate(algorithm, Observation(7, waiting=0, free=8, pending=False), LIMITS) == 7


def closed_loop(algorithm: str, cycles: int = 40, step_at: int = 20, slots: int = 64,
                local_after: int = 40, duration: int = 4) -> list[tuple[int, int, int]]:
    """A toy cluster driven by the algorithm: ``(rate, excess waiting, idle slots)`` per cycle.

    A quarter of the running jobs end each cycle (mean duration: ``duration`` cycles); from
    cycle ``step_at`` on, the cluster's own users hold ``local_after`` slots, taken ahead of
    cigri's queued jobs. The campaign never runs out of tasks.
    """
    rate, waiting, running = LIMITS.initial, 0, 0
    trace = []
    for cycle in range(cycles):
        running -= -(-running // duration)
        local = local_after if cycle >= step_at else 0
        free = max(0, slots - local - running)
        started = min(waiting, free)
        waiting, running, free = waiting - started, running + started, free - started
        trace.append((rate, waiting, free))
        rate = next_rate(algorithm, Observation(rate, waiting, free, pending=True), LIMITS)
        sent = max(0, rate - waiting)
        started = min(sent, free)
        waiting, running = waiting + sent - started, running + started
    return trace


def mean_excess_and_idle(trace: list[tuple[int, int, int]]) -> tuple[float, float]:
    return sum(e for _, e, _ in trace) / len(trace), sum(i for _, _, i in trace) / len(trace)


def test_two_way_adaptive_settles_within_five_cycles_of_a_step_of_local_load() -> None:
    """The default: 24 slots are left to cigri after the step; five cycles later its queue
    holds well under 20 % of that beyond what can start, and the cluster stays harvested."""
    trace = closed_loop("two_way_adaptive", cycles=60)
    assert mean_excess_and_idle(trace[10:20]) < (1, 0.5)
    excess, idle = mean_excess_and_idle(trace[25:])
    assert excess <= 0.2 * 24 / 10 and idle <= 0.05 * 24
    others = [sum(mean_excess_and_idle(closed_loop(a, cycles=60)[25:])) for a in predictor.JOB_RATIO]
    assert excess + idle == min(others)


def test_slow_start_floods_less_but_idles_more_than_exponential_up() -> None:
    cautious = mean_excess_and_idle(closed_loop("slow_start", cycles=60)[25:])
    aggressive = mean_excess_and_idle(closed_loop("adaptive_down_exponential_up", cycles=60)[25:])
    assert cautious[0] < aggressive[0] and cautious[1] > aggressive[1]


# --- stress, penalties, flood ------------------------------------------------------------------

def test_stress_has_hysteresis_and_zero_turns_it_off() -> None:
    assert predictor.stress(others_waiting=6, free=2) == 2.0
    assert predictor.stressed(2.0, 1.0, was_stressed=False)
    assert not predictor.stressed(0.8, 1.0, was_stressed=False)
    assert predictor.stressed(0.8, 1.0, was_stressed=True)  # recovers only at half the factor
    assert not predictor.stressed(0.5, 1.0, was_stressed=True)
    assert not predictor.stressed(1000.0, 0.0, was_stressed=True)


def test_penalty_halves_every_half_life() -> None:
    assert predictor.decayed(8.0, since=100.0, now=100.0, half_life=60.0) == 8.0
    assert predictor.decayed(8.0, since=100.0, now=220.0, half_life=60.0) == 2.0


def test_flood_victims_past_the_timeout_and_after_the_grace_where_the_tap_is_closed() -> None:
    now = 1000.0
    jobs = [(1, 0.0), (2, 800.0), (3, 900.0), (4, 930.0), (5, 990.0)]
    assert predictor.flood_victims(jobs, False, now, timeout=900, grace=60) == [1]
    assert predictor.flood_victims(jobs, True, now, timeout=900, grace=60) == [1, 2, 3, 4]  # 5: only 10 s
    assert predictor.flood_victims(jobs, False, now, timeout=0, grace=60) == []  # no timeout
    assert predictor.flood_victims([(9, None)], True, now, timeout=1, grace=0) == []  # not yet sent


# --- figures read from a real database -----------------------------------------------------

def ended(grid: Grid, campaign_id: int, cluster: str, durations_and_ends: list[tuple[float, float]]) -> None:  # noqa: F811
    """Record terminated jobs as the updator does: the job rows, the campaign's stats and its
    throughput's minutes."""
    cluster_id = grid.cluster_ids()[cluster]
    conn = grid.db.conn
    for duration, end in durations_and_ends:
        task_id, = bag.take(conn, campaign_id, 1)
        conn.execute("UPDATE tasks SET state = 'terminated' WHERE id = ?", [task_id])
        job_id = conn.execute(
            "INSERT INTO jobs(campaign_id, task_id, cluster_id, state, created_at, started_at, finished_at) "
            "VALUES (?, ?, ?, 'terminated', ?, ?, ?)", [campaign_id, task_id, cluster_id, end - duration, end - duration,
                                                        end]).lastrowid
        stored_campaigns.count_minute(conn, job_id)
        conn.execute(
            "INSERT INTO campaign_stats(campaign_id, cluster_id, terminated, duration_sum, duration_sq_sum, "
            "first_start, last_end) VALUES (?, ?, 1, ?, ?, ?, ?) ON CONFLICT(campaign_id, cluster_id) DO UPDATE SET "
            "terminated = terminated + 1, duration_sum = duration_sum + excluded.duration_sum, "
            "duration_sq_sum = duration_sq_sum + excluded.duration_sq_sum, "
            "first_start = min(first_start, excluded.first_start), last_end = max(last_end, excluded.last_end)",
            [campaign_id, cluster_id, duration, duration * duration, end - duration, end])


def test_throughput_over_the_window_durations_and_eta(grid: Grid, tmp_path: Path) -> None:  # noqa: F811
    jdl = {"name": "p", "nb_jobs": 100, "exec_file": "/bin/true", "clusters": {"local": {}, "other": {}}}
    campaign_id, _ = api.submit(grid, json.dumps(jdl), base_dir=tmp_path, user=acting_user())
    now = 100_020.0  # on a minute's boundary: the window is the whole last hour
    # on local: 10 tasks of 60 s two hours ago (outside the window), then 30 tasks of 100/200 s in the last hour
    ended(grid, campaign_id, "local", [(60.0, now - 7200 + i) for i in range(10)])
    ended(grid, campaign_id, "local", [(100.0 if i % 2 else 200.0, now - 3000 + 100 * i) for i in range(30)])
    # on other: 20 tasks that started 1,800 s ago: its rate is counted over its own 1,800 s
    ended(grid, campaign_id, "other", [(90.0, now - 1710 + 85 * i) for i in range(20)])
    a, b = grid.cluster_ids()["local"], grid.cluster_ids()["other"]
    figures = predictor.campaign_figures(grid.db, campaign_id, now)
    assert figures.clusters[a].throughput_per_hour == pytest.approx(30.0)
    assert figures.clusters[b].throughput_per_hour == pytest.approx(40.0)
    assert figures.clusters[a].average_duration == pytest.approx((600 + 15 * 100 + 15 * 200) / 40)
    assert figures.clusters[b].duration_stddev == pytest.approx(0.0, abs=1e-6)
    assert figures.throughput_per_hour == pytest.approx(70.0)
    assert figures.remaining_tasks == 40
    assert figures.remaining_seconds == pytest.approx(40 / 70 * 3600)
    assert figures.eta == pytest.approx(now + 40 / 70 * 3600)
    durations = [60.0] * 10 + [100.0, 200.0] * 15 + [90.0] * 20
    mean = sum(durations) / len(durations)
    assert figures.average_duration == pytest.approx(mean)
    assert figures.duration_stddev == pytest.approx(math.sqrt(sum((d - mean) ** 2 for d in durations) / len(durations)))
    assert predictor.throughputs(grid.db, [campaign_id], now) == pytest.approx({(campaign_id, a): 30.0,
                                                                                (campaign_id, b): 40.0})
    later = predictor.campaign_figures(grid.db, campaign_id, now + 7200)  # nothing ended for two hours
    assert later.throughput_per_hour == 0.0 and later.remaining_seconds is None and later.eta is None


def test_a_clusters_remaining_time_is_its_held_jobs_and_its_share_of_the_bag(grid: Grid, tmp_path: Path) -> None:  # noqa: F811
    """Per cluster, what it holds plus the bag shared by throughput, over its throughput: the
    cluster holding a long queue for its rate is the one the campaign waits for, while the
    campaign's own figures stay open tasks over the summed throughput."""
    jdl = {"name": "p", "nb_jobs": 100, "exec_file": "/bin/true", "clusters": {"local": {}, "other": {}}}
    campaign_id, _ = api.submit(grid, json.dumps(jdl), base_dir=tmp_path, user=acting_user())
    now = 100_020.0
    a, b = grid.cluster_ids()["local"], grid.cluster_ids()["other"]
    # the same ended jobs as above: 30 tasks/h on local, 40 on other, 40 tasks open
    ended(grid, campaign_id, "local", [(60.0, now - 7200 + i) for i in range(10)])
    ended(grid, campaign_id, "local", [(100.0 if i % 2 else 200.0, now - 3000 + 100 * i) for i in range(30)])
    ended(grid, campaign_id, "other", [(90.0, now - 1710 + 85 * i) for i in range(20)])
    conn = grid.db.conn
    # local holds 22 of the campaign's jobs (a long queue for 30/h), other 4; 14 tasks stay in the bag.
    # A preempted job and a prologue are not held work.
    for state, cluster_id in [("submitting", a), ("running", a)] + [("waiting", a)] * 20 + [("running", b)] * 4:
        task_id, = bag.take(conn, campaign_id, 1)
        conn.execute("UPDATE tasks SET state = ? WHERE id = ?", [state if state == "running" else "waiting", task_id])
        conn.execute("INSERT INTO jobs(campaign_id, task_id, cluster_id, state, created_at, started_at) "
                     "VALUES (?, ?, ?, ?, ?, ?)", [campaign_id, task_id, cluster_id, state, now - 600, now - 60])
    conn.execute("INSERT INTO jobs(campaign_id, task_id, cluster_id, state, created_at) "
                 "VALUES (?, NULL, ?, 'preempted', ?)", [campaign_id, a, now - 600])
    conn.execute("INSERT INTO jobs(campaign_id, task_id, cluster_id, kind, state, created_at) "
                 "VALUES (?, NULL, ?, 'prologue', 'running', ?)", [campaign_id, b, now - 600])
    parts = predictor.cluster_remaining(grid.db, campaign_id, now)
    # local: 22 + 14 x 30/70 = 28 tasks at 30/h, 3,360 s; other: 4 + 14 x 40/70 = 12 tasks at 40/h, 1,080 s
    assert (parts[a].held, parts[b].held) == (22, 4)
    assert (parts[a].part, parts[b].part) == (pytest.approx(28.0), pytest.approx(12.0))
    assert parts[a].remaining_seconds == pytest.approx(3360.0) and parts[a].eta == pytest.approx(now + 3360)
    assert parts[b].remaining_seconds == pytest.approx(1080.0) and parts[b].eta == pytest.approx(now + 1080)
    figures = predictor.campaign_figures(grid.db, campaign_id, now)  # unchanged: 40 open tasks at 70/h
    assert figures.remaining_tasks == 40
    assert figures.remaining_seconds == pytest.approx(40 / 70 * 3600)
    assert figures.eta == pytest.approx(now + 40 / 70 * 3600)
    assert parts[b].eta < figures.eta < parts[a].eta  # the campaign waits for local
    assert (30 * 3360 + 40 * 1080) / 70 == pytest.approx(figures.remaining_seconds)  # the throughput-weighted mean
    assert predictor.cluster_remaining(grid.db, campaign_id, now, figures.clusters, pending=14) == parts
    later = predictor.cluster_remaining(grid.db, campaign_id, now + 7200)  # no throughput measured: unknown
    assert [(p.remaining_seconds, p.eta) for p in later.values()] == [(None, None)] * 2
    conn.execute("UPDATE jobs SET state = 'terminated', finished_at = ? WHERE campaign_id = ? AND kind = 'task' "
                 "AND state IN ('submitting', 'waiting', 'running')", [now, campaign_id])
    bag.end_all(conn, campaign_id, [TaskState.PENDING], TaskState.CANCELLED)
    done = predictor.cluster_remaining(grid.db, campaign_id, now + 7200)  # nothing left: nothing to wait for
    assert [(p.held, p.remaining_seconds, p.eta) for p in done.values()] == [(0, 0.0, now + 7200)] * 2


def test_the_drain_is_littles_law_or_the_last_periods_starts(grid: Grid, tmp_path: Path) -> None:  # noqa: F811
    """Jobs expected to end in the next period: those running there now over their mean
    duration there (Little's law), or, for jobs too short for a poll to see them run, those
    the last period started, each ending within the period with odds min(1, period / mean).
    The mean counts the running jobs' ages as run time (censored durations); until a job has
    ended, at most the running jobs end. Waiting and preempted jobs never count."""
    jdl = {"name": "p", "nb_jobs": 70, "exec_file": "/bin/true", "clusters": {"local": {}, "other": {}}}
    long_id, _ = api.submit(grid, json.dumps(jdl), base_dir=tmp_path, user=acting_user())
    short_id, _ = api.submit(grid, json.dumps(jdl), base_dir=tmp_path, user=acting_user())
    now = 100_000.0
    a, b = grid.cluster_ids()["local"], grid.cluster_ids()["other"]
    ended(grid, long_id, "local", [(200.0, now - 1000 - i) for i in range(10)])  # 2,000 s run, none lately
    ended(grid, short_id, "local", [(10.0, now - 5 - i) for i in range(5)])  # 50 s run, all started lately
    conn = grid.db.conn
    for campaign, state, cluster_id, started_at in [(long_id, "running", a, now - 40)] * 40 + [
            (long_id, "waiting", a, None), (long_id, "preempted", a, now - 1), (long_id, "preempted", b, now - 1)] + [
            (long_id, "running", b, now - 20)] * 10 + [(short_id, "running", a, now - 60), (short_id, "running", b, now - 1)]:
        task_id, = bag.take(conn, campaign, 1)
        conn.execute("INSERT INTO jobs(campaign_id, task_id, cluster_id, state, created_at, started_at) "
                     "VALUES (?, ?, ?, ?, ?, ?)", [campaign, task_id, cluster_id, state, now - 600, started_at])
    # long on local: mean (2,000 + 40 x 40) / 10 = 360 s (the ended ones alone say 200), Little's
    # 40 x 30 / 360 = 3, none started lately; on other nothing ended: mean 10 x 20 / 1 = 200 s,
    # 10 x 30 / 200 = 1 (where counting the starts whole said 10); short on local: mean
    # (50 + 60) / 5 = 22 s, Little's 1 x 30 / 22 = 1 < its 5 starts of the last period; short on
    # other: a job 1 s old, nothing ended: Little's 30 x 1 / 1 = 30, but only the running job may end
    assert predictor.drains(grid.db, [long_id, short_id], now, 30.0) == {(long_id, a): 3, (long_id, b): 1,
                                                                        (short_id, a): 5, (short_id, b): 1}
    # a longer period: long's 40 x 60 / 360 = 6 by either view (its jobs started in the period);
    # on other 10 x 60 / 200 = 3; short's 5 starts, Little's 1 x 60 / 22 = 2
    assert predictor.drains(grid.db, [long_id, short_id], now, 60.0) == {(long_id, a): 6, (long_id, b): 3,
                                                                        (short_id, a): 5, (short_id, b): 1}
    assert predictor.drains(grid.db, [], now, 30.0) == {}


def test_no_measure_yet_means_no_eta(grid: Grid, tmp_path: Path) -> None:  # noqa: F811
    jdl = {"name": "p", "nb_jobs": 3, "exec_file": "/bin/true", "clusters": {"local": {}}}
    campaign_id, _ = api.submit(grid, json.dumps(jdl), base_dir=tmp_path, user=acting_user())
    figures = predictor.campaign_figures(grid.db, campaign_id, 1000.0)
    assert (figures.throughput_per_hour, figures.remaining_tasks, figures.eta) == (None, 3, None)
    assert predictor.affinity_penalties(grid.db, [campaign_id]) == {}


# --- through the real commands ------------------------------------------------------------

@pytest.mark.slow
def test_gridstat_json_shows_throughput_and_eta_while_a_campaign_runs(cigri) -> None:
    # The last task (0.9) outlives its sleep until a poll has seen the campaign half done: on a
    # loaded machine one gridstat may take longer than the whole campaign would. Only that poll
    # is checked: the next may come once every task has ended, before a cycle ends the campaign,
    # and then nothing is left to estimate (0 s).
    hold = cigri.work / "hold"
    hold.touch()
    program = cigri.script("sleep.sh", f'sleep "$1"\nwhile [ "$1" = 0.9 ] && [ -e {hold} ]; do sleep 0.05; done\n')
    campaign_id = cigri.submit(cigri.jdl("eta", exec_file=str(program), params=[f"0.{i}" for i in range(3, 10)]))
    seen: list[dict] = []

    def check(summary: dict) -> None:
        if summary["state"] == "in_treatment" and summary["tasks"]["terminated"] and hold.exists():
            seen.append(summary)
            hold.unlink()

    final = cigri.drain(campaign_id, check=check)
    assert seen, "never saw the campaign half done"
    [summary] = seen  # measured from the first ended tasks on: a rate, and an end in the future
    assert summary["throughput_per_hour"] > 0 and summary["throughput_per_second"] > 0
    assert summary["remaining_seconds"] > 0 and summary["eta"] > summary["started_at"]
    assert summary["clusters"][0]["throughput_per_hour"] > 0
    # one cluster: its remaining time is known, read at the same moment as the campaign's
    cluster = summary["clusters"][0]
    assert cluster["remaining_seconds"] >= 0
    moment = summary["eta"] - summary["remaining_seconds"]
    assert cluster["eta"] - cluster["remaining_seconds"] == pytest.approx(moment, abs=1e-3)
    assert final["remaining_seconds"] == 0 and final["eta"] == final["finished_at"]
    assert [(c["remaining_seconds"], c["eta"]) for c in final["clusters"]] == [(0, final["finished_at"])]
    assert 0.3 <= final["average_duration"] <= 2 and final["duration_stddev"] > 0
    listed = cigri.json("gridstat", "-a")
    assert [(c["id"], c["eta"]) for c in listed] == [(campaign_id, final["finished_at"])]


def test_each_cluster_sizes_its_taps_with_its_own_job_ratio(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Real cycles on two one-slot pools: ``a`` follows ``[runner] job_ratio`` (CiGri's tap,
    which never goes below its initial rate), ``b`` its own ``job_ratio`` (two-way adaptive,
    which sheds the jobs waiting beyond the free slots down to the drain's floor)."""
    for layer in ("SYSTEM_FILE", "USER_FILE"):
        monkeypatch.setattr(config, layer, tmp_path / "absent.toml")
    (tmp_path / "cigri.toml").write_text(
        '[runner]\njob_ratio = "cigri_tap"\ntap_initial = 8\n'
        '[clusters.a]\nbackend = "local"\nslots = 1\n'
        '[clusters.b]\nbackend = "local"\nslots = 1\njob_ratio = "two_way_adaptive"\n')
    grid = open_grid(config.load(environ={"CIGRI_CONFIG": str(tmp_path / "cigri.toml"),
                                          "CIGRI_HOME": str(tmp_path / "home")}))
    jdl = {"name": "ratios", "exec_file": "/bin/sleep", "params": [str(30 + i) for i in range(40)],
           "exec_directory": str(tmp_path), "clusters": {"a": {}, "b": {}}}
    # the jobs run on the local pools as their owner: the account running the tests
    campaign_id, _ = api.submit(grid, json.dumps(jdl), base_dir=tmp_path, user=acting_user())
    a, b = grid.cluster_ids()["a"], grid.cluster_ids()["b"]
    try:
        rates = []
        for _ in range(3):
            run_cycle(grid)
            taps = predictor.taps(grid.db, campaign_id)
            rates.append((taps[a], taps[b]))
            time.sleep(0.2)  # each pool starts its one job
        # cycle 1 opens both taps at 8 and sends 8 jobs to each (1 runs, 7 wait); then a keeps
        # 8 waiting, b sheds to 2 (one job ends per cycle at most: drain 1, plus sqrt(1))
        assert rates == [(8, 8), (8, 2), (8, 2)]
        waiting = dict(grid.db.execute("SELECT cluster_id, count(*) FROM jobs WHERE campaign_id = ? AND state = ? "
                                       "GROUP BY cluster_id", [campaign_id, JobState.WAITING]).fetchall())
        assert waiting == {a: 8, b: 7}  # a's queue refilled to its tap; b's shrinking tap sends nothing, kills nothing
    finally:
        for cluster_id in (a, b):
            grid.backend(cluster_id).cancel([r[0] for r in grid.db.execute(
                "SELECT remote_id FROM jobs WHERE cluster_id = ? AND remote_id IS NOT NULL", [cluster_id])])
        grid.close()


def test_the_windows_count_of_terminated_tasks_is_exact_from_the_minutes(grid: Grid, tmp_path: Path) -> None:  # noqa: F811
    """The throughput's count since a minute's start sums ``throughput_minutes``: the same answer
    as counting every job, ends on a minute's boundary included."""
    jdl = {"name": "w", "nb_jobs": 400, "exec_file": "/bin/true", "clusters": {"local": {}, "other": {}}}
    campaign_id, _ = api.submit(grid, json.dumps(jdl), base_dir=tmp_path, user=acting_user())
    ends = [6000.0 + 37.5 * i for i in range(160)] + [6000.0 + 60 * i for i in range(40)]  # boundaries too
    ended(grid, campaign_id, "local", [(5.0, end) for end in ends])
    ended(grid, campaign_id, "other", [(5.0, end + 13.25) for end in ends])
    conn = grid.db.conn
    for minute in (99, 100, 101, 117, 140, 200):
        brute = dict(conn.execute("SELECT cluster_id, count(*) FROM jobs WHERE campaign_id = ? AND state = 'terminated' "
                                  "AND finished_at >= ? GROUP BY cluster_id", [campaign_id, 60.0 * minute]).fetchall())
        assert predictor.terminated_since(grid.db, campaign_id, minute) == brute, minute
