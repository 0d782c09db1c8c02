"""``/cigri-api``: CiGri 3.2's REST API served by a real ``cigri server``, called with the
requests CiGri's own clients send (``gridsub``, ``gridstat``, ``griddel``, ``gridevents``,
``gridnotify``, ``gridtoken``, ``gridclusters``, ``gridclean``): no ``X-Requested-With``, JSON
bodies as ``application/json``, the user named by the server's socket or by a trusted front.

Each request is checked for its status, its document and its effect: ``?hold=1`` pauses (the
campaign is not cancelled), an unknown parameter is refused and changes nothing, another
user's campaign is missing.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.requests import Request
from service import HTTP_SCRIPT, Site, started
from unix_users import SERVICE, run_as

from cigri.server import app

pytestmark = pytest.mark.slow

JSON = {"Content-Type": "application/json"}  # what every CiGri client posts with


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    """A front on 127.0.0.1 with its secret; mail to a user's own address needs no confirmation."""
    with started('[notify]\nsmtp_host = "127.0.0.1"\nuser_address = "{user}@localhost"\n', front=True) as built:
        yield built


def cigri(site: Site, user: str, requests: list[tuple[str, str, dict[str, Any]]], *, tcp: bool = False,
          headers: dict[str, str] | None = None) -> list[tuple[int, Any, dict[str, str]]]:
    """Requests under ``/cigri-api`` as ``user``, with exactly the headers given (CiGri's
    clients send no ``X-Requested-With``), over the socket or TCP."""
    spec = {"socket": None if tcp else str(site.socket), "base": f"{site.url if tcp else 'http://cigri'}/cigri-api",
            "requests": [(method, path, {**options, "headers": {**(headers or {}), **options.get("headers", {})}})
                         for method, path, options in requests]}
    result = run_as(user, [str(site.bin / "python"), "-c", HTTP_SCRIPT], stdin=json.dumps(spec))
    assert result.returncode == 0, result.stderr
    return [(status, body, hdrs) for status, body, hdrs in json.loads(result.stdout)]


def one(site: Site, user: str, method: str, path: str, **options: Any) -> tuple[int, Any]:
    [(status, body, _)] = cigri(site, user, [(method, path, options)])
    return status, body


def submit(site: Site, user: str, **fields: Any) -> int:
    jdl = {"name": "api", "exec_directory": str(site.exec), "clusters": {"local": {}}, **fields}
    status, body = one(site, user, "POST", "/campaigns", content=json.dumps(jdl), headers=JSON)
    assert status == 201, body
    return int(body["id"])


def state(site: Site, user: str, campaign_id: int) -> str:
    return str(site.json(user, "gridstat", "-c", str(campaign_id))["state"])


@pytest.fixture(scope="module")
def ended(site: Site) -> dict[str, Any]:
    """An ended campaign of the first user: two tasks terminated, one failed (an event)."""
    u1, _ = site.users
    program = site.script("hello.sh", 'echo "hello $1"; echo "oops $1" >&2; [ "$1" != bad ]\n')
    campaign_id = submit(site, u1, name="ended", exec_file=str(program), params=["a", "b", "bad"])
    site.drain(u1, campaign_id)
    return {"id": campaign_id, "tasks": site.json(u1, "gridstat", "-c", str(campaign_id), "-f")}


