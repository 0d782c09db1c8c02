"""``cigri doctor``: what is wrong with this installation, checked without changing anything.

Configuration (it loads), database (it opens, ``PRAGMA integrity_check``, no pending
migration), permissions (the database, its directory, the spool, the logs and every file
holding a secret are private to their owner; a directory may let others through, not read or
write it), ownership (the grid's files are all its account's, the database's owner), the
server's layout (its socket reachable by every local user and answering, TLS for a TCP port
that is not loopback), and each cluster (it answers a capacity request within its ``timeout``;
a local cluster's pool runs as the account that can run its users' jobs, and a root pool's spool
is one only the grid's account writes). Each check is one :class:`Check`; the command exits 1 if
any failed.
"""

from __future__ import annotations

import json
import os
import pwd
import sqlite3
import stat
from dataclasses import asdict, dataclass
from pathlib import Path

from sqlite_utils import Database

from cigri import config as configuration
from cigri import db as database
from cigri.backends import open_backend
from cigri.backends.local.pool import Spool, spool_problems
from cigri.db import clusters as stored_clusters
from cigri.db import leader
from cigri.errors import CigriError
from cigri.locks import held
from cigri.users import acting_user, grid_account, owner_of

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
    account = grid_account(config) or acting_user()
    checks += _ownership(config, account)
    checks += _server(config)
    if config.database.url:
        db_checks, clusters = _postgresql(config.database.url)
        checks += db_checks
    else:
        db_check, clusters = _database(config.database_path)
        checks.append(db_check)
    spool = str(config.spool_path)
    configured = {c.name: (c.backend, c.options) for c in config.clusters}
    for name, (backend, options, blacklisted) in {**{n: (*v, False) for n, v in configured.items()},
                                                  **clusters}.items():
        checks.append(_local(config, name, options, account) if backend == "local" else  # contacts nothing
                      _cluster(name, backend, options, blacklisted, spool))
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
    others = (stat.S_IRWXG | stat.S_IRWXO) & ~(stat.S_IXGRP | stat.S_IXOTH if directory else 0)
    if mode & others:  # a directory may let others through (the server's socket is in its home)
        return Check(f"permissions: {what}", False,
                     f"{path} is {stat.S_IMODE(mode):04o}; run chmod {wanted:04o} {path}")
    return Check(f"permissions: {what}", True, f"{path} is {stat.S_IMODE(mode):04o}")


def _permissions(config: configuration.Config) -> list[Check]:
    sqlite = [] if config.database.url else [(config.database_path, "database", False),
                                             (config.database_path.parent, "database directory", True)]
    paths = [*sqlite, (config.spool_path, "spool", True), (config.log_path, "logs", True),
             (config.log_path / "cigri.log", "log file", False)]
    if config.server.tls_key:
        paths.append((Path(config.server.tls_key), "server.tls_key", False))
    tokens = config.home / "tokens"  # users' own cluster tokens (gridtoken): every level private
    if tokens.is_dir():
        paths += [(tokens, "token store", True)]
        paths += [(path, f"token store: {path.relative_to(tokens)}", path.is_dir()) for path in sorted(tokens.rglob("*"))]
    for cluster in config.clusters:
        for key in SECRET_KEYS:
            if key in cluster.options:
                paths.append((Path(str(cluster.options[key])), f"clusters.{cluster.name}.{key}", False))
    return [check for path, what, directory in paths if (check := _private(path, what, directory)) is not None]


def _ownership(config: configuration.Config, account: str) -> list[Check]:
    """The grid's own files are its account's: one that root left (a cycle or a server run as root)
    is a file the server cannot write."""
    paths = [config.home, config.owned_path, config.spool_path, config.log_path, config.log_path / "cigri.log",
             config.home / "cycle.lock", config.home / "daemon.lock"]
    paths += [config.spool_path / c.name / name for c in config.clusters if c.backend == "local"
              for name in ("", "spool.db", "jobs")]
    others = [(path, owner) for path in paths if path.exists() and (owner := owner_of(path)) != account]
    if not others:
        return [Check("ownership", True, f"the grid's files are {account}'s")]
    path, owner = others[0]
    return [Check("ownership", False, f"{path} is {owner}'s, not {account}'s (the database's owner): "
                                      f"chown {account} {path}" + (f", and {len(others) - 1} more" if others[1:] else ""))]


def _local(config: configuration.Config, name: str, options: dict[str, object], account: str) -> Check:
    """A local cluster's pool: as the grid's account it runs that account's jobs only, which a
    site's users cannot use; as its ``pool_account`` (root on a site) it runs as a service of its
    own, which must be running, as that account, over a spool only the grid's account writes."""
    spool = Spool(str(config.spool_path / name))
    pool_account = str(options.get("pool_account") or "")
    if not pool_account:
        if account != "root" and Path(config.server.socket).exists():
            return Check(f"cluster {name}", False, f"its pool runs as {account}, which runs only {account}'s jobs: "
                                                   "the users' campaigns naming it are refused; run it as root "
                                                   "(pool_account = \"root\", conf/cigri-pool.service) or remove it")
        writable = os.access(config.spool_path, os.W_OK) or not config.spool_path.exists()
        return Check(f"cluster {name}", writable, f"local: {config.spool_path} writable" if writable else
                     f"local: {config.spool_path} is not writable by {acting_user()}")
    if pool_account == "root" and (problems := spool_problems(spool.root)):
        return Check(f"cluster {name}", False, f"its pool runs as root: {problems[0]}")
    runs_as = _pool_user(spool)
    if runs_as != pool_account:
        return Check(f"cluster {name}", False, f"its pool runs as {runs_as}, not {pool_account} (pool_account)"
                     if runs_as else f"its pool does not run: start it as {pool_account} (cigri pool {name}; "
                                     "conf/cigri-pool.service)")
    return Check(f"cluster {name}", True, f"its pool runs as {pool_account}, over {account}'s spool")


