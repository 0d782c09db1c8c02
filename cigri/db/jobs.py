"""The SQL of jobs: one attempt of a task, or a campaign's prologue or epilogue, on one cluster.

The schedulers create them, the runner sends them, the updator follows them to their end,
nikita kills them and the API, the predictor and the simulator count them; this module only
stores and finds. Every function takes the connection the caller holds: inside a
:func:`~cigri.db.store.write` transaction for a change, so a job and its task change together.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from cigri.db import dialect
from cigri.db.rows import Connection, dicts
from cigri.states import JOB_ACTIVE, JobState, KillReason, TaskState, sql_in

_SHOWN = ('SELECT j.*, c.name AS cluster, t.name AS task, t.param, p."user" AS "user" FROM jobs j '
          "JOIN clusters c ON c.id = j.cluster_id JOIN campaigns p ON p.id = j.campaign_id "
          "LEFT JOIN tasks t ON t.id = j.task_id")  # a job as the API shows it


# --- creating: the schedulers, prologues and epilogues, import-v3 -------------------------

def add_task_jobs(conn: Connection, campaign_id: int, cluster_id: int, task_ids: Iterable[int],
                  now: float) -> None:
    """Create one new ``submitting`` job on the cluster for each of the campaign's tasks."""
    conn.executemany(
        "INSERT INTO jobs(campaign_id, task_id, cluster_id, kind, state, created_at) VALUES (?, ?, ?, 'task', ?, ?)",
        [(campaign_id, t, cluster_id, JobState.SUBMITTING, now) for t in task_ids])


def add_script_job(conn: Connection, campaign_id: int, cluster_id: int, kind: str, now: float) -> None:
    """Create a new ``submitting`` prologue or epilogue job (``kind``) of the campaign on the cluster."""
    conn.execute(
        "INSERT INTO jobs(campaign_id, task_id, cluster_id, kind, state, created_at) VALUES (?, NULL, ?, ?, ?, ?)",
        [campaign_id, cluster_id, kind, JobState.SUBMITTING, now])


def insert_imported(conn: Connection, *, campaign_id: int, task_id: int | None, cluster_id: int, kind: str,
                    state: JobState, remote_id: str | None, batch: str, created_at: float,
                    submitted_at: float | None, started_at: float | None, finished_at: float | None,
                    exit_code: int | None, node: str | None, kill_reason: KillReason | None) -> int:
    """Store a job of CiGri v3's (``cigri import-v3``) as it was there; return its id."""
    job_id = conn.execute(
        "INSERT INTO jobs(campaign_id, task_id, cluster_id, kind, state, remote_id, batch, created_at, submitted_at, "
        "started_at, finished_at, exit_code, node, kill_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "RETURNING id",
        [campaign_id, task_id, cluster_id, kind, state, remote_id, batch, created_at, submitted_at, started_at,
         finished_at, exit_code, node, kill_reason]).fetchone()[0]
    assert isinstance(job_id, int)
    return job_id


def imported_tasks(conn: Connection) -> dict[int, int | None]:
    """``{job: task}`` of the jobs imported from CiGri v3."""
    return dict(conn.execute("SELECT j.id, j.task_id FROM jobs j JOIN v3_imports v ON v.kind = 'job' "
                             "AND v.cigri_id = j.id").fetchall())


# --- sending: the runner ------------------------------------------------------------------

def unbatched(conn: Connection) -> list[tuple[int, int, int, str]]:
    """``(id, cluster, campaign, kind)`` of the new ``submitting`` jobs no batch holds yet, by
    cluster, campaign, kind and id."""
    return conn.execute(
        "SELECT id, cluster_id, campaign_id, kind FROM jobs WHERE state = ? AND batch IS NULL "
        "ORDER BY cluster_id, campaign_id, kind, id", [JobState.SUBMITTING]).fetchall()


def set_batches(conn: Connection, updates: Iterable[tuple[str, int | None, int]]) -> None:
    """Give each job of ``(batch, run group, job id)`` with no batch yet its batch and temporal group."""
    conn.executemany("UPDATE jobs SET batch = ?, run_group = ? WHERE id = ? AND batch IS NULL", updates)


def rebatch(conn: Connection, job_ids: Iterable[int], batch: str) -> None:
    """Put these jobs, still ``submitting``, in their own ``batch`` (the half of one split in two)."""
    conn.executemany("UPDATE jobs SET batch = ? WHERE id = ? AND state = ?",
                     [(batch, job_id, JobState.SUBMITTING) for job_id in job_ids])


