"""The SQL of campaigns and what is kept per campaign: their per-cluster properties, their
figures per cluster (``campaign_stats``, ``throughput_minutes``), their health on each cluster,
their taps and their affinity penalties.

:mod:`cigri.api` decides who may read and change which campaign, the cycle's modules when a
campaign moves on and how fast it runs where; this module only stores and finds. Every function
takes the connection the caller holds: inside a :func:`~cigri.db.store.write` transaction for a
change, so a campaign moves with its tasks and jobs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from cigri.db import dialect
from cigri.db.rows import Connection, dicts
from cigri.states import CAMPAIGN_ACTIVE, CampaignState, JobState, sql_in

# Every table holding a campaign's rows but its tasks, jobs and events, children before parents
# (foreign keys are enforced).
_CAMPAIGN_TABLES = ("campaign_cluster_health", "affinity_penalties", "campaign_stats", "taps", "campaign_properties",
                    "task_blocks", "task_counts", "throughput_minutes")


def owner_and_state(conn: Connection, campaign_id: int) -> tuple[int, str, str] | None:
    """``(id, user, state)`` of the campaign; None if there is none."""
    row = conn.execute('SELECT id, "user", state FROM campaigns WHERE id = ?', [campaign_id]).fetchone()
    return None if row is None else (row[0], row[1], row[2])


def row(conn: Connection, campaign_id: int) -> dict[str, Any] | None:
    """The campaign's whole row; None if there is none."""
    rows = dicts(conn.execute("SELECT * FROM campaigns WHERE id = ?", [campaign_id]))
    return rows[0] if rows else None


def owner(conn: Connection, campaign_id: int) -> str:
    """The user who owns the campaign (which exists)."""
    return str(conn.execute('SELECT "user" FROM campaigns WHERE id = ?', [campaign_id]).fetchone()[0])


def is_active(conn: Connection, campaign_id: int) -> bool:
    """Whether the campaign (which exists) is under way: in treatment or paused."""
    return bool(conn.execute(f"SELECT state IN {sql_in(CAMPAIGN_ACTIVE)} FROM campaigns WHERE id = ?",
                             [campaign_id]).fetchone()[0])


def reopen(conn: Connection, where: str, args: list[Any]) -> None:
    """Put the ended campaigns matching ``where`` (a fixed SQL condition) back in treatment.
    A cancelled campaign stays cancelled."""
    conn.execute(f"UPDATE campaigns SET state = ?, finished_at = NULL WHERE state IN (?, ?) AND {where}",
                 [CampaignState.IN_TREATMENT, CampaignState.TERMINATED, CampaignState.FAILED, *args])


def end(conn: Connection, campaign_id: int, state: CampaignState, now: float) -> None:
    """The campaign ended at ``now`` in ``state`` (cancelled)."""
    conn.execute("UPDATE campaigns SET state = ?, finished_at = ? WHERE id = ?", [state, now, campaign_id])


def move(conn: Connection, campaign_id: int, before: CampaignState, after: CampaignState) -> None:
    """The campaign, if in ``before``, is now in ``after`` (paused, resumed)."""
    conn.execute("UPDATE campaigns SET state = ? WHERE id = ? AND state = ?", [after, campaign_id, before])


def owners(conn: Connection) -> list[str]:
    """The users who own a campaign, by name."""
    return [r[0] for r in conn.execute('SELECT DISTINCT "user" FROM campaigns ORDER BY "user"')]


def listing(conn: Connection, clause: str, args: list[Any], order: str, limit: int,
            offset: int) -> list[dict[str, Any]]:
    """The rows of the campaigns ``clause`` (a fixed ``WHERE`` on ``campaigns``, with ``args``;
    or empty) chooses, by id in ``order`` (``ASC`` or ``DESC``), ``limit`` (-1: all) after ``offset``."""
    return dicts(conn.execute(f"SELECT * FROM campaigns {clause} ORDER BY id {order} LIMIT ? OFFSET ?",
                              [*args, dialect.NO_LIMIT if limit < 0 else limit, offset]))


def ended_before(conn: Connection, ended: tuple[CampaignState, ...], before: float) -> list[int]:
    """The ids of the campaigns in ``ended`` states that ended (or, never started, were
    submitted) before ``before``, in id order: what a purge of old campaigns takes."""
    return [r[0] for r in conn.execute(
        f"SELECT id FROM campaigns WHERE state IN {sql_in(ended)} AND coalesce(finished_at, submitted_at) < ? "
        "ORDER BY id", [before])]


