"""``cigri doctor``: what is wrong with this installation, checked without changing anything.

Configuration (it loads), database (it opens, ``PRAGMA integrity_check``, no pending
migration), permissions (the database, its directory, the spool, and every file holding a
secret are private to their owner), and each cluster (it answers a capacity request within
its ``timeout``). Each check is one :class:`Check`; the command exits 1 if any failed.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from dataclasses import asdict, dataclass
from pathlib import Path

from sqlite_utils import Database

from cigri import config as configuration
from cigri import db as database
from cigri.backends import open_backend
from cigri.errors import CigriError

SECRET_KEYS = tuple(k for k in configuration.FILE_KEYS if k != "known_hosts")  # files holding a secret


@dataclass(frozen=True)
class Check:
    what: str
    ok: bool
    detail: str

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def diagnose(overrides: dict[str, object] | None = None) -> list[Check]:
    """Every check, in order; a configuration that does not load stops the rest."""
    try:
        config = configuration.load(overrides)
    except CigriError as error:
        return [Check("configuration", False, str(error))]
    checks = [Check("configuration", True, f"{len(config.clusters)} cluster(s), home {config.home}")]
    checks += _permissions(config)
    db_check, clusters = _database(config.database_path)
    checks.append(db_check)
    spool = str(config.spool_path)
    configured = {c.name: (c.backend, c.options) for c in config.clusters}
    for name, (backend, options, blacklisted) in {**{n: (*v, False) for n, v in configured.items()},
                                                  **clusters}.items():
        checks.append(_cluster(name, backend, options, blacklisted, spool))
    return checks


def _private(path: Path, what: str, directory: bool) -> Check | None:
    """None when ``path`` does not exist; else whether group and others have no access."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return None
    except OSError as error:
        return Check(f"permissions: {what}", False, f"{path}: {error.strerror}")
    wanted = 0o700 if directory else 0o600
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        return Check(f"permissions: {what}", False,
                     f"{path} is {stat.S_IMODE(mode):04o}; run chmod {wanted:04o} {path}")
    return Check(f"permissions: {what}", True, f"{path} is {stat.S_IMODE(mode):04o}")


def _permissions(config: configuration.Config) -> list[Check]:
    paths = [(config.database_path, "database", False), (config.database_path.parent, "database directory", True),
             (config.spool_path, "spool", True)]
    for cluster in config.clusters:
        for key in SECRET_KEYS:
            if key in cluster.options:
                paths.append((Path(str(cluster.options[key])), f"clusters.{cluster.name}.{key}", False))
    return [check for path, what, directory in paths if (check := _private(path, what, directory)) is not None]


def _database(path: Path) -> tuple[Check, dict[str, tuple[str, dict[str, object], bool]]]:
    """Open the database read-only (a doctor creates nothing) and check it; return its clusters."""
    if not path.exists():
        return Check("database", False, f"{path} does not exist; run cigri db init"), {}
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=database.BUSY_TIMEOUT_MS / 1000)
        try:
            problems = [row[0] for row in conn.execute("PRAGMA integrity_check")]
            pending = [m.name for m in database.migrations.pending(Database(conn))]
            newer = database.newer_migrations(Database(conn))
            clusters = {name: (backend, json.loads(options), bool(blacklisted)) for name, backend, options, blacklisted
                        in conn.execute("SELECT name, backend, options, blacklisted FROM clusters")}
        finally:
            conn.close()
    except (sqlite3.Error, ValueError) as error:
        return Check("database", False, f"{path}: {error}"), {}
    if problems != ["ok"]:
        return Check("database", False, f"{path}: integrity check: {'; '.join(problems[:3])}"), clusters
    if newer:
        return Check("database", False, f"{path}: written by a newer cigri (schema {newer[-1]})"), clusters
    if pending:
        return Check("database", False, f"{path}: {len(pending)} migration(s) pending; run cigri db upgrade"), clusters
    return Check("database", True, f"{path}: integrity ok, no migration pending"), clusters


def _cluster(name: str, backend: str, options: dict[str, object], blacklisted: bool, spool: str) -> Check:
    if blacklisted:
        return Check(f"cluster {name}", True, "blacklisted: not contacted")
    try:
        cluster = open_backend(name, backend, options, spool) if backend != "local" else None
        if cluster is None:  # the local pool answers from its spool; doctor does not create one
            return Check(f"cluster {name}", os.access(spool, os.W_OK) or not os.path.exists(spool),
                         f"local: {spool} writable")
        try:
            capacity = cluster.capacity()
        finally:
            cluster.close()
    except Exception as error:  # any failure of any backend is what the doctor reports
        return Check(f"cluster {name}", False, f"{getattr(error, 'code', type(error).__name__)}: {error}")
    return Check(f"cluster {name}", True, f"{capacity.free_slots}/{capacity.total_slots} slots free")
