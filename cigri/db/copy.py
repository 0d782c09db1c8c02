"""``cigri db copy --to URL``: a SQLite grid, running campaigns and their jobs included, into a
fresh PostgreSQL store, table for table, with the same ids; the site then points
``[database] url`` at it and carries on.

One transaction on each side: the SQLite file is read in one snapshot, and PostgreSQL gets all
of it or nothing. The ids' sequences resume past every id SQLite ever gave (purged rows'
included), so no id a user has seen is given again.
"""

from __future__ import annotations

import sqlite3

from sqlite_utils import Database

from cigri.db import postgres
from cigri.errors import CigriError

# Every table, parents before children. clusters.blacklist_event_id points at events, which
# point at clusters: it is filled in after the events (FOLLOW_UP).
TABLES = ("clusters", "campaigns", "campaign_properties", "taps", "campaign_stats", "affinity_penalties", "tasks",
          "task_blocks", "task_counts", "jobs", "events", "event_jobs", "campaign_cluster_health", "counts",
          "v3_imports", "throughput_minutes", "tokens", "subscriptions", "outbox", "mail_codes", "leader")
FOLLOW_UP = ("clusters", "blacklist_event_id")
OWN_TABLES = ("_sqlite_migrations", "sqlite_sequence")  # SQLite's bookkeeping; PostgreSQL keeps its own


def copy_store(source: Database, target: postgres.Database) -> dict[str, int]:
    """Copy every row of ``source`` into the empty ``target``; the rows copied per table."""
    lite, pg = source.conn, target.conn
    found = {name for (name,) in lite.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if unknown := sorted(found - set(TABLES) - set(OWN_TABLES)):
        raise CigriError(f"cigri db copy: table {unknown[0]} of the SQLite grid has no place in the copy")
    copied: dict[str, int] = {}
    lite.execute("BEGIN")  # one snapshot of the whole file
    try:
        with postgres.write(target) as conn:
            if filled := [t for t in TABLES if conn.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone()]:
                raise CigriError(f"{postgres.shown(target.url)}: not empty ({filled[0]} has rows): copy into a "
                                 "fresh database")
            conn.execute("ALTER TABLE tasks DISABLE TRIGGER USER")  # task_counts is copied as it is
            for table in TABLES:
                copied[table] = _copy_table(lite, conn, table)
            conn.execute("ALTER TABLE tasks ENABLE TRIGGER USER")
            table, column = FOLLOW_UP
            conn.executemany(f"UPDATE {table} SET {column} = ? WHERE id = ?",
                             lite.execute(f"SELECT {column}, id FROM {table} WHERE {column} IS NOT NULL").fetchall())
            _resume_sequences(lite, conn)
    finally:
        lite.execute("ROLLBACK")
    return copied


def _copy_table(lite: sqlite3.Connection, conn: postgres.Connection, table: str) -> int:
    cursor = lite.execute(f"SELECT * FROM {table}")
    columns = [c[0] for c in cursor.description]
    blanked = columns.index(FOLLOW_UP[1]) if table == FOLLOW_UP[0] else None
    quoted = ", ".join(f'"{c}"' for c in columns)
    rows = 0
    with conn.raw.cursor().copy(f"COPY {table} ({quoted}) FROM STDIN") as copy:
        for row in cursor:
            if blanked is not None:
                row = (*row[:blanked], None, *row[blanked + 1:])
            copy.write_row(row)
            rows += 1
    return rows


def _resume_sequences(lite: sqlite3.Connection, conn: postgres.Connection) -> None:
    """Each id sequence past the highest id SQLite gave (its ``sqlite_sequence``) or holds."""
    given = dict(lite.execute("SELECT name, seq FROM sqlite_sequence").fetchall())
    with_ids = [name for (name,) in conn.execute(
        "SELECT table_name FROM information_schema.columns WHERE column_name = 'id' AND is_identity = 'YES' "
        "AND table_schema = current_schema()")]
    for table in with_ids:
        held = conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()[0]
        highest = max(int(given.get(table, 0)), int(held))
        if highest:
            conn.execute("SELECT setval(pg_get_serial_sequence(?, 'id'), ?)", [table, highest])