def cluster_in_use(conn: Connection, cluster_id: int) -> bool:
    """Whether some campaign has properties on the cluster (names it)."""
    return conn.execute("SELECT 1 FROM campaign_properties WHERE cluster_id = ? LIMIT 1", [cluster_id]).fetchone() \
        is not None


def active_on(conn: Connection, cluster_id: int) -> list[int]:
    """The ids of the campaigns under way that may use the cluster (have properties there), in id order."""
    return [r[0] for r in conn.execute(
        f"SELECT DISTINCT c.id FROM campaigns c JOIN campaign_properties p ON p.campaign_id = c.id "
        f"WHERE p.cluster_id = ? AND c.state IN {sql_in(CAMPAIGN_ACTIVE)} ORDER BY c.id", [cluster_id])]


def delete_kept(conn: Connection, campaign_id: int) -> None:
    """Delete what is kept for the campaign (a purge): its properties, figures, health, taps,
    penalties and the bookkeeping of its tasks."""
    for table in _CAMPAIGN_TABLES:
        conn.execute(f"DELETE FROM {table} WHERE campaign_id = ?", [campaign_id])


def delete(conn: Connection, campaign_id: int) -> None:
    """Delete the campaign's own row (a purge: everything of it is gone first)."""
    conn.execute("DELETE FROM campaigns WHERE id = ?", [campaign_id])


def imported(conn: Connection, v3_id: int) -> tuple[int, str] | None:
    """``(id, owner)`` of the campaign CiGri's campaign ``v3_id`` became at ``cigri import-v3``."""
    row = conn.execute('SELECT c.id, c."user" FROM v3_imports v JOIN campaigns c ON c.id = v.cigri_id '
                       "WHERE v.kind = 'campaign' AND v.v3_id = ?", [v3_id]).fetchone()
    return None if row is None else (row[0], row[1])


def nb_tasks(conn: Connection, campaign_id: int) -> int:
    """How many tasks the campaign has had, ever."""
    return int(conn.execute("SELECT nb_tasks FROM campaigns WHERE id = ?", [campaign_id]).fetchone()[0])


def active_of(conn: Connection, user: str) -> list[int]:
    """The ids of ``user``'s campaigns under way."""
    return [r[0] for r in conn.execute(
        f'SELECT id FROM campaigns WHERE "user" = ? AND state IN {sql_in(CAMPAIGN_ACTIVE)}', [user])]


def stored_by(conn: Connection, user: str) -> tuple[int, int, int]:
    """``user``'s parameter bytes in unfinished campaigns, and bytes and tasks in all of them."""
    bytes_active, bytes_kept, tasks_kept = conn.execute(
        f"SELECT coalesce(sum(CASE WHEN state IN {sql_in(CAMPAIGN_ACTIVE)} THEN param_bytes END), 0), "
        'coalesce(sum(param_bytes), 0), coalesce(sum(nb_tasks), 0) FROM campaigns WHERE "user" = ?', [user]).fetchone()
    return int(bytes_active), int(bytes_kept), int(tasks_kept)


def insert(conn: Connection, *, name: str, user: str, jobs_type: str, jdl: str, now: float, class_name: str,
           priority: int) -> int:
    """Store a new campaign, in treatment from ``now``; return its id."""
    campaign_id = conn.execute(
        'INSERT INTO campaigns(name, "user", state, jobs_type, jdl, submitted_at, class, priority) '
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        [name, user, CampaignState.IN_TREATMENT, jobs_type, jdl, now, class_name, priority]).fetchone()[0]
    assert isinstance(campaign_id, int)
    return campaign_id


def add_properties(conn: Connection, rows: Iterable[tuple[int, int, str, str]]) -> None:
    """Store ``(campaign_id, cluster_id, name, value)`` properties (``value`` in JSON), in the
    order given (the JDL's), which :func:`properties` gives back."""
    conn.executemany("INSERT INTO campaign_properties(campaign_id, cluster_id, name, value, position) "
                     "VALUES (?, ?, ?, ?, ?)", [(*row, n) for n, row in enumerate(rows)])


def add_tasks(conn: Connection, campaign_id: int, count: int, param_bytes: int) -> None:
    """The campaign has ``count`` tasks more, with ``param_bytes`` bytes of parameters."""
    conn.execute("UPDATE campaigns SET nb_tasks = nb_tasks + ?, param_bytes = param_bytes + ? WHERE id = ?",
                 [count, param_bytes, campaign_id])


