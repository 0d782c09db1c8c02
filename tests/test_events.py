"""Colombo's decisions, event aggregation, blacklisting and gridevents, on real databases,
a real loopback HTTP server standing in for a broken then healed OAR API, and the real CLI."""

from __future__ import annotations

import json
import os
import re
import threading
import tomllib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from harness import REAL_CLUSTERS, Cigri, busy_jobs, clusters_dir, marker_exec_dir, wait_for
from service import Site

from cigri import api, bag, colombo, config
from cigri import db as database
from cigri.backends import Capacity
from cigri.cycle import run_cycle
from cigri.cycle_context import CycleContext
from cigri.errors import InputError, Refused
from cigri.events import signature
from cigri.grid import Grid, open_grid
from cigri.states import JobState, TaskState
from cigri.users import acting_user

USER = acting_user()


def make_grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: str = "") -> Grid:
    for name in [n for n in os.environ if n.startswith("CIGRI_")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr(config, "SYSTEM_FILE", tmp_path / "absent.toml")
    monkeypatch.setattr(config, "USER_FILE", tmp_path / "absent.toml")
    conf = tmp_path / "cigri.toml"
    conf.write_text(extra + '\n[clusters.local]\nbackend = "local"\nslots = 2\n')
    monkeypatch.setenv("CIGRI_CONFIG", str(conf))
    monkeypatch.setenv("CIGRI_HOME", str(tmp_path / "home"))
    return open_grid(config.load())


@pytest.fixture
def grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Grid]:
    grid = make_grid(tmp_path, monkeypatch)
    yield grid
    grid.close()


def campaign(grid: Grid, tmp_path: Path, tasks: int, user: str = USER, *, taken: bool = False,
             **cluster: Any) -> tuple[int, list[int]]:
    """A campaign of ``tasks`` tasks, pending, or ``taken`` from the bag (waiting) for tests
    that end their jobs by hand, in any order."""
    document = {"name": "c", "exec_file": "/bin/true", "nb_jobs": tasks, "exec_directory": str(tmp_path),
                "clusters": {"local": cluster}}
    campaign_id, _ = api.submit(grid, json.dumps(document), base_dir=tmp_path, user=user)
    if not taken:
        return campaign_id, [r[0] for r in grid.db.execute("SELECT id FROM tasks WHERE campaign_id = ? ORDER BY id",
                                                            [campaign_id])]
    with database.write(grid.db) as conn:  # as the workqueue takes them, before their jobs exist
        task_ids = bag.take(conn, campaign_id, tasks)
        conn.executemany("UPDATE tasks SET state = ? WHERE id = ?", [(TaskState.WAITING, t) for t in task_ids])
    return campaign_id, task_ids


def end_job(grid: Grid, task_id: int, state: JobState, exit_code: int | None = None) -> int:
    """A job of the task that ran and ended ``state`` (what the updator records)."""
    with database.write(grid.db) as conn:
        campaign_id, = conn.execute("SELECT campaign_id FROM tasks WHERE id = ?", [task_id]).fetchone()
        conn.execute("UPDATE tasks SET state = ?, attempts = attempts + 1 WHERE id = ?", [TaskState.RUNNING, task_id])
        return conn.execute("INSERT INTO jobs(campaign_id, task_id, cluster_id, state, remote_id, exit_code, created_at) "
                            "VALUES (?, ?, 1, ?, 'none', ?, ?)",
                            [campaign_id, task_id, state, exit_code, database.now()]).lastrowid or 0


def analyse(grid: Grid) -> None:
    ctx = CycleContext(grid)
    ctx.capacities = {cid: Capacity(2, 2) for cid in grid.cluster_ids().values()}
    colombo.analyse(ctx)


def task(grid: Grid, task_id: int) -> dict[str, Any]:
    return next(grid.db.query("SELECT * FROM tasks WHERE id = ?", [task_id]))


