"""Benchmark: cigri server under load, beside direct mode, in one run.

A real ``cigri server`` (its socket, its cycle process) drains a campaign of ``--tasks`` (1M)
on simulated clusters (``sim`` backend, wall-clock time, ``--cores`` in all). Printed, each
beside its baseline measured in the same run:

- the latency (p50/p95) of reading one campaign, ``GET /api/v1/campaigns/N``, while
  ``--clients`` (100) clients each poll it every ``--poll`` (1 s), against the same read
  (``api.campaign_detail``) in direct mode, of the same draining campaign without the clients;
  and of the whole ``gridstat -c N --json`` command through the server against direct mode
  (process start included);
- the cycle's p95 with those clients, against without them (from the server's log), in
  ``--rounds`` alternated phases of ``--seconds`` each;
- the streamed submission of the ``--tasks`` lines through the API (``gridsub`` as a client)
  against ``gridsub`` in direct mode (bench/ingest.py's figure);
- the server's peak RSS, and its cycle process's.

Goals (issue 23): read p95 <= 50 ms under load, cycle p95 <= 1.2x unloaded, streamed
submission <= 1.5x direct, server RSS <= 300 MB.

    python bench/api.py [--tasks 1000000] [--clients 100] [--poll 1.0] [--seconds 30] [--rounds 3]
        [--warmup 20] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

BIN = Path(sys.executable).parent
CYCLE = re.compile(r"cigri\.cycle INFO cycle: .* finished in ([0-9.]+)s")


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def figures(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "p50": round(percentile(values, 0.5), 4), "p95": round(percentile(values, 0.95), 4)}


def write_campaign(root: Path, tasks: int) -> Path:
    params = root / "params.txt"
    with params.open("w") as handle:
        for i in range(tasks):
            handle.write(f"task{i:07d} 5\n")  # the sim backend runs each task 5 s
    jdl = root / "campaign.json"
    jdl.write_text(json.dumps({"name": "bench", "param_file": str(params), "exec_file": "/bin/true",
                               "clusters": {f"sim{i}": {} for i in range(4)}}))
    return jdl


def environment(home: Path, config: Path, server: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CIGRI_")}
    env.update(CIGRI_HOME=str(home), CIGRI_CONFIG=str(config), NO_COLOR="1")
    if server:
        env["CIGRI_SERVER"] = server
    return env


def timed(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{' '.join(command)} failed: {result.stderr}")
    return time.perf_counter() - started, result.stdout


def cycle_times(log: Path, since: int) -> list[float]:
    """The durations of the cycles logged after byte ``since`` of the server's log."""
    with log.open() as handle:
        handle.seek(since)
        return [float(match[1]) for match in CYCLE.finditer(handle.read())]


