"""CiGri 3.2's own clients against ``cigri server``, behind the front docs/coming-from-cigri.md
gives: Debian's Apache authenticates the user (basic authentication here, where a CiGri site
had identd), names them in ``X-CIGRI-USER`` and proxies ``/cigri-api`` to the server over TCP
with the front's secret.

Each test is one client command: the requests it sends (seen in Apache's log, running the Ruby
clients of CiGri 3.2.1 by hand: method, path, query, JSON body, no ``X-Requested-With``), the
status it expects and the keys it then reads. CiGri's code is not in the repository: these are
the requests as observed, written again here.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from harness import unavailable, wait_for
from service import Site, free_port, started
from unix_users import SERVICE

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cigri-clients")]  # one scenario, in order

MODULES = ("mpm_event", "authn_core", "authn_file", "authz_core", "authz_user", "auth_basic", "headers", "proxy",
           "proxy_http")
RUBY = {"User-Agent": "Ruby", "Accept": "*/*"}  # Net::HTTP's headers; a post adds its Content-Type
JSON = {**RUBY, "Content-Type": "application/json"}
CAMPAIGN_KEYS = {"id", "name", "user", "state", "has_events", "submission_time", "total_jobs", "finished_jobs",
                 "links"}


@dataclass
class Front:
    """Apache in front of the server, and what the scenario has made so far."""

    url: str
    passwords: dict[str, str]
    site: Site
    made: dict[str, Any] = field(default_factory=dict)

    def client(self, user: str) -> httpx.Client:
        return httpx.Client(base_url=f"{self.url}/cigri-api", auth=(user, self.passwords[user]), timeout=60)

    def send(self, user: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One request as CiGri's client sends it; the status and the JSON it reads."""
        with self.client(user) as client:
            content = None if body is None else json.dumps(body)
            answer = client.request(method, path, content=content, headers=JSON if content is not None else RUBY)
        return answer.status_code, answer.json() if answer.content else None


def _htpasswd(passwords: dict[str, str]) -> str:
    """Apache's ``{SHA}`` entries (what ``htpasswd -s`` writes)."""
    return "".join(f"{user}:{{SHA}}{base64.b64encode(hashlib.sha1(word.encode()).digest()).decode()}\n"
                   for user, word in passwords.items())


@pytest.fixture(scope="module")
def front() -> Iterator[Front]:
    apache = shutil.which("apache2") or "/usr/sbin/apache2"
    if not os.path.exists(apache):
        unavailable("Apache is not installed (apt-get install apache2; tests/clusters/up.sh installs it)")
    with started(front=True) as site:
        root = Path(tempfile.mkdtemp(prefix="cigri-front-", dir="/tmp"))
        root.chmod(0o755)
        users = [*site.users, SERVICE]
        passwords = {user: secrets.token_hex(8) for user in users}
        (root / "htpasswd").write_text(_htpasswd(passwords))
        (root / "htpasswd").chmod(0o644)
        port = free_port()
        run_as = "User nobody\nGroup nogroup\n" if os.geteuid() == 0 else ""
        modules = "".join(f"LoadModule {name}_module /usr/lib/apache2/modules/mod_{name}.so\n" for name in MODULES)
        (root / "httpd.conf").write_text(f"""ServerRoot "{root}"
PidFile {root}/httpd.pid
ErrorLog {root}/error.log
Listen 127.0.0.1:{port}
ServerName 127.0.0.1
{run_as}{modules}
<Location "/cigri-api">
    AuthType Basic
    AuthName "cigri"
    AuthBasicProvider file
    AuthUserFile {root}/htpasswd
    Require valid-user
    RequestHeader unset X-CIGRI-USER early
    RequestHeader unset Authorization
    RequestHeader set X-CIGRI-USER "expr=%{{REMOTE_USER}}"
    RequestHeader set X-CIGRI-FRONT-SECRET "{site.front_secret}"
    ProxyPreserveHost On
    ProxyPass "http://127.0.0.1:{site.port}/cigri-api"
</Location>
""")
        (root / "httpd.conf").chmod(0o600)  # it holds the front's secret; Apache reads it before it drops root
        started_apache = subprocess.run([apache, "-f", str(root / "httpd.conf"), "-k", "start"], capture_output=True,
                                        text=True, timeout=60)
        assert started_apache.returncode == 0, started_apache.stderr
        try:
            wait_for(lambda: _answers(port), 30, "Apache to answer")
            yield Front(f"http://127.0.0.1:{port}", passwords, site)
        finally:
            subprocess.run([apache, "-f", str(root / "httpd.conf"), "-k", "stop"], capture_output=True, timeout=60)
            time.sleep(0.5)
            shutil.rmtree(root, ignore_errors=True)


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/cigri-api/", timeout=5).status_code == 401
    except httpx.HTTPError:
        return False


def _jdl(front: Front, name: str, **fields: Any) -> dict[str, Any]:
    program = front.site.script("task.sh", 'echo "out $1"; echo "err $1" >&2; [ "$1" != bad ] && sleep 1\n')
    return {"name": name, "exec_file": str(program), "clusters": {"local": {"exec_directory": str(front.site.exec)}},
            **fields}


