"""Webhook targets (issue 23): no user makes cigri's account call a loopback, link-local or
private address, whatever its spelling, at subscription or at delivery (unless the site allows
the network in ``notify.webhook_allow``); redirects are not followed; what ``gridnotify list``
shows of a failed delivery tells no open port from a closed one. Real HTTP and TCP servers on
127.0.0.1."""

from __future__ import annotations

import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from test_events import campaign, make_grid
from test_notify import Hook, failures, free_port, hook  # noqa: F401  (hook: a fixture)

from cigri import api, config, notify
from cigri.errors import ConfigError, InputError, Refused
from cigri.grid import Grid, open_grid
from cigri.users import acting_user

USER = acting_user()
ALLOW = '[notify]\nretry_delay = 0.0\ntimeout = 1.0\nwebhook_allow = ["127.0.0.0/8", "fd00::/8"]\n'

REFUSED = ["http://127.0.0.1/hook", "http://localhost:8080/hook", "http://0x7f000001/", "http://2130706433/",
           "http://0177.0.0.1/", "http://127.1/", "http://[::1]/", "http://[::ffff:127.0.0.1]/",
           "http://169.254.169.254/latest/meta-data/", "http://10.1.2.3/", "http://172.16.0.1/",
           "http://192.168.1.1/", "http://100.64.0.1/", "http://0.0.0.0/", "http://[::]/", "http://[fc00::1]/",
           "http://[fd12:3456::1]/", "http://[fe80::1]/", "http://224.0.0.1/", "http://[64:ff9b::a9fe:a9fe]/",
           "http://[2002:c0a8:101::1]/", "http://[::7f00:1]/", "https://bot:pw@127.0.0.1:443/hook?token=x"]


@pytest.fixture
def recorder(hook: str) -> int:  # noqa: F811
    """The port of :class:`Hook`'s server."""
    return int(httpx.URL(hook).port or 0)


@pytest.fixture
def grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Grid]:
    grid = make_grid(tmp_path, monkeypatch)
    yield grid
    grid.close()


@pytest.fixture
def allowing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Grid]:
    grid = make_grid(tmp_path, monkeypatch, ALLOW)
    yield grid
    grid.close()


@pytest.mark.parametrize("target", REFUSED)
def test_loopback_link_local_and_private_targets_are_refused_at_subscription(grid: Grid, target: str) -> None:
    with pytest.raises((Refused, InputError), match="^webhook URL: "):
        api.subscribe(grid, user=USER, kind="webhook", target=target, severity="low")
    assert api.list_subscriptions(grid, user=USER) == []


def test_public_and_unresolvable_targets_are_accepted(grid: Grid) -> None:
    for target in ("http://93.184.216.34/hook", "https://[2606:4700:4700::1111]/hook",
                   "https://hooks.example.invalid/T0/B0?token=x"):  # checked again when delivered
        api.subscribe(grid, user=USER, kind="webhook", target=target, severity="low")
    assert len(api.list_subscriptions(grid, user=USER)) == 3


def test_the_sites_networks_are_allowed_and_only_them(allowing: Grid) -> None:
    for target in ("http://127.0.0.1:8080/hook", "http://localhost/hook", "http://[::ffff:127.0.0.1]/",
                   "http://0x7f000001/", "http://[fd00::1]/"):
        api.subscribe(allowing, user=USER, kind="webhook", target=target, severity="low")
    for target in ("http://10.1.2.3/", "http://169.254.169.254/", "http://[::1]/", "http://[fc00::1]/"):
        with pytest.raises(Refused, match="notify.webhook_allow"):
            api.subscribe(allowing, user=USER, kind="webhook", target=target, severity="low")


def test_webhook_allow_is_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"^notify.webhook_allow: 10.0.0.1/8 has host bits set$"):
        make_grid(tmp_path, monkeypatch, '[notify]\nwebhook_allow = ["10.0.0.1/8"]\n')
    with pytest.raises(ConfigError, match=r"^notify.webhook_allow: expected a list of strings"):
        make_grid(tmp_path, monkeypatch, '[notify]\nwebhook_allow = "10.0.0.0/8"\n')
    (tmp_path / "cigri.toml").write_text("")
    monkeypatch.setenv("CIGRI_NOTIFY_WEBHOOK_ALLOW", "10.0.0.0/8, ::1")
    assert config.load().notify.webhook_allow == ("10.0.0.0/8", "::1")


