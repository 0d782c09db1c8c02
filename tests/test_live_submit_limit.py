"""A real site's submit limit: slurm-b's partition ``capped``, whose partition QOS lets the test
user have :data:`CAP` jobs queued or running (``MaxSubmitJobsPerUser``, enforced by slurmdbd;
``tests/clusters/up.sh`` writes the two cluster entries into ``capped.toml``), over SSH and REST.

The first batch is bigger than the cap: sbatch (or slurmrestd) refuses it whole, the runner
halves it until what fits is sent, learns the cap exactly and is never refused again; every
task runs once and none fails. Before this, the refusal failed the batch's tasks."""

from __future__ import annotations

import json
import sqlite3
import time
import tomllib
from collections import Counter
from pathlib import Path

import pytest

from cigri import config as configuration
from cigri.cycle import run_cycle
from cigri.grid import open_grid

from harness import Cigri, clusters_dir, marker_exec_dir, runs_per_task

CAP = 6  # tests/clusters/up.sh: QOS capped, MaxSubmitJobsPerUser
TASKS = 14
pytestmark = pytest.mark.slow


@pytest.fixture(params=["slurm-b-capped-ssh", "slurm-b-capped-rest"])
def capped(cigri: Cigri, request: pytest.FixtureRequest) -> tuple[Cigri, Path, str]:
    where = clusters_dir()
    name = request.param
    with (where / "capped.toml").open("rb") as handle:
        options = tomllib.load(handle)["clusters"][name]
    # a first batch of 10 jobs on a cluster that takes 6
    lines = ["[runner]", "tap_initial = 10", f"[clusters.{name}]",
             *(f"{key} = {json.dumps(value)}" for key, value in options.items())]
    cigri.config.write_text("\n".join(lines) + "\n")
    return cigri, marker_exec_dir("capped", after="sleep 2\n"), name


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


def test_a_job_over_the_sites_walltime_limit_fails_and_is_no_submit_limit(capped: tuple[Cigri, Path, str]) -> None:
    """The QOS's MaxWall (10 min, DenyOnLimit) refuses a 20-minute job with the same policy
    words (slurmrestd: the same error 2050): its tasks fail at once, nothing is learned."""
    cigri, exec_dir, name = capped
    campaign_id = cigri.submit(cigri.jdl("too-long", exec_file=str(exec_dir / "task.sh"),
                                         exec_directory=str(exec_dir), walltime="00:20:00", type="normal",
                                         params=["t0", "t1", "t2"], clusters={name: {}}))
    for _ in range(3):
        cigri.cycle()
    assert cigri.stat(campaign_id)["state"] == "failed"
    with sqlite3.connect(cigri.home / "cigri.db") as db:
        events = dict(db.execute("SELECT code, message FROM events WHERE code != 'CAMPAIGN_FAILED'"))
        learned = db.execute("SELECT submit_limit FROM clusters WHERE name = ?", [name]).fetchone()[0]
    assert set(events) == {"SUBMISSION_ERROR"} and "QOS policy" in events["SUBMISSION_ERROR"], events
    assert learned is None and not runs_per_task(exec_dir)