def active_by_class(conn: Connection) -> list[tuple[int, str, str]]:
    """``(id, user, class)`` of the campaigns under way, in id order."""
    return [(r[0], r[1], r[2]) for r in conn.execute(
        f'SELECT id, "user", class FROM campaigns WHERE state IN {sql_in(CAMPAIGN_ACTIVE)} ORDER BY id')]


def last_end(conn: Connection, campaign_id: int) -> float | None:
    """When the campaign's last job ended (a cancel's kill may end it after the campaign); None before any."""
    last: float | None = conn.execute("SELECT max(last_end) FROM campaign_stats WHERE campaign_id = ?",
                                      [campaign_id]).fetchone()[0]
    return last


def properties(conn: Connection, campaign_ids: list[int]) -> dict[int, dict[int, dict[str, Any]]]:
    """``{campaign id: {cluster id: {key: value}}}`` for the given campaigns, in JDL order: their
    per-cluster settings, as resolved from the JDL at submission."""
    result: dict[int, dict[int, dict[str, Any]]] = {i: {} for i in campaign_ids}
    if not campaign_ids:
        return result
    marks = ",".join("?" * len(campaign_ids))
    for campaign_id, cluster_id, name, value in conn.execute(
            f"SELECT campaign_id, cluster_id, name, value FROM campaign_properties "
            f"WHERE campaign_id IN ({marks}) ORDER BY campaign_id, position", campaign_ids):
        result[campaign_id].setdefault(cluster_id, {})[name] = json.loads(value)
    return result


def under_way(conn: Connection) -> list[tuple[int, str]]:
    """``(id, user)`` of the campaigns in treatment or paused."""
    return [(r[0], r[1]) for r in conn.execute('SELECT id, "user" FROM campaigns WHERE state IN (?, ?)',
                                               [CampaignState.IN_TREATMENT, CampaignState.PAUSED])]


def scheduled(conn: Connection) -> list[tuple[int, str, str, str, str, int]]:
    """``(id, name, user, state, class, priority)`` of the campaigns in treatment or paused, in id order."""
    return [(r[0], r[1], r[2], r[3], r[4], r[5]) for r in conn.execute(
        'SELECT id, name, "user", state, class, priority FROM campaigns '
        "WHERE state IN (?, ?) ORDER BY id", [CampaignState.IN_TREATMENT, CampaignState.PAUSED])]


def in_treatment(conn: Connection) -> list[int]:
    """The ids of the campaigns in treatment (not paused), in id order."""
    return [r[0] for r in conn.execute("SELECT id FROM campaigns WHERE state = ? ORDER BY id",
                                       [CampaignState.IN_TREATMENT])]


def owners_in_treatment(conn: Connection) -> list[tuple[int, str]]:
    """``(id, user)`` of the campaigns in treatment (not paused)."""
    return [(r[0], r[1]) for r in conn.execute('SELECT id, "user" FROM campaigns WHERE state = ?',
                                               [CampaignState.IN_TREATMENT])]


def classes_in_treatment(conn: Connection) -> list[tuple[int, str]]:
    """``(id, class)`` of the campaigns in treatment (not paused), in id order."""
    return [(r[0], r[1]) for r in conn.execute("SELECT id, class FROM campaigns WHERE state = ? ORDER BY id",
                                               [CampaignState.IN_TREATMENT])]


def phase(conn: Connection, campaign_id: int) -> tuple[str, float | None]:
    """The campaign's state and when it ended (None while under way)."""
    state, finished_at = conn.execute("SELECT state, finished_at FROM campaigns WHERE id = ?",
                                      [campaign_id]).fetchone()
    return state, finished_at


def started(conn: Connection, campaign_id: int, now: float) -> None:
    """The campaign started at ``now``, unless it had already."""
    conn.execute("UPDATE campaigns SET started_at = coalesce(started_at, ?) WHERE id = ?", [now, campaign_id])


def finish(conn: Connection, campaign_id: int, end: CampaignState, now: float) -> None:
    """The campaign, if in treatment or paused, ended at ``now`` in ``end`` (terminated or failed)."""
    conn.execute("UPDATE campaigns SET state = ?, finished_at = ? WHERE id = ? AND state IN (?, ?)",
                 [end, now, campaign_id, CampaignState.IN_TREATMENT, CampaignState.PAUSED])


