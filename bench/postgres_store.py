"""Benchmark: the PostgreSQL store (issue 34), each figure beside its baseline, in one run.

A throwaway PostgreSQL server (``tests/postgres.py``: ``initdb`` in a private directory, 127.0.0.1
only) holds every PostgreSQL store of the run, one fresh database per part:

- ``ingest``: ``gridsub`` of a ``--lines``-line parameter file (bench/ingest.py's file and JDL)
  into a PostgreSQL store, against a bare ``COPY`` of the same rows into a table with the columns
  and indexes of cigri's ``tasks`` (``cigri/db/postgres.sql``: its primary key and bag index, no
  trigger) on the same server (goal <= 2x), and against the same ``gridsub`` into SQLite;
- ``cycle``: the cycle's p95 with ``--pending`` tasks in all (bench/cycle_scale.py's scenario in
  the simulator: 100 campaigns of 10 users, 10 sim clusters of 100 cores), on PostgreSQL and on
  SQLite, size by size (goal <= 0.5 s, and flat: the largest size's p95 within 1.25x of the
  smallest's);
- ``api``: ``GET /api/v1/campaigns/N`` by ``--clients`` clients, each polling every ``--poll``,
  spread evenly over two ``cigri server`` processes sharing one PostgreSQL store while an
  ``--api-tasks`` campaign drains (bench/api.py's campaign and clients, over each server's Unix
  socket), against one server over SQLite with the same campaign and clients (goal p95 <= 50 ms);
  the first three poll periods, while the servers open their pools' connections, apart;
- ``takeover``: two servers over one store with a short ``--lease`` and ``--period``; the one
  that runs the cycles is killed (``kill -9``) ``--kills`` times, and the time is taken from the
  kill until the other's log says ``runs the cycles (epoch N…)`` (and until the ``leader`` table
  shows the new epoch); the killed one is started again and is the standby of the next kill
  (goal p95 <= lease + one cycle period).

The servers and commands run this tree's code (its root first on ``PYTHONPATH``). Everything
listens on 127.0.0.1 or a Unix socket in a temporary directory, and is stopped and removed at the
end, also on failure.

    python bench/postgres_store.py [--only ingest|cycle|api|takeover] [--lines 1000000]
        [--pending 10000,100000,1000000] [--hours 0.25] [--api-tasks 1000000] [--clients 100]
        [--poll 1.0] [--seconds 30] [--warmup 20] [--kills 5] [--lease 5] [--period 1] [--json]

A quick try: ``--lines 100000 --pending 10000 --api-tasks 100000 --seconds 10 --warmup 10 --kills 2``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # this tree's cigri, and the tests' throwaway PostgreSQL server

import psycopg  # noqa: E402
from api import children, figures, percentile, poll, write_campaign  # noqa: E402
from cycle_scale import scenario  # noqa: E402
from ingest import write_params  # noqa: E402
from postgres import drop_database, fresh_database, server  # noqa: E402

from cigri.simulate import parse_scenario, simulate  # noqa: E402

BIN = Path(sys.executable).parent
PARTS = ("ingest", "cycle", "api", "takeover")
FLAT = 1.25  # the cycle's p95 at the largest size against the smallest: "flat"
LEADS = re.compile(r"runs the cycles \(epoch (\d+)")
# bench/api.py's server: 4 sim clusters; the clients are one account standing for many users
SERVER_CONFIG = ("[cigri]\ncycle_period = {period}\nlog_level = \"info\"\n[limits]\nrequests_per_minute = 1000000\n"
                 "[server]\nmax_connections_per_peer = {connections}\n")
SIM_CLUSTER = '[clusters.sim{i}]\nbackend = "sim"\ncores = {cores}\nlocal_load = 0\n'


def environment(home: Path, config: Path | None = None, url: str | None = None, **settings: str) -> dict[str, str]:
    """A command's environment: this tree's code, ``home``, the store at ``url`` (SQLite: none)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CIGRI_")}
    env.update(CIGRI_HOME=str(home), NO_COLOR="1",
               PYTHONPATH=os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))))
    if config:
        env["CIGRI_CONFIG"] = str(config)
    if url:
        env["CIGRI_DATABASE_URL"] = url
    env.update({f"CIGRI_{key.upper()}": value for key, value in settings.items()})
    return env