def codes(grid: Grid) -> list[tuple[str, str, int]]:
    return [(r[0], r[1], r[2]) for r in grid.db.execute("SELECT code, state, count FROM events ORDER BY id")]


# --- reason-aware resubmission -------------------------------------------------------------

def test_best_effort_kills_are_resubmitted_without_limit_but_counted(grid: Grid, tmp_path: Path) -> None:
    _, (task_id,) = campaign(grid, tmp_path, 1, taken=True)
    for _ in range(12):  # far beyond max_resubmit (4)
        end_job(grid, task_id, JobState.PREEMPTED)
        analyse(grid)
        assert task(grid, task_id)["state"] == TaskState.PENDING
    row = task(grid, task_id)
    assert (row["preemptions"], row["resubmits"], row["attempts"], row["priority"]) == (12, 0, 0, bag.PRIORITY_HEAD)
    assert codes(grid) == [("BEST_EFFORT_KILL", "closed", 12)]  # one counted row, not twelve


def test_walltime_kills_resubmit_up_to_the_jdl_limit_then_fail(grid: Grid, tmp_path: Path) -> None:
    _, (default, strict) = campaign(grid, tmp_path, 2, taken=True)
    _, (none,) = campaign(grid, tmp_path, 1, taken=True, walltime_resubmit=0)
    for _ in range(3):
        end_job(grid, default, JobState.TIMEOUT)
        analyse(grid)
        assert task(grid, default)["state"] == TaskState.PENDING
        assert task(grid, default)["priority"] == bag.PRIORITY_TAIL
    end_job(grid, default, JobState.TIMEOUT)
    end_job(grid, none, JobState.TIMEOUT)
    analyse(grid)
    assert task(grid, default)["state"] == task(grid, none)["state"] == TaskState.FAILED
    assert task(grid, default)["walltime_kills"] == 4 and task(grid, strict)["state"] == TaskState.WAITING
    assert [c for c in codes(grid) if c[0] == "WALLTIME"] == [("WALLTIME", "open", 1), ("WALLTIME", "open", 1)]


def test_exit_66_goes_to_the_head_67_to_the_tail_and_endless_resubmission_fails(grid: Grid, tmp_path: Path) -> None:
    _, (head, tail, lost) = campaign(grid, tmp_path, 3, taken=True)
    end_job(grid, head, JobState.RESUBMIT, 66)
    end_job(grid, tail, JobState.RESUBMIT, 67)
    analyse(grid)
    assert (task(grid, head)["priority"], task(grid, tail)["priority"]) == (bag.PRIORITY_HEAD, bag.PRIORITY_TAIL)
    for _ in range(grid.config.settings.max_resubmit):
        end_job(grid, lost, JobState.LOST)
        analyse(grid)
        assert task(grid, lost)["state"] == TaskState.PENDING
    end_job(grid, lost, JobState.LOST)
    analyse(grid)
    assert task(grid, lost)["state"] == TaskState.FAILED
    assert ("TOO_MANY_RESUBMIT", "open", 1) in codes(grid) and ("LOST_JOB", "closed", 4) in codes(grid)


# --- aggregation, blacklist of a campaign on a cluster, fixing -----------------------------

