"""Several ``cigri server`` processes over one PostgreSQL store, with real processes: the server
running the cycles killed (``kill -9``) again and again while a campaign drains through the
others, or frozen (``SIGSTOP``) past its lease and woken up; and a server following its
database from a killed primary to the promoted replica. Every task runs exactly once; the
frozen one's writes are refused by its epoch; the surviving server answers throughout.

Full size (CIGRI_TEST_FULL=1, as CI runs it): 10,000 tasks and 20 kills; by default 600 and 5.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import BIN, size, wait_for
from postgres import drop_database, fresh_database, replicated, server

from cigri.db.postgres import Connection

pytestmark = pytest.mark.slow

TASKS, KILLS = size(600, 10_000), size(5, 20)
LEASE = 3.0  # seconds: a takeover within it and one cycle period


class Servers:
    """Two servers of one grid: each its own home (socket, logs), one shared store and spool."""

    def __init__(self, root: Path, url: str) -> None:
        self.root, self.url = root, url
        self.exec = root / "exec"
        self.exec.mkdir()
        self.config = root / "cigri.toml"
        self.config.write_text(f'[clusters.local]\nbackend = "local"\nslots = 4\n'
                               f'[cigri]\ncycle_period = 0.2\nleader_lease = {LEASE}\nspool = "{root / "spool"}"\n')
        self.processes: dict[int, subprocess.Popen[bytes]] = {}

    def env(self, number: int) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if not k.startswith("CIGRI_")}
        return {**keep, "CIGRI_HOME": str(self.root / f"home{number}"), "CIGRI_CONFIG": str(self.config),
                "CIGRI_DATABASE_URL": self.url, "NO_COLOR": "1"}

    def socket(self, number: int) -> Path:
        return self.root / f"home{number}" / "cigri.sock"

    def start(self, number: int) -> None:
        with open(self.root / f"server{number}.log", "ab") as log:
            self.processes[number] = subprocess.Popen([str(BIN / "cigri"), "server"], env=self.env(number),
                                                      stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                                      start_new_session=True)
        wait_for(lambda: self.run(number, "gridclusters", expect=None).returncode == 0, 60, f"server {number}")

    def run(self, number: int, command: str, *args: str, expect: int | None = 0) -> subprocess.CompletedProcess[str]:
        """A client command through server ``number``'s socket."""
        result = subprocess.run([str(BIN / command), *args], env={**self.env(number), "CIGRI_SERVER":
                                f"unix:{self.socket(number)}"}, cwd=self.root, capture_output=True, text=True,
                                timeout=120)
        if expect is not None:
            assert result.returncode == expect, f"{command} {args}: {result.returncode} {result.stderr}"
        return result

    def lease(self) -> dict[str, Any] | None:
        conn = Connection(self.url)
        try:
            row = conn.execute("SELECT holder, epoch FROM leader WHERE id = 1").fetchone()
        finally:
            conn.close()
        return None if row is None else {"holder": row[0], "epoch": row[1]}

    def leading(self) -> int:
        """The server whose cycle process holds the lease (its process group is the server's)."""
        lease = self.lease()
        assert lease is not None
        pid = int(lease["holder"].rsplit(":", 1)[1])
        group = os.getpgid(pid)
        return next(number for number, process in self.processes.items() if process.pid == group)

    def signal(self, number: int, sig: int) -> None:
        os.killpg(self.processes[number].pid, sig)
        if sig == signal.SIGKILL:
            self.processes[number].wait(30)

    def log(self, number: int) -> str:
        return (self.root / f"server{number}.log").read_text(errors="replace") + "".join(
            path.read_text(errors="replace") for path in (self.root / f"home{number}" / "log").glob("*.log"))

    def close(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)
        pool = self.root / "spool" / "local" / "pool.lock"
        if pool.exists() and (pid := pool.read_text().strip()).isdigit():
            try:
                os.kill(int(pid), signal.SIGTERM)
            except ProcessLookupError:
                pass


@pytest.fixture(scope="module")
def pg_server() -> Iterator[str]:
    with server() as url:
        yield url


@pytest.fixture
def servers(pg_server: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Servers]:
    name = "f_" + request.node.name[:40].lower()
    two = Servers(tmp_path, fresh_database(pg_server, name))
    try:
        yield two
    finally:
        two.close()
        drop_database(pg_server, name)


def admin_page(servers: Servers, number: int) -> str:
    """The dashboard's admin page, as the grid's account (root here) sees it through the socket."""
    import httpx

    with httpx.Client(transport=httpx.HTTPTransport(uds=str(servers.socket(number))), base_url="http://cigri") as client:
        return client.get("/admin").text


def campaign(servers: Servers, tasks: int) -> int:
    program = servers.exec / "mark.sh"
    program.write_text('#!/bin/sh\n: > "marker.$1.$$.$(date +%s%N)"\n')
    program.chmod(0o755)
    params = servers.root / "params.txt"
    params.write_text("".join(f"t{i:05d}\n" for i in range(tasks)))
    jdl = servers.root / "survivor.json"
    jdl.write_text('{"name": "survivor", "param_file": "%s", "clusters": {"local": {"exec_file": "%s", '
                   '"exec_directory": "%s"}}}' % (params, program, servers.exec))
    out = servers.run(0, "gridsub", "-f", str(jdl)).stdout
    return int(out.split("CAMPAIGN_ID=")[1].split()[0])


