"""The finalize scheduler: a campaign's straggler gets a replica, the first copy to finish wins."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

import pytest
from harness import Cigri, wait_for

from cigri import config as configuration
from cigri.errors import ConfigError
from cigri.metascheduler.schedulers.finalize import enabled

# The first copy of task "slow" takes the lock and sleeps a minute; any later copy finds the
# lock taken and ends in two seconds: only a replica can end the campaign early.
STRAGGLER = """
if [ "$1" = slow ] && mkdir "$CIGRI_WORKDIR/slow.lock" 2>/dev/null; then sleep 60; fi
sleep 2
"""


def cycle_then(cigri: Cigri, condition: Callable[[], bool]) -> bool:
    cigri.cycle()
    return condition()


def test_finalize_is_on_by_default_only_for_best_effort_campaigns() -> None:
    assert enabled({"type": "best-effort"}) and enabled({"type": "besteffort"})
    assert not enabled({"type": "normal"}) and not enabled({})
    assert not enabled({"type": "best-effort", "test_mode": True})
    assert enabled({"type": "normal", "finalize": True}) and not enabled({"type": "best-effort", "finalize": False})


def test_a_class_turns_finalize_on_or_off_and_the_jdl_overrides_it() -> None:
    config = configuration.load({"classes.gold": {"finalize": True, "default": True}, "classes.free": {"finalize": False}},
                                environ={}, system_files=False)
    by_class = {c.name: c.finalize for c in config.classes}
    assert enabled({"type": "normal"}, by_class["gold"]) and not enabled({"type": "best-effort"}, by_class["free"])
    assert enabled({"type": "best-effort", "finalize": True}, by_class["free"])
    with pytest.raises(ConfigError, match="classes.gold.finalize"):
        configuration.load({"classes.gold": {"finalize": "yes", "default": True}}, environ={}, system_files=False)


@pytest.mark.slow
def test_a_straggler_is_replicated_and_the_first_copy_to_finish_wins(cigri: Cigri) -> None:
    cigri.config.write_text(cigri.config.read_text() + "[metascheduler]\nreplica_delay = 1\n")
    program = cigri.script("straggler.sh", STRAGGLER)
    campaign = cigri.submit(cigri.jdl("tail", exec_file=str(program), type="best-effort",
                                      params=["a", "b", "c", "slow"]))
    cigri.cycle()  # the four tasks start on the four slots
    wait_for(lambda: cycle_then(cigri, lambda: cigri.stat(campaign)["replicas"] == 1), 60,
             "a replica of the straggler once a, b and c are done")
    during = cigri.stat(campaign)
    assert during["tasks"]["running"] + during["tasks"]["waiting"] == 1 and during["tasks"]["terminated"] == 3
    wait_for(lambda: cycle_then(cigri, lambda: cigri.campaign_state(campaign) == "terminated"), 60,
             "the campaign to end long before the original copy's minute")
    final = cigri.stat(campaign)
    assert final["tasks"]["terminated"] == 4 and final["tasks"]["total"] == 4  # the task counts once
    assert final["replicas"] == 0
    conn = sqlite3.connect(cigri.home / "cigri.db")
    try:
        copies = conn.execute("SELECT j.state, j.kill_reason FROM jobs j JOIN tasks t ON t.id = j.task_id "
                              "WHERE t.name = 'slow' ORDER BY j.id").fetchall()
        attempts = conn.execute("SELECT attempts FROM tasks WHERE name = 'slow'").fetchone()[0]
    finally:
        conn.close()
    assert copies == [("cancelled", "replica"), ("terminated", None)]  # the replica won, the original was killed
    assert attempts == 1  # a replica is not an attempt


@pytest.mark.slow
def test_finalize_false_in_the_jdl_leaves_the_straggler_alone(cigri: Cigri) -> None:
    program = cigri.script("quick.sh", 'sleep "$2"\n')
    campaign = cigri.submit(cigri.jdl("alone", exec_file=str(program), type="best-effort", finalize=False,
                                      params=["a 0", "b 0", "slow 3"]))
    final = cigri.drain(campaign, timeout=45)
    assert final["tasks"]["terminated"] == 3
    conn = sqlite3.connect(cigri.home / "cigri.db")
    try:
        assert conn.execute("SELECT count(*) FROM jobs WHERE kind = 'task'").fetchone()[0] == 3
    finally:
        conn.close()


@pytest.mark.slow
def test_a_straggler_past_its_walltime_is_not_replicated_again_and_fails(cigri: Cigri) -> None:
    """A replica of a task that then hits its walltime would itself be replicated before its
    own timeout, and so on: colombo judges only a task's latest copy, so the timeouts never
    counted and the campaign never ended. A task a copy of which timed out is not replicated."""
    cigri.config.write_text(cigri.config.read_text() + "[metascheduler]\nreplica_delay = 1\n")
    program = cigri.script("quick.sh", 'sleep "$2"\n')
    campaign = cigri.submit(cigri.jdl("walled", exec_file=str(program), type="best-effort", walltime="00:00:04",
                                      walltime_resubmit=0, params=["a 0", "b 0", "c 0", "slow 60"]))
    final = cigri.drain(campaign, timeout=40)
    assert (final["state"], final["tasks"]["failed"], final["tasks"]["terminated"]) == ("failed", 1, 3)
    conn = sqlite3.connect(cigri.home / "cigri.db")
    try:
        copies = [state for (state,) in conn.execute(
            "SELECT j.state FROM jobs j JOIN tasks t ON t.id = j.task_id WHERE t.name = 'slow' ORDER BY j.id")]
    finally:
        conn.close()
    assert copies == ["timeout", "timeout"], copies  # the original and its one replica
