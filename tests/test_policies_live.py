"""The seeds' remaining policies end to end: real cycles on the local pool, on the real Slurm
clusters, on OAR and on Grid Engine (``tests/clusters/up.sh``), each policy on each of them.

Each target offers a "big" cluster of 8 cores and a "small" one of 4 (Slurm: slurm-a and
slurm-b, the latter with 4 of its 8 CPUs offered through ``max_jobs``; OAR and Grid Engine: their
cluster and a local pool of 4, each being one cluster). Tasks leave ``marker.TASK.HOST.PID.START_NS`` in a
directory every cluster sees, then sleep; the tests watch cigri's database and the markers,
and cancel what is left, so the clusters are left as they were found. Jobs are normal ones
(other tests' jobs on the shared clusters would kill best-effort ones) except where cigri's own
preemption is what is tested.
"""

from __future__ import annotations

import json
import time
import tomllib
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import REAL_CLUSTERS, busy_jobs, clusters_dir, marker_exec_dir, runs_per_task, wait_for
from test_shares import make_grid  # noqa: F401 (a fixture)

from cigri import api
from cigri import config as configuration
from cigri.cycle import run_cycle
from cigri.errors import InputError
from cigri.grid import Grid

pytestmark = [pytest.mark.slow, REAL_CLUSTERS]

TARGETS = {  # target: (big cluster of 8 cores, small cluster of 4)
    "local": ("big", "small"),
    "slurm": ("slurm-a-ssh", "slurm-b-ssh"),
    "oar": ("oar-ssh", "small"),
    "gridengine": ("gridengine-ssh", "small"),
}
LOCAL = {"big": {"backend": "local", "slots": 8}, "small": {"backend": "local", "slots": 4}}
# Tasks that outlast a test's wait: a split between users is watched while nothing ends (60 s
# tasks ended before a loaded OAR had started the whole first wave, and the second wave was the last).
LASTING = 240
BRAKES_OFF = ('[metascheduler]\npreempt_fraction = 1.0\npreempt_deadzone = 0\npreempt_horizon = 0\n'
              'preempt_threshold = 1.0\nnight = ""\nweekend = false\n')


def _cluster_tables(target: str) -> dict[str, dict[str, Any]]:
    """The target's two clusters as configuration tables: a local pool's, or the test clusters'."""
    big, small = TARGETS[target]
    tables = {}
    remote: dict[str, Any] = {}
    if target != "local":  # one account runs every user's jobs: the policies, not identity, are tested here
        with (clusters_dir() / "single.toml").open("rb") as handle:
            remote = tomllib.load(handle)["clusters"]
    for name in (big, small):
        if name in LOCAL:  # the pool runs a job as its owner: make_grid maps the test's users to the acting one
            tables[name] = dict(LOCAL[name])
        else:  # the keys this cigri knows: the clusters' file may be written for a newer one
            known = {"backend", *configuration.CLUSTER_KEYS[remote[name]["backend"]]}
            tables[name] = {key: value for key, value in remote[name].items() if key in known}
    if target == "slurm":
        tables[small]["max_jobs"] = 4  # slurm-b has 8 CPUs: cigri takes 4 of them, the small cluster
    for table in tables.values():
        table.setdefault("max_waiting", 0)
    return tables


