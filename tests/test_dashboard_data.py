"""What the dashboard's plots are drawn from, on real SQLite files: the grid's usage series
(means of at most a few samples per bucket, found by index seeks), a campaign's history, the
failed tasks of a campaign through the bag's index, the newest campaigns first; and the plots'
axes. The pages themselves are tested in a real browser (``test_dashboard.py``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from cigri import api
from cigri import db as database
from cigri.db import counts as stored_counts
from cigri.config import load
from cigri.errors import InputError, NotFound
from cigri.grid import Grid
from cigri.server.pages import campaigns, plots
from cigri.server.pages import grid as grid_page

NOW = 1_800_000_000.0


@pytest.fixture
def grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Grid:
    monkeypatch.setenv("CIGRI_HOME", str(tmp_path))
    (tmp_path / "cigri.toml").write_text('[cigri]\ncycle_period = 10\nadmins = "root"\n')
    monkeypatch.setenv("CIGRI_CONFIG", str(tmp_path / "cigri.toml"))
    db = database.connect(tmp_path / "cigri.db")
    with database.write(db) as conn:
        conn.execute("INSERT INTO clusters(id, name, backend) VALUES (1, 'a', 'local'), (2, 'b', 'local')")
    return Grid(load(), db)


def _samples(grid: Grid, cluster_id: int, since: float, until: float, every: float,
             running: Callable[[float], int]) -> None:
    with database.write(grid.db) as conn:
        at = since
        while at < until:
            conn.execute("INSERT INTO counts(at, cluster_id, waiting, running, total_slots, free_slots) "
                         "VALUES (?, ?, 0, ?, 100, ?)", [at, cluster_id, running(at), 100 - running(at)])
            at += every


def test_grid_usage_averages_every_sample_of_a_short_window(grid: Grid) -> None:
    _samples(grid, 1, NOW - 3600, NOW, 10, lambda at: int(at // 10) % 7)
    usage = api.grid_usage(grid, since=NOW - 3600, until=NOW, points=60)
    assert usage["step"] == 60 and usage["clusters"]["b"] == []
    buckets = usage["clusters"]["a"]
    assert len(buckets) == 60 and {b["samples"] for b in buckets} == {6}
    for bucket in buckets:  # each the exact mean of its six samples
        values = [int(at // 10) % 7 for at in range(int(bucket["at"]), int(bucket["at"]) + 60, 10)]
        assert bucket["cigri_running"] == round(sum(values) / 6, 3)
        assert bucket["used_slots"] == bucket["cigri_running"] and bucket["total_slots"] == 100


def test_grid_usage_of_a_month_reads_at_most_eight_samples_a_bucket(grid: Grid) -> None:
    """A month every 10 s (259,200 samples) in 100 buckets: 8 evenly spread samples each, so
    their mean follows the series; reading all of them took seven times longer."""
    month = 30 * 86400
    _samples(grid, 1, NOW - month, NOW, 10, lambda at: 50 if (at // 86400) % 2 else 10)
    usage = api.grid_usage(grid, since=NOW - month, until=NOW, points=100)
    buckets = usage["clusters"]["a"]
    assert len(buckets) == 100 and {b["samples"] for b in buckets} == {8}
    for bucket in buckets:
        day_start, day_end = bucket["at"] // 86400, (bucket["at"] + usage["step"] - 1) // 86400
        if day_start == day_end:  # a bucket within one day has that day's value exactly
            assert bucket["cigri_running"] == (50 if day_start % 2 else 10)
    plan = " ".join(row[3] for row in grid.db.execute(
        "EXPLAIN QUERY PLAN " + stored_counts._series(grid.db.conn),
        {"since": 0, "until": 1, "step": 1, "sub": 1, "instants": 1, "cluster": 1}).fetchall())
    assert "INDEX counts_by_cluster" in plan and "SCAN counts" not in plan and "SCAN s " not in plan


def test_grid_usage_refuses_a_bad_window(grid: Grid) -> None:
    with pytest.raises(InputError, match="from < to"):
        api.grid_usage(grid, since=NOW, until=NOW - 1)


def _campaign(grid: Grid, user: str, state: str, ends: list[tuple[int, float, str]], tasks: int) -> int:
    """A campaign whose task jobs ended as ``ends`` says: (cluster id, finished_at, job state)."""
    with database.write(grid.db) as conn:
        campaign_id = conn.execute(
            "INSERT INTO campaigns(name, user, state, jdl, nb_tasks, submitted_at, started_at, finished_at) "
            "VALUES ('c', ?, ?, '{}', ?, ?, ?, ?)", [user, state, tasks, NOW - 3600, NOW - 3500,
                                                     NOW if state != "in_treatment" else None]).lastrowid
        first = (conn.execute("SELECT max(id) FROM tasks").fetchone()[0] or 0) + 1
        for k in range(tasks):
            ended = k < len(ends)
            conn.execute("INSERT INTO tasks(id, campaign_id, name, param, state) VALUES (?, ?, ?, ?, ?)",
                         [first + k, campaign_id, f"t{k}", f"t{k}", ends[k][2] if ended else "pending"])
            if ended:
                cluster_id, at, job_state = ends[k]
                conn.execute("INSERT INTO jobs(campaign_id, task_id, cluster_id, state, created_at, started_at, "
                             "finished_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                             [campaign_id, first + k, cluster_id, job_state, at - 60, at - 50, at])
        conn.execute("INSERT INTO task_blocks(campaign_id, first_id, last_id, next_fresh) VALUES (?, ?, ?, ?)",
                     [campaign_id, first, first + tasks - 1, first + len(ends)])
    return campaign_id


def test_a_campaigns_history_counts_its_terminated_tasks_per_bucket_and_cluster(grid: Grid) -> None:
    ends = [(1, NOW - 3000 + 10 * k, "terminated") for k in range(30)] + [(2, NOW - 600, "terminated"),
                                                                         (2, NOW - 590, "failed")]
    campaign_id = _campaign(grid, "alice", "failed", ends, 40)
    history = api.campaign_history(grid, campaign_id, user="alice", points=10)
    assert history["from"] == NOW - 3500 and history["to"] == NOW + 1 and history["step"] == 350.1
    assert history["tasks"] == 40
    assert sum(row["terminated"] for row in history["clusters"]["a"]) == 30
    assert history["clusters"]["b"] == [{"at": round(NOW - 3500 + 8 * 350.1, 3), "terminated": 1,
                                         "per_hour": round(3600 / 350.1, 3)}]  # the failed job is not a completion
    assert [row["cumulative"] for row in history["progress"]][-1] == 31
    assert [row["failed"] for row in history["progress"]] == [0] * 8 + [1, 0]  # at its job's end
    assert history["progress"][-1]["ended"] == 32
    # The progress as the campaign's figures count it (terminated or failed): the plot ended at
    # 77.5 % (terminated only) where the page's header said 80 %.
    assert history["progress"][-1]["percent"] == api.campaign_summary(grid, campaign_id, user="alice")["progress"] \
        == 80.0
    assert all(a["cumulative"] <= b["cumulative"] for a, b in zip(history["progress"], history["progress"][1:]))
    later = api.campaign_history(grid, campaign_id, user="alice", since=NOW - 1000, until=NOW, points=2)
    assert later["progress"][0]["cumulative"] == 31 and later["progress"][0]["terminated"] == 1  # 30 before
    cut = api.campaign_history(grid, campaign_id, user="alice", since=NOW - 700, until=NOW - 595, points=2)
    assert cut["step"] == 60  # the second bucket has 45 s before the window's end: one task in 45 s, not in 60
    assert cut["clusters"]["b"] == [{"at": NOW - 640, "terminated": 1, "per_hour": 80.0}]
    assert cut["progress"][-1]["per_hour"] == 80.0
    before = api.campaign_history(grid, campaign_id, user="alice", since=NOW - 3500, until=NOW - 595, points=1)
    assert before["progress"][-1]["ended"] == 31 and before["progress"][-1]["failed"] == 0  # failed later
    with pytest.raises(NotFound, match=f"campaign {campaign_id}: no such campaign"):
        api.campaign_history(grid, campaign_id, user="bob")


def test_the_failed_tasks_of_a_campaign_come_through_the_bags_index(grid: Grid) -> None:
    ends = [(1, NOW - 100, "failed" if k % 3 == 0 else "terminated") for k in range(9)]
    campaign_id = _campaign(grid, "alice", "failed", ends, 20)
    failed = list(api.campaign_tasks(grid, campaign_id, user="alice", states=("failed",)))
    assert [t["name"] for t in failed] == ["t0", "t3", "t6"] and all(t["jobs"] for t in failed)
    assert len(list(api.campaign_tasks(grid, campaign_id, user="alice", states=("pending",)))) == 11  # fresh ones too
    assert [t["name"] for t in api.campaign_tasks(grid, campaign_id, user="alice", states=("failed",), limit=1,
                                                  offset=1)] == ["t3"]
    with pytest.raises(InputError, match="state: expected one of"):
        list(api.campaign_tasks(grid, campaign_id, user="alice", states=("broken",)))


def test_a_page_past_what_sqlite_can_bind_is_bad_input_not_a_crash(grid: Grid) -> None:
    """The dashboard's ``?page=`` times its page size is the offset: ``page=10**18`` was an
    OverflowError, a 500 with a traceback."""
    campaign_id = _campaign(grid, "alice", "failed", [(1, NOW - 100, "failed")], 2)
    with pytest.raises(InputError, match="offset: must be >= 0 and < 2\\*\\*63"):
        list(api.campaign_tasks(grid, campaign_id, user="alice", limit=51, offset=10**20))
    with pytest.raises(InputError, match="offset"):
        api.list_campaigns(grid, include_finished=True, limit=51, offset=10**20)
    with pytest.raises(InputError, match="limit"):
        list(api.campaign_tasks(grid, campaign_id, user="alice", limit=2**63))
    with pytest.raises(InputError, match="offset"):  # the API's /events?offset= too
        api.list_events(grid, user="alice", offset=10**20)
    with pytest.raises(InputError, match="offset"):  # and /campaigns/N/jobs?offset=
        api.campaign_jobs(grid, campaign_id, user="alice", offset=10**20)


def test_campaigns_are_listed_newest_first_on_request(grid: Grid) -> None:
    ids = [_campaign(grid, "alice", "terminated", [], 1) for _ in range(5)]
    newest = api.list_campaigns(grid, include_finished=True, newest_first=True, limit=2, offset=1)
    assert [c["id"] for c in newest] == [ids[3], ids[2]]
    assert [c["id"] for c in api.list_campaigns(grid, include_finished=True)] == ids


def test_axes_have_round_ticks_and_lines_break_where_data_is_missing() -> None:
    assert plots.nice_ticks(0) == [0.0, 1.0]
    assert plots.nice_ticks(64) == [0, 20, 40, 60, 80]
    assert plots.nice_ticks(0.3) == pytest.approx([0, 0.1, 0.2, 0.3])
    day = plots.time_ticks(NOW - 86400, NOW)
    assert len(day) <= plots.MAX_TICKS and all(t % 10800 == 0 for t, _ in day) and day[0][1].count(":") == 1
    month = plots.time_ticks(NOW - 30 * 86400, NOW)
    assert all(t % 86400 == 0 for t, _ in month) and len(month[0][1]) == 5  # MM-DD
    chart = plots.line_chart("t", [plots.Series("s", [(NOW - 30, 1.0), (NOW - 20, None), (NOW - 10, 2.0)])],
                             since=NOW - 40, until=NOW, y_label="slots")
    assert chart.lines[0].path.count("M") == 2 and "L" not in chart.lines[0].path  # two separate points,
    assert chart.lines[0].path.count("l0 0") == 2  # each drawn as a dot
    assert not chart.empty and [t.label for t in chart.y_ticks] == ["0", "0.5", "1", "1.5", "2"]
    assert plots.line_chart("t", [plots.Series("s", [(NOW, None)])], since=NOW - 1, until=NOW,
                            y_label="x").empty
    series = [{"at": NOW - 100, "x": 3}, {"at": NOW - 60, "x": 5}]
    assert plots.buckets(series, "x", NOW - 100, NOW, 20) == [
        (NOW - 90, 3), (NOW - 70, None), (NOW - 50, 5), (NOW - 30, None), (NOW - 10, None)]


def test_lines_stay_inside_their_axes_when_the_last_bucket_is_cut_by_the_window() -> None:
    """721 s in buckets of 60 s: the 13th bucket's middle (750 s) was drawn 29 s past the x axis."""
    assert plots.buckets([{"at": NOW + 720, "x": 1}], "x", NOW, NOW + 721, 60)[-1] == (NOW + 720.5, 1)
    chart = plots.line_chart("t", [plots.Series("s", plots.buckets([{"at": NOW + 60 * i, "x": i} for i in range(13)],
                                                                    "x", NOW, NOW + 721, 60))],
                             since=NOW, until=NOW + 721, y_label="y")
    xs = [float(x) for x in re.findall(r"[ML](-?[\d.]+) ", chart.lines[0].path)]
    assert len(xs) == 13 and chart.plot_left <= min(xs) and max(xs) <= chart.plot_right