def gangs(conn: Connection, campaign_ids: list[int]) -> dict[int, Any]:
    """The ``gang`` of the campaigns' JDL (None where it has none)."""
    return dict(conn.execute(f"SELECT id, {dialect.json_integer(conn, 'jdl', 'gang')} FROM campaigns "
                             f"WHERE id IN {dialect.ids_in(conn)}", [json.dumps(campaign_ids)]).fetchall())


def prologues_done(conn: Connection) -> set[tuple[int, int]]:
    """``(campaign, cluster)`` where a campaign under way's prologue terminated: from the
    campaigns under way, not every script the grid ever ran."""
    return {(c, k) for c, k in conn.execute(
        "SELECT j.campaign_id, j.cluster_id FROM campaigns c "
        f"JOIN jobs j {dialect.indexed_by(conn, 'jobs_scripts')} ON j.campaign_id = c.id WHERE c.state IN (?, ?) "
        "AND j.kind != 'task' AND j.kind = 'prologue' AND j.state = ?",
        [CampaignState.IN_TREATMENT, CampaignState.PAUSED, JobState.TERMINATED])}


def scripts_queued(conn: Connection) -> set[tuple[int, int, str]]:
    """``(campaign, cluster, kind)`` of every prologue and epilogue job of the campaigns in treatment."""
    return {(c, k, kind) for c, k, kind in conn.execute(
        "SELECT j.campaign_id, j.cluster_id, j.kind FROM campaigns c "
        f"JOIN jobs j {dialect.indexed_by(conn, 'jobs_scripts')} ON j.campaign_id = c.id "
        "WHERE c.state = ? AND j.kind != 'task'", [CampaignState.IN_TREATMENT])}


def clusters_left(conn: Connection, campaign_id: int) -> int:
    """How many of the campaign's clusters may still run its tasks: those whose latest prologue,
    if any, has not failed (a fix runs it again)."""
    return int(conn.execute(
        "SELECT count(*) FROM campaign_properties p WHERE p.campaign_id = ? AND p.name = 'exec_file' "
        "AND coalesce((SELECT CASE WHEN j.state NOT IN (?, ?, ?, ?) THEN 1 ELSE 0 END FROM jobs j "
        "WHERE j.campaign_id = p.campaign_id AND j.cluster_id = p.cluster_id AND j.kind != 'task' "
        "AND j.kind = 'prologue' ORDER BY j.id DESC LIMIT 1), 0) = 0",
        [campaign_id, JobState.SUBMITTING, JobState.WAITING, JobState.RUNNING, JobState.TERMINATED]
    ).fetchone()[0])


def epilogues_due(conn: Connection, campaign_id: int) -> set[int]:
    """The clusters where the campaign asks for an epilogue and has had no epilogue job yet."""
    return {cluster_id for (cluster_id,) in conn.execute(
        "SELECT p.cluster_id FROM campaign_properties p WHERE p.campaign_id = ? AND p.name = 'epilogue' "
        "AND p.value != '\"\"' AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.campaign_id = p.campaign_id "
        "AND j.cluster_id = p.cluster_id AND j.kind = 'epilogue')", [campaign_id])}


# --- health: exit errors and blacklists per campaign and cluster --------------------------------

def count_exit_errors(conn: Connection, campaign_id: int, cluster_id: int,
                      new_errors: int) -> tuple[int, int, float | None]:
    """Add ``new_errors`` to the pair's exit errors; return them with its terminated count when
    they were last reset and when the pair was blacklisted (None: it is not)."""
    errors, base, blacklisted = conn.execute(
        "INSERT INTO campaign_cluster_health(campaign_id, cluster_id, exit_errors) VALUES (?, ?, ?) "
        "ON CONFLICT(campaign_id, cluster_id) DO UPDATE "
        "SET exit_errors = campaign_cluster_health.exit_errors + excluded.exit_errors "
        "RETURNING exit_errors, terminated_base, blacklisted_at", [campaign_id, cluster_id, new_errors]).fetchone()
    return errors, base, blacklisted


def blacklists(conn: Connection) -> list[tuple[int, int, float, int]]:
    """``(event_id, cluster_id, checked_at, strikes)`` of every campaign's blacklist on a cluster."""
    return [(r[0], r[1], r[2], r[3]) for r in conn.execute(
        "SELECT event_id, cluster_id, checked_at, strikes FROM campaign_cluster_health "
        f"{dialect.indexed_by(conn, 'health_blacklisted')} WHERE blacklisted_at IS NOT NULL")]


