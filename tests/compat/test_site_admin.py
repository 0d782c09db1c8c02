"""What a CiGri site's admins carry over: admission rules (declarative, never evaluated), purge,
manual job events, cancelling a cluster's campaigns, and per-user submission logs."""

from __future__ import annotations

import getpass
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import Cigri

from cigri import api, config
from cigri.errors import ConfigError, InputError, NotFound, Refused
from cigri.grid import Grid, open_grid

USER = getpass.getuser()
# alice, bob and carol are names, not Unix accounts: their jobs would run as the account running the tests
LOGINS = "{" + ", ".join(f'{name} = "{USER}"' for name in ("alice", "bob", "carol")) + "}"
CLUSTERS = (f'[clusters.luke]\nbackend = "local"\nlogins = {LOGINS}\n'
            f'[clusters.froggy]\nbackend = "local"\nlogins = {LOGINS}\n')


def open_site(tmp_path: Path, admission: str = "") -> Grid:
    conf = tmp_path / "cigri.toml"
    conf.write_text(CLUSTERS + admission)
    return open_grid(config.load(environ={"CIGRI_CONFIG": str(conf), "CIGRI_HOME": str(tmp_path / "home")},
                                 system_files=False))


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Grid]:
    grid = open_site(tmp_path)
    yield grid
    grid.close()


def jdl(**changes: Any) -> str:
    return json.dumps({"name": "c", "exec_file": "/bin/true", "nb_jobs": 2, "clusters": {"luke": {}, "froggy": {}},
                       **changes})


def submit(grid: Grid, text: str, user: str = USER) -> int:
    return api.submit(grid, text, base_dir=Path("/"), user=user)[0]


# --- admission rules ------------------------------------------------------------------------

def test_cigri_user_lists_admit_normal_jobs_only_for_listed_users(tmp_path: Path) -> None:
    lists = tmp_path / "user_lists"
    lists.write_text(json.dumps({"normal_authorized": {"luke": ["alice"], "froggy": ["alice", "bob"]}}))
    grid = open_site(tmp_path, f'[admission]\nuser_lists = "{lists}"\n')
    assert submit(grid, jdl(type="normal"), "alice")
    assert submit(grid, jdl(type="best-effort"), "carol")  # best-effort needs no authorization
    with pytest.raises(Refused) as error:
        submit(grid, jdl(type="normal"), "bob")
    assert str(error.value) == "Admission rule error: You are not authorized to launch non best-effort jobs on " \
                               "cluster luke!"
    assert error.value.exit_code == 1
    with pytest.raises(Refused, match="cluster froggy"):  # semi-best-effort is not best-effort either, as in CiGri
        submit(grid, jdl(type="semi-best-effort", clusters={"froggy": {}}), "carol")
    for written in ("besteffort", "urgent"):  # both run best-effort, but CiGri's rule read the type as written
        with pytest.raises(Refused, match="cluster froggy"):
            submit(grid, jdl(clusters={"froggy": {"type": written}}), "carol")
    assert submit(grid, jdl(type="normal", clusters={"froggy": {"type": "best-effort"}}), "bob")  # its own wins
    assert grid.db.execute("SELECT count(*) FROM campaigns").fetchone()[0] == 3
    lists.write_text(json.dumps({"normal_authorized": {"luke": ["bob"], "froggy": ["bob"]}}))  # read at each gridsub
    assert submit(grid, jdl(type="normal"), "bob")
    assert grid.db.execute("SELECT count(*) FROM campaigns").fetchone()[0] == 4


