"""The SQL of events, the jobs an open event covers, and the blacklists an event holds.

:mod:`cigri.events` decides what an occurrence is (its code, severity, signature) and
:mod:`cigri.api.events` who may read and fix what; this module only stores and finds. Every
function takes the connection the caller holds: inside a :func:`~cigri.db.store.write`
transaction for a change, so an event and what it holds change together.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from cigri.db import dialect
from cigri.db.rows import Connection, dicts
from cigri.states import CAMPAIGN_ACTIVE, CampaignState, JobState, sql_in

LISTED = ("e.id, e.class, e.code, e.severity, e.state, e.campaign_id, c.name AS cluster, e.job_id, e.task_id, "
          "e.count, e.examples, e.message, e.stderr_tail, e.signature, e.created_at, e.updated_at, "
          "e.closed_at, e.cluster_id")


def aggregate(conn: Connection, code: str, campaign_id: int | None, cluster_id: int | None,
              signature: str, state: str) -> tuple[int, list[dict[str, Any]]] | None:
    """The newest event an occurrence adds to (same code, campaign, cluster, signature and
    state): its id and examples; None if there is none yet."""
    row = conn.execute(
        "SELECT id, examples FROM events WHERE code = ? AND campaign_id IS NOT DISTINCT FROM ? "
        "AND cluster_id IS NOT DISTINCT FROM ? "
        "AND signature = ? AND state = ? ORDER BY id DESC LIMIT 1",
        [code, campaign_id, cluster_id, signature, state]).fetchone()
    return None if row is None else (row[0], json.loads(row[1]))


def insert(conn: Connection, *, kind: str, code: str, severity: str, state: str, campaign_id: int | None,
           cluster_id: int | None, job_id: int | None, task_id: int | None, message: str, stderr_tail: str | None,
           signature: str, examples: list[dict[str, Any]], now: float) -> int:
    """Store a new event counting its first occurrence; a closed one is closed at ``now``. Return its id."""
    event_id = conn.execute(
        "INSERT INTO events(class, code, severity, state, campaign_id, cluster_id, job_id, task_id, message, "
        "stderr_tail, signature, examples, created_at, updated_at, closed_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        [kind, code, severity, state, campaign_id, cluster_id, job_id, task_id, message, stderr_tail, signature,
         json.dumps(examples), now, now, None if state == "open" else now]).fetchone()[0]
    assert isinstance(event_id, int)
    return event_id


def insert_imported(conn: Connection, *, kind: str, code: str, severity: str, state: str,
                    campaign_id: int | None, cluster_id: int | None, job_id: int | None, message: str,
                    created_at: float, closed_at: float | None) -> int:
    """Store an event of CiGri v3's (``cigri import-v3``) as it was there, counted once and told
    already (its notifications went out from CiGri); return its id."""
    event_id = conn.execute(
        "INSERT INTO events(class, code, severity, state, campaign_id, cluster_id, job_id, message, created_at, "
        "closed_at, updated_at, notified_count) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1) RETURNING id",
        [kind, code, severity, state, campaign_id, cluster_id, job_id, message, created_at, closed_at,
         created_at]).fetchone()[0]
    assert isinstance(event_id, int)
    return event_id


def cover(conn: Connection, event_id: int, job_id: int, task_id: int | None) -> bool:
    """Remember that the open event covers the job (``gridevents --fix --resubmit`` puts its
    task back); False if it did already, so a job seen each cycle is counted once."""
    return conn.execute("INSERT INTO event_jobs(event_id, job_id, task_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                        [event_id, job_id, task_id]).rowcount > 0


def count_again(conn: Connection, event_id: int, examples: list[dict[str, Any]], now: float) -> None:
    """Count one more occurrence of the event, whose examples are now ``examples``."""
    conn.execute("UPDATE events SET count = count + 1, updated_at = ?, examples = ? WHERE id = ?",
                 [now, json.dumps(examples), event_id])


def close(conn: Connection, where: str, args: Iterable[object], now: float) -> list[int]:
    """Close the open events matching ``where`` (a fixed SQL condition on ``events``) and lift
    the blacklists they hold, of whole clusters and of campaigns on a cluster (the pair's
    failure count starting again from its figures now); return the ids closed."""
    ids = [r[0] for r in conn.execute(f"SELECT id FROM events WHERE state = 'open' AND ({where})", list(args))]
    if not ids:
        return ids
    closed = dialect.ids_in(conn)
    conn.execute(f"UPDATE events SET state = 'closed', closed_at = ? WHERE id IN {closed}", [now, json.dumps(ids)])
    conn.execute("UPDATE clusters SET blacklisted = 0, blacklist_reason = NULL, blacklisted_at = NULL, "
                 f"blacklist_event_id = NULL, failures = 0 WHERE blacklist_event_id IN {closed}", [json.dumps(ids)])
    conn.execute("UPDATE campaign_cluster_health SET blacklisted_at = NULL, event_id = NULL, exit_errors = 0, "
                 "terminated_base = coalesce((SELECT terminated FROM campaign_stats s WHERE "
                 "s.campaign_id = campaign_cluster_health.campaign_id AND "
                 f"s.cluster_id = campaign_cluster_health.cluster_id), 0) WHERE event_id IN {closed}",
                 [json.dumps(ids)])
    return ids


def fixable(*, event_id: int | None = None, campaign_id: int | None = None) -> tuple[str, list[object]]:
    """The condition :func:`close` takes for one event, a campaign's events, or (neither) the
    clusters' own: what ``gridevents --fix`` names."""
    if event_id is not None:
        return "id = ?", [event_id]
    if campaign_id is not None:
        return "campaign_id = ?", [campaign_id]
    return "class = 'cluster' AND campaign_id IS NULL", []