def test_the_progress_plot_ends_at_the_campaigns_progress_at_the_right_axis(grid: Grid) -> None:
    ends = [(1, NOW - 3000 + 100 * k, "terminated") for k in range(8)] + [(1, NOW - 100, "failed")] * 2
    campaign_id = _campaign(grid, "alice", "failed", ends, 10)
    history = api.campaign_history(grid, campaign_id, user="alice", points=7)
    chart = campaigns.progress_chart(history)
    ended, terminated = chart.lines
    last = re.findall(r"(-?[\d.]+) (-?[\d.]+)", ended.path)[-1]
    top, bottom = chart.y_ticks[-1].at, chart.y_ticks[0].at  # 100 % and 0 %
    assert float(last[0]) == chart.plot_right
    assert 100 * (bottom - float(last[1])) / (bottom - top) == pytest.approx(
        api.campaign_summary(grid, campaign_id, user="alice")["progress"]) == 100  # not 80 %: 2 tasks failed
    assert re.findall(r"(-?[\d.]+) (-?[\d.]+)", terminated.path)[-1][1] == f"{bottom - 0.8 * (bottom - top):.1f}"


def test_a_young_grids_default_window_is_its_life() -> None:
    day = 86_400
    assert grid_page.fitting_window(NOW - 3 * 3600, NOW) == NOW - 3 * 3600  # three hours old: its three hours
    assert grid_page.fitting_window(NOW - 40 * day, NOW) == NOW - day  # old: its last day
    assert grid_page.fitting_window(NOW - 60, NOW) == grid_page.fitting_window(None, NOW) == NOW - 600