# Each command: (what the user typed, the check). The checks run in this order, on one front.

def gridsub(front: Front) -> None:
    user = front.site.users[0]
    status, body = front.send(user, "POST", "/campaigns", _jdl(front, "judged", params=["a", "b", "bad"]))
    assert status == 201 and CAMPAIGN_KEYS <= set(body), body  # prints CAMPAIGN_ID=body['id']
    front.made["campaign"] = body["id"]
    long = front.site.script("long.sh", "sleep 60\n")  # still running when griddel cancels it
    status, body = front.send(user, "POST", "/campaigns", {**_jdl(front, "paused", params=["x1", "x2", "x3"]),
                                                           "exec_file": str(long)})
    assert status == 201
    front.made["other"] = body["id"]


def gridsub_param_file(front: Front) -> None:
    status, body = front.send(front.site.users[0], "POST", "/campaigns", _jdl(front, "file", param_file="/etc/hosts"))
    assert status == 400 and set(body) == {"status", "title", "message"} and "param_file" in body["message"], body


def gridsub_add(front: Front) -> None:
    status, body = front.send(front.site.users[0], "POST", f"/campaigns/{front.made['other']}/jobs", ["y", "z"])
    assert status == 201 and body["total_jobs"] == 5, body


def gridstat(front: Front) -> None:
    status, body = front.send(front.site.users[0], "GET", "/campaigns")
    assert status == 200 and {item["id"] for item in body["items"]} >= {front.made["campaign"], front.made["other"]}
    assert all(CAMPAIGN_KEYS <= set(item) for item in body["items"])


def griddel_pause(front: Front) -> None:
    user, campaign = front.site.users[0], front.made["other"]
    status, body = front.send(user, "DELETE", f"/campaigns/{campaign}?hold=1")
    assert status == 202, body
    assert front.send(user, "GET", f"/campaigns/{campaign}")[1]["state"] == "paused"


def griddel_resume(front: Front) -> None:
    user, campaign = front.site.users[0], front.made["other"]
    assert front.send(user, "DELETE", f"/campaigns/{campaign}?resume=1")[0] == 202
    assert front.send(user, "GET", f"/campaigns/{campaign}")[1]["state"] == "in_treatment"


def gridstat_campaign(front: Front) -> None:
    user, campaign = front.site.users[0], front.made["campaign"]
    front.site.drain(user, campaign)
    status, body = front.send(user, "GET", f"/campaigns/{campaign}")
    assert status == 200 and CAMPAIGN_KEYS | {"clusters"} <= set(body)
    assert {"cluster_name", "active_jobs", "queued_jobs", "prologue_ok", "epilogue_ok"} <= set(
        next(iter(body["clusters"].values())))
    status, stats = front.send(user, "GET", f"/campaigns/{campaign}/stats")
    assert status == 200 and {"average_jobs_duration", "stddev_jobs_duration", "jobs_throughput", "remaining_time",
                              "failures_rate", "resubmit_rate"} <= set(stats)


def gridstat_full(front: Front) -> None:
    status, body = front.send(front.site.users[0], "GET", f"/campaigns/{front.made['campaign']}/jobs")
    assert status == 200 and {"items", "total", "offset", "limit", "links"} <= set(body)
    rows = {row["parameters"]: row for row in body["items"]}
    assert set(rows) == {"a", "b", "bad"} and rows["bad"]["state"] == "failed"
    assert all({"id", "name", "state", "cluster", "cigri_job_id", "remote_id"} <= set(row) for row in rows.values())
    front.made["failed_job"] = rows["bad"]["cigri_job_id"]


def gridstat_job(front: Front) -> None:
    user, job = front.site.users[0], front.made["failed_job"]
    status, body = front.send(user, "GET", f"/jobs/{job}")
    assert status == 200 and body["state"] == "failed" and body["cluster_name"] == "local"
    assert front.send(user, "GET", f"/jobs/{job}/stdout") == (200, {"output": "out bad\n"})
    assert front.send(user, "GET", f"/jobs/{job}/stderr") == (200, {"output": "err bad\n"})


def gridevents_campaign(front: Front) -> None:
    status, body = front.send(front.site.users[0], "GET", f"/campaigns/{front.made['campaign']}/events")
    assert status == 200 and [item["code"] for item in body["items"]] == ["EXIT_ERROR"]
    assert {"id", "state", "code", "job_id", "date_open", "cluster_name", "parent", "message"} <= set(body["items"][0])
    front.made["event"] = body["items"][0]["id"]


def gridevents_event(front: Front) -> None:
    status, body = front.send(front.site.users[0], "GET", f"/events/{front.made['event']}")
    assert status == 200 and body["code"] == "EXIT_ERROR"


def gridevents_global(front: Front) -> None:
    assert front.send(front.site.users[0], "GET", "/events")[0] == 404  # CiGri's answer to no event