def to_submit(conn: Connection) -> list[dict[str, Any]]:
    """The ``submitting`` jobs nikita is not to kill, with their task's name and parameters and
    their campaign's user, by cluster and batch: what the runner sends."""
    return dicts(conn.execute(
        "SELECT j.id, j.campaign_id, j.cluster_id, j.kind, j.batch, j.run_group, j.task_id, t.name AS task, t.param, "
        'c."user" '
        "FROM jobs j JOIN campaigns c ON c.id = j.campaign_id LEFT JOIN tasks t ON t.id = j.task_id "
        "WHERE j.state = ? AND j.kill_reason IS NULL ORDER BY j.cluster_id, CAST(j.batch AS BIGINT), j.id",
        [JobState.SUBMITTING]))


def submitted(conn: Connection, remote_ids: Iterable[tuple[int, str]], now: float) -> None:
    """The cluster took these ``(job, remote id)`` still ``submitting``: they wait there from ``now``."""
    conn.executemany(
        "UPDATE jobs SET state = ?, remote_id = ?, submitted_at = ? WHERE id = ? AND state = ?",
        [(JobState.WAITING, remote_id, now, job_id, JobState.SUBMITTING) for job_id, remote_id in remote_ids])


def holds(conn: Connection, campaign_id: int, cluster_id: int) -> bool:
    """Whether the cluster took some of the campaign's jobs (waiting or running there)."""
    return conn.execute("SELECT 1 FROM jobs WHERE campaign_id = ? AND cluster_id = ? AND state IN (?, ?) "
                        "LIMIT 1", [campaign_id, cluster_id, JobState.WAITING, JobState.RUNNING]).fetchone() \
        is not None


def forget_unsent(conn: Connection, job_ids: list[int]) -> list[int]:
    """Delete these jobs if still ``submitting`` (no cluster has them); return the tasks of those deleted."""
    return [r[0] for r in conn.execute(
        f"DELETE FROM jobs WHERE id IN ({','.join('?' * len(job_ids))}) AND state = ? RETURNING task_id",
        [*job_ids, JobState.SUBMITTING]) if r[0] is not None]


def fail_unsent(conn: Connection, job_id: int, now: float) -> None:
    """Fail the job at ``now`` if it is still ``submitting`` (no cluster has it)."""
    conn.execute("UPDATE jobs SET state = ?, finished_at = ? WHERE id = ? AND state = ?",
                 [JobState.FAILED, now, job_id, JobState.SUBMITTING])


# --- following: the updator and colombo ---------------------------------------------------

def to_poll(conn: Connection) -> list[tuple[int, int, str, str, int | None]]:
    """``(id, cluster, remote id, state, task)`` of the jobs a cluster holds, waiting or running:
    what the updator asks the clusters about."""
    return conn.execute(
        "SELECT id, cluster_id, remote_id, state, task_id FROM jobs WHERE state IN (?, ?) AND remote_id IS NOT NULL",
        [JobState.WAITING, JobState.RUNNING]).fetchall()


def move(conn: Connection, job_id: int, old_state: str, new_state: JobState, *, exit_code: int | None,
         node: str | None, started_at: float | None, finished_at: float | None) -> int:
    """Move the job from ``old_state`` (if it is still there) to ``new_state`` as its cluster
    tells it; its node and start are kept once known, and its end only counts once it ended.
    Return how many jobs moved (0 or 1)."""
    return conn.execute(
        "UPDATE jobs SET state = ?, exit_code = ?, node = coalesce(?, node), "
        "started_at = coalesce(started_at, ?), finished_at = ? WHERE id = ? AND state = ?",
        [new_state, exit_code, node, started_at,
         finished_at if new_state not in (JobState.WAITING, JobState.RUNNING) else None,
         job_id, old_state]).rowcount


def run_on(conn: Connection) -> None:
    """Spare the jobs a pause was to withdraw that started meanwhile, with their temporal group
    or gang (one remote job, started with the first): they run on, as the campaign's running jobs do."""
    conn.execute(f"""
UPDATE jobs SET kill_reason = NULL WHERE kill_reason = '{KillReason.PAUSE.value}' AND state IN {sql_in(JOB_ACTIVE)}
AND (state = '{JobState.RUNNING.value}'
     OR (SELECT f.state FROM jobs f WHERE f.id = jobs.run_group) NOT IN {sql_in((JobState.SUBMITTING, JobState.WAITING))})
""")


