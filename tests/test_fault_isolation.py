"""One campaign's, task's or cluster's stored data that makes a cycle step raise stops that one
only (cigri.faults): it is set aside with an event naming it and the error, every other campaign
goes on, and fixing the event tries it again.

The planted data is what reaches the database without gridsub's checks: a parameter line no
shell could split, as a CiGri import carried it over (``p06 it's``), and a campaign setting of
the wrong type, as a hand-edited database or an older cigri could leave one.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path

import pytest
from harness import Cigri, runs_per_task, size, wait_for
from service import Site

from cigri import api, config
from cigri import db as database
from cigri.cycle_context import gather
from cigri.errors import CigriError, ConfigError, InputError
from cigri.grid import open_grid


def plant(database: Path, sql: str, *args: object) -> None:
    """Write the database behind cigri's back, as an import or an admin's hand would."""
    conn = sqlite3.connect(database, timeout=30)
    try:
        with conn:
            assert conn.execute(sql, args).rowcount == 1
    finally:
        conn.close()


def unreadable(database: Path, campaign_id: int, task: str) -> None:
    """The task's parameter line becomes one with a lone quote: shlex cannot split it."""
    plant(database, "UPDATE tasks SET param = ? WHERE campaign_id = ? AND name = ?", f"{task} it's", campaign_id, task)


def open_events(database: Path, code: str) -> list[tuple[int, int | None, int | None, str, int]]:
    conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=30)
    try:
        return conn.execute("SELECT id, campaign_id, cluster_id, message, count FROM events "
                            "WHERE code = ? AND state = 'open' ORDER BY id", [code]).fetchall()
    finally:
        conn.close()


@pytest.mark.slow
def test_kill_9_beside_an_unreadable_parameter_runs_every_good_task_exactly_once() -> None:
    tasks = size(200, 1000)
    site = Site()
    try:
        site.start()
        u1, u2 = site.users
        program = site.script("mark.sh", ': > "marker.$1.$$.$(date +%s%N)"\n')
        gate = site.exec / "gate"  # the carried-over campaign's tasks wait for its planted row
        carried = site.submit(u2, site.jdl(u2, "carried-over", exec_file=str(program), params=["p05", "p06", "p07"],
                                           prologue=f"while [ ! -e {gate} ]; do sleep 0.1; done"))
        unreadable(site.home / "cigri.db", carried, "p06")
        gate.touch()
        params = site.user_file(u1, "params.txt", "".join(f"t{i:04d}\n" for i in range(tasks)))
        good = site.submit(u1, site.jdl(u1, "survivor", exec_file=str(program), param_file=str(params)))

        cycle_log = site.home / "log" / "cigri.log"

        def good_runs() -> int:
            return sum(1 for task in runs_per_task(site.exec) if task.startswith("t"))

        wait_for(lambda: good_runs() >= tasks // 3, 300, "a third of the good campaign to run",
                 seen=lambda: f"({good_runs()} ran; cycle log: "
                              f"{cycle_log.read_text()[-2000:] if cycle_log.exists() else ''})")
        site.kill(signal.SIGKILL)
        site.start()
        summary = site.drain(u1, good, timeout=600)
        assert summary["state"] == "terminated" and summary["tasks"]["terminated"] == tasks, summary
        runs = runs_per_task(site.exec)
        assert {task for task in runs if task.startswith("t")} == {f"t{i:04d}" for i in range(tasks)}
        assert [task for task, count in runs.items() if count > 1] == []

        assert site.drain(u2, carried)["state"] == "failed"  # its other tasks ran, p06 failed alone
        states = {t["name"]: t["state"] for t in site.json(u2, "gridstat", "-c", str(carried), "-f")}
        assert states == {"p05": "terminated", "p06": "failed", "p07": "terminated"}
        assert runs["p05"] == runs["p07"] == 1 and "p06" not in runs
        [(_, campaign, _, message, count)] = open_events(site.home / "cigri.db", "SET_ASIDE")
        assert (campaign, count) == (carried, 1)
        assert message.startswith("task p06 set aside and failed: its parameter line cannot be split as a shell "
                                  "would (No closing quotation)")
        logged = cycle_log.read_text()
        assert "cycle failed" not in logged and logged.count("task p06 set aside") == 1
    finally:
        site.close()


