"""cigri import-v3 against a real PostgreSQL holding CiGri v3.2.1's schema, filled with campaigns
in every state: what comes over, a running campaign that continues on the real OAR cluster
with its running job adopted (never run twice), and a second import that changes nothing."""

from __future__ import annotations

import getpass
import http.server
import json
import re
import secrets
import sqlite3
import subprocess
import threading
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import REAL_CLUSTERS, Cigri, clusters_dir, marker_exec_dir, on_systems, runs_per_task, wait_for
from postgres import server

from cigri import api, config
from cigri.backends import JobSpec, RemoteState, open_backend
from cigri.errors import NotFound
from cigri.grid import open_grid

SCHEMA = Path(__file__).with_name("cigri3_schema.sql")
OAR = "oar-ssh"  # the CiGri site's cluster that cigri also has (tests/clusters/up.sh)
DEFAULTS = {"type": "best-effort", "walltime": "00:05:00", "resources": "/resource_id=1",
            "output_gathering_method": "None", "dimensional_grouping": "false", "temporal_grouping": "false",
            "checkpointing_type": "None", "test_mode": "false", "properties": "", "project": "",
            "cluster_job_type": ""}

pytestmark = REAL_CLUSTERS  # its campaign runs on the real OAR


@pytest.fixture(scope="module")
def dsn() -> Iterator[str]:
    with server() as url:
        yield url


def expanded_jdl(name: str, exec_dir: Path, params: list[str], **cluster: Any) -> str:
    """A JDL as CiGri stored it in campaigns.jdl: expanded into every cluster, with its params."""
    settings = {**DEFAULTS, "exec_file": f"{exec_dir}/task.sh", "exec_directory": str(exec_dir), **cluster}
    return json.dumps({"name": name, "jobs_type": "normal", "params": params,
                       "clusters": {OAR: settings, "luke": {**settings, "exec_directory": "$HOME"}}})


