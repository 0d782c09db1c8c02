"""The counts every cycle samples stay bounded (``cigri.counts_retention_days``) and are read
back per cluster (``api.usage``, ``gridclusters --history``). Real cycles on simulated
clusters in virtual time, so that days pass in seconds and every figure is known by hand."""

from __future__ import annotations

import json
import math
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from harness import Cigri
from sqlite_utils import Database

from cigri import api, clock
from cigri import db as database
from cigri import config as configuration
from cigri.clock import VirtualClock
from cigri.cycle import run_cycle
from cigri.errors import InputError
from cigri.grid import Grid, open_grid

START = 1_767_225_600.0
PERIOD = 600.0
DAY = 86400.0
# "busy" runs the campaign's 4 long tasks on its 4 cores from the first cycle; "idle" has 8
# free cores and nothing of cigri's; "down" is blacklisted by an admin, so never sampled
CLUSTERS = {"busy": 4, "down": 2, "idle": 8}  # name: cores


def config_text(**settings: float) -> str:
    """The configuration file: a cycle period of PERIOD, taps opening at 4, CLUSTERS."""
    keys = {"cycle_period": PERIOD, **settings}
    return ("[cigri]\n" + "".join(f"{key} = {value}\n" for key, value in keys.items()) + "[runner]\ntap_initial = 4\n"
            + "".join(f'[clusters.{name}]\nbackend = "sim"\ncores = {cores}\n' for name, cores in CLUSTERS.items()))


# cycles at these seconds after the start: a sample's running jobs count until the next one
OFFSETS = (0, 100, 400, 1000, 2200)


@contextmanager
def sim_grid(start: float, environ: dict[str, str]) -> Iterator[tuple[Grid, VirtualClock]]:
    """The grid of ``environ``'s configuration on a virtual clock, with "down" blacklisted and
    a campaign of 4 tasks of 4 days (walltime 5 days) on "busy"."""
    with clock.virtual(start) as now:
        grid = open_grid(configuration.load(environ=environ, system_files=False))
        try:
            home = Path(grid.config.settings.home)
            params = home / "params.txt"
            params.write_text("".join(f"t{i} {4 * DAY}\n" for i in range(4)))
            jdl = {"name": "long", "exec_file": "/bin/true", "exec_directory": str(home), "param_file": str(params),
                   "clusters": {"busy": {"walltime": "120:00:00"}}}
            api.submit(grid, json.dumps(jdl), base_dir=home, user="alice")
            api.set_blacklist(grid, "down", "maintenance", user="root")
            yield grid, now
        finally:
            grid.close()


def environment(tmp_path: Path, **settings: float) -> dict[str, str]:
    (tmp_path / "cigri.toml").write_text(config_text(**settings))
    return {"CIGRI_CONFIG": str(tmp_path / "cigri.toml"), "CIGRI_HOME": str(tmp_path / "home")}


def cycles_at(grid: Grid, now: VirtualClock, start: float, offsets: Iterable[float]) -> None:
    for offset in offsets:
        now.advance_to(start + offset)
        run_cycle(grid)


def expected(start: float) -> list[dict[str, Any]]:
    """By hand, for the cycles at OFFSETS: "busy" samples its 4 jobs waiting at 0 (submitted in
    that cycle, after its capacity was asked: 4 free), then running on its 4 cores (0 free);
    they ran 300 + 600 + 1200 s until the next samples and a period after the last one."""
    none = dict.fromkeys(("since", "until", "mean_total_slots", "mean_free_slots", "mean_running", "max_running",
                          "mean_waiting", "cigri_job_hours"))
    return [
        {"name": "busy", "samples": 5, "since": start, "until": start + 2200, "mean_total_slots": 4.0,
         "mean_free_slots": 0.8, "mean_running": 3.2, "max_running": 4, "mean_waiting": 0.8,
         "cigri_job_hours": 4 * (300 + 600 + 1200 + PERIOD) / 3600},
        {"name": "down", "samples": 0, **none},
        {"name": "idle", "samples": 5, "since": start, "until": start + 2200, "mean_total_slots": 8.0,
         "mean_free_slots": 8.0, "mean_running": 0.0, "max_running": 0, "mean_waiting": 0.0, "cigri_job_hours": 0.0},
    ]


@pytest.mark.parametrize(("days", "kept_cycles"), [(1, 49), (0, 145)])
def test_counts_older_than_the_retention_are_deleted(tmp_path: Path, days: int, kept_cycles: int) -> None:
    """Three days of cycles every half hour (145): with a retention of one day, the samples of
    the last day's 49 cycles stay, each cycle's rows whole; with 0, every sample stays."""
    times = [i * 1800.0 for i in range(145)]
    with sim_grid(START, environment(tmp_path, counts_retention_days=days)) as (grid, now):
        cycles_at(grid, now, START, times)
        rows = grid.db.execute("SELECT at - ?, group_concat(cluster_id) FROM counts GROUP BY at ORDER BY at",
                               [START]).fetchall()
        sampled = {str(grid.cluster_ids()[name]) for name in ("busy", "idle")}
    assert [at for at, _ in rows] == times[-kept_cycles:]
    assert {frozenset(clusters.split(",")) for _, clusters in rows} == {frozenset(sampled)}