def launched() -> tuple[str, list[object]]:
    """The condition :func:`close` takes for the ``STUCK_LAUNCHING`` events none of whose jobs is
    still submitting: the cluster took them all at last."""
    return ("code = 'STUCK_LAUNCHING' AND NOT EXISTS (SELECT 1 FROM event_jobs ej JOIN jobs j ON "
            "j.id = ej.job_id WHERE ej.event_id = events.id AND j.state = ?)", [JobState.SUBMITTING])


def connection_problems(cluster_id: int, codes: Sequence[str]) -> tuple[str, list[object]]:
    """The condition :func:`close` takes for the cluster's own events of ``codes``: its
    connection problems, over once it answers."""
    return (f"class = 'cluster' AND cluster_id = ? AND code IN ({','.join('?' * len(codes))})",
            [cluster_id, *codes])


def stress_of(cluster_id: int) -> tuple[str, list[object]]:
    """The condition :func:`close` takes for the cluster's ``CLUSTER_STRESSED`` events: its
    users wait less again."""
    return "code = 'CLUSTER_STRESSED' AND cluster_id = ?", [cluster_id]


def covered_tasks(event_ids: list[int]) -> tuple[str, list[object]]:
    """A subquery of the tasks whose jobs the events cover, with its arguments: fixing the events
    with ``--resubmit`` puts the failed ones back in the bag."""
    return (f"SELECT ej.task_id FROM event_jobs ej WHERE ej.event_id IN ({','.join('?' * len(event_ids))}) "
            "AND ej.task_id IS NOT NULL", list(event_ids))


def hold_cluster(conn: Connection, cluster_id: int, event_id: int, reason: str, now: float) -> None:
    """Blacklist a cluster not blacklisted yet under the event (the autofix re-checks it from ``now``)."""
    conn.execute("UPDATE clusters SET blacklisted = 1, blacklist_reason = ?, blacklisted_at = ?, checked_at = ?, "
                 "blacklist_event_id = ? WHERE id = ? AND blacklisted = 0", [reason, now, now, event_id, cluster_id])