def drained(servers: Servers, number: int, campaign_id: int, timeout: float) -> dict[str, Any]:
    import json

    def ended() -> bool:
        summary = json.loads(servers.run(number, "gridstat", "-c", str(campaign_id), "--json").stdout)
        return summary["state"] in ("terminated", "failed", "cancelled")

    wait_for(ended, timeout, f"campaign {campaign_id} to end", step=1)
    return dict(json.loads(servers.run(number, "gridstat", "-c", str(campaign_id), "--json").stdout))


def runs(servers: Servers) -> Counter[str]:
    return Counter(path.name.split(".")[1] for path in servers.exec.glob("marker.*"))


def test_kill_9_of_the_leading_server_again_and_again_loses_and_duplicates_nothing(servers: Servers) -> None:
    servers.start(0)
    servers.start(1)
    campaign_id = campaign(servers, TASKS)
    rng = random.Random(11)
    takeovers = []
    for _ in range(KILLS):
        wait_for(lambda: servers.lease() is not None, 60, "a server to run the cycles")
        time.sleep(rng.uniform(0.3, 2.0))
        victim = servers.leading()
        survivor = 1 - victim
        epoch = servers.lease()["epoch"]  # type: ignore[index]
        servers.signal(victim, signal.SIGKILL)
        killed_at = time.monotonic()
        servers.run(survivor, "gridstat", "-c", str(campaign_id))  # the other server answers throughout
        wait_for(lambda: (servers.lease() or {}).get("epoch", 0) > epoch, 60, "the other server to take over")
        takeovers.append(time.monotonic() - killed_at)
        servers.start(victim)
    summary = drained(servers, 0, campaign_id, timeout=1800)
    assert summary["state"] == "terminated", summary
    assert summary["tasks"]["terminated"] == TASKS
    ran = runs(servers)
    assert len(ran) == TASKS, f"{TASKS - len(ran)} task(s) never ran"
    assert [task for task, count in ran.items() if count > 1] == [], "tasks run twice"
    assert max(takeovers) < LEASE + 5, takeovers  # the lease, a cycle period, and a loaded machine's slack


def test_a_leader_frozen_past_its_lease_wakes_up_fenced(servers: Servers) -> None:
    servers.start(0)
    servers.start(1)
    campaign_id = campaign(servers, size(300, 2000))
    wait_for(lambda: servers.lease() is not None and len(runs(servers)) > 20, 60, "tasks to run")
    frozen = servers.leading()
    epoch = servers.lease()["epoch"]  # type: ignore[index]
    servers.signal(frozen, signal.SIGSTOP)
    try:
        wait_for(lambda: (servers.lease() or {}).get("epoch", 0) > epoch, LEASE + 30, "the other server to take over")
        shown = admin_page(servers, 1 - frozen)  # the admin page says who runs the cycles now
        assert f"(epoch {epoch + 1})" in shown and "Run by" in shown, shown
        time.sleep(1)  # the new leader's cycles move on while the old one sleeps
    finally:
        servers.signal(frozen, signal.SIGCONT)
    wait_for(lambda: "lost the lead on the cycles" in servers.log(frozen)
             or "another server runs the cycles now" in servers.log(frozen), 30, "the woken server to see it lost")
    summary = drained(servers, 1 - frozen, campaign_id, timeout=600)
    assert summary["state"] == "terminated", summary
    ran = runs(servers)
    assert [task for task, count in ran.items() if count > 1] == [], "tasks run twice"
    assert len(ran) == summary["tasks"]["total"]
    assert servers.lease()["epoch"] >= epoch + 1  # type: ignore[index]


def test_the_grid_follows_its_database_to_the_promoted_replica(tmp_path: Path) -> None:
    """A primary with a synchronous streaming replica: the primary killed while a campaign
    drains, the replica promoted; a client meanwhile gets one line, the cycles resume within a
    minute, and every task submitted runs once."""
    with replicated() as (primary, standby):
        url = (f"postgresql://cigri@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/postgres"
               "?target_session_attrs=read-write&connect_timeout=2")
        one = Servers(tmp_path, url)
        try:
            one.start(0)
            campaign_id = campaign(one, size(300, 2000))
            wait_for(lambda: len(runs(one)) > 20, 60, "tasks to run")
            primary.kill()
            down = one.run(0, "gridstat", "-c", str(campaign_id), expect=None)
            assert down.returncode == 0 or (down.returncode != 0 and down.stderr.count("\n") == 1
                                            and "database" in down.stderr), down.stderr
            standby.promote()
            promoted = time.monotonic()
            before = len(runs(one))
            wait_for(lambda: len(runs(one)) > before, 60, "the cycles to resume on the promoted replica", step=0.5)
            assert time.monotonic() - promoted < 60
            summary = drained(one, 0, campaign_id, timeout=600)
            assert summary["state"] == "terminated", summary
            ran = runs(one)
            assert len(ran) == summary["tasks"]["total"] and max(ran.values()) == 1
        finally:
            one.close()
