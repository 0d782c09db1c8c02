"""A trusted front is judged by the peer the kernel names, never by a header.

Replays the finding: behind the documented front, ``X-Forwarded-For: 192.0.2.10`` and
``X-CIGRI-USER: root`` from 127.0.0.1 made anyone root (uvicorn rewrote the client address from
the forwarded header, and ``trusted_proxies`` was checked against the rewritten one), and any
local user, connecting from 127.0.0.1 itself, could name anyone. Now a front over TCP must also
send its secret, a front on the socket is whom the kernel names, no forwarded header is read,
and a front never names root.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from attack import exchange, one, request
from service import Site, started
from unix_users import NAMES, run_as

pytestmark = pytest.mark.slow

SPOOFS = ({"X-Forwarded-For": "192.0.2.10"}, {"X-Forwarded-For": "127.0.0.1"}, {"Forwarded": "for=192.0.2.10"},
          {"X-Real-IP": "192.0.2.10"}, {"X-Forwarded-For": "192.0.2.10, 127.0.0.1", "X-Forwarded-Proto": "https"},
          {"Client-IP": "192.0.2.10"})


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    """A front on 127.0.0.1 with its secret; the second user's account is a front on the socket."""
    with started(f'front_users = "{NAMES[1]}"\n', front=True) as built:
        yield built


def whoami(site: Site, headers: dict[str, str]) -> tuple[int, object]:
    return one(exchange(site.port, request("GET", "/api/v1/whoami", {"Connection": "close", **headers})))


def test_a_forwarded_address_or_a_header_alone_makes_no_one_anyone(site: Site) -> None:
    """From 127.0.0.1 (where every local user connects from) without the front's secret, the
    user header is refused whatever forwarded header comes with it."""
    u1, _ = site.users
    for spoof in SPOOFS:
        for user in ("root", u1):
            status, body = whoami(site, {**spoof, "X-CIGRI-USER": user})
            assert status == 401, (spoof, user, body)
            assert "front's secret is missing or wrong" in body["error"]
        status, _ = whoami(site, {**spoof, "X-CIGRI-USER": u1, "X-CIGRI-FRONT-SECRET": "0" * 64})
        assert status == 401


def test_the_front_with_its_secret_names_users_but_never_root(site: Site) -> None:
    u1, _ = site.users
    secret = {"X-CIGRI-FRONT-SECRET": site.front_secret}
    status, body = whoami(site, {**secret, "X-CIGRI-USER": u1})
    assert (status, body["user"], body["admin"], body["method"]) == (200, u1, False, "proxy")
    for user in ("root", "0", " root", "root "):
        status, body = whoami(site, {**secret, "X-CIGRI-USER": user})
        assert status == 401, (user, body)
    planted = json.dumps({"name": "x", "exec_file": "/usr/bin/id", "nb_jobs": 1, "clusters": {"local": {}}}).encode()
    status, _ = one(exchange(site.port, request("POST", "/api/v1/campaigns", {
        **secret, "X-CIGRI-USER": "root", "X-Requested-With": "x", "Content-Type": "application/json",
        "Connection": "close"}, planted)))
    assert status == 401
    assert site.json("root", "gridstat", "-a", "-u", "root") == []


def test_other_spellings_of_the_user_header_are_not_the_user_header(site: Site) -> None:
    u1, u2 = site.users
    secret = {"X-CIGRI-FRONT-SECRET": site.front_secret}
    status, body = one(exchange(site.port, request("GET", "/api/v1/whoami", {"Connection": "close", **secret})
                                .replace(b"\r\n\r\n", f"\r\nX-CIGRI-USER: {u1}\r\nx-cigri-user: {u2}\r\n\r\n".encode())))
    assert status == 401 and "not one user name" in body["error"]
    for name in ("X_CIGRI_USER", "X-CIGRI-USER-", "X-CIGRI-USERS"):
        assert whoami(site, {**secret, name: u1})[0] == 401, name
    status, _ = one(exchange(site.port, request("GET", "/api/v1/whoami", {"Connection": "close"})
                             .replace(b"\r\n\r\n", f"\r\nX-CIGRI-USER: {u1}\r\nX-CIGRI-FRONT-SECRET: "
                                                   f"{site.front_secret}\r\nX-CIGRI-FRONT-SECRET: x\r\n\r\n".encode())))
    assert status == 401


def test_a_front_on_the_socket_is_whom_the_kernel_names(site: Site) -> None:
    """The second user's account is the front there: it may name the first user; the first
    user's own header names nobody (the kernel says who they are)."""
    u1, u2 = site.users
    [(_, by_front, _)] = site.http(u2, [("GET", "/whoami", {"headers": {"X-CIGRI-USER": u1}})])
    assert (by_front["user"], by_front["method"]) == (u1, "proxy")
    [(_, by_user, _)] = site.http(u1, [("GET", "/whoami", {"headers": {"X-CIGRI-USER": u2}})])
    assert (by_user["user"], by_user["method"]) == (u1, "socket")
    [(status, _, _)] = site.http(u2, [("GET", "/whoami", {"headers": {"X-CIGRI-USER": "root"}})])
    assert status == 401


def test_a_front_over_tcp_without_a_secret_is_refused_at_start_and_by_doctor(site: Site) -> None:
    """The documented front of old (an address alone): the server does not start, and
    ``cigri doctor`` says why; a secret others can read is refused too."""
    broken = Site('trusted_proxies = "127.0.0.1"\n')
    try:
        result = run_as("root", [str(broken.bin / "cigri"), "server"], env=broken.server_env(), timeout=60)
        assert result.returncode == 2
        assert result.stderr.startswith("cigri: server.trusted_proxies: a front over TCP must also send a secret")
        assert len(result.stderr.splitlines()) == 1
        doctor = run_as("root", [str(broken.bin / "cigri"), "doctor", "--json"], env=broken.server_env())
        checks = json.loads(doctor.stdout)
        assert doctor.returncode == 1 and checks[0]["ok"] is False
        assert "front over TCP must also send a secret" in checks[0]["detail"]
    finally:
        broken.close()
    readable = Site(front=True)
    try:
        (readable.root / "front.secret").chmod(0o644)
        result = run_as("root", [str(readable.bin / "cigri"), "server"], env=readable.server_env(), timeout=60)
        assert result.returncode == 2 and "front.secret is readable by others" in result.stderr
    finally:
        readable.close()