def fill(dsn: str, exec_dir: Path, running_remote_id: str) -> str:
    """A CiGri site's database: one campaign in each state; return the new database's DSN."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS cigri3")
        admin.execute("CREATE DATABASE cigri3 ENCODING 'UTF8' TEMPLATE template0")
    site = dsn.rsplit("/", 1)[0] + "/cigri3"
    rule = ("user_lists = JSON.parse(File.read('/etc/cigri/user_lists'))\n"
            "jdl['clusters'].each do |c, v| raise 'no' unless user_lists['normal_authorized'][c] end")
    with psycopg.connect(site) as conn:
        conn.execute(SCHEMA.read_text())
        conn.execute("INSERT INTO clusters(id, name, api_url, batch) VALUES (1, %s, 'http://oar/oarapi/', 'oar2_5')",
                     [OAR])
        conn.execute("INSERT INTO clusters(id, name, api_url, batch, enabled) "
                     "VALUES (2, 'luke', 'https://luke.example/oarapi/', 'oar2_5', false)")
        campaigns = [(1, "alice", "in_treatment", "running", ["t1", "t2", "t3", "t4 x"]),
                     (2, "alice", "paused", "paused", ["p1"]), (3, "bob", "terminated", "done", ["d1", "d2"]),
                     (4, "bob", "cancelled", "cancelled", ["c1", "c2"])]
        for cid, user, state, name, params in campaigns:
            conn.execute("INSERT INTO campaigns(id, grid_user, state, type, name, submission_time, nb_jobs, jdl) "
                         "VALUES (%s, %s, %s, 'normal', %s, now() - interval '1 hour', %s, %s)",
                         [cid, user, state, name, len(params), expanded_jdl(name, exec_dir, params)])
            for n, param in enumerate(params):
                conn.execute("INSERT INTO parameters(id, campaign_id, name, param) VALUES (%s, %s, %s, %s)",
                             [cid * 10 + n, cid, param.split()[0], param])
        jobs = [  # id, campaign, param, state, return code, remote id, tag
            (100, 1, 0, "terminated", 0, 9001, "prologue"), (101, 1, 10, "terminated", 0, 9002, None),
            (102, 1, 11, "running", None, int(running_remote_id), None), (103, 1, 13, "event", 256, 9004, None),
            (301, 3, 30, "terminated", 0, 9301, None), (302, 3, 31, "terminated", 0, 9302, None),
            (401, 4, 40, "event", 35072, 9401, None)]
        for jid, cid, pid, state, code, remote, tag in jobs:
            conn.execute("INSERT INTO jobs(id, campaign_id, param_id, cluster_id, state, return_code, remote_id, tag, "
                         "submission_time, start_time, stop_time) VALUES (%s, %s, %s, 1, %s, %s, %s, %s, "
                         "now() - interval '50 minutes', now() - interval '40 minutes', "
                         "CASE WHEN %s = 'running' THEN NULL ELSE now() - interval '30 minutes' END)",
                         [jid, cid, pid, state, code, remote, tag, state])
        for cid, pid, priority in [(1, 12, 10), (1, 13, 20), (2, 20, 10), (4, 41, 10)]:
            conn.execute("INSERT INTO bag_of_tasks(campaign_id, param_id, priority) VALUES (%s, %s, %s)",
                         [cid, pid, priority])
        events = [  # class, code, state, job, cluster, campaign, message
            ("job", "EXIT_ERROR", "closed", 103, 1, 1, "The job exited with exit status 256;"),
            ("job", "RESUBMIT", "closed", 103, 1, 1, "Resubmit cause: exit"),
            ("notify", "FINISHED_CAMPAIGN", "closed", None, None, 3, "Campaign 3 is finished"),
            ("campaign", "USER_FRAG", "closed", None, None, 4, "cancelled"),
            ("cluster", "CLUSTER_MANUALLY_DISABLED", "open", None, 2, None, "luke is down"),
            ("job", "EXIT_ERROR", "open", 999, 1, 77, "a campaign CiGri deleted")]
        for event in events:
            conn.execute("INSERT INTO events(class, code, state, job_id, cluster_id, campaign_id, message, date_open) "
                         "VALUES (%s, %s, %s, %s, %s, %s, %s, now())", list(event))
        conn.execute("INSERT INTO user_notifications(grid_user, type, identity, severity) VALUES "
                     "('alice', 'mail', 'alice@example.org', 'high'), ('alice', 'xmpp', 'alice@jabber.org', 'low'), "
                     "('%%admin%%', 'mail', 'admin@example.org', '')")
        conn.execute("INSERT INTO users_priority(grid_user, cluster_id, priority) VALUES ('alice', 1, 10)")
        conn.execute("UPDATE admission_rules SET code = %s", [rule])
    return site


def dump(cigri: Cigri) -> dict[str, list[Any]]:
    conn = sqlite3.connect(cigri.home / "cigri.db")
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in tables if t != "_sqlite_migrations"}
    finally:
        conn.close()


@on_systems("oar")
def test_import_a_cigri_site(cigri: Cigri, dsn: str) -> None:
    table = tomllib.loads((clusters_dir() / "single.toml").read_text())["clusters"][OAR]  # one account, as CiGri
    options = {k: v for k, v in table.items() if k in config.CLUSTER_KEYS["oar"]}  # what this cigri knows
    cigri.config.write_text(cigri.config.read_text() + "[metascheduler]\nreplica_delay = 3600\n"  # no replica of t2
                            + f"[clusters.{OAR}]\nbackend = \"oar\"\n" +
                            "".join(f"{k} = {json.dumps(v)}\n" for k, v in options.items()))
    exec_dir = marker_exec_dir("import", after='[ "$1" = t2 ] && sleep 20\nexit 0\n')
    oar = open_backend(OAR, "oar", options, str(cigri.tmp))
    try:  # the job CiGri launched for t2 and that still runs when the site moves
        remote_id = oar.submit([JobSpec(key="v3-102", batch="v3-102", name="cigri.1", argv=(f"{exec_dir}/task.sh", "t2"),
                                        directory=str(exec_dir), walltime_seconds=600, resources="core=1")])["v3-102"]
        wait_for(lambda: oar.poll([remote_id])[remote_id].state == RemoteState.RUNNING, 60, "t2 running on OAR")
    finally:
        oar.close()
    site = fill(dsn, exec_dir, remote_id)

    result = cigri.run("cigri", "import-v3", "--dsn", site, "--json")
    report = json.loads(result.stdout)
    assert {k: report[k] for k in ("clusters_added", "campaigns", "tasks", "jobs", "adopted", "unconfirmed", "events",
                                   "subscriptions", "skipped_campaigns", "converted", "refused")} == {
        "clusters_added": ["luke"], "campaigns": 4, "tasks": 9, "jobs": 7, "adopted": 1, "unconfirmed": 0, "events": 5,
        "subscriptions": 2, "skipped_campaigns": 0, "converted": 0, "refused": 0}
    assert report["notes"] == [
        "cluster luke added as an OAR REST cluster at https://luke.example/oarapi/, not contacted until you set its "
        "options in [clusters.luke] of cigri.toml and run cigri cluster unblacklist luke",
        "cluster luke was disabled in CiGri: leave it blacklisted here",
        "mail subscription of alice to alice@example.org imported unconfirmed: nothing is mailed there until alice "
        "runs gridnotify subscribe --mail alice@example.org and confirms the code mailed there (gridnotify confirm)",
        "subscription of alice by xmpp to alice@jabber.org not imported: cigri sends mail and webhooks (gridnotify)",
        "mail subscription of root to admin@example.org imported unconfirmed: nothing is mailed there until root "
        "runs gridnotify subscribe --mail admin@example.org and confirms the code mailed there (gridnotify confirm)",
        f"users_priority: put [users.alice.affinity] {OAR} = 10 in cigri.toml",
        'admission rule 1 reads /etc/cigri/user_lists: put [admission] user_lists = "/etc/cigri/user_lists" in '
        "cigri.toml"]
    before = dump(cigri)
    again = cigri.run("cigri", "import-v3", "--dsn", site)
    assert re.match(r"imported: 0 campaign\(s\), 0 task\(s\), 0 job\(s\) \(0 running or waiting, now followed; "
                    r"0 perhaps sent by CiGri, held for their owners\), "
                    r"0 event\(s\), 0 subscription\(s\); 4 campaign\(s\) already imported; 0 parameter line\(s\) "
                    r"converted, 0 refused\n", again.stdout)
    assert dump(cigri) == before

    ids = {row[1]: row[0] for row in before["campaigns"]}
    assert ids == {"running": 1, "paused": 2, "done": 3, "cancelled": 4}  # CiGri's own numbers
    states = {name: cigri.stat(cid)["state"] for name, cid in ids.items()}
    assert states == {"running": "in_treatment", "paused": "paused", "done": "terminated", "cancelled": "cancelled"}
    cancelled = cigri.stat(ids["cancelled"])["tasks"]
    assert (cancelled["failed"], cancelled["cancelled"]) == (1, 1)
    assert _codes(cigri, ids["running"]) == {"EXIT_ERROR", "RESUBMIT"}
    clusters = {c["name"]: c for c in cigri.json("gridclusters")}
    assert clusters["luke"]["blacklisted"] and not clusters[OAR]["blacklisted"]
    tasks = {t["name"]: t for t in cigri.tasks(ids["running"])}
    assert {n: t["state"] for n, t in tasks.items()} == {"t1": "terminated", "t2": "running", "t3": "pending",
                                                        "t4": "pending"}

    summary = cigri.drain(ids["running"], timeout=240)
    assert summary["state"] == "terminated" and summary["tasks"]["terminated"] == 4
    assert runs_per_task(exec_dir) == {"t2": 1, "t3": 1, "t4": 1}  # t2 adopted, never run again; t1 was done
    subscriptions = sqlite3.connect(cigri.home / "cigri.db").execute(
        "SELECT user, kind, target, severity FROM subscriptions ORDER BY user").fetchall()
    assert subscriptions == [("alice", "mail", "alice@example.org", "high"),
                             ("root", "mail", "admin@example.org", "medium")]


def _codes(cigri: Cigri, campaign_id: int) -> set[str]:
    conn = sqlite3.connect(cigri.home / "cigri.db")
    try:
        return {r[0] for r in conn.execute("SELECT code FROM events WHERE campaign_id = ?", [campaign_id])}
    finally:
        conn.close()


@on_systems()
def test_a_database_that_is_not_cigris_is_one_line(cigri: Cigri, dsn: str) -> None:
    result = cigri.run("cigri", "import-v3", "--dsn", dsn, expect=2)
    assert result.stderr.startswith("cigri: --dsn: ") and len(result.stderr.splitlines()) == 1
    assert result.stderr == 'cigri: --dsn: not a CiGri v3 database: relation "clusters" does not exist\n'
    unreachable = cigri.run("cigri", "import-v3", "--dsn", "postgresql://cigri@127.0.0.1:1/x", expect=2)
    assert unreachable.stderr.startswith("cigri: --dsn: ") and len(unreachable.stderr.splitlines()) == 1


def new_database(dsn: str, name: str) -> str:
    """A database of CiGri's schema, empty; return its DSN (the trusted superuser's)."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.execute(f"CREATE DATABASE {name} ENCODING 'UTF8' TEMPLATE template0")
    site = dsn.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(site) as conn:
        conn.execute(SCHEMA.read_text())
    return site