def blacklisted_pairs(conn: Connection) -> set[tuple[int, int]]:
    """``(campaign, cluster)`` of every campaign's blacklist on a cluster."""
    return {(c, k) for c, k in conn.execute(
        f"SELECT campaign_id, cluster_id FROM campaign_cluster_health {dialect.indexed_by(conn, 'health_blacklisted')} "
        "WHERE blacklisted_at IS NOT NULL")}


# --- figures: ended jobs per campaign and cluster, terminated ones per minute ---------------------

def record_ending(conn: Connection, job_id: int) -> None:
    """Add the ended job to its campaign's figures on its cluster (the updator does, in the
    transaction ending it)."""
    first_start = dialect.least(conn, "coalesce(campaign_stats.first_start, excluded.first_start)",
                        "coalesce(excluded.first_start, campaign_stats.first_start)")
    last_end = dialect.greatest(conn, "coalesce(campaign_stats.last_end, excluded.last_end)",
                        "coalesce(excluded.last_end, campaign_stats.last_end)")
    conn.execute(f"""
INSERT INTO campaign_stats(campaign_id, cluster_id, terminated, failed, duration_sum, duration_sq_sum,
                           first_start, last_end)
SELECT campaign_id, cluster_id, CASE WHEN state = 'terminated' THEN 1 ELSE 0 END,
       CASE WHEN state != 'terminated' THEN 1 ELSE 0 END,
       CASE WHEN state = 'terminated' THEN coalesce(finished_at - started_at, 0) ELSE 0 END,
       CASE WHEN state = 'terminated' THEN coalesce((finished_at - started_at) * (finished_at - started_at), 0)
            ELSE 0 END,
       started_at, finished_at
FROM jobs WHERE id = ? AND true
ON CONFLICT(campaign_id, cluster_id) DO UPDATE SET
    terminated = campaign_stats.terminated + excluded.terminated, failed = campaign_stats.failed + excluded.failed,
    duration_sum = campaign_stats.duration_sum + excluded.duration_sum,
    duration_sq_sum = campaign_stats.duration_sq_sum + excluded.duration_sq_sum,
    first_start = {first_start}, last_end = {last_end}
""", [job_id])


def count_minute(conn: Connection, job_id: int) -> None:
    """Count the job, if a terminated task's, into its campaign's terminated tasks of its minute
    on its cluster (the updator does, in the transaction ending it)."""
    conn.execute(f"""
INSERT INTO throughput_minutes(campaign_id, cluster_id, minute, terminated)
SELECT campaign_id, cluster_id, {dialect.truncated(conn, "finished_at / 60")}, 1 FROM jobs
WHERE id = ? AND state = 'terminated' AND kind = 'task' AND finished_at IS NOT NULL AND true
ON CONFLICT(campaign_id, cluster_id, minute) DO UPDATE SET terminated = throughput_minutes.terminated + 1
""", [job_id])


def forget_minutes(conn: Connection, before: int) -> None:
    """Delete the per-minute counts of the minutes before ``before`` (epoch minutes)."""
    conn.execute("DELETE FROM throughput_minutes WHERE minute < ?", [before])


def terminated_since(conn: Connection, campaign_id: int, minute: int) -> dict[int, int]:
    """Per cluster, the campaign's tasks terminated from the start of ``minute`` (epoch minutes) on."""
    return dict(conn.execute("SELECT cluster_id, sum(terminated) FROM throughput_minutes WHERE campaign_id = ? "
                             "AND minute >= ? GROUP BY cluster_id", [campaign_id, minute]).fetchall())


def terminated_on(conn: Connection, campaign_id: int, cluster_id: int) -> int:
    """How many of the campaign's jobs terminated on the cluster."""
    row = conn.execute("SELECT terminated FROM campaign_stats WHERE campaign_id = ? AND cluster_id = ?",
                       [campaign_id, cluster_id]).fetchone()
    return int((row or (0,))[0])


def terminated_per_cluster(conn: Connection, campaign_ids: list[int]) -> list[tuple[int, int, int]]:
    """``(campaign, cluster, terminated)`` for the campaigns' clusters with an ended job."""
    return [(r[0], r[1], r[2]) for r in conn.execute(
        f"SELECT campaign_id, cluster_id, terminated FROM campaign_stats WHERE campaign_id IN {dialect.ids_in(conn)}",
        [json.dumps(campaign_ids)])]


