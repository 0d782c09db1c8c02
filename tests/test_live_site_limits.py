"""A real site's limits, on slurm-b's partitions with a partition QOS enforced by slurmdbd
(``tests/clusters/up.sh`` writes their cluster entries into ``limits.toml``), over SSH and REST.

``capped`` lets the test user have :data:`CAP` jobs queued or running (``MaxSubmitJobsPerUser``).
The first batch is bigger than the cap: sbatch (or slurmrestd) refuses it whole, the runner
halves it until what fits is sent, learns the cap exactly and is never refused again; every
task runs once and none fails. Before this, the refusal failed the batch's tasks.

``walled`` has a 10-minute ``MaxWall`` without ``DenyOnLimit`` (Slurm's default): a longer job
is accepted and would pend forever. It is refused at submission instead (its tasks back in the
bag, the cluster out of the campaign until the event is fixed); before this, flood control
killed and requeued them every ``remote_waiting_timeout``, for ever."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import time
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from cigri import config as configuration
from cigri.cycle import run_cycle
from cigri.grid import open_grid

from harness import REAL_CLUSTERS, Cigri, clusters_dir, marker_exec_dir, runs_per_task

CAP = 6  # tests/clusters/up.sh: QOS capped, MaxSubmitJobsPerUser
TASKS = 14
pytestmark = [pytest.mark.slow, REAL_CLUSTERS]


def use_cluster(cigri: Cigri, name: str) -> None:
    """cigri's configuration: that one entry of ``limits.toml``, and a first batch of 10 jobs."""
    with (clusters_dir() / "limits.toml").open("rb") as handle:
        options = tomllib.load(handle)["clusters"][name]
    lines = ["[runner]", "tap_initial = 10", f"[clusters.{name}]",
             *(f"{key} = {json.dumps(value)}" for key, value in options.items())]
    cigri.config.write_text("\n".join(lines) + "\n")


@pytest.fixture(params=["slurm-b-capped-ssh", "slurm-b-capped-rest"])
def capped(cigri: Cigri, request: pytest.FixtureRequest) -> tuple[Cigri, Path, str]:
    use_cluster(cigri, request.param)  # 10 jobs on a cluster that takes 6
    return cigri, marker_exec_dir("capped", after="sleep 2\n"), request.param


@pytest.fixture(params=["slurm-b-walled-ssh", "slurm-b-walled-rest"])
def walled(cigri: Cigri, request: pytest.FixtureRequest) -> tuple[Cigri, Path, str]:
    use_cluster(cigri, request.param)
    return cigri, marker_exec_dir("walled"), request.param


def test_a_site_submit_limit_fails_nothing_and_is_learned_exactly(capped: tuple[Cigri, Path, str]) -> None:
    cigri, exec_dir, name = capped
    campaign_id = cigri.submit(cigri.jdl("capped", exec_file=str(exec_dir / "task.sh"),
                                         exec_directory=str(exec_dir), walltime="00:01:00", type="normal",
                                         params=[f"t{i:02d}" for i in range(TASKS)], clusters={name: {}}))
    grid = open_grid(configuration.load(environ=cigri.env))
    try:
        held, learned = [], []
        deadline = time.monotonic() + 240
        while grid.db.execute("SELECT state FROM campaigns WHERE id = ?", [campaign_id]).fetchone()[0] != "terminated":
            assert time.monotonic() < deadline, "campaign not over after 240 s"
            run_cycle(grid)
            held.append(grid.db.execute("SELECT count(*) FROM jobs WHERE state IN ('waiting', 'running')")
                        .fetchone()[0])
            learned.append(grid.db.execute("SELECT submit_limit FROM clusters WHERE name = ?", [name]).fetchone()[0])
            time.sleep(0.5)
        events = dict(grid.db.execute("SELECT code, count FROM events"))
        attempts = grid.db.execute("SELECT max(attempts) FROM tasks").fetchone()[0]
    finally:
        grid.close()
    assert learned[0] == CAP and held[0] == CAP  # the first cycle filled the cap exactly
    assert max(held) == CAP
    assert events.get("SUBMIT_LIMIT") == 1, events  # refused in the first cycle only
    assert "SUBMISSION_ERROR" not in events and attempts == 1
    assert runs_per_task(exec_dir) == Counter({f"t{i:02d}": 1 for i in range(TASKS)})