def test_a_target_allowed_when_subscribed_is_checked_again_at_delivery(allowing: Grid, tmp_path: Path,
                                                                       recorder: int) -> None:
    """The site's networks changed, as a name's address may: the message is not sent."""
    campaign_id, _ = campaign(allowing, tmp_path, 1)
    api.subscribe(allowing, user=USER, kind="webhook", target=f"http://localhost:{recorder}/hook", severity="low")
    failures(allowing, campaign_id, 1)
    (tmp_path / "cigri.toml").write_text('[notify]\nretry_delay = 0.0\n[clusters.local]\nbackend = "local"\n')
    strict = open_grid(config.load())
    try:
        assert notify.notify(strict) == 0
        assert Hook.requests == []
        listed = api.list_subscriptions(strict, user=USER)
        assert listed[0]["last_error"] == "delivery failed: the URL leads to an address this site does not allow"
    finally:
        strict.close()


def test_the_post_keeps_the_host_name_and_follows_no_redirect(allowing: Grid, tmp_path: Path, recorder: int) -> None:
    campaign_id, _ = campaign(allowing, tmp_path, 1)
    api.subscribe(allowing, user=USER, kind="webhook", target=f"http://bot:pw@localhost:{recorder}/hook?k=v",
                  severity="low")
    failures(allowing, campaign_id, 1)
    assert notify.notify(allowing) == 1
    [request] = Hook.requests
    assert request["path"] == "/hook?k=v" and request["headers"]["Host"] == f"localhost:{recorder}"
    assert request["headers"]["Authorization"] == "Basic Ym90OnB3"  # bot:pw, from the URL as before
    assert Hook.bodies[0]["user"] == USER and len(Hook.bodies[0]["events"]) == 1

    Hook.status, Hook.location = 302, f"http://127.0.0.1:{recorder}/elsewhere"
    failures(allowing, campaign_id, 1)
    assert notify.notify(allowing) == 0
    assert [r["path"] for r in Hook.requests] == ["/hook?k=v"] * 2  # /elsewhere never asked
    assert api.list_subscriptions(allowing, user=USER)[0]["last_error"] == "HTTP 302"


def _listener(answer: bool) -> Iterator[int]:
    """A TCP port that is open but speaks no HTTP: it closes each connection at once, or holds it."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                connection, _ = server.accept()
            except OSError:
                return
            if answer:
                connection.close()
            else:
                held.append(connection)

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1]
    server.close()
    for connection in held:
        connection.close()


def test_gridnotify_list_tells_no_open_port_from_a_closed_one(allowing: Grid, tmp_path: Path) -> None:
    campaign_id, _ = campaign(allowing, tmp_path, 1)
    closing, holding = _listener(True), _listener(False)
    ports = [free_port(), next(closing), next(holding)]
    for port in ports:
        api.subscribe(allowing, user=USER, kind="webhook", target=f"http://127.0.0.1:{port}/hook", severity="low")
    failures(allowing, campaign_id, 1)
    assert notify.notify(allowing) == 0
    shown = [s["last_error"] for s in api.list_subscriptions(allowing, user=USER)]
    assert shown == ["delivery failed"] * 3
    for listener in (closing, holding):
        next(listener, None)


def test_https_checks_the_certificate_of_the_name_not_of_the_address(allowing: Grid, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The POST goes to the checked address, with the name for SNI and the certificate's check."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost", "-days", "1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the site's CA, as OpenSSL reads it
    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    Hook.status, Hook.location, Hook.bodies, Hook.requests = 204, "", [], []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        campaign_id, _ = campaign(allowing, tmp_path, 1)
        api.subscribe(allowing, user=USER, kind="webhook", target=f"https://localhost:{port}/named", severity="low")
        api.subscribe(allowing, user=USER, kind="webhook", target=f"https://127.0.0.1:{port}/address", severity="low")
        failures(allowing, campaign_id, 1)
        assert notify.notify(allowing) == 1
        assert [r["path"] for r in Hook.requests] == ["/named"]  # the certificate names localhost only
        assert [s["last_error"] for s in api.list_subscriptions(allowing, user=USER)] == [None, "delivery failed"]
    finally:
        server.shutdown()
        server.server_close()