def figures_per_cluster(conn: Connection, campaign_id: int) -> list[tuple[Any, ...]]:
    """``(cluster, terminated, failed, duration_sum, duration_sq_sum, first_start, last_end)``
    per cluster where the campaign has ended jobs."""
    return [tuple(r) for r in conn.execute(
        "SELECT cluster_id, terminated, failed, duration_sum, duration_sq_sum, first_start, last_end "
        "FROM campaign_stats WHERE campaign_id = ?", [campaign_id])]


def figures(conn: Connection, campaign_id: int) -> tuple[float, float, float | None, float | None]:
    """The campaign's duration sum and sum of squares over every cluster, its first start and its last end."""
    total, squares, first_start, last_end = conn.execute(
        "SELECT coalesce(sum(duration_sum), 0), coalesce(sum(duration_sq_sum), 0), min(first_start), max(last_end) "
        "FROM campaign_stats WHERE campaign_id = ?", [campaign_id]).fetchone()
    return total, squares, first_start, last_end


def terminated_and_duration(conn: Connection, campaign_id: int) -> tuple[int, float]:
    """The campaign's terminated jobs and their duration sum, on every cluster."""
    done, total = conn.execute("SELECT coalesce(sum(terminated), 0), coalesce(sum(duration_sum), 0) "
                               "FROM campaign_stats WHERE campaign_id = ?", [campaign_id]).fetchone()
    return done, total


def duration_and_terminated(conn: Connection, campaign_id: int,
                            cluster_id: int | None) -> tuple[float | None, int | None]:
    """The duration sum and count of the campaign's terminated jobs on the cluster (None: on
    every cluster); both None before any."""
    where, args = (("campaign_id = ? AND cluster_id = ?", [campaign_id, cluster_id]) if cluster_id is not None
                   else ("campaign_id = ?", [campaign_id]))
    total, count = conn.execute(f"SELECT sum(duration_sum), sum(terminated) FROM campaign_stats WHERE {where}",
                                args).fetchone()
    return total, count


def durations_per_pair(conn: Connection, campaign_ids: list[int]) -> dict[tuple[int, int], tuple[float, int]]:
    """``{(campaign, cluster): (duration_sum, terminated)}`` of the campaigns' ended jobs."""
    return {(c, k): (total, n) for c, k, total, n in conn.execute(
        f"SELECT campaign_id, cluster_id, duration_sum, terminated FROM campaign_stats "
        f"WHERE campaign_id IN ({','.join('?' * len(campaign_ids))})", campaign_ids)}


def ended_jobs(conn: Connection, campaign_id: int) -> int:
    """How many of the campaign's jobs ended, terminated or failed, on every cluster."""
    return int(conn.execute("SELECT coalesce(sum(terminated + failed), 0) FROM campaign_stats WHERE campaign_id = ?",
                            [campaign_id]).fetchone()[0])


# --- taps and affinity penalties ----------------------------------------------------------------

def taps(conn: Connection, campaign_id: int) -> dict[int, int]:
    """``{cluster: jobs allowed to wait}`` of a campaign as last sized."""
    return dict(conn.execute("SELECT cluster_id, rate FROM taps WHERE campaign_id = ?", [campaign_id]).fetchall())


def forget_cluster_taps(conn: Connection, cluster_id: int) -> None:
    """Delete every tap on the cluster (it is being removed)."""
    conn.execute("DELETE FROM taps WHERE cluster_id = ?", [cluster_id])


def open_taps(conn: Connection) -> dict[tuple[int, int], int]:
    """``{(campaign, cluster): rate}`` of the campaigns in treatment: those that may start jobs."""
    return {(c, k): rate for c, k, rate in conn.execute(
        "SELECT t.campaign_id, t.cluster_id, t.rate FROM campaigns c JOIN taps t ON t.campaign_id = c.id "
        "WHERE c.state = ?", [CampaignState.IN_TREATMENT])}


def taps_in_treatment(conn: Connection) -> dict[tuple[int, int], tuple[int, str]]:
    """``{(campaign, cluster): (rate, state)}`` of the campaigns in treatment: not the ended campaigns' taps."""
    return {(c, k): (rate, state) for c, k, rate, state in conn.execute(
        "SELECT t.campaign_id, t.cluster_id, t.rate, t.state FROM campaigns c JOIN taps t ON t.campaign_id = c.id "
        "WHERE c.state = ?", [CampaignState.IN_TREATMENT])}


