"""Benchmark: the quality of cigri's scheduling in the simulator, against FIFO and CiGri's tap.

Same scenario, same seed, three policies in one run:

- ``cigri``: the configuration's fair share (classes gold 3 : silver 1) and job-ratio default;
- ``cigri_tap``: the same with CiGri v3's tap (``runner.job_ratio = "cigri_tap"``);
- ``fifo``: CiGri v3's order, expressed as one submitting user whose campaigns have priority
  ``-id`` (shares are still measured per real user and class).

Measures (goals of issue 4 §3 and §7): makespan against its lower bound (>= 95 % for campaigns
>= 10x the cores: ``tenfold``, the same scenario with twice the tasks under three seeds, cigri
against FIFO, with the tasks listed in the order drawn, then longest first by estimates off by a
log-normal factor of sigma 0.5: the tail left once the bag is empty is the run time of the tasks
started last, which only the user can know; ``list_schedule`` is what a dispatcher without
cycle, latency or kills reaches in the same order, the best one that knows no run time in
advance, and ``cigri_vs_list`` cigri's makespan against it), the ramp-up of one campaign on an
idle cluster (anchors M5 and the experiment behind it: equal tasks of 10 cycles, >= 95 % of
the bound for 10 P tasks, >= 80 % for P, the cluster full within 2 cycles; then 1,000 cores,
and tasks of Gricad's median 63 s), the predictor's ETA error (MAPE
<= 20 % on a stationary campaign), Jain's index
of users' and classes' shares against the weighted max-min (>= 0.98), work conservation
(core-time left idle while tasks were pending), convergence (seconds until carol, arriving at
0.25 h, first holds 90 % of her ideal share; anchors M6: within a mean task, 340 s, and two
cycles), and flood control:

- ``step``: at 1 h, local users take half of a 256-core cluster at once (a trace's block of
  jobs on top of their usual 10 % load). Settling: the cycles after the step until cigri's
  waiting jobs stay within +-20 % of their new level (goal <= 5), and the overshoot past it
  (goal <= 20 %). Waiting jobs are counted in whole jobs and arrive at random, so this is
  measured on the mean of ``--seeds`` runs (the step response of a noisy system);
- ``flood``: the local users' mean load goes from 10 % to 80 % of 64 cores at 1 h, a ramp of
  the used cores as their longer queue fills them. The longest wait of any job (goal: not past
  ``remote_waiting_timeout``, 900 s), flood kills, and the share of cycles after the step with
  the waiting jobs within +-20 % (at least +-1 job) of their later level.

Then the seeds' remaining policies (``policies``; docs/policies.md), each against the same run
without it: squatters of a pool leaving its subpool when the subpool's residents arrive
(DUCC's nodepools: how long until the residents hold 90 % of their pool, and the kills it cost);
a campaign whose tasks all fail, held at the initialization cap (the core-seconds its failing
jobs burnt, against ``init_cap = 0``, today's default, and with the cap on its class alone);
the ramp-up the cap costs a healthy campaign, with and without expand-by-doubling; gangs of 4 beside single tasks (no gang
ever partly started; the makespan with ``placement`` spread and pack); smallest fit, then a
gang of 16 that needs the larger cluster pack kept free (the hour it starts); users of weights 3 and 1
in one class; YARN's minimum user-limit percent of 50 among three users.

And the 2009 design's three job-ratio algorithms beside CiGri's tap (``algorithms``), on the
seed's own situation: a 64-core cluster its local users take 80 % of from 1 h to 2 h, one
campaign of short (median 300 s) or long (1,800 s) tasks; per phase (before, during, after the
step), cigri's mean waiting jobs and idle cores while tasks are pending, then flood kills and
utilization, the means of ``--seeds`` runs. The seed's ordering: slow start queues the fewest,
exponential-up the most and idles the least.

    python bench/sim_quality.py [--json] [--seeds N] [--policies | --algorithms]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
from itertools import pairwise
from pathlib import Path
from typing import Any

from cigri.config import JOB_RATIOS
from cigri.simulate import parse_scenario, simulate

SHARES = {
    "seed": 11, "cycle_period": 30,
    "clusters": {"c1": {"cores": 64, "local_load": 0.2}, "c2": {"cores": 32}},
    "config": {"classes": {"gold": {"weight": 3, "priority": 10},
                           "silver": {"weight": 1, "priority": 10, "default": True}}},
    "campaigns": [
        {"user": "alice", "class": "gold", "tasks": 1000, "duration": {"law": "lognormal", "median": 300, "sigma": 0.5}},
        {"user": "bob", "class": "silver", "tasks": 500, "duration": {"law": "lognormal", "median": 300, "sigma": 0.5}},
        {"user": "carol", "class": "silver", "tasks": 500, "duration": {"law": "lognormal", "median": 300, "sigma": 0.5},
         "submit_hours": 0.25},
    ],
}
CAROL_ARRIVES = SHARES["campaigns"][2]["submit_hours"]
TENFOLD = {**SHARES, "campaigns": [{**c, "tasks": n} for c, n in zip(SHARES["campaigns"], (2000, 1000, 1000))]}
TENFOLD_SEEDS = (11, 12, 13)  # every campaign >= 10x the 96 cores: the goal's own case
TENFOLD_ORDERS = {  # the same tasks, as the user lists them
    "drawn": "drawn",  # in no order of run time: cigri cannot know which tasks are long
    "estimated": {"longest_first": 0.5},  # longest first by estimates off by a factor e^N(0, 0.5)
}
RAMP = {  # anchors M5 (the M2 report's experiment): an idle cluster, equal tasks of length T = 10 cycles
    "seed": 1, "cycle_period": 30, "clusters": {"c1": {"cores": 100}},
    "campaigns": [{"user": "u", "tasks": 100, "duration": {"law": "constant", "seconds": 300}}],
}
RAMPS = {  # (cores, tasks, duration law): ~P and 10 P tasks, then a Gricad-sized cluster
    "P": (100, 100, RAMP["campaigns"][0]["duration"]),
    "10P": (100, 1000, RAMP["campaigns"][0]["duration"]),
    "10P, 1,000 cores": (1000, 10000, RAMP["campaigns"][0]["duration"]),
    "20P, 1,000 cores, Gricad's median task": (1000, 20000, {"law": "lognormal", "median": 63, "sigma": 0.5}),
}
STEADY = {  # a stationary campaign, for the predictor's ETA (goal: MAPE <= 20 % once 10 % is done)
    "seed": 3, "cycle_period": 30,
    "clusters": {"c1": {"cores": 64}},
    "campaigns": [{"user": "erin", "tasks": 3000, "duration": {"law": "lognormal", "median": 300, "sigma": 0.5}}],
}
STEP = {
    "cycle_period": 30, "max_hours": 3,
    "clusters": {"c1": {"cores": 256, "local_load": 0.1, "local_max_cores": 8}},
    "campaigns": [{"user": "dave", "tasks": 40000, "duration": {"law": "lognormal", "median": 300, "sigma": 0.5}}],
}
STEP_BLOCK = "3600 8 36000\n" * 16  # 128 cores taken at 1 h for the rest of the run
STEP_AND_RELEASE = {  # the 2009 design's situation: a shared cluster's own users come, then go
    "cycle_period": 30, "max_hours": 3,
    "clusters": {"c1": {"cores": 64, "local_load_steps": "0:0.1,1:0.8,2:0.1", "local_max_cores": 8}},
    "campaigns": [{"user": "dave", "tasks": 20000}],
}
TASK_MEDIANS = (300, 1800)  # short tasks (the floor of the drain decides), long ones (the tap does)
PHASES = (("before", 0.5, 1.0), ("during", 1.0, 2.0), ("after", 2.0, 3.0))
FLOOD = {
    "seed": 5, "cycle_period": 30, "max_hours": 3,
    "clusters": {"c1": {"cores": 64, "local_load": 0.1, "local_load_steps": "1:0.8", "local_max_cores": 8}},
    "campaigns": [{"user": "dave", "tasks": 20000, "duration": {"law": "lognormal", "median": 600, "sigma": 0.5}}],
}


LOGNORMAL_300 = {"law": "lognormal", "median": 300, "sigma": 0.5}
POOLS = {  # DUCC's nodepools: ann's class in pool P squats in its subpool Q until bob's class arrives there
    "seed": 2, "cycle_period": 30, "clusters": {"p1": {"cores": 32}, "q1": {"cores": 32}},
    "config": {"pools": {"P": {"clusters": ["p1"]}, "Q": {"clusters": ["q1"], "parent": "P"}},
               "classes": {"A": {"pool": "P", "default": True}, "B": {"pool": "Q"}}},
    "campaigns": [{"user": "ann", "class": "A", "tasks": 1500, "duration": LOGNORMAL_300},
                  {"user": "bob", "class": "B", "tasks": 400, "submit_hours": 0.5, "duration": LOGNORMAL_300}],
}
FAILING = {  # a campaign whose every task fails after 10 minutes, beside a healthy one, for two hours
    "seed": 1, "cycle_period": 30, "max_hours": 2, "clusters": {"c1": {"cores": 64}},
    "campaigns": [{"user": "ann", "tasks": 400, "duration": {"law": "constant", "seconds": 600}, "exit_code": 1},
                  {"user": "bob", "tasks": 300, "duration": {"law": "constant", "seconds": 300}}],
}
FAILING_CLASS = {  # the same, the failing campaign in a class of its own that has the cap, the grid none
    **FAILING, "config": {"classes": {"default": {}, "untested": {"init_cap": 2}}},
    "campaigns": [{**FAILING["campaigns"][0], "jdl": {"class": "untested"}}, FAILING["campaigns"][1]],
}
RAMP_CAPPED = {  # one healthy campaign of 2-minute tasks on 256 idle cores
    "seed": 1, "cycle_period": 30, "max_hours": 1, "clusters": {"c1": {"cores": 256}},
    "campaigns": [{"user": "ann", "tasks": 4000, "duration": {"law": "constant", "seconds": 120}}],
}
GANGS = {  # gangs of 4 beside single tasks on two clusters
    "seed": 1, "cycle_period": 30, "clusters": {"c1": {"cores": 16}, "c2": {"cores": 10}},
    "campaigns": [{"user": "ann", "tasks": 160, "duration": LOGNORMAL_300, "jdl": {"gang": 4}},
                  {"user": "bob", "tasks": 400, "duration": LOGNORMAL_300}],
}
PACK_THEN_GANG = {  # Armada's smallest fit, then a gang that needs the whole larger cluster
    "seed": 1, "cycle_period": 30, "clusters": {"c8": {"cores": 8}, "c16": {"cores": 16}},
    "config": {"metascheduler": {"placement": "pack"}},
    "campaigns": [{"user": "ann", "tasks": 4, "duration": {"law": "constant", "seconds": 3600}},
                  {"user": "bob", "tasks": 16, "submit_hours": 0.1, "jdl": {"gang": 16},
                   "duration": {"law": "constant", "seconds": 600}}],
}
WEIGHTS = {  # users of weights 3 and 1 in one class, for an hour both have work
    "seed": 1, "cycle_period": 30, "max_hours": 1, "clusters": {"c1": {"cores": 64}},
    "config": {"users": {"ann": {"weight": 3}}},
    "campaigns": [{"user": "ann", "tasks": 1500, "duration": LOGNORMAL_300},
                  {"user": "bob", "tasks": 1500, "duration": LOGNORMAL_300}],
}
USER_LIMIT = {  # YARN's minimum user-limit percent: 50 % each to the two oldest of three users
    "seed": 1, "cycle_period": 30, "max_hours": 1, "clusters": {"c1": {"cores": 64}},
    "config": {"classes": {"default": {"min_user_limit_percent": 50}}},
    "campaigns": [{"user": user, "tasks": 2000, "duration": LOGNORMAL_300} for user in ("ann", "bob", "cy")],
}


def with_policy(data: dict[str, Any], section: str, **values: Any) -> dict[str, Any]:
    config = data.get("config", {})
    return {**data, "config": {**config, section: {**config.get(section, {}), **values}}}


def pools_report() -> dict[str, Any]:
    """Who holds q1 before and after bob's class, q1's residents, arrives at 0.5 h."""
    report = simulate(parse_scenario(POOLS))
    arrival = POOLS["campaigns"][1]["submit_hours"]
    before = [p["clusters"].get("q1", {}).get("A", 0) for p in report["timeline"]
              if arrival - 0.25 <= p["hour"] < arrival]
    after = [p for p in report["timeline"] if p["hour"] >= arrival]
    resident = next((p["hour"] for p in after if p["clusters"].get("q1", {}).get("B", 0) >= 0.9 * 32), None)
    gone = next((p["hour"] for p in after if p["clusters"].get("q1", {}).get("A", 0) <= 0.1 * 32), None)
    return {"squatters_on_q1_before": round(sum(before) / len(before), 1) if before else None,
            "residents_hold_90pct_after_s": None if resident is None else round((resident - arrival) * 3600),
            "squatters_down_to_10pct_after_s": None if gone is None else round((gone - arrival) * 3600),
            "ann_on_p1_after": min(p["clusters"].get("p1", {}).get("A", 0) for p in after[:20]),
            "kills": report["kills"]}


def algorithms(seeds: int) -> dict[str, dict[str, dict[str, float]]]:
    """Per task length and job-ratio algorithm, the step and release's means over ``seeds`` runs."""
    result: dict[str, dict[str, dict[str, float]]] = {}
    for median in TASK_MEDIANS:
        campaign = {**STEP_AND_RELEASE["campaigns"][0], "duration": {"law": "lognormal", "median": median, "sigma": 0.5}}
        for algorithm in JOB_RATIOS:
            data = with_config({**STEP_AND_RELEASE, "campaigns": [campaign]}, job_ratio=algorithm)
            runs = [phases(simulate(parse_scenario({**data, "seed": seed}))) for seed in range(1, seeds + 1)]
            result.setdefault(f"tasks_{median}s", {})[algorithm] = {
                key: round(sum(run[key] for run in runs) / seeds, 3) for key in runs[0]}
    return result