def test_gridsub_submits_and_gridstat_reads_the_campaign(site: Site) -> None:
    u1, _ = site.users
    program = site.script("sleepy.sh", "sleep 30\n")
    jdl = {"name": "sub", "exec_directory": str(site.exec), "clusters": {"local": {}}, "exec_file": str(program),
           "params": ["p1", "p2", "p3"]}
    [(status, created, headers)] = cigri(site, u1, [("POST", "/campaigns", {"content": json.dumps(jdl),
                                                                            "headers": JSON})])
    assert status == 201, created
    campaign_id = created["id"]
    assert headers["location"] == f"/campaigns/{campaign_id}"
    assert (created["name"], created["user"], created["total_jobs"]) == ("sub", u1, 3)
    assert set(created) == {"id", "name", "user", "state", "has_events", "submission_time", "total_jobs",
                            "finished_jobs", "links"}
    answers = cigri(site, u1, [("GET", f"/campaigns/{campaign_id}", {}), ("GET", "/campaigns", {}),
                               ("GET", f"/campaigns/{campaign_id}/jdl?pretty=true", {}),
                               ("GET", f"/campaigns/{campaign_id}/stats", {}),
                               ("POST", f"/campaigns/{campaign_id}/jobs", {"content": '["p4", "p5"]',
                                                                            "headers": JSON}),
                               ("GET", f"/campaigns/{campaign_id}/jobs?limit=2", {}),
                               ("GET", "/", {})])
    assert [status for status, _, _ in answers] == [200, 200, 200, 200, 201, 200, 200]
    detail, listing, jdl_back, stats, extended, page, root = [body for _, body, _ in answers]
    assert detail["state"] == "in_treatment" and isinstance(detail["clusters"], dict)
    assert campaign_id in [item["id"] for item in listing["items"]]
    assert jdl_back["name"] == "sub" and jdl_back["exec_file"] == str(program)
    assert set(stats) == {"average_jobs_duration", "stddev_jobs_duration", "jobs_throughput", "remaining_time",
                          "failures_rate", "resubmit_rate"}
    assert stats["jobs_throughput"] > 0
    assert extended["total_jobs"] == 5
    assert page["total"] == 5 and page["limit"] == 2 and len({item["id"] for item in page["items"]}) == 2
    assert {"rel": "next", "href": f"/campaigns/{campaign_id}/jobs?limit=2&offset=2"} in page["links"]
    assert [link["href"] for link in root["links"]] == ["/", "/campaigns", "/clusters"]
    one(site, u1, "DELETE", f"/campaigns/{campaign_id}")


def test_griddel_pauses_resumes_and_cancels_and_refuses_what_it_does_not_know(site: Site) -> None:
    u1, u2 = site.users
    program = site.script("sleepy.sh", "sleep 30\n")
    campaign_id = submit(site, u1, exec_file=str(program), nb_jobs=20)
    assert one(site, u1, "DELETE", f"/campaigns/{campaign_id}?hold=1") == (
        202, {"status": 202, "title": "Accepted", "message": f"Campaign {campaign_id} paused"})
    assert state(site, u1, campaign_id) == "paused"  # paused, not cancelled
    status, body = one(site, u1, "DELETE", f"/campaigns/{campaign_id}?hold=1")
    assert (status, body["status"], body["title"]) == (400, 400, "Bad request")  # CiGri: 400, not 409
    assert one(site, u1, "DELETE", f"/campaigns/{campaign_id}?resume=1")[0] == 202
    assert state(site, u1, campaign_id) == "in_treatment"
    assert one(site, u1, "DELETE", f"/campaigns/{campaign_id}?hold=0")[0] == 202  # named: a pause, never a cancel
    assert state(site, u1, campaign_id) == "paused"
    assert one(site, u1, "DELETE", f"/campaigns/{campaign_id}?resume")[0] == 202
    assert state(site, u1, campaign_id) == "in_treatment"
    for unknown in ("foo=1", "hold=1&foo=1", "pretty=1&holdd=1"):
        status, body = one(site, u1, "DELETE", f"/campaigns/{campaign_id}?{unknown}")
        assert status == 400 and "takes no query parameter" in body["message"], (unknown, body)
    assert one(site, u1, "DELETE", f"/campaigns/{campaign_id}?hold=1&resume=1")[0] == 400
    assert state(site, u1, campaign_id) == "in_treatment"  # none of them cancelled it
    assert one(site, u1, "PUT", f"/campaigns/{campaign_id}?state=paused")[0] == 202
    assert state(site, u1, campaign_id) == "paused"
    assert one(site, u1, "PUT", f"/campaigns/{campaign_id}?state=cancelled")[0] == 400
    assert one(site, u1, "PUT", f"/campaigns/{campaign_id}?state=in_treatment")[0] == 202
    for method in ("GET", "DELETE"):  # another user's campaign does not exist for them
        status, body = one(site, u2, method, f"/campaigns/{campaign_id}")
        assert (status, body["status"]) == (404, 404)
    assert state(site, u1, campaign_id) == "in_treatment"
    assert one(site, u1, "DELETE", f"/campaigns/{campaign_id}") == (
        202, {"status": 202, "title": "Accepted", "message": f"Campaign {campaign_id} cancelled"})
    assert state(site, u1, campaign_id) == "cancelled"
    assert one(site, u1, "DELETE", f"/campaigns/{campaign_id}")[0] == 400


