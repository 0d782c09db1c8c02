"""One campaign over both Slurm clusters, OAR and Grid Engine at once, driven by ``cigri cycle``.

Real resource managers (``tests/clusters/up.sh``), real CLI subprocesses: every task must run
exactly once (each run leaves a marker file in the shared exec directory), gridstat must show
the campaign's progress per cluster, and each cycle must stay within its remote-call budget.
Tasks on slurm-a are grouped (temporal grouping), the others run one per job; OAR's jobs carry
the JDL's ``cluster_job_type``.
"""

from __future__ import annotations

import json
import sqlite3
import time
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from cigri import config as configuration
from cigri.cycle import run_cycle
from cigri.grid import open_grid

from harness import REAL_CLUSTERS, Cigri, clusters_dir, marker_exec_dir, runs_per_task


def single_account_clusters() -> dict[str, dict[str, Any]]:
    """The test clusters' tables, every job as the clusters' account (``single.toml``; an older
    ``up.sh`` wrote only ``cigri.toml``): these tests are about scheduling, not identity."""
    where = clusters_dir()
    path = where / "single.toml" if (where / "single.toml").is_file() else where / "cigri.toml"
    with path.open("rb") as handle:
        clusters: dict[str, dict[str, Any]] = tomllib.load(handle)["clusters"]
    return clusters

CLUSTERS = ("slurm-a-ssh", "slurm-b-ssh", "oar-rest", "gridengine-ssh")
TASKS = 48
pytestmark = [pytest.mark.slow, REAL_CLUSTERS]


@pytest.fixture
def grid_setup(cigri: Cigri) -> tuple[Cigri, Path]:
    """The harness's installation pointed at four real clusters; a fresh world-writable exec dir."""
    clusters = single_account_clusters()
    lines = ["[runner]", "tap_initial = 50"]
    for name in CLUSTERS:
        lines.append(f"[clusters.{name}]")
        # the first clusters are offered only their free slots, so the tasks spread over them all;
        # slurm-a (last in the JDL) gets the rest at once: more tasks than slots, they are grouped
        waiting = 40 if name == "slurm-a-ssh" else 0
        lines += [f"{key} = {json.dumps(value)}" for key, value in {**clusters[name], "max_waiting": waiting}.items()]
    cigri.config.write_text("\n".join(lines) + "\n")
    return cigri, marker_exec_dir("multi")


def submit(cigri: Cigri, exec_dir: Path) -> int:
    jdl = cigri.jdl("multi", exec_file=str(exec_dir / "task.sh"), exec_directory=str(exec_dir), walltime="00:01:00",
                    type="normal", params=[f"t{i:03d}" for i in range(TASKS)],
                    clusters={"slurm-b-ssh": {}, "oar-rest": {"cluster_job_type": ["idempotent"]}, "gridengine-ssh": {},
                              "slurm-a-ssh": {"temporal_grouping": True}})
    return cigri.submit(jdl)


def test_one_campaign_over_two_slurm_clusters_oar_and_grid_engine(grid_setup: tuple[Cigri, Path]) -> None:
    cigri, exec_dir = grid_setup
    campaign_id = submit(cigri, exec_dir)
    deadline = time.monotonic() + 300
    seen_progress: dict[str, int] = {}
    while (stat := cigri.stat(campaign_id))["state"] != "terminated":
        assert time.monotonic() < deadline, f"campaign not over after 300 s: {stat}"
        for cluster in stat["clusters"]:
            seen_progress[cluster["cluster"]] = sum(cluster["jobs"].values())
        cigri.cycle()
        time.sleep(0.5)
    assert stat["tasks"]["terminated"] == TASKS and stat["progress"] == 100
    assert runs_per_task(exec_dir) == Counter({f"t{i:03d}": 1 for i in range(TASKS)})
    per_cluster = {c["cluster"]: c["jobs"] for c in stat["clusters"]}
    assert set(per_cluster) == set(CLUSTERS) and all(jobs.get("terminated", 0) > 0 for jobs in per_cluster.values()), \
        per_cluster
    assert sum(jobs.get("terminated", 0) for jobs in per_cluster.values()) == TASKS
    assert set(seen_progress) <= set(CLUSTERS) and seen_progress  # progress was visible while running
    with sqlite3.connect(cigri.home / "cigri.db") as db:
        grouped = db.execute("SELECT count(*) FROM jobs j JOIN clusters c ON c.id = j.cluster_id "
                             "WHERE c.name = 'slurm-a-ssh' AND j.remote_id LIKE '%+%'").fetchone()[0]
    assert grouped > 0  # several tasks ran inside one Slurm job
    assert oar_job_types(cigri) == {("idempotent",)}


