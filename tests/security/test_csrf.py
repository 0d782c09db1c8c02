"""Another site's page cannot act as the user a front or a dashboard session names.

Replays the finding: through a front, a ``multipart/form-data`` POST from another origin (what
any page can make a browser send, with the front's credentials) created a campaign that ran as
the victim; the login form took a POST with ``Origin: https://evil.example``. A request that
changes something and carries no token must now show it comes from no other site and carry
``X-Requested-With`` (which no cross-site form or simple request can).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from attack import exchange, one, request
from service import Site, started

pytestmark = pytest.mark.slow
BOUNDARY = "cigriattack"


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with started(front=True) as built:
        yield built


def planted(site: Site) -> bytes:
    """The attacker's form: a campaign whose program copies what it can (here: `id`)."""
    jdl = json.dumps({"name": "planted", "exec_file": "/usr/bin/id", "nb_jobs": 1, "clusters": {"local": {}},
                      "exec_directory": str(site.exec)})
    return (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"jdl\"; filename=\"x.json\"\r\n"
            f"Content-Type: application/json\r\n\r\n{jdl}\r\n--{BOUNDARY}--\r\n").encode()


def post(site: Site, path: str, headers: dict[str, str], body: bytes) -> tuple[int, object]:
    front = {"X-CIGRI-USER": site.users[0], "X-CIGRI-FRONT-SECRET": site.front_secret, "Connection": "close",
             "Host": f"127.0.0.1:{site.port}"}
    return one(exchange(site.port, request("POST", path, {**front, **headers}, body)))


def campaigns(site: Site) -> list[dict[str, object]]:
    return site.json(site.users[0], "gridstat", "-a")  # type: ignore[no-any-return]


def test_a_cross_site_form_through_the_front_plants_nothing(site: Site) -> None:
    form = {"Content-Type": f"multipart/form-data; boundary={BOUNDARY}"}
    attempts = [
        {"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},  # what a browser sends
        {"Origin": "https://evil.example"},
        {"Origin": "null"},
        {"Sec-Fetch-Site": "same-site", "X-Requested-With": "x"},  # another host of the site's domain
        {"Origin": "https://evil.example", "X-Requested-With": "x"},
        {"Origin": f"http://127.0.0.1:{site.port}.evil.example", "X-Requested-With": "x"},
        {},  # no Origin at all (an old browser), but no X-Requested-With either
    ]
    for headers in attempts:
        status, body = post(site, "/api/v1/campaigns", {**form, **headers}, planted(site))
        assert status == 403, (headers, body)
    for kind in ("text/plain", "application/x-www-form-urlencoded"):  # the other simple content types
        status, _ = post(site, "/api/v1/campaigns", {"Content-Type": kind, "Origin": "https://evil.example"},
                         b"name=planted")
        assert status == 403
    assert campaigns(site) == []
    status, body = post(site, "/api/v1/campaigns", {**form, "X-Requested-With": "cigri",
                                                    "Origin": f"http://127.0.0.1:{site.port}"}, planted(site))
    assert status == 201, body  # the same request from the site itself, as a client sends it
    assert [c["name"] for c in campaigns(site)] == ["planted"]


def test_the_login_form_takes_no_post_from_another_site(site: Site) -> None:
    u1, _ = site.users
    token = site.json(u1, "cigri", "token", "create", "--ttl", "1h")["token"]
    for headers in ({"Origin": "https://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
        answer = exchange(site.port, request("POST", "/login", {
            "Content-Type": "application/x-www-form-urlencoded", "Connection": "close", **headers},
            f"token={token}&next=/".encode()))
        assert one(answer)[0] == 403 and b"set-cookie" not in answer.lower()
    answer = exchange(site.port, request("POST", "/login", {
        "Content-Type": "application/x-www-form-urlencoded", "Connection": "close",
        "Origin": f"http://127.0.0.1:{site.port}", "Host": f"127.0.0.1:{site.port}"},
        f"token={token}&next=/".encode()))
    assert one(answer)[0] == 303 and b"cigri_session=" in answer


def test_a_dashboard_form_with_its_token_is_still_refused_from_another_site(site: Site) -> None:
    u1, _ = site.users
    front = {"X-CIGRI-USER": u1, "X-CIGRI-FRONT-SECRET": site.front_secret, "Connection": "close"}
    program = site.script("sleepy.sh", "sleep 30\n")  # running while the page is read: its forms shown
    campaign = site.submit(u1, site.jdl(u1, "mine", exec_file=str(program), nb_jobs=1))
    page = exchange(site.port, request("GET", f"/campaigns/{campaign}", front)).decode()
    csrf = re.search(r'name="csrf" value="([0-9a-f]{64})"', page)
    assert csrf is not None
    form = {"Content-Type": "application/x-www-form-urlencoded", **front}
    answer = exchange(site.port, request("POST", f"/campaigns/{campaign}/cancel",
                                         {**form, "Sec-Fetch-Site": "cross-site"}, f"csrf={csrf[1]}".encode()))
    assert one(answer)[0] == 403
    assert site.json(u1, "gridstat", "-c", str(campaign))["state"] == "in_treatment"
    site.run(u1, "griddel", str(campaign))