def test_a_campaigns_jobs_events_and_outputs(site: Site, ended: dict[str, Any]) -> None:
    u1, u2 = site.users
    campaign_id = ended["id"]
    job_id = next(task["jobs"][0]["id"] for task in ended["tasks"] if task["param"] == "a")
    answers = cigri(site, u1, [("GET", f"/campaigns/{campaign_id}/jobs", {}),
                               ("GET", f"/campaigns/{campaign_id}/events", {}),
                               ("GET", f"/jobs/{job_id}", {}), ("GET", f"/jobs/{job_id}/stdout", {}),
                               ("GET", f"/jobs/{job_id}/stderr", {}),
                               ("GET", f"/campaigns/{campaign_id}/jobs/finished", {}),
                               ("GET", f"/campaigns/{campaign_id}/jobs?offset=3", {})])
    assert [status for status, _, _ in answers] == [200] * 7
    jobs, events, job, out, err, finished, beyond = [body for _, body, _ in answers]
    assert sorted(item["parameters"] for item in jobs["items"]) == ["a", "b", "bad"]
    assert {item["state"] for item in jobs["items"]} == {"terminated", "failed"}
    assert [(e["code"], e["state"]) for e in events["items"]] == [("EXIT_ERROR", "open")]
    assert "oops bad" in events["items"][0]["message"]
    assert (job["id"], job["param"], job["grid_user"], job["campaign_id"]) == (job_id, "a", u1, campaign_id)
    assert out == {"output": "hello a\n"} and err == {"output": "oops a\n"}
    assert len(finished["items"]) == 3
    assert beyond == {"title": "No jobs found", "message": "No more jobs"}
    event_id = events["items"][0]["id"]
    status, event = one(site, u1, "GET", f"/events/{event_id}")
    assert (status, event["code"], event["campaign_id"]) == (200, "EXIT_ERROR", campaign_id)
    assert one(site, u2, "GET", f"/events/{event_id}")[0] == 404
    assert one(site, u2, "GET", f"/jobs/{job_id}/stdout")[0] == 404  # CiGri served anyone's outputs: not cigri
    assert one(site, u2, "DELETE", f"/events/{event_id}")[0] == 404
    assert one(site, u1, "DELETE", f"/events/{event_id}?resubmit=1") == (
        202, {"status": 202, "title": "Accepted", "message": f"Event {event_id} closed"})
    status, closed = one(site, u1, "GET", f"/campaigns/{campaign_id}/events?all=1")
    assert status == 200 and "closed" in {e["state"] for e in closed["items"]}
    site.drain(u1, campaign_id)
    status, body = one(site, u1, "DELETE", f"/campaigns/{campaign_id}/events?resubmit=1")
    assert status == 202, body
    site.drain(u1, campaign_id)  # the resubmitted task failed again
    assert one(site, u1, "DELETE", f"/campaigns/{campaign_id}?purge=1") == (
        202, {"status": 202, "title": "Accepted", "message": f"Campaign {campaign_id} will be purged"})
    assert one(site, u1, "GET", f"/campaigns/{campaign_id}")[0] == 404


