"""The SQL of clusters: their definitions (from the configuration or an admin's), their
blacklists, their failure counts and the submit limits learned from them.

:mod:`cigri.grid` keeps the configured ones in step, :mod:`cigri.api.clusters` does the admin's
operations and the cycle counts failures; this module only stores and finds. The blacklists
events hold (set and lifted with their events) are :mod:`cigri.db.events`'. Every function
takes the connection the caller holds: inside a :func:`~cigri.db.store.write` transaction for
a change.
"""

from __future__ import annotations

from typing import Any

from cigri.db.rows import Connection, dicts


# --- definitions: the configuration's and the admin's --------------------------------------

def definition(conn: Connection, cluster_id: int) -> tuple[str, str, str]:
    """``(name, backend, options)`` of the cluster, one that exists; its options as JSON text."""
    row: tuple[str, str, str] = conn.execute("SELECT name, backend, options FROM clusters WHERE id = ?",
                                             [cluster_id]).fetchone()
    return row


def definitions(conn: Connection) -> list[tuple[str, str, str]]:
    """``(name, backend, options)`` of every cluster, its options as JSON text."""
    return conn.execute("SELECT name, backend, options FROM clusters").fetchall()


def configured(conn: Connection) -> dict[str, tuple[str, str]]:
    """``{name: (backend, options)}`` of the clusters the configuration defines."""
    return {name: (backend, options) for name, backend, options in conn.execute(
        "SELECT name, backend, options FROM clusters WHERE source = 'config'")}


def upsert_configured(conn: Connection, name: str, backend: str, options: str) -> None:
    """Store the configuration's cluster ``name`` (its ``options`` as JSON text), new or not."""
    conn.execute(
        "INSERT INTO clusters(name, backend, options, source) VALUES (?, ?, ?, 'config') "
        "ON CONFLICT(name) DO UPDATE SET backend = excluded.backend, options = excluded.options, "
        "source = 'config'", [name, backend, options])


def unconfigure(conn: Connection, name: str) -> None:
    """The configuration no longer defines the cluster: it stays, as an admin's."""
    conn.execute("UPDATE clusters SET source = 'admin' WHERE name = ?", [name])


def exists(conn: Connection, name: str) -> bool:
    """Whether a cluster is called ``name``."""
    return conn.execute("SELECT 1 FROM clusters WHERE name = ?", [name]).fetchone() is not None


def insert_admin_added(conn: Connection, name: str, backend: str, options: str) -> int:
    """Store a cluster an admin adds (its ``options`` as JSON text); return its id."""
    cluster_id = conn.execute("INSERT INTO clusters(name, backend, options, source) VALUES (?, ?, ?, 'admin') "
                              "RETURNING id", [name, backend, options]).fetchone()[0]
    assert isinstance(cluster_id, int)
    return cluster_id


def id_and_source(conn: Connection, name: str) -> tuple[int, str] | None:
    """``(id, source)`` of the cluster called ``name`` (``config`` or ``admin``); None if none is."""
    row = conn.execute("SELECT id, source FROM clusters WHERE name = ?", [name]).fetchone()
    return None if row is None else (row[0], row[1])


def delete(conn: Connection, cluster_id: int) -> None:
    """Delete the cluster (nothing may refer to it any more)."""
    conn.execute("DELETE FROM clusters WHERE id = ?", [cluster_id])


def backend_and_options(conn: Connection, name: str) -> tuple[str, str] | None:
    """``(backend, options)`` of the cluster called ``name``, its options as JSON text; None if none is."""
    row = conn.execute("SELECT backend, options FROM clusters WHERE name = ?", [name]).fetchone()
    return None if row is None else (row[0], row[1])


def names(conn: Connection) -> dict[int, str]:
    """Every cluster's name, by id."""
    return {cluster_id: name for cluster_id, name in conn.execute("SELECT id, name FROM clusters")}


def ids_and_names(conn: Connection) -> list[tuple[int, str]]:
    """``(id, name)`` of every cluster, by name."""
    return conn.execute("SELECT id, name FROM clusters ORDER BY name").fetchall()


def backends(conn: Connection) -> dict[str, str]:
    """Each cluster's backend, by name in name order."""
    return dict(conn.execute("SELECT name, backend FROM clusters ORDER BY name"))


def count(conn: Connection) -> int:
    """How many clusters there are: the read a health probe makes."""
    found: int = conn.execute("SELECT count(*) FROM clusters").fetchone()[0]
    return found


# --- what the API and the doctor show ------------------------------------------------------

