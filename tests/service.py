"""A site, as a grid admin sets one up: ``cigri server`` running under its own account, and
real Unix users reaching it through the real commands and raw HTTP.

:class:`Site` lives under a world-traversable directory of /tmp (pytest's own is 0700, which no
other user can cross). The server runs from the shared install (:func:`unix_users.shared_install`)
with a Unix socket and TCP on 127.0.0.1, one local cluster, and its files private to it; as root
by default, so that the local cluster runs each user's jobs as that user, or as the documented
site (docs/server.md): under a service account (``account``), with the local cluster's pool as
root beside it (``root_pool``). :data:`unix_users.SERVICE` is a configured admin. Each user's
commands run as that user, with ``CIGRI_SERVER`` naming the socket as a user's configuration
would.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import wait_for
from unix_users import NAMES, SERVICE, ensure_users, run_as, shared_install, start_as

from cigri.locks import held

SLOTS = 4
# Raw HTTP as a user: requests in (JSON on stdin), [status, body] out, from one process.
HTTP_SCRIPT = """
import json, sys, httpx
spec = json.load(sys.stdin)
kwargs = {"transport": httpx.HTTPTransport(uds=spec["socket"])} if spec.get("socket") else {}
answers = []
with httpx.Client(base_url=spec["base"], timeout=60, **kwargs) as client:
    for method, path, options in spec["requests"]:
        response = client.request(method, path, **options)
        try:
            body = response.json()
        except ValueError:
            body = response.text
        answers.append([response.status_code, body, dict(response.headers)])