def any_active(conn: Connection, campaign_id: int) -> bool:
    """Whether some job of the campaign is still active (submitting, waiting or running)."""
    return conn.execute(f"SELECT 1 FROM jobs WHERE campaign_id = ? AND state IN {sql_in(JOB_ACTIVE)} LIMIT 1",
                        [campaign_id]).fetchone() is not None


def stuck_launching(conn: Connection, before: float) -> list[tuple[int, int, int, int | None]]:
    """``(id, campaign, cluster, task)`` of the jobs created before ``before`` and still
    ``submitting``: no cluster accepted them yet."""
    return conn.execute("SELECT id, campaign_id, cluster_id, task_id FROM jobs WHERE state = ? AND created_at < ?",
                        [JobState.SUBMITTING, before]).fetchall()


# --- killing: the requests (kill reasons), and nikita who carries them out ----------------

def to_kill(conn: Connection) -> list[tuple[int, int, str, str | None, int | None, str]]:
    """``(id, cluster, user, remote id, task, kill reason)`` of the active jobs with a pending
    kill request: what nikita cancels."""
    return conn.execute(
        'SELECT j.id, j.cluster_id, c."user", j.remote_id, j.task_id, j.kill_reason FROM jobs j '
        f"JOIN campaigns c ON c.id = j.campaign_id WHERE j.kill_reason IS NOT NULL AND j.state IN {sql_in(JOB_ACTIVE)}"
    ).fetchall()


def end_active(conn: Connection, job_id: int, end: JobState, now: float) -> int:
    """End the job at ``now`` in ``end`` if it is still active; return how many ended (0 or 1)."""
    return conn.execute(f"UPDATE jobs SET state = ?, finished_at = ? WHERE id = ? AND state IN {sql_in(JOB_ACTIVE)}",
                        [end, now, job_id]).rowcount


def mark_cancelled(conn: Connection, job_id: int) -> None:
    """Ask nikita to kill the job for its user: its task is cancelled, not resubmitted."""
    conn.execute("UPDATE jobs SET kill_reason = ? WHERE id = ?", [KillReason.USER, job_id])


def mark_campaign_cancelled(conn: Connection, campaign_id: int) -> None:
    """Ask nikita to kill every active job of the cancelled campaign."""
    conn.execute(f"UPDATE jobs SET kill_reason = ? WHERE campaign_id = ? AND state IN {sql_in(JOB_ACTIVE)}",
                 [KillReason.USER, campaign_id])


def withdraw_unstarted(conn: Connection, campaign_id: int) -> None:
    """Ask nikita to withdraw the paused campaign's task jobs that have not started, not asked to
    die yet: alone, or in a temporal group or gang whose remote job has not started either."""
    not_started = (JobState.SUBMITTING, JobState.WAITING)
    conn.execute("UPDATE jobs SET kill_reason = ? WHERE campaign_id = ? AND state IN (?, ?) AND kind = 'task' "
                 "AND kill_reason IS NULL AND (run_group IS NULL "  # a group starts with its first job
                 "OR (SELECT f.state FROM jobs f WHERE f.id = jobs.run_group) IN (?, ?))",
                 [KillReason.PAUSE, campaign_id, *not_started, *not_started])


def call_off_withdrawals(conn: Connection, campaign_id: int) -> None:
    """The resumed campaign's jobs that a pause asked nikita to withdraw and are still active stay."""
    conn.execute(f"UPDATE jobs SET kill_reason = NULL WHERE campaign_id = ? AND state IN {sql_in(JOB_ACTIVE)} "
                 "AND kill_reason = ?", [campaign_id, KillReason.PAUSE])


def mark_preempted(conn: Connection, job_ids: Iterable[int]) -> None:
    """Mark these jobs, if still active and not marked yet, for a kill that puts their tasks back
    at the head of the bag."""
    conn.executemany(f"UPDATE jobs SET kill_reason = ? WHERE id = ? AND kill_reason IS NULL "
                     f"AND state IN {sql_in(JOB_ACTIVE)}", [(KillReason.PREEMPT, j) for j in job_ids])


def youngest(conn: Connection, campaign_id: int, cluster_id: int, count: int) -> list[int]:
    """The ids of the campaign's ``count`` youngest active task jobs on the cluster not asked to
    die, queued ones first: those a preemption takes."""
    return [r[0] for r in conn.execute(
        f"SELECT id FROM jobs WHERE campaign_id = ? AND cluster_id = ? AND kind = 'task' "
        f"AND state IN {sql_in(JOB_ACTIVE)} AND kill_reason IS NULL "
        f"ORDER BY state = ?, coalesce(started_at, created_at) DESC, id DESC LIMIT ?",
        [campaign_id, cluster_id, JobState.RUNNING, count])]


