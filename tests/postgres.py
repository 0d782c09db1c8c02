"""A throwaway PostgreSQL server for the tests (the import's CiGri site, and cigri's own store
with ``CIGRI_TEST_STORE=postgresql``): Debian's ``postgresql`` package (``.ci/run`` installs it), a data directory and a port of its own under /tmp, listening on 127.0.0.1 only,
run as ``postgres`` when the tests run as root (the server refuses root). Its superuser ``cigri``
is trusted; any other role logs in with its password (SCRAM), as at a site."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness import unavailable


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def server() -> Iterator[str]:
    """Start a server; yield the DSN of its superuser ``cigri`` (trust authentication on 127.0.0.1)."""
    binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not binaries:
        unavailable("PostgreSQL is not installed (apt-get install postgresql)")
    bindir = Path(binaries[-1]).parent
    owner = "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
    entry = pwd.getpwnam(owner)
    root = Path(tempfile.mkdtemp(prefix="cigri-pg-"))
    os.chown(root, entry.pw_uid, entry.pw_gid)
    data, port = root / "data", _free_port()

    def run(*argv: str) -> None:
        subprocess.run(argv, check=True, capture_output=True, user=entry.pw_uid, group=entry.pw_gid, cwd=root,
                       env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})

    try:
        run(str(bindir / "initdb"), "-D", str(data), "-U", "cigri", "--auth=trust", "-E", "UTF8")
        (data / "pg_hba.conf").write_text("local all all trust\nhost all cigri 127.0.0.1/32 trust\n"
                                          "host all all 127.0.0.1/32 scram-sha-256\n")
        run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w", "-t", "60", "-o",
            f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off", "start")
        yield f"postgresql://cigri@127.0.0.1:{port}/postgres"
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run([str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                           capture_output=True, user=entry.pw_uid, group=entry.pw_gid, cwd=root)
        shutil.rmtree(root, ignore_errors=True)


def fresh_database(server_url: str, name: str) -> str:
    """A new, empty database ``name`` on the server (dropped first if a past run left it); its URL."""
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE template0 ENCODING \'UTF8\'')
    return server_url.rsplit("/", 1)[0] + "/" + name


def drop_database(server_url: str, name: str) -> None:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