def test_identical_failures_are_one_event_and_fix_resubmit_puts_them_back(grid: Grid, tmp_path: Path) -> None:
    campaign_id, task_ids = campaign(grid, tmp_path, 300, taken=True)
    jobs = [end_job(grid, t, JobState.FAILED, 1) for t in task_ids]
    analyse(grid)
    events = api.list_events(grid, user=USER, campaign_id=campaign_id)
    exit_errors = [e for e in events if e["code"] == "EXIT_ERROR"]
    assert len(exit_errors) == 1 and exit_errors[0]["count"] == 300
    assert [x["job_id"] for x in exit_errors[0]["examples"]] == jobs[:5]
    blacklist = [e for e in events if e["code"] == "BLACKLISTED"]
    assert len(blacklist) == 1 and blacklist[0]["class"] == "campaign"  # 300 errors, no success: rate 1.0
    assert grid.db.execute("SELECT blacklisted_at IS NOT NULL FROM campaign_cluster_health").fetchone() == (1,)

    with pytest.raises(InputError):
        api.fix_events(grid, user=USER)  # which events?
    result = api.fix_events(grid, user=USER, event_id=exit_errors[0]["id"], resubmit=True)
    assert result == {"closed": 1, "resubmitted": 300}
    assert grid.db.execute("SELECT state, count(*) FROM tasks GROUP BY state").fetchall() == [("pending", 300)]
    with pytest.raises(Refused):  # already closed: nothing to do is refused
        api.fix_events(grid, user=USER, event_id=exit_errors[0]["id"])
    api.fix_events(grid, user=USER, event_id=blacklist[0]["id"])  # the user says the cluster is fine again
    assert grid.db.execute("SELECT blacklisted_at, exit_errors FROM campaign_cluster_health").fetchone() == (None, 0)


def test_a_campaign_blacklist_is_lifted_after_autofix_delay_when_the_cluster_answers(grid: Grid, tmp_path: Path) -> None:
    _, task_ids = campaign(grid, tmp_path, 20, taken=True)
    for t in task_ids[:10]:
        end_job(grid, t, JobState.FAILED, 2)
    analyse(grid)
    assert grid.db.execute("SELECT strikes FROM campaign_cluster_health WHERE blacklisted_at IS NOT NULL").fetchone() == (1,)
    analyse(grid)  # not due yet
    assert grid.db.execute("SELECT count(*) FROM campaign_cluster_health WHERE blacklisted_at IS NULL").fetchone() == (0,)
    grid.db.execute("UPDATE campaign_cluster_health SET checked_at = checked_at - 31")
    analyse(grid)
    assert grid.db.execute("SELECT blacklisted_at FROM campaign_cluster_health").fetchone() == (None,)
    assert [(c, s) for c, s, _ in codes(grid) if c == "BLACKLISTED"] == [("BLACKLISTED", "closed")]


def test_a_campaign_whose_tasks_failed_ends_failed_even_with_open_events(grid: Grid, tmp_path: Path) -> None:
    campaign_id, (ok, bad) = campaign(grid, tmp_path, 2, taken=True)
    grid.db.execute("UPDATE tasks SET state = 'terminated' WHERE id = ?", [ok])
    end_job(grid, bad, JobState.FAILED, 1)
    run_cycle(grid)
    assert api.campaign_summary(grid, campaign_id, user=USER)["state"] == "failed"
    assert api.campaign_summary(grid, campaign_id, user=USER)["open_events"] == 1
    assert ("CAMPAIGN_FAILED", "closed", 1) in codes(grid)


def test_jobs_stuck_submitting_are_reported_once_and_the_report_closes_when_they_are_sent(grid: Grid,
                                                                                        tmp_path: Path) -> None:
    _, task_ids = campaign(grid, tmp_path, 3, taken=True)
    stuck = [end_job(grid, t, JobState.SUBMITTING) for t in task_ids]
    grid.db.execute("UPDATE jobs SET created_at = created_at - 601")
    analyse(grid)
    analyse(grid)  # seen again: not counted again
    assert codes(grid) == [("STUCK_LAUNCHING", "open", 3)]
    grid.db.execute("UPDATE jobs SET state = 'waiting', remote_id = 'r' WHERE id IN (?, ?)", stuck[:2])
    analyse(grid)
    assert codes(grid) == [("STUCK_LAUNCHING", "open", 3)]
    grid.db.execute("UPDATE jobs SET state = 'waiting' WHERE id = ?", [stuck[2]])
    analyse(grid)
    assert codes(grid) == [("STUCK_LAUNCHING", "closed", 3)]


# --- a whole cluster: blacklisted after K failing cycles, healed by autofix -----------------

