"""``cigri server`` as a site runs it: its service account, two real Unix users, the real
commands and raw HTTP over its Unix socket and TCP on 127.0.0.1.

Each user submits, watches, pauses, resumes, cancels and reads the outputs of their own
campaigns; every route answers another user's objects as if they did not exist; nothing a
client sets (its environment, configuration file or flags) changes who it is, what it may do,
or the grid's clusters; tokens work over TCP until they expire or are revoked; admins see all.
"""

from __future__ import annotations

import json
import pwd
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service import Site, started
from unix_users import SERVICE, run_as

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with started() as built:
        yield built


@pytest.fixture(scope="module")
def campaigns(site: Site) -> dict[str, Any]:
    """One ended campaign of the first user, with a job that failed (an event) and outputs."""
    u1, _ = site.users
    program = site.script("hello.sh", 'echo "hello $1 from $(id -un)"; echo "oops $1" >&2; [ "$1" != bad ]\n')
    params = site.user_file(u1, "params.txt", "a\nb\nbad\n")  # u1's own, 0600: only u1's process can read it
    campaign_id = site.submit(u1, site.jdl(u1, "mine", exec_file=str(program), param_file=str(params)))
    summary = site.drain(u1, campaign_id)
    tasks = site.json(u1, "gridstat", "-c", str(campaign_id), "-f")
    events = site.json(u1, "gridevents", "-c", str(campaign_id))
    return {"id": campaign_id, "summary": summary, "tasks": tasks, "events": events,
            "job": tasks[0]["jobs"][0]["id"]}


def test_a_user_submits_watches_and_reads_outputs_through_the_server(site: Site, campaigns: dict[str, Any]) -> None:
    u1, _ = site.users
    assert campaigns["summary"]["user"] == u1
    assert campaigns["summary"]["tasks"] == {"total": 3, "pending": 0, "waiting": 0, "running": 0,
                                             "terminated": 2, "failed": 1, "cancelled": 0}
    out = site.run(u1, "gridstat", "-j", str(campaigns["job"]), "-O").stdout
    assert out == f"hello a from {u1}\n"  # the local cluster runs a job as its owner
    assert [e["code"] for e in campaigns["events"]] == ["EXIT_ERROR"]
    assert "oops bad" in campaigns["events"][0]["stderr_tail"]
    listing = site.run(u1, "gridstat", "-a").stdout
    assert re.search(rf"^{campaigns['id']}\s+mine\s+{u1}\s", listing, re.M)


def test_a_user_pauses_resumes_and_cancels_their_campaign(site: Site) -> None:
    u1, _ = site.users
    program = site.script("sleepy.sh", "sleep 30\n")
    campaign_id = site.submit(u1, site.jdl(u1, "long", exec_file=str(program), nb_jobs=50))
    assert site.run(u1, "griddel", "-p", str(campaign_id)).stdout == f"Campaign {campaign_id}: paused\n"
    assert site.json(u1, "gridstat", "-c", str(campaign_id))["state"] == "paused"
    again = site.run(u1, "griddel", "-p", str(campaign_id), expect=1)
    assert again.stderr == f"griddel: campaign {campaign_id} is paused, not in_treatment\n"
    site.run(u1, "griddel", "-r", str(campaign_id))
    site.run(u1, "griddel", str(campaign_id))
    assert site.json(u1, "gridstat", "-c", str(campaign_id))["state"] == "cancelled"


def test_a_query_parameter_a_route_does_not_take_is_refused_not_ignored(site: Site) -> None:
    """CiGri's clients pause with ``DELETE /campaigns/N?hold=1``: a route ignoring ``hold``
    cancelled the campaign. Every API route refuses, by name, a parameter it does not take."""
    u1, _ = site.users
    program = site.script("sleepy.sh", "sleep 30\n")
    campaign_id = site.submit(u1, site.jdl(u1, "kept", exec_file=str(program), nb_jobs=5))
    answers = site.http(u1, [("DELETE", f"/campaigns/{campaign_id}?hold=1", {}),
                             ("GET", "/campaigns?limit=5&state=in_treatment&offst=3", {}),
                             ("GET", f"/campaigns/{campaign_id}/jobs?limit=2", {})])
    assert [status for status, _, _ in answers] == [400, 400, 200]
    assert answers[0][1] == {"error": f"DELETE /api/v1/campaigns/{campaign_id} takes no query parameter 'hold'",
                             "field": "hold"}
    assert answers[1][1]["field"] == "offst"
    assert site.json(u1, "gridstat", "-c", str(campaign_id))["state"] == "in_treatment"


