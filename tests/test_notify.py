"""Notifications through a real SMTP server (aiosmtpd) and a real HTTP server on 127.0.0.1:
grouping, severity filter, retries with backoff, crash safety, and a notifier that fails."""

from __future__ import annotations

import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from email import message_from_bytes
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from harness import Cigri
from test_events import campaign, make_grid

from cigri import api, notify
from cigri.logs import JSONFormatter, TextFormatter
from cigri import db as database
from cigri.cycle import run_cycle
from cigri.errors import InputError, LimitExceeded, NotFound, Refused
from cigri.events import record
from cigri.grid import Grid
from cigri.users import acting_user

USER = acting_user()
ALLOW_LOOPBACK = 'webhook_allow = ["127.0.0.0/8"]\n'  # the test servers listen on 127.0.0.1


class Mailbox:
    """An aiosmtpd handler keeping every message it accepts."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        self.messages.append(message_from_bytes(envelope.content))
        return "250 OK"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def smtp() -> Iterator[tuple[Mailbox, int]]:
    mailbox = Mailbox()
    controller = Controller(mailbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    yield mailbox, controller.port
    controller.stop()


class Hook(BaseHTTPRequestHandler):
    """Answers 500 to the first ``failures`` POSTs, then ``status`` (a 3xx to ``location``);
    keeps every JSON body it received, and each request's path and headers."""

    failures = 0
    status = 204
    location = ""
    bodies: list[dict[str, Any]] = []
    requests: list[dict[str, Any]] = []

    def do_POST(self) -> None:  # noqa: N802
        Hook.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        Hook.requests.append({"path": self.path, "headers": dict(self.headers)})
        if Hook.failures > 0:
            Hook.failures -= 1
            self.send_response(500)
        else:
            self.send_response(Hook.status)
        if Hook.location:
            self.send_header("Location", Hook.location)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def hook() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    Hook.failures, Hook.status, Hook.location, Hook.bodies, Hook.requests = 0, 204, "", [], []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hooks/cigri"
    server.shutdown()
    server.server_close()


@pytest.fixture
def grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, smtp: tuple[Mailbox, int]) -> Iterator[Grid]:
    # bob is a name, not a Unix account: his jobs on the local cluster run as the account running the tests
    grid = make_grid(tmp_path, monkeypatch, f'[notify]\nsmtp_host = "127.0.0.1"\nsmtp_port = {smtp[1]}\n'
                                            f'subject_tag = "[grid]"\nretry_delay = 0.2\nmax_tries = 3\n{ALLOW_LOOPBACK}'
                                            f'[clusters.local.logins]\nbob = "{USER}"\n')
    yield grid
    grid.close()


def confirmed(grid: Grid, mailbox: Mailbox, user: str, target: str, severity: str) -> int:
    """A mail subscription made and confirmed as a user would: with the code mailed to the address
    (the mail is then taken out of the mailbox); its id."""
    subscription = api.subscribe(grid, user=user, kind="mail", target=target, severity=severity)
    assert subscription["confirmed"] is False and mailbox.messages[-1]["To"] == target
    code = re.search(r"gridnotify confirm (\d+) (\w+)", mailbox.messages.pop().get_payload())
    assert code is not None and int(code[1]) == subscription["id"]
    assert api.confirm_subscription(grid, subscription["id"], code[2], user=user)["confirmed"] is True
    return int(subscription["id"])


def failures(grid: Grid, campaign_id: int, n: int) -> None:
    """``n`` different failures (distinct first stderr lines: ``n`` events), in one transaction."""
    with database.write(grid.db) as conn:
        for i in range(n):
            record(conn, "EXIT_ERROR", f"task t{i} exited with status 1", campaign_id=campaign_id, cluster_id=1,
                   signature=f"error {i}", stderr_tail=f"error {i}\n")


