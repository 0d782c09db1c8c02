"""A request's body and a listing's page cost the server what their caps say, not what the
client sends.

Replays the findings: one 386 MiB JSON POST took the server from 99 MB to 2.08 GB (a JSON body
got the parameter upload's cap); ``/tasks?limit=1000000`` took 1 GB. Done means: a 1 GiB body
is refused with 413 and the server's RSS stays at most 300 MB.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator

import pytest
from attack import chunks, connect, one, peak_rss_mb, read_until_closed, request, statuses
from service import Site, started

from cigri.errors import Unavailable
from cigri.server.limits import MemoryBudget

pytestmark = pytest.mark.slow
GIB = 1 << 30


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with started() as built:
        yield built


@pytest.fixture(scope="module")
def token(site: Site) -> str:
    return str(site.json(site.users[0], "cigri", "token", "create", "--ttl", "1h")["token"])


def send_streaming(site: Site, head: bytes, body: Iterator[bytes]) -> bytes:
    """Send a head, then the body as long as the server reads it; what it answered."""
    with connect(site.port, timeout=30) as sock:
        sock.sendall(head)
        try:
            for chunk in body:
                sock.sendall(chunk)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # the server answered and closed: the rest is never read
        return read_until_closed(sock, 30)


def test_a_gigabyte_body_is_refused_and_the_server_stays_small(site: Site, token: str) -> None:
    assert site.server is not None
    auth = {"Authorization": f"Bearer {token}", "X-Requested-With": "x", "Content-Type": "application/json"}
    declared = send_streaming(site, request("POST", "/api/v1/campaigns", {**auth, "Content-Length": str(GIB)}),
                              iter(()))
    assert statuses(declared) == [413]
    answer = send_streaming(site, request("POST", "/api/v1/campaigns", {**auth, "Content-Length": str(386 << 20)}),
                            chunks(386 << 20))
    assert statuses(answer) == [413]
    chunked = send_streaming(site, request("POST", "/api/v1/campaigns", {**auth, "Transfer-Encoding": "chunked"}),
                             (b"%x\r\n%s\r\n" % (len(c), c) for c in chunks(GIB)))
    status, body = one(chunked)
    assert status == 413 and "limits.request_body_bytes" in body["error"]
    form = {**auth, "Content-Type": "multipart/form-data; boundary=b"}
    part = b'--b\r\nContent-Disposition: form-data; name="jdl"; filename="big.json"\r\n\r\n'
    pieces = [part, *(c for c, _ in zip(chunks(GIB), range(64))), b"\r\n--b--\r\n"]  # a 64 MiB JDL
    jdl_part = send_streaming(site, request("POST", "/api/v1/campaigns", {**form, "Transfer-Encoding": "chunked"}),
                              (b"%x\r\n%s\r\n" % (len(p), p) for p in [*pieces, b""]))
    status, body = one(jdl_part)
    assert status == 413 and "a JDL of more than" in body["error"]  # held whole, it is no larger than any body
    assert peak_rss_mb(site.server.pid) <= 300
    assert site.http(site.users[0], [("GET", "/whoami", {})])[0][0] == 200


def test_a_listing_answers_a_page_at_most(site: Site) -> None:
    u1, _ = site.users
    campaign = site.submit(u1, site.jdl(u1, "pages", exec_file="/bin/true", nb_jobs=3))
    answers = site.http(u1, [("GET", f"/campaigns/{campaign}/tasks?limit=1000000", {}),
                             ("GET", f"/campaigns/{campaign}/tasks?limit=10000", {}),
                             ("GET", "/campaigns?limit=10001", {}), ("GET", "/events?limit=0", {}),
                             ("GET", f"/campaigns/{campaign}/jobs?offset=-1", {})])
    assert [status for status, _, _ in answers] == [400, 200, 400, 400, 400]
    assert answers[0][1]["field"] == "limit" and len(answers[1][1]) == 3


def test_a_form_of_many_parts_is_refused(site: Site) -> None:
    parts = b"".join(b'--b\r\nContent-Disposition: form-data; name="jdl"; filename="j%d.json"\r\n\r\n{}\r\n' % i
                     for i in range(300)) + b"--b--\r\n"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(30)
        sock.connect(str(site.socket))
        sock.sendall(request("POST", "/api/v1/campaigns", {"Content-Type": "multipart/form-data; boundary=b",
                                                           "X-Requested-With": "x", "Connection": "close"}, parts))
        status, body = one(read_until_closed(sock, 30))
    assert status == 400 and "Too many files" in json.dumps(body)


def test_bodies_held_in_memory_share_the_budget_a_peer_a_quarter() -> None:
    """The budget's own rule: a peer waits for its quarter, others go on; past the wait, 503."""

    async def scenario() -> list[str]:
        budget = MemoryBudget(400, wait=0.2)
        seen = []
        await budget.acquire("a", 100)
        try:
            await budget.acquire("a", 1)  # a's quarter is full
        except Unavailable:
            seen.append("a waits, then 503")
        await budget.acquire("b", 100)
        await budget.acquire("c", 100)
        await budget.acquire("d", 100)
        try:
            await budget.acquire("e", 1)  # the whole budget is held
        except Unavailable:
            seen.append("e waits, then 503")
        waiting = asyncio.create_task(budget.acquire("e", 50))
        await budget.release("b", 100)
        await waiting
        seen.append("e gets b's share")
        return seen

    assert asyncio.run(scenario()) == ["a waits, then 503", "e waits, then 503", "e gets b's share"]
