"""A campaign's summary figures as gridstat shows them (issue 28, "The live view and the
numbers"): a cancelled one does not show 100 %."""

from __future__ import annotations

import json
from pathlib import Path

from test_predictor import ended
from test_submit import grid  # noqa: F401  (a fixture: two local clusters, "local" and "other")

from cigri import api
from cigri.grid import Grid

NOW = 100_000.0


def campaign(grid: Grid, tmp_path: Path, tasks: int) -> int:  # noqa: F811
    jdl = {"name": "figures", "nb_jobs": tasks, "exec_file": "/bin/true", "clusters": {"local": {}, "other": {}}}
    return api.submit(grid, json.dumps(jdl), base_dir=tmp_path, user="alice")[0]


def test_a_cancelled_campaigns_progress_counts_the_tasks_that_ran_to_an_end(grid: Grid,  # noqa: F811
                                                                            tmp_path: Path) -> None:
    campaign_id = campaign(grid, tmp_path, 199)
    ended(grid, campaign_id, "local", [(10.0, NOW - 100 + i) for i in range(5)])
    assert api.campaign_summary(grid, campaign_id, NOW)["progress"] == 2.5
    api.cancel(grid, campaign_id, user="alice")
    summary = api.campaign_summary(grid, campaign_id, NOW)
    assert (summary["tasks"]["terminated"], summary["tasks"]["cancelled"]) == (5, 194)
    assert summary["progress"] == 2.5  # 5 of 199, not 100 %