def test_a_thousand_failures_send_one_mail_and_one_webhook(grid: Grid, tmp_path: Path, smtp: tuple[Mailbox, int],
                                                           hook: str) -> None:
    mailbox, _ = smtp
    campaign_id, _ = campaign(grid, tmp_path, 1)
    confirmed(grid, mailbox, USER, "alice@example.org", "medium")
    api.subscribe(grid, user=USER, kind="webhook", target=hook, severity="high")
    failures(grid, campaign_id, 1000)
    assert notify.notify(grid) == 2
    assert len(mailbox.messages) == 1 and len(Hook.bodies) == 1
    mail = mailbox.messages[0]
    assert mail["Subject"] == f"[grid] (high): 1000 EXIT_ERROR on campaign #{campaign_id}"
    assert mail["To"] == "alice@example.org" and "error 999" in mail.get_payload()
    body = Hook.bodies[0]
    assert body["severity"] == "high" and len(body["events"]) == 1000 and body["user"] == USER
    assert notify.notify(grid) == 0  # nothing new, nothing sent again
    with database.write(grid.db) as conn:  # the same failure again: one more message, counting 1 new
        record(conn, "EXIT_ERROR", "again", campaign_id=campaign_id, cluster_id=1, signature="error 7")
    notify.notify(grid)
    assert Hook.bodies[1]["events"][0]["new"] == 1 and Hook.bodies[1]["events"][0]["count"] == 2


def test_severity_filter_and_campaign_end(grid: Grid, tmp_path: Path, smtp: tuple[Mailbox, int]) -> None:
    mailbox, _ = smtp
    campaign_id, _ = campaign(grid, tmp_path, 1)
    confirmed(grid, mailbox, USER, "low@example.org", "low")
    confirmed(grid, mailbox, USER, "high@example.org", "high")
    for _ in range(40):  # the one task runs on the local pool; the campaign ends and says so
        run_cycle(grid)
        if mailbox.messages:
            break
        time.sleep(0.1)
    assert [m["To"] for m in mailbox.messages] == ["low@example.org"]  # CAMPAIGN_FINISHED is low
    assert mailbox.messages[0]["Subject"] == (f"[grid] (low): CAMPAIGN_FINISHED on campaign #{campaign_id}: "
                                              f"campaign {campaign_id} terminated")


def test_owners_get_their_campaigns_events_and_admins_the_clusters(grid: Grid, tmp_path: Path,
                                                                   smtp: tuple[Mailbox, int]) -> None:
    mailbox, _ = smtp
    bobs, _ = campaign(grid, tmp_path, 1, user="bob")
    confirmed(grid, mailbox, "bob", "bob@example.org", "low")
    confirmed(grid, mailbox, USER, "admin@example.org", "low")  # root: an admin
    with database.write(grid.db) as conn:
        record(conn, "EXIT_ERROR", "task 0 exited with status 1", campaign_id=bobs, cluster_id=1)
        record(conn, "BLACKLISTED", "cluster blacklisted: 3 cycles", cluster_id=1)
    notify.notify(grid)
    received = {m["To"]: m["Subject"] for m in mailbox.messages}
    assert received == {"bob@example.org": f"[grid] (high): EXIT_ERROR on campaign #{bobs}: task 0 exited with status 1",
                        "admin@example.org": "[grid] (high): BLACKLISTED: cluster blacklisted: 3 cycles"}


def test_a_failing_webhook_is_retried_with_backoff_then_given_up(grid: Grid, tmp_path: Path, hook: str) -> None:
    campaign_id, _ = campaign(grid, tmp_path, 1)
    api.subscribe(grid, user=USER, kind="webhook", target=hook, severity="low")
    Hook.failures = 1
    failures(grid, campaign_id, 3)
    assert notify.notify(grid) == 0
    outbox = grid.db.execute("SELECT state, tries, last_error, next_try_at - ? FROM outbox", [database.now()]).fetchone()
    assert outbox[:3] == ("pending", 1, "HTTP 500") and 0 < outbox[3] <= 0.2
    assert notify.notify(grid) == 0  # not due yet: no call
    assert len(Hook.bodies) == 1
    time.sleep(0.25)
    assert notify.notify(grid) == 1
    assert [b["id"] for b in Hook.bodies] == [Hook.bodies[0]["id"]] * 2  # the same message, the same id

    Hook.failures = 3  # max_tries = 3: backoff 0.2 s, 0.4 s, then given up
    failures(grid, campaign_id, 1)
    for _ in range(3):
        notify.notify(grid)
        time.sleep(0.45)
    assert grid.db.execute("SELECT state, tries FROM outbox ORDER BY id DESC LIMIT 1").fetchone() == ("dead", 3)
    listed = api.list_subscriptions(grid, user=USER)
    assert (listed[0]["sent"], listed[0]["failed"], listed[0]["last_error"]) == (1, 1, "HTTP 500")


