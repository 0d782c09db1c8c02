"""Benchmark: every page of the dashboard on a grid with a past, beside the same data read
through the API, in one run.

A real ``cigri server`` (TCP on 127.0.0.1, its cycles running) serves a database seeded with
``--campaigns`` (10,000) ended campaigns holding ``--jobs`` (1,000,000) ended jobs, a tenth of
them in one big campaign, and ``--days`` (30) of usage samples every ``--period`` (10 s, the
default cycle period) on ``--clusters`` (10) simulated clusters. Each page is read ``--repeat``
times by an admin (who sees everything: the most a page shows) logged in with a token; printed
per page: the server's time (its ``Server-Timing``, median and worst) and the round trip,
beside the round trip of the API calls that return the same data. Goal (issue 25): every page
<= 300 ms of server time.

    python bench/dashboard.py [--campaigns 10000] [--jobs 1000000] [--days 30] [--clusters 10] [--json]

:func:`seed` writes such a database directly in SQL; ``tests/test_dashboard.py`` seeds its own,
smaller, with it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

BIN = Path(sys.executable).parent
ENDED = ("terminated", "failed", "cancelled")


def seed(path: Path, *, clusters: Sequence[str], users: Sequence[str], campaigns: int, jobs: int, days: float,
         period: float = 10.0, paused: int = 0, big_share: float = 0.0, now: float | None = None,
         cores: int = 64) -> dict[str, Any]:
    """Write a grid's past into the database at ``path`` (created and migrated if needed), as
    its cycles would have left it: ``campaigns`` ended campaigns of ``users`` in turn over the
    last ``days`` (85 % terminated, 10 % failed with a failed task and an open EXIT_ERROR event
    with its stderr tail, 5 % cancelled), ``jobs`` ended task jobs among them (``big_share``
    of them in the first campaign), each task with one job on one of its campaign's clusters;
    then ``paused`` paused campaigns of 100 pending tasks each; an open SUBMISSION_ERROR on the
    first cluster; and a usage sample every ``period`` seconds for every cluster (``cores``
    slots each, missing clusters added with the ``sim`` backend). Return the ids written."""
    from cigri import db as database

    now = time.time() if now is None else now
    start = now - days * 86400
    rng = random.Random(25)
    db = database.connect(path)
    conn = db.conn
    with database.write(db):
        for name in clusters:
            conn.execute("INSERT INTO clusters(name, backend, options, source) VALUES (?, 'sim', ?, 'admin') "
                         "ON CONFLICT(name) DO NOTHING", [name, json.dumps({"cores": cores, "seed": 1})])
        cluster_ids = [conn.execute("SELECT id FROM clusters WHERE name = ?", [name]).fetchone()[0]
                       for name in clusters]
        task_id = (conn.execute("SELECT max(id) FROM tasks").fetchone()[0] or 0) + 1
        job_id = (conn.execute("SELECT max(id) FROM jobs").fetchone()[0] or 0) + 1
        big = round(jobs * big_share)
        sizes = [big] + _spread(jobs - big, campaigns - 1) if big else _spread(jobs, campaigns)
        written: dict[str, list[int]] = {"ended": [], "failed": [], "paused": []}
        for index, size in enumerate(sizes):
            state = "failed" if index % 20 in (3, 8) else "cancelled" if index % 40 in (7, 12) else "terminated"
            user = users[index % len(users)]
            submitted = start + (now - start - 7200) * index / max(1, len(sizes))
            mine = rng.sample(cluster_ids, k=min(len(cluster_ids), 1 + index % 3))
            campaign_id, task_id, job_id = _ended_campaign(conn, rng, f"seed-{index}", user, state, submitted, size,
                                                           mine, task_id, job_id)
            written["ended"].append(campaign_id)
            if state == "failed":
                written["failed"].append(campaign_id)
        for index in range(paused):
            user = users[index % len(users)]
            campaign_id = _insert_campaign(conn, f"waiting-{index}", user, "paused", now - 3600, None, None, 100,
                                           cluster_ids[:2])
            conn.executemany("INSERT INTO tasks(id, campaign_id, name, param) VALUES (?, ?, ?, ?)",
                             [(task_id + k, campaign_id, f"t{k}", f"t{k} 5") for k in range(100)])
            conn.execute("INSERT INTO task_blocks(campaign_id, first_id, last_id, next_fresh) VALUES (?, ?, ?, ?)",
                         [campaign_id, task_id, task_id + 99, task_id])
            task_id += 100
            written["paused"].append(campaign_id)
        conn.execute("INSERT INTO events(class, code, severity, cluster_id, message, created_at, updated_at) "
                     "VALUES ('cluster', 'SUBMISSION_ERROR', 'medium', ?, 'sbatch: error: invalid partition', ?, ?)",
                     [cluster_ids[0], now - 600, now - 600])
        samples = []
        for k in range(int(days * 86400 / period)):
            at = start + k * period
            for n, cluster_id in enumerate(cluster_ids):
                wave = 0.5 + 0.4 * math.sin(2 * math.pi * (at / 86400 + n / len(cluster_ids)))
                free = max(0, round(cores * (1 - wave)))
                running = round((cores - free) * 0.6)
                samples.append((at, cluster_id, running // 10, running, cores, free))
            if len(samples) >= 100_000:
                conn.executemany("INSERT INTO counts(at, cluster_id, waiting, running, total_slots, free_slots) "
                                 "VALUES (?, ?, ?, ?, ?, ?)", samples)
                samples.clear()
        conn.executemany("INSERT INTO counts(at, cluster_id, waiting, running, total_slots, free_slots) "
                         "VALUES (?, ?, ?, ?, ?, ?)", samples)
    db.close()
    return written


def _spread(total: int, parts: int) -> list[int]:
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)] if parts > 0 else []


def _insert_campaign(conn: Any, name: str, user: str, state: str, submitted: float, started: float | None,
                     finished: float | None, tasks: int, cluster_ids: Sequence[int]) -> int:
    jdl = {"name": name, "exec_file": "/bin/true", "clusters": {str(c): {} for c in cluster_ids}}
    campaign_id: int = conn.execute(
        "INSERT INTO campaigns(name, user, state, jdl, nb_tasks, submitted_at, started_at, finished_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [name, user, state, json.dumps(jdl), tasks, submitted, started,
                                            finished]).lastrowid
    conn.executemany("INSERT INTO campaign_properties(campaign_id, cluster_id, name, value) VALUES (?, ?, ?, ?)",
                     [(campaign_id, c, key, json.dumps(value)) for c in cluster_ids
                      for key, value in (("resources", "core=1"), ("exec_file", ["/bin/true"]))])
    return campaign_id


def _ended_campaign(conn: Any, rng: random.Random, name: str, user: str, state: str, submitted: float, size: int,
                    cluster_ids: Sequence[int], task_id: int, job_id: int) -> tuple[int, int, int]:
    """One ended campaign of ``size`` tasks, one job each, run over an hour or so (a big one,
    longer); with its campaign_stats and, when failed, its failed task and open event."""
    started = submitted + 30
    life = max(600.0, size * 0.5)
    finished = started + life + 150  # after the last job's end (at most 120 s after its start)
    campaign_id = _insert_campaign(conn, name, user, state, submitted, started, finished, size, cluster_ids)
    cut = size if state != "cancelled" else size // 2
    failed = 1 if state == "failed" and size else 0
    tasks, job_rows, stats = [], [], {}
    for k in range(size):
        task_state = ("failed" if k == 0 and failed else "terminated") if k < cut else "cancelled"
        tasks.append((task_id + k, campaign_id, f"t{k}", f"t{k} {rng.randint(1, 99)}", task_state, 1 if k < cut else 0))
        if k >= cut:
            continue
        cluster_id = cluster_ids[k % len(cluster_ids)]
        begin = started + life * k / size
        seconds = rng.uniform(20, 120)
        job_state, code = ("failed", 1) if task_state == "failed" else ("terminated", 0)
        job_rows.append((job_id + len(job_rows), campaign_id, task_id + k, cluster_id, job_state, f"r{job_id + k}",
                         begin - 5, begin - 5, begin, begin + seconds, code, "node1"))
        entry = stats.setdefault(cluster_id, [0, 0, 0.0, 0.0, begin, begin + seconds])
        if job_state == "terminated":
            entry[0] += 1
            entry[2] += seconds
            entry[3] += seconds * seconds
        else:
            entry[1] += 1
        entry[4], entry[5] = min(entry[4], begin), max(entry[5], begin + seconds)
    conn.executemany("INSERT INTO tasks(id, campaign_id, name, param, state, attempts) VALUES (?, ?, ?, ?, ?, ?)",
                     tasks)
    if size:
        conn.execute("INSERT INTO task_blocks(campaign_id, first_id, last_id, next_fresh) VALUES (?, ?, ?, ?)",
                     [campaign_id, task_id, task_id + size - 1, task_id + size])
    conn.executemany("INSERT INTO jobs(id, campaign_id, task_id, cluster_id, state, remote_id, created_at, "
                     "submitted_at, started_at, finished_at, exit_code, node) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     job_rows)
    conn.executemany("INSERT INTO campaign_stats(campaign_id, cluster_id, terminated, failed, duration_sum, "
                     "duration_sq_sum, first_start, last_end) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     [(campaign_id, c, *values) for c, values in stats.items()])
    if failed:
        first_job = job_rows[0]
        conn.execute(
            "INSERT INTO events(class, code, severity, campaign_id, cluster_id, job_id, task_id, message, stderr_tail, "
            "examples, created_at, updated_at) VALUES ('job', 'EXIT_ERROR', 'medium', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [campaign_id, first_job[3], first_job[0], task_id, f"job {first_job[0]} exited with status 1",
             "Traceback (most recent call last):\n  File \"run.py\", line 3\nValueError: bad input t0\n",
             json.dumps([{"task_id": task_id, "job_id": first_job[0]}]), finished - 60, finished - 60])
    return campaign_id, task_id + size, job_id + len(job_rows)


# --- the benchmark -------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def timed(client: httpx.Client, paths: Sequence[str], repeat: int) -> dict[str, float]:
    """Each of ``paths`` in turn, ``repeat`` times: the round trips of the whole sequence and,
    where the answers say, the server's time (``Server-Timing``), in milliseconds."""
    trips, server = [], []
    for _ in range(repeat):
        started, spent = time.perf_counter(), 0.0
        for path in paths:
            response = client.get(path)
            if response.status_code != 200:
                sys.exit(f"GET {path}: {response.status_code} {response.text[:300]}")
            match = re.search(r"dur=([0-9.]+)", response.headers.get("server-timing", ""))
            spent += float(match[1]) if match else math.nan
        trips.append(1000 * (time.perf_counter() - started))
        server.append(spent)
    return {"server_median": round(statistics.median(server), 1), "server_max": round(max(server), 1),
            "round_trip_median": round(statistics.median(trips), 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--campaigns", type=int, default=10_000)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--clusters", type=int, default=10)
    parser.add_argument("--period", type=float, default=10.0)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home, port = Path(tmp), free_port()
        names = [f"sim{i}" for i in range(args.clusters)]
        config = home / "cigri.toml"
        config.write_text("".join(f'[clusters.{name}]\nbackend = "sim"\ncores = 64\nseed = 1\n' for name in names)
                          + f'[cigri]\ncycle_period = {args.period}\n[server]\nlisten = "127.0.0.1:{port}"\n')
        began = time.perf_counter()
        written = seed(home / "cigri.db", clusters=names, users=["alice", "bob", "carol", "dave"],
                       campaigns=args.campaigns, jobs=args.jobs, days=args.days, period=args.period, big_share=0.1)
        seeded = time.perf_counter() - began
        env = {k: v for k, v in os.environ.items() if not k.startswith("CIGRI_")}
        env.update(CIGRI_HOME=str(home), CIGRI_CONFIG=str(config), NO_COLOR="1")
        server = subprocess.Popen([str(BIN / "cigri"), "server"], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            results = run(home, port, env, written, args.repeat)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(60)
    report = {"campaigns": args.campaigns, "jobs": args.jobs, "days": args.days, "clusters": args.clusters,
              "seconds_to_seed": round(seeded, 1), "pages": results}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{args.campaigns:,} ended campaigns, {args.jobs:,} ended jobs, {args.days:g} days of samples every "
          f"{args.period:g} s on {args.clusters} clusters (seeded in {seeded:.0f} s); ms, median of {args.repeat}")
    print(f"{'page':<34} {'server':>8} {'worst':>8} {'trip':>8} | {'API trip':>8}  API calls")
    for name, figures in results.items():
        page, api = figures["page"], figures["api"]
        print(f"{name:<34} {page['server_median']:>8} {page['server_max']:>8} {page['round_trip_median']:>8} | "
              f"{api['round_trip_median']:>8}  {len(figures['api_paths'])}")
    worst = max(figures["page"]["server_median"] for figures in results.values())
    print(f"slowest page: {worst} ms of server time (goal <= 300 ms: {'met' if worst <= 300 else 'NOT met'})")


def run(home: Path, port: int, env: dict[str, str], written: dict[str, list[int]],
        repeat: int) -> dict[str, dict[str, Any]]:
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=5).status_code == 200:
                break
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            sys.exit("the server did not answer")
        time.sleep(0.3)
    token = json.loads(subprocess.run([str(BIN / "cigri"), "token", "create", "--ttl", "1h", "--json"], env={
        **env, "CIGRI_SERVER": f"unix:{home / 'cigri.sock'}"}, check=True, capture_output=True, text=True).stdout)
    big, typical, failed = written["ended"][0], written["ended"][len(written["ended"]) // 2], written["failed"][-1]
    now = time.time()
    with httpx.Client(base_url=base, timeout=120) as pages, \
            httpx.Client(base_url=f"{base}/api/v1", timeout=120,
                         headers={"Authorization": f"Bearer {token['token']}"}) as api:
        login = pages.post("/login", data={"token": token["token"], "next": "/"})
        if login.status_code != 303 or "cigri_session" not in pages.cookies:
            sys.exit(f"login failed: {login.status_code}")
        count = len(written["ended"])

        def campaign(campaign_id: int) -> tuple[list[str], list[str]]:
            return [f"/campaigns/{campaign_id}"], [f"/campaigns/{campaign_id}", f"/campaigns/{campaign_id}/history",
                                                   f"/campaigns/{campaign_id}/events",
                                                   f"/campaigns/{campaign_id}/tasks?state=failed&limit=51"]

        def grid(window: str, seconds: int) -> tuple[list[str], list[str]]:
            return [f"/?range={window}"], ["/clusters", "/events",
                                           f"/gridusage?from={now - seconds}&to={now}&points=240"]

        cases = {
            "grid, 24 h": grid("24h", 86400), "grid, 7 d": grid("7d", 7 * 86400),
            "grid, 30 d": grid("30d", 30 * 86400),
            "campaigns (everyone's, page 1)": (["/campaigns"], [f"/campaigns?all=true&limit=51&offset={count - 51}"]),
            "campaigns (failed, page 3)": (["/campaigns?state=failed&page=3"],
                                           ["/campaigns?state=failed&limit=51&offset=100"]),
            f"campaign {typical} (a typical one)": campaign(typical),
            f"campaign {failed} (failed)": campaign(failed),
            f"campaign {big} (the big one)": campaign(big),
            "events": (["/events"], ["/events"]),
            "fair share": (["/shares"], ["/shares"]),
            "admin": (["/admin"], ["/users", "/classes", "/tokens?all=true"]),
        }
        results = {}
        for name, (page_paths, api_paths) in cases.items():
            timed(pages, page_paths, 1)  # warm: the first read of a page loads its template
            results[name] = {"page": timed(pages, page_paths, repeat), "api": timed(api, api_paths, repeat),
                             "page_paths": page_paths, "api_paths": api_paths}
    return results


if __name__ == "__main__":
    main()