class FakeOAR(BaseHTTPRequestHandler):
    """A loopback OAR REST API whose health the test switches; it remembers the auth header."""

    healthy = False
    auth: list[str] = []

    def do_GET(self) -> None:  # noqa: N802
        FakeOAR.auth.append(self.headers.get("Authorization", ""))
        if not FakeOAR.healthy:
            self.send_response(500)
            self.end_headers()
            return
        path = self.path.split("?")[0]
        body = {"/resources/full.json": {"items": [{"id": 1, "state": "Alive"}]},
                "/jobs.json": {"items": [], "total": 0}}.get(path, {"items": []})
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def fake_oar() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOAR)
    FakeOAR.healthy, FakeOAR.auth = False, []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_failing_cluster_is_blacklisted_after_k_cycles_the_others_go_on_and_autofix_lifts_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_oar: str) -> None:
    grid = make_grid(tmp_path, monkeypatch, f'[cigri]\nautofix_delay = 0.5\n[clusters.broken]\nbackend = "oar"\n'
                                            f'transport = "rest"\nuser = "cigri"\nbase_url = "{fake_oar}"\ntimeout = 2.0\n')
    try:
        document = {"name": "c", "exec_file": "/bin/true", "nb_jobs": 3, "exec_directory": str(tmp_path),
                    "clusters": {"local": {}}}
        campaign_id, _ = api.submit(grid, json.dumps(document), base_dir=tmp_path, user=USER)
        broken = grid.cluster_ids()["broken"]
        for cycle in range(3):
            assert not grid.db.execute("SELECT blacklisted FROM clusters WHERE id = ?", [broken]).fetchone()[0]
            run_cycle(grid)
        assert grid.db.execute("SELECT blacklisted, failures FROM clusters WHERE id = ?", [broken]).fetchone() == (1, 3)
        global_events = api.list_events(grid, user=USER, global_only=True)
        assert [(e["code"], e["count"]) for e in global_events] == [("CLUSTER_BAD_ANSWER", 3), ("BLACKLISTED", 1)]
        calls = len(FakeOAR.auth)
        run_cycle(grid)  # blacklisted and not due for a re-check: not even asked
        assert len(FakeOAR.auth) == calls
        for _ in range(50):  # the local cluster's campaign goes on meanwhile
            if api.campaign_summary(grid, campaign_id, user=USER)["state"] == "terminated":
                break
            run_cycle(grid)
        assert api.campaign_summary(grid, campaign_id, user=USER)["state"] == "terminated"

        FakeOAR.healthy = True
        grid.db.execute("UPDATE clusters SET checked_at = checked_at - 1")
        run_cycle(grid)
        assert grid.db.execute("SELECT blacklisted, failures FROM clusters WHERE id = ?", [broken]).fetchone() == (0, 0)
        assert api.list_events(grid, user=USER, global_only=True) == []  # problem and blacklist both closed
        assert [c for c in api.list_clusters(grid) if c["name"] == "broken"][0]["blacklisted"] is False
    finally:
        grid.close()


def test_an_admins_blacklist_is_never_lifted_by_autofix(grid: Grid) -> None:
    api.set_blacklist(grid, "local", "maintenance", user=USER)
    grid.db.execute("UPDATE clusters SET checked_at = 0")
    run_cycle(grid)
    assert grid.db.execute("SELECT blacklisted, blacklist_reason FROM clusters").fetchone() == (1, "maintenance")
    api.set_blacklist(grid, "local", None, user=USER)
    assert grid.db.execute("SELECT blacklisted FROM clusters").fetchone() == (0,)


# --- gridevents, the real command --------------------------------------------------------