def test_a_broken_notifier_never_breaks_the_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    grid = make_grid(tmp_path, monkeypatch, f'[notify]\nsmtp_host = "127.0.0.1"\nsmtp_port = {free_port()}\n'
                                            f'timeout = 1.0\nuser_address = "{{user}}@example.org"\n{ALLOW_LOOPBACK}')
    try:
        campaign_id, _ = campaign(grid, tmp_path, 1)
        api.subscribe(grid, user=USER, kind="mail", target=f"{USER}@example.org", severity="low")  # theirs: no code
        api.subscribe(grid, user=USER, kind="webhook", target=f"http://127.0.0.1:{free_port()}/x", severity="low")
        failures(grid, campaign_id, 2)
        report = run_cycle(grid)  # neither the closed SMTP port nor the closed HTTP port raise
        assert report.submitted == 1
        errors = sorted(r[0] for r in grid.db.execute("SELECT last_error FROM outbox"))
        assert errors[0].startswith("ConnectionRefusedError") and errors[1] == "delivery failed"
    finally:
        grid.close()


_CRASH = """
import os, signal, sys
from cigri import config, notify
from cigri.grid import open_grid
grid = open_grid(config.load())
notify.collect(grid)
os.kill(os.getpid(), signal.SIGKILL)  # dies after writing the outbox, before sending
"""


def test_a_kill_between_collecting_and_sending_neither_loses_nor_repeats(grid: Grid, tmp_path: Path, hook: str) -> None:
    campaign_id, _ = campaign(grid, tmp_path, 1)
    api.subscribe(grid, user=USER, kind="webhook", target=hook, severity="low")
    failures(grid, campaign_id, 5)
    crashed = subprocess.run([sys.executable, "-c", _CRASH], env=os.environ, capture_output=True)
    assert crashed.returncode == -signal.SIGKILL
    assert Hook.bodies == []
    assert notify.notify(grid) == 1 and notify.notify(grid) == 0
    assert len(Hook.bodies) == 1 and len(Hook.bodies[0]["events"]) == 5


def test_subscriptions_check_their_input_and_belong_to_their_user(grid: Grid) -> None:
    with pytest.raises(InputError, match="severity"):
        api.subscribe(grid, user=USER, kind="mail", target="a@example.org", severity="urgent")
    with pytest.raises(InputError, match="mail address"):
        api.subscribe(grid, user=USER, kind="mail", target="a@example.org\nBcc: x@evil.org", severity="low")
    with pytest.raises(InputError, match="webhook URL"):
        api.subscribe(grid, user=USER, kind="webhook", target="file:///etc/passwd", severity="low")
    first = api.subscribe(grid, user="alice", kind="mail", target="a@example.org", severity="low")["id"]
    assert api.subscribe(grid, user="alice", kind="mail", target="a@example.org", severity="high")["id"] == first
    assert [s["severity"] for s in api.list_subscriptions(grid, user="alice")] == ["high"]
    with pytest.raises(NotFound, match=f"subscription {first}: no such subscription"):  # another's: as none
        api.unsubscribe(grid, first, user="bob")
    with pytest.raises(Refused):
        api.list_subscriptions(grid, user="bob", all_users=True)
    api.unsubscribe(grid, first, user="alice")
    assert api.list_subscriptions(grid, user="alice") == []


@pytest.mark.parametrize("target", ["a@x.org,victim@y.org", "a@x.org, victim", "a@x.org;victim@y.org",
                                    "a@x.org victim@y.org", "<a@x.org>", "Alice <a@x.org>", '"a,b"@x.org',
                                    "a(comment)@x.org", "a@x.org\tb@y.org", "a@@x.org", "a@x..org", "@x.org",
                                    "a@", "a.@x.org", "a@[127.0.0.1]", "a@x.org:b"])
