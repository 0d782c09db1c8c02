"""gridstat must cost the same on a million tasks as on ten: every query it runs on the big
tables (tasks, jobs) must be an index SEARCH, never a SCAN. Checked on the real query plans;
bench/gridstat.py measures the time on a real 1,000,000-task campaign."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from cigri import api, config, predictor
from cigri.config import ClassConfig
from cigri.cycle import run_cycle
from cigri.cycle_context import gather
from cigri.grid import open_grid
from cigri.states import JOB_ACTIVE, JobState
from cigri.users import acting_user

USER = acting_user()  # the local cluster takes the campaigns of the account running cigri

BIG_TABLES = ("tasks", "jobs")
# what a grid accumulates for ever: the jobs and tasks, the events and the jobs they covered,
# the messages sent, every (campaign, cluster) pair's taps, health, stats and counts
HISTORY = (*BIG_TABLES, "events", "event_jobs", "outbox", "taps", "campaign_cluster_health", "campaign_stats",
           "counts", "affinity_penalties", "task_blocks", "task_counts")
ENDED = [s for s in JobState if s not in JOB_ACTIVE]


@pytest.fixture
def unanalysed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A grid with one campaign, planned as cigri runs it: without statistics."""
    monkeypatch.setenv("CIGRI_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CIGRI_CONFIG", raising=False)
    monkeypatch.setenv("CIGRI_NOTIFY_WEBHOOK_ALLOW", "127.0.0.0/8")  # its webhook is a closed port there
    g = open_grid(config.load())
    jdl = {"name": "plans", "nb_jobs": 50, "exec_file": "/bin/true", "clusters": {"local": {}}}
    api.submit(g, json.dumps(jdl), base_dir=tmp_path, user=USER)
    yield g
    g.close()


@pytest.fixture
def grid(unanalysed):
    """The same, with statistics gathered: the plans must hold either way."""
    unanalysed.db.execute("ANALYZE")
    return unanalysed


def test_gridstat_queries_never_scan_tasks_or_jobs(grid) -> None:
    seen: list[str] = []
    grid.db.conn.set_trace_callback(seen.append)
    api.campaign_detail(grid, 1, user=USER)
    api.list_campaigns(grid, user=USER, include_finished=True)
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


@pytest.mark.parametrize("analysed", [False, True])
def test_classes_and_users_search_every_table_they_read(unanalysed, analysed: bool) -> None:
    """``cigri classes`` and ``cigri users`` read the active campaigns, their bags, held jobs and
    (in a fixed_share class, for the cores held against the allotment) their settings. As cigri
    runs, without statistics, each goes through an index; with statistics the planner may scan
    a one-row table, never tasks or jobs."""
    unanalysed.config = replace(unanalysed.config, classes=(ClassConfig("default", policy="fixed_share"),))
    if analysed:
        unanalysed.db.execute("ANALYZE")
    seen: list[str] = []
    unanalysed.db.conn.set_trace_callback(seen.append)
    api.list_classes(unanalysed)
    api.list_users(unanalysed)
    unanalysed.db.conn.set_trace_callback(None)
    assert_no_scan(unanalysed, seen)
    assert any("FROM campaign_properties" in statement for statement in seen)
    scans = [f"{line}    <- {statement[:90]}" for statement, line in planned(unanalysed, seen)
             if line.startswith("SCAN")]
    assert analysed or not scans, "\n".join(scans)


def test_a_cycle_scans_nothing_that_accumulates(unanalysed) -> None:
    """Every statement of a real cycle reads the history tables through an index search, or
    scans a partial index that holds only what is live (the pairs blacklisted now, the
    messages still to send). tests/test_cycle_cost.py measures the searches that are not
    selective enough."""
    api.subscribe(unanalysed, user=USER, kind="webhook", target="http://127.0.0.1:9/hook", severity="low")
    seen: list[str] = []
    unanalysed.db.conn.set_trace_callback(seen.append)
    run_cycle(unanalysed)
    unanalysed.db.conn.set_trace_callback(None)
    partial = {name for name, sql in unanalysed.db.conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index'")
               if sql and " WHERE " in sql}
    scans = []
    for statement, line in planned(unanalysed, seen):
        tables = {alias or table: table for table, alias in re.findall(
            r"\b(?:FROM|JOIN|UPDATE|INTO)\s+(\w+)(?:\s+(?:AS\s+)?(?!INDEXED|WHERE|ON|JOIN|SET|VALUES|GROUP|ORDER|LIMIT)(\w+))?",
            statement, re.IGNORECASE)}
        words = line.split()
        if words[0] == "SCAN" and tables.get(words[1], words[1]) in HISTORY \
                and not any(f"INDEX {index}" in line for index in partial):
            scans.append(f"{line}    <- {statement[:120]}")
        # a search of the jobs by an ended state reads every job that ever ended so
        if "USING INDEX jobs_active (state=?" in line and _jobs_by_ended_state(statement, tables):
            scans.append(f"{line}    <- {statement[:120]}")
    assert not scans, "\n".join(scans)


def _jobs_by_ended_state(statement: str, tables: dict[str, str]) -> bool:
    """The statement asks for jobs (not tasks) in an ended state (``state = '...'`` or ``IN``)."""
    for alias, one, many in re.findall(r"(?:\b(\w+)\.)?\bstate\s*(?:=\s*'(\w+)'|IN\s*\(([^)]*)\))", statement,
                                       re.IGNORECASE):
        table = tables.get(alias, alias) if alias else next(iter(tables.values()), "")
        if table == "jobs" and any(f"'{s}'" in f"'{one}'" + many for s in ENDED):
            return True
    return False


def planned(grid, seen: list[str]) -> Iterator[tuple[str, str]]:
    """``(statement, plan line)`` of every traced statement that reads or writes a table. The
    trace shows statements with their parameters inlined: they are planned as they ran."""
    assert seen, "no statement traced"
    for statement in seen:
        if statement.lstrip().upper().startswith(("SELECT", "UPDATE", "DELETE", "INSERT", "WITH")):
            for row in grid.db.conn.execute("EXPLAIN QUERY PLAN " + statement):
                yield statement, row[3]


def assert_no_scan(grid, seen: list[str]) -> None:
    plan_lines = [f"{line}    <- {statement[:90]}" for statement, line in planned(grid, seen)
                  if any(t in statement for t in BIG_TABLES)]
    scans = [line for line in plan_lines if line.startswith("SCAN") and any(f"SCAN {t}" in line for t in BIG_TABLES)]
    assert not scans, "\n".join(scans)
    assert any(line.startswith("SEARCH") for line in plan_lines), "no statement read tasks or jobs"