def test_griddel_j_kills_one_job(site: Site) -> None:
    u1, u2 = site.users
    program = site.script("sleepy.sh", "sleep 30\n")
    campaign_id = submit(site, u1, exec_file=str(program), nb_jobs=1)
    tasks: list[dict[str, Any]] = []

    def started_job() -> bool:
        tasks[:] = site.json(u1, "gridstat", "-c", str(campaign_id), "-f")
        return bool(tasks[0]["jobs"])

    from harness import wait_for
    wait_for(started_job, 60, "a job", step=0.3)
    job_id = tasks[0]["jobs"][0]["id"]
    assert one(site, u2, "DELETE", f"/jobs/{job_id}")[0] == 404
    assert one(site, u1, "DELETE", f"/jobs/{job_id}") == (
        202, {"status": 202, "title": "Accepted", "message": f"Job {job_id} cancel event created"})
    one(site, u1, "DELETE", f"/campaigns/{campaign_id}")


def test_clusters_usage_notifications_and_tokens(site: Site) -> None:
    u1, _ = site.users
    answers = cigri(site, u1, [("GET", "/clusters", {}), ("GET", "/gridusage", {}),
                               ("POST", "/notifications/mail", {"content": json.dumps(
                                   {"identity": f"{u1}@localhost", "severity": "high"}), "headers": JSON}),
                               ("GET", "/notifications?pretty=true", {}),
                               ("POST", "/notifications/jabber", {"content": json.dumps(
                                   {"identity": "me@jabber.org", "severity": "high"}), "headers": JSON}),
                               ("DELETE", f"/notifications/mail?identity={u1}@localhost", {}),
                               ("GET", "/notifications", {}), ("GET", "/tokens?pretty=true", {})])
    statuses = [status for status, _, _ in answers]
    assert statuses == [200, 200, 201, 200, 400, 202, 200, 200], answers
    clusters, usage, _, subscribed, jabber, _, unsubscribed, tokens = [body for _, body, _ in answers]
    [local] = clusters["items"]
    assert local["name"] == "local" and clusters["total"] == 1
    status, described = one(site, u1, "GET", f"/clusters/{local['id']}")
    assert (status, described["name"], described["blacklisted"]) == (200, "local", False)
    assert "/" in described["stress_factor"] and described["ssh_host"] == ""  # gridclusters -b adds both to text
    assert usage["total"] == len(usage["items"]) <= 1
    for sample in usage["items"]:
        assert sample["clusters"][0]["cluster_name"] == "local"
    assert subscribed["items"] == [{"grid_user": u1, "type": "mail", "identity": f"{u1}@localhost",
                                    "severity": "high"}]
    assert "XMPP" in jabber["message"]
    assert unsubscribed["items"] == [] and tokens["items"] == []
    assert one(site, u1, "GET", "/clusters/999")[0] == 404


def test_post_events_is_for_admins(site: Site) -> None:
    u1, _ = site.users
    campaign_id = submit(site, u1, exec_file="/bin/true", nb_jobs=1)  # its own: another test purges `ended`
    site.drain(u1, campaign_id)
    job_id = site.json(u1, "gridstat", "-c", str(campaign_id), "-f")[0]["jobs"][0]["id"]
    mark = {"content": json.dumps({"class": "job", "job_id": job_id, "code": "MANUAL_EVENT", "message": "look"}),
            "headers": JSON}
    status, body = one(site, u1, "POST", "/events", **mark)
    assert (status, body["title"]) == (403, "Forbidden")
    assert one(site, SERVICE, "POST", "/events", **mark) == (
        201, {"status": 201, "title": "Created", "message": "New event created"})
    codes = [e["code"] for e in site.json(u1, "gridevents", "-c", str(campaign_id))]
    assert "MANUAL_EVENT" in codes
    status, body = one(site, SERVICE, "POST", "/events", content="{not json", headers=JSON)  # one line, not a 500
    assert (status, body["message"]) == (400, "expected a JSON object with class, and cluster_id or job_id")