def test_a_mail_subscription_is_one_address(grid: Grid, target: str) -> None:
    """``--mail "a@x.org,victim"`` made the mail go to a second recipient."""
    with pytest.raises(InputError, match=r"^mail address: .* is not one address"):
        api.subscribe(grid, user=USER, kind="mail", target=target, severity="low")
    assert api.list_subscriptions(grid, user=USER) == []


def test_plain_addresses_are_taken(grid: Grid, smtp: tuple[Mailbox, int], tmp_path: Path) -> None:
    mailbox, _ = smtp
    for target in ("alice@example.org", "first.last+tag@mail.example-1.org", "o'brien@example.org"):
        confirmed(grid, mailbox, USER, target, "low")
    failures(grid, campaign(grid, tmp_path, 1)[0], 1)
    assert notify.notify(grid) == 3
    assert sorted(m["To"] for m in mailbox.messages) == ["alice@example.org", "first.last+tag@mail.example-1.org",
                                                         "o'brien@example.org"]


def _code(mail: Any) -> tuple[int, str]:
    found = re.search(r"gridnotify confirm (\d+) (\w+)", mail.get_payload())
    assert found is not None, mail.get_payload()
    return int(found[1]), found[2]


def test_another_address_is_sent_nothing_until_its_code_is_typed(grid: Grid, tmp_path: Path,
                                                                  smtp: tuple[Mailbox, int]) -> None:
    """Issue #33: a user's stderr was mailed to someone else, from the site. Subscribing another
    address mails it one code naming the user, and nothing else, events included, until the code
    is typed; the database keeps only the code's hash."""
    mailbox, _ = smtp
    campaign_id, _ = campaign(grid, tmp_path, 1)
    made = api.subscribe(grid, user=USER, kind="mail", target="victim@example.org", severity="low")
    assert made["confirmed"] is False
    [asked] = mailbox.messages
    assert asked["To"] == "victim@example.org" and asked["Subject"] == f"[grid] confirm the notifications of {USER}"
    subscription, code = _code(asked)
    assert subscription == made["id"] and len(code) == 10
    assert code not in "".join(grid.db.iterdump())
    failures(grid, campaign_id, 3)
    assert notify.notify(grid) == 0 and len(mailbox.messages) == 1
    assert api.subscribe(grid, user=USER, kind="mail", target="victim@example.org", severity="medium")["id"] == \
        subscription and len(mailbox.messages) == 1  # a code still waits: none mailed again
    assert [s["confirmed"] for s in api.list_subscriptions(grid, user=USER)] == [False]
    with pytest.raises(InputError, match="^code: not the one mailed to victim@example.org$"):
        api.confirm_subscription(grid, subscription, "0" * 10, user=USER)
    with pytest.raises(NotFound, match=f"subscription {subscription}: no such subscription"):
        api.confirm_subscription(grid, subscription, code, user="bob")  # another's: as none
    assert api.confirm_subscription(grid, subscription, code, user=USER)["confirmed"] is True
    with database.write(grid.db) as conn:
        record(conn, "EXIT_ERROR", "after", campaign_id=campaign_id, cluster_id=1, signature="after",
               stderr_tail="after\n")
    assert notify.notify(grid) == 1
    told = mailbox.messages[-1]
    assert told["To"] == "victim@example.org" and "after" in told.get_payload() and "error 0" not in told.get_payload()


def test_codes_expire_wear_out_and_are_mailed_five_a_day(grid: Grid, smtp: tuple[Mailbox, int]) -> None:
    mailbox, _ = smtp
    first = api.subscribe(grid, user="eve", kind="mail", target="a@example.org", severity="low")["id"]
    _, code = _code(mailbox.messages[-1])
    for _ in range(5):
        with pytest.raises(InputError, match="code: not the one"):
            api.confirm_subscription(grid, first, "f" * 10, user="eve")
    with pytest.raises(Refused, match="no code waits for a@example.org .*mails a new one"):
        api.confirm_subscription(grid, first, code, user="eve")  # the right one, after five wrong ones
    api.subscribe(grid, user="eve", kind="mail", target="a@example.org", severity="low")  # a new code
    _, second = _code(mailbox.messages[-1])
    with database.write(grid.db) as conn:
        conn.execute("UPDATE mail_codes SET expires_at = ?", [database.now() - 1])  # a day later
    with pytest.raises(Refused, match="no code waits"):
        api.confirm_subscription(grid, first, second, user="eve")
    for i in range(3):
        api.subscribe(grid, user="eve", kind="mail", target=f"b{i}@example.org", severity="low")
    with pytest.raises(LimitExceeded, match="5 confirmation codes were mailed for you within a day"):
        api.subscribe(grid, user="eve", kind="mail", target="c@example.org", severity="low")
    assert len(mailbox.messages) == 5
    assert not any(s["confirmed"] for s in api.list_subscriptions(grid, user="eve"))