def test_rules_say_who_may_submit_which_type_and_class_where(tmp_path: Path) -> None:
    grid = open_site(tmp_path, '[admission]\n[[admission.rules]]\ntypes = ["normal"]\nclusters = ["luke"]\n'
                               'users = ["alice"]\nmessage = "normal jobs on luke are for alice"\n'
                               '[[admission.rules]]\nclasses = ["urgent"]\nusers = ["bob"]\n'
                               '[classes.default]\ndefault = true\n[classes.urgent]\n')
    assert submit(grid, jdl(type="normal"), "alice")
    assert submit(grid, jdl(type="normal", clusters={"froggy": {}}), "carol")  # the rule names luke only
    with pytest.raises(Refused, match="^Admission rule error: normal jobs on luke are for alice$"):
        submit(grid, jdl(type="normal"), "carol")
    with pytest.raises(Refused, match="^Admission rule error: carol may not submit best-effort campaigns of class "
                                      "urgent to cluster luke$"):
        submit(grid, jdl(**{"class": "urgent"}), "carol")
    assert submit(grid, jdl(**{"class": "urgent"}), "bob")


def test_caps_on_tasks_and_walltime(tmp_path: Path) -> None:
    grid = open_site(tmp_path, '[admission]\nmax_tasks = 3\nmax_walltime = "02:00:00"\n')
    campaign_id = submit(grid, jdl(nb_jobs=3, walltime="7200"))
    with pytest.raises(Refused, match="^Admission rule error: 4 tasks: a campaign may hold at most 3"):
        submit(grid, jdl(nb_jobs=4))
    with pytest.raises(Refused, match="walltime 02:00:01 on cluster luke is above the site's maximum, 02:00:00"):
        submit(grid, jdl(walltime="02:00:01"))
    with pytest.raises(Refused, match="prologue_walltime"):
        submit(grid, jdl(prologue="true", prologue_walltime="03:00:00"))
    params = tmp_path / "more.txt"
    params.write_text("x\n")
    with pytest.raises(Refused, match="4 tasks"):  # adding tasks counts the campaign's total
        api.extend(grid, campaign_id, api.Lines(params.open("rb"), str(params)), user=USER)
    assert grid.db.execute("SELECT count(*), sum(nb_tasks) FROM campaigns").fetchone() == (1, 3)


def test_site_defaults_apply_where_the_jdl_sets_none(tmp_path: Path) -> None:
    grid = open_site(tmp_path, '[admission.defaults]\nproject = "grid"\nwalltime = "00:10:00"\n')
    campaign_id = submit(grid, jdl(clusters={"luke": {"walltime": "60"}, "froggy": {}}))
    values = {(c, k): json.loads(v) for c, k, v in grid.db.execute(
        "SELECT cl.name, p.name, p.value FROM campaign_properties p JOIN clusters cl ON cl.id = p.cluster_id "
        "WHERE campaign_id = ? AND p.name IN ('project', 'walltime')", [campaign_id])}
    assert values == {("luke", "project"): "grid", ("luke", "walltime"): 60,
                      ("froggy", "project"): "grid", ("froggy", "walltime"): 600}


@pytest.mark.parametrize(("section", "named"), [
    ('max_tasks = -1', "admission.max_tasks"), ('max_walltime = "soon"', "admission.max_walltime"),
    ('code = "raise"', "unknown key admission.code"), ('[admission.defaults]\nname = "x"', "admission.defaults.name"),
    ('[admission.defaults]\nwalltime = "x"', "admission.defaults.walltime"),
    ('[[admission.rules]]\ntypes = ["normal"]', "admission.rules[0]: names no users"),
    ('[[admission.rules]]\nusers = "alice"', "admission.rules[0].users"),
])
def test_bad_admission_configuration_names_its_key(tmp_path: Path, section: str, named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace("[", r"\[")):
        open_site(tmp_path, f"[admission]\n{section}\n")


# --- admin operations ---------------------------------------------------------------------------

def test_purge_deletes_ended_campaigns_with_their_tasks_jobs_and_events(cigri: Cigri) -> None:
    ended = cigri.submit(cigri.jdl("ended", exec_file="/bin/true", nb_jobs=3))
    assert cigri.drain(ended)["state"] == "terminated"
    running = cigri.submit(cigri.jdl("running", exec_file="/bin/true", nb_jobs=1))
    grid = open_grid(config.load(environ=cigri.env, system_files=False))
    try:
        with pytest.raises(Refused, match="only an ended campaign"):  # all or none
            api.purge(grid, [ended, running], user=USER)
        with pytest.raises(NotFound, match=f"campaign {ended}: no such campaign"):  # another's: as none
            api.purge(grid, [ended], user="somebody-else")
        assert count(cigri, ended, "jobs") == 3 and count(cigri, ended, "events") >= 1
        assert api.purge(grid, [ended], user=USER) == [ended]
    finally:
        grid.close()
    for table in ("tasks", "jobs", "events", "campaign_properties", "campaign_stats", "task_blocks"):
        assert count(cigri, ended, table) == 0, table
    assert cigri.run("gridstat", "-c", str(ended), expect=1).stderr.strip().endswith("no such campaign")
    assert count(cigri, running, "tasks") == 1