@pytest.fixture(params=list(TARGETS))
def target(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def live(make_grid: Callable[[str], Grid], target: str) -> Iterator[Callable[[str], Grid]]:  # noqa: F811
    """Open an in-process grid on the target's clusters with more configuration text; its
    campaigns are cancelled and their jobs killed at the end."""
    grids: list[Grid] = []

    def make(text: str) -> Grid:
        lines = ["[runner]", "tap_initial = 50"]
        for name, table in _cluster_tables(target).items():
            lines += [f"[clusters.{name}]", *(f"{key} = {json.dumps(value)}" for key, value in table.items())]
        grids.append(make_grid("\n".join(lines) + "\n" + text))
        return grids[-1]

    yield make
    for grid in grids:
        for (campaign_id,) in grid.db.execute("SELECT id FROM campaigns WHERE state IN ('in_treatment', 'paused')"):
            api.cancel(grid, campaign_id, user="root")
        run_cycle(grid)


def submit(grid: Grid, exec_dir: Path, user: str, tasks: int, clusters: list[str], seconds: int = 60,
           status: int = 0, **fields: Any) -> int:
    """A campaign of ``tasks`` tasks of ``seconds`` each, exiting with ``status``."""
    (exec_dir / "run.sh").write_text(  # a successful task ends as its sleep: a killed job leaves no sleep behind
        '#!/bin/sh\n"$(dirname "$0")/task.sh" "$1"\n[ "$3" = 0 ] && exec sleep "$2"\nsleep "$2"\nexit "$3"\n')
    (exec_dir / "run.sh").chmod(0o755)
    document = {"name": f"{user}-policies", "exec_file": str(exec_dir / "run.sh"), "exec_directory": str(exec_dir),
                "walltime": "00:05:00", "params": [f"{user}{i:02d} {seconds} {status}" for i in range(tasks)],
                "clusters": {name: {} for name in clusters}, **fields}
    return api.submit(grid, json.dumps(document), base_dir=exec_dir, user=user)[0]


def held(grid: Grid, campaign_id: int, cluster: str | None = None, running: bool = False) -> int:
    """The campaign's task jobs not marked for a kill (only the running ones with ``running``)."""
    states = ("running",) if running else ("submitting", "waiting", "running")
    return grid.db.execute(
        "SELECT count(*) FROM jobs j JOIN clusters c ON c.id = j.cluster_id WHERE j.campaign_id = ? "
        f"AND j.kind = 'task' AND j.state IN ({','.join('?' * len(states))}) AND j.kill_reason IS NULL "
        "AND c.name = coalesce(?, c.name)",
        [campaign_id, *states, cluster]).fetchone()[0]


def cycles_until(grid: Grid, done: Callable[[], bool], what: str, timeout: float = 120,
                 each: Callable[[], None] = lambda: None, seen: Callable[[], object] = lambda: "") -> None:
    """Run cycles until ``done``; a timeout says what ``seen`` last observed."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what} {seen()}".rstrip()
        run_cycle(grid)
        each()
        time.sleep(0.3)


def running_split(grid: Grid, campaigns: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(held(grid, campaign, running=True) for campaign in campaigns)


# --- Gangs -------------------------------------------------------------------------------

def test_a_gang_of_4_starts_as_one_job_of_4_tasks_all_or_none(live: Callable[[str], Grid], target: str) -> None:
    """Armada: "all jobs in the gang are scheduled onto the same cluster at the same time or not
    at all". 8 tasks in gangs of 4 on the 8-core cluster: two remote jobs of 4 tasks each on
    Slurm (one array task, NumTasks=4) and OAR, 4 pool slots at once on the local cluster; the
    members of a gang start within a second of each other, and every task runs once."""
    grid = live("")
    big = TARGETS[target][0]
    exec_dir = marker_exec_dir("gang")
    campaign = submit(grid, exec_dir, "ann", 8, [big], seconds=4, gang=4, type="normal")
    cycles_until(grid, lambda: grid.db.execute("SELECT state FROM campaigns WHERE id = ?", [campaign]).fetchone()[0]
                 == "terminated", "the gang campaign to end", timeout=240)
    assert runs_per_task(exec_dir) == {f"ann{i:02d}": 1 for i in range(8)}
    rows = grid.db.execute("SELECT run_group, remote_id, t.name FROM jobs j JOIN tasks t ON t.id = j.task_id "
                           "WHERE j.campaign_id = ? AND j.kind = 'task'", [campaign]).fetchall()
    gangs: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for group, remote_id, task in rows:
        gangs[group].append((remote_id, task))
    assert sorted(len(members) for members in gangs.values()) == [4, 4]
    starts = {path.name.split(".")[1]: int(path.name.split(".")[-1]) / 1e9 for path in exec_dir.glob("marker.*")}
    for members in gangs.values():
        begun = [starts[task] for _, task in members]
        assert max(begun) - min(begun) < 1.5, members  # together, never one after another
        if target != "local":
            assert len({remote_id.split("+")[0] for remote_id, _ in members}) == 1  # one remote job
    if target == "slurm":
        remote_job = next(iter(gangs.values()))[0][0].split("+")[0]
        backend = grid.backend(grid.cluster_ids()[big])
        record = backend.via.ssh.run(["scontrol", "-o", "show", "job", remote_job]).stdout  # type: ignore[attr-defined]
        if not record.strip():  # already purged from slurmctld's memory: ask the accounting
            record = backend.via.ssh.run(["sacct", "-n", "-X", "-P", "-j", remote_job, "-o", "NTasks"]).stdout  # type: ignore[attr-defined]
            assert record.split() == ["4"], record
        else:
            assert "NumTasks=4 " in record, record


def test_a_gang_that_fits_on_no_cluster_is_refused_at_submission(live: Callable[[str], Grid], target: str) -> None:
    """Once cigri has seen the cluster (one cycle), a gang of 9 one-core tasks on 8 cores is
    refused, one line naming the key; 8 fits."""
    grid = live("")
    big = TARGETS[target][0]
    run_cycle(grid)  # the updator records each cluster's cores
    exec_dir = marker_exec_dir("toobig")
    with pytest.raises(InputError) as error:
        submit(grid, exec_dir, "ann", 9, [big], gang=9)
    assert str(error.value) == \
        f"JDL: $.gang: a gang of 9 fits on none of the campaign's clusters ({big}: 8 cores for 9)"
    assert grid.db.execute("SELECT count(*) FROM campaigns").fetchone()[0] == 0
    submit(grid, exec_dir, "ann", 8, [big], gang=8)


# --- Initialization cap and expand-by-doubling -----------------------------------------------

def test_failing_tasks_are_held_at_the_initialization_cap_and_a_success_doubles_it(
        live: Callable[[str], Grid], target: str) -> None:
    """DUCC's initialization cap of 2: a campaign whose tasks all fail (after 3 s) never holds
    more than 2 jobs on the 8-core cluster; a healthy one (tasks of 20 s) holds 2 until its first
    job ends successfully, then twice what it holds, each cycle: 4, then 8."""
    grid = live("[metascheduler]\ninit_cap = 2\n")
    big = TARGETS[target][0]
    exec_dir = marker_exec_dir("initcap")
    failing = submit(grid, exec_dir, "ann", 20, [big], seconds=3, status=1, type="normal")
    most: list[int] = []
    cycles_until(grid, lambda: len(list(exec_dir.glob("marker.ann*"))) >= 4, "4 failing runs",
                 each=lambda: most.append(held(grid, failing)))
    assert max(most) == 2, most
    api.cancel(grid, failing, user="root")
    healthy = submit(grid, exec_dir, "bob", 40, [big], seconds=20, type="normal")
    seen: list[int] = []
    cycles_until(grid, lambda: held(grid, healthy) >= 8, "the healthy campaign to expand to the cluster",
                 each=lambda: seen.append(held(grid, healthy)), timeout=180)
    assert max(seen[:-1]) < 8 and 2 in seen, seen  # held at 2 while none had succeeded
    ended = grid.db.execute("SELECT min(finished_at) FROM jobs WHERE campaign_id = ? AND state = 'terminated'",
                            [healthy]).fetchone()[0]
    assert ended is not None  # the expansion came after a success


# --- User weights and YARN's minimum user-limit percent -----------------------------------

def test_users_of_weights_3_and_1_split_the_cluster_6_to_2(live: Callable[[str], Grid], target: str) -> None:
    """Armada's queue weights, inside cigri's class: ann (weight 3) and bob (1) on 8 cores."""
    grid = live("[users.ann]\nweight = 3\n" + BRAKES_OFF)
    big = TARGETS[target][0]
    exec_dir = marker_exec_dir("weights")
    ann, bob = (submit(grid, exec_dir, user, 12, [big], seconds=LASTING, type="normal") for user in ("ann", "bob"))
    cycles_until(grid, lambda: running_split(grid, (ann, bob)) == (6, 2), "a 6:2 split", timeout=180,
                 seen=lambda: f"(running: {running_split(grid, (ann, bob))})")  # OAR starts a job at its next pass
    users = {u["name"]: u for u in api.current_shares(grid, user="root")["users"]}
    assert users["ann"]["weight"] == 3.0 and users["bob"]["weight"] == 1.0


def test_a_minimum_user_limit_of_half_serves_the_two_oldest_users(live: Callable[[str], Grid], target: str) -> None:
    """YARN's minimum user-limit percent of 50 among three users on 8 cores: max(8/3, 4) = 4 to
    ann and bob, whose campaigns are older; cy waits, as the reason says."""
    grid = live("[classes.default]\nmin_user_limit_percent = 50\n" + BRAKES_OFF)
    big = TARGETS[target][0]
    exec_dir = marker_exec_dir("userlimit")
    ann, bob, cy = (submit(grid, exec_dir, user, 12, [big], seconds=LASTING, type="normal")
                    for user in ("ann", "bob", "cy"))
    cycles_until(grid, lambda: running_split(grid, (ann, bob, cy)) == (4, 4, 0), "a 4:4:0 split", timeout=180,
                 seen=lambda: f"(running: {running_split(grid, (ann, bob, cy))})")
    waiting = "waiting for older users (min_user_limit_percent)"
    explained: list[dict[str, Any]] = []  # asked again while a cluster's answer to the live view is missing

    def cy_waits() -> bool:
        explained.append(api.current_shares(grid, user="root"))
        return next(c for c in explained[-1]["campaigns"] if c["id"] == cy)["reason"].endswith(waiting)

    wait_for(cy_waits, 10, f"cy's reason to say {waiting!r}", step=1,
             seen=lambda: f"(saw {explained[0]} ... {explained[-1]}; jobs "
                          f"{grid.db.execute('SELECT campaign_id, state, count(*) FROM jobs GROUP BY 1, 2').fetchall()})")


# --- Placement ---------------------------------------------------------------------------

@pytest.mark.parametrize(("placement", "where"), [("spread", 0), ("pack", 1)])
def test_pack_fills_the_smallest_cluster_that_fits_spread_the_roomiest(
        live: Callable[[str], Grid], target: str, placement: str, where: int) -> None:
    """Armada's smallest fit: 3 tasks go to the 4-core cluster with ``pack``, to the 8-core one
    with ``spread`` (once the jobs an earlier test cancelled there have left: they hold its room
    a few seconds more)."""
    if target != "local":
        wait_for(lambda: busy_jobs(target) == 0, 120, f"{target}'s last jobs to end", step=1)
    grid = live(f'[metascheduler]\nplacement = "{placement}"\n')
    clusters = TARGETS[target]
    exec_dir = marker_exec_dir("placement")
    campaign = submit(grid, exec_dir, "ann", 3, list(clusters), type="normal")
    cycles_until(grid, lambda: held(grid, campaign, running=True) == 3, "the 3 tasks to run")
    assert held(grid, campaign, clusters[where]) == 3


# --- Pools ---------------------------------------------------------------------------------

def test_squatters_leave_the_subpool_when_its_residents_arrive(live: Callable[[str], Grid], target: str) -> None:
    """DUCC's nodepools: pool P holds the big cluster, its subpool Q the small one. Class A (pool
    P) fills P, then squats in Q; class B (Q's residents) arrives: A's squatting jobs are
    preempted and B runs in Q, while A keeps P."""
    big, small = TARGETS[target]
    grid = live(f'[pools.P]\nclusters = ["{big}"]\n[pools.Q]\nclusters = ["{small}"]\nparent = "P"\n'
                '[classes.A]\npool = "P"\ndefault = true\n[classes.B]\npool = "Q"\n' + BRAKES_OFF)
    exec_dir = marker_exec_dir("pools")
    ann = submit(grid, exec_dir, "ann", 20, [big, small], seconds=LASTING)
    cycles_until(grid, lambda: (held(grid, ann, big, True), held(grid, ann, small, True)) == (8, 4),
                 "A to fill P and squat in Q")
    reason = {c["id"]: c["reason"] for c in api.current_shares(grid, user="root")["campaigns"]}[ann]
    assert reason.endswith("squatting in pool Q: residents first"), reason
    bob = submit(grid, exec_dir, "bob", 8, [big, small], seconds=LASTING, **{"class": "B"})
    state = lambda: (held(grid, ann, big, True), held(grid, ann, small), held(grid, bob, small, True))
    cycles_until(grid, lambda: state() == (8, 0, 4), "B to take Q back from A's squatters",
                 seen=lambda: f"(A running in P, A held in Q, B running in Q: {state()})")
    preempted = grid.db.execute("SELECT count(*) FROM jobs j JOIN clusters c ON c.id = j.cluster_id WHERE "
                                "j.campaign_id = ? AND j.kill_reason = 'preempt'", [ann]).fetchall()[0][0]
    assert preempted == 4
    assert held(grid, bob, big) == 0  # residents of Q never go up to P

