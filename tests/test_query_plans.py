"""gridstat must cost the same on a million tasks as on ten: every query it runs on the big
tables (tasks, jobs) must be an index SEARCH, never a SCAN. Checked on the real query plans;
bench/gridstat.py measures the time on a real 1,000,000-task campaign."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cigri import api, config, predictor
from cigri.cycle_context import gather
from cigri.grid import open_grid

BIG_TABLES = ("tasks", "jobs")


@pytest.fixture
def grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CIGRI_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CIGRI_CONFIG", raising=False)
    g = open_grid(config.load())
    jdl = {"name": "plans", "nb_jobs": 50, "exec_file": "/bin/true", "clusters": {"local": {}}}
    api.submit(g, json.dumps(jdl), base_dir=tmp_path, user="alice")
    g.db.execute("ANALYZE")
    yield g
    g.close()


def test_gridstat_queries_never_scan_tasks_or_jobs(grid) -> None:
    seen: list[str] = []
    grid.db.conn.set_trace_callback(seen.append)
    api.campaign_detail(grid, 1)
    api.list_campaigns(grid, user="alice", include_finished=True)
    grid.db.conn.set_trace_callback(None)
    assert_no_scan(grid, seen)


def test_predictor_queries_never_scan_tasks_or_jobs(grid) -> None:
    """The predictor runs every cycle (taps, stress, flood) and the simulator asks it for
    figures at every step: the same rule holds."""
    ctx = gather(grid)
    seen: list[str] = []
    grid.db.conn.set_trace_callback(seen.append)
    predictor.predict(ctx)
    predictor.campaign_figures(grid.db, 1, 1e9)
    predictor.cluster_remaining(grid.db, 1, 1e9)
    predictor.throughputs(grid.db, [1], 1e9)
    predictor.affinity_penalties(grid.db, [1])
    grid.db.conn.set_trace_callback(None)
    assert_no_scan(grid, seen)


def test_a_clusters_held_jobs_are_counted_through_the_campaigns_index(grid) -> None:
    """The jobs a campaign holds on each cluster, for its per-cluster remaining time: a search
    of the campaign's active jobs in ``jobs_by_campaign``, not of every campaign's active jobs
    (``jobs_active``) nor a scan."""
    seen: list[str] = []
    grid.db.conn.set_trace_callback(seen.append)
    predictor.cluster_remaining(grid.db, 1, 1e9)
    grid.db.conn.set_trace_callback(None)
    held = [s for s in seen if "FROM jobs" in s and "'submitting'" in s]
    assert len(held) == 1
    plan = [row[3] for row in grid.db.conn.execute("EXPLAIN QUERY PLAN " + held[0])]
    assert any(line.startswith("SEARCH jobs USING INDEX jobs_by_campaign (campaign_id=? AND state=?)")
               for line in plan), plan


def assert_no_scan(grid, seen: list[str]) -> None:
    assert seen, "no statement traced"
    plan_lines = []
    for statement in seen:
        if not any(t in statement for t in BIG_TABLES):
            continue
        # the trace shows statements with their parameters inlined: plan them as they ran
        plan_lines += [f"{row[3]}    <- {statement[:90]}"
                       for row in grid.db.conn.execute("EXPLAIN QUERY PLAN " + statement)]
    scans = [line for line in plan_lines if line.startswith("SCAN") and any(f"SCAN {t}" in line for t in BIG_TABLES)]
    assert not scans, "\n".join(scans)
    assert any("SEARCH tasks" in line for line in plan_lines)