def mark_flooding(conn: Connection, job_ids: Iterable[int]) -> None:
    """Mark these jobs, if still waiting and not marked yet, for a kill: they flood their cluster."""
    conn.executemany("UPDATE jobs SET kill_reason = ? WHERE id = ? AND state = ? AND kill_reason IS NULL",
                     [(KillReason.FLOOD, job_id, JobState.WAITING) for job_id in job_ids])


def waiting_alone(conn: Connection, cluster_id: int) -> list[tuple[int, int, float | None]]:
    """``(id, campaign, submitted at)`` of the task jobs waiting on the cluster, not asked to die
    and in no temporal group: those a flood may kill."""
    return conn.execute(
        "SELECT id, campaign_id, submitted_at FROM jobs WHERE state = ? AND cluster_id = ? AND kind = 'task' "
        "AND kill_reason IS NULL AND run_group IS NULL", [JobState.WAITING, cluster_id]).fetchall()


def mark_losers(conn: Connection) -> int:
    """Mark for a kill every still active copy of a task already terminated (a replica won);
    return how many."""
    return conn.execute(
        f"UPDATE jobs SET kill_reason = ? WHERE state IN {sql_in(JOB_ACTIVE)} AND kind = 'task' "
        "AND kill_reason IS NULL AND EXISTS (SELECT 1 FROM tasks t WHERE t.id = jobs.task_id AND t.state = ?)",
        [KillReason.REPLICA, TaskState.TERMINATED]).rowcount


def gangs_marked(conn: Connection) -> list[tuple[int, int, str]]:
    """``(campaign, run group, kill reason)`` of the active task jobs in a group one of whose
    members is marked for a kill."""
    return conn.execute(
        f"SELECT DISTINCT campaign_id, run_group, kill_reason FROM jobs WHERE state IN {sql_in(JOB_ACTIVE)} "
        "AND kill_reason IS NOT NULL AND run_group IS NOT NULL AND kind = 'task'").fetchall()


def mark_group(conn: Connection, campaign_id: int, run_group: int, reason: KillReason | str) -> int:
    """Mark the campaign's active jobs of ``run_group`` not marked yet for a kill for ``reason``;
    return how many."""
    return conn.execute(
        f"UPDATE jobs SET kill_reason = ? WHERE campaign_id = ? AND state IN {sql_in(JOB_ACTIVE)} "
        "AND run_group = ? AND kill_reason IS NULL", [reason, campaign_id, run_group]).rowcount


# --- counting: the schedulers, the predictor, the submit limits ---------------------------

def active_per_cluster(conn: Connection) -> dict[int, int]:
    """cigri's jobs on each cluster, sent or about to be: what a submit limit counts."""
    return dict(conn.execute(
        f"SELECT cluster_id, count(*) FROM jobs WHERE state IN {sql_in(JOB_ACTIVE)} GROUP BY cluster_id").fetchall())


def waiting_and_running_per_cluster(conn: Connection) -> dict[int, tuple[int, int]]:
    """``{cluster: (waiting, running)}`` of the active jobs, submitting ones counted as waiting:
    the per-cluster counts of the time series."""
    return {cluster_id: (waiting, running) for cluster_id, waiting, running in conn.execute(
        "SELECT cluster_id, count(*) FILTER (WHERE state != 'running'), count(*) FILTER (WHERE state = 'running') "
        f"FROM jobs WHERE state IN {sql_in(JOB_ACTIVE)} GROUP BY cluster_id")}


def queued_per_cluster(conn: Connection) -> dict[int, int]:
    """cigri's jobs queued on each cluster or being sent there."""
    return dict(conn.execute("SELECT cluster_id, count(*) FROM jobs WHERE state IN (?, ?) GROUP BY cluster_id",
                             [JobState.SUBMITTING, JobState.WAITING]).fetchall())


def waiting_per_cluster(conn: Connection) -> dict[int, int]:
    """cigri's jobs waiting in each cluster's queue."""
    return dict(conn.execute("SELECT cluster_id, count(*) FROM jobs WHERE state = ? GROUP BY cluster_id",
                             [JobState.WAITING]).fetchall())