@pytest.mark.slow
def test_gridevents_shows_aggregated_failures_with_their_stderr_and_fixes_them(cigri: Cigri) -> None:
    with cigri.config.open("a") as conf:  # every task fails: keep the cluster for the campaign anyway
        conf.write("[cigri]\nfailure_rate_min = 1000\n")
    program = cigri.script("fail.sh", 'echo "error: disk $2" >&2\necho "while writing $1" >&2\nexit 1\n')
    params = [f"t{i} {'full' if i % 3 else 'gone'}" for i in range(12)]
    campaign_id = cigri.submit(cigri.jdl("failing", exec_file=str(program), params=params))
    summary = cigri.drain(campaign_id)
    assert summary["state"] == "failed" and summary["tasks"]["failed"] == 12

    events = [e for e in cigri.events(campaign_id) if e["code"] == "EXIT_ERROR"]
    assert sorted(e["count"] for e in events) == [4, 8]  # one per distinct first stderr line
    full = next(e for e in events if e["count"] == 8)
    assert "error: disk full" in full["stderr_tail"] and len(full["examples"]) == 5
    text = cigri.run("gridevents", "-e", str(full["id"])).stdout
    assert "count: 8" in text and "error: disk full" in text

    assert cigri.run("gridevents", "--resubmit", expect=2).stderr.strip().endswith("--resubmit needs --fix")
    out = cigri.json("gridevents", "-e", str(full["id"]), "--fix", "--resubmit")
    assert out == {"closed": 1, "resubmitted": 8}
    assert cigri.stat(campaign_id)["state"] == "in_treatment"
    assert cigri.run("gridevents", "-e", str(full["id"]), "--fix", expect=1).stderr.count("\n") == 1
    assert [e["state"] for e in cigri.json("gridevents", "-c", str(campaign_id), "-a")
            if e["id"] == full["id"]] == ["closed"]


# --- grouping by the first stderr line without its ids --------------------------------------

@pytest.mark.parametrize(("lines", "grouped"), [
    (["cigri: cannot start job 534: [Errno 2] No such file or directory: '/x/prog'",  # local
      "cigri: cannot start job 7: [Errno 2] No such file or directory: '/x/prog'"], True),
    (["/var/spool/slurmd/job00411/slurm_script: 16: exec: /x/prog: not found",  # Slurm (dash)
      "/var/spool/slurmd/job00412/slurm_script: 30: exec: /x/prog: not found"], True),
    (["/var/spool/slurmd/job411/slurm_script: line 16: /x/prog: No such file or directory",  # bash
      "/var/spool/slurmd/job9/slurm_script: line 3: /x/prog: No such file or directory"], True),
    (["cigri.12.sh: 7: exec: /x/prog: not found", "cigri.13.sh: 21: exec: /x/prog: not found"], True),  # OAR
    (["cigri: no job for array task 3", "cigri: no job for array task 14"], True),
    (["slurmstepd: error: *** JOB 534 ON node1 CANCELLED ***", "slurmstepd: error: *** JOB 9 ON node1 CANCELLED ***"],
     True),
    (["Task #3: bad input", "task #4: bad input"], False),  # case is kept: only the numbers go
    (["error 1", "error 2"], False),  # the numbers naming the kind of error stay
    (["[Errno 2] No such file or directory", "[Errno 13] Permission denied"], False),
    (["killed by signal 9", "killed by signal 11"], False),
    (["exit code: 1", "exit code: 2"], False),
    (["HTTP error 404", "HTTP error 503"], False),
    (["disk 95% full", "disk 96% full"], True),  # the program's own numbers go too (they stayed)
    (["cigri: cannot start job 5: [Errno 2] No such file", "cigri: cannot start job 5: [Errno 13] Permission denied"],
     False),
    (["error: input 9 is corrupt (checksum mismatch)", "error: input 18 is corrupt (checksum mismatch)"], True),
    (["error: input 9 is corrupt (checksum mismatch)", "error: input 9 is missing"], False),
    (["cannot open /data/run-7/in_9.dat: No such file", "cannot open ./in_18.dat: No such file",
      "cannot open in/x.dat: No such file"], True),
    (["cannot open /data/in_9.dat: No such file", "cannot open /data/in_9.dat: Permission denied"], False),
    (["checksum 3f2a9c1b, expected 0badc0de", "checksum 77aa01ff, expected deadbeef42"], True),
    (["segfault at 0x7ffd12ab in libfoo.so.6", "segfault at 0x0 in libfoo.so.7"], True),
    (["request 550e8400-e29b-41d4-a716-446655440000 refused", "request 123e4567-e89b-12d3-a456-426614174000 refused"],
     True),
    (["node12: out of memory (used 31.5 GB)", "node3: out of memory (used 64 GB)"], True),
    (["Traceback (most recent call last):\n  File \"run.py\", line 3\nValueError: bad input t0",  # Python: its last line
      "Traceback (most recent call last):\n  File \"run.py\", line 9\nValueError: bad input t17"], True),
    (["Traceback (most recent call last):\n  File \"run.py\", line 3\nValueError: bad input t0",
      "Traceback (most recent call last):\n  File \"run.py\", line 3\nKeyError: 't0'"], False),
    (['  File "/x/run.py", line 30, in main\n    go()\nMemoryError', 'Traceback (most recent call last):\nMemoryError'],
     True),  # a tail that starts inside the traceback
])
def test_the_signature_masks_numbers_paths_and_hex_and_keeps_the_kind_of_error(lines: list[str],
                                                                                grouped: bool) -> None:
    signatures = {signature(line if "\n" in line else f"{line}\nsecond line {i}\n") for i, line in enumerate(lines)}
    assert (len(signatures) == 1) == grouped, signatures