def holding_code(conn: Connection, cluster_id: int) -> str | None:
    """The code of the open event that blacklists the cluster; None if nothing holds it."""
    row = conn.execute("SELECT e.code FROM clusters c JOIN events e ON e.id = c.blacklist_event_id "
                       "WHERE c.id = ? AND e.state = 'open'", [cluster_id]).fetchone()
    return None if row is None else str(row[0])


def take_cluster(conn: Connection, cluster_id: int, event_id: int, reason: str, now: float) -> None:
    """Blacklist the cluster under the event, whatever held it before: only fixing this event lifts it."""
    conn.execute("UPDATE clusters SET blacklisted = 1, blacklist_reason = ?, blacklisted_at = ?, blacklist_event_id = ? "
                 "WHERE id = ?", [reason, now, event_id, cluster_id])


def hold_pair(conn: Connection, campaign_id: int, cluster_id: int, event_id: int, now: float) -> None:
    """Blacklist the campaign on the cluster under the event, one strike more, unless it is already."""
    conn.execute("UPDATE campaign_cluster_health SET blacklisted_at = ?, checked_at = ?, event_id = ?, "
                 "strikes = strikes + 1 WHERE campaign_id = ? AND cluster_id = ? AND blacklisted_at IS NULL",
                 [now, now, event_id, campaign_id, cluster_id])


def refused_clusters(conn: Connection) -> dict[int, set[int]]:
    """Per active campaign, the clusters that refused its jobs as described (its open
    ``SUBMISSION_ERROR`` events): none of its jobs, prologues and epilogues included, go there
    until the event is fixed."""
    refused: dict[int, set[int]] = {}
    for campaign_id, cluster_id in conn.execute(
            "SELECT campaign_id, cluster_id FROM events WHERE code = 'SUBMISSION_ERROR' AND state = 'open' "
            f"AND class = 'campaign' AND cluster_id IS NOT NULL AND campaign_id IN "
            f"(SELECT id FROM campaigns WHERE state IN {sql_in(CAMPAIGN_ACTIVE)})"):
        refused.setdefault(campaign_id, set()).add(cluster_id)
    return refused


def stressed_clusters(conn: Connection) -> set[int]:
    """The clusters with an open ``CLUSTER_STRESSED`` event: no new job goes there."""
    return {r[0] for r in conn.execute("SELECT cluster_id FROM events WHERE code = 'CLUSTER_STRESSED' "
                                       "AND state = 'open'")}


def any_open(conn: Connection, code: str) -> bool:
    """Whether an event of ``code`` is open (then there may be one to close)."""
    return conn.execute("SELECT 1 FROM events WHERE code = ? AND state = 'open' LIMIT 1", [code]).fetchone() is not None


def open_on_cluster(conn: Connection, cluster_id: int, codes: Sequence[str]) -> bool:
    """Whether the cluster has an open event of one of ``codes`` (its connection problems, that
    its answering again closes)."""
    return conn.execute(
        f"SELECT 1 FROM events WHERE code IN ({','.join('?' * len(codes))}) AND cluster_id = ? "
        "AND state = 'open' LIMIT 1", [*codes, cluster_id]).fetchone() is not None


def count_open(conn: Connection, campaign_id: int) -> int:
    """How many of the campaign's events are open (``gridstat``'s ``e``)."""
    count = conn.execute("SELECT count(*) FROM events WHERE campaign_id = ? AND state = 'open'",
                         [campaign_id]).fetchone()[0]
    assert isinstance(count, int)
    return count


def blocking(conn: Connection, campaign_id: int) -> list[dict[str, Any]]:
    """The campaign's open events that keep it off a cluster (a blacklist, a failed prologue, a
    cluster's refusal of its jobs): their ``code``, ``cluster`` and ``message``."""
    return [{"code": code, "cluster": cluster, "message": message} for code, cluster, message in conn.execute(
        "SELECT e.code, c.name, e.message FROM events e LEFT JOIN clusters c ON c.id = e.cluster_id "
        "WHERE e.campaign_id = ? AND e.state = 'open' "
        "AND e.code IN ('BLACKLISTED', 'PROLOGUE_FAILED', 'SUBMISSION_ERROR') ORDER BY e.id",
        [campaign_id])]


