"""What cigri uses of a cluster (issue 28): its running jobs, apart from the ones it has queued
there. ``gridclusters`` and ``cigri shares`` said cigri used 8 of a cluster of 2, counting its
queued jobs as used."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import Cigri
from test_events import campaign, make_grid

from cigri import api, bag
from cigri import db as database
from cigri.grid import Grid
from cigri.states import JobState, TaskState


@pytest.fixture
def grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Grid]:
    grid = make_grid(tmp_path, monkeypatch)  # one local cluster of 2 slots
    yield grid
    grid.close()


def _eight_held(grid: Grid, tmp_path: Path) -> int:
    """A campaign of 10 tasks holding 8 jobs on the cluster of 2 slots, as cycles leave them: 2
    running, 6 sent or being sent; 2 more ended."""
    campaign_id, _ = campaign(grid, tmp_path, 10)
    states = [JobState.RUNNING] * 2 + [JobState.WAITING] * 5 + [JobState.SUBMITTING] + [JobState.TERMINATED] * 2
    with database.write(grid.db) as conn:
        for state in states:
            task_id, = bag.take(conn, campaign_id, 1)
            conn.execute("UPDATE tasks SET state = ? WHERE id = ?", [TaskState.RUNNING, task_id])
            conn.execute("INSERT INTO jobs(campaign_id, task_id, cluster_id, state, created_at) VALUES (?, ?, 1, ?, ?)",
                         [campaign_id, task_id, state, database.now()])
    return campaign_id


def test_gridclusters_tells_running_jobs_from_queued_ones(grid: Grid, tmp_path: Path) -> None:
    _eight_held(grid, tmp_path)
    [local] = api.list_clusters(grid)
    assert (local["total_slots"], local["used_by_cigri"], local["queued_by_cigri"]) == (2, 2, 6)


def test_cigri_shares_tells_running_jobs_from_queued_ones(grid: Grid, tmp_path: Path) -> None:
    """``cigri shares`` said the same: 8 running on the cluster of 2, and 8 of its cores used."""
    campaign_id = _eight_held(grid, tmp_path)
    shares = api.current_shares(grid, user="root")
    [held] = [c for c in shares["campaigns"] if c["id"] == campaign_id]
    assert (held["running"], held["queued"]) == ({"local": 2}, {"local": 6})
    [local] = shares["clusters"]  # offered: the 2 running and the 6 queued, which will take the pool's 2 free slots
    assert (local["cores"], local["running"], local["queued"], local["running_cores"]) == (8, 2, 6, 2)
    assert [(u["running"], u["queued"]) for u in shares["users"]] == [(2, 6)]


def test_gridclusters_table_has_both_columns(cigri: Cigri) -> None:
    cigri.run("cigri", "db", "init")
    header = cigri.run("gridclusters").stdout.splitlines()[0]
    assert "cigri running" in header and "cigri queued" in header and "used by cigri" not in header
    [listed] = cigri.json("gridclusters")
    assert (listed["used_by_cigri"], listed["queued_by_cigri"]) == (0, 0)