def oar_job_types(cigri: Cigri) -> set[tuple[str, ...]]:
    """The types OAR recorded for each job cigri sent to oar-rest, read over the backend's REST."""
    grid = open_grid(configuration.load(environ=cigri.env))
    try:
        cluster_id = grid.cluster_ids()["oar-rest"]
        remote_ids = [row[0] for row in grid.db.execute("SELECT remote_id FROM jobs WHERE cluster_id = ?",
                                                          [cluster_id])]
        via = grid.backend(cluster_id).via  # type: ignore[attr-defined]
        return {tuple(sorted(via._get(f"/jobs/{remote_id}.json")["types"])) for remote_id in remote_ids}
    finally:
        grid.close()


def test_each_cycle_stays_within_its_remote_call_budget(grid_setup: tuple[Cigri, Path]) -> None:
    """≤ 1 poll call per cluster per cycle and ≤ 1 submit call per campaign per cluster per cycle."""
    cigri, exec_dir = grid_setup
    campaign_id = submit(cigri, exec_dir)
    grid = open_grid(configuration.load(environ=cigri.env))
    try:
        ids = grid.cluster_ids()
        budgets: list[dict[str, Any]] = []
        deadline = time.monotonic() + 300
        while grid.db.execute("SELECT state FROM campaigns WHERE id = ?", [campaign_id]).fetchone()[0] != "terminated":
            assert time.monotonic() < deadline
            before = {name: Counter(getattr(grid.backend(ids[name]), "calls")) for name in CLUSTERS}
            run_cycle(grid)
            budgets.append({name: getattr(grid.backend(ids[name]), "calls") - before[name] for name in CLUSTERS})
            time.sleep(0.5)
    finally:
        grid.close()
    assert all(calls["poll"] <= 1 and calls["submit"] <= 1 for cycle in budgets for calls in cycle.values()), budgets
    assert sum(cycle[name]["submit"] for cycle in budgets for name in CLUSTERS) >= len(CLUSTERS)  # all got work
    assert runs_per_task(exec_dir) == Counter({f"t{i:03d}": 1 for i in range(TASKS)})


EVERY_TRANSPORT = ("slurm-a-ssh", "slurm-a-rest", "oar-ssh", "oar-rest", "gridengine-ssh")


def use_clusters(cigri: Cigri, names: tuple[str, ...], head: str = "") -> dict[str, dict[str, Any]]:
    """Point the harness's installation at these real clusters (after the TOML ``head``);
    return every test cluster's table."""
    clusters = single_account_clusters()
    cigri.config.write_text(head + "".join(f"[clusters.{name}]\n" + "".join(
        f"{key} = {json.dumps(value)}\n" for key, value in clusters[name].items()) for name in names))
    return clusters


def test_prologues_and_home_are_the_cluster_accounts_over_ssh_and_rest(cigri: Cigri) -> None:
    """A prologue and an epilogue run from the home of the cluster's account (its ``home``,
    default /home/USER), and ``{HOME}`` in exec_directory is that home there. Both used to be
    the submitting user's home on cigri's machine (/root here), so every prologue failed on
    Slurm and OAR and the campaign's tasks with it."""
    names = EVERY_TRANSPORT
    clusters = use_clusters(cigri, names, "[runner]\ntap_initial = 10\n")
    home = Path("/home") / clusters["oar-ssh"]["user"]
    work = f"cigri-home-{time.monotonic_ns()}"
    program = marker_exec_dir("home") / "task.sh"
    jdl = cigri.jdl("home", exec_file=str(program), exec_directory=f"{{HOME}}/{work}/{{CAMPAIGN_ID}}",
                    walltime="00:01:00", type="normal", params=[f"t{i}" for i in range(8)],
                    prologue=[f'mkdir -p "$HOME/{work}/$CIGRI_CAMPAIGN_ID"', f'echo "$PWD" >> "$HOME/{work}/prologues"'],
                    epilogue=[f'echo "$PWD" >> "$HOME/{work}/epilogues"'], clusters={name: {} for name in names})
    campaign_id = cigri.submit(jdl)
    deadline = time.monotonic() + 240
    while cigri.campaign_state(campaign_id) not in ("terminated", "failed"):
        assert time.monotonic() < deadline, cigri.stat(campaign_id)
        cigri.cycle()
        time.sleep(1)
    assert cigri.stat(campaign_id)["tasks"]["terminated"] == 8, cigri.events(campaign_id)
    assert len(list((home / work / str(campaign_id)).glob("marker.t*"))) == 8  # every task ran in {HOME} there
    for script in ("prologues", "epilogues"):
        assert (home / work / script).read_text().split() == [str(home)] * len(names), script


def test_cigri_cluster_test_runs_in_the_accounts_home_on_every_transport(cigri: Cigri) -> None:
    """``cigri cluster test`` ran its job in /tmp, where OAR's REST API, which copies its script
    from /tmp into the job's directory, failed on itself ("are the same file")."""
    use_clusters(cigri, EVERY_TRANSPORT)
    for name in EVERY_TRANSPORT:
        result = json.loads(cigri.run("cigri", "cluster", "test", name, "--json").stdout)
        assert (result["state"], result["exit_code"]) == ("completed", 0), (name, result)