def queued_tasks(conn: Connection) -> dict[tuple[int, int], int]:
    """``{(campaign, cluster): task jobs}`` queued there or being sent."""
    return {(campaign_id, cluster_id): n for campaign_id, cluster_id, n in conn.execute(
        "SELECT campaign_id, cluster_id, count(*) FROM jobs WHERE state IN (?, ?) AND kind = 'task' "
        "GROUP BY campaign_id, cluster_id", [JobState.SUBMITTING, JobState.WAITING])}


def held_tasks_per_pair(conn: Connection) -> list[tuple[Any, ...]]:
    """``(campaign, cluster, running, count)`` of the active task jobs not asked to die, counted
    apart by whether they run (``running`` 1) or not yet (0)."""
    return conn.execute(
        "SELECT campaign_id, cluster_id, CASE WHEN state = ? THEN 1 ELSE 0 END, count(*) FROM jobs "
        f"WHERE state IN {sql_in(JOB_ACTIVE)} AND kind = 'task' AND kill_reason IS NULL GROUP BY 1, 2, 3",
        [JobState.RUNNING]).fetchall()


def held_tasks_per_campaign(conn: Connection) -> list[tuple[int, int, int]]:
    """``(campaign, running, count)`` of the active task jobs not asked to die, counted apart by
    whether they run (``running`` 1) or not yet (0)."""
    return conn.execute(
        "SELECT campaign_id, CASE WHEN state = ? THEN 1 ELSE 0 END, count(*) FROM jobs "
        f"WHERE state IN {sql_in(JOB_ACTIVE)} AND kind = 'task' AND kill_reason IS NULL GROUP BY 1, 2",
        [JobState.RUNNING]).fetchall()


def active_tasks_per_cluster(conn: Connection, campaign_id: int) -> dict[int, int]:
    """The campaign's active task jobs on each cluster."""
    return dict(conn.execute(
        f"SELECT cluster_id, count(*) FROM jobs {dialect.indexed_by(conn, 'jobs_by_campaign')} WHERE campaign_id = ? "
        f"AND state IN {sql_in(JOB_ACTIVE)} AND kind = 'task' GROUP BY cluster_id", [campaign_id]).fetchall())


def running_tasks_with_ages(conn: Connection, campaign_ids: list[int], now: float,
                            since: float) -> list[tuple[int, int, int, float | None, int]]:
    """``(campaign, cluster, running task jobs, sum of their ages at now, how many of them
    started after since)`` of these campaigns."""
    marks = ",".join("?" * len(campaign_ids))
    return conn.execute(
        # an age is never negative: a start after now (a clock set back) counts as 0
        f"SELECT campaign_id, cluster_id, count(*), sum(CASE WHEN started_at < ? THEN ? - started_at "
        f"WHEN started_at IS NOT NULL THEN 0 END), count(*) FILTER (WHERE started_at > ?) FROM jobs "
        f"WHERE state = ? AND kind = 'task' AND campaign_id IN ({marks}) GROUP BY campaign_id, cluster_id",
        [now, now, since, JobState.RUNNING, *campaign_ids]).fetchall()


def terminated_tasks_since(conn: Connection, campaign_ids: list[int],
                           since: float) -> list[tuple[int, int, int]]:
    """``(campaign, cluster, count)`` of these campaigns' task jobs that started and terminated
    after ``since``, through the index of terminated jobs."""
    marks = ",".join("?" * len(campaign_ids))
    return conn.execute(
        f"SELECT campaign_id, cluster_id, count(*) FROM jobs {dialect.indexed_by(conn, 'jobs_terminated')} "
        f"WHERE state = 'terminated' AND kind = 'task' AND campaign_id IN ({marks}) AND finished_at > ? "
        f"AND started_at > ? GROUP BY campaign_id, cluster_id", [*campaign_ids, since, since]).fetchall()


def stragglers(conn: Connection, campaign_id: int, started_before: float) -> list[tuple[int, int]]:
    """``(task, cluster)`` of the campaign's tasks running with a single active copy, not marked
    for a kill, started before ``started_before``, none of whose copies failed or hit its
    walltime; longest running first."""
    return conn.execute(
        f"SELECT task_id, min(cluster_id) FROM jobs WHERE campaign_id = ? AND kind = 'task' "
        f"AND state IN {sql_in(JOB_ACTIVE)} AND kill_reason IS NULL GROUP BY task_id "
        "HAVING count(*) = 1 AND max(state) = ? AND min(started_at) < ? "
        "AND NOT EXISTS (SELECT 1 FROM jobs b WHERE b.task_id = jobs.task_id AND b.state IN (?, ?)) "
        "ORDER BY min(started_at), task_id",
        [campaign_id, JobState.RUNNING, started_before, JobState.FAILED, JobState.TIMEOUT]).fetchall()