def set_tap(conn: Connection, campaign_id: int, cluster_id: int, rate: int, state: str) -> None:
    """Size the campaign's tap on the cluster: ``rate`` jobs may wait, ``state`` open or closed."""
    conn.execute("INSERT INTO taps(campaign_id, cluster_id, rate, state) VALUES (?, ?, ?, ?) "
                 "ON CONFLICT(campaign_id, cluster_id) DO UPDATE SET rate = excluded.rate, "
                 "state = excluded.state", [campaign_id, cluster_id, rate, state])


def penalties(conn: Connection, campaign_ids: list[int]) -> list[tuple[int, int, float, float, float]]:
    """``(campaign, cluster, penalty, updated_at, half_life)`` of the campaigns' affinity penalties, undecayed."""
    return [(r[0], r[1], r[2], r[3], r[4]) for r in conn.execute(
        f"SELECT campaign_id, cluster_id, penalty, updated_at, half_life FROM affinity_penalties "
        f"WHERE campaign_id IN ({','.join('?' * len(campaign_ids))})", campaign_ids)]


def penalty(conn: Connection, campaign_id: int, cluster_id: int) -> tuple[float, float, float] | None:
    """``(penalty, updated_at, half_life)`` of the campaign on the cluster, undecayed; None if it has none."""
    row = conn.execute("SELECT penalty, updated_at, half_life FROM affinity_penalties WHERE campaign_id = ? "
                       "AND cluster_id = ?", [campaign_id, cluster_id]).fetchone()
    return None if row is None else (row[0], row[1], row[2])


def set_penalty(conn: Connection, campaign_id: int, cluster_id: int, value: float, now: float,
                half_life: float) -> None:
    """The campaign's affinity penalty on the cluster is ``value`` at ``now``, decaying by ``half_life``."""
    conn.execute("INSERT INTO affinity_penalties(campaign_id, cluster_id, penalty, updated_at, half_life) "
                 "VALUES (?, ?, ?, ?, ?) ON CONFLICT(campaign_id, cluster_id) DO UPDATE SET "
                 "penalty = excluded.penalty, updated_at = excluded.updated_at, half_life = excluded.half_life",
                 [campaign_id, cluster_id, value, now, half_life])


# --- a simulation's reading of the campaigns it ran --------------------------------------------

def count(conn: Connection) -> int:
    """How many campaigns there are."""
    return int(conn.execute("SELECT count(*) FROM campaigns").fetchone()[0])


def any_active(conn: Connection) -> bool:
    """Whether some campaign is under way."""
    return conn.execute(f"SELECT 1 FROM campaigns WHERE state IN {sql_in(CAMPAIGN_ACTIVE)} LIMIT 1").fetchone() \
        is not None


def active(conn: Connection) -> list[int]:
    """The ids of the campaigns under way."""
    return [r[0] for r in conn.execute(f"SELECT id FROM campaigns WHERE state IN {sql_in(CAMPAIGN_ACTIVE)}")]


def active_sizes(conn: Connection) -> list[tuple[int, int]]:
    """``(id, nb_tasks)`` of the campaigns under way."""
    return [(r[0], r[1]) for r in conn.execute(
        f"SELECT id, nb_tasks FROM campaigns WHERE state IN {sql_in(CAMPAIGN_ACTIVE)}")]


def span_of_all(conn: Connection, now: float) -> tuple[float, float]:
    """The first submission of any campaign and the last end (``now`` for one not ended)."""
    first, last = conn.execute("SELECT min(submitted_at), max(coalesce(finished_at, ?)) FROM campaigns",
                               [now]).fetchone()
    return first, last


def count_over(conn: Connection) -> int:
    """How many campaigns are over: terminated, failed or cancelled."""
    return int(conn.execute(f"SELECT count(*) FROM campaigns WHERE state NOT IN {sql_in(CAMPAIGN_ACTIVE)}")
               .fetchone()[0])


def terminated_ends(conn: Connection) -> dict[int, float]:
    """``{campaign: finished_at}`` of the terminated campaigns."""
    return dict(conn.execute("SELECT id, finished_at FROM campaigns WHERE state = 'terminated'").fetchall())
