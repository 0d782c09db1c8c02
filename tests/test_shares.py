"""Fair share wired in: configuration, JDL class and type, the scenario gathered from a real
database, ``cigri shares``, and real cycles on the local pool (weighted split, preemption)."""

from __future__ import annotations

import getpass
import json
import math
import os
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest
from harness import Cigri, wait_for

from cigri import api, config
from cigri.backends import Capacity
from cigri.config import MetaschedulerSettings
from cigri.cycle import run_cycle
from cigri.db import now
from cigri.errors import ConfigError, InputError
from cigri.grid import Grid, open_grid
from cigri.cycle_context import CycleContext
from cigri.metascheduler.fairshare import CampaignSpec, ClusterSpec, Policy, Scenario
from cigri.metascheduler.metascheduler import allocate, gather, schedule
from cigri.metascheduler.windows import is_night, job_type
from cigri.db import campaigns as stored_campaigns
from cigri.runner import batch_specs
from cigri.states import KillReason
from cigri.users import acting_user

CLASSES = """
[classes.gold]
weight = 3
users = ["alice"]
[classes.silver]
weight = 1
default = true
[users]
allotment = 16
[users.alice]
affinity = {b = 2}
"""


# The users of these tests are names, not Unix accounts: on the local clusters their jobs run as
# the account running the tests (each cluster's user map).
AS_ME = "logins = {%s}" % ", ".join(f'{name} = "{acting_user()}"' for name in ("alice", "bob", "carol", "dave", "ann", "cy"))