def phases(report: dict[str, Any]) -> dict[str, float]:
    """Mean waiting jobs and idle cores while tasks are pending, per phase of the step, then
    flood kills and utilization."""
    means = {}
    for name, start, end in PHASES:
        points = [p for p in report["timeline"] if start <= p["hour"] < end]
        means[f"waiting_{name}"] = sum(p["waiting"] for p in points) / len(points)
        means[f"idle_{name}"] = sum(min(max(0, p["harvestable"] - sum(p["running"].values())), p["pending"])
                                    for p in points) / len(points)
    return {**means, "flood_kills": report["kills"].get("flood", 0), "utilization": report["utilization"]}


def policies() -> dict[str, Any]:
    """Each policy's effect over time, against the same scenario without it."""
    failing = {name: simulate(parse_scenario(with_policy(FAILING, "metascheduler", init_cap=cap)))
               for name, cap in (("init_cap_2", 2), ("init_cap_0", 0))}
    failing["class_init_cap_2"] = simulate(parse_scenario(FAILING_CLASS))
    ramps = {name: simulate(parse_scenario(with_policy(RAMP_CAPPED, "metascheduler", init_cap=cap,
                                                       expand_by_doubling=doubling)))
             for name, cap, doubling in (("init_cap_0", 0, True), ("init_cap_2_doubling", 2, True),
                                         ("init_cap_2_no_doubling", 2, False))}
    gangs = {placement: simulate(parse_scenario(with_policy(GANGS, "metascheduler", placement=placement)))
             for placement in ("spread", "pack")}
    packed = simulate(parse_scenario(PACK_THEN_GANG))
    weights = simulate(parse_scenario(WEIGHTS))
    limit = simulate(parse_scenario(USER_LIMIT))
    return {
        "pools": pools_report(),
        "init_cap": {name: {"failed_core_seconds": r["failed_core_seconds"], "failed_jobs": r["jobs"].get("failed", 0),
                            "healthy_tasks_done": r["tasks"].get("terminated", 0),
                            "preempt_kills": r["kills"].get("preempt", 0),
                            "work_thrown_away_s": r["wasted_by"].get("preempt", 0)} for name, r in failing.items()},
        "ramp_90pct_s": {name: full_after(r, 0.9 * RAMP_CAPPED["clusters"]["c1"]["cores"]) for name, r in ramps.items()},
        "gangs": {name: {**r["gangs"], "makespan_h": r["makespan_hours"], "bound_ratio": r["bound_ratio"]}
                  for name, r in gangs.items()},
        "pack_then_gang_starts_h": next(p["hour"] for p in packed["timeline"] if p["running"].get("bob")),
        "user_weights_3_1": {user: v["core_hours"] for user, v in weights["share"]["users"].items()}
        | {"jain_users": weights["share"]["jain_users"]},
        "min_user_limit_50pct": {user: v["core_hours"] for user, v in limit["share"]["users"].items()},
    }