async def poll(socket: str, path: str, clients: int, period: float, seconds: float) -> list[float]:
    """``clients`` pollers, each reading ``path`` every ``period`` for ``seconds``; latencies."""
    latencies: list[float] = []
    transport = httpx.AsyncHTTPTransport(uds=socket)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(transport=transport, base_url="http://cigri", limits=limits, timeout=60) as client:
        async def one(offset: float) -> None:
            await asyncio.sleep(offset)
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                started = time.perf_counter()
                response = await client.get(path)
                latencies.append(time.perf_counter() - started)
                response.raise_for_status()
                await asyncio.sleep(max(0.0, period - (time.perf_counter() - started)))

        await asyncio.gather(*(one(period * i / clients) for i in range(clients)))
    return latencies


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time ``pid`` has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (the server's cycle process)."""
    return [int(child) for task in Path(f"/proc/{pid}/task").iterdir()
            for child in (task / "children").read_text().split()]


def direct_reads(env: dict[str, str], campaign_id: int, count: int) -> list[float]:
    """``api.campaign_detail`` in direct mode, in a process of its own (the grid as a command opens it)."""
    code = ("import json, sys, time; from cigri import api, config; from cigri.grid import open_grid\n"
            "grid = open_grid(config.load()); out = []\n"
            f"for _ in range({count}):\n"
            "    t = time.perf_counter(); api.campaign_detail(grid, %d, user=api.current_user())\n"
            "    out.append(time.perf_counter() - t)\n"
            "json.dump(out, sys.stdout)" % campaign_id)
    return json.loads(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                                     check=True).stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--poll", type=float, default=1.0, help="seconds between two reads of one client")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of each phase, unloaded and loaded")
    parser.add_argument("--rounds", type=int, default=3, help="unloaded and loaded phases, alternated")
    parser.add_argument("--warmup", type=float, default=20.0, help="seconds after the submission before measuring")
    parser.add_argument("--cores", type=int, default=4000, help="cores of the 4 simulated clusters, in all")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        jdl = write_campaign(root, args.tasks)
        config = root / "cigri.toml"
        # the clients are one process of one account, standing for as many users: their rate and their
        # connections at once are not one user's
        config.write_text("[cigri]\ncycle_period = 5\nlog_level = \"info\"\n[limits]\nrequests_per_minute = 1000000\n"
                          f"[server]\nmax_connections_per_peer = {args.clients + 16}\n"
                          + "".join(f'[clusters.sim{i}]\nbackend = "sim"\ncores = {args.cores // 4}\nlocal_load = 0\n'
                                    for i in range(4)))
        direct_home, server_home = root / "direct", root / "server"
        direct_submit, _ = timed([str(BIN / "gridsub"), "-f", str(jdl), "--json"],
                                 environment(direct_home, config, None))

        socket = server_home / "cigri.sock"
        server_env = environment(server_home, config, f"unix:{socket}")
        with (root / "server.out").open("w") as output:
            server = subprocess.Popen([str(BIN / "cigri"), "server"], env=environment(server_home, config, None),
                                      stdout=output, stderr=output)
        try:
            deadline = time.monotonic() + 60
            while not socket.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            log = server_home / "log" / "cigri.log"  # the cycle process logs each cycle there
            api_submit, out = timed([str(BIN / "gridsub"), "-f", str(jdl), "--json"], server_env)
            campaign = json.loads(out)["campaign_id"]
            time.sleep(args.warmup)  # the clusters fill: cycles start thousands of jobs, then settle
            unloaded: list[float] = []
            loaded: list[float] = []
            reads: list[float] = []
            server_cores = clients_cores = 0.0  # CPU used while the clients poll, in cores
            for _ in range(args.rounds):  # alternated, so that the campaign's drift weighs on both alike
                mark = log.stat().st_size
                time.sleep(args.seconds)
                unloaded += cycle_times(log, mark)
                mark, server_cpu, clients_cpu = log.stat().st_size, cpu_seconds(server.pid), time.process_time()
                reads += asyncio.run(poll(str(socket), f"/api/v1/campaigns/{campaign}", args.clients, args.poll,
                                          args.seconds))
                loaded += cycle_times(log, mark)
                server_cores += (cpu_seconds(server.pid) - server_cpu) / args.seconds / args.rounds
                clients_cores += (time.process_time() - clients_cpu) / args.seconds / args.rounds
            gridstat_server = [timed([str(BIN / "gridstat"), "-c", str(campaign), "--json"], server_env)[0]
                               for _ in range(10)]
            direct_env = environment(server_home, config, None)  # the same draining campaign, read in place
            gridstat_direct = [timed([str(BIN / "gridstat"), "-c", str(campaign), "--json"], direct_env)[0]
                               for _ in range(10)]
            direct = direct_reads(direct_env, campaign, 200)
            rss = peak_rss_mb(server.pid)
            cycle_rss = sum(peak_rss_mb(child) for child in children(server.pid))
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(120)
    result = {
        "tasks": args.tasks, "clients": args.clients, "poll_seconds": args.poll,
        "read_server": figures(reads), "read_direct": figures(direct),
        "gridstat_server": figures(gridstat_server), "gridstat_direct": figures(gridstat_direct),
        "cycle_unloaded": figures(unloaded), "cycle_loaded": figures(loaded),
        "server_cores_under_load": round(server_cores, 3), "clients_cores": round(clients_cores, 3),
        "cycle_p95_ratio": round(percentile(loaded, 0.95) / percentile(unloaded, 0.95), 3),
        "submit_server_seconds": round(api_submit, 2), "submit_direct_seconds": round(direct_submit, 2),
        "submit_ratio": round(api_submit / direct_submit, 3), "server_peak_rss_mb": round(rss, 1),
        "cycle_process_peak_rss_mb": round(cycle_rss, 1),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"read one campaign, {args.clients} clients polling every {args.poll:g}s while {args.tasks:,} tasks drain: "
          f"p50 {result['read_server']['p50'] * 1000:.1f} ms, p95 {result['read_server']['p95'] * 1000:.1f} ms "
          f"(direct, same read: p50 {result['read_direct']['p50'] * 1000:.1f} ms, "
          f"p95 {result['read_direct']['p95'] * 1000:.1f} ms; goal p95 <= 50 ms)")
    print(f"gridstat -c N --json: through the server p50 {result['gridstat_server']['p50']:.2f} s, "
          f"p95 {result['gridstat_server']['p95']:.2f} s; direct p50 {result['gridstat_direct']['p50']:.2f} s, "
          f"p95 {result['gridstat_direct']['p95']:.2f} s")
    print(f"cycle p95: {result['cycle_loaded']['p95']:.3f} s with the clients, {result['cycle_unloaded']['p95']:.3f} s "
          f"without ({result['cycle_loaded']['n']} and {result['cycle_unloaded']['n']} cycles); "
          f"ratio {result['cycle_p95_ratio']:.2f}x (goal <= 1.2x); meanwhile the server used "
          f"{server_cores:.2f} core(s), the clients {clients_cores:.2f}")
    print(f"submission of {args.tasks:,} lines: through the API {api_submit:.2f} s, direct {direct_submit:.2f} s; "
          f"ratio {result['submit_ratio']:.2f}x (goal <= 1.5x)")
    print(f"server peak RSS {rss:.0f} MB, its cycle process {cycle_rss:.0f} MB (goal <= 300 MB)")


if __name__ == "__main__":
    main()