@on_systems()
def test_parameter_lines_cigri_cannot_read_are_converted_or_refused_one_line_each(cigri: Cigri, dsn: str) -> None:
    import psycopg

    site = new_database(dsn, "cigri3params")
    program = cigri.script("args.sh", 'printf "%s\\n" "$@" > "args.$1"\n')
    settings = {**DEFAULTS, "exec_file": str(program), "exec_directory": str(cigri.work)}
    lines = {51: "p05 x", 52: "p06 it's", 53: 'p07 say"', 54: "p08 dir\\", 55: "p09 'a' 'b", 56: "p10\x01 y"}
    with psycopg.connect(site) as conn:  # as CiGri stored them: its shell read them, never its parser
        conn.execute("INSERT INTO clusters(id, name, api_url, batch) VALUES (1, 'local', 'http://x/oarapi/', 'oar2_5')")
        conn.execute("INSERT INTO campaigns(id, grid_user, state, type, name, submission_time, nb_jobs, jdl) "
                     "VALUES (5, %s, 'in_treatment', 'normal', 'quotes', now(), %s, %s)",  # the local cluster's user
                     [getpass.getuser(), len(lines), json.dumps({"name": "quotes", "clusters": {"local": settings}})])
        for pid, line in lines.items():
            conn.execute("INSERT INTO parameters(id, campaign_id, name, param) VALUES (%s, 5, %s, %s)",
                         [pid, line.split()[0], line])
        conn.execute("INSERT INTO jobs(id, campaign_id, param_id, cluster_id, state, return_code, remote_id, "
                     "submission_time, stop_time) VALUES (700, 5, 55, 1, 'event', 512, 7700, now(), now())")
        conn.execute("INSERT INTO bag_of_tasks(campaign_id, param_id, priority) SELECT 5, id, 10 FROM parameters")

    report = json.loads(cigri.run("cigri", "import-v3", "--dsn", site, "--json").stdout)
    assert (report["campaigns"], report["tasks"], report["jobs"], report["converted"], report["refused"]) == \
        (1, 4, 0, 3, 2)
    assert report["notes"][:5] == [  # then the configuration's (its admission rule)
        'campaign 5, parameter 52 ("p06"): parameter line "p06 it\'s" imported as "p06 \\"it\'s\\"": its lone \' '
        "is the character itself, its words unchanged",
        'campaign 5, parameter 53 ("p07"): parameter line "p07 say\\"" imported as "p07 \'say\\"\'": its lone " '
        "is the character itself, its words unchanged",
        'campaign 5, parameter 54 ("p08"): parameter line "p08 dir\\\\" imported as "p08 \'dir\\\\\'": its lone '
        "\\ is the character itself, its words unchanged",
        'campaign 5, parameter 55 ("p09"): not imported, nor its jobs: the line cannot be split as a shell would '
        "(No closing quotation); its owner may quote it and submit it again",
        'campaign 5, parameter 56 ("p10\\u0001"): not imported, nor its jobs: the task name contains the control '
        "character U+0001"]
    again = cigri.run("cigri", "import-v3", "--dsn", site).stdout
    assert "1 campaign(s) already imported; 0 parameter line(s) converted, 0 refused\n" in again

    assert cigri.drain(5, timeout=120)["state"] == "terminated"  # CiGri's id; each task gets its line's words
    words = {path.name.split(".", 1)[1]: path.read_text().splitlines() for path in cigri.work.glob("args.*")}
    assert words == {"p05": ["p05", "x"], "p06": ["p06", "it's"], "p07": ["p07", 'say"'], "p08": ["p08", "dir\\"]}