def test_the_seed_of_the_benchmark_writes_a_consistent_past(tmp_path: Path) -> None:
    """bench/dashboard.py's seed: what gridstat reads of each campaign agrees with its jobs."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_dashboard", Path(__file__).parents[1] / "bench" / "dashboard.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    written = bench.seed(tmp_path / "cigri.db", clusters=["x", "y"], users=["u"], campaigns=40, jobs=2000, days=1,
                         period=600, paused=2, big_share=0.5, now=NOW)
    db = database.connect(tmp_path / "cigri.db")
    assert db.execute("SELECT count(*) FROM jobs").fetchone()[0] > 1900
    assert db.execute("SELECT count(*) FROM campaigns WHERE state = 'paused'").fetchone()[0] == 2
    assert len(written["failed"]) == 4 and json.loads(db.execute("SELECT jdl FROM campaigns").fetchone()[0])
    mismatched = db.execute(
        "SELECT s.campaign_id FROM campaign_stats s WHERE terminated != (SELECT count(*) FROM jobs j WHERE "
        "j.campaign_id = s.campaign_id AND j.cluster_id = s.cluster_id AND j.state = 'terminated')").fetchall()
    assert mismatched == []
    assert db.execute("SELECT count(*) FROM jobs j JOIN campaigns c ON c.id = j.campaign_id "
                      "WHERE j.finished_at > c.finished_at").fetchone()[0] == 0