def count(cigri: Cigri, campaign_id: int, table: str) -> int:
    conn = sqlite3.connect(cigri.home / "cigri.db")
    try:
        return conn.execute(f"SELECT count(*) FROM {table} WHERE campaign_id = ?", [campaign_id]).fetchone()[0]
    finally:
        conn.close()


def test_purge_ended_before_a_date_is_for_admins(site: Grid) -> None:
    campaign_id = submit(site, jdl())
    api.cancel(site, campaign_id, user=USER)
    with pytest.raises(Refused, match="admin"):
        api.purge_ended(site, days=0, user="somebody-else")
    with pytest.raises(InputError, match="ended_days"):
        api.purge_ended(site, days=float("nan"), user=USER)
    assert api.purge_ended(site, days=1, user=USER) == []
    assert api.purge_ended(site, days=0, user=USER) == [campaign_id]


def test_manual_job_event_opens_on_the_job(cigri: Cigri) -> None:
    campaign_id = cigri.submit(cigri.jdl("marked", exec_file="/bin/true", nb_jobs=1))
    cigri.drain(campaign_id)
    grid = open_grid(config.load(environ=cigri.env, system_files=False))
    try:
        job_id = grid.db.execute("SELECT id FROM jobs WHERE campaign_id = ?", [campaign_id]).fetchone()[0]
        with pytest.raises(NotFound, match=f"job {job_id}: no such job"):  # another's job: as none
            api.mark_job_event(grid, job_id, "look", user="somebody-else")
        with pytest.raises(NotFound):
            api.mark_job_event(grid, 10**9, "look", user=USER)
        event_id = api.mark_job_event(grid, job_id, "node 12 was flaky", user=USER)
    finally:
        grid.close()
    events = {e["id"]: e for e in cigri.events(campaign_id)}
    assert events[event_id]["code"] == "MANUAL_EVENT" and events[event_id]["state"] == "open"
    assert "node 12 was flaky" in json.dumps(events[event_id])


def test_cancel_every_running_campaign_of_a_cluster(site: Grid) -> None:
    both = submit(site, jdl())
    froggy_only = submit(site, jdl(clusters={"froggy": {}}))
    luke_only = submit(site, jdl(clusters={"luke": {}}))
    with pytest.raises(Refused, match="admin"):
        api.cancel_cluster_campaigns(site, "luke", user="somebody-else")
    with pytest.raises(NotFound):
        api.cancel_cluster_campaigns(site, "mars", user=USER)
    assert api.cancel_cluster_campaigns(site, "luke", user=USER) == [both, luke_only]
    states = dict(site.db.execute("SELECT id, state FROM campaigns"))
    assert states == {both: "cancelled", froggy_only: "in_treatment", luke_only: "cancelled"}
    assert api.cancel_cluster_campaigns(site, "luke", user=USER) == []


def test_submission_logs_per_cluster_and_user(cigri: Cigri) -> None:
    cigri.env["CIGRI_LOG_JOBS"] = "true"
    campaign_id = cigri.submit(cigri.jdl("logged", exec_file="/bin/echo", params=["a 1", "b 2"]))
    cigri.drain(campaign_id)
    log = cigri.home / "log" / "jobs" / f"local_{USER}"
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert sorted(e["argv"][1:] for e in entries) == [["a", "1"], ["b", "2"]]
    assert all(e["argv"][0] == "/bin/echo" and e["remote_id"] for e in entries)
    assert log.stat().st_mode & 0o777 == 0o600
