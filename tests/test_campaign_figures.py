"""A campaign's summary figures as gridstat shows them (issue 28, "The live view and the
numbers"): a paused campaign has no rate and no ETA, a cancelled one does not show 100 %, and
a finished one keeps the throughput of its own life however the clock moves."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_predictor import ended
from test_submit import grid  # noqa: F401  (a fixture: two local clusters, "local" and "other")

from cigri import api
from cigri.grid import Grid
from cigri.users import acting_user

USER = acting_user()  # the local cluster takes the campaigns of the account running cigri

NOW = 100_000.0


def campaign(grid: Grid, tmp_path: Path, tasks: int) -> int:  # noqa: F811
    jdl = {"name": "figures", "nb_jobs": tasks, "exec_file": "/bin/true", "clusters": {"local": {}, "other": {}}}
    return api.submit(grid, json.dumps(jdl), base_dir=tmp_path, user=USER)[0]


def moving_figures(summary: dict) -> tuple:
    return summary["throughput_per_hour"], summary["remaining_seconds"], summary["eta"]


def test_a_paused_campaign_has_no_rate_and_no_eta(grid: Grid, tmp_path: Path) -> None:  # noqa: F811
    campaign_id = campaign(grid, tmp_path, 100)
    ended(grid, campaign_id, "local", [(100.0, NOW - 3000 + 100 * i) for i in range(30)])
    running = api.campaign_detail(grid, campaign_id, user=USER, now=NOW)
    assert running["throughput_per_hour"] > 0 and running["eta"] > NOW
    api.pause(grid, campaign_id, user=USER)
    for moment in (NOW, NOW + 600, NOW + 7200):  # nothing moves while it is paused
        for summary in (api.campaign_summary(grid, campaign_id, user=USER, now=moment),
                        api.campaign_detail(grid, campaign_id, user=USER, now=moment)):
            assert moving_figures(summary) == (None, None, None)
        detail = api.campaign_detail(grid, campaign_id, user=USER, now=moment)
        assert detail["throughput_per_second"] is None
        assert [moving_figures(c) for c in detail["clusters"]] == [(None, None, None)]
        assert detail["average_duration"] == pytest.approx(100.0)  # what was measured stays
    api.resume(grid, campaign_id, user=USER)
    assert moving_figures(api.campaign_summary(grid, campaign_id, user=USER, now=NOW)) == moving_figures(running)


def test_a_cancelled_campaigns_progress_counts_the_tasks_that_ran_to_an_end(grid: Grid,  # noqa: F811
                                                                            tmp_path: Path) -> None:
    campaign_id = campaign(grid, tmp_path, 199)
    ended(grid, campaign_id, "local", [(10.0, NOW - 100 + i) for i in range(5)])
    assert api.campaign_summary(grid, campaign_id, user=USER, now=NOW)["progress"] == 2.5
    api.cancel(grid, campaign_id, user=USER)
    summary = api.campaign_summary(grid, campaign_id, user=USER, now=NOW)
    assert (summary["tasks"]["terminated"], summary["tasks"]["cancelled"]) == (5, 194)
    assert summary["progress"] == 2.5  # 5 of 199, not 100 %


def test_a_finished_campaigns_throughput_is_that_of_its_own_life(grid: Grid, tmp_path: Path) -> None:  # noqa: F811
    """40 tasks over 1,000 s on local and 20 over 500 s on other, ended at NOW: 144 and 144 per
    hour, 60 tasks over the campaign's 1,000 s: 216 per hour, whenever it is asked."""
    campaign_id = campaign(grid, tmp_path, 60)
    ended(grid, campaign_id, "local", [(100.0, NOW - 900 + 900 * i / 39) for i in range(40)])
    ended(grid, campaign_id, "other", [(50.0, NOW - 450 + 450 * i / 19) for i in range(20)])
    with grid.db.conn:  # what the updator does once every task ended
        grid.db.conn.execute("UPDATE campaigns SET state = 'terminated', finished_at = ? WHERE id = ?",
                             [NOW + 5, campaign_id])
    seen = set()
    for moment in (NOW + 5, NOW + 60, NOW + 3000, NOW + 86_400):
        detail = api.campaign_detail(grid, campaign_id, user=USER, now=moment)
        assert detail["throughput_per_hour"] == pytest.approx(216.0)
        assert sorted(c["throughput_per_hour"] for c in detail["clusters"]) == [pytest.approx(144.0)] * 2
        assert (detail["remaining_seconds"], detail["eta"]) == (0.0, NOW + 5)
        seen.add(json.dumps(detail, sort_keys=True))
    assert len(seen) == 1  # the same document at every moment