def test_the_users_own_address_needs_no_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            smtp: tuple[Mailbox, int]) -> None:
    mailbox, port = smtp
    grid = make_grid(tmp_path, monkeypatch, f'[notify]\nsmtp_host = "127.0.0.1"\nsmtp_port = {port}\n'
                                            'user_address = "{user}@Example.org"\n')
    try:
        assert api.subscribe(grid, user="alice", kind="mail", target="alice@example.org", severity="low")["confirmed"]
        assert not api.subscribe(grid, user="alice", kind="mail", target="bob@example.org", severity="low")["confirmed"]
        assert [m["To"] for m in mailbox.messages] == ["bob@example.org"]  # the code; nothing to her own
    finally:
        grid.close()


@pytest.mark.parametrize("template", ["example.org", "{user}", "{user}@", "a@{user}.org", "{user}@x.org, b@y.org"])
def test_a_user_address_must_be_an_address_of_the_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       template: str) -> None:
    with pytest.raises(InputError, match="^notify.user_address: expected an address with {user} in its local part"):
        make_grid(tmp_path, monkeypatch, f'[notify]\nuser_address = "{template}"\n')


@pytest.mark.slow
def test_gridnotify_confirm(cigri: Cigri, smtp: tuple[Mailbox, int]) -> None:
    mailbox, port = smtp
    with cigri.config.open("a") as conf:
        conf.write(f'[notify]\nsmtp_host = "127.0.0.1"\nsmtp_port = {port}\n')
    said = cigri.run("gridnotify", "subscribe", "--mail", "friend@example.org").stdout
    subscription, code = _code(mailbox.messages[-1])
    assert said == (f"Subscription {subscription}: mail friend@example.org, severity medium and above; unconfirmed: "
                    f"nothing is sent there until you type the code mailed to it: gridnotify confirm {subscription} CODE\n")
    assert cigri.run("gridnotify", "-l").stdout.endswith("with severity medium (unconfirmed: gridnotify confirm)\n")
    wrong = cigri.run("gridnotify", "confirm", str(subscription), "nope", expect=2)
    assert wrong.stderr == "gridnotify: code: not the one mailed to friend@example.org\n"
    assert cigri.run("gridnotify", "confirm", str(subscription), code).stdout == \
        f"Subscription {subscription}: mail friend@example.org confirmed\n"
    assert [s["confirmed"] for s in cigri.json("gridnotify", "list")] == [True]


@pytest.mark.slow
def test_gridnotify_command(cigri: Cigri, hook: str) -> None:
    with cigri.config.open("a") as conf:
        conf.write(f"[notify]\n{ALLOW_LOOPBACK}")
    created = cigri.json("gridnotify", "subscribe", "--webhook", hook, "-s", "low")
    listed = cigri.json("gridnotify", "list")
    assert [(s["id"], s["kind"], s["target"], s["severity"]) for s in listed] == [(created["id"], "webhook", hook, "low")]
    bad = cigri.run("gridnotify", "subscribe", "--mail", "x@example.org", "-s", "urgent", expect=2)
    assert bad.stderr == "gridnotify: severity: expected low, medium or high, got 'urgent'\n"
    assert cigri.run("gridnotify", "unsubscribe", "999", expect=1).stderr.count("\n") == 1
    cigri.run("gridnotify", "unsubscribe", str(created["id"]))
    assert cigri.json("gridnotify", "list") == []


