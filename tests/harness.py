"""The test harness shared by the tests that run cigri's real commands as subprocesses.

:class:`Cigri` is one isolated installation under a test's ``tmp_path`` (its own ``CIGRI_HOME``,
configuration with one local cluster of :data:`SLOTS` slots, and work directory); the
``cigri`` fixture of ``conftest.py`` builds one per test and stops what it left running.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import pytest

from cigri.backends.local.pool import running_pids

BIN = Path(sys.executable).parent
COMMANDS = ("gridsub", "gridstat", "griddel", "gridevents", "gridnotify", "gridclusters", "cigri")
SLOTS = 4

# The real clusters of tests/clusters/up.sh are two Slurm clusters of one node of 8 cores, a
# single OAR and a single Grid Engine, which some tests fill or count on: the tests that use them
# carry this mark, and conftest.py runs each batch system's tests one after the other (see
# ``real_systems``). A system is named as its backend, which starts the names of its clusters.
REAL_CLUSTERS = pytest.mark.real_clusters
REAL_SYSTEMS = ("slurm", "oar", "gridengine")


def on_systems(*systems: str) -> pytest.MarkDecorator:
    """``REAL_CLUSTERS`` for a test whose parameters do not name the batch systems it uses: these
    (none: it needs only the clusters' files, users or database, not their cores)."""
    return pytest.mark.real_clusters(systems=systems)


def unavailable(why: str) -> NoReturn:
    """Skip a test this machine cannot run, saying ``why``; with ``CI=true``, where every test
    runs (as root, with the real clusters), fail instead."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {why}")
    pytest.skip(why)


def needs_root(why: str) -> pytest.MarkDecorator:
    """Mark a test (or a module, as ``pytestmark``) that needs root: real Unix users, a tmpfs,
    a chown, cigri running as root. Run by anyone else it is skipped with ``why`` (conftest.py),
    and with ``CI=true`` it fails instead, so that CI never skips it."""
    return pytest.mark.needs_root(why)


def require_root(why: str) -> None:
    """:func:`needs_root`, from inside a test or a fixture."""
    if os.geteuid() != 0:
        unavailable(f"needs root: {why}")


FULL = os.environ.get("CIGRI_TEST_FULL") == "1"
STORE = os.environ.get("CIGRI_TEST_STORE", "sqlite")  # postgresql: every grid's store on a throwaway server
# Read once: fixtures clear CIGRI_* variables from the environment of the test they set up.
TEST_CLUSTERS = os.environ.get("CIGRI_TEST_CLUSTERS", "/tmp/cigri-clusters")


def read_terminal(controller: int, into: bytearray) -> None:
    """Everything a command draws on the pseudo-terminal ``controller`` leads, until it ends."""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the command ended: the terminal is gone
            return
        if not chunk:
            return
        into.extend(chunk)


def size(quick: int, full: int) -> int:
    """A slow test's size: ``quick`` by default, ``full`` with ``CIGRI_TEST_FULL=1``, which
    ``.ci/run`` sets, so a developer's run stays short and CI still runs the full size."""
    return full if FULL else quick


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie nobody reaps (containers without init) counts as gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def _proc_file(pid: int, name: str) -> bytes:
    try:
        with open(f"/proc/{pid}/{name}", "rb") as f:
            return f.read()
    except OSError:
        return b""


def clusters_file() -> Path | None:
    """The cigri.toml ``tests/clusters/up.sh`` wrote for the real clusters (``CIGRI_TEST_CLUSTERS``
    names it or its directory; default ``/tmp/cigri-clusters``), or None when it is not there,
    or not this user's to use (clusters root brought up, whose SSH key an ordinary user cannot
    read: their tests skip for that user as they do where there are none)."""
    named = Path(TEST_CLUSTERS)
    path = named if named.suffix == ".toml" else named / "cigri.toml"
    usable = path.is_file() and os.access(path, os.R_OK) and os.access(path.parent / "ssh" / "id_ed25519", os.R_OK)
    return path if usable else None


def clusters_dir() -> Path:
    """Where ``tests/clusters/up.sh`` left the real clusters' files; without them the test is
    skipped, or fails with ``CI=true``."""
    found = clusters_file()
    if found is None:
        unavailable(f"no test clusters in {TEST_CLUSTERS} (tests/clusters/up.sh)")
    return found.parent


def front_end(host: str, *command: str) -> str:
    """What ``command`` prints, run on a test cluster's front-end (``slurm-a``, ``slurm-b``,
    ``oar``, ``gridengine``) as its account; the words are the remote shell's."""
    return subprocess.run(["ssh", "-F", str(clusters_dir() / "ssh" / "ssh_config"), host, *command],
                          capture_output=True, text=True, timeout=30, check=True).stdout


def busy_jobs(system: str) -> int:
    """The jobs running, starting or ending on a batch system's test clusters, asked of their
    front-ends: a job cancelled by the test before holds its cores a few seconds more."""
    if system == "slurm":
        return sum(len(front_end(host, "squeue", "-h", "-t", "CF,R,CG", "-o", "%i").split())
                   for host in ("slurm-a", "slurm-b"))
    if system == "gridengine":  # running, transferring, suspended, being deleted: one line per task
        return len(front_end("gridengine", "qstat", "-u", "'*'", "-s", "rs").splitlines()[2:])
    jobs = json.loads(front_end("oar", "oarstat", "-J") or "{}")
    return sum(job["state"] in ("toLaunch", "Launching", "Running", "Finishing") for job in jobs.values())


def marker_exec_dir(prefix: str, after: str = "") -> Path:
    """A fresh directory the real clusters' jobs and the tests both see, holding ``task.sh``: it
    leaves ``marker.TASK.…`` for each run of task TASK (its first argument), then runs ``after``."""
    exec_dir = clusters_dir() / "exec" / f"{prefix}-{secrets.token_hex(3)}"
    exec_dir.mkdir()
    exec_dir.chmod(0o1777)
    program = exec_dir / "task.sh"
    program.write_text(f'#!/bin/sh\n: > "marker.$1.$(hostname).$$.$(date +%s%N)"\n{after}')
    program.chmod(0o755)
    return exec_dir


def runs_per_task(exec_dir: Path) -> Counter[str]:
    """How many times each task ran, from :func:`marker_exec_dir`'s markers."""
    return Counter(path.name.split(".")[1] for path in exec_dir.glob("marker.*"))


def wait_for(predicate: Callable[[], object], timeout: float, what: str, step: float = 0.05,
             seen: Callable[[], object] = lambda: "") -> None:
    """Poll ``predicate`` every ``step`` seconds; a timeout says what ``seen`` last observed."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} {seen()}".rstrip())
        time.sleep(step)


class Cigri:
    """One cigri installation under ``tmp_path``: its own home, configuration and work dirs."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.home = tmp_path / "home"
        self.work = tmp_path / "work"  # exec_directory of the campaigns
        self.work.mkdir()
        self.config = tmp_path / "cigri.toml"
        self.config.write_text(f'[clusters.local]\nbackend = "local"\nslots = {SLOTS}\n')
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("CIGRI_") and k not in ("FORCE_COLOR", "NO_COLOR", "PYTHONBREAKPOINT")}
        env.update(CIGRI_HOME=str(self.home), CIGRI_CONFIG=str(self.config),
                   XDG_CONFIG_HOME=str(tmp_path / "xdg"))
        for name in ("CIGRI_DATABASE_URL", "CIGRI_LEADER_LEASE"):  # the test's own database (conftest._store)
            if os.environ.get(name):
                env[name] = os.environ[name]
        self.env = env
        self.daemons: list[subprocess.Popen[bytes]] = []

    # --- running commands ---------------------------------------------------------------

    def run(self, command: str, *args: str, expect: int | None = 0, timeout: float = 120,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        """Run one console script; check its exit status unless ``expect`` is None."""
        result = subprocess.run([str(BIN / command), *args], env=self.env, cwd=self.tmp, text=True,
                                capture_output=True, timeout=timeout, input=stdin)
        if expect is not None and result.returncode != expect:
            raise AssertionError(f"{command} {' '.join(args)}: exit {result.returncode}, expected {expect}\n"
                                 f"stdout: {result.stdout}\nstderr: {result.stderr}")
        return result

    def json(self, command: str, *args: str) -> Any:
        return json.loads(self.run(command, *args, "--json").stdout)

    def jdl(self, name: str, **fields: Any) -> Path:
        """Write a JDL for the local cluster; ``fields`` are its keys (exec_directory defaults to work/)."""
        document = {"name": name, "exec_directory": str(self.work), "clusters": {"local": {}}, **fields}
        path = self.tmp / f"{name}.json"
        path.write_text(json.dumps(document))
        return path

    def script(self, name: str, body: str) -> Path:
        path = self.tmp / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
        return path

    def submit(self, jdl: Path, *args: str) -> int:
        return int(self.json("gridsub", "-f", str(jdl), *args)["campaign_id"])

    def stat(self, campaign_id: int) -> dict[str, Any]:
        return self.json("gridstat", "-c", str(campaign_id))

    def tasks(self, campaign_id: int) -> list[dict[str, Any]]:
        return self.json("gridstat", "-c", str(campaign_id), "-f")

    def events(self, campaign_id: int) -> list[dict[str, Any]]:
        return self.json("gridevents", "-c", str(campaign_id))

    def cycle(self) -> None:
        self.run("cigri", "cycle")

    def start_daemon(self, period: float = 0.05) -> subprocess.Popen[bytes]:
        """Start ``cigri daemon`` in the background; its stderr goes to ``daemon-N.log``."""
        with open(self.tmp / f"daemon-{len(self.daemons)}.log", "wb") as log:
            proc = subprocess.Popen([str(BIN / "cigri"), "daemon", "--period", str(period)], env=self.env,
                                    cwd=self.tmp, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self.daemons.append(proc)
        return proc

    def daemon_log(self, proc: subprocess.Popen[bytes]) -> str:
        return (self.tmp / f"daemon-{self.daemons.index(proc)}.log").read_text()

    def drain(self, campaign_id: int, timeout: float = 60,
              check: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Let a daemon cycle quickly until the campaign ends; return ``gridstat``'s final summary.

        Cheaper than ``cigri cycle`` in a loop (one process start for every cycle). Without
        ``check`` the end is watched in the database directly, so that no poll competes with
        the daemon for the CPU; with it, ``check`` sees ``gridstat -c N --json`` at every poll.
        """
        daemon = self.start_daemon()
        try:
            deadline = time.monotonic() + timeout
            while True:
                if check is not None:
                    summary = self.stat(campaign_id)
                    check(summary)
                    state = summary["state"]
                else:
                    state = self.campaign_state(campaign_id)
                if state in ("terminated", "failed", "cancelled"):
                    break
                if daemon.poll() is not None:
                    raise AssertionError(f"the daemon died: {self.daemon_log(daemon)}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"campaign {campaign_id} still {state} after {timeout}s")
                time.sleep(0.05)
        finally:
            daemon.terminate()
            daemon.wait(10)
        return self.stat(campaign_id)

    # --- looking inside ------------------------------------------------------------------

    def query(self, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
        """Rows of ``sql`` read from the grid's store: its SQLite file (read-only), or the
        PostgreSQL database the test runs on (``CIGRI_TEST_STORE=postgresql``)."""
        url = self.env.get("CIGRI_DATABASE_URL")
        if url:
            from cigri.db.postgres import Connection as PostgresConnection
        conn: Any = PostgresConnection(url) if url else sqlite3.connect(f"file:{self.home / 'cigri.db'}?mode=ro",
                                                                        uri=True, timeout=30)
        try:
            return [tuple(row) for row in conn.execute(sql, params or [])]
        finally:
            conn.close()

    def campaign_state(self, campaign_id: int) -> str:
        return str(self.query("SELECT state FROM campaigns WHERE id = ?", [campaign_id])[0][0])

    def db_counts(self) -> dict[str, int]:
        return {table: int(self.query(f"SELECT count(*) FROM {table}")[0][0])
                for table in ("campaigns", "tasks", "jobs", "campaign_properties", "events")}

    def spool(self) -> Path:
        return self.home / "spool" / "local"

    def cleanup(self) -> None:
        """Stop what the test left running: daemons, the pool daemon, and job process groups.

        A pid read from a file is only signalled if its process still names this spool, so a
        reused pid never hits someone else's process.
        """
        for proc in self.daemons:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        spool = str(self.spool()).encode()
        lock = self.spool() / "pool.lock"
        text = lock.read_text().strip() if lock.exists() else ""
        if text.isdigit() and spool in _proc_file(int(text), "cmdline"):
            os.kill(int(text), signal.SIGTERM)
        for pid in running_pids(str(self.spool())):
            if process_alive(pid) and spool in _proc_file(pid, "environ"):
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
