"""Benchmark: cycle time on a grid that has run for years against the same grid when new.

The live work is the same in both runs: 20 campaigns of 5 users over 10 simulated clusters of
100 cores (``sim`` backend, virtual time), 600 s tasks, each campaign with a prologue and an
epilogue. The aged grid first gets, written straight into its database, what a busy site
accumulates: ended campaigns with their tasks and jobs (one of each per task, plus a
prologue and an epilogue per cluster), their taps, health rows, closed events and the jobs
they covered, sent notifications and per-cycle counts. The baseline is the new grid,
measured in the same run. Goal: the same cycle time (ratio about 1).

    python bench/cycle_history.py [--campaigns 10000] [--jobs 1000000] [--cycles 120] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from cigri import api, clock
from cigri import db as database
from cigri import config as configuration
from cigri.cycle import run_cycle
from cigri.grid import Grid, open_grid

START = 1_767_225_600.0
CLUSTERS = 10


def age(grid: Grid, campaigns: int, jobs: int) -> None:
    """Write ``campaigns`` ended campaigns holding ``jobs`` ended task jobs in all."""
    per = max(1, jobs // campaigns)
    before = START - 365 * 86400
    with database.write(grid.db) as conn:
        conn.execute("INSERT INTO subscriptions(user, kind, target, severity, created_at) "
                     "VALUES ('old', 'mail', 'old@example.org', 'low', ?)", [before])
        conn.execute(f"""
            WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {campaigns})
            INSERT INTO campaigns(id, name, user, state, jdl, nb_tasks, submitted_at, started_at, finished_at)
            SELECT 100000 + i, 'old', 'old' || (i % 50), 'terminated', '{{}}', {per}, {before}, {before}, {before} + 3600
            FROM n""")
        conn.execute(f"""
            WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {campaigns * per - 1})
            INSERT INTO tasks(id, campaign_id, name, param, priority, state, attempts)
            SELECT 10000000 + i, 100001 + i / {per}, 't' || i, 't' || i, 20, 'terminated', 1 FROM n""")
        conn.execute(f"""
            INSERT INTO task_blocks(campaign_id, first_id, last_id, next_fresh)
            SELECT campaign_id, min(id), max(id), max(id) + 1 FROM tasks WHERE id >= 10000000 GROUP BY campaign_id""")
        conn.execute(f"""
            INSERT INTO jobs(campaign_id, task_id, cluster_id, kind, state, remote_id, created_at, submitted_at,
                             started_at, finished_at, exit_code)
            SELECT campaign_id, id, 1 + id % {CLUSTERS}, 'task', CASE WHEN id % 10 THEN 'terminated' ELSE 'failed' END,
                   'r' || id, {before}, {before}, {before}, {before} + 600, CASE WHEN id % 10 THEN 0 ELSE 1 END
            FROM tasks WHERE id >= 10000000""")
        conn.execute(f"""
            WITH RECURSIVE k(c) AS (SELECT 1 UNION ALL SELECT c + 1 FROM k WHERE c < {CLUSTERS})
            INSERT INTO jobs(campaign_id, cluster_id, kind, state, created_at, finished_at, exit_code)
            SELECT id, c, kind, 'terminated', {before}, {before}, 0
            FROM campaigns, k, (SELECT 'prologue' AS kind UNION ALL SELECT 'epilogue') WHERE id > 100000""")
        conn.execute(f"""
            WITH RECURSIVE k(c) AS (SELECT 1 UNION ALL SELECT c + 1 FROM k WHERE c < {CLUSTERS})
            INSERT INTO taps(campaign_id, cluster_id, rate, state) SELECT id, c, 10, 'open' FROM campaigns, k
            WHERE id > 100000""")
        conn.execute("INSERT INTO campaign_cluster_health(campaign_id, cluster_id, exit_errors) "
                     "SELECT campaign_id, cluster_id, count(*) FROM jobs WHERE state = 'failed' GROUP BY 1, 2")
        conn.execute(f"""
            INSERT INTO events(class, code, state, campaign_id, cluster_id, message, created_at, closed_at, severity,
                               notified_count)
            SELECT 'job', 'EXIT_ERROR', 'closed', campaign_id, cluster_id, 'exit 1', {before}, {before}, 'high', 1
            FROM jobs WHERE state = 'failed' GROUP BY campaign_id, cluster_id""")
        conn.execute("""
            INSERT INTO event_jobs(event_id, job_id, task_id)
            SELECT e.id, j.id, j.task_id FROM jobs j JOIN events e ON e.campaign_id = j.campaign_id
            AND e.cluster_id = j.cluster_id WHERE j.state = 'failed'""")
        conn.execute(f"""
            INSERT INTO outbox(subscription_id, severity, subject, document, state, tries, next_try_at, created_at, sent_at)
            SELECT 1, 'high', 'campaign ended', '{{}}', 'sent', 1, {before}, {before}, {before} FROM events""")
        recent = START - 29 * 86400  # inside cigri.counts_retention_days: what a steady grid keeps
        conn.execute(f"""
            WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 29 * 2880 - 1)
            INSERT INTO counts(at, cluster_id, waiting, running, total_slots, free_slots)
            SELECT {recent} + 30 * i, id, 5, 10, 64, 0 FROM clusters, n""")


def live_work(grid: Grid, home: Path) -> None:
    params = home / "params.txt"
    params.write_text("".join(f"t{i} 600\n" for i in range(5000)))
    for i in range(20):
        jdl = {"name": f"live{i}", "exec_file": "/bin/true", "exec_directory": str(home), "param_file": str(params),
               "type": "best-effort", "prologue": ["true"], "epilogue": ["true"],
               "clusters": {f"c{k}": {} for k in range(CLUSTERS)}}
        api.submit(grid, json.dumps(jdl), base_dir=home, user=f"u{i % 5}", source="bench")


def measure(campaigns: int, jobs: int, cycles: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="cigri-bench-") as home, clock.virtual(START) as now:
        overrides = {"cigri.home": home, "cigri.cycle_period": 30,
                     **{f"clusters.c{k}": {"backend": "sim", "cores": 100, "seed": k} for k in range(CLUSTERS)}}
        grid = open_grid(configuration.load(overrides, environ={}, system_files=False))
        try:
            if jobs:
                age(grid, campaigns, jobs)
            live_work(grid, Path(home))
            seconds = []
            for _ in range(cycles):
                started = time.perf_counter()
                run_cycle(grid)
                seconds.append(time.perf_counter() - started)
                now.advance_to(now.time + 30)
            ended = grid.db.execute("SELECT count(*) FROM jobs WHERE state = 'terminated'").fetchone()[0]
        finally:
            grid.close()
    seconds.sort()
    return {"ended_jobs": ended, "mean": statistics.fmean(seconds), "p50": seconds[len(seconds) // 2],
            "p95": seconds[int(0.95 * (len(seconds) - 1))]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=int, default=10_000, help="ended campaigns in the aged grid")
    parser.add_argument("--jobs", type=int, default=1_000_000, help="ended task jobs in the aged grid")
    parser.add_argument("--cycles", type=int, default=120, help="cycles measured on each grid (30 s apart)")
    parser.add_argument("--json", action="store_true", help="one JSON value")
    args = parser.parse_args()
    new = measure(0, 0, args.cycles)
    aged = measure(args.campaigns, args.jobs, args.cycles)
    ratio = aged["p95"] / new["p95"]
    if args.json:
        print(json.dumps({"new": new, "aged": aged, "p95_ratio": round(ratio, 3)}))
        return
    print(f"{'grid':>5} {'ended jobs':>11} {'mean s':>8} {'p50 s':>8} {'p95 s':>8}")
    for name, row in (("new", new), ("aged", aged)):
        print(f"{name:>5} {row['ended_jobs']:>11} {row['mean']:>8.4f} {row['p50']:>8.4f} {row['p95']:>8.4f}")
    print(f"p95 aged / new: {ratio:.2f} (goal: about 1)")


if __name__ == "__main__":
    main()