def _routes(site: Site, user: str) -> list[tuple[str, str]]:
    """Every route of the API's own contract that names an object by id, with the method (not
    those naming a cluster: clusters are everyone's, and a cluster token is always the caller's)."""
    [(status, contract, _)] = site.http(user, [("GET", "/openapi.json", {})])
    assert status == 200
    return [(method.upper(), path) for path, methods in contract["paths"].items() for method in methods
            if "_id}" in path]


def test_every_route_answers_another_users_objects_as_missing(site: Site, campaigns: dict[str, Any]) -> None:
    """Campaigns, jobs, events, subscriptions and tokens by id: the other user gets 404 with
    the same words as for an id that does not exist, on every route the contract lists."""
    u1, u2 = site.users
    subscription = site.json(u1, "gridnotify", "subscribe", "--webhook", "https://example.org/hook")["id"]
    token = site.json(u1, "cigri", "token", "create", "--ttl", "1h")["id"]
    ids = {"campaign_id": campaigns["id"], "job_id": campaigns["job"], "event_id": campaigns["events"][0]["id"],
           "subscription_id": subscription, "token_id": token, "v3_id": campaigns["id"]}
    routes = _routes(site, u2)
    assert {path for _, path in routes} >= {"/api/v1/campaigns/{campaign_id}", "/api/v1/jobs/{job_id}/stdout",
                                           "/api/v1/events/{event_id}", "/api/v1/tokens/{token_id}",
                                           "/api/v1/notifications/{subscription_id}"}
    requests = []
    for method, path in routes:
        options: dict[str, Any] = {"content": "x 1\n"} if path.endswith("/tasks") and method == "POST" else \
            {"json": {"code": "0"}} if path.endswith("/confirm") else {}
        requests.append((method, path.removeprefix("/api/v1").format(**ids), options))
    answers = site.http(u2, requests)
    for (method, path, _), (status, body, _) in zip(requests, answers):
        assert status == 404, (method, path, status, body)
        if path.startswith("/imports/v3/"):  # CiGri's numbers: never imported here, as another user's would be
            assert body["error"].startswith(f"v3:{ids['v3_id']}: no campaign of CiGri numbered"), body
            continue
        kind = path.split("/")[1].rstrip("s")
        assert re.fullmatch(rf"{kind.replace('notification', 'subscription')} \d+: no such "
                            rf"{kind.replace('notification', 'subscription')}", body["error"]), (path, body)
    fix = site.http(u2, [("POST", "/events/fix", {"json": {"event": ids["event_id"], "resubmit": True}}),
                         ("POST", "/events/fix", {"json": {"campaign": ids["campaign_id"]}})])
    assert [status for status, _, _ in fix] == [404, 404]
    mine = site.http(u1, [("GET", f"/campaigns/{ids['campaign_id']}", {}), ("GET", f"/jobs/{ids['job_id']}/stdout", {})])
    assert [status for status, _, _ in mine] == [200, 200]
    assert u2 not in {e["user"] for e in site.json(u1, "gridstat", "-a")}  # and u2's listing hides nothing but...
    assert site.json(u2, "gridevents") == []  # ...their events show only their own (and the clusters')


def test_another_users_summary_lines_are_public_their_work_is_not(site: Site, campaigns: dict[str, Any]) -> None:
    """As CiGri: ``gridstat -a -u OTHER`` lists their campaigns' summary lines; their details,
    tasks, outputs and stderr tails are not there for anyone but them and the admins."""
    u1, u2 = site.users
    listed = site.json(u2, "gridstat", "-a", "-u", u1)
    assert campaigns["id"] in {c["id"] for c in listed}
    assert all("clusters" not in c and "stderr_tail" not in json.dumps(c) for c in listed)
    for args in (("-c", str(campaigns["id"])), ("-c", str(campaigns["id"]), "-f"), ("-j", str(campaigns["job"]), "-E")):
        refused = site.run(u2, "gridstat", *args, expect=1)
        assert refused.stderr.endswith("no such campaign\n") or refused.stderr.endswith("no such job\n")


