"""The PostgreSQL store: the same tables and the same SQL as SQLite's, over psycopg 3.

The data layer's statements are written once, with SQLite's ``?`` and ``:name`` placeholders;
:class:`Connection` gives them sqlite3's calls (``execute``, ``executemany``, cursors with
``fetchone``/``fetchall``/``description``/``rowcount``) and rewrites the placeholders into
psycopg's. What the two dialects cannot say alike is in :mod:`cigri.db.dialect`.

Every state change is one transaction holding one advisory lock from its start
(:func:`write`), the same single-writer order SQLite's ``BEGIN IMMEDIATE`` gives: what the
cycle proves on SQLite (a task never lost, never run twice) holds here by the same argument.
A handle that runs the cycles carries its lease's epoch (``fence``): each of its writes renews
the lease in the same transaction, or is refused (:class:`~cigri.errors.Fenced`) once another
server has taken over.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from decimal import Decimal
from importlib import resources
from typing import Any

import psycopg
from psycopg import conninfo
from psycopg.adapt import Loader
from psycopg.pq import TransactionStatus

from cigri.db.schema import KNOWN_MIGRATIONS, POSTGRES_BASELINE, POSTGRES_MIGRATIONS
from cigri.db import leader
from cigri.errors import CigriError, Fenced, Unavailable

WRITE_LOCK = 0x63696772  # "cigr": the advisory lock every write transaction holds
MIGRATIONS_TABLE = "cigri_migrations"
CONNECT_TIMEOUT = 10  # seconds to reach the server, unless the URL says (connect_timeout)
# What is not a placeholder: a string literal, a quoted identifier, a comment, a cast (::).
_TOKENS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|--[^\n]*|::|\?|:(?P<name>[A-Za-z_]\w*)|%")


@functools.lru_cache(maxsize=2048)
def translate(sql: str) -> str:
    """``sql`` with SQLite's placeholders as psycopg's: ``?`` → ``%s``, ``:name`` → ``%(name)s``,
    and every literal ``%`` doubled, in strings too (psycopg reads it as a placeholder's start)."""

    def one(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "?":
            return "%s"
        if match.group("name"):
            return f"%({match.group('name')})s"
        return token.replace("%", "%%")

    return _TOKENS.sub(one, sql)


class _NumericLoader(Loader):
    """``numeric`` (PostgreSQL's ``sum`` of integers) as SQLite gives it: an int when whole."""

    def load(self, data: Any) -> int | float:
        value = Decimal(bytes(data).decode())
        return int(value) if value == value.to_integral_value() else float(value)


class Connection:
    """sqlite3.Connection's calls over a psycopg connection in autocommit mode: a statement
    outside :func:`write` commits alone, as SQLite's do with ``isolation_level=None``.

    A connection lost (the server restarted, the primary failed over to a replica that a
    multi-host URL also names) is opened again at the next statement, unless it was lost inside
    a transaction: that transaction is gone, and its caller is told (Unavailable), never
    carried on outside it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.writing = False  # inside write(): a lost connection must not be replaced silently
        self.raw = self._open()

    def _open(self) -> psycopg.Connection[Any]:
        try:
            given = conninfo.conninfo_to_dict(self.url)
            raw = psycopg.connect(conninfo.make_conninfo(self.url, application_name="cigri",
                                                         connect_timeout=given.get("connect_timeout", CONNECT_TIMEOUT)),
                                  autocommit=True)
        except psycopg.Error as error:
            raise Unavailable(f"database {shown(self.url)}: {_first_line(error)}") from None
        raw.adapters.register_loader("numeric", _NumericLoader)
        return raw

    def _usable(self) -> psycopg.Connection[Any]:
        if self.raw.closed or self.raw.broken:
            if self.writing:
                raise Unavailable(f"database {shown(self.url)}: the connection was lost inside a transaction, "
                                  "which was not kept")
            self.raw = self._open()
        return self.raw

    def execute(self, sql: str, parameters: Sequence[Any] | Mapping[str, Any] = ()) -> Any:  # a cursor, as sqlite3's
        raw = self._usable()
        try:
            if not parameters:  # no placeholder to rewrite; a literal % must then stay single
                return raw.execute(sql)  # type: ignore[arg-type]
            return raw.execute(translate(sql), parameters)  # type: ignore[arg-type]
        except psycopg.OperationalError as error:  # the server's state, not the statement's
            raise Unavailable(f"database {shown(self.url)}: {_first_line(error)}") from None

    def executemany(self, sql: str, rows: Iterable[Sequence[Any] | Mapping[str, Any]]) -> Any:
        cursor = self._usable().cursor()
        try:
            cursor.executemany(translate(sql), rows)  # type: ignore[arg-type]
        except psycopg.OperationalError as error:
            raise Unavailable(f"database {shown(self.url)}: {_first_line(error)}") from None
        return cursor

    @property
    def in_transaction(self) -> bool:
        return not (self.raw.closed or self.raw.broken) and self.raw.info.transaction_status != TransactionStatus.IDLE

    def close(self) -> None:
        self.raw.close()


class Database:
    """An open PostgreSQL store: what a :class:`~cigri.grid.Grid` holds, as it holds SQLite's
    ``sqlite_utils.Database``: its :class:`Connection` as ``conn``."""

    def __init__(self, conn: Connection, url: str) -> None:
        self.conn = conn
        self.url = url
        self.fence: tuple[int, float] | None = None  # (epoch, lease) while this handle runs the cycles

    def close(self) -> None:
        self.conn.close()


def shown(url: str) -> str:
    """The URL as it may appear in a message or a listing: its password replaced."""
    try:
        parts = conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://…"
    user = f"{parts['user']}@" if parts.get("user") else ""
    port = f":{parts['port']}" if parts.get("port") else ""
    return f"postgresql://{user}{parts.get('host', '')}{port}/{parts.get('dbname', '')}"


def carries_password(url: str) -> bool:
    """Whether ``url`` holds a password (refused on a command line: ``ps`` shows it to everyone)."""
    try:
        return "password" in conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return False


def connect(url: str) -> Database:
    """Open the store at ``url`` (creating its schema on first use); refuse one a newer cigri wrote."""
    db = Database(Connection(url), url)
    try:
        _migrate(db)
    except psycopg.Error as error:
        db.close()
        raise CigriError(f"database {shown(url)}: {_first_line(error)}") from None
    return db


def applied_migrations(conn: Connection) -> list[str]:
    if conn.execute("SELECT to_regclass(?)", [MIGRATIONS_TABLE]).fetchone()[0] is None:
        return []
    return [name for (name,) in conn.execute(f"SELECT name FROM {MIGRATIONS_TABLE} ORDER BY id")]


def _migrate(db: Database) -> None:
    """Bring the schema up to this cigri's, in one transaction: on a fresh database, the
    baseline (``postgres.sql``: every migration up to :data:`POSTGRES_BASELINE` at once), then
    each later migration's own PostgreSQL statements, in the one sequence SQLite follows. An
    up-to-date store is only read: opening one never waits for a cycle's write lock."""
    if _up_to_date(db, applied_migrations(db.conn)):
        return
    with write(db) as conn:  # concurrent first opens queue on the lock, and read again under it
        applied = applied_migrations(conn)
        if _up_to_date(db, applied):
            return
        if not applied:
            conn.raw.execute(resources.files("cigri.db").joinpath("postgres.sql").read_text())
            applied = KNOWN_MIGRATIONS[:KNOWN_MIGRATIONS.index(POSTGRES_BASELINE) + 1]
            _record(conn, applied)
        for name in KNOWN_MIGRATIONS[len(applied):]:
            conn.raw.execute(POSTGRES_MIGRATIONS[name])
            _record(conn, [name])


def _up_to_date(db: Database, applied: list[str]) -> bool:
    """Whether ``applied`` is every migration this cigri knows; CigriError if a newer cigri wrote the store."""
    if newer := [name for name in applied if name not in KNOWN_MIGRATIONS]:
        raise CigriError(f"database {shown(db.url)}: written by a newer cigri (schema {newer[-1]}; this one "
                         f"knows up to {KNOWN_MIGRATIONS[-1]}): run that cigri, or restore a backup")
    return len(applied) == len(KNOWN_MIGRATIONS)


def _record(conn: Connection, names: list[str]) -> None:
    conn.executemany(f"INSERT INTO {MIGRATIONS_TABLE}(name, applied_at) VALUES (?, now())", [[name] for name in names])


@contextmanager
def write(db: Database) -> Iterator[Connection]:
    """One state change = one transaction holding the write lock from its start."""
    conn = db.conn
    conn.execute("BEGIN")
    conn.writing = True
    try:
        conn.execute("SELECT pg_advisory_xact_lock(?)", [WRITE_LOCK])
        if db.fence is not None and not leader.renew(conn, *db.fence):
            raise Fenced(f"epoch {db.fence[0]}: another server runs the cycles now; this write is refused")
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    finally:
        conn.writing = False


def next_id(conn: Connection, table: str) -> int:
    """The id the next row inserted into ``table`` gets, as :func:`cigri.db.store.next_id`."""
    sequence = conn.execute("SELECT pg_get_serial_sequence(?, 'id')", [table]).fetchone()[0]
    last, called = conn.execute(f"SELECT last_value, is_called FROM {sequence}").fetchone()
    return int(last) + 1 if called else int(last)


def _first_line(error: psycopg.Error) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