# --- the API: what it shows, and purging a campaign's -------------------------------------

def by_id(conn: Connection, job_id: int) -> dict[str, Any] | None:
    """The job's row with its ``cluster``'s and ``task``'s names, the task's ``param`` and its
    campaign's ``user``; None if there is no such job."""
    rows = dicts(conn.execute(f"{_SHOWN} WHERE j.id = ?", [job_id]))
    return rows[0] if rows else None


def of_campaign(conn: Connection, campaign_id: int, *, active_only: bool, limit: int | None,
                offset: int) -> list[dict[str, Any]]:
    """The campaign's jobs as :func:`by_id` gives them, in id order (``active_only``: those not
    ended), ``limit`` of them after ``offset``."""
    active = f" AND j.state IN ({','.join('?' * len(JOB_ACTIVE))})" if active_only else ""
    return dicts(conn.execute(f"{_SHOWN} WHERE j.campaign_id = ?{active} ORDER BY j.id LIMIT ? OFFSET ?",
                              [campaign_id, *(JOB_ACTIVE if active_only else ()),
                               dialect.NO_LIMIT if limit is None else limit, offset]))


def of_tasks(conn: Connection, task_ids: list[int]) -> list[dict[str, Any]]:
    """The jobs of these tasks in id order: ``id``, ``task_id``, ``cluster`` (its name),
    ``state``, ``remote_id``, ``exit_code``, ``node``, ``started_at``, ``finished_at``."""
    return dicts(conn.execute(
        "SELECT j.id, j.task_id, c.name AS cluster, j.state, j.remote_id, j.exit_code, j.node, "
        "j.started_at, j.finished_at FROM jobs j JOIN clusters c ON c.id = j.cluster_id "
        f"WHERE j.task_id IN {dialect.ids_in(conn)} ORDER BY j.id", [json.dumps(task_ids)]))


def owner_and_state(conn: Connection, job_id: int) -> tuple[int, str, str] | None:
    """``(campaign, state, campaign's user)`` of the job; None if there is no such job."""
    row = conn.execute('SELECT j.campaign_id, j.state, p."user" FROM jobs j JOIN campaigns p ON p.id = j.campaign_id '
                       "WHERE j.id = ?", [job_id]).fetchone()
    return None if row is None else (row[0], row[1], row[2])


def placement(conn: Connection, job_id: int) -> tuple[int, int, int | None] | None:
    """``(campaign, cluster, task)`` of the job; None if there is no such job."""
    row = conn.execute("SELECT campaign_id, cluster_id, task_id FROM jobs WHERE id = ?", [job_id]).fetchone()
    return None if row is None else (row[0], row[1], row[2])


def replicas(conn: Connection, campaign_id: int) -> int:
    """How many extra copies of the campaign's tasks are active (the finalize scheduler's)."""
    count = conn.execute(f"SELECT count(*) - count(DISTINCT task_id) FROM jobs WHERE campaign_id = ? "
                         f"AND kind = 'task' AND state IN {sql_in(JOB_ACTIVE)}", [campaign_id]).fetchone()[0]
    assert isinstance(count, int)
    return count


def active_tasks_by_state(conn: Connection, campaign_id: int) -> list[tuple[int, str, int]]:
    """``(cluster, state, count)`` of the campaign's active task jobs."""
    return conn.execute(
        f"SELECT cluster_id, state, count(*) FROM jobs WHERE campaign_id = ? AND state IN {sql_in(JOB_ACTIVE)} "
        f"AND kind = 'task' GROUP BY cluster_id, state", [campaign_id]).fetchall()


def scripts_done(conn: Connection, campaign_id: int) -> set[tuple[int, str]]:
    """``(cluster, kind)`` of the campaign's prologues and epilogues that terminated."""
    return {(cluster_id, kind) for cluster_id, kind in conn.execute(
        "SELECT DISTINCT cluster_id, kind FROM jobs WHERE campaign_id = ? AND kind != 'task' AND state = 'terminated'",
        [campaign_id])}


