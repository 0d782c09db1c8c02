"""Misbehaving clusters: real servers on 127.0.0.1 that hang, answer slowly, fail or talk nonsense.

One HTTP server plays every REST cluster; the first word of the path picks its misbehaviour
(``/hang``, ``/slow``, ``/error``, ``/garbage``, ``/trickle``), so each cluster of the
configuration is one ``base_url``. An SSH server (paramiko, in a thread) accepts the login and
drops the connection as soon as a command is sent. Beside them, a healthy local cluster must
keep draining its campaign, and every ``cigri cycle`` must end within its budget: the sum of
the hostile clusters' ``timeout`` plus a margin.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import paramiko
import pytest
from harness import Cigri

TIMEOUT = 1.0  # seconds, the hostile clusters' `timeout`
REST = {"slurm-hang": "hang", "slurm-slow": "slow", "oar-error": "error", "oar-garbage": "garbage",
        "slurm-trickle": "trickle"}
EXPECTED = {"slurm-hang": "CLUSTER_TIMEOUT", "slurm-slow": "CLUSTER_TIMEOUT", "oar-error": "CLUSTER_BAD_ANSWER",
            "oar-garbage": "CLUSTER_BAD_ANSWER", "slurm-trickle": "CLUSTER_TIMEOUT",
            "slurm-dropped": "CLUSTER_UNREACHABLE"}


class Hostile(BaseHTTPRequestHandler):
    stop = threading.Event()

    def log_message(self, *_: object) -> None:
        pass

    def _answer(self) -> None:
        mode = self.path.strip("/").split("/")[0]
        if mode == "hang":
            self.stop.wait(60)
            return
        if mode == "slow":
            self.stop.wait(TIMEOUT * 3)
        if mode == "error":
            self._send(500, b"Internal Server Error")
            return
        if mode == "trickle":  # headers at once, then a byte every half timeout: no read ever times out
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            try:
                for _ in range(1000):
                    if self.stop.wait(TIMEOUT / 2):
                        return
                    self.wfile.write(b" ")
                    self.wfile.flush()
            except OSError:  # cigri gave up: what this test wants
                pass
            return
        self._send(200, b'{"nodes": [{"name": "n1", "cpus": ' if mode == "garbage" else b"{}")

    def _send(self, status: int, body: bytes) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass

    do_GET = do_POST = do_DELETE = _answer


class DropServer(paramiko.ServerInterface):
    """Accepts any key, then closes the connection when asked to run a command."""

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        return paramiko.AUTH_SUCCESSFUL

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_channel_request(self, kind: str, chanid: int) -> int:
        return paramiko.OPEN_SUCCEEDED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        threading.Timer(0.1, channel.get_transport().close).start()  # mid-command
        return True


def _serve_ssh(listener: socket.socket, host_key: paramiko.PKey, stop: threading.Event) -> None:
    """Accept until ``stop``, then close the listener here: closed from the test's thread, it
    made a pending accept() fail with EBADF in this one."""
    listener.settimeout(0.2)
    with listener:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            transport = paramiko.Transport(conn)
            transport.add_server_key(host_key)
            transport.start_server(server=DropServer())


@pytest.fixture
def hostile(cigri: Cigri, tmp_path: Path) -> Iterator[Cigri]:
    """The installation with every hostile cluster and a 2-slot local one configured."""
    http = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    http.daemon_threads = True
    Hostile.stop.clear()
    threading.Thread(target=http.serve_forever, daemon=True).start()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "host")], check=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "client")], check=True)
    host_key = paramiko.Ed25519Key.from_private_key_file(str(tmp_path / "host"))
    listener = socket.create_server(("127.0.0.1", 0))
    ssh_port = listener.getsockname()[1]
    (tmp_path / "known_hosts").write_text(f"[127.0.0.1]:{ssh_port} {(tmp_path / 'host.pub').read_text()}")
    stop_ssh = threading.Event()
    ssh_server = threading.Thread(target=_serve_ssh, args=(listener, host_key, stop_ssh), daemon=True)
    ssh_server.start()
    secret = tmp_path / "secret"
    secret.write_text("not-a-real-secret")
    secret.chmod(0o600)
    base = f"http://127.0.0.1:{http.server_address[1]}"
    lines = ['[clusters.local]\nbackend = "local"\nslots = 2\n']
    for name, mode in REST.items():
        backend = name.split("-")[0]
        auth = f'token_file = "{secret}"' if backend == "slurm" else f'password_file = "{secret}"'
        lines.append(f'[clusters.{name}]\nbackend = "{backend}"\ntransport = "rest"\nbase_url = "{base}/{mode}"\n'
                     f'user = "gridtest"\n{auth}\ntimeout = {TIMEOUT}\n')
    lines.append(f'[clusters.slurm-dropped]\nbackend = "slurm"\ntransport = "ssh"\nhost = "127.0.0.1"\n'
                 f'port = {ssh_port}\nuser = "gridtest"\nkey_file = "{tmp_path / "client"}"\n'
                 f'known_hosts = "{tmp_path / "known_hosts"}"\ntimeout = {TIMEOUT}\n')
    cigri.config.write_text("\n".join(lines))
    cigri.env["CIGRI_BLACKLIST_AFTER"] = "1000"  # keep asking them: each cycle must survive them again
    try:
        yield cigri
    finally:
        Hostile.stop.set()
        stop_ssh.set()
        http.shutdown()
        ssh_server.join()


def _open_events(cigri: Cigri) -> dict[str, set[str]]:
    conn = sqlite3.connect(cigri.home / "cigri.db")
    try:
        rows = conn.execute("SELECT c.name, e.code FROM events e JOIN clusters c ON c.id = e.cluster_id "
                            "WHERE e.class = 'cluster'").fetchall()
    finally:
        conn.close()
    found: dict[str, set[str]] = {}
    for name, code in rows:
        found.setdefault(name, set()).add(code)
    return found


@pytest.mark.slow
def test_hostile_clusters_cost_their_timeout_and_the_healthy_one_drains(hostile: Cigri) -> None:
    cigri = hostile
    program = cigri.script("mark.sh", 'echo "$1" >> runs.log\n')
    everywhere = {name: {} for name in ["local", *REST, "slurm-dropped"]}
    campaign = cigri.submit(cigri.jdl("survivor", exec_file=str(program), clusters=everywhere,
                                      params=[f"t{i}" for i in range(6)]))
    budget = TIMEOUT * (len(REST) + 1) * 2 + 5  # two calls at most per hostile cluster, and a margin
    durations = []
    for _ in range(8):
        started = time.monotonic()
        report = json.loads(cigri.run("cigri", "cycle", "--json", timeout=budget * 3).stdout)
        durations.append(round(time.monotonic() - started, 1))
        assert durations[-1] < budget, f"a cycle took {durations[-1]}s, budget {budget}s: {durations}"
        if campaign in report["finished"]:
            break
        time.sleep(0.3)
    summary = cigri.stat(campaign)
    assert summary["state"] == "terminated" and summary["tasks"]["terminated"] == 6, (summary, durations)
    assert sorted((cigri.work / "runs.log").read_text().split()) == sorted(f"t{i}" for i in range(6))
    events = _open_events(cigri)
    for name, code in EXPECTED.items():
        assert code in events.get(name, set()), (name, events)
    assert "local" not in events
    print(f"\nhostile clusters: cycles took {durations}s (budget {budget}s); events {events}")