@on_systems()
def test_a_renumbered_campaign_answers_to_cigris_number_as_v3_n(cigri: Cigri, dsn: str) -> None:
    """cigri had given 1 and 2: CiGri's campaign 1 (mine) becomes 3, its 2 (bob's) becomes 4,
    the report says so, and gridstat, gridevents, gridsub and griddel take v3:1; a v3:N never imported
    is one line, exit 1, as is one of another user's (asked here as alice, not an admin)."""
    import psycopg

    taken = [cigri.submit(cigri.jdl(f"mine-{n}", exec_file="/bin/true", params=["x"])) for n in (1, 2)]
    assert taken == [1, 2]
    site = new_database(dsn, "cigri3renumbered")
    settings = {**DEFAULTS, "exec_file": "/bin/true", "exec_directory": str(cigri.work)}
    with psycopg.connect(site) as conn:
        conn.execute("INSERT INTO clusters(id, name, api_url, batch) VALUES (1, 'local', 'http://x/oarapi/', 'oar2_5')")
        for cid, user in ((1, getpass.getuser()), (2, "bob")):
            conn.execute("INSERT INTO campaigns(id, grid_user, state, type, name, submission_time, nb_jobs, jdl) "
                         "VALUES (%s, %s, 'in_treatment', 'normal', %s, now(), 1, %s)",
                         [cid, user, f"cigri-{cid}",
                          json.dumps({"name": f"cigri-{cid}", "clusters": {"local": settings}})])
            conn.execute("INSERT INTO parameters(id, campaign_id, name, param) VALUES (%s, %s, 'p', 'p 1')", [cid, cid])
            conn.execute("INSERT INTO bag_of_tasks(campaign_id, param_id, priority) VALUES (%s, %s, 10)", [cid, cid])

    report = json.loads(cigri.run("cigri", "import-v3", "--dsn", site, "--json").stdout)
    assert [n for n in report["notes"] if n.startswith("campaign ")] == [
        f"campaign {n} of CiGri is campaign {n + 2} here: cigri had given {n}; the commands also take it as v3:{n}"
        for n in (1, 2)]
    assert cigri.json("gridstat", "v3:1")["name"] == cigri.json("gridstat", "-c", "v3:1")["name"] == "cigri-1"
    assert cigri.json("gridstat", "-c", "3")["name"] == "cigri-1" and cigri.json("gridstat", "1")["name"] == "mine-1"
    assert cigri.json("gridevents", "-c", "v3:1") == []
    assert cigri.json("gridsub", "-c", "v3:1", "-J", '["q 2"]') == {"campaign_id": 3, "tasks": 1}
    missing = cigri.run("gridstat", "v3:7", expect=1)
    assert missing.stderr == "gridstat: v3:7: no campaign of CiGri numbered 7 was imported (cigri import-v3)\n"
    cancelled = cigri.run("griddel", "v3:1", "v3:7", "2", expect=1)
    assert cancelled.stdout == "Campaign 3 (v3:1): cancelled\nCampaign 2: cancelled\n"
    assert cigri.stat(3)["state"] == "cancelled" and cigri.stat(4)["state"] == "in_treatment"
    grid = open_grid(config.load(environ=cigri.env, system_files=False))
    try:
        assert api.imported_campaign(grid, 2, user="bob") == 4
        with pytest.raises(NotFound, match=r"^v3:2: no campaign of CiGri numbered 2 was imported"):
            api.imported_campaign(grid, 2, user="alice")
    finally:
        grid.close()