def use_per_cluster(conn: Connection) -> dict[int, tuple[int, int, int]]:
    """``{cluster: (running, not running, waiting)}`` of cigri's active jobs there (not running:
    waiting or being sent)."""
    return {cluster_id: (running, queued, waiting) for cluster_id, running, queued, waiting in conn.execute(
        "SELECT cluster_id, count(*) FILTER (WHERE state = ?), count(*) FILTER (WHERE state != ?), "
        f"count(*) FILTER (WHERE state = ?) FROM jobs WHERE state IN {sql_in(JOB_ACTIVE)} GROUP BY cluster_id",
        [JobState.RUNNING, JobState.RUNNING, JobState.WAITING])}


def count_active_of(conn: Connection, cluster: str, user: str) -> int:
    """How many of ``user``'s jobs are active on the cluster named ``cluster``."""
    count = conn.execute(
        f"SELECT count(*) FROM jobs j JOIN campaigns c ON c.id = j.campaign_id JOIN clusters k ON k.id = j.cluster_id "
        f'WHERE k.name = ? AND c."user" = ? AND j.state IN {sql_in(JOB_ACTIVE)}', [cluster, user]).fetchone()[0]
    assert isinstance(count, int)
    return count


def terminated_buckets(conn: Connection, campaign_id: int, start: float, end: float, step: float,
                       points: int) -> list[tuple[int, int]]:
    """``(bucket, count)`` of the campaign's task jobs terminated from ``start`` to ``end``, in
    ``points`` buckets of ``step`` seconds, through the index of terminated jobs."""
    bucket = dialect.least(conn, dialect.truncated(conn, "(finished_at - ?) / ?"), "?")
    return conn.execute(
        f"SELECT {bucket}, count(*) FROM jobs {dialect.indexed_by(conn, 'jobs_terminated')} "
        "WHERE campaign_id = ? AND state = 'terminated' AND kind = 'task' AND finished_at >= ? "
        "AND finished_at <= ? GROUP BY 1", [start, step, points - 1, campaign_id, start, end]).fetchall()


def terminated_per_bucket(conn: Connection, campaign_id: int, since: float, until: float,
                          step: float) -> list[tuple[int, int, int]]:
    """``(cluster, bucket, count)`` of the campaign's task jobs terminated from ``since`` to
    before ``until``, in buckets of ``step`` seconds, through the index of terminated jobs."""
    return conn.execute(f"""
SELECT cluster_id, {dialect.truncated(conn, "(finished_at - :since) / :step")} AS bucket, count(*) AS terminated
FROM jobs {dialect.indexed_by(conn, "jobs_terminated")}
WHERE campaign_id = :campaign AND state = 'terminated' AND kind = 'task' AND finished_at >= :since
      AND finished_at < :until
GROUP BY cluster_id, bucket
""", {"campaign": campaign_id, "since": since, "until": until, "step": step}).fetchall()


def terminated_before(conn: Connection, campaign_id: int, before: float) -> int:
    """How many of the campaign's task jobs terminated before ``before``."""
    count = conn.execute(f"SELECT count(*) FROM jobs {dialect.indexed_by(conn, 'jobs_terminated')} "
                         "WHERE campaign_id = ? AND state = 'terminated' AND kind = 'task' AND finished_at < ?",
                         [campaign_id, before]).fetchone()[0]
    assert isinstance(count, int)
    return count


def ran_between(conn: Connection, since: float, until: float, *, everyone: bool,
                user: str) -> list[tuple[int, int, str, str, float, float]]:
    """``(campaign, cluster, cluster's name, campaign's user, started at, finished at or until)``
    of the jobs that ran some time between ``since`` and ``until``: ``user``'s, or everyone's."""
    return conn.execute(
        'SELECT j.campaign_id, j.cluster_id, k.name, c."user", j.started_at, coalesce(j.finished_at, ?) '
        "FROM jobs j JOIN campaigns c ON c.id = j.campaign_id JOIN clusters k ON k.id = j.cluster_id "
        "WHERE j.started_at IS NOT NULL AND j.started_at < ? AND coalesce(j.finished_at, ?) > ? "
        'AND (? OR c."user" = ?)', [until, until, until, since, everyone, user]).fetchall()


def delete_campaign_jobs(conn: Connection, campaign_id: int) -> None:
    """Delete every job of the campaign (purging it; the events that name them are gone first)."""
    conn.execute("DELETE FROM jobs WHERE campaign_id = ?", [campaign_id])


# --- the simulator's report (on its own grid's database) ----------------------------------