def test_a_job_over_the_sites_walltime_limit_is_refused_and_is_no_submit_limit(capped: tuple[Cigri, Path, str]) -> None:
    """The QOS's MaxWall (10 min, DenyOnLimit) refuses a 20-minute job with the same policy
    words (slurmrestd: the same error 2050): refused once, its tasks wait in the bag (the
    campaign has no other cluster), nothing is learned."""
    cigri, exec_dir, name = capped
    campaign_id = cigri.submit(cigri.jdl("too-long", exec_file=str(exec_dir / "task.sh"),
                                         exec_directory=str(exec_dir), walltime="00:20:00", type="normal",
                                         params=["t0", "t1", "t2"], clusters={name: {}}))
    for _ in range(3):
        cigri.cycle()
    stat = cigri.stat(campaign_id)
    assert stat["state"] == "in_treatment" and stat["tasks"]["pending"] == 3, stat
    with sqlite3.connect(cigri.home / "cigri.db") as db:
        events = {code: (message, count)
                  for code, message, count in db.execute("SELECT code, message, count FROM events")}
        learned = db.execute("SELECT submit_limit FROM clusters WHERE name = ?", [name]).fetchone()[0]
    assert set(events) == {"SUBMISSION_ERROR"} and "QOS policy" in events["SUBMISSION_ERROR"][0], events
    assert events["SUBMISSION_ERROR"][1] == 1  # the cluster is out of the campaign until the event is fixed
    assert learned is None and not runs_per_task(exec_dir)
    cigri.run("griddel", str(campaign_id))


def pending_in(partition: str) -> list[str]:
    """Every job still queued in one of slurm-b's partitions (squeue as root)."""
    env = {**os.environ, "SLURM_CONF": str(clusters_dir() / "slurm" / "slurm-b" / "slurm.conf")}
    out = subprocess.run(["squeue", "-h", "-p", partition, "-t", "PENDING", "-o", "%i %r"], env=env, text=True,
                         capture_output=True, timeout=30, check=True).stdout
    return out.split("\n")[:-1]


def test_a_job_the_site_would_leave_pending_forever_is_refused_at_submission(walled: tuple[Cigri, Path, str]) -> None:
    """A 20-minute campaign on a 10-minute MaxWall without DenyOnLimit: Slurm accepts the array
    and gives it reason QOSMaxWallDurationPerJobLimit. cigri cancels it in the cycle that sent
    it and refuses it with the reason: its tasks wait in the bag, not failed; a 5-minute
    campaign beside it runs."""
    cigri, exec_dir, name = walled
    fields = dict(exec_file=str(exec_dir / "task.sh"), exec_directory=str(exec_dir), type="normal",
                  clusters={name: {}})
    too_long = cigri.submit(cigri.jdl("too-long", walltime="00:20:00", params=["t0", "t1", "t2"], **fields))
    fits = cigri.submit(cigri.jdl("fits", walltime="00:05:00", params=["f0", "f1"], **fields))
    cigri.cycle()
    assert cigri.stat(too_long)["tasks"]["pending"] == 3
    assert not [job for job in pending_in("walled") if "PerJob" in job]  # cancelled, not left pending
    with sqlite3.connect(cigri.home / "cigri.db") as db:
        events = dict(db.execute("SELECT code, message FROM events WHERE campaign_id = ?", [too_long]))
    assert set(events) == {"SUBMISSION_ERROR"}, events
    assert "pending reason QOSMaxWallDurationPerJobLimit" in events["SUBMISSION_ERROR"]
    cigri.drain(fits, timeout=120)
    assert (cigri.stat(too_long)["state"], cigri.stat(fits)["state"]) == ("in_treatment", "terminated")
    assert cigri.stat(too_long)["tasks"]["pending"] == 3
    assert runs_per_task(exec_dir) == Counter({"f0": 1, "f1": 1})
    cigri.run("griddel", str(too_long))