class Recorder(http.server.BaseHTTPRequestHandler):
    """A CiGri cluster's OAR API that only writes down what it is asked (and answers 503)."""

    asked: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._answer()

    def do_POST(self) -> None:  # noqa: N802
        self._answer()

    def do_DELETE(self) -> None:  # noqa: N802
        self._answer()

    def _answer(self) -> None:
        Recorder.asked.append(f"{self.command} {self.path}")
        self.send_response(503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def faraway() -> Iterator[str]:
    """The URL of a :class:`Recorder` on loopback, for the cluster cigri does not have."""
    Recorder.asked = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/oarapi/"
    finally:
        server.shutdown()
        server.server_close()


@on_systems()
def test_what_cigri_may_have_sent_waits_for_its_owner_and_a_new_cluster_for_its_admin(
        cigri: Cigri, dsn: str, faraway: str) -> None:
    import psycopg

    site, user = new_database(dsn, "cigri3held"), getpass.getuser()
    program = cigri.script("args.sh", 'printf "%s\\n" "$@" > "args.$2"\n')
    settings = {**DEFAULTS, "exec_file": str(program), "exec_directory": str(cigri.work)}
    jdl = json.dumps({"name": "held", "clusters": {"local": settings, "faraway": settings}})
    with psycopg.connect(site) as conn:
        conn.execute("INSERT INTO clusters(id, name, api_url, batch) VALUES (1, 'local', 'http://x/oarapi/', 'oar2_5'),"
                     " (2, 'faraway', %s, 'oar2_5')", [faraway])
        for cid, state in ((7, "in_treatment"), (8, "cancelled")):
            conn.execute("INSERT INTO campaigns(id, grid_user, state, type, name, submission_time, nb_jobs, jdl) "
                         "VALUES (%s, %s, %s, 'normal', %s, now(), 4, %s)", [cid, user, state, f"c{cid}", jdl])
        conn.execute("INSERT INTO parameters(id, campaign_id, name, param) VALUES (70, 7, 'first', 'same 1'), "
                     "(71, 7, 'second', 'same 2'), (72, 7, 'sent', 'c 3'), (74, 7, 'broken', 'e 5'), "
                     "(80, 8, 'away', 'f 6')")
        conn.execute("INSERT INTO bag_of_tasks(campaign_id, param_id, priority) VALUES (7, 70, 10), (7, 71, 10)")
        conn.execute("INSERT INTO jobs(id, campaign_id, param_id, cluster_id, state, return_code, remote_id, "
                     "submission_time, start_time, stop_time) VALUES "
                     "(720, 7, 72, 1, 'launching', NULL, NULL, now(), NULL, NULL), "  # posted, its id not kept
                     "(740, 7, 74, 1, 'event', 256, 7740, now(), now(), now()), "
                     "(800, 8, 80, 2, 'running', NULL, 8801, now(), now(), NULL)")  # to be killed on faraway
        conn.execute("INSERT INTO events(id, class, code, state, job_id, cluster_id, campaign_id, parent, "
                     "message, date_open) VALUES (1, 'job', 'EXIT_ERROR', 'open', 740, 1, 7, NULL, 'exit 1', now()),"
                     " (2, 'job', 'RESUBMIT', 'closed', 740, 1, 7, 1, 'Resubmit cause: exit', now())")
        conn.execute("INSERT INTO clusters(id, name, api_url, batch, api_auth_type) "
                     "VALUES (3, 'dahu', 'https://dahu.example/oarapi/', 'oar3', 'jwt')")
        conn.execute("INSERT INTO users_mapping(grid_login, cluster_login, cluster_id) VALUES ('alice', 'al', 2), "
                     "('bob', 'bob', 2), ('alice', 'ali', 1), ('alice', 'Bearer eyJsecret', 3)")
        conn.execute("INSERT INTO campaigns(id, grid_user, state, type, name, submission_time, nb_jobs, jdl) "
                     "VALUES (9, %s, 'in_treatment', 'normal', 'nojdl', now(), 1, NULL)", [user])
        conn.execute("INSERT INTO parameters(id, campaign_id, name, param) VALUES (90, 9, 'old', 'old 1')")
        conn.execute("INSERT INTO jobs(id, campaign_id, param_id, cluster_id, state, return_code, remote_id, "
                     "submission_time, start_time, stop_time) VALUES (900, 9, 90, 1, 'terminated', 0, 9900, "
                     "now() - interval '2 hours', now() - interval '2 hours', now() - interval '1 hour')")
        conn.execute("INSERT INTO grid_usage(date, cluster_id, max_resources, used_resources, unavailable_resources, "
                     "used_by_cigri) VALUES (now() - interval '1 hour', 1, 64, 40, 8, 30), "
                     "(now() - interval '30 minutes', 1, 64, 10, 0, 2)")
        conn.execute("INSERT INTO queue_counts(date, campaign_id, cluster_id, jobs_count) "
                     "SELECT date, c, 1, 3 FROM grid_usage, (VALUES (7), (9)) AS v(c) WHERE used_by_cigri = 30")
        conn.execute("INSERT INTO tasks_affinity(param_id, cluster_id, priority) VALUES (70, 1, 5)")

    report = json.loads(cigri.run("cigri", "import-v3", "--dsn", site, "--json").stdout)
    assert (report["campaigns"], report["jobs"], report["adopted"], report["unconfirmed"], report["usage_samples"]) \
        == (3, 4, 1, 1, 2)
    assert report["notes"] == [
        "users_mapping: 1 OAR 3 token(s) of cluster dahu not imported: cigri does not speak OAR 3's REST API; over "
        'SSH (identity = "sudo") jobs run as their owners\' logins and need none',
        f"cluster faraway added as an OAR REST cluster at {faraway}, not contacted until you set its options in "
        "[clusters.faraway] of cigri.toml and run cigri cluster unblacklist faraway",
        "cluster dahu is OAR 3 in CiGri, whose REST API cigri does not speak: OAR keeps its commands there, so make "
        'it backend = "oar", transport = "ssh" in [clusters.dahu] of cigri.toml (docs/backends.md), or leave it '
        "blacklisted",
        "cluster dahu added as an OAR REST cluster at https://dahu.example/oarapi/, not contacted until you set its "
        "options in [clusters.dahu] of cigri.toml and run cigri cluster unblacklist dahu",
        'users_mapping: put logins = {"alice" = "ali"} in [clusters.local] of cigri.toml',
        "campaign 9 has no JDL in CiGri: kept as a record, cancelled here (its tasks and jobs as they were; its "
        "running jobs are followed to their end, not killed)",
        "2 usage sample(s) of CiGri's grid_usage and queue_counts are in the usage history (gridclusters --history); "
        "each cycle trims those older than [cigri] counts_retention_days: raise it (0 keeps them all) to keep them",
        "tasks_affinity: 1 row(s) of per-parameter cluster priorities not imported: cigri prefers clusters per user "
        "([users.NAME.affinity]), not per task",
        "admission rule 1 reads /etc/cigri/user_lists: put [admission] user_lists = \"/etc/cigri/user_lists\" in "
        "cigri.toml"]
    with sqlite3.connect(cigri.home / "cigri.db") as conn:
        options = json.loads(conn.execute("SELECT options FROM clusters WHERE name = 'faraway'").fetchone()[0])
        usage = conn.execute("SELECT waiting, running, total_slots, free_slots FROM counts WHERE cluster_id = "
                             "(SELECT id FROM clusters WHERE name = 'local') ORDER BY at").fetchall()
    assert options["logins"] == {"alice": "al"}  # bob's is his own name
    before = dump(cigri)
    assert "3 campaign(s) already imported" in cigri.run("cigri", "import-v3", "--dsn", site).stdout
    assert dump(cigri) == before
    assert usage == [(6, 30, 56, 16), (0, 2, 64, 54)]
    assert cigri.stat(9)["state"] == "cancelled" and cigri.tasks(9)[0]["state"] == "terminated"
    assert {t["name"]: t["state"] for t in cigri.tasks(7)} == {  # CiGri's ids and names kept
        "first": "pending", "second": "pending", "sent": "failed", "broken": "failed"}
    events = {e["code"]: e for e in cigri.json("gridevents", "-c", "7", "--all")}
    assert events["UNCONFIRMED_LAUNCH"]["state"] == "open"
    assert "OAR job name cigri.7" in events["UNCONFIRMED_LAUNCH"]["message"]
    assert events["RESUBMIT"]["message"] == f"Resubmit cause: exit (after event {events['EXIT_ERROR']['id']})"
    assert events["EXIT_ERROR"]["severity"] == "high"

    assert cigri.drain(7)["state"] == "failed"  # its own tasks ran; the one CiGri may have sent did not
    assert sorted(path.name for path in cigri.work.glob("args.*")) == ["args.1", "args.2"]
    assert Recorder.asked == []  # not a poll, not the cancel campaign 8 asks for
    assert {e["code"] for e in cigri.json("gridevents", "-g", "--all") if e["cluster"] == "faraway"} == \
        {"CLUSTER_IMPORTED"}  # nor counted as failing
    faraway_row = {c["name"]: c for c in cigri.json("gridclusters")}["faraway"]
    assert faraway_row["blacklisted"] and "not contacted until an admin" in faraway_row["error"]
    with sqlite3.connect(cigri.home / "cigri.db") as conn:
        [(away,)] = conn.execute("SELECT id FROM jobs WHERE batch = 'v3-800'").fetchall()
    output = cigri.run("gridstat", "-j", str(away), "-O", expect=None)
    assert output.returncode != 0 and output.stderr.count("\n") == 1 and "not contacted until an admin" in output.stderr
    assert Recorder.asked == []

    fixed = cigri.json("gridevents", "--fix", "-e", str(events["UNCONFIRMED_LAUNCH"]["id"]), "--resubmit")
    assert fixed == {"closed": 1, "resubmitted": 1}
    cigri.json("gridevents", "--fix", "-e", str(events["EXIT_ERROR"]["id"]), "--resubmit")
    assert cigri.drain(7)["state"] == "terminated"
    assert sorted(path.name for path in cigri.work.glob("args.*")) == ["args.1", "args.2", "args.3", "args.5"]

    cigri.run("cigri", "cluster", "unblacklist", "faraway")  # the admin says so
    cigri.cycle()
    assert Recorder.asked  # now it is asked


@on_systems()
def test_the_password_comes_from_the_environment_or_a_file_never_the_command_line(cigri: Cigri, dsn: str,
                                                                                  tmp_path: Path) -> None:
    import psycopg

    site = new_database(dsn, "cigri3secret")
    password = secrets.token_hex(12)
    with psycopg.connect(site, autocommit=True) as conn:  # the site's reader, who logs in with a password
        conn.execute("DROP ROLE IF EXISTS reader")  # from an earlier run against the same server
        conn.execute(f"CREATE ROLE reader LOGIN PASSWORD '{password}'")
        conn.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader")
    host, port = re.search(r"@([\d.]+):(\d+)/", site).groups()  # type: ignore[union-attr]
    reader = f"postgresql://reader@{host}:{port}/cigri3secret"
    home = tmp_path / "admin-home"  # no ~/.pgpass but the one written below
    home.mkdir()
    base = {k: v for k, v in cigri.env.items() if not k.startswith("PG")} | {"HOME": str(home)}

    def run(*args: str, expect: int = 0, **env: str) -> subprocess.CompletedProcess[str]:
        cigri.env = {**base, **env}
        return cigri.run("cigri", "import-v3", *args, expect=expect)

    def private(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text)
        path.chmod(0o600)
        return path

    refused = run("--dsn", f"postgresql://reader:{password}@{host}:{port}/cigri3secret", expect=2)
    assert refused.stderr == ("cigri: --dsn: holds a password, which every user of this host reads in the process "
                              "list: give it in PGPASSWORD, ~/.pgpass (or the file PGPASSFILE names) or "
                              "--password-file FILE\n")
    assert password not in refused.stdout + refused.stderr
    keywords = run("--dsn", f"host={host} port={port} dbname=cigri3secret user=reader password={password}", expect=2)
    assert keywords.stderr == refused.stderr
    for missing in (run("--dsn", reader, expect=2),  # no password anywhere
                    run("--dsn", reader, "--password-file", str(private("wrong", "not-it\n")), expect=2)):
        assert missing.stderr.startswith("cigri: --dsn: ") and missing.stderr.count("\n") == 1, missing.stderr
        assert "password" in missing.stderr and password not in missing.stderr

    imported = "imported: 0 campaign(s), 0 task(s)"
    assert run("--dsn", reader, PGPASSWORD=password).stdout.startswith(imported)
    assert run("--dsn", reader, PGPASSFILE=str(private("pgpass", f"{host}:{port}:*:reader:{password}\n"))
               ).stdout.startswith(imported)
    (home / ".pgpass").write_text(f"*:*:cigri3secret:reader:{password}\n")
    (home / ".pgpass").chmod(0o600)
    assert run("--dsn", reader).stdout.startswith(imported)
    (home / ".pgpass").unlink()
    assert run("--dsn", reader, "--password-file", str(private("password", f"{password}\n"))
               ).stdout.startswith(imported)
    unreadable = run("--dsn", reader, "--password-file", str(tmp_path / "absent"), expect=2)
    assert unreadable.stderr == f"cigri: --password-file: cannot read {tmp_path / 'absent'}: No such file or directory\n"