def full_after(report: dict[str, Any], cores: float) -> int | None:
    """Simulated seconds until cigri's jobs first run on ``cores`` cores."""
    return next((round(p["hour"] * 3600) for p in report["timeline"] if p["busy"] >= cores), None)


def fifo(scenario: Any) -> Any:
    """The same campaigns, submitted by one user in priority -id: CiGri v3's FIFO."""
    plans = tuple(dataclasses.replace(p, submit_as="fifo", jdl={**{k: v for k, v in p.jdl.items() if k != "class"},
                                                                "priority": -i})
                  for i, p in enumerate(scenario.campaigns, 1))
    return dataclasses.replace(scenario, campaigns=plans)


def with_config(data: dict[str, Any], **runner: Any) -> dict[str, Any]:
    return {**data, "config": {**data.get("config", {}), "runner": runner}} if runner else data


def idle_while_pending(report: dict[str, Any]) -> float:
    """Share of the harvestable core-time left idle while tasks waited in the bags."""
    timeline, idle, total = report["timeline"], 0.0, 0.0
    for before, point in pairwise(timeline):
        span = point["hour"] - before["hour"]
        free = max(0, point["harvestable"] - sum(point["running"].values()))
        idle += min(free, point["pending"]) * span
        total += point["harvestable"] * span
    return idle / total if total else 0.0