def _pool_user(spool: Spool) -> str | None:
    """Whom the live pool of ``spool`` runs as (its lock's holder); None: no pool runs."""
    lock = Path(spool.lock)
    try:
        if not held(lock):
            return None
        with open(f"/proc/{int(lock.read_text().strip())}/status") as status:
            uid = int(next(line for line in status if line.startswith("Uid:")).split()[2])  # effective
        return pwd.getpwuid(uid).pw_name
    except (OSError, ValueError, StopIteration, KeyError):
        return "an unknown account"


def _server(config: configuration.Config) -> list[Check]:
    """The server's layout, when it has one: a socket every local user can reach (who they
    are is the kernel's answer), that answers; TLS for a TCP port off loopback."""
    checks = []
    path = Path(config.server.socket)
    if path.exists():
        mode = path.stat().st_mode
        if not stat.S_ISSOCK(mode):
            checks.append(Check("server: socket", False, f"{path} is not a socket"))
        elif stat.S_IMODE(mode) & 0o006 != 0o006 or not path.parent.stat().st_mode & stat.S_IXOTH:
            checks.append(Check("server: socket", False, f"{path}: users cannot reach it (the socket must be 0666 "
                                                         f"and its directory o+x); restart cigri server"))
        else:
            checks.append(Check("server: socket", *_answers(path)))
    if config.server.listen:
        host, port = configuration.parse_listen(config.server.listen)
        loopback = host in ("localhost", "127.0.0.1", "::1")
        if not config.server.tls_cert and not loopback:
            checks.append(Check("server: listen", False, f"{config.server.listen} without server.tls_cert: tokens "
                                                         "are refused there (they would travel in clear)"))
        else:
            missing = [f for f in (config.server.tls_cert, config.server.tls_key) if f and not Path(f).is_file()]
            checks.append(Check("server: listen", not missing,
                                f"{config.server.listen} ({'https' if config.server.tls_cert else 'http, loopback'})"
                                + (f": no such file {missing[0]}" if missing else "")))
    return checks


def _answers(path: Path) -> tuple[bool, str]:
    """Whether the server behind ``path`` answers /healthz, and what it says."""
    import httpx

    try:
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(path)), timeout=10) as client:
            health = client.get("http://cigri/healthz").json()
    except (httpx.HTTPError, ValueError) as error:
        return False, f"{path}: the server does not answer ({' '.join(str(error).split()) or type(error).__name__})"
    cycles = health.get("cycles", {})
    detail = f"{path}: answers, database {health.get('database')}, cycles " + (
        "ok" if cycles.get("ok") else f"failing ({cycles.get('last_error')})")
    return bool(health.get("ok")), detail


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
                        in stored_clusters.definitions_and_blacklists(conn)}
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


def _postgresql(url: str) -> tuple[list[Check], dict[str, tuple[str, dict[str, object], bool]]]:
    """Reach the PostgreSQL store (creating nothing), check its schema, and say who runs the cycles."""
    from cigri.db import postgres

    where = postgres.shown(url)
    try:
        conn = postgres.Connection(url)
    except CigriError as error:
        return [Check("database", False, str(error))], {}
    try:
        applied = postgres.applied_migrations(conn)
        if not applied:
            return [Check("database", False, f"{where}: no cigri schema; run cigri db init")], {}
        clusters = {name: (backend, json.loads(options), bool(blacklisted)) for name, backend, options, blacklisted
                    in stored_clusters.definitions_and_blacklists(conn)}
        lease = leader.current(conn)
    except CigriError as error:
        return [Check("database", False, str(error))], {}
    finally:
        conn.close()
    if newer := [name for name in applied if name not in database.KNOWN_MIGRATIONS]:
        return [Check("database", False, f"{where}: written by a newer cigri (schema {newer[-1]})")], clusters
    if pending := database.KNOWN_MIGRATIONS[len(applied):]:
        return [Check("database", False, f"{where}: {len(pending)} migration(s) pending; run cigri db upgrade")], clusters
    return [Check("database", True, f"{where}: PostgreSQL, no migration pending"), _leader(lease)], clusters


def _leader(lease: dict[str, object] | None) -> Check:
    """Which server runs the cycles, by the store's lease: a lapsed lease is a grid whose cycles stopped."""
    if lease is None:
        return Check("cycles", False, "no server has run the cycles yet: start cigri server")
    left = float(lease["expires_at"]) - float(lease["now"])  # type: ignore[arg-type]
    held = f"{lease['holder']} (epoch {lease['epoch']})"
    if left < 0:
        return Check("cycles", False, f"the lease of {held} lapsed {-left:.0f}s ago: no server runs the cycles")
    return Check("cycles", True, f"run by {held}, its lease good for {left:.0f}s more")


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
