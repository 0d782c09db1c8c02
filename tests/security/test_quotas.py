"""What one user may store, and hold, stays theirs to bound: disk while uploading, the database
over time, browser sessions, login attempts.

Replays the findings: five concurrent 1 GiB uploads put 5.2 GB on disk past a 4 GiB cap; a
submit/cancel loop grew the database from 0.39 to 1.9 GB in 2.5 minutes; 10,010 logins with
rotating forwarded addresses flushed the session table and ended another user's session. The
caps here are small so that the test is quick.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from attack import connect, exchange, one, read_until_closed, request, statuses
from service import Site, started

pytestmark = pytest.mark.slow
MIB = 1 << 20
LIMITS = ("sessions_per_user = 3\n[limits]\nparam_bytes = 8388608\nsubmission_param_bytes = 6291456\n"
          "request_body_bytes = 65536\nkept_tasks = 2500\ntokens_per_user = 3\nsubscriptions_per_user = 2\n"
          '[notify]\nwebhook_allow = ["127.0.0.0/8"]\n')


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with started(LIMITS) as built:
        yield built


def disk_used(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        for entry in path.rglob("*") if path.exists() else []:
            try:
                total += entry.stat().st_size if entry.is_file() else 0
            except FileNotFoundError:
                pass
    return total


def test_concurrent_uploads_never_take_a_user_past_their_room(site: Site) -> None:
    """Five uploads of 5 MiB each at once, 8 MiB of room: at most one is stored, and what is
    on the server's disk for them at any moment stays within twice the room."""
    u1, _ = site.users
    token = site.json(u1, "cigri", "token", "create", "--ttl", "1h")["token"]
    lines = b"".join(b"t%07d %s\n" % (i, b"x" * 100) for i in range(5 * MIB // 110))
    jdl = (b'{"name": "up", "exec_file": "/bin/true", "param_file": "p.txt", "clusters": {"local": {}}}')
    body = (b'--b\r\nContent-Disposition: form-data; name="jdl"; filename="up.json"\r\n\r\n' + jdl +
            b'\r\n--b\r\nContent-Disposition: form-data; name="params.0"; filename="p.txt"\r\n\r\n' + lines +
            b"\r\n--b--\r\n")
    head = request("POST", "/api/v1/campaigns", {"Authorization": f"Bearer {token}", "X-Requested-With": "x",
                                                 "Content-Type": "multipart/form-data; boundary=b",
                                                 "Content-Length": str(len(body)), "Connection": "close"})
    answers: list[int] = []
    peak = [0]
    spool = [site.home / "spool" / "uploads", site.home / "spool" / "staging"]

    def upload() -> None:
        with connect(site.port, timeout=60) as sock:
            sock.sendall(head)
            try:
                for start in range(0, len(body), 256 << 10):  # slowly: all five are in flight together
                    sock.sendall(body[start:start + (256 << 10)])
                    time.sleep(0.05)
            except OSError:
                pass
            answers.extend(statuses(read_until_closed(sock, 60)))

    threads = [threading.Thread(target=upload) for _ in range(5)]
    for thread in threads:
        thread.start()
    while any(thread.is_alive() for thread in threads):
        peak[0] = max(peak[0], disk_used(spool))
        time.sleep(0.02)
    assert sorted(answers) in ([201, 429, 429, 429, 429], [429] * 5), answers
    stored = sum(c["tasks"]["total"] for c in site.json(u1, "gridstat", "-a") if c["name"] == "up")
    assert stored <= len(lines.splitlines())
    assert peak[0] <= 2 * (8 * MIB + 65536) + MIB, f"{peak[0] / MIB:.1f} MiB on disk for uploads at once"
    assert disk_used(spool) == 0


def test_a_submit_and_cancel_loop_stops_at_the_kept_cap_until_purged(site: Site) -> None:
    _, u2 = site.users
    database = site.home / "cigri.db"
    ids = []
    for _ in range(2):
        ids.append(site.submit(u2, site.jdl(u2, "loop", exec_file="/bin/true", nb_jobs=1000)))
        site.run(u2, "griddel", str(ids[-1]))
    size = database.stat().st_size
    refused = site.run(u2, "gridsub", "-f", str(site.jdl(u2, "loop", exec_file="/bin/true", nb_jobs=1000)),
                       expect=1)
    assert "(limits.kept_tasks, limits.kept_param_bytes); purge ended campaigns first: griddel --purge N" in \
        refused.stderr and refused.stderr.count("\n") == 1
    assert database.stat().st_size <= size + MIB
    site.run(u2, "griddel", "--purge", str(ids[0]))
    site.submit(u2, site.jdl(u2, "after-purge", exec_file="/bin/true", nb_jobs=1000))


def login(site: Site, token: str, forwarded: str) -> tuple[int, str | None]:
    answer = exchange(site.port, request("POST", "/login", {
        "Content-Type": "application/x-www-form-urlencoded", "X-Forwarded-For": forwarded, "Connection": "close"},
        f"token={token}&next=/".encode()))
    cookie = next((line.split(b"=", 1)[1].split(b";")[0].decode() for line in answer.split(b"\r\n")
                   if line.lower().startswith(b"set-cookie: cigri_session=")), None)
    return one(answer)[0], cookie


def page_status(site: Site, cookie: str) -> int:
    return one(exchange(site.port, request("GET", "/", {"Cookie": f"cigri_session={cookie}",
                                                        "Connection": "close"})))[0]


def test_nobodys_logins_end_another_users_session(site: Site) -> None:
    u1, u2 = site.users
    first = site.json(u1, "cigri", "token", "create", "--ttl", "1h")["token"]
    second = site.json(u2, "cigri", "token", "create", "--ttl", "1h")["token"]
    status, victim = login(site, first, "192.0.2.1")
    assert status == 303 and victim is not None
    cookies = [login(site, second, f"198.51.100.{i}")[1] for i in range(20)]
    assert page_status(site, victim) == 200  # the first user's session lives on
    assert [page_status(site, c) for c in cookies[-3:]] == [200] * 3  # the second user's newest ones
    assert page_status(site, cookies[0]) == 303  # their oldest: ended, back to the login form


def test_failed_logins_are_counted_against_the_address_whatever_it_claims(site: Site) -> None:
    """60 failures a minute from one address, refilled one a second: past the first 60, only
    as many more are answered as seconds have gone by (a loaded machine is slow to send them)."""
    started_at = time.monotonic()
    answers = [login(site, "cigri_" + "x" * 43, f"203.0.113.{i % 250}")[0] for i in range(60)]
    while answers[-1] != 429 and len(answers) < 120:
        answers.append(login(site, "cigri_" + "x" * 43, f"203.0.113.{len(answers) % 250}")[0])
    refilled = time.monotonic() - started_at
    assert answers[:60] == [401] * 60 and answers[-1] == 429
    assert len(answers) - 61 <= refilled + 1


def test_tokens_a_user_holds_are_bounded_and_ended_ones_forgotten(site: Site) -> None:
    """``limits.tokens_per_user`` (3 here) valid tokens; a loop of creating and revoking keeps
    the user's rows at their valid tokens plus the newest 100 ended ones."""
    u1, _ = site.users
    for token in site.json(u1, "cigri", "token", "list"):  # whatever this module's other tests made
        if token["state"] == "valid":
            site.run(u1, "cigri", "token", "revoke", str(token["id"]))
    held = [site.json(u1, "cigri", "token", "create", "--ttl", "1h")["id"] for _ in range(3)]
    refused = site.run(u1, "cigri", "token", "create", expect=1)
    assert refused.stderr == (f"cigri: {u1}: 3 valid tokens, the most one user holds (limits.tokens_per_user); "
                              "revoke one first (cigri token list, cigri token revoke ID)\n")
    for token_id in held[1:]:
        site.run(u1, "cigri", "token", "revoke", str(token_id))
    [(status, _, _)] = site.http(u1, [("POST", "/tokens", {"json": {"ttl": "1s"}})] * 1)
    assert status == 201
    requests = [("POST", "/tokens", {"json": {"ttl": "1s"}})] * 110
    assert {status for status, _, _ in site.http(u1, requests)} <= {201, 429}
    rows = len(site.json(u1, "cigri", "token", "list"))
    assert rows <= 3 + 100


def test_subscriptions_a_user_holds_are_bounded(site: Site) -> None:
    _, u2 = site.users
    hooks = [f"http://127.0.0.1:9/hook{i}" for i in range(3)]
    for hook in hooks[:2]:
        site.run(u2, "gridnotify", "subscribe", "--webhook", hook)
    refused = site.run(u2, "gridnotify", "subscribe", "--webhook", hooks[2], expect=1)
    assert refused.stderr == (f"gridnotify: {u2}: 2 subscriptions, the most one user holds "
                              "(limits.subscriptions_per_user); gridnotify unsubscribe one first\n")
    site.run(u2, "gridnotify", "subscribe", "--webhook", hooks[0], "-s", "high")  # changing one is no new one