def clusters_and_holders(conn: Connection) -> list[tuple[Any, ...]]:
    """Every cluster (id, name, backend, options, blacklisted, blacklist event, checked at) with
    the code of the event holding its blacklist, if one does: who lifts a blacklist depends on it."""
    return conn.execute(
        "SELECT c.id, c.name, c.backend, c.options, c.blacklisted, c.blacklist_event_id, c.checked_at, e.code "
        "FROM clusters c LEFT JOIN events e ON e.id = c.blacklist_event_id").fetchall()


def unreported_script_failures(conn: Connection) -> list[tuple[Any, ...]]:
    """The prologue and epilogue jobs of the campaigns under way that ended badly and no event
    covers yet: (job, campaign, cluster, kind, state, exit code)."""
    return conn.execute(  # of the campaigns under way: not every script the grid ever ran
        "SELECT j.id, j.campaign_id, j.cluster_id, j.kind, j.state, j.exit_code "
        f"FROM campaigns c JOIN jobs j {dialect.indexed_by(conn, 'jobs_scripts')} ON j.campaign_id = c.id "
        "WHERE c.state IN (?, ?) AND j.kind != 'task' AND j.state NOT IN (?, ?, ?, ?) "
        "AND NOT EXISTS (SELECT 1 FROM event_jobs e WHERE e.job_id = j.id)",
        [CampaignState.IN_TREATMENT, CampaignState.PAUSED,
         JobState.SUBMITTING, JobState.WAITING, JobState.RUNNING, JobState.TERMINATED]).fetchall()


def open_campaign_events(conn: Connection, code: str,
                         campaign_ids: list[int] | None = None) -> dict[int, tuple[int, str]]:
    """``{campaign: (event id, message)}`` of the campaigns under way with an open campaign event
    of ``code`` (of ``campaign_ids`` only, when given), oldest event first."""
    where, args = ("", []) if campaign_ids is None else \
        (f" AND e.campaign_id IN ({','.join('?' * len(campaign_ids))})", campaign_ids)
    return {campaign_id: (event_id, message) for event_id, campaign_id, message in conn.execute(
        "SELECT e.id, e.campaign_id, e.message FROM events e JOIN campaigns c ON c.id = e.campaign_id "
        f"WHERE e.code = ? AND e.state = 'open' AND e.class = 'campaign' AND c.state IN {sql_in(CAMPAIGN_ACTIVE)}"
        f"{where} ORDER BY e.id", [code, *args])}


def listing(conn: Connection, *, event_id: int | None = None, campaign_id: int | None = None,
            global_only: bool = False, readable_by: str | None = None, include_closed: bool = True,
            limit: int | None = None, offset: int = 0) -> list[dict[str, Any]]:
    """Events as ``gridevents`` shows them (:data:`LISTED`, ``examples`` decoded), oldest first:
    one, a campaign's, the clusters' own (``global_only``), or those of ``readable_by``'s
    campaigns and the clusters'; all of these when nothing is named. ``limit`` of them after ``offset``."""
    where: list[str] = ["TRUE"]
    args: list[object] = []
    if event_id is not None:
        where.append("e.id = ?")
        args.append(event_id)
    if campaign_id is not None:
        where.append("e.campaign_id = ?")
        args.append(campaign_id)
    if global_only:
        where.append("e.class = 'cluster' AND e.campaign_id IS NULL")
    if readable_by is not None:
        where.append('(p."user" = ? OR e.campaign_id IS NULL)')
        args.append(readable_by)
    if not include_closed:
        where.append("e.state = 'open'")
    rows = dicts(conn.execute(f"SELECT {LISTED} FROM events e LEFT JOIN clusters c ON c.id = e.cluster_id "
                               f"LEFT JOIN campaigns p ON p.id = e.campaign_id WHERE {' AND '.join(where)} "
                               "ORDER BY e.id LIMIT ? OFFSET ?",
                               [*args, dialect.NO_LIMIT if limit is None else limit, offset]))
    for row in rows:
        row["examples"] = json.loads(row["examples"])
    return rows


