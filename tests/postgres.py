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


class Postgres:
    """One PostgreSQL server in a directory of its own: started, stopped as a crash would
    (``kill``), or promoted from standby."""

    def __init__(self, root: Path, name: str) -> None:
        binaries = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
        if not binaries:
            unavailable("PostgreSQL is not installed (apt-get install postgresql)")
        self.bindir = Path(binaries[-1]).parent
        owner = "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
        self.entry = pwd.getpwnam(owner)
        self.root, self.data, self.port = root, root / name, _free_port()

    @property
    def url(self) -> str:
        """The superuser ``cigri``'s URL (trust on 127.0.0.1)."""
        return f"postgresql://cigri@127.0.0.1:{self.port}/postgres"

    def run(self, tool: str, *argv: str) -> None:
        subprocess.run([str(self.bindir / tool), *argv], check=True, capture_output=True, user=self.entry.pw_uid,
                       group=self.entry.pw_gid, cwd=self.root, env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})

    def init(self, *settings: str) -> None:
        self.run("initdb", "-D", str(self.data), "-U", "cigri", "--auth=trust", "-E", "UTF8")
        (self.data / "pg_hba.conf").write_text("local all all trust\nhost all cigri 127.0.0.1/32 trust\n"
                                               "host replication cigri 127.0.0.1/32 trust\n"
                                               "host all all 127.0.0.1/32 scram-sha-256\n")
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.writelines(f"{line}\n" for line in settings)

    def start(self) -> None:
        self.run("pg_ctl", "-D", str(self.data), "-l", str(self.root / f"{self.data.name}.log"), "-w", "-t", "60",
                 "-o", f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off", "start")

    def kill(self) -> None:
        """Stop at once, without a checkpoint: what a crash of its host leaves."""
        if (self.data / "postmaster.pid").exists():
            subprocess.run([str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"],
                           capture_output=True, user=self.entry.pw_uid, group=self.entry.pw_gid, cwd=self.root)

    def standby_of(self, primary: Postgres) -> None:
        """A streaming replica of ``primary``, from its base backup (``pg_basebackup -R``)."""
        self.run("pg_basebackup", "-h", "127.0.0.1", "-p", str(primary.port), "-U", "cigri", "-D", str(self.data),
                 "-R", "-X", "stream", "-c", "fast", "-d", f"application_name={self.data.name}")

    def promote(self) -> None:
        """The new primary, alone: its commits no longer wait for a synchronous standby (what a
        site's failover tool does, or its commits would wait for ever)."""
        self.run("pg_ctl", "-D", str(self.data), "-w", "-t", "60", "promote")
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as admin:
            admin.execute("ALTER SYSTEM SET synchronous_standby_names = ''")
            admin.execute("SELECT pg_reload_conf()")


def _root() -> Path:
    root = Path(tempfile.mkdtemp(prefix="cigri-pg-"))
    owner = "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
    entry = pwd.getpwnam(owner)
    os.chown(root, entry.pw_uid, entry.pw_gid)
    return root


@contextmanager
def server() -> Iterator[str]:
    """Start a server; yield the DSN of its superuser ``cigri`` (trust authentication on 127.0.0.1)."""
    root = _root()
    one = Postgres(root, "data")
    try:
        one.init()
        one.start()
        yield one.url
    finally:
        one.kill()
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def replicated() -> Iterator[tuple[Postgres, Postgres]]:
    """A primary and its streaming replica, replicated synchronously: a commit returns once the
    replica has it, so a promoted replica holds every committed transaction."""
    root = _root()
    primary, standby = Postgres(root, "primary"), Postgres(root, "standby")
    try:
        primary.init("wal_level = replica", "max_wal_senders = 4", "synchronous_standby_names = '*'")
        primary.start()
        standby.standby_of(primary)
        standby.start()
        yield primary, standby
    finally:
        standby.kill()
        primary.kill()
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
