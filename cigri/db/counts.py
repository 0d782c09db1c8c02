"""The SQL of ``counts``: each cycle's sample of every cluster's load (its total and free slots,
cigri's waiting and running jobs there), the time series ``gridclusters --history`` and the
grid's usage read.

The updator appends a sample per cluster each cycle and drops those past their retention in the
same transaction; :mod:`cigri.api.clusters` reads them. Every function takes the connection the
caller holds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from cigri.db import dialect
from cigri.db.rows import Connection, dicts


def _rounded(value: str) -> str:
    """``value`` to 3 decimals, a float on either store: PostgreSQL rounds only a NUMERIC (a
    no-op cast on SQLite), and an average of integers is one there."""
    return f"CAST(round(CAST({value} AS NUMERIC), 3) AS DOUBLE PRECISION)"


_USAGE = f"""
WITH samples AS (
    SELECT cluster_id, at, waiting, running, total_slots, free_slots,
           coalesce(lead(at) OVER (PARTITION BY cluster_id ORDER BY at), at + :period) - at AS span
    FROM counts WHERE cluster_id IN (SELECT id FROM clusters) AND at >= :since),
figures AS (
    SELECT cluster_id, count(*) AS samples, min(at) AS since, max(at) AS until,
           {_rounded("avg(total_slots)")} AS mean_total_slots, {_rounded("avg(free_slots)")} AS mean_free_slots,
           {_rounded("avg(running)")} AS mean_running, max(running) AS max_running,
           {_rounded("avg(waiting)")} AS mean_waiting, {_rounded("sum(running * span) / 3600")} AS cigri_job_hours
    FROM samples GROUP BY cluster_id)
SELECT c.name, coalesce(f.samples, 0) AS samples, f.since, f.until, f.mean_total_slots, f.mean_free_slots,
       f.mean_running, f.max_running, f.mean_waiting, f.cigri_job_hours
FROM clusters c LEFT JOIN figures f ON f.cluster_id = c.id ORDER BY c.name
"""


def _series(conn: Connection) -> str:
    """Per bucket of :step seconds, the samples found first at or after each of its evenly spaced
    instants (:sub apart; cigri.api.clusters.SAMPLES_PER_BUCKET of them), each found by one index
    seek: a month of samples every 10 s on ten clusters (2.6M rows) is 40,000 seeks, not a scan
    of them all."""
    by_cluster = dialect.indexed_by(conn, "counts_by_cluster")
    end = dialect.least(conn, ":until", ":since + (k + 1) * :sub")
    return f"""
WITH RECURSIVE instants(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM instants WHERE k + 1 < :instants),
picked AS (SELECT DISTINCT (SELECT id FROM counts {by_cluster} WHERE cluster_id = :cluster
                            AND at >= :since + k * :sub AND at < {end}
                            ORDER BY at LIMIT 1) AS id FROM instants)
SELECT {dialect.truncated(conn, "(s.at - :since) / :step")} AS bucket, count(*) AS samples,
       {_rounded("avg(s.total_slots)")} AS total_slots, {_rounded("avg(s.total_slots - s.free_slots)")} AS used_slots,
       {_rounded("avg(s.free_slots)")} AS free_slots, {_rounded("avg(s.running)")} AS cigri_running,
       {_rounded("avg(s.waiting)")} AS cigri_waiting
FROM picked JOIN counts s ON s.id = picked.id
GROUP BY bucket ORDER BY bucket
"""


def add(conn: Connection, samples: Iterable[tuple[Any, ...]]) -> None:
    """Append ``(at, cluster_id, waiting, running, total_slots, free_slots)`` samples."""
    conn.executemany("INSERT INTO counts(at, cluster_id, waiting, running, total_slots, free_slots) "
                     "VALUES (?, ?, ?, ?, ?, ?)", samples)


def forget_before(conn: Connection, before: float) -> None:
    """Delete the samples taken before ``before``: past their retention."""
    conn.execute("DELETE FROM counts WHERE at < ?", [before])


def forget_cluster(conn: Connection, cluster_id: int) -> None:
    """Delete the cluster's samples (it is being removed)."""
    conn.execute("DELETE FROM counts WHERE cluster_id = ?", [cluster_id])


def first_sample(conn: Connection) -> float | None:
    """When the oldest sample still kept was taken; None before any."""
    first: float | None = conn.execute("SELECT min(at) FROM counts").fetchone()[0]
    return first


def usage(conn: Connection, since: float, period: float) -> list[dict[str, Any]]:
    """Per cluster by name, the figures of its samples from ``since`` on (each sample standing
    until the cluster's next one, the last for a cycle ``period``); None figures without one."""
    return dicts(conn.execute(_USAGE, {"since": since, "period": period}))


def series(conn: Connection, cluster_id: int, since: float, until: float, step: float,
           sub: float) -> list[dict[str, Any]]:
    """The cluster's means per ``bucket`` of ``step`` seconds from ``since`` to ``until``, over
    the samples found first after each instant ``sub`` seconds apart."""
    return dicts(conn.execute(_series(conn), {"since": since, "until": until, "step": step, "sub": sub,
                                        "instants": math.ceil((until - since) / sub), "cluster": cluster_id}))