json.dump(answers, sys.stdout)
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Site:
    """One site: its server (started by :meth:`start`), its users, and their commands."""

    def __init__(self, config: str = "", account: str = "root", front: bool = False, root_pool: bool = False) -> None:
        """``front``: a trusted front on 127.0.0.1, with the secret it sends (:attr:`front_secret`);
        ``root_pool``: the local cluster's pool runs as root beside the server (its unit's way)."""
        self.account = account
        self.root_pool = root_pool
        self.users = [entry.pw_name for entry in ensure_users((*NAMES, SERVICE))][:len(NAMES)]
        self.bin = shared_install()
        self.root = Path(tempfile.mkdtemp(prefix="cigri-site-", dir="/tmp"))
        self.root.chmod(0o711)
        self.home = self.root / "home"  # the service account's: database, spool, logs, socket
        self.exec = self.root / "exec"  # where the tests' jobs write, readable by the tests
        self.exec.mkdir(mode=0o777)
        self.exec.chmod(0o1777)
        self.config = self.root / "cigri.toml"
        self.port = free_port()
        self.socket = self.home / "cigri.sock"
        self.front_secret = secrets.token_hex(32)
        if front:
            secret = self.root / "front.secret"
            secret.write_text(self.front_secret + "\n")
            secret.chmod(0o600)
            os.chown(secret, pwd.getpwnam(account).pw_uid, -1)
            config = f'trusted_proxies = "127.0.0.1"\nfront_secret_file = "{secret}"\n{config}'
        self.config.write_text(f'[clusters.local]\nbackend = "local"\nslots = {SLOTS}\n'
                               + ('pool_account = "root"\n' if root_pool else "") +
                               f'[cigri]\ncycle_period = 0.2\nadmins = "{SERVICE}"\n'
                               f'[server]\nlisten = "127.0.0.1:{self.port}"\n{config}')
        service = pwd.getpwnam(account)
        self.home.mkdir(mode=0o700)  # as a package or systemd's StateDirectory makes it
        os.chown(self.home, service.pw_uid, service.pw_gid)
        os.chown(self.config, service.pw_uid, service.pw_gid)
        self.config.chmod(0o600)
        self.server: subprocess.Popen[bytes] | None = None
        self.pool: subprocess.Popen[bytes] | None = None
        self.user_dirs: list[Path] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def server_env(self) -> dict[str, str]:
        return {"CIGRI_HOME": str(self.home), "CIGRI_CONFIG": str(self.config)}

    # --- the server ---------------------------------------------------------------------

    def start(self, timeout: float = 60, wrapper: tuple[str, ...] = ()) -> None:
        """Start the server (``wrapper``: a command that execs it, ``prlimit --nofile=…``)."""
        if self.root_pool:  # as its units do: the account's ExecStartPre makes the grid, the pool beside it
            made = run_as(self.account, [str(self.bin / "cigri"), "db", "init"], env=self.server_env())
            assert made.returncode == 0, made.stderr
            self.start_pool(timeout)
        self.server = start_as(self.account, [*wrapper, str(self.bin / "cigri"), "server"], env=self.server_env(),
                               log=self.root / "server.log")
        wait_for(lambda: self._answers() or self.server.poll() is not None, timeout, "the server to answer")
        if self.server.poll() is not None:
            raise AssertionError(f"the server died: {self.log()}")

    def start_pool(self, timeout: float = 60) -> None:
        """``cigri pool local`` as root, as conf/cigri-pool.service runs it; back once it serves."""
        with open(self.root / "pool.log", "ab") as log:
            self.pool = subprocess.Popen([str(self.bin / "cigri"), "pool", "local"], env=self.server_env(),
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd="/")
        lock = self.home / "spool" / "local" / "pool.lock"
        wait_for(lambda: held(lock) or self.pool.poll() is not None, timeout, "the local pool to serve")
        if self.pool.poll() is not None:
            raise AssertionError(f"the pool died: {(self.root / 'pool.log').read_text()}")

    def stop_pool(self) -> None:
        if self.pool is not None and self.pool.poll() is None:
            self.pool.terminate()
            self.pool.wait(60)

    def _answers(self) -> bool:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(self.socket))
            probe.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
            return probe.recv(12).startswith(b"HTTP/1.1 200")
        except OSError:
            return False
        finally:
            probe.close()

    def kill(self, sig: int = signal.SIGKILL) -> None:
        assert self.server is not None
        self.server.send_signal(sig)
        self.server.wait(60)

    def log(self) -> str:
        path = self.root / "server.log"
        return path.read_text() if path.exists() else ""

    def close(self) -> None:
        if self.server is not None and self.server.poll() is None:
            self.kill(signal.SIGTERM)
        self.stop_pool()
        pool = self.home / "spool" / "local" / "pool.lock"
        if pool.exists() and (pid := pool.read_text().strip()).isdigit():
            try:
                os.kill(int(pid), signal.SIGTERM)
            except (ProcessLookupError, PermissionError):
                pass
        for path in [self.root, *self.user_dirs]:
            shutil.rmtree(path, ignore_errors=True)

    # --- users ----------------------------------------------------------------------------

    def run(self, user: str, command: str, *args: str, expect: int | None = 0, env: dict[str, str] | None = None,
            stdin: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """A command as ``user``, reaching the server through its socket."""
        result = run_as(user, [str(self.bin / command), *args], stdin=stdin, cwd=cwd,
                        env={"CIGRI_SERVER": f"unix:{self.socket}", "NO_COLOR": "1", **(env or {})})
        if expect is not None and result.returncode != expect:
            raise AssertionError(f"{user}: {command} {' '.join(args)}: exit {result.returncode}, expected {expect}\n"
                                 f"stdout: {result.stdout}\nstderr: {result.stderr}")
        return result

    def json(self, user: str, command: str, *args: str, **options: Any) -> Any:
        return json.loads(self.run(user, command, *args, "--json", **options).stdout)

    def http(self, user: str, requests: list[tuple[str, str, dict[str, Any]]], *, tcp: bool = False,
             headers: dict[str, str] | None = None, root: bool = False) -> list[tuple[int, Any, dict[str, str]]]:
        """Raw HTTP requests as ``user`` (over the socket, or TCP), in one process; paths are
        under ``/api/v1`` unless ``root``."""
        client = {"X-Requested-With": "cigri"}  # what cigri's clients send (the server's CSRF proof)
        spec = {"socket": None if tcp else str(self.socket),
                "base": f"{self.url if tcp else 'http://cigri'}{'' if root else '/api/v1'}",
                "requests": [(method, path, {**options, "headers": {**client, **(headers or {}),
                                                                    **options.get("headers", {})}})
                             for method, path, options in requests]}
        result = run_as(user, [str(self.bin / "python"), "-c", HTTP_SCRIPT], stdin=json.dumps(spec))
        if result.returncode != 0:
            raise AssertionError(f"raw HTTP as {user} failed: {result.stderr}")
        return [(status, body, hdrs) for status, body, hdrs in json.loads(result.stdout)]

    def user_dir(self, user: str) -> Path:
        """This site's directory in ``user``'s home (theirs, 0700), removed with the site: tests
        of several sites, in parallel, never share a file."""
        entry = pwd.getpwnam(user)
        path = Path(entry.pw_dir) / self.root.name
        if not path.exists():
            path.mkdir(mode=0o700)
            os.chown(path, entry.pw_uid, entry.pw_gid)
            self.user_dirs.append(path)
        return path

    def jdl(self, user: str, name: str, **fields: Any) -> Path:
        """A JDL of ``user``'s (theirs, 0600), for the local cluster, writing into :attr:`exec`."""
        document = {"name": name, "exec_directory": str(self.exec), "clusters": {"local": {}}, **fields}
        return self.user_file(user, f"{name}.json", json.dumps(document))

    def user_file(self, user: str, name: str, text: str, mode: int = 0o600) -> Path:
        entry = pwd.getpwnam(user)
        top = self.user_dir(user)
        path = top / name
        for parent in reversed(Path(name).parents[:-1]):  # the sub-directories the name implies, theirs too
            (top / parent).mkdir(mode=0o700, exist_ok=True)
            os.chown(top / parent, entry.pw_uid, entry.pw_gid)
        path.write_text(text)
        os.chown(path, entry.pw_uid, entry.pw_gid)
        path.chmod(mode)
        return path

    def submit(self, user: str, jdl: Path, *args: str) -> int:
        return int(self.json(user, "gridsub", "-f", str(jdl), *args)["campaign_id"])

    def drain(self, user: str, campaign_id: int, timeout: float = 120) -> dict[str, Any]:
        """Wait until the server's cycles end the campaign; its final summary."""
        seen: dict[str, Any] = {}

        def ended() -> bool:
            seen.update(self.json(user, "gridstat", "-c", str(campaign_id)))
            return seen["state"] in ("terminated", "failed", "cancelled")

        wait_for(ended, timeout, f"campaign {campaign_id} to end", step=0.3)
        return seen

    def script(self, name: str, body: str) -> Path:
        """A program every user may run, in the exec directory."""
        path = self.exec / name
        path.write_text("#!/bin/sh\n" + body)
        path.chmod(0o755)
        return path


@contextmanager
def started(config: str = "", front: bool = False) -> Iterator[Site]:
    """A site with its server running, closed after (a module's fixture)."""
    site = Site(config, front=front)
    try:
        site.start()
        yield site
    finally:
        site.close()