def gridsub(jdl: Path, env: dict[str, str]) -> tuple[float, dict[str, Any]]:
    """The real command in direct mode: (seconds, its JSON answer)."""
    started = time.perf_counter()
    result = subprocess.run([str(BIN / "gridsub"), "-f", str(jdl), "--json"], env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise RuntimeError(f"gridsub failed: {result.stderr.strip()}")
    return seconds, json.loads(result.stdout)


def initialized(env: dict[str, str]) -> dict[str, str]:
    """The store of ``env`` created (``cigri db init``): the timed command then ingests, nothing else."""
    subprocess.run([str(BIN / "cigri"), "db", "init"], env=env, check=True, capture_output=True)
    return env


# --- ingest ---------------------------------------------------------------------------------

def bare_tasks() -> str:
    """cigri's ``tasks`` table and its indexes, as ``cigri/db/postgres.sql`` makes them, without
    its foreign key and its trigger (cigri's own work, which the baseline leaves out)."""
    schema = (ROOT / "cigri" / "db" / "postgres.sql").read_text()
    table = re.search(r"^CREATE TABLE tasks \(.*?^\);", schema, re.MULTILINE | re.DOTALL)
    indexes = re.findall(r"^CREATE (?:UNIQUE )?INDEX \w+ ON tasks\(.*?;$", schema, re.MULTILINE)
    assert table and indexes, "cigri/db/postgres.sql: no tasks table or index found"
    return "\n".join([table[0].replace(" REFERENCES campaigns(id)", ""), *indexes])


def bare_copy(params: Path, url: str) -> float:
    """Read the file, take the first word, and COPY (id, campaign, name, line) as cigri does, in one transaction."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(bare_tasks())
    started = time.perf_counter()
    with psycopg.connect(url) as conn, params.open() as handle:
        with conn.cursor().copy("COPY tasks(id, campaign_id, name, param) FROM STDIN") as copy:
            for number, line in enumerate(handle, 1):
                copy.write_row((number, 1, line.split(None, 1)[0], line.strip()))
    return time.perf_counter() - started


def ingest(pg: str, root: Path, lines: int) -> list[dict[str, Any]]:
    params = root / "params.txt"
    write_params(params, lines)
    jdl = root / "ingest.json"
    jdl.write_text(json.dumps({"name": "ingest", "param_file": str(params), "exec_file": "/bin/true",
                               "clusters": {"local": {}}}))
    try:
        base = bare_copy(params, fresh_database(pg, "bare_copy"))
        drop_database(pg, "bare_copy")
        on_pg, answer = gridsub(jdl, initialized(environment(root / "ingest-pg", url=fresh_database(pg, "ingest"))))
        assert answer["tasks"] == lines, answer
        drop_database(pg, "ingest")
        on_sqlite, answer = gridsub(jdl, initialized(environment(root / "ingest-sqlite")))
        assert answer["tasks"] == lines, answer
    finally:
        params.unlink()
    return [
        row("ingest", f"gridsub, {lines:,} lines", f"{on_pg:.2f} s", f"bare COPY, same rows and indexes: {base:.2f} s",
            on_pg / base, "<= 2x", on_pg / base <= 2),
        row("ingest", f"gridsub, {lines:,} lines", f"{on_pg:.2f} s", f"the same into SQLite: {on_sqlite:.2f} s",
            on_pg / on_sqlite, "", None),
    ]


# --- cycle ----------------------------------------------------------------------------------

def cycles(pg: str, sizes: list[int], hours: float) -> list[dict[str, Any]]:
    """bench/cycle_scale.py's runs, each size on SQLite then on PostgreSQL."""
    rows, p95, sqlite_p95 = [], {}, {}
    for size in sizes:
        sqlite = simulate(parse_scenario(scenario(size, hours)))["cycle_seconds"]
        sqlite_p95[size] = sqlite["p95"]
        on_pg = scenario(size, hours)
        on_pg["config"] = {"database": {"url": fresh_database(pg, "cycle")}}
        try:
            report = simulate(parse_scenario(on_pg))
        finally:
            drop_database(pg, "cycle")
        p95[size] = report["cycle_seconds"]["p95"]
        rows.append(row("cycle", f"cycle p95, {size:,} pending ({report['cycles']} cycles)",
                        f"{p95[size]:.3f} s (mean {report['cycle_seconds']['mean']:.3f})",
                        f"SQLite: {sqlite['p95']:.3f} s (mean {sqlite['mean']:.3f})", p95[size] / sqlite["p95"],
                        "<= 0.5 s", p95[size] <= 0.5))
    if len(sizes) > 1:
        flat, sqlite_flat = (p95[sizes[-1]] / p95[sizes[0]]), sqlite_p95[sizes[-1]] / sqlite_p95[sizes[0]]
        rows.append(row("cycle", f"cycle p95, {sizes[-1]:,} against {sizes[0]:,} pending",
                        f"{p95[sizes[-1]]:.3f} s against {p95[sizes[0]]:.3f} s",
                        f"SQLite: {sqlite_p95[sizes[-1]]:.3f} s against {sqlite_p95[sizes[0]]:.3f} s, {sqlite_flat:.2f}x",
                        flat, f"flat (<= {FLAT:g}x)", flat <= FLAT))
    return rows


# --- servers --------------------------------------------------------------------------------

class Server:
    """One ``cigri server`` in ``home`` (its socket, its log), started with ``env``."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.home, self.env = home, env
        self.socket = home / "cigri.sock"
        self.log = home / "log" / "cigri.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        with (self.home / "server.out").open("a") as output:
            self.process = subprocess.Popen([str(BIN / "cigri"), "server"], env=self.env, stdout=output, stderr=output)
        deadline = time.monotonic() + 60
        while not self.answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"cigri server in {self.home} did not start: "
                                   f"{(self.home / 'server.out').read_text()[-2000:]}")
            time.sleep(0.1)

    def answers(self) -> bool:
        """Its socket accepts a connection (a stale one of a killed server does not)."""
        import socket

        with socket.socket(socket.AF_UNIX) as probe:
            try:
                probe.connect(str(self.socket))
            except OSError:
                return False
        return True

    def kill(self) -> list[int]:
        """``kill -9`` of the server alone (as its host's crash would, for it); its cycle processes' pids."""
        assert self.process is not None
        cycle_processes = children(self.process.pid)
        self.process.send_signal(signal.SIGKILL)
        return cycle_processes

    def wait(self) -> None:
        assert self.process is not None
        self.process.wait()

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def report_errors(self) -> None:
        """Say on stderr how many errors its log holds, and the first: a figure of a failing server means little."""
        text = self.log.read_text() if self.log.exists() else ""
        errors = [line for line in text.splitlines() if " ERROR " in line or line.startswith("Traceback")]
        if errors:
            print(f"{self.home.name}: {len(errors)} errors in its log, the first: {errors[0]}", file=sys.stderr)

    def epoch(self) -> int:
        """The last epoch under which its log says it ran the cycles (0: never)."""
        if not self.log.exists():
            return 0
        found = LEADS.findall(self.log.read_text())
        return int(found[-1]) if found else 0


@contextlib.contextmanager
def servers(*started: Server) -> Iterator[tuple[Server, ...]]:
    """Start them; stop every one at the end, whatever happened."""
    try:
        for one in started:
            one.start()
        yield started
    finally:
        for one in started:
            one.stop()
            one.report_errors()


def server_config(root: Path, name: str, clients: int, cores: int, period: float) -> Path:
    config = root / f"{name}.toml"
    config.write_text(SERVER_CONFIG.format(period=period, connections=clients + 16)
                      + "".join(SIM_CLUSTER.format(i=i, cores=cores // 4) for i in range(4)))
    return config


# --- api ------------------------------------------------------------------------------------

def reads(sockets: list[str], path: str, clients: int, period: float, seconds: float) -> list[float]:
    """``clients`` pollers (bench/api.py's), spread evenly over ``sockets``; every latency."""
    shares = [clients // len(sockets) + (i < clients % len(sockets)) for i in range(len(sockets))]

    async def together() -> list[list[float]]:
        return await asyncio.gather(*(poll(s, path, n, period, seconds) for s, n in zip(sockets, shares)))

    return [latency for one in asyncio.run(together()) for latency in one]


def api_reads(pg: str, root: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    jdl = write_campaign(root, args.api_tasks)
    config = server_config(root, "api", args.clients, 4000, 5)
    measured, cold = {}, {}
    for store in ("sqlite", "postgresql"):
        url = fresh_database(pg, "api") if store == "postgresql" else None
        homes = [root / f"api-{store}-{i}" for i in range(2 if url else 1)]
        _, answer = gridsub(jdl, environment(homes[0], config, url))
        try:
            with servers(*(Server(home, environment(home, config, url)) for home in homes)) as started:
                time.sleep(args.warmup)  # the clusters fill: the first cycles start thousands of jobs
                sockets, path = [str(s.socket) for s in started], f"/api/v1/campaigns/{answer['campaign_id']}"
                # the servers open their pools' connections as the first clients come: apart
                cold[store] = reads(sockets, path, args.clients, args.poll, 3 * args.poll)
                measured[store] = reads(sockets, path, args.clients, args.poll, args.seconds)
        finally:
            if url:
                drop_database(pg, "api")
    on_pg, on_sqlite = figures(measured["postgresql"]), figures(measured["sqlite"])
    return [row("api", f"GET /api/v1/campaigns/N, {args.clients} clients over 2 servers, {args.api_tasks:,} tasks "
                f"draining ({on_pg['n']:,} reads)",
                f"p50 {on_pg['p50'] * 1000:.1f} ms, p95 {on_pg['p95'] * 1000:.1f} ms",
                f"1 server over SQLite: p50 {on_sqlite['p50'] * 1000:.1f} ms, p95 {on_sqlite['p95'] * 1000:.1f} ms",
                on_pg["p95"] / on_sqlite["p95"], "p95 <= 50 ms", on_pg["p95"] <= 0.05),
            row("api", f"the same, the first {3 * args.poll:g} s after the warm-up (the servers open their "
                f"connections)", f"p95 {percentile(cold['postgresql'], 0.95) * 1000:.1f} ms",
                f"SQLite: p95 {percentile(cold['sqlite'], 0.95) * 1000:.1f} ms",
                percentile(cold["postgresql"], 0.95) / percentile(cold["sqlite"], 0.95), "", None)]


# --- takeover -------------------------------------------------------------------------------

def store_epoch(url: str) -> int:
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        found = conn.execute("SELECT epoch FROM leader WHERE id = 1").fetchone()
    return int(found[0]) if found else 0


def leading(pair: tuple[Server, ...], timeout: float) -> Server:
    """The server that runs the cycles now: the last to log a lead (the store's epoch)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        best = max(pair, key=Server.epoch)
        if best.epoch():
            return best
        time.sleep(0.05)
    raise RuntimeError("no server logged that it runs the cycles")


def takeover(pg: str, root: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    jdl = write_campaign(root, 10_000)  # a campaign drains meanwhile: every cycle has work
    config = server_config(root, "takeover", 16, 400, args.period)
    url = fresh_database(pg, "takeover")
    settings = {"leader_lease": f"{args.lease:g}", "cycle_period": f"{args.period:g}"}
    homes = [root / f"takeover-{i}" for i in range(2)]
    gridsub(jdl, environment(homes[0], config, url))
    by_log: list[float] = []
    by_table: list[float] = []
    orphans = 0
    bound = args.lease + args.period
    shuffle = random.Random(34)
    try:
        with servers(*(Server(home, environment(home, config, url, **settings)) for home in homes)) as pair:
            for _ in range(args.kills):
                leader = leading(pair, 3 * bound + 30)
                other = next(s for s in pair if s is not leader)
                time.sleep(shuffle.uniform(0, args.period))  # anywhere in a cycle or between two
                was = leader.epoch()
                killed = time.perf_counter()
                cycle_processes = leader.kill()
                log_at = table_at = None
                while log_at is None or table_at is None:
                    now = time.perf_counter()
                    if now - killed > 3 * bound + 30:
                        raise RuntimeError(f"no takeover {now - killed:.0f} s after the kill")
                    if log_at is None and other.epoch() > was:
                        log_at = now
                    if table_at is None and store_epoch(url) > was:
                        table_at = now
                    time.sleep(0.02)
                by_log.append(log_at - killed)
                by_table.append(table_at - killed)
                leader.wait()
                orphans += sum(Path(f"/proc/{pid}").exists() for pid in cycle_processes)
                leader.start()  # the standby of the next kill
    finally:
        drop_database(pg, "takeover")
    lease_note = f"lease {args.lease:g} s, cycle_period {args.period:g} s"
    logged, stored = percentile(by_log, 0.95), percentile(by_table, 0.95)
    return [
        row("takeover", f"takeover after kill -9 of the leader, by the other's log ({len(by_log)} kills, {lease_note})",
            f"p95 {logged:.2f} s (max {max(by_log):.2f}, min {min(by_log):.2f})", f"lease + period: {bound:g} s",
            logged / bound, f"p95 <= {bound:g} s", logged <= bound),
        row("takeover", "the same, by the store's leader table (new epoch)",
            f"p95 {stored:.2f} s (max {max(by_table):.2f}, min {min(by_table):.2f})", f"lease + period: {bound:g} s",
            stored / bound, f"p95 <= {bound:g} s", stored <= bound),
        *([row("takeover", "cycle processes left running after their server's kill -9", str(orphans), "0", None,
               "0", orphans == 0)] if orphans else []),
    ]


# --- the table ------------------------------------------------------------------------------

def row(part: str, measure: str, figure: str, baseline: str, ratio: float | None, goal: str,
        met: bool | None) -> dict[str, Any]:
    return {"part": part, "measure": measure, "postgresql": figure, "baseline": baseline,
            "ratio": None if ratio is None else round(ratio, 2), "goal": goal, "met": met}


def table(rows: list[dict[str, Any]]) -> str:
    header = ("measure", "PostgreSQL", "baseline (same run)", "ratio", "goal")
    cells = [(r["measure"], r["postgresql"], r["baseline"], "" if r["ratio"] is None else f"{r['ratio']:.2f}x",
              f"{r['goal']}: {'met' if r['met'] else 'not met'}" if r["met"] is not None else r["goal"]) for r in rows]
    return "\n".join("| " + " | ".join(line) + " |" for line in (header, ("---",) * len(header), *cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=PARTS, help="run one part alone")
    parser.add_argument("--lines", type=int, default=1_000_000, help="ingest: lines of the parameter file")
    parser.add_argument("--pending", default="10000,100000,1000000", help="cycle: pending tasks, comma-separated")
    parser.add_argument("--hours", type=float, default=0.25, help="cycle: simulated hours per size (30 cycles)")
    parser.add_argument("--api-tasks", type=int, default=1_000_000, help="api: tasks of the draining campaign")
    parser.add_argument("--clients", type=int, default=100, help="api: clients, spread over the two servers")
    parser.add_argument("--poll", type=float, default=1.0, help="api: seconds between two reads of one client")
    parser.add_argument("--seconds", type=float, default=30.0, help="api: seconds the clients poll, per store")
    parser.add_argument("--warmup", type=float, default=20.0, help="api: seconds between the start and the reads")
    parser.add_argument("--kills", type=int, default=5, help="takeover: kill -9 of the leader, this many times")
    parser.add_argument("--lease", type=float, default=5.0, help="takeover: leader_lease, seconds")
    parser.add_argument("--period", type=float, default=1.0, help="takeover: cycle_period, seconds")
    parser.add_argument("--json", action="store_true", help="one JSON value")
    args = parser.parse_args()
    sizes = [int(size) for size in args.pending.split(",")]
    if min(args.lines, args.api_tasks, args.clients, args.kills, *sizes) < 1:
        parser.error("--lines, --api-tasks, --clients, --kills and --pending: must be at least 1")
    parts = (args.only,) if args.only else PARTS
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="cigri-pg-bench-") as tmp, server() as pg:
        root = Path(tmp)
        for part in parts:
            started = time.perf_counter()
            if part == "ingest":
                rows += ingest(pg, root, args.lines)
            elif part == "cycle":
                rows += cycles(pg, sizes, args.hours)
            elif part == "api":
                rows += api_reads(pg, root, args)
            else:
                rows += takeover(pg, root, args)
            print(f"{part}: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(table(rows))


if __name__ == "__main__":
    main()