def gridevents_fix_resubmit(front: Front) -> None:
    user, campaign = front.site.users[0], front.made["campaign"]
    assert front.send(user, "DELETE", f"/campaigns/{campaign}/events?resubmit=1")[0] == 202
    assert front.send(user, "GET", f"/campaigns/{campaign}")[1]["state"] == "in_treatment"


def gridevents_blacklist(front: Front) -> None:
    cluster = front.send(SERVICE, "GET", "/clusters")[1]["items"][0]["id"]
    event = {"class": "cluster", "cluster_id": cluster, "code": "CLUSTER_MANUALLY_DISABLED", "message": "down"}
    assert front.send(front.site.users[0], "POST", "/events", event)[0] == 403  # admins only
    status, body = front.send(SERVICE, "POST", "/events", event)
    assert status == 201, body  # all the client reads
    assert front.send(SERVICE, "GET", f"/clusters/{cluster}")[1]["blacklisted"] is True
    [opened] = [e for e in front.send(SERVICE, "GET", "/events")[1]["items"] if e["code"] == event["code"]]
    assert front.send(SERVICE, "DELETE", f"/events/{opened['id']}")[0] == 202  # gridevents -e E -f
    assert front.send(SERVICE, "GET", f"/clusters/{cluster}")[1]["blacklisted"] is False


def gridclusters(front: Front) -> None:
    user = front.site.users[0]
    status, body = front.send(user, "GET", "/clusters")
    assert status == 200 and [item["name"] for item in body["items"]] == ["local"]
    status, cluster = front.send(user, "GET", f"/clusters/{body['items'][0]['id']}")
    assert status == 200 and isinstance(cluster["ssh_host"], str) and isinstance(cluster["stress_factor"], str)
    status, usage = front.send(user, "GET", "/gridusage")
    assert status == 200 and {"cluster_name", "max_resources", "used_resources", "used_by_cigri",
                              "unavailable_resources"} <= set(usage["items"][0]["clusters"][0])


def gridnotify(front: Front) -> None:
    user = front.site.users[0]
    status, body = front.send(user, "GET", "/notifications?pretty=true")
    assert (status, body["items"]) == (200, [])
    assert front.send(user, "POST", "/notifications/jabber", {"identity": "me@jabber.org", "severity": "low"})[0] == 400


def gridtoken(front: Front) -> None:
    user = front.site.users[0]
    status, body = front.send(user, "GET", "/tokens?pretty=true")
    assert (status, body["items"]) == (200, [])
    status, body = front.send(user, "POST", "/tokens", {"cluster_id": 1, "token": "abc"})
    assert status == 400 and "token" in body["message"]  # the local cluster takes none: one clear line


def gridclean(front: Front) -> None:
    status, body = front.send(front.site.users[0], "GET", f"/campaigns/{front.made['campaign']}/jobs/finished")
    assert status == 200 and all({"cluster_id", "remote_id"} <= set(job) for job in body["items"])


def griddel_job(front: Front) -> None:
    status, body = front.send(front.site.users[0], "DELETE", f"/jobs/{front.made['failed_job']}")
    assert status == 400 and set(body) == {"status", "title", "message"}  # prints "Failed to cancel job"


def griddel(front: Front) -> None:
    user, campaign = front.site.users[0], front.made["other"]
    assert front.send(user, "DELETE", f"/campaigns/{campaign}?holdd=1")[0] == 400  # a typo cancels nothing
    assert front.send(user, "GET", f"/campaigns/{campaign}")[1]["state"] == "in_treatment"
    assert front.send(front.site.users[1], "DELETE", f"/campaigns/{campaign}")[0] == 404  # not theirs
    assert front.send(user, "DELETE", f"/campaigns/{campaign}")[0] == 202
    assert front.send(user, "GET", f"/campaigns/{campaign}")[1]["state"] == "cancelled"


COMMANDS: list[tuple[str, Callable[[Front], None]]] = [
    ("gridsub -f JDL", gridsub), ("gridsub -f JDL with a param_file", gridsub_param_file),
    ("gridsub -c N -J [...]", gridsub_add), ("gridstat", gridstat), ("griddel -p N", griddel_pause),
    ("gridstat -c N", gridstat_campaign), ("gridstat -c N -f", gridstat_full),
    ("gridstat -j J -O -E", gridstat_job), ("gridevents -c N", gridevents_campaign), ("gridevents -e E", gridevents_event),
    ("gridevents -g", gridevents_global), ("gridevents -c N -f -r", gridevents_fix_resubmit),
    ("gridevents --blacklist-cluster C (admin)", gridevents_blacklist), ("gridclusters -i -b", gridclusters),
    ("gridnotify -l, -j", gridnotify), ("gridtoken -l, -i -t", gridtoken), ("gridclean N", gridclean),
    ("griddel -j J", griddel_job), ("griddel -r N", griddel_resume), ("griddel N", griddel)]


@pytest.mark.parametrize("command", COMMANDS, ids=[name for name, _ in COMMANDS])
def test_client_command(front: Front, command: tuple[str, Callable[[Front], None]]) -> None:
    command[1](front)