def any_queued(conn: Connection) -> bool:
    """Whether some job waits in a cluster's queue or is being sent there."""
    return conn.execute(f"SELECT 1 FROM jobs WHERE state IN {sql_in((JobState.SUBMITTING, JobState.WAITING))} "
                        "LIMIT 1").fetchone() is not None


def running_tasks_per_pair(conn: Connection) -> list[tuple[int, int, int]]:
    """``(campaign, cluster, count)`` of the task jobs running."""
    return conn.execute("SELECT campaign_id, cluster_id, count(*) FROM jobs "
                        "WHERE state = 'running' AND kind = 'task' GROUP BY 1, 2").fetchall()


def terminated_seconds(conn: Connection) -> list[tuple[int, float]]:
    """``(campaign, seconds)`` run by the campaign's terminated task jobs."""
    return conn.execute(
        "SELECT campaign_id, sum(finished_at - started_at) FROM jobs WHERE state = 'terminated' AND kind = 'task' "
        "GROUP BY campaign_id").fetchall()


def failed_seconds(conn: Connection) -> list[tuple[int, float]]:
    """``(campaign, seconds)`` run by the campaign's failed task jobs that started."""
    return conn.execute(
        "SELECT campaign_id, sum(finished_at - started_at) FROM jobs WHERE state = 'failed' AND kind = 'task' "
        "AND started_at IS NOT NULL GROUP BY campaign_id").fetchall()


def task_jobs_by_state(conn: Connection) -> dict[str, int]:
    """How many task jobs are in each state."""
    return dict(conn.execute("SELECT state, count(*) FROM jobs WHERE kind = 'task' GROUP BY state").fetchall())


def kills_by_reason(conn: Connection) -> dict[str, int]:
    """How many jobs were asked to die for each reason."""
    return dict(conn.execute("SELECT kill_reason, count(*) FROM jobs WHERE kill_reason IS NOT NULL "
                             "GROUP BY kill_reason").fetchall())


def tasks_with_jobs(conn: Connection) -> int:
    """How many tasks had a job."""
    count = conn.execute("SELECT count(DISTINCT task_id) FROM jobs WHERE kind = 'task'").fetchone()[0]
    assert isinstance(count, int)
    return count


def longest_wait(conn: Connection) -> float | None:
    """The longest a sent task job waited in its queue, until it started or ended; None before any was sent."""
    wait: float | None = conn.execute("SELECT max(coalesce(started_at, finished_at) - submitted_at) FROM jobs "
                                      "WHERE kind = 'task' AND submitted_at IS NOT NULL").fetchone()[0]
    return wait


def task_runs(conn: Connection, now: float) -> list[tuple[int, float, float]]:
    """``(campaign, started at, finished at or now)`` of every task job that started."""
    return conn.execute("SELECT campaign_id, started_at, coalesce(finished_at, ?) FROM jobs WHERE kind = 'task' "
                        "AND started_at IS NOT NULL", [now]).fetchall()


def killed_seconds(conn: Connection) -> list[tuple[str, int, float]]:
    """``(killer, campaign, seconds)`` run by task jobs killed before their end: by the reason
    cigri asked them to die for, else ``walltime`` or ``cluster_preemptions``."""
    return conn.execute(
        "SELECT coalesce(kill_reason, CASE state WHEN 'timeout' THEN 'walltime' ELSE 'cluster_preemptions' END), "
        "campaign_id, sum(finished_at - started_at) FROM jobs WHERE kind = 'task' AND started_at IS NOT NULL "
        "AND finished_at IS NOT NULL AND (kill_reason IS NOT NULL OR state IN ('preempted', 'timeout')) "
        "GROUP BY 1, 2").fetchall()


def gang_starts(conn: Connection) -> list[tuple[Any, ...]]:
    """``(members that started, members, first start, last start)`` of every gang."""
    return conn.execute(
        "SELECT count(j.started_at), count(*), min(j.started_at), max(j.started_at) FROM jobs j "
        "JOIN campaigns c ON c.id = j.campaign_id WHERE j.kind = 'task' AND j.run_group IS NOT NULL "
        f"AND coalesce({dialect.json_integer(conn, 'c.jdl', 'gang')}, 1) > 1 GROUP BY j.run_group").fetchall()


def last_first_start(conn: Connection) -> float | None:
    """When the last task to start first started; None before any did."""
    last: float | None = conn.execute(
        "SELECT max(first_start) FROM (SELECT min(started_at) AS first_start FROM jobs "
        "WHERE kind = 'task' AND started_at IS NOT NULL GROUP BY task_id) AS firsts").fetchone()[0]
    return last