@pytest.fixture
def make_grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], Grid]]:
    """Open a grid on a real database with the given configuration text."""
    for name in [n for n in os.environ if n.startswith("CIGRI_")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr(config, "SYSTEM_FILE", tmp_path / "absent.toml")
    monkeypatch.setattr(config, "USER_FILE", tmp_path / "absent.toml")
    monkeypatch.setenv("CIGRI_HOME", str(tmp_path / "home"))
    grids: list[Grid] = []

    def make(text: str) -> Grid:
        path = tmp_path / "cigri.toml"
        path.write_text(text.replace('backend = "local"', f'backend = "local"\n{AS_ME}'))
        monkeypatch.setenv("CIGRI_CONFIG", str(path))
        grids.append(open_grid(config.load()))
        return grids[-1]

    yield make
    for grid in grids:
        grid.close()


def _submit(grid: Grid, tmp_path: Path, user: str, tasks: int, **fields: object) -> int:
    document = {"name": f"{user}-campaign", "exec_file": "/bin/sleep", "exec_directory": str(tmp_path),
                "params": [str(60 + i) for i in range(tasks)], "clusters": {"a": {}}, **fields}
    return api.submit(grid, json.dumps(document), base_dir=tmp_path, user=user)[0]


TWO_CLUSTERS = '[clusters.a]\nbackend = "local"\n[clusters.b]\nbackend = "local"\n'


# --- configuration ------------------------------------------------------------------------

def test_classes_users_and_windows_are_read(make_grid: Callable[[str], Grid]) -> None:
    cfg = make_grid(TWO_CLUSTERS + CLASSES + '[metascheduler]\npreempt_fraction = 0.2\nnight = "22:00-06:00"\n').config
    assert [(c.name, c.weight, c.policy, c.users, c.default) for c in cfg.classes] == [
        ("gold", 3.0, "fair_share", ("alice",), False), ("silver", 1.0, "fair_share", None, True)]
    assert cfg.default_class() == "silver"
    assert cfg.class_users() == {"gold": frozenset({"alice"}), "silver": None}
    assert cfg.users.of("alice").allotment == 16 and cfg.users.of("alice").affinity == {"b": 2.0}
    assert cfg.users.of("bob").allotment == 16 and cfg.users.of("bob").affinity == {}
    assert (cfg.metascheduler.preempt_fraction, cfg.metascheduler.night) == (0.2, "22:00-06:00")


@pytest.mark.parametrize(("horizon", "killed"), [(0, 4), (30, 4), (300, 0)])
def test_preempt_horizon_lets_jobs_end_by_themselves_before_any_kill(
        make_grid: Callable[[str], Grid], horizon: int, killed: int) -> None:
    cfg = make_grid(f"[metascheduler]\npreempt_horizon = {horizon}\n").config
    # 64 cores, A holds 40 and ends 60 jobs an hour, B waits: 8 of A's jobs must go; within
    # 300 s, 5 of them end by themselves, and the deadzone tolerates the other 3
    scenario = Scenario((ClusterSpec("c1", 64),), (CampaignSpec(1, "a", 0, running={"c1": 40}, throughput={"c1": 60.0}),
                                                    CampaignSpec(2, "b", 50)))
    assert sum(allocate(cfg, scenario).campaigns[0].preempt.values()) == killed


@pytest.mark.parametrize(("text", "key"), [
    ('[classes.x]\npolicy = "greedy"\ndefault = true\n', "classes.x.policy"),
    ("[classes.x]\nweight = 0\ndefault = true\n", "classes.x.weight"),
    ("[classes.x]\ndefault = true\n[classes.y]\ndefault = true\n", "classes.y.default"),
    ("[classes.x]\nweight = 2\n", "classes.x.default"),
    ('[classes.x]\nusers = "alice"\ndefault = true\n', "classes.x.users"),
    ("[classes.x]\ncolour = 1\ndefault = true\n", "classes.x.colour"),
    ("[users]\nallotment = -1\n", "users.allotment"),
    ('[users.bob]\naffinity = {a = "high"}\n', "users.bob.affinity"),
    ("[metascheduler]\npreempt_fraction = 1.5\n", "metascheduler.preempt_fraction"),
    ('[metascheduler]\nnight = "7pm"\n', "metascheduler.night"),
])
def test_bad_share_configuration_names_the_key(make_grid: Callable[[str], Grid], text: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        make_grid(TWO_CLUSTERS + text)


def test_night_window_wraps_midnight_and_covers_the_weekend() -> None:
    def at(day: int, hour: int) -> float:
        return datetime(2026, 11, day, hour, 30).timestamp()  # 2026-11-23 is a Monday

    settings = MetaschedulerSettings(night="19:00-07:00", weekend=True)
    assert [is_night(settings, at(23, h)) for h in (6, 7, 12, 18, 19, 23)] == [True, False, False, False, True, True]
    assert is_night(settings, at(28, 12)) and not is_night(MetaschedulerSettings(weekend=False), at(28, 12))
    assert not is_night(MetaschedulerSettings(night="", weekend=False), at(23, 23))
    assert [job_type(t, False) for t in ("best-effort", "normal", "semi-best-effort", "nightly")] == \
        ["best-effort", "normal", "best-effort", None]
    assert [job_type(t, True) for t in ("best-effort", "normal", "semi-best-effort", "nightly")] == \
        ["best-effort", "normal", "normal", "normal"]


def test_semi_best_effort_jobs_are_best_effort_by_day_and_normal_by_night(make_grid: Callable[[str], Grid],
                                                                           tmp_path: Path) -> None:
    grid = make_grid(TWO_CLUSTERS)
    campaign_id = _submit(grid, tmp_path, "alice", 1, type="semi-best-effort", clusters={"a": {}, "b": {"type": "normal"}})
    ids = grid.cluster_ids()
    settings = stored_campaigns.properties(grid.db.conn, [campaign_id])[campaign_id]
    job = {"id": 1, "campaign_id": campaign_id, "kind": "task", "batch": "1", "task": "60", "param": "60",
           "user": "alice", "run_group": None}
    assert [batch_specs([job], settings[ids[k]], "/home/alice", night=n)[0].best_effort for k in "ab" for n in (False, True)] == \
        [True, False, False, False]


def test_a_task_job_asks_the_jdl_memory_and_a_script_job_the_default(make_grid: Callable[[str], Grid],
                                                                      tmp_path: Path) -> None:
    grid = make_grid(TWO_CLUSTERS)
    campaign_id = _submit(grid, tmp_path, "alice", 1, memory="3G", prologue="true", clusters={"a": {}})
    settings = stored_campaigns.properties(grid.db.conn, [campaign_id])[campaign_id][grid.cluster_ids()["a"]]
    job = {"id": 1, "campaign_id": campaign_id, "kind": "task", "batch": "1", "task": "60", "param": "60",
           "user": "alice", "run_group": None}
    assert batch_specs([job], settings, "/home/alice")[0].memory_mb == 3072
    prologue = batch_specs([{**job, "kind": "prologue"}], settings, "/home/alice")[0]
    assert (prologue.memory_mb, prologue.directory) == (0, "/home/alice")


# --- JDL class ----------------------------------------------------------------------------

def test_class_and_priority_are_stored_default_class_applied(make_grid: Callable[[str], Grid], tmp_path: Path) -> None:
    grid = make_grid(TWO_CLUSTERS + CLASSES)
    gold = _submit(grid, tmp_path, "alice", 1, **{"class": "gold", "priority": 5})
    plain = _submit(grid, tmp_path, "bob", 1)
    rows = grid.db.execute("SELECT id, class, priority FROM campaigns ORDER BY id").fetchall()
    assert rows == [(gold, "gold", 5), (plain, "silver", 0)]


@pytest.mark.parametrize(("user", "klass", "message"), [
    ("bob", "gold", "JDL: $.class: user bob is not allowed in class 'gold'"),
    ("alice", "platinum", "JDL: $.class: unknown class 'platinum' (known: gold, silver)"),
])
def test_unknown_or_forbidden_class_is_one_line_and_writes_nothing(
        make_grid: Callable[[str], Grid], tmp_path: Path, user: str, klass: str, message: str) -> None:
    grid = make_grid(TWO_CLUSTERS + CLASSES)
    with pytest.raises(InputError) as error:
        _submit(grid, tmp_path, user, 3, **{"class": klass})
    assert str(error.value) == message
    assert grid.db.execute("SELECT count(*) FROM campaigns").fetchone()[0] == 0


def test_gridsub_refuses_a_forbidden_class_with_exit_2(cigri: Cigri) -> None:
    cigri.config.write_text(cigri.config.read_text() + CLASSES.replace("{b = 2}", "{local = 2}"))
    result = cigri.run("gridsub", "-f", str(cigri.jdl("gold", exec_file="/bin/true", nb_jobs=2, **{"class": "gold"})),
                       expect=2)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].endswith(f"$.class: user {getpass.getuser()} is not allowed in class 'gold'"), lines
    assert cigri.json("gridstat", "-a") == []


# --- the scenario gathered from the database ----------------------------------------------

def test_gather_reads_capacity_holdings_classes_users_and_limits(make_grid: Callable[[str], Grid],
                                                                  tmp_path: Path) -> None:
    grid = make_grid(TWO_CLUSTERS + CLASSES + '[metascheduler]\nnight = ""\nweekend = false\n')
    ids = grid.cluster_ids()
    alice = _submit(grid, tmp_path, "alice", 50, resources="core=2", max_jobs=7,
                    clusters={"a": {}, "b": {"test_mode": True}}, **{"class": "gold", "priority": 3})
    bob = _submit(grid, tmp_path, "bob", 4, clusters={"a": {"prologue": "true"}, "b": {}})
    nightly = _submit(grid, tmp_path, "carol", 4, type="nightly")
    jobs = [(alice, ids["a"], "running", None), (alice, ids["a"], "waiting", None),
            (alice, ids["a"], "running", KillReason.PREEMPT), (bob, ids["b"], "running", None)]
    grid.db.conn.executemany("INSERT INTO jobs(campaign_id, cluster_id, kind, state, kill_reason, created_at) "
                             "VALUES (?, ?, 'task', ?, ?, 0)", jobs)
    scenario = gather(grid, {ids["a"]: Capacity(8, 3), ids["b"]: Capacity(4, 1)}, now()).scenario
    # a offers the 2 cores of alice's running job (the one being killed excluded) plus its 3 free
    # slots, 2 of which her queued job takes at the cluster's next pass: not counted twice
    assert [(c.name, c.cores) for c in scenario.clusters] == [("a", 2 + 3), ("b", 1 + 1)]
    # on a full cluster the queued job's cores count (holdings and capacity count the same jobs)
    assert gather(grid, {ids["a"]: Capacity(8, 1)}, now()).scenario.clusters[0].cores == 2 + 2
    campaigns = {c.id: c for c in scenario.campaigns}
    assert nightly not in campaigns  # by day a nightly campaign neither runs nor holds anything
    a = campaigns[alice]
    assert (a.user, a.class_name, a.priority, a.cores_per_task, a.test_mode) == ("alice", "gold", 3, 2, True)
    assert (dict(a.running), a.clusters, dict(a.max_jobs_per_cluster)) == ({"a": 2}, ("a", "b"), {"a": 7, "b": 1})
    assert dict(a.queued) == {"a": 1}  # of the 2 held, the waiting one: outside the kill cap
    assert a.pending == 7  # counted only up to the cores offered (5 + 2): a huge bag costs nothing
    b = campaigns[bob]
    assert (b.class_name, b.clusters, dict(b.running), b.pending) == ("silver", ("b",), {"b": 1}, 4)  # prologue first
    assert [(c.name, c.weight, c.policy, c.default) for c in scenario.classes] == [
        ("gold", 3.0, Policy.FAIR_SHARE, False), ("silver", 1.0, Policy.FAIR_SHARE, True)]
    assert [(u.name, u.allotment_cores, dict(u.affinity)) for u in scenario.users] == [
        ("alice", 16, {"b": 2.0}), ("bob", 16, {})]


def test_jobs_queued_for_free_slots_are_not_counted_twice(make_grid: Callable[[str], Grid], tmp_path: Path) -> None:
    """OAR starts jobs at its next scheduling pass: until then the slots cigri's queued jobs will
    take still show free. ann (weight 3) and bob on 8 cores, a foreign job on one of them: 6
    and 1 wait in the queue; the next cycle, before the pass, sends no second wave, and when
    the foreign job ends bob alone gets the freed core (a second wave had let the cluster's
    queue order choose, and ann ran 7 to bob's 1)."""
    grid = make_grid('[clusters.a]\nbackend = "local"\n[users.ann]\nweight = 3\n')
    cluster = grid.cluster_ids()["a"]
    ann, bob = (_submit(grid, tmp_path, user, 12) for user in ("ann", "bob"))
    grid.db.conn.executemany("INSERT INTO jobs(campaign_id, cluster_id, kind, state, created_at) "
                             "VALUES (?, ?, 'task', 'waiting', 0)", [(ann, cluster)] * 6 + [(bob, cluster)])

    def shares(free: int) -> dict[int, tuple[dict[str, int], dict[str, int]]]:
        allocation = allocate(grid.config, gather(grid, {cluster: Capacity(8, free)}, now()).scenario)
        return {c.id: (dict(c.target), dict(c.start)) for c in allocation.campaigns}

    assert shares(free=7) == {ann: ({"a": 6}, {}), bob: ({"a": 1}, {})}
    assert shares(free=8) == {ann: ({"a": 6}, {}), bob: ({"a": 2}, {"a": 1})}


def test_jobs_on_a_cluster_left_out_still_count_against_the_allotment(make_grid: Callable[[str], Grid],
                                                                     tmp_path: Path) -> None:
    """b is unreachable or blacklisted this cycle: alice's fixed-share jobs there still run, so
    the allocation may start only what is left of her allotment on a; fair-share jobs there
    take nothing from it."""
    grid = make_grid(TWO_CLUSTERS + '[classes.fixed]\npolicy = "fixed_share"\nusers = ["alice"]\n'
                     '[classes.shared]\ndefault = true\n[users]\nallotment = 6\n')
    ids = grid.cluster_ids()
    fixed = _submit(grid, tmp_path, "alice", 20, resources="core=2", clusters={"a": {}, "b": {}},
                    **{"class": "fixed"})
    shared = _submit(grid, tmp_path, "alice", 20, clusters={"a": {}, "b": {}})
    grid.db.conn.executemany("INSERT INTO jobs(campaign_id, cluster_id, kind, state, created_at) "
                             "VALUES (?, ?, 'task', 'running', 0)", [(fixed, ids["b"]), (shared, ids["b"])])
    scenario = gather(grid, {ids["a"]: Capacity(16, 16)}, now()).scenario
    assert [(c.name, c.cores, c.left_out) for c in scenario.clusters] == [("a", 16, False), ("b", 3, True)]
    campaigns = {c.id: c for c in allocate(grid.config, scenario).campaigns}
    assert campaigns[fixed].start == {"a": 2} and campaigns[fixed].reason.endswith("capped by allotment")
    assert campaigns[fixed].target == {"a": 2, "b": 1} and campaigns[shared].target["b"] == 1
    assert [(c.name, c.left_out) for c in gather(grid, {ids["a"]: Capacity(16, 16), ids["b"]: Capacity(16, 14)},
                                                 now()).scenario.clusters] == [("a", False), ("b", False)]


def test_jobs_on_a_cluster_left_out_count_in_the_fair_share(make_grid: Callable[[str], Grid], tmp_path: Path) -> None:
    """alice holds 12 jobs on b, which does not answer this cycle: on a, bob gets what makes
    the two equal over the grid (alice 12 + 4, bob 16), not half of a; nothing starts or is
    killed on b, even where alice is above her share there."""
    grid = make_grid(TWO_CLUSTERS + "[metascheduler]\npreempt_fraction = 1.0\npreempt_threshold = 1.0\n")
    ids = grid.cluster_ids()
    alice = _submit(grid, tmp_path, "alice", 60, clusters={"a": {}, "b": {}})
    bob = _submit(grid, tmp_path, "bob", 60, clusters={"a": {}, "b": {}})
    grid.db.conn.executemany("INSERT INTO jobs(campaign_id, cluster_id, kind, state, created_at) "
                             "VALUES (?, ?, 'task', 'running', 0)", [(alice, ids["b"])] * 12)
    allocation = allocate(grid.config, gather(grid, {ids["a"]: Capacity(20, 20)}, now()).scenario)
    campaigns = {c.id: c for c in allocation.campaigns}
    assert (campaigns[alice].target, campaigns[alice].start, campaigns[alice].preempt) == ({"a": 4, "b": 12},
                                                                                          {"a": 4}, {})
    assert (campaigns[bob].target, campaigns[bob].start) == ({"a": 16}, {"a": 16})
    assert [(c.name, c.cores, c.start, c.preempt, c.left_out) for c in allocation.clusters] == [
        ("a", 20, 20, 0, False), ("b", 12, 0, 0, True)]
    # bob now holds 16 on a: alice (16) is not above her share, and nothing is killed on b to
    # give bob the 12 cores she would lose there
    grid.db.conn.executemany("INSERT INTO jobs(campaign_id, cluster_id, kind, state, created_at) "
                             "VALUES (?, ?, 'task', 'running', 0)", [(bob, ids["a"])] * 16 + [(alice, ids["a"])] * 4)
    allocation = allocate(grid.config, gather(grid, {ids["a"]: Capacity(20, 0)}, now()).scenario)
    assert all(not c.preempt and not c.start for c in allocation.campaigns)


def test_gather_reads_memory_per_task_and_per_cluster(make_grid: Callable[[str], Grid], tmp_path: Path) -> None:
    grid = make_grid(TWO_CLUSTERS)
    ids = grid.cluster_ids()
    big = _submit(grid, tmp_path, "alice", 9, memory="2G", clusters={"a": {"resources": "/nodes=2/core=1"}, "b": {}})
    small = _submit(grid, tmp_path, "bob", 9, clusters={"a": {}})
    grid.db.conn.executemany("INSERT INTO jobs(campaign_id, cluster_id, kind, state, created_at) VALUES (?, ?, 'task', ?, 0)",
                             [(big, ids["a"], "running"), (big, ids["a"], "waiting"), (small, ids["a"], "running")])
    capacities = {ids["a"]: Capacity(8, 3, free_memory_mb=3072, node_cores=4, node_memory_mb=16384,
                                      allocated_memory_mb=5120), ids["b"]: Capacity(4, 1)}
    scenario = gather(grid, capacities, now()).scenario
    # memory per node times the nodes (the largest over the clusters); a offers what cigri's
    # running jobs hold there (4 GB) plus its free 3 GB or, as here, more: the 4 GB its queued
    # job waits for; b does not say, so memory is not counted there
    assert [(c.name, c.cores, c.memory_gb, c.node_cores, c.node_memory_gb) for c in scenario.clusters] == [
        ("a", 2 + 1 + 3, 4.0 + 4.0, 4, 16.0), ("b", 1, None, None, None)]
    # where memory is not a consumable resource (Slurm's CR_Core) the cluster counts none held:
    # the running job's memory is already in the free memory and is not added twice
    capacities[ids["a"]] = Capacity(8, 3, free_memory_mb=9216)
    assert gather(grid, capacities, now()).scenario.clusters[0].memory_gb == 9.0
    campaigns = {c.id: c for c in scenario.campaigns}
    assert (campaigns[big].cores_per_task, campaigns[big].memory_gb_per_task) == (2, 4.0)
    assert (campaigns[small].cores_per_task, campaigns[small].memory_gb_per_task) == (1, 0.0)


def test_a_paused_campaigns_running_jobs_are_not_preempted(make_grid: Callable[[str], Grid], tmp_path: Path) -> None:
    grid = make_grid('[clusters.a]\nbackend = "local"\n[metascheduler]\npreempt_fraction = 1.0\n')
    paused, other = _submit(grid, tmp_path, "alice", 20), _submit(grid, tmp_path, "bob", 20)
    a = grid.cluster_ids()["a"]
    grid.db.conn.executemany("INSERT INTO jobs(campaign_id, cluster_id, kind, state, created_at) "
                             "VALUES (?, ?, 'task', 'running', 0)", [(paused, a)] * 8)
    api.pause(grid, paused, user="alice")
    assert [c.paused for c in gather(grid, {a: Capacity(8, 0)}, now()).scenario.campaigns] == [True, False]
    schedule(CycleContext(grid, capacities={a: Capacity(8, 0)}, options={a: {"max_waiting": 0}}))
    assert grid.db.conn.execute("SELECT count(*) FROM jobs WHERE kill_reason IS NOT NULL").fetchone() == (0,)


def test_only_best_effort_jobs_are_preempted(make_grid: Callable[[str], Grid], tmp_path: Path) -> None:
    """A campaign is preemptable while its type sends best-effort jobs wherever it runs or may
    run: ``normal`` never, ``semi-best-effort`` by day, ``nightly`` never (its jobs running at
    dawn end by themselves)."""
    grid = make_grid(TWO_CLUSTERS + '[metascheduler]\npreempt_fraction = 1.0\nnight = "19:00-07:00"\n'
                     'weekend = false\n')
    ids = grid.cluster_ids()
    kinds = {"best-effort": {"a": {}}, "normal": {"a": {"type": "normal"}},
             "semi-best-effort": {"a": {"type": "semi-best-effort"}},
             "mixed": {"a": {}, "b": {"type": "normal"}}, "nightly": {"a": {"type": "nightly"}}}
    campaigns = {kind: _submit(grid, tmp_path, "alice", 20, clusters=clusters) for kind, clusters in kinds.items()}
    grid.db.conn.executemany("INSERT INTO jobs(campaign_id, cluster_id, kind, state, created_at) "
                             "VALUES (?, ?, 'task', 'running', 0)", [(c, ids["a"]) for c in campaigns.values()] * 2)
    capacities = {ids["a"]: Capacity(12, 2), ids["b"]: Capacity(4, 4)}
    noon, midnight = datetime(2026, 11, 24, 12).timestamp(), datetime(2026, 11, 24, 23).timestamp()
    for at, expected in ((noon, {"best-effort", "semi-best-effort"}), (midnight, {"best-effort"})):
        specs = gather(grid, capacities, at).scenario.campaigns
        assert {kind for kind, c in campaigns.items() for spec in specs if spec.id == c and spec.best_effort} == expected
    newcomer = _submit(grid, tmp_path, "bob", 20)  # far below its share: kills if any job may go
    full = {ids["a"]: Capacity(12, 0), ids["b"]: Capacity(4, 0)}
    schedule(CycleContext(grid, capacities=full, options={k: {"max_waiting": 0} for k in full}))
    killed = {c for (c,) in grid.db.conn.execute("SELECT campaign_id FROM jobs WHERE kill_reason IS NOT NULL")}
    assert killed and killed <= {campaigns["best-effort"], campaigns["semi-best-effort"]} and newcomer not in killed


def test_gather_lets_nightly_campaigns_run_at_night(make_grid: Callable[[str], Grid], tmp_path: Path) -> None:
    grid = make_grid(TWO_CLUSTERS + '[metascheduler]\nnight = "00:00-23:59"\nweekend = true\n')
    nightly = _submit(grid, tmp_path, "carol", 4, type="nightly")
    ids = grid.cluster_ids()
    scenario = gather(grid, {ids["a"]: Capacity(8, 8)},
                      datetime(2026, 11, 23, 12).timestamp()).scenario
    assert [(c.id, c.clusters, c.class_name) for c in scenario.campaigns] == [(nightly, ("a",), "default")]


def test_a_full_cluster_still_gets_max_waiting_jobs_queued_shared_by_the_campaigns(
        make_grid: Callable[[str], Grid], tmp_path: Path) -> None:
    grid = make_grid('[clusters.a]\nbackend = "local"\n')
    first, second = _submit(grid, tmp_path, "alice", 9), _submit(grid, tmp_path, "bob", 9)
    a = grid.cluster_ids()["a"]
    full = CycleContext(grid, capacities={a: Capacity(8, 0)}, options={a: {"max_waiting": 4}})  # no core free
    assert schedule(full) == {(first, "a"): 2, (second, "a"): 2}
    assert schedule(full) == {}  # the queue is full: nothing more until it drains


def test_jobs_queued_ahead_follow_the_shares(make_grid: Callable[[str], Grid], tmp_path: Path) -> None:
    grid = make_grid('[clusters.a]\nbackend = "local"\n[runner]\ntap_initial = 50\ntap_max = 50\n'
                     + CLASSES.replace("affinity = {b = 2}", ""))
    gold, silver = _submit(grid, tmp_path, "alice", 20, **{"class": "gold"}), _submit(grid, tmp_path, "bob", 20)
    a = grid.cluster_ids()["a"]
    ctx = CycleContext(grid, capacities={a: Capacity(4, 4)}, options={a: {"max_waiting": 8}})
    # targets 3:1 start 3 and 1 jobs; the 4 places left in the queue go 3:1 too
    assert schedule(ctx) == {(gold, "a"): 6, (silver, "a"): 2}


def test_no_job_queues_beyond_its_target_on_a_cluster_being_preempted(make_grid: Callable[[str], Grid],
                                                                       tmp_path: Path) -> None:
    grid = make_grid('[clusters.a]\nbackend = "local"\n[runner]\ntap_initial = 50\ntap_max = 50\n')
    alice, bob = _submit(grid, tmp_path, "alice", 20), _submit(grid, tmp_path, "bob", 20)
    a = grid.cluster_ids()["a"]
    grid.db.conn.executemany("INSERT INTO jobs(campaign_id, cluster_id, kind, state, created_at) "
                             "VALUES (?, ?, 'task', 'running', 0)", [(alice, a)] * 4 + [(bob, a)] * 2)
    full = CycleContext(grid, capacities={a: Capacity(8, 0)}, options={a: {"max_waiting": 4}})
    # targets 3/3: one of alice's jobs is preempted and bob's new job queues; alice queueing
    # another one there would only be the next cycle's kill
    assert schedule(full) == {(bob, "a"): 1}
    assert grid.db.conn.execute("SELECT campaign_id, count(*) FROM jobs WHERE kill_reason = ? GROUP BY 1",
                                [KillReason.PREEMPT]).fetchall() == [(alice, 1)]


# --- cigri shares --scenario --------------------------------------------------------------

def test_shares_of_a_scenario_file_without_a_database(cigri: Cigri) -> None:
    scenario = {"clusters": [{"name": "c1", "cores": 64}],
                "campaigns": [{"id": 1, "user": "a", "pending": 0, "running": {"c1": 40}},
                              {"id": 2, "user": "b", "pending": 50}]}
    path = cigri.tmp / "scenario.json"
    path.write_text(json.dumps(scenario))
    result = cigri.json("cigri", "shares", "--scenario", str(path))
    assert [(c["id"], c["target"], c["preempt"]) for c in result["campaigns"]] == [
        (1, {"c1": 32}, {"c1": 4}), (2, {"c1": 32}, {})]
    assert result["preempt_cap"] == 4 and result["users"][0]["target"] == 32
    assert "below share" in result["campaigns"][1]["reason"]
    assert not cigri.home.exists()
    # DRF's example in the table people read: memory and what the targets use of it
    path.write_text(json.dumps({"clusters": [{"name": "c", "cores": 9, "memory_gb": 18}], "campaigns": [
        {"id": 1, "user": "a", "pending": 9, "memory_gb_per_task": 4},
        {"id": 2, "user": "b", "pending": 9, "cores_per_task": 3, "memory_gb_per_task": 1}]}))
    table = cigri.run("cigri", "shares", "--scenario", str(path)).stdout
    assert "memory GB" in table and [line.split() for line in table.splitlines() if line.startswith("c ")] == [
        ["c", "9", "0", "0", "5", "5", "0", "0", "9", "18.0", "14.0"]]
    # each user's fair share on its dominant resource: A's 3 tasks hold 12 GB of 18, B's 2 hold 6 cores of 9
    assert [line.split()[-2:] for line in table.splitlines() if line.split()[:1] in (["a"], ["b"])] == [
        ["0.0%", "66.7%"], ["0.0%", "66.7%"]]
    # a cluster left out of the cycle: campaign 1's 20 jobs there keep their place and count in
    # its share of the 84 cores, so campaign 2 gets 42 of c1's 64
    path.write_text(json.dumps({
        "clusters": [{"name": "c1", "cores": 64}, {"name": "c2", "cores": 20, "left_out": True}],
        "campaigns": [{"id": 1, "user": "a", "pending": 50, "running": {"c2": 20}}, {"id": 2, "user": "b", "pending": 50}]}))
    result = cigri.json("cigri", "shares", "--scenario", str(path))
    assert [(c["id"], c["target"], c["start"], c["clusters"]) for c in result["campaigns"]] == [
        (1, {"c1": 22, "c2": 20}, {"c1": 22}, ["c1"]), (2, {"c1": 42}, {"c1": 42}, ["c1"])]
    assert [(c["name"], c["left_out"]) for c in result["clusters"]] == [("c1", False), ("c2", True)]
    table = cigri.run("cigri", "shares", "--scenario", str(path)).stdout
    assert [line.split()[:4] for line in table.splitlines() if line.startswith("c2 ")] == [
        ["c2", "(left", "out)", "20"]]
    path.write_text(json.dumps({**scenario, "clusters": [{"name": "c1", "cores": -1}]}))
    bad = cigri.run("cigri", "shares", "--scenario", str(path), "--json", expect=2)
    assert bad.stdout == "" and bad.stderr.strip() == f"cigri: {path}: clusters[0].cores: -1 is less than the minimum of 0"


def test_every_number_of_a_scenario_file_must_be_finite(cigri: Cigri) -> None:
    """Python's json reads NaN, Infinity and 1e999: a cluster's NaN memory came back as NaN, not
    JSON, with exit 0, and a campaign's NaN memory per task was an internal error."""
    path = cigri.tmp / "scenario.json"
    for text, where, value in [
            ('{"clusters": [{"name": "c1", "cores": 8, "memory_gb": NaN}], "campaigns": []}',
             "scenario.clusters[0].memory_gb", "NaN"),
            ('{"clusters": [{"name": "c1", "cores": 8, "memory_gb": 16}],'
             ' "campaigns": [{"id": 1, "user": "a", "pending": 4, "memory_gb_per_task": NaN}]}',
             "scenario.campaigns[0].memory_gb_per_task", "NaN"),
            ('{"clusters": [{"name": "c1", "cores": 8}],'
             ' "campaigns": [{"id": 1, "user": "a", "pending": 4, "affinity": {"c1": 1e999}}]}',
             "scenario.campaigns[0].affinity.c1", "Infinity")]:
        path.write_text(text)
        bad = cigri.run("cigri", "shares", "--scenario", str(path), "--json", expect=2)
        assert bad.stdout == "" and bad.stderr == f"cigri: {path}: {where}: expected a finite number, got {value}\n"


def test_shares_of_a_live_grid_with_a_blacklisted_cluster(cigri: Cigri) -> None:
    """Through the real commands: the first campaign's 2 jobs run on b when an admin blacklists
    b. They keep their place in its share, so of a's 4 cores the first gets 1 and the second 3
    (3 each over the 6 cores), nothing starts or is killed on b, and ``cigri shares`` says b
    is left out."""
    cigri.config.write_text('[clusters.a]\nbackend = "local"\nslots = 4\nmax_waiting = 0\n'
                            '[clusters.b]\nbackend = "local"\nslots = 2\nmax_waiting = 0\n')
    sleeper = cigri.script("sleeper.sh", "sleep 60\n")
    params = [str(i) for i in range(8)]
    cigri.run("cigri", "cluster", "blacklist", "a")
    first = cigri.submit(cigri.jdl("first", exec_file=str(sleeper), params=params, clusters={"a": {}, "b": {}}))
    campaigns = [first]
    try:
        wait_for(lambda: (cigri.cycle(), cigri.stat(first)["tasks"]["running"] == 2)[1], 30, "2 jobs on b")
        cigri.run("cigri", "cluster", "unblacklist", "a")
        cigri.run("cigri", "cluster", "blacklist", "b")
        campaigns.append(second := cigri.submit(cigri.jdl("second", exec_file=str(sleeper), params=params,
                                                          clusters={"a": {}})))
        result = cigri.json("cigri", "shares")
        by_id = {c["id"]: c for c in result["campaigns"]}
        assert (by_id[first]["running"], by_id[first]["target"], by_id[first]["start"]) == (
            {"b": 2}, {"a": 1, "b": 2}, {"a": 1})
        assert (by_id[second]["target"], by_id[second]["start"]) == ({"a": 3}, {"a": 3})
        assert [(c["name"], c["cores"], c["start"], c["preempt"], c["left_out"]) for c in result["clusters"]] == [
            ("a", 4, 4, 0, False), ("b", 2, 0, 0, True)]
        assert result["clusters_left_out"] == [{"name": "b", "error": "blacklisted: blacklisted by an admin"}]
        table = cigri.run("cigri", "shares").stdout
        assert "left out of this cycle: b (blacklisted: blacklisted by an admin); cigri's jobs there keep their place" in table
        assert [line.split()[:3] for line in table.splitlines() if line.startswith("b ")] == [["b", "(left", "out)"]]
    finally:
        cigri.run("cigri", "cluster", "unblacklist", "b")
        for campaign in campaigns:
            cigri.run("griddel", str(campaign))
        cigri.cycle()


# --- real cycles on the local pool --------------------------------------------------------

SPLIT = """[clusters.a]
backend = "local"
slots = 8
max_waiting = 0
[runner]
tap_initial = 8
tap_max = 8
[metascheduler]
preempt_fraction = 0.25
night = ""
weekend = false
""" + CLASSES.replace("affinity = {b = 2}", "")


def _held(grid: Grid, campaign_id: int) -> int:
    return grid.db.execute("SELECT count(*) FROM jobs WHERE campaign_id = ? AND state IN ('submitting', 'waiting', "
                           "'running') AND kill_reason IS NULL", [campaign_id]).fetchone()[0]


def _running(grid: Grid, campaign_id: int) -> int:
    return grid.db.execute("SELECT count(*) FROM jobs WHERE campaign_id = ? AND state = 'running'",
                           [campaign_id]).fetchone()[0]


def _cycles_until(grid: Grid, done: Callable[[], bool], what: str, each: Callable[[], None] = lambda: None,
                  timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, what
        run_cycle(grid)
        each()
        time.sleep(0.05)


def _cancel_all(grid: Grid, *campaign_ids: int) -> None:
    for campaign_id in campaign_ids:
        api.cancel(grid, campaign_id, user="root")
    run_cycle(grid)


def test_two_users_in_two_classes_split_the_cluster_3_to_1(make_grid: Callable[[str], Grid], tmp_path: Path) -> None:
    grid = make_grid(SPLIT)
    alice = _submit(grid, tmp_path, "alice", 12, **{"class": "gold"})
    bob = _submit(grid, tmp_path, "bob", 12)
    try:
        _cycles_until(grid, lambda: (_running(grid, alice), _running(grid, bob)) == (6, 2), "a 6:2 split")
        run_cycle(grid)
        assert (_held(grid, alice), _held(grid, bob)) == (6, 2)  # stable: nothing more started or killed
        shares = api.current_shares(grid, user="root")
        by_id = {c["id"]: c for c in shares["campaigns"]}
        assert (by_id[alice]["target"], by_id[bob]["target"]) == ({"a": 6}, {"a": 2})
        assert [(c["name"], c["running"], c["target"]) for c in shares["classes"]] == [("gold", 6, 6), ("silver", 2, 2)]
        assert [(c["weight"], c["held"], c["fair_share"]["dominant"]) for c in shares["classes"]] == [
            (3.0, 0.75, 0.75), (1.0, 0.25, 0.25)]
        assert [(u["name"], u["fair_share"]["dominant"]) for u in shares["users"]] == [("alice", 0.75), ("bob", 0.25)]
        assert by_id[bob]["name"] == "bob-campaign" and "at fair share" in by_id[bob]["reason"]
    finally:
        _cancel_all(grid, alice, bob)


def test_a_higher_share_arrival_preempts_at_most_the_fraction_per_cycle(make_grid: Callable[[str], Grid],
                                                                         tmp_path: Path) -> None:
    grid = make_grid(SPLIT)
    bob = _submit(grid, tmp_path, "bob", 12)
    try:
        _cycles_until(grid, lambda: _running(grid, bob) == 8, "bob fills the cluster")
        alice = _submit(grid, tmp_path, "alice", 12, **{"class": "gold"})
        marked: list[int] = []

        def count_kills() -> None:
            marked.append(grid.db.execute("SELECT count(*) FROM jobs WHERE kill_reason = ?",
                                          [KillReason.PREEMPT]).fetchone()[0])

        count_kills()
        _cycles_until(grid, lambda: (_running(grid, alice), _running(grid, bob)) == (6, 2),
                      "alice takes her share by preemption", each=count_kills)
        per_cycle = [b - a for a, b in zip(marked, marked[1:])]
        assert marked[-1] == 6 and max(per_cycle) <= math.ceil(0.25 * 8), per_cycle
        requeued = grid.db.execute("SELECT count(*) FROM jobs WHERE campaign_id = ? AND state = 'preempted'",
                                   [bob]).fetchone()[0]
        attempts = grid.db.execute("SELECT max(attempts) FROM tasks WHERE campaign_id = ?", [bob]).fetchone()[0]
        assert requeued == 6 and attempts == 1  # the tasks went back to the bag, no attempt charged
    finally:
        _cancel_all(grid, bob, *([alice] if "alice" in locals() else []))


def test_a_reserve_class_takes_only_nodes_of_exactly_its_size(make_grid: Callable[[str], Grid],
                                                               tmp_path: Path) -> None:
    """The local pool is one node of its slots: a reserve campaign asking fewer cores is never
    placed there (it would not hold the whole node), one asking all of them is."""
    grid = make_grid('[clusters.a]\nbackend = "local"\nslots = 4\nmax_waiting = 0\n[classes.whole]\n'
                     'policy = "reserve"\ndefault = true\n[metascheduler]\nnight = ""\nweekend = false\n')
    smaller = _submit(grid, tmp_path, "alice", 2, resources="core=2")
    node = _submit(grid, tmp_path, "bob", 2, resources="core=4")
    try:
        by_id = {c["id"]: c for c in api.current_shares(grid, user="root")["campaigns"]}  # asks the pool its capacity
        assert (by_id[smaller]["target"], by_id[node]["target"]) == ({}, {"a": 1})
        assert "no usable cluster" in by_id[smaller]["reason"]
        run_cycle(grid)
        assert (_held(grid, smaller), _held(grid, node)) == (0, 1)
    finally:
        _cancel_all(grid, smaller, node)