def test_nothing_a_client_sets_changes_who_it_is_or_what_it_may_do(site: Site, campaigns: dict[str, Any]) -> None:
    """USER, LOGNAME, SUDO_USER, CIGRI_* variables, a client CIGRI_CONFIG naming u2 an admin and
    declaring a cluster, and --home: the server still sees u2, an ordinary user, and its grid's
    clusters are the server's configuration's alone."""
    u1, u2 = site.users
    group = pwd.getpwnam(u2).pw_gid
    evil = site.user_file(u2, "evil.toml", f'[cigri]\nadmins = "{u2}"\nadmin_group = "{u2}"\n'
                                            '[clusters.evil]\nbackend = "slurm"\ntransport = "rest"\nuser = "x"\n'
                                            'base_url = "http://127.0.0.1:9"\ntoken_file = "/etc/hostname"\n')
    spoof = {"USER": u1, "LOGNAME": u1, "SUDO_USER": u1, "CIGRI_ADMINS": u2, "CIGRI_ADMIN_GROUP": str(group),
             "CIGRI_CONFIG": str(evil), "CIGRI_HOME": str(site.home)}
    who = site.http(u2, [("GET", "/whoami", {})])[0][1]
    assert who["user"] == u2 and who["admin"] is False
    refused = [site.run(u2, "griddel", "-p", str(campaigns["id"]), env=spoof, expect=1),
               site.run(u2, "gridstat", "-j", str(campaigns["job"]), "-E", env=spoof, expect=1),
               site.run(u2, "cigri", "--home", str(site.home), "cluster", "blacklist", "local", env=spoof, expect=1),
               site.run(u2, "cigri", "shares", env=spoof, expect=1)]
    assert [r.stderr.splitlines()[-1].split(": ", 1)[1] for r in refused] == [
        f"campaign {campaigns['id']}: no such campaign", f"job {campaigns['job']}: no such job",
        f"blacklisting a cluster: needs the admin role, and {u2} is not an admin",
        f"cigri shares: needs the admin role, and {u2} is not an admin"]
    assert [c["name"] for c in site.json(u2, "gridclusters", env=spoof)] == ["local"]
    assert [c["name"] for c in site.json("root", "cigri", "cluster", "list")] == ["local"]


def test_the_servers_files_are_its_own(site: Site) -> None:
    """Users need no access to the database, spool, logs or key files, and get none."""
    u1, _ = site.users
    for path in (site.home / "cigri.db", site.home / "spool", site.home / "log", site.config):
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, (path, oct(mode))
        assert pwd.getpwuid(path.stat().st_uid).pw_name == site.account
    for path in (site.home / "cigri.db", site.home / "spool" / "local", site.home / "log" / "cigri.log", site.config):
        probe = site.run(u1, "python", "-c", f"open({str(path)!r}, 'rb')", expect=1)
        assert "PermissionError" in probe.stderr, path


def test_tokens_over_tcp_until_revoked_or_expired(site: Site) -> None:
    u1, _ = site.users
    token = site.json(u1, "cigri", "token", "create", "--ttl", "1h", "--note", "laptop")
    assert token["token"].startswith("cigri_") and token["user"] == u1
    remote = {"CIGRI_SERVER": site.url, "CIGRI_TOKEN": token["token"]}
    assert site.json(u1, "gridstat", "-a", env=remote) is not None
    who = site.http(u1, [("GET", "/whoami", {})], tcp=True, headers={"Authorization": f"Bearer {token['token']}"})
    assert who[0][1] == {"user": u1, "admin": False, "method": "token", "version": who[0][1]["version"]}
    made = site.http(u1, [("POST", "/tokens", {"json": {}})], tcp=True,
                     headers={"Authorization": f"Bearer {token['token']}"})
    assert made[0][0] == 403  # a token cannot make a token that outlives it
    listed = site.json(u1, "cigri", "token", "list")
    assert token["token"] not in json.dumps(listed) and {t["note"] for t in listed} >= {"laptop"}
    site.run(u1, "cigri", "token", "revoke", str(token["id"]))
    refused = site.run(u1, "gridstat", env=remote, expect=1)
    assert refused.stderr == "gridstat: the token is unknown, expired or revoked (cigri token create makes a new one)\n"
    short = site.json(u1, "cigri", "token", "create", "--ttl", "1s")
    time.sleep(1.5)
    assert site.run(u1, "gridstat", env={**remote, "CIGRI_TOKEN": short["token"]}, expect=1).stderr.endswith(
        "unknown, expired or revoked (cigri token create makes a new one)\n")
    for headers in ({}, {"Authorization": "Bearer cigri_forged"}, {"Authorization": "Basic eDp5"}):
        assert site.http(u1, [("GET", "/campaigns", {})], tcp=True, headers=headers)[0][0] == 401