def test_gridnotify_masks_a_webhook_password_and_refuses_mail_without_smtp(cigri: Cigri) -> None:
    cigri.run("cigri", "db", "init")
    result = cigri.run("gridnotify", "subscribe", "--mail", "me@example.org", expect=1)
    assert result.stderr.splitlines() == ["gridnotify: notify.smtp_host is not set: mail notifications cannot be "
                                          "sent on this grid (ask an admin, or subscribe a --webhook)"]
    assert cigri.json("gridnotify", "list") == []
    url = "https://bot:s3cr3t@hooks.example.org/T0/B0/XXXX?s3cr3t=no"
    shown = "https://bot:***@hooks.example.org/T0/B0/XXXX?s3cr3t=no"
    outputs = [cigri.run("gridnotify", "subscribe", "--webhook", url).stdout]
    outputs += [cigri.run("gridnotify", "list", *args).stdout for args in ([], ["--json"], ["-a", "--json"])]
    assert shown in outputs[0] and shown in outputs[1]
    assert [s["target"] for s in json.loads(outputs[2])] == [s["target"] for s in json.loads(outputs[3])] == [shown]
    assert not any(":s3cr3t@" in output for output in outputs)


def test_failed_notifications_go_to_the_log_not_to_the_terminal_driving_the_cycle(cigri: Cigri) -> None:
    with cigri.config.open("a") as conf:
        conf.write(f"[notify]\nretry_delay = 0.0\n{ALLOW_LOOPBACK}")
    cigri.run("gridnotify", "subscribe", "--webhook", f"http://127.0.0.1:{free_port()}/closed", "-s", "low")
    waited = cigri.run("gridsub", "-f", str(cigri.jdl("noisy", exec_file="/bin/true", params=["a"])),
                       "--wait", "--period", "0.05")
    cycled = cigri.run("cigri", "cycle")  # tries the message again
    assert "notification" not in waited.stderr + cycled.stderr
    assert "notification 1 (webhook, try 2/8) failed: ConnectError" in (cigri.home / "log" / "cigri.log").read_text()


def test_no_url_credential_or_query_string_reaches_a_log_line(cigri: Cigri, hook: str) -> None:
    """httpx logs each request's URL at INFO, cigri.log's default level: a webhook's password and
    token were written there. A real delivery and a failed one, with the log file and ``-v``."""
    with cigri.config.open("a") as conf:
        conf.write(f"[notify]\nretry_delay = 0.0\n{ALLOW_LOOPBACK}")
    for target in (hook.replace("http://", "http://bot:secret@") + "?token=secret",
                   f"http://bot:secret@127.0.0.1:{free_port()}/closed?token=secret"):
        cigri.run("gridnotify", "subscribe", "--webhook", target, "-s", "low")
    waited = cigri.run("gridsub", "-f", str(cigri.jdl("told", exec_file="/bin/true", params=["a"])),
                       "--wait", "--period", "0.05")
    cycled = cigri.run("cigri", "-v", "cycle")  # the failed one again, logged on stderr too
    assert len(Hook.bodies) == 1 and Hook.bodies[0]["events"][0]["code"] == "CAMPAIGN_FINISHED"
    log = (cigri.home / "log" / "cigri.log").read_text()
    assert "notification 2 (webhook, try 2/8) failed: ConnectError" in log
    for text in (log, waited.stderr, cycled.stderr):
        assert "secret" not in text


@pytest.mark.parametrize("formatter", [TextFormatter(True), TextFormatter(False), JSONFormatter(True)],
                         ids=["text", "text-brief", "json"])
def test_every_log_line_masks_url_credentials_and_query_strings(formatter: logging.Formatter) -> None:
    """Whatever logs a URL (a library, an error quoting one), at any level."""
    try:
        raise ValueError("cannot reach https://bot:p@ss@hooks.example.org/T0/B0?token=s3cret&x=1 now")
    except ValueError:
        failure = sys.exc_info()
    record = logging.LogRecord("httpx", logging.DEBUG, __file__, 1, "HTTP Request: POST %s",
                               ("http://u:s3cret@10.0.0.1:8080/x?token=s3cret",), failure)
    line = formatter.format(record)
    assert "s3cret" not in line and "p@ss" not in line
    assert "http://***@10.0.0.1:8080/x?***" in line and "https://***@hooks.example.org/T0/B0?***" in line