def test_a_campaign_whose_data_raises_is_set_aside_until_its_event_is_fixed(cigri: Cigri) -> None:
    program = cigri.script("mark.sh", f': > "{cigri.work}/marker.$1.$$"\n')
    bad = cigri.submit(cigri.jdl("bad", exec_file=str(program), params=["b1", "b2"]))
    doomed = cigri.submit(cigri.jdl("doomed", exec_file=str(program), params=["d1"]))
    good = cigri.submit(cigri.jdl("good", exec_file=str(program), params=[f"g{i}" for i in range(6)]))
    database = cigri.home / "cigri.db"
    for campaign_id in (bad, doomed):
        plant(database, "INSERT INTO campaign_properties(campaign_id, cluster_id, name, value) "
                        "SELECT ?, id, 'memory', '\"lots\"' FROM clusters WHERE name = 'local'", campaign_id)

    assert cigri.drain(good)["state"] == "terminated"  # the daemon's cycles never failed for it
    [(event, first, _, message, _), (_, second, _, _, _)] = open_events(database, "SET_ASIDE")
    assert (first, second) == (bad, doomed)
    assert message == ("campaign set aside: the metascheduler raised on its stored data (ValueError: invalid literal "
                       "for int() with base 10: 'lots'); no job starts and nothing is decided for it until this "
                       "event is fixed (gridevents --fix)")
    assert cigri.stat(bad)["state"] == "in_treatment" and cigri.stat(bad)["tasks"]["pending"] == 2
    assert runs_per_task(cigri.work) == {f"g{i}": 1 for i in range(6)}
    why = cigri.json("gridstat", "-c", str(bad), "--why")
    assert why["scheduled"] is False and why["reason"] == f"{message} (event {event}: gridevents --fix -e {event})"
    cigri.run("griddel", str(doomed))  # its owner may still cancel one
    assert cigri.json("cigri", "shares")["campaigns_set_aside"] == [{"campaign": bad, "event": event,
                                                                     "message": message}]
    cycles = cigri.run("cigri", "cycle", "--json")  # set aside: nothing raises again, nothing is logged again
    assert json.loads(cycles.stdout)["submitted"] == 0 and cycles.stderr == ""
    assert cigri.stat(doomed)["state"] == "cancelled"
    log = (cigri.home / "log" / "cigri.log").read_text()
    assert log.count("Traceback") == 2 and log.count(f"campaign {bad} set aside: the metascheduler raised") == 1

    plant(database, "DELETE FROM campaign_properties WHERE campaign_id = ? AND name = 'memory'", bad)
    cigri.run("gridevents", "--fix", "-e", str(event))  # its owner's act: the data is mended, try it again
    assert cigri.drain(bad)["state"] == "terminated"
    assert runs_per_task(cigri.work) == {**{f"g{i}": 1 for i in range(6)}, "b1": 1, "b2": 1}
    assert [campaign for _, campaign, _, _, _ in open_events(database, "SET_ASIDE")] == [doomed]


def test_a_unit_set_aside_has_its_writes_undone_and_a_cluster_stays_out_until_fixed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("CIGRI_")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr(config, "SYSTEM_FILE", tmp_path / "absent.toml")
    monkeypatch.setattr(config, "USER_FILE", tmp_path / "absent.toml")
    monkeypatch.setenv("CIGRI_HOME", str(tmp_path / "home"))
    (tmp_path / "cigri.toml").write_text('[clusters.a]\nbackend = "local"\n[clusters.b]\nbackend = "local"\n')
    monkeypatch.setenv("CIGRI_CONFIG", str(tmp_path / "cigri.toml"))
    grid = open_grid(config.load())
    try:
        ctx = gather(grid)
        a, b = grid.cluster_ids()["a"], grid.cluster_ids()["b"]
        assert set(ctx.capacities) == {a, b}
        with database.write(grid.db) as conn:  # a step's transaction: b's share raises half written, a's stays
            for cluster_id in (a, b):
                with ctx.isolated("updator", cluster_id=cluster_id, conn=conn):
                    conn.execute("UPDATE clusters SET failures = 7 WHERE id = ?", [cluster_id])
                    if cluster_id == b:
                        raise KeyError("state")
        assert dict(grid.db.execute("SELECT name, failures FROM clusters").fetchall()) == {"a": 7, "b": 0}
        assert set(ctx.capacities) == {a}
        [(event, _, cluster, message, _)] = open_events(grid.config.database_path, "SET_ASIDE")
        assert cluster == b and message == ("cluster set aside: the updator raised on its data (KeyError: 'state'); "
                                            "no job is sent there and none is polled until this event is fixed "
                                            "(gridevents --fix)")
        grid.db.execute("UPDATE clusters SET checked_at = ?", [database.now() - 86400])  # an autofix would be due
        assert set(gather(grid).capacities) == {a}  # only fixing the event brings it back
        with pytest.raises(CigriError):  # the system's errors are no unit's fault: they stop the step
            with ctx.isolated("updator", cluster_id=a):
                raise CigriError("database: database is locked")
        with pytest.raises(ConfigError):  # nor is the configuration's
            with ctx.isolated("updator", cluster_id=a):
                raise ConfigError("clusters.a: bad")
        with ctx.isolated("colombo", campaign_id=None, cluster_id=a):  # bad input read from its data is the unit's
            raise InputError("walltime: not a duration")
        assert set(gather(grid).capacities) == set()
        for event, *_ in open_events(grid.config.database_path, "SET_ASIDE"):
            api.fix_events(grid, user="root", event_id=event)
        assert set(gather(grid).capacities) == {a, b}
    finally:
        grid.close()