def task_names(conn: Connection, task_ids: list[int]) -> dict[int, str]:
    """The names of the tasks events name in their examples, in one query."""
    return dict(conn.execute(f"SELECT id, name FROM tasks WHERE id IN {dialect.ids_in(conn)}",
                             [json.dumps(task_ids)]).fetchall()) if task_ids else {}


def prologue_failures(conn: Connection, event_ids: list[int]) -> list[tuple[int, int]]:
    """``(campaign, cluster)`` of the ``PROLOGUE_FAILED`` events among ``event_ids``."""
    return [(campaign_id, cluster_id) for campaign_id, cluster_id in conn.execute(
        f"SELECT DISTINCT campaign_id, cluster_id FROM events WHERE code = 'PROLOGUE_FAILED' "
        f"AND id IN ({','.join('?' * len(event_ids))})", event_ids).fetchall()]


def any_unnotified(conn: Connection) -> bool:
    """Whether an event has occurrences no notification told yet (an index answers it, so the
    usual cycle takes no write lock to find nothing)."""
    return conn.execute("SELECT 1 FROM events WHERE count > notified_count LIMIT 1").fetchone() is not None


def unnotified(conn: Connection) -> list[dict[str, Any]]:
    """The events with occurrences no notification told yet, with ``new`` (how many), their
    campaign's ``owner`` and cluster's name, ``examples`` decoded."""
    rows = dicts(conn.execute(
        "SELECT e.id, e.class, e.code, e.severity, e.state, e.campaign_id, c.name AS cluster, e.message, "
        'e.stderr_tail, e.count, e.count - e.notified_count AS new, e.examples, p."user" AS owner '
        "FROM events e LEFT JOIN clusters c ON c.id = e.cluster_id "
        "LEFT JOIN campaigns p ON p.id = e.campaign_id WHERE e.count > e.notified_count ORDER BY e.id"))
    for row in rows:
        row["examples"] = json.loads(row["examples"])
    return rows


def mark_notified(conn: Connection, events: list[dict[str, Any]]) -> None:
    """The occurrences counted in ``events`` (rows of :func:`unnotified`) are told."""
    conn.executemany("UPDATE events SET notified_count = ? WHERE id = ?", [(e["count"], e["id"]) for e in events])


def delete_campaign_events(conn: Connection, campaign_id: int) -> None:
    """Delete the events of a campaign and of its jobs, with the jobs they cover and the cluster
    blacklists they hold (purging the campaign; its health rows, which name them, are gone first)."""
    events = "SELECT id FROM events WHERE campaign_id = ?"
    jobs = "SELECT id FROM jobs WHERE campaign_id = ?"
    conn.execute(f"UPDATE clusters SET blacklist_event_id = NULL WHERE blacklist_event_id IN ({events})", [campaign_id])
    conn.execute(f"DELETE FROM event_jobs WHERE event_id IN ({events}) OR job_id IN ({jobs})", [campaign_id] * 2)
    conn.execute(f"DELETE FROM events WHERE campaign_id = ? OR job_id IN ({jobs})", [campaign_id] * 2)


def delete_cluster_events(conn: Connection, cluster_id: int) -> None:
    """Delete the cluster's events with the jobs they cover (removing the cluster, which no
    campaign names)."""
    conn.execute("DELETE FROM event_jobs WHERE event_id IN (SELECT id FROM events WHERE cluster_id = ?)", [cluster_id])
    conn.execute("DELETE FROM events WHERE cluster_id = ?", [cluster_id])
