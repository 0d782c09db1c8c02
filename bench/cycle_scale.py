"""Benchmark: wall-clock time of one cigri cycle as the bags grow (10k, 100k, 1M pending tasks).

100 campaigns of 10 users over 10 simulated clusters of 100 cores (``sim`` backend, virtual
time), each campaign holding a hundredth of the tasks; every cycle runs
the real updator, colombo, predictor, metascheduler (fair share), runner and nikita on the
private database. Goal (issue 4 §7): p95 <= 0.5 s, and flat as the bags grow. ``--cores`` and
``--median`` make the clusters and the tasks' median run time (600 s) another size: 1,000 cores
and Gricad's median task of 63 s make each cycle see thousands of jobs end and send as many.

    python bench/cycle_scale.py [--sizes 10000,100000,1000000] [--hours 0.5] [--cores 100]
                                [--median 600] [--json]
"""

from __future__ import annotations

import argparse
import json
import time

from cigri.simulate import parse_scenario, simulate


def scenario(pending: int, hours: float, cores: int = 100, median: float = 600) -> dict[str, object]:
    return {
        "seed": 1, "cycle_period": 30, "max_hours": hours,
        "clusters": {f"c{i}": {"cores": cores} for i in range(10)},
        "campaigns": [{"user": f"u{i % 10}", "tasks": pending // 100, "type": "normal",
                       "duration": {"law": "lognormal", "median": median, "sigma": 0.5}} for i in range(100)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="pending tasks in all, comma-separated")
    parser.add_argument("--hours", type=float, default=0.5, help="simulated hours per size (60 cycles per 0.5 h)")
    parser.add_argument("--cores", type=int, default=100, help="cores of each of the 10 clusters (default 100)")
    parser.add_argument("--median", type=float, default=600, help="median task run time, seconds (default 600)")
    parser.add_argument("--json", action="store_true", help="one JSON value")
    args = parser.parse_args()
    if args.cores < 1:
        parser.error("--cores: must be at least 1")
    if args.median <= 0 or args.hours <= 0:
        parser.error("--median and --hours: must be positive")
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        started = time.perf_counter()
        report = simulate(parse_scenario(scenario(size, args.hours, args.cores, args.median)))
        rows.append({"pending": size, "cycles": report["cycles"], **report["cycle_seconds"],
                     "utilization": report["utilization"], "run_seconds": round(time.perf_counter() - started, 1)})
    if args.json:
        print(json.dumps(rows))
        return
    print(f"{'pending':>9} {'cycles':>6} {'mean s':>8} {'p50 s':>8} {'p95 s':>8} {'max s':>8} {'used':>6} {'run s':>7}")
    for r in rows:
        print(f"{r['pending']:>9} {r['cycles']:>6} {r['mean']:>8.3f} {r['p50']:>8.3f} {r['p95']:>8.3f} "
              f"{r['max']:>8.3f} {r['utilization']:>6.3f} {r['run_seconds']:>7.1f}")
    flat = rows[-1]["p95"] / rows[0]["p95"]
    print(f"p95 ratio largest/smallest: {flat:.2f} (goal: flat, p95 <= 0.5 s)")


if __name__ == "__main__":
    main()