def test_a_token_file_others_can_read_is_refused(site: Site) -> None:
    u1, _ = site.users
    token = site.json(u1, "cigri", "token", "create", "--ttl", "1h")["token"]
    xdg = site.user_dir(u1) / "xdg"  # the user's config dir (XDG_CONFIG_HOME), this site's own
    path = site.user_file(u1, "xdg/cigri/token", token + "\n", mode=0o644)
    refused = site.run(u1, "gridstat", env={"CIGRI_SERVER": site.url, "XDG_CONFIG_HOME": str(xdg)}, expect=2)
    assert refused.stderr == (f"gridstat: {path}: readable by others (mode 0644); chmod 600 {path}, "
                              "or make a new token: the old one may be known\n")
    path.chmod(0o600)
    site.run(u1, "gridstat", env={"CIGRI_SERVER": site.url, "XDG_CONFIG_HOME": str(xdg)})


def test_token_create_save_writes_the_file_the_commands_read(site: Site) -> None:
    """README and docs/server.md: ``cigri token create --save`` on the server's host makes the
    directory (0700) and the file (0600) that a remote user's commands read, and prints no secret."""
    u1, _ = site.users
    xdg = site.user_dir(u1) / "fresh-xdg"  # a user who never had a ~/.config/cigri
    env = {"XDG_CONFIG_HOME": str(xdg)}
    made = site.run(u1, "cigri", "token", "create", "--save", "--ttl", "1h", env=env)
    path = xdg / "cigri" / "token"
    assert made.stdout == "" and made.stderr.endswith(f": saved in {path}\n")
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert pwd.getpwuid(path.stat().st_uid).pw_name == u1
    secret = path.read_text()
    assert secret.startswith("cigri_") and secret.endswith("\n") and secret.strip() not in made.stderr
    who = site.http(u1, [("GET", "/whoami", {})], tcp=True, headers={"Authorization": f"Bearer {secret.strip()}"})
    assert who[0][1]["method"] == "token" and who[0][1]["user"] == u1
    assert site.json(u1, "gridstat", "-a", env={**env, "CIGRI_SERVER": site.url}) is not None  # read from the file
    again = site.json(u1, "cigri", "token", "create", "--save", env=env)
    assert "token" not in again and again["file"] == str(path) and path.read_text() != secret
    assert site.run("root", "cigri", "token", "create", "--save", "--user", u1, expect=2).stderr == \
        "cigri: --save writes your own token file: not with --user\n"


def test_admins_see_and_act_on_everything(site: Site, campaigns: dict[str, Any]) -> None:
    u1, _ = site.users
    for admin in ("root", SERVICE):
        assert site.json(admin, "gridstat", "-c", str(campaigns["id"]))["user"] == u1
        assert site.run(admin, "gridstat", "-j", str(campaigns["job"]), "-O").stdout.startswith("hello a")
        assert {e["id"] for e in site.json(admin, "gridevents", "-a")} >= {campaigns["events"][0]["id"]}
    site.run("root", "cigri", "cluster", "blacklist", "local", "--reason", "maintenance")
    assert site.json(u1, "gridclusters")[0]["blacklisted"] is True
    site.run("root", "cigri", "cluster", "unblacklist", "local")
    assert site.json(u1, "gridclusters")[0]["blacklisted"] is False
    site.run("root", "gridevents", "--blacklist-cluster", "local")  # CiGri's way: an event held by the cluster
    [held] = [e for e in site.json("root", "gridevents", "-g") if e["code"] == "CLUSTER_MANUALLY_DISABLED"]
    assert site.json(u1, "gridclusters")[0]["blacklisted"] is True
    site.run("root", "gridevents", "--fix", "-e", str(held["id"]))  # and CiGri's way to lift it
    assert site.json(u1, "gridclusters")[0]["blacklisted"] is False