def test_the_signature_reads_as_the_failure_with_its_inputs_masked() -> None:
    assert signature("error: input 9 is corrupt (checksum mismatch)\n") == \
        "error: input <n> is corrupt (checksum mismatch)"
    assert signature("/var/spool/slurmd/job00411/slurm_script: 16: exec: /x/prog: not found") == \
        "<path>: <n>: exec: <path>: not found"
    assert signature("bad block 0x7ffd12ab (sha 9f86d081884c7d65) at node12, exit status 3") == \
        "bad block <hex> (sha <hex>) at node<n>, exit status 3"
    assert signature("read / write 1.5e-3 s") == "read / write <n> s"  # a slash alone is no path
    assert signature("") == signature(None) == signature("\n  \n") == ""


def test_three_tasks_with_a_missing_exec_file_are_one_event(cigri: Cigri) -> None:
    """cigri's own message holds the job's id (``cigri: cannot start job 534: …``): three
    failures opened three events where one is promised."""
    campaign_id = cigri.submit(cigri.jdl("missing", exec_file="/nonexistent/prog", params=["a", "b", "c"]))
    assert cigri.drain(campaign_id)["tasks"]["failed"] == 3
    [failed] = [e for e in cigri.events(campaign_id) if e["code"] == "EXIT_ERROR"]
    assert failed["count"] == 3 and "cannot start job" in failed["stderr_tail"]


# --- many tasks failing the same way on their own inputs: one group, on every kind of cluster --

CORRUPT = 'if [ "$3" = gone ]; then echo "error: input $2 is missing" >&2\n' \
          'else echo "error: input $2 is corrupt (checksum mismatch)" >&2; fi\necho "read $2" \nexit 1\n'


def _real(name: str) -> Any:
    return pytest.param(name, marks=REAL_CLUSTERS)


@pytest.fixture(params=["local", _real("slurm-a-ssh"), _real("oar-rest"), _real("gridengine-ssh")])
def failing_site(request: pytest.FixtureRequest) -> Iterator[tuple[Site, str, Path]]:
    """A site (a real ``cigri server``) whose campaigns run on the cluster the parameter names
    (on a real one as its account), keeping the cluster however many tasks fail; and a program
    there that fails on its input, saying which."""
    cluster = request.param
    lines = []
    if cluster != "local":
        with (clusters_dir() / "single.toml").open("rb") as handle:
            options = tomllib.load(handle)["clusters"][cluster]
        lines += [f"[clusters.{cluster}]", *(f"{key} = {json.dumps(value)}" for key, value in options.items())]
        system = cluster.split("-")[0]
        wait_for(lambda: busy_jobs(system) == 0, 120, f"{system}'s last jobs to end", step=1)
    site = Site("\n".join(lines) + "\n")
    site.config.write_text(site.config.read_text().replace("[cigri]\n", "[cigri]\nfailure_rate_min = 1000\n"))
    if cluster == "local":
        exec_dir = site.exec / "corrupt"
        exec_dir.mkdir(mode=0o777)
        exec_dir.chmod(0o1777)
    else:
        exec_dir = marker_exec_dir("events")
    (exec_dir / "task.sh").write_text("#!/bin/sh\n" + CORRUPT)
    (exec_dir / "task.sh").chmod(0o755)
    try:
        site.start()
        yield site, cluster, exec_dir
    finally:
        site.close()


