"""The connection: opening the store, migrating it, and the write transactions every state
change goes through. The store is a SQLite file (WAL, a busy timeout, private to its owner) or,
given a ``postgresql://`` URL, a PostgreSQL database (:mod:`cigri.db.postgres`).

Every state change goes through :func:`write`, a ``BEGIN IMMEDIATE`` transaction on SQLite:
the write lock is taken up front, so concurrent processes queue on the busy timeout instead of
failing with "database is locked" when a read transaction tries to upgrade.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from sqlite_utils import Database

from cigri import clock
from cigri.db.schema import KNOWN_MIGRATIONS, migrations, newer_migrations
from cigri.errors import CigriError

if TYPE_CHECKING:
    from cigri.db import postgres

BUSY_TIMEOUT_MS = 60_000



def schema_version(db: Database | postgres.Database) -> str:
    """The newest migration applied to ``db``, as ``cigri db init`` and ``upgrade`` print it."""
    if not isinstance(db, Database):
        from cigri.db import postgres

        names = postgres.applied_migrations(db.conn)
        return names[-1] if names else "none"
    applied = migrations.applied(db)
    return applied[-1].name if applied else "none"


def is_url(location: Path | str) -> bool:
    """A PostgreSQL store's URL, not a SQLite file's path."""
    return isinstance(location, str) and location.startswith(("postgresql://", "postgres://"))


def open_store(location: Path | str) -> Database:
    """The store at ``location``: a PostgreSQL URL (psycopg imported only then), else a SQLite file.
    Typed as SQLite's: the layer's annotations name sqlite3's connection, which PostgreSQL's mimics."""
    if is_url(location):
        try:
            from cigri.db import postgres
        except ModuleNotFoundError as missing:  # an install without the extra
            raise CigriError(f"database.url: a PostgreSQL store needs {missing.name}: "
                             "pip install 'cigri[postgresql]'") from None
        return cast(Database, postgres.connect(str(location)))
    return connect(Path(location))


def connect(path: Path) -> Database:
    """Open (creating if needed) and migrate the database; files are private to the owner."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fresh = not path.exists()
        conn = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                               check_same_thread=False)
        if fresh:
            os.chmod(path, 0o600)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        db = Database(conn)
        if newer := newer_migrations(db):
            conn.close()
            raise CigriError(f"database {path}: written by a newer cigri (schema {newer[-1]}; this one knows up "
                             f"to {KNOWN_MIGRATIONS[-1]}): run that cigri, or restore a backup of this version's")
        if migrations.pending(db):
            _migrate(db)
        conn.execute("PRAGMA foreign_keys = ON")
        return db
    except sqlite3.Error as error:
        raise CigriError(f"database {path}: {error}") from None
    except OSError as error:
        raise CigriError(f"database {path}: {error.strerror}") from None


def _migrate(db: Database) -> None:
    """Apply pending migrations in one transaction, with foreign keys off so that a table can
    be rebuilt, and checked before commit (SQLite's documented procedure for schema changes)."""
    with _immediate(db.conn):  # concurrent first opens queue on the write lock
        migrations.apply(db)
        if violation := db.conn.execute("PRAGMA foreign_key_check").fetchone():
            raise sqlite3.IntegrityError(f"migration broke a foreign key: {violation}")


@contextmanager
def _immediate(conn: sqlite3.Connection) -> Iterator[None]:
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # SQLite has already rolled back after some errors (a full disk)
            conn.execute("ROLLBACK")
        raise


@contextmanager
def write(db: Database | postgres.Database) -> Iterator[sqlite3.Connection]:
    """One state change = one transaction holding the write lock from its start."""
    if not isinstance(db, Database):
        from cigri.db import postgres

        with postgres.write(db) as conn:
            yield conn  # type: ignore[misc]
        return
    try:
        with _immediate(db.conn):
            yield db.conn
    except sqlite3.OperationalError as error:
        raise CigriError(f"database: {error}") from None


def now() -> float:
    """The time every row written is stamped with (:mod:`cigri.clock`: a simulation's own)."""
    return clock.now()


def next_id(conn: sqlite3.Connection, table: str) -> int:
    """The id the next row inserted into ``table`` gets (one of :data:`~cigri.db.schema.NEVER_REUSED`): past
    every id it ever gave, purged rows' included. Under the write lock, a statement's rows
    then take the ids from there on, consecutively."""
    if not isinstance(conn, sqlite3.Connection):
        from cigri.db import postgres

        return postgres.next_id(conn, table)
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", [table]).fetchone()
    return (row[0] if row else 0) + 1


def connection(db: Database | sqlite3.Connection) -> sqlite3.Connection:
    """The plain connection under ``db``, what the layer's functions take, for a caller that
    reads through either (the metascheduler reads inside its own transaction)."""
    return db.conn if hasattr(db, "conn") else db  # a store (SQLite's or PostgreSQL's), else a connection
