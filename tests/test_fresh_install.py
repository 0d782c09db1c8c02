"""A fresh install (issue 23): the shipped unit's ``ExecStartPre`` creates the database as the
service account, which then owns it and so is its admin; an existing database still needs an
admin. Run as real Unix users (:mod:`unix_users`), with the unit's environment and umask."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import wait_for
from unix_users import REPO, SERVICE, ensure_users, run_as, shared_install, start_as

UNIT = REPO / "conf" / "cigri.service"


def service_settings() -> list[tuple[str, str]]:
    """The unit's ``[Service]`` lines as (key, value), in order (a key may repeat)."""
    settings, section = [], ""
    for line in map(str.strip, UNIT.read_text().splitlines()):
        if line.startswith("["):
            section = line
        elif line and not line.startswith("#") and section == "[Service]":
            key, _, value = line.partition("=")
            settings.append((key, value))
    return settings


@pytest.fixture
def install() -> Iterator[Path]:
    """A directory every test user can reach (pytest's own are root's, 0700)."""
    root = Path(tempfile.mkdtemp(prefix="cigri-fresh-", dir="/tmp"))
    root.chmod(0o755)
    yield root
    shutil.rmtree(root)


def test_the_units_exec_start_pre_creates_the_database_as_the_service_account(install: Path) -> None:
    """The shipped unit on a fresh install: its StateDirectory (made here as systemd makes it,
    the account's, 0711), its ExecStartPre creating the database, and its ExecStart serving."""
    service = ensure_users((SERVICE,))[0]
    cigri = shared_install() / "cigri"
    settings = service_settings()
    environment = dict(value.split("=", 1) for key, value in settings if key == "Environment")
    unit = dict(settings)
    before, start = unit["ExecStartPre"].split(), unit["ExecStart"].split()
    assert before[0] == start[0] == "/usr/local/bin/cigri" and environment["CIGRI_CONFIG"] == "/etc/cigri/cigri.toml"
    assert environment["CIGRI_HOME"] == f"/var/lib/{unit['StateDirectory']}" and unit["User"] == "cigri"
    # A fresh install: the shipped configuration as /etc/cigri/cigri.toml, the state directory empty.
    site = install / "cigri.toml"
    shutil.copy(REPO / "conf" / "cigri.toml", site)
    site.chmod(0o644)
    home = install / "state"
    home.mkdir()
    home.chmod(int(unit["StateDirectoryMode"], 8))
    os.chown(home, service.pw_uid, service.pw_gid)
    environment.update(CIGRI_CONFIG=str(site), CIGRI_HOME=str(home))

    def as_service(*argv: str) -> subprocess.CompletedProcess[str]:
        return run_as(service.pw_name, ["/bin/sh", "-c", f'umask {unit["UMask"]} && exec "$@"', "sh", str(cigri),
                                        *argv], env=environment, cwd=install)

    created = as_service(*before[1:])
    assert created.returncode == 0, created.stderr
    database = home / "cigri.db"
    assert database.stat().st_uid == service.pw_uid and stat.S_IMODE(database.stat().st_mode) == 0o600
    again = as_service(*before[1:])  # every later start: the owner, an admin now
    assert again.returncode == 0 and again.stdout == created.stdout, again.stderr
    server = start_as(service.pw_name, [str(cigri), *start[1:]], env=environment, log=install / "server.log")
    try:
        socket = home / "cigri.sock"
        wait_for(lambda: socket.exists() or server.poll() is not None, 60, "the server's socket")
        health = run_as(service.pw_name, [str(shared_install() / "python"), "-c", HEALTH, str(socket)])
        assert health.stdout.startswith("200"), (health.stdout, health.stderr, (install / "server.log").read_text())
    finally:
        server.terminate()
        assert server.wait(60) == 0


HEALTH = """
import sys, time, httpx
for _ in range(100):
    try:
        answer = httpx.Client(transport=httpx.HTTPTransport(uds=sys.argv[1])).get("http://cigri/healthz")
        print(answer.status_code)
        break
    except httpx.TransportError:
        time.sleep(0.1)
"""


def test_an_existing_database_still_needs_an_admin(install: Path) -> None:
    owner, other = ensure_users()[:2]
    cigri = shared_install() / "cigri"
    home = install / "grid"
    home.mkdir(mode=0o755)
    os.chown(home, owner.pw_uid, owner.pw_gid)
    environment = {"CIGRI_HOME": str(home), "CIGRI_CONFIG": str(install / "cigri.toml")}
    (install / "cigri.toml").write_text('[clusters.local]\nbackend = "local"\n')
    assert run_as(owner.pw_name, [str(cigri), "db", "init"], env=environment, cwd=install).returncode == 0
    (home / "cigri.db").chmod(0o644)  # readable: the role, not the file's mode, is what refuses
    for command in (["db", "init"], ["db", "upgrade"]):
        refused = run_as(other.pw_name, [str(cigri), *command], env=environment, cwd=install)
        assert (refused.returncode, refused.stderr) == (1, f"cigri: cigri {' '.join(command)}: needs the admin role, "
                                                           f"and {other.pw_name} is not an admin\n")