@pytest.mark.slow
def test_tasks_failing_on_their_own_inputs_are_one_group_with_two_examples(
        failing_site: tuple[Site, str, Path]) -> None:
    """Issue 36: 16 tasks failing with ``error: input 9 is corrupt (checksum mismatch)``, ``…
    input 18 …`` gave 16 events. Through the real server and commands: one event of 6 (and one
    of 2 for another error), its line masked, its examples each with its task and own line,
    each job's stderr readable from the dashboard by its owner only; fixing the group still
    resubmits every task it covers."""
    site, cluster, exec_dir = failing_site
    owner, other = site.users
    params = [f"t{i} {9 * (i + 1)}{' gone' if i % 4 == 3 else ''}" for i in range(8)]
    fields = {} if cluster == "local" else {"walltime": "00:05:00", "type": "normal"}
    jdl = site.jdl(owner, "corrupt", exec_file=str(exec_dir / "task.sh"), exec_directory=str(exec_dir),
                   params=params, clusters={cluster: {}}, **fields)
    campaign_id = site.submit(owner, jdl)
    assert site.drain(owner, campaign_id, timeout=300)["tasks"]["failed"] == 8

    events = [e for e in site.json(owner, "gridevents", "-c", str(campaign_id)) if e["code"] == "EXIT_ERROR"]
    assert sorted((e["count"], e["summary"]) for e in events) == [
        (2, "error: input <n> is missing"), (6, "error: input <n> is corrupt (checksum mismatch)")]
    corrupt = next(e for e in events if e["count"] == 6)
    number = {line.split()[0]: line.split()[1] for line in params}
    assert len(corrupt["examples"]) == 5
    for example in corrupt["examples"]:  # each its own task and its own line
        assert example["line"] == f"error: input {number[example['task']]} is corrupt (checksum mismatch)"
    first, second = corrupt["examples"][:2]

    listing = site.run(owner, "gridevents", "-c", str(campaign_id)).stdout
    [row] = [line for line in listing.splitlines() if line.startswith(f"{corrupt['id']} ")]
    assert re.search(rf" 6 +{campaign_id} +{cluster} +error: input <n> is corrupt \(checksum mismatch\) +"
                     rf"{first['task']}, {second['task']}, …$", row), row
    detail = site.run(owner, "gridevents", "-e", str(corrupt["id"])).stdout
    assert "grouped as: error: input <n> is corrupt (checksum mismatch)" in detail
    assert f"  task {first['task']} (job {first['job_id']}): {first['line']}" in detail

    [(status, page, _)] = site.http(owner, [("GET", f"/jobs/{first['job_id']}/stderr", {})], root=True)
    assert status == 200 and first["line"] in page  # read on the cluster as the job's owner
    [(status, page, _)] = site.http(owner, [("GET", f"/jobs/{first['job_id']}/stdout", {})], root=True)
    assert status == 200 and f"read {number[first['task']]}" in page
    [(status, page, _)] = site.http(other, [("GET", f"/jobs/{first['job_id']}/stderr", {})], root=True)
    assert status == 404 and first["line"] not in page

    fixed = site.json(owner, "gridevents", "-e", str(corrupt["id"]), "--fix", "--resubmit")
    assert fixed == {"closed": 1, "resubmitted": 6}  # every job the group covers, not its five examples