def listing(conn: Connection, cluster_id: int | None) -> list[dict[str, Any]]:
    """Every cluster's row (``cluster_id``: that one's only), by name."""
    if cluster_id is None:
        return dicts(conn.execute("SELECT * FROM clusters ORDER BY name"))
    return dicts(conn.execute("SELECT * FROM clusters WHERE id = ? ORDER BY name", [cluster_id]))


def as_stored(conn: Connection) -> list[dict[str, Any]]:
    """Every cluster by name: ``name``, ``backend``, ``options`` (JSON text), ``source``,
    ``blacklisted``, ``blacklist_reason``, ``id``."""
    return dicts(conn.execute(
        "SELECT name, backend, options, source, blacklisted, blacklist_reason, id FROM clusters ORDER BY name"))


def blacklists(conn: Connection) -> list[tuple[int, str, int, str | None]]:
    """``(id, name, blacklisted, blacklist reason)`` of every cluster, by name."""
    return conn.execute("SELECT id, name, blacklisted, blacklist_reason FROM clusters ORDER BY name").fetchall()


def definitions_and_blacklists(conn: Connection) -> list[tuple[str, str, str, int]]:
    """``(name, backend, options, blacklisted)`` of every cluster, its options as JSON text."""
    return conn.execute("SELECT name, backend, options, blacklisted FROM clusters").fetchall()


def latest_cores(conn: Connection) -> list[tuple[str, str, str, int | None]]:
    """``(name, backend, options, total slots)`` of every cluster, its total slots from its
    latest load sample that has them (None: none has)."""
    return conn.execute(
        "SELECT c.name, c.backend, c.options, (SELECT total_slots FROM counts WHERE cluster_id = c.id "
        "AND total_slots IS NOT NULL ORDER BY at DESC LIMIT 1) FROM clusters c").fetchall()


# --- health: blacklists by an admin, failures, re-checks, submit limits --------------------

def blacklist_holder(conn: Connection, name: str) -> tuple[int, int | None] | None:
    """``(id, event holding its blacklist)`` of the cluster called ``name``; None if none is."""
    row = conn.execute("SELECT id, blacklist_event_id FROM clusters WHERE name = ?", [name]).fetchone()
    return None if row is None else (row[0], row[1])


def set_blacklist(conn: Connection, cluster_id: int, reason: str | None, blacklisted_at: float | None,
                  event_id: int | None) -> None:
    """An admin blacklists the cluster for ``reason`` under ``event_id``, or lifts its blacklist
    (``reason`` None); its failure count starts again either way."""
    conn.execute("UPDATE clusters SET blacklisted = ?, blacklist_reason = ?, blacklisted_at = ?, failures = 0, "
                 "blacklist_event_id = ? WHERE id = ?",
                 [int(reason is not None), reason, blacklisted_at, event_id, cluster_id])


def count_failure(conn: Connection, cluster_id: int) -> int:
    """One more cycle with a failed call to the cluster; return how many in a row now."""
    failures: int = conn.execute("UPDATE clusters SET failures = failures + 1 WHERE id = ? RETURNING failures",
                                 [cluster_id]).fetchone()[0]
    return failures


def any_failures(conn: Connection, cluster_ids: list[int]) -> bool:
    """Whether some of these clusters has failures counted."""
    return conn.execute(f"SELECT 1 FROM clusters WHERE failures > 0 AND id IN "
                        f"({','.join('?' * len(cluster_ids))})", cluster_ids).fetchone() is not None


def reset_failures(conn: Connection, cluster_ids: list[int]) -> None:
    """These clusters were used without a failure: their failure counts start again."""
    conn.execute(f"UPDATE clusters SET failures = 0 WHERE failures > 0 AND id IN "
                 f"({','.join('?' * len(cluster_ids))})", cluster_ids)


def mark_checked(conn: Connection, cluster_id: int, now: float) -> None:
    """The blacklisted cluster was asked again at ``now`` (and did not answer)."""
    conn.execute("UPDATE clusters SET checked_at = ? WHERE id = ?", [now, cluster_id])


def submit_limits(conn: Connection) -> list[tuple[Any, ...]]:
    """``(id, options, submit limit learned, when)`` of every cluster, its options as JSON text
    (the limit and when it was learned are both None before one is)."""
    return conn.execute("SELECT id, options, submit_limit, submit_limit_at FROM clusters").fetchall()


def set_submit_limit(conn: Connection, cluster_id: int, limit: int, now: float) -> None:
    """The cluster takes at most ``limit`` jobs from cigri, as learned at ``now``."""
    conn.execute("UPDATE clusters SET submit_limit = ?, submit_limit_at = ? WHERE id = ?", [limit, now, cluster_id])
