"""A batch the cluster refuses goes back to the bag (issue #33), on the real OAR REST cluster,
through the real commands.

The refused jobs are forgotten, their tasks go back to the head of the bag with no attempt
counted, and an open ``SUBMISSION_ERROR`` with OAR's words keeps the cluster out of the campaign
until ``gridevents --fix``: the campaign's other clusters run the tasks; with none left they wait
in the bag, never ``failed``. Before, the batch's tasks failed and the campaign ended ``failed``.
OAR refuses a job type it does not know (``cluster_job_type = ["bogus"]``, an admission rule).

And a campaign whose ``exec_directory`` is ``/tmp`` runs there over OAR's REST API: oarapi
copies its script from its temporary directory, ``/tmp``, into the directory it launches from,
which was the campaign's: ``cp: … are the same file``, and the batch was refused.
"""

from __future__ import annotations

import json
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness import Cigri, clusters_dir, marker_exec_dir, on_systems, runs_per_task

pytestmark = [pytest.mark.slow, on_systems("oar")]
REFUSING = {"cluster_job_type": ["bogus"]}  # OAR: "unknown job type: bogus"
TASK_FIELDS = {"walltime": "00:05:00", "type": "normal"}


def use_clusters(cigri: Cigri, *extra: str) -> None:
    """cigri's configuration: the local pool (4 slots, sending only what it can start at once)
    and oar-rest, every job as the cluster's account."""
    with (clusters_dir() / "single.toml").open("rb") as handle:
        options = tomllib.load(handle)["clusters"]["oar-rest"]
    lines = ['[clusters.local]', 'backend = "local"', "slots = 4", "max_waiting = 0", "[runner]", "tap_initial = 20",
             "[clusters.oar-rest]", *(f"{key} = {json.dumps(value)}" for key, value in options.items()), *extra]
    cigri.config.write_text("\n".join(lines) + "\n")


def refusals(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["code"] == "SUBMISSION_ERROR"]


def test_a_refused_batch_goes_back_to_the_bag_for_the_campaigns_other_clusters(cigri: Cigri) -> None:
    """12 tasks over the local pool (4 at once) and oar-rest, which refuses its share: those
    tasks run on the local pool instead, each once and with one attempt; the campaign
    terminates; one open event names oar-rest and OAR's words, and no job went there again."""
    use_clusters(cigri)
    exec_dir = marker_exec_dir("refused")
    tasks = [f"t{i:02d}" for i in range(12)]
    campaign_id = cigri.submit(cigri.jdl("refused", exec_file=str(exec_dir / "task.sh"), exec_directory=str(exec_dir),
                                         params=tasks, clusters={"oar-rest": REFUSING, "local": {}}, **TASK_FIELDS))
    cigri.cycle()
    first = cigri.stat(campaign_id)["tasks"]
    assert first["pending"] > 0 and first["failed"] == 0, first  # the refused ones, back in the bag
    summary = cigri.drain(campaign_id, timeout=180)
    assert summary["state"] == "terminated" and summary["tasks"]["terminated"] == len(tasks), summary
    assert runs_per_task(exec_dir) == Counter(dict.fromkeys(tasks, 1))
    rows = cigri.tasks(campaign_id)
    assert {t["attempts"] for t in rows} == {1}
    assert {job["cluster"] for t in rows for job in t["jobs"]} == {"local"}
    (event,) = refusals(cigri.events(campaign_id))
    assert event["state"] == "open" and event["cluster"] == "oar-rest" and event["count"] == 1, event
    assert "unknown job type: bogus" in event["message"] and "other clusters (local)" in event["message"]


def test_with_no_cluster_left_the_tasks_wait_in_the_bag_and_say_why_until_the_event_is_fixed(cigri: Cigri) -> None:
    """A campaign on oar-rest alone: refused, its tasks are pending, not failed, cycle after cycle,
    with no job sent again; ``gridstat --why`` and the event say why and what to do. Fixed, the
    cluster is tried again (and refuses again: a new event)."""
    use_clusters(cigri)
    exec_dir = marker_exec_dir("stranded")
    campaign_id = cigri.submit(cigri.jdl("stranded", exec_file=str(exec_dir / "task.sh"), exec_directory=str(exec_dir),
                                         params=["a", "b", "c"], clusters={"oar-rest": REFUSING}, **TASK_FIELDS))
    for _ in range(3):
        cigri.cycle()
    stat = cigri.stat(campaign_id)
    assert stat["state"] == "in_treatment" and stat["tasks"]["pending"] == 3 and stat["tasks"]["failed"] == 0, stat
    (event,) = refusals(cigri.events(campaign_id))
    assert event["count"] == 1 and event["severity"] == "high", event  # refused once, then left alone
    assert "no other cluster of the campaign takes its jobs" in event["message"]
    assert f"griddel {campaign_id}" in event["message"] and "gridevents --fix" in event["message"]
    assert not cigri.tasks(campaign_id)[0]["jobs"]  # forgotten: never sent again
    why = cigri.run("gridstat", "-c", str(campaign_id), "--why").stdout
    assert "why: no cluster takes its jobs now" in why and "SUBMISSION_ERROR on oar-rest: cluster oar-rest refused" \
        in why, why

    cigri.run("gridevents", "--fix", "-e", str(event["id"]))
    cigri.cycle()
    again = refusals(cigri.json("gridevents", "-c", str(campaign_id), "-a"))
    assert [e["state"] for e in again] == ["closed", "open"], again
    assert cigri.stat(campaign_id)["tasks"]["pending"] == 3 and not runs_per_task(exec_dir)
    cigri.run("griddel", str(campaign_id))


def test_a_campaign_in_tmp_runs_there_over_oars_rest_api(cigri: Cigri) -> None:
    """``exec_directory = /tmp`` on oar-rest: every task runs, once, in /tmp."""
    use_clusters(cigri)
    exec_dir = marker_exec_dir("tmp")
    program = exec_dir / "where.sh"
    program.write_text(f'#!/bin/sh\npwd > "{exec_dir}/ran.$1.$$"\n')
    program.chmod(0o755)
    campaign_id = cigri.submit(cigri.jdl("in-tmp", exec_file=str(program), exec_directory="/tmp",
                                         params=["a", "b", "c"], clusters={"oar-rest": {}}, **TASK_FIELDS))
    try:
        summary = cigri.drain(campaign_id, timeout=180)
    finally:
        for task in cigri.tasks(campaign_id):
            for job in task["jobs"]:
                for path in Path("/tmp").glob(f"cigri.{job['id']}.*"):
                    path.unlink()
    assert summary["state"] == "terminated" and summary["tasks"]["terminated"] == 3, summary
    ran = sorted(exec_dir.glob("ran.*"))
    assert [path.name.split(".")[1] for path in ran] == ["a", "b", "c"]
    assert {path.read_text() for path in ran} == {"/tmp\n"}
    assert not refusals(cigri.json("gridevents", "-c", str(campaign_id), "-a"))