def test_who_calls_is_the_servers_word_never_a_header(site: Site) -> None:
    """Through the trusted front (as CiGri's Apache): the header names the user, with the
    front's secret; without it, or without any credential, CiGri's 403."""
    u1, u2 = site.users
    jdl = json.dumps({"name": "front", "exec_file": "/bin/true", "nb_jobs": 1, "exec_directory": str(site.exec),
                      "clusters": {"local": {}}})
    front = {"X-CIGRI-USER": u1, "X-CIGRI-FRONT-SECRET": site.front_secret}
    [(status, created, _), (other, _, _)] = cigri(site, u2, [("POST", "/campaigns", {"content": jdl,
                                                                                     "headers": JSON}),
                                                             ("GET", "/campaigns", {})], tcp=True, headers=front)
    assert (status, created["user"]) == (201, u1)
    assert other == 200
    for headers in ({"X-CIGRI-USER": u1}, {}, {"X-CIGRI-USER": u1, "X-CIGRI-FRONT-SECRET": "0" * 64}):
        [(status, body, _)] = cigri(site, u2, [("GET", "/campaigns", {})], tcp=True, headers=headers)
        assert (status, body["status"], body["title"]) == (403, 403, "Forbidden"), headers


def test_a_post_a_page_could_make_is_refused(site: Site) -> None:
    """Without a token, a state change must be one no other site's page can send unasked: a
    ``POST`` is ``application/json`` (CiGri's clients' own), from no other origin."""
    u1, _ = site.users
    body = json.dumps({"name": "x", "exec_file": "/bin/true", "clusters": {"local": {}}})
    for headers in ({"Content-Type": "text/plain"}, {}, {**JSON, "Origin": "https://evil.example"},
                    {**JSON, "Sec-Fetch-Site": "cross-site"}):
        status, answer = one(site, u1, "POST", "/campaigns", content=body, headers=headers)
        assert (status, answer["title"]) == (403, "Forbidden"), headers


def test_unknown_routes_and_bad_input_in_cigris_words(site: Site) -> None:
    u1, _ = site.users
    answers = cigri(site, u1, [("GET", "/nowhere", {}), ("PATCH", "/campaigns/1", {}),
                               ("GET", "/campaigns/abc", {}), ("GET", "/campaigns?foo=1", {}),
                               ("POST", "/campaigns", {"content": '{"name": "x"}', "headers": JSON}),
                               ("POST", "/notifications/mail", {"content": "{not json", "headers": JSON}),
                               ("POST", "/tokens", {"content": "[1]", "headers": JSON}),
                               ("POST", "/events", {"content": "\xff", "headers": JSON})])
    assert [status for status, _, _ in answers] == [404, 404, 400, 400, 400, 400, 400, 403]
    assert answers[0][1] == {"status": 404, "title": "Not found",
                             "message": "GET http://cigri/cigri-api/nowhere not found on this server"}
    assert all(set(body) == {"status", "title", "message"} for _, body, _ in answers)
    assert "clusters" in answers[4][1]["message"]


@pytest.mark.parametrize(("error", "status", "title", "words"), [
    (sqlite3.OperationalError("disk I/O\nerror"), 503, "Service unavailable", "database: disk I/O error"),
    (KeyError("boom"), 500, "Internal server error", "internal error (the server's log has the traceback)")])
def test_the_servers_own_failures_keep_each_apis_shape(error: Exception, status: int, title: str,
                                                       words: str) -> None:
    """A failure no use case names (the database, a bug): CiGri's clients parse
    ``{status, title, message}`` under /cigri-api, cigri's ``{error, field}`` elsewhere."""
    def handled(path: str) -> tuple[int, Any]:
        request = Request({"type": "http", "method": "GET", "path": path, "headers": [], "query_string": b""})
        handler = app._database_error if isinstance(error, sqlite3.Error) else app._internal_error
        response = asyncio.run(handler(request, error))
        return response.status_code, json.loads(response.body)

    assert handled("/cigri-api/campaigns/3") == (status, {"status": status, "title": title, "message": words})
    assert handled("/api/v1/campaigns/3") == (status, {"error": words, "field": None})