def test_the_migration_keeps_the_per_cluster_samples_only(tmp_path: Path) -> None:
    """m011: the per-campaign rows go (never read), the per-cluster ones stay with their ids."""
    conn = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    db = Database(conn)
    database.migrations.apply(db, stop_before="m011_counts_per_cluster_only")
    conn.execute("INSERT INTO clusters(id, name, backend, options) VALUES (1, 'c', 'sim', '{}')")
    conn.execute("INSERT INTO campaigns(id, name, user, state, jdl, submitted_at) "
                 "VALUES (1, 'a', 'u', 'terminated', '{}', 0)")
    conn.executemany("INSERT INTO counts(id, at, cluster_id, campaign_id, waiting, running, total_slots, free_slots) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                     [(1, 10.0, 1, None, 2, 3, 8, 1), (2, 10.0, None, 1, 2, 3, None, None),
                      (3, 40.0, 1, None, 0, 4, 8, 4)])
    database.migrations.apply(db)
    assert conn.execute("SELECT * FROM counts ORDER BY id").fetchall() == [
        (1, 10.0, 1, 2, 3, 8, 1), (3, 40.0, 1, 0, 4, 8, 4)]
    assert [row[1] for row in conn.execute("PRAGMA table_info(counts)")] == [
        "id", "at", "cluster_id", "waiting", "running", "total_slots", "free_slots"]
    assert sorted(row[1] for row in conn.execute("PRAGMA index_list(counts)")) == ["counts_by_at", "counts_by_cluster"]
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


def test_usage_figures_by_hand(tmp_path: Path) -> None:
    with sim_grid(START, environment(tmp_path)) as (grid, now):
        cycles_at(grid, now, START, OFFSETS)
        assert api.usage(grid, 1) == expected(START)
        assert [u["name"] for u in api.usage(grid, 1)] == [c["name"] for c in api.list_clusters(grid)]
        # the last half hour holds the samples at 400, 1000 and 2200 s only
        busy = api.usage(grid, 0.5)[0]
        assert (busy["samples"], busy["since"], busy["mean_running"], busy["mean_free_slots"]) == (3, START + 400, 4.0, 0.0)
        assert busy["cigri_job_hours"] == round(4 * (600 + 1200 + PERIOD) / 3600, 3)
        now.advance_to(START + 2200 + 3601)  # nothing sampled in the last hour
        assert [(u["samples"], u["since"], u["cigri_job_hours"]) for u in api.usage(grid, 1)] == [(0, None, None)] * 3


@pytest.mark.parametrize("hours", [0, -1, math.nan, math.inf])
def test_usage_needs_a_positive_window(tmp_path: Path, hours: float) -> None:
    with sim_grid(START, environment(tmp_path)) as (grid, _):
        with pytest.raises(InputError, match=r"^hours: must be > 0") as error:
            api.usage(grid, hours)
    assert error.value.exit_code == 2


def test_gridclusters_history(cigri: Cigri) -> None:
    """The samples of real cycles that ended a moment ago, read by the command: one JSON value,
    or a table; a bad window is one line and exit 2."""
    cigri.config.write_text(config_text())
    start = time.time() - OFFSETS[-1] - 1
    with sim_grid(start, cigri.env) as (grid, now):
        cycles_at(grid, now, start, OFFSETS)
    assert json.loads(cigri.run("gridclusters", "--history", "1", "--json").stdout) == expected(start)
    table = cigri.run("gridclusters", "--history", "1").stdout.splitlines()
    assert table[0].split()[:3] == ["cluster", "samples", "from"]
    assert [line.split()[:2] for line in table[1:]] == [["busy", "5"], ["down", "0"], ["idle", "5"]]
    assert table[1].split()[-5:] == ["0.8", "3.2", "4", "0.8", "3.0"]
    for bad in ("0", "-2", "nan"):
        result = cigri.run("gridclusters", "--history", bad, expect=2)
        assert result.stderr.splitlines() == [f"gridclusters: hours: must be > 0 and finite, got {float(bad)!r}"]
        assert result.stdout == ""
    assert {c["name"]: c["total_slots"] for c in cigri.json("gridclusters")} == {"busy": 4, "down": 2, "idle": 8}


@pytest.mark.parametrize("analysed", [False, True])
def test_trimming_and_reading_counts_search_an_index(tmp_path: Path, analysed: bool) -> None:
    """A cycle's delete of old samples and the reader go through counts' indexes, never a scan
    of the rows every cycle appends, whether or not the database has statistics."""
    with sim_grid(START, environment(tmp_path)) as (grid, now):
        cycles_at(grid, now, START, OFFSETS)
        if analysed:
            grid.db.execute("ANALYZE")
        seen: list[str] = []
        grid.db.conn.set_trace_callback(seen.append)
        cycles_at(grid, now, START, (2500,))
        api.usage(grid, 1)
        grid.db.conn.set_trace_callback(None)
        plans = {statement: [row[3] for row in grid.db.execute("EXPLAIN QUERY PLAN " + statement)]
                 for statement in seen if "DELETE FROM counts" in statement or "FROM counts WHERE cluster_id" in statement}
    assert len(plans) == 2, list(plans)
    lines = [line for plan in plans.values() for line in plan]
    assert not [line for line in lines if line.startswith("SCAN counts")], lines
    assert any(line.startswith("SEARCH counts USING COVERING INDEX counts_by_at (at<?)") for line in lines), lines
    assert any(line.startswith("SEARCH counts USING INDEX counts_by_cluster (cluster_id=? AND at>?)")
               for line in lines), lines
