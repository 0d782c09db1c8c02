"""Flood control and stress on real local clusters: real pool daemons, real jobs, real cycles."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_nikita import _cycle_until as cycle_until
from test_submit import USER

from cigri import api, config, predictor
from cigri.backends import JobSpec
from cigri.cycle_context import gather
from cigri.grid import Grid, open_grid
from cigri.states import JobState, KillReason, TaskState


@pytest.fixture
def grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Grid]:
    """Two local clusters: ``busy`` has one slot and lets jobs wait 0.3 s, ``spare`` four."""
    for layer in ("SYSTEM_FILE", "USER_FILE"):
        monkeypatch.setattr(config, layer, tmp_path / "absent.toml")
    (tmp_path / "cigri.toml").write_text(
        '[clusters.busy]\nbackend = "local"\nslots = 1\nremote_waiting_timeout = 0.3\n'
        '[clusters.spare]\nbackend = "local"\nslots = 4\n')
    g = open_grid(config.load(environ={"CIGRI_CONFIG": str(tmp_path / "cigri.toml"),
                                       "CIGRI_HOME": str(tmp_path / "home")}))
    yield g
    for cluster_id in g.cluster_ids().values():  # stop whatever still runs
        backend = g.backend(cluster_id)
        ids = [r[0] for r in g.db.execute("SELECT remote_id FROM jobs WHERE cluster_id = ? AND remote_id IS NOT NULL",
                                          [cluster_id])]
        backend.cancel(ids + ["outside-0", "outside-1", "outside-2"])
    g.close()


def test_jobs_waiting_past_the_timeout_are_killed_and_rerun_elsewhere(grid: Grid, tmp_path: Path) -> None:
    jdl = {"name": "flood", "exec_file": "/bin/sleep", "params": [f"1.{i} " for i in range(8)],
           "exec_directory": str(tmp_path), "finalize": False,  # no replica of the stragglers
           "clusters": {"busy": {}, "spare": {}}}
    campaign_id, _ = api.submit(grid, json.dumps(jdl), base_dir=tmp_path, user=USER)
    busy, spare = grid.cluster_ids()["busy"], grid.cluster_ids()["spare"]

    def over() -> bool:
        return grid.db.execute("SELECT state FROM campaigns WHERE id = ?", [campaign_id]).fetchone()[0] != "in_treatment"

    cycle_until(grid, over, "the campaign ends")
    flooded = grid.db.execute(
        "SELECT task_id, state FROM jobs WHERE campaign_id = ? AND cluster_id = ? AND kill_reason = ?",
        [campaign_id, busy, KillReason.FLOOD]).fetchall()
    assert flooded, "no job waited past busy's 0.3 s timeout"
    assert {state for _, state in flooded} == {JobState.PREEMPTED}
    for task_id, _ in flooded:
        last = grid.db.execute("SELECT cluster_id, state FROM jobs WHERE task_id = ? ORDER BY id DESC LIMIT 1",
                               [task_id]).fetchone()
        assert last == (spare, JobState.TERMINATED), f"task {task_id} re-ran as {last}"
    tasks = grid.db.execute("SELECT state, max(attempts) FROM tasks WHERE campaign_id = ? GROUP BY state",
                            [campaign_id]).fetchall()
    assert [state for state, _ in tasks] == [TaskState.TERMINATED]
    assert tasks[0][1] <= 1, "a flood kill was charged as an attempt"
    penalties = predictor.affinity_penalties(grid.db, [campaign_id])
    assert penalties[(campaign_id, busy)] == pytest.approx(len(flooded), rel=0.01)  # half-life: 900 s
    assert (campaign_id, spare) not in penalties
    per_cluster = {c["cluster"]: c for c in api.campaign_detail(grid, campaign_id, user=USER)["clusters"]}
    assert per_cluster["busy"]["affinity_penalty"] == pytest.approx(len(flooded), rel=0.01)
    # shunned: no queue on busy, at most its one slot when free (a job there starts at once)
    assert per_cluster["busy"]["tap"] <= 1 and per_cluster["spare"]["tap"] > 0


def outside_job(grid: Grid, cluster_id: int, key: str, directory: Path) -> None:
    """A job of the cluster's own users: submitted to the pool directly, not through cigri."""
    grid.backend(cluster_id).submit([JobSpec(key=key, batch=key, name=key, argv=("/bin/sleep", "30"),
                                             directory=str(directory), walltime_seconds=60, resources="core=1")])


def test_a_stressed_cluster_gets_no_new_job_until_it_recovers(grid: Grid, tmp_path: Path) -> None:
    jdl = {"name": "stress", "exec_file": "/bin/true", "nb_jobs": 5, "exec_directory": str(tmp_path),
           "clusters": {"busy": {}, "spare": {}}}
    campaign_id, _ = api.submit(grid, json.dumps(jdl), base_dir=tmp_path, user=USER)
    busy, spare = grid.cluster_ids()["busy"], grid.cluster_ids()["spare"]
    for i in range(3):  # one runs on busy's single slot, two wait: 2 waiting / (0 free + 1) > 1
        outside_job(grid, busy, f"outside-{i}", tmp_path)

    def stressed_events() -> list[tuple[str]]:
        return grid.db.execute("SELECT state FROM events WHERE code = 'CLUSTER_STRESSED' AND cluster_id = ?",
                               [busy]).fetchall()

    deadline = time.monotonic() + 10
    while grid.backend(busy).capacity().queued_jobs < 2:
        assert time.monotonic() < deadline, "the pool did not queue the outside jobs"
        time.sleep(0.05)
    predictor.predict(gather(grid))
    assert stressed_events() == [("open",)]
    assert predictor.taps(grid.db, campaign_id) == {busy: 0, spare: 3}
    grid.backend(busy).cancel(["outside-0", "outside-1", "outside-2"])
    deadline = time.monotonic() + 10
    while grid.backend(busy).capacity().queued_jobs:
        assert time.monotonic() < deadline, "the pool did not cancel the outside jobs"
        time.sleep(0.05)
    predictor.predict(gather(grid))
    assert stressed_events() == [("closed",)]
    assert predictor.taps(grid.db, campaign_id)[busy] == 3  # reopened at the initial rate


def test_a_shunned_cluster_still_takes_the_jobs_its_free_slots_start_at_once(grid: Grid, tmp_path: Path) -> None:
    """A flood penalty sends the campaign's jobs elsewhere, but it must not leave a core idle:
    the shunned cluster's tap is its free slots (jobs that do not wait), 0 when it is full."""
    jdl = {"name": "shun", "exec_file": "/bin/true", "nb_jobs": 5, "exec_directory": str(tmp_path),
           "clusters": {"busy": {}, "spare": {}}}
    campaign_id, _ = api.submit(grid, json.dumps(jdl), base_dir=tmp_path, user=USER)
    busy, spare = grid.cluster_ids()["busy"], grid.cluster_ids()["spare"]
    grid.db.execute("INSERT INTO affinity_penalties(campaign_id, cluster_id, penalty, updated_at, half_life) "
                    "VALUES (?, ?, 4, ?, 900)", [campaign_id, busy, time.time()])
    grid.db.conn.commit()
    predictor.predict(gather(grid))
    assert predictor.taps(grid.db, campaign_id) == {busy: 1, spare: 3}
    outside_job(grid, busy, "outside-0", tmp_path)
    deadline = time.monotonic() + 10
    while grid.backend(busy).capacity().free_slots:
        assert time.monotonic() < deadline, "the pool did not start the outside job"
        time.sleep(0.05)
    predictor.predict(gather(grid))
    assert predictor.taps(grid.db, campaign_id)[busy] == 0