def test_admin_commands_reach_the_server_not_a_database_of_their_own(site: Site) -> None:
    """With only ``CIGRI_SERVER`` set, ``cigri purge`` and ``cigri cluster cancel-campaigns``
    opened a new, empty database in the caller's home and reported nothing done."""
    u1, u2 = site.users
    program = site.script("sleepy.sh", "sleep 30\n")
    running = site.submit(u1, site.jdl(u1, "running", exec_file=str(program), nb_jobs=2))
    ended = site.submit(u2, site.jdl(u2, "ended", exec_file=str(program), nb_jobs=1))
    site.run(u2, "griddel", str(ended))
    root_database = Path("/root/.local/share/cigri/cigri.db")
    existed = root_database.exists()
    assert site.run(u1, "cigri", "cluster", "cancel-campaigns", "local", expect=1).stderr.startswith("cigri: ")
    assert site.run(u1, "cigri", "purge", "--ended-days", "0", expect=1).stderr.startswith("cigri: ")
    assert site.run(u1, "cigri", "purge", str(ended), expect=1).stderr == f"cigri: campaign {ended}: no such campaign\n"
    assert running in site.json("root", "cigri", "cluster", "cancel-campaigns", "local")["cancelled"]
    assert site.json(u1, "gridstat", "-c", str(running))["state"] == "cancelled"
    assert site.json("root", "cigri", "purge", str(ended)) == {"purged": [ended]}
    assert site.run(u2, "gridstat", "-c", str(ended), expect=1).stderr == f"gridstat: campaign {ended}: no such campaign\n"
    assert site.run("root", "cigri", "purge", "--ended-days", "-1", expect=2).stderr == \
        "cigri: ended_days: must be >= 0 and finite\n"
    assert site.run("root", "cigri", "db", "upgrade", expect=2, env={"HOME": "/nonexistent"}).stderr == \
        "cigri: cigri db upgrade works on the grid's database, and /nonexistent/.local/share/cigri/cigri.db is " \
        "none: run it on the server's host, as the grid's account\n"
    assert root_database.exists() == existed


def test_errors_are_one_json_object_with_the_right_status(site: Site, campaigns: dict[str, Any]) -> None:
    u1, _ = site.users
    answers = site.http(u1, [
        ("GET", "/campaigns/abc", {}),
        ("GET", "/campaigns?limit=-1", {}),
        ("POST", "/campaigns", {"content": '{"name": "x"}', "headers": {"Content-Type": "application/json"}}),
        ("POST", f"/campaigns/{campaigns['id']}/pause", {}),
        ("GET", "/nowhere", {}),
        ("GET", "/shares", {}),
    ])
    assert [status for status, _, _ in answers] == [400, 400, 400, 409, 404, 403]
    assert all(set(body) == {"error", "field"} for _, body, _ in answers[:2] + answers[3:])
    assert set(answers[2][1]) == {"error", "field", "problems"}  # a JDL's mistakes: each also on its own
    assert answers[2][1]["error"] == " ".join(answers[2][1]["problems"])
    assert answers[0][1]["field"] == "campaign_id" and answers[1][1]["field"] == "limit"
    assert answers[2][1]["error"].startswith("JDL: $: missing mandatory key 'clusters'")


def test_healthz_and_the_contract(site: Site) -> None:
    u1, _ = site.users
    [(status, health, _)] = site.http(u1, [("GET", "/healthz", {})], root=True)
    assert status == 200 and health["ok"] is True and health["database"] == "ok"
    [(_, contract, _)] = site.http(u1, [("GET", "/openapi.json", {})])
    committed = json.loads((Path(__file__).parents[1] / "docs" / "openapi.json").read_text())
    assert contract == committed, "the API changed: if on purpose, python -m cigri.server.contract > docs/openapi.json"


def test_doctor_checks_the_servers_layout(site: Site) -> None:
    """Run as the server's account on its host: the socket reachable by users and
    answering, every file private, a home that lets users through but not in."""
    result = run_as(site.account, [str(site.bin / "cigri"), "doctor", "--json"], env=site.server_env())
    checks = {c["what"]: c for c in json.loads(result.stdout)}
    assert result.returncode == 0, result.stdout
    assert checks["server: socket"]["ok"] and "answers, database ok, cycles ok" in checks["server: socket"]["detail"]
    assert checks["server: listen"]["detail"] == f"127.0.0.1:{site.port} (http, loopback)"
    assert checks["permissions: database directory"]["detail"].endswith("is 0711")
    site.socket.chmod(0o600)  # as if a careless restart had made it the service's alone
    try:
        broken = run_as(site.account, [str(site.bin / "cigri"), "doctor", "--json"], env=site.server_env())
        assert broken.returncode == 1
        assert "users cannot reach it" in {c["what"]: c for c in json.loads(broken.stdout)}["server: socket"]["detail"]
    finally:
        site.socket.chmod(0o666)


def test_the_server_says_where_it_serves(site: Site) -> None:
    """On its terminal (or the journal): where it serves, how often it cycles, where it logs."""
    said = [line for line in site.log().splitlines() if line.startswith("cigri server: serving ")]
    assert said == [f"cigri server: serving unix:{site.socket} and http://127.0.0.1:{site.port}, cycles every 0.2s; "
                    f"log {site.home / 'log' / 'cigri.log'}; SIGTERM or Ctrl-C stops it"]