def convergence(report: dict[str, Any], user: str, hour: float) -> float | None:
    """Seconds from ``hour`` (the user's arrival) until the user first holds 90 % of its ideal."""
    for point in report["timeline"]:
        ideal = point["ideal"].get(user, 0.0)
        if point["hour"] >= hour and ideal > 0 and point["running"].get(user, 0) >= 0.9 * ideal:
            return round((point["hour"] - hour) * 3600)
    return None


def band_response(values: list[float], floor: float) -> tuple[float, list[bool], int | None]:
    """``(reference, inside, settled_at)`` of a series after a step: the reference is the mean
    of its later half, ``inside`` whether each value is within +-20 % of it (at least
    +-``floor``), and ``settled_at`` the first index from which every value is inside."""
    tail = values[len(values) // 2:]
    reference = sum(tail) / len(tail) if tail else 0.0
    band = max(floor, 0.2 * reference)
    inside = [abs(value - reference) <= band for value in values]
    outside = [i for i, ok in enumerate(inside) if not ok]
    settled_at = (outside[-1] + 1 if outside else 0) if inside and inside[-1] else None
    return reference, inside, settled_at


def settling(report: dict[str, Any], step_hour: float, period: float) -> dict[str, Any]:
    """Cycles after the step until cigri's waiting jobs stay within +-20 % of their later level
    (at least +-1 job), the share of samples after the step inside that band, and the longest
    run of samples outside it (a transient)."""
    after = [p for p in report["timeline"] if p["hour"] >= step_hour]
    reference, inside, settled_at = band_response([p["waiting"] for p in after], 1.0)
    longest, run = 0, 0
    for ok in inside:
        run = 0 if ok else run + 1
        longest = max(longest, run)
    return {"reference_waiting": round(reference, 1), "settling_cycles":
            None if settled_at is None else round((after[settled_at]["hour"] - step_hour) * 3600 / period),
            "inside_band": round(sum(inside) / len(inside), 3) if inside else None,
            "longest_excursion_samples": longest}


def step_response(data: dict[str, Any], seeds: int, step_hour: float) -> dict[str, Any]:
    """The scenario under ``seeds`` seeds: waiting jobs averaged per cycle, then the cycles
    after the step until the mean stays within +-20 % of its later level, and the overshoot:
    how far the mean goes past that level, beyond it in the step's direction."""
    period = data["cycle_period"]
    totals: dict[int, list[int]] = {}
    longest, flood_kills = 0.0, 0
    for seed in range(1, seeds + 1):
        report = simulate(parse_scenario({**data, "seed": seed}))
        longest, flood_kills = max(longest, report["max_wait_seconds"]), flood_kills + report["kills"].get("flood", 0)
        for point in report["timeline"]:
            totals.setdefault(round(point["hour"] * 3600 / period), []).append(point["waiting"])
    cycles = sorted(c for c, values in totals.items() if len(values) == seeds)
    mean = {c: sum(totals[c]) / seeds for c in cycles}
    step = round(step_hour * 3600 / period)
    before = [mean[c] for c in cycles if step - 40 <= c < step]
    after = [mean[c] for c in cycles if c >= step]
    reference, inside, settled_at = band_response(after, 0.0)
    level = sum(before) / len(before) if before else reference
    direction = 1 if reference >= level else -1
    beyond = max((direction * (value - reference) for value in after), default=0.0)
    return {"seeds": seeds, "mean_waiting_before": round(level, 2), "reference_waiting": round(reference, 2),
            "settling_cycles": settled_at, "overshoot": round(max(0.0, beyond) / reference, 3) if reference else None,
            "inside_band": round(sum(inside) / len(inside), 3) if inside else None,
            "first_cycles": [round(v, 1) for v in after[:8]], "max_wait_s": longest, "flood_kills": flood_kills}


def ramp(cores: int, tasks: int, duration: dict[str, Any], **runner: Any) -> dict[str, Any]:
    """One campaign on an idle cluster: bound / makespan, cigri's makespan against the list
    schedule, and the seconds until cigri holds every core (goal: within 2 cycles)."""
    data = {**RAMP, "clusters": {"c1": {"cores": cores}},
            "campaigns": [{**RAMP["campaigns"][0], "tasks": tasks, "duration": duration}]}
    report = simulate(parse_scenario(with_config(data, **runner)))
    full = next((point["hour"] * 3600 for point in report["timeline"] if point["busy"] >= cores), None)
    return {"bound_ratio": report["bound_ratio"], "vs_list": report["list_schedule_ratio"],
            "full_after_s": None if full is None else round(full)}


def tenfold_ratios(order: Any) -> dict[str, list[float]]:
    """Bound / makespan of the tenfold scenario, tasks listed in ``order``, per policy and seed,
    and of the list schedule of cigri's runs: the reference for a dispatcher that knows no run
    time in advance (``list_schedule``), and cigri's makespan against it (``cigri_vs_list``)."""
    data = {**TENFOLD, "campaigns": [{**c, "order": order} for c in TENFOLD["campaigns"]]}
    reports = {name: [simulate(policy(parse_scenario({**data, "seed": seed}))) for seed in TENFOLD_SEEDS]
               for name, policy in (("cigri", lambda s: s), ("fifo", fifo))}
    ratios = {name: [r["bound_ratio"] for r in runs] for name, runs in reports.items()}
    ratios["list_schedule"] = [round(r["makespan_bound_hours"] / r["list_schedule_hours"], 4) for r in reports["cigri"]]
    ratios["cigri_vs_list"] = [r["list_schedule_ratio"] for r in reports["cigri"]]
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON value")
    parser.add_argument("--seeds", type=int, default=8, help="runs of the step scenario averaged (default 8)")
    only = parser.add_mutually_exclusive_group()
    only.add_argument("--policies", action="store_true", help="only the seeds' remaining policies")
    only.add_argument("--algorithms", action="store_true", help="only the 2009 design's job-ratio algorithms")
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error("--seeds: must be at least 1")
    if args.algorithms:
        compared = algorithms(args.seeds)
        print(json.dumps({"algorithms": compared}) if args.json else _algorithms_text(compared))
        return
    extra = policies()
    if args.policies:
        print(json.dumps({"policies": extra}) if args.json else _policies_text(extra))
        return
    runs = {
        "cigri": parse_scenario(SHARES),
        "cigri_tap": parse_scenario(with_config(SHARES, job_ratio="cigri_tap")),
        "fifo": fifo(parse_scenario(SHARES)),
    }
    rows = {}
    for name, scenario in runs.items():
        report = simulate(scenario)
        rows[name] = {"makespan_h": report["makespan_hours"], "bound_h": report["makespan_bound_hours"],
                      "drained_h": report["bag_drained_hours"],
                      "bound_ratio": report["bound_ratio"], "utilization": report["utilization"],
                      "eta_mape": report["eta_mape"], "jain_users": report["share"]["jain_users"], "jain_classes": report["share"]["jain_classes"],
                      "idle_while_pending": round(idle_while_pending(report), 4),
                      "carol_converged_s": convergence(report, "carol", CAROL_ARRIVES),
                      "kills": report["kills"], "resubmissions": report["resubmissions"]}
    flood = {}
    for name, data in (("cigri", FLOOD), ("cigri_tap", with_config(FLOOD, job_ratio="cigri_tap"))):
        report = simulate(parse_scenario(data))
        flood[name] = {**settling(report, 1.0, FLOOD["cycle_period"]), "max_wait_s": report["max_wait_seconds"],
                       "kills": report["kills"]}
    with tempfile.TemporaryDirectory(prefix="cigri-bench-") as home:
        block = Path(home, "block.txt")
        block.write_text(STEP_BLOCK)
        stepped = {**STEP, "clusters": {"c1": {**STEP["clusters"]["c1"], "trace": str(block)}}}
        step = {name: step_response(data, args.seeds, 1.0)
                for name, data in (("cigri", stepped), ("cigri_tap", with_config(stepped, job_ratio="cigri_tap")))}
    tenfold = {order: tenfold_ratios(how) for order, how in TENFOLD_ORDERS.items()}
    ramps = {case: {"cigri": ramp(*shape), "cigri_tap": ramp(*shape, job_ratio="cigri_tap")}
             for case, shape in RAMPS.items()}
    steady = {name: simulate(parse_scenario(data))["eta_mape"]
              for name, data in (("cigri", STEADY), ("cigri_tap", with_config(STEADY, job_ratio="cigri_tap")))}
    if args.json:
        print(json.dumps({"shares": rows, "tenfold_bound_ratio": tenfold, "ramp": ramps, "step": step,
                          "flood": flood, "steady_eta_mape": steady, "policies": extra}))
        return
    keys = [k for k in next(iter(rows.values())) if k != "kills"]
    print(f"{'policy':<10} " + " ".join(f"{k:>18}" for k in keys))
    for name, row in rows.items():
        print(f"{name:<10} " + " ".join(f"{row[k]!s:>18}" for k in keys))
    for name, row in rows.items():
        print(f"kills, {name}: {json.dumps(row['kills'])}")
    for name in ("cigri_tap", "fifo"):
        print(f"cigri / {name}: makespan x{rows[name]['makespan_h'] / rows['cigri']['makespan_h']:.2f}, "
              f"Jain users {rows['cigri']['jain_users']} vs {rows[name]['jain_users']}")
    for order, row in tenfold.items():
        print(f"bound / makespan, every campaign >= 10x the cores, seeds {TENFOLD_SEEDS}, tasks {order} "
              f"({json.dumps(TENFOLD_ORDERS[order])}; goal >= 0.95): {json.dumps(row)}")
    for case, row in ramps.items():
        cores, tasks, duration = RAMPS[case]
        print(f"ramp, {case} ({tasks} tasks {json.dumps(duration)} on {cores} idle cores; goal: bound / makespan "
              f">= 0.95 for 10P, >= 0.8 for P, full by the second cycle, at {RAMP['cycle_period']} s): "
              f"{json.dumps(row)}")
    print(f"ETA MAPE on a stationary campaign (goal <= 0.2): {json.dumps(steady)}")
    for name, row in step.items():
        print(f"step (half of 256 cores taken at 1 h; goal: settled <= 5 cycles, overshoot <= 0.2), {name}: "
              f"{json.dumps(row)}")
    for name, row in flood.items():
        print(f"flood ramp (mean load 0.1 -> 0.8 at 1 h), {name}: {json.dumps(row)}")
    print(_policies_text(extra))


def _algorithms_text(result: dict[str, dict[str, dict[str, float]]]) -> str:
    keys = list(next(iter(next(iter(result.values())).values())))
    lines = [f"job-ratio algorithms, 64 cores, local users 0.1 -> 0.8 at 1 h -> 0.1 at 2 h, {STEP_AND_RELEASE['cycle_period']} s cycles",
             f"{'tasks':<11} {'algorithm':<29} " + " ".join(f"{k:>15}" for k in keys)]
    for tasks, rows in result.items():
        lines += [f"{tasks:<11} {name:<29} " + " ".join(f"{row[k]:>15}" for k in keys) for name, row in rows.items()]
    return "\n".join(lines)


def _policies_text(result: dict[str, Any]) -> str:
    return "\n".join((
        f"pools (ann squats in Q until bob, Q's resident, arrives at 0.5 h): {json.dumps(result['pools'])}",
        f"initialization cap (ann's tasks all fail; 2 against 0, today's default, and 2 for ann's class only): "
        f"{json.dumps(result['init_cap'])}",
        f"ramp-up of 2-minute tasks to 90 % of 256 idle cores, seconds (no cap; cap 2 then doubling; cap 2, "
        f"then the share at once): {json.dumps(result['ramp_90pct_s'])}",
        f"gangs of 4 beside single tasks (goal: none partly started): {json.dumps(result['gangs'])}",
        f"pack, then a gang of 16 submitted at 0.1 h (goal: starts within two cycles): "
        f"{result['pack_then_gang_starts_h']} h",
        f"user weights 3 (ann) and 1 (bob), core-hours: {json.dumps(result['user_weights_3_1'])}",
        f"min_user_limit_percent 50, three users, core-hours in 1 h: {json.dumps(result['min_user_limit_50pct'])}"))


if __name__ == "__main__":
    main()
