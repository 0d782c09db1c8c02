"""The SQL of tasks, the blocks of fresh ones (``task_blocks``) and their counts per state
(``task_counts``).

:mod:`cigri.bag` decides in which order tasks leave the bag and how they are counted; the use
cases decide when a task moves on. This module only stores and finds. Every function takes the
connection the caller holds: inside a :func:`~cigri.db.store.write` transaction for a change,
so a task moves with the job that moves it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from cigri.db import dialect
from cigri.db.rows import Connection, dicts
from cigri.states import CAMPAIGN_ACTIVE, JOB_ACTIVE, TASK_OPEN, TaskState, sql_in

FRESH_PRIORITY = 10  # the tasks table's default: a task never taken from the bag
PRIORITY_HEAD, PRIORITY_TAIL = 20, 0  # a requeued task goes before, or after, the fresh ones


def indexed(table: str = "") -> str:
    """The partial index ``tasks_bag``'s WHERE, verbatim (SQLite uses the index only when a
    query states it), its columns qualified by ``table`` in a join."""
    prefix = f"{table}." if table else ""
    return f"({prefix}state <> 'pending' OR {prefix}priority <> {FRESH_PRIORITY})"


INDEXED = indexed()


def add_block(conn: Connection, campaign_id: int, first_id: int, last_id: int) -> None:
    """Record tasks ``first_id..last_id``, just inserted for this campaign, as fresh."""
    conn.execute("INSERT INTO task_blocks(campaign_id, first_id, last_id, next_fresh) VALUES (?, ?, ?, ?)",
                 [campaign_id, first_id, last_id, first_id])


def span(conn: Connection, campaign_id: int) -> tuple[int, int]:
    """The lowest and highest task id of the campaign: bounds for a rowid range scan."""
    low, high = conn.execute("SELECT min(first_id), max(last_id) FROM task_blocks WHERE campaign_id = ?",
                             [campaign_id]).fetchone()
    return (low, high) if low is not None else (0, -1)


def fresh_blocks(conn: Connection, campaign_id: int) -> list[tuple[int, int, int]]:
    """``(first_id, last_id, next_fresh)`` of the campaign's blocks with fresh tasks left, in id order."""
    return [(r[0], r[1], r[2]) for r in conn.execute(
        "SELECT first_id, last_id, next_fresh FROM task_blocks "
        "WHERE campaign_id = ? AND next_fresh <= last_id ORDER BY first_id", [campaign_id])]


def take_fresh(conn: Connection, campaign_id: int, first_id: int, next_fresh: int) -> None:
    """The block's fresh tasks now start at ``next_fresh``: those before it were taken."""
    conn.execute("UPDATE task_blocks SET next_fresh = ? WHERE campaign_id = ? AND first_id = ?",
                 [next_fresh, campaign_id, first_id])


def requeued(conn: Connection, campaign_id: int, *, head: bool, limit: int) -> list[int]:
    """The ids of up to ``limit`` pending tasks requeued at the head of the bag (``head``) or at
    its tail, in bag order; from the index, never from the fresh tails."""
    if limit <= 0:
        return []
    return [r[0] for r in conn.execute(
        f"SELECT id FROM tasks WHERE campaign_id = ? AND state = ? AND priority {'>' if head else '<'} "
        f"{FRESH_PRIORITY} AND {INDEXED} ORDER BY priority DESC, id LIMIT ?",
        [campaign_id, TaskState.PENDING, limit])]


def fresh(conn: Connection, campaign_id: int) -> int:
    """The campaign's fresh tasks (pending, never taken)."""
    return int(conn.execute("SELECT coalesce(sum(last_id - next_fresh + 1), 0) FROM task_blocks "
                            "WHERE campaign_id = ? AND next_fresh <= last_id", [campaign_id]).fetchone()[0])


def counted(conn: Connection, campaign_id: int, states: tuple[TaskState, ...]) -> int:
    """The campaign's tasks in ``states`` that ``task_counts`` counts (every one but the fresh)."""
    return int(conn.execute(f"SELECT coalesce(sum(n), 0) FROM task_counts WHERE campaign_id = ? "
                            f"AND state IN {sql_in(states)}", [campaign_id]).fetchone()[0])


def counted_per_state(conn: Connection, campaign_id: int) -> dict[str, int]:
    """The campaign's tasks per state that ``task_counts`` counts (states with none are absent)."""
    return dict(conn.execute("SELECT state, n FROM task_counts WHERE campaign_id = ? AND n > 0",
                             [campaign_id]).fetchall())


def failing(conn: Connection, campaign_ids: list[int]) -> set[int]:
    """Those of the campaigns whose tasks have failed, some, and none has succeeded yet."""
    return {row[0] for row in conn.execute(
        f"SELECT campaign_id FROM task_counts WHERE campaign_id IN {dialect.ids_in(conn)} "
        "GROUP BY campaign_id HAVING sum(n) FILTER (WHERE state = ?) > 0 "
        "AND coalesce(sum(n) FILTER (WHERE state = ?), 0) = 0",
        [json.dumps(campaign_ids), TaskState.FAILED, TaskState.TERMINATED])}


def requeue_never_run(conn: Connection, campaign_id: int) -> int:
    """Put the campaign's failed tasks that never had a job (failed by a prologue failing on
    every cluster) back at the head of the bag, with fresh counters; return how many."""
    return conn.execute(f"UPDATE tasks SET state = ?, priority = {PRIORITY_HEAD}, resubmits = 0, walltime_kills = 0 "
                        f"WHERE campaign_id = ? AND state = ? AND {INDEXED} "
                        "AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.task_id = tasks.id)",
                        [TaskState.PENDING, campaign_id, TaskState.FAILED]).rowcount


def withdrawn(conn: Connection, task_ids: Iterable[int]) -> None:
    """Put back at the head of the bag the tasks whose jobs were withdrawn before they started
    (a cluster's submit limit or refusal, a pause), their attempt not counted. A task another
    copy still runs (a replica's) stays as it is; call it once the withdrawn jobs have ended or
    are gone."""
    conn.executemany(
        f"UPDATE tasks SET state = ?, priority = {PRIORITY_HEAD}, attempts = attempts - 1 WHERE id = ? "
        "AND state IN (?, ?) "
        f"AND NOT EXISTS (SELECT 1 FROM jobs WHERE task_id = tasks.id AND state IN {sql_in(JOB_ACTIVE)})",
        [(TaskState.PENDING, task_id, TaskState.WAITING, TaskState.RUNNING) for task_id in task_ids])


def end_indexed(conn: Connection, campaign_id: int, states: tuple[TaskState, ...], end: TaskState) -> int:
    """Move the campaign's tasks in ``states`` but the fresh ones to ``end``; return how many."""
    return conn.execute(f"UPDATE tasks SET state = ? WHERE campaign_id = ? AND state IN {sql_in(states)} "
                        f"AND {INDEXED}", [end, campaign_id]).rowcount


def end_fresh(conn: Connection, campaign_id: int, end: TaskState) -> int:
    """Move the campaign's fresh tasks to ``end``, emptying its fresh tails; return how many."""
    ended = 0
    for first_id, last_id, next_fresh in conn.execute(
            "SELECT first_id, last_id, next_fresh FROM task_blocks WHERE campaign_id = ? AND next_fresh <= last_id",
            [campaign_id]).fetchall():
        ended += conn.execute("UPDATE tasks SET state = ? WHERE id BETWEEN ? AND ?",
                              [end, next_fresh, last_id]).rowcount
        take_fresh(conn, campaign_id, first_id, last_id + 1)
    return ended


def insert_block(conn: Connection, campaign_id: int, select: str, args: list[Any]) -> int:
    """Insert the campaign's tasks ``select`` yields (name, param; ``{campaign}`` in it stands
    for the campaign's id), in one statement; return the highest task id."""
    conn.execute(f"INSERT INTO tasks(campaign_id, name, param) {select.format(campaign=int(campaign_id))}", args)
    return int(conn.execute("SELECT max(id) FROM tasks").fetchone()[0])


def page(conn: Connection, campaign_id: int, low: int, high: int, chosen: str, args: list[Any], limit: int,
         offset: int) -> list[dict[str, Any]]:
    """A page of the campaign's tasks between ids ``low`` and ``high`` in id order, ``chosen``
    (a fixed SQL condition on ``tasks``, with ``args``) narrowing them."""
    return dicts(conn.execute(
        f"SELECT id, name, param, state, attempts FROM tasks WHERE id BETWEEN ? AND ? AND campaign_id = ? {chosen}"
        "ORDER BY id LIMIT ? OFFSET ?", [low, high, campaign_id, *args, limit, offset]))


def take_up(conn: Connection, task_ids: list[int]) -> None:
    """The pending tasks just taken from the bag wait for their new jobs, one attempt more each."""
    conn.executemany(
        "UPDATE tasks SET state = ?, attempts = attempts + 1 WHERE id = ? AND state = ?",
        [(TaskState.WAITING, t, TaskState.PENDING) for t in task_ids])


def set_state(conn: Connection, task_id: int, state: TaskState | str) -> None:
    """The task, if waiting or running, is now in ``state`` (its job started or ended)."""
    conn.execute("UPDATE tasks SET state = ? WHERE id = ? AND state IN (?, ?)",
                 [state, task_id, TaskState.WAITING, TaskState.RUNNING])


def terminate(conn: Connection, task_id: int) -> None:
    """The task, if still open, terminated: a job of it did."""
    conn.execute(f"UPDATE tasks SET state = ? WHERE id = ? AND state IN {sql_in(TASK_OPEN)}",
                 [TaskState.TERMINATED, task_id])


def cancel(conn: Connection, task_id: int) -> None:
    """The task, if pending, waiting or running, is cancelled: its user killed its job."""
    conn.execute("UPDATE tasks SET state = ? WHERE id = ? AND state IN (?, ?, ?)",
                 [TaskState.CANCELLED, task_id, TaskState.PENDING, TaskState.WAITING, TaskState.RUNNING])


def preempted(conn: Connection, task_id: int) -> None:
    """Put the waiting or running task back at the head of the bag: its job was killed, not its
    fault, so the attempt is not counted."""
    conn.execute("UPDATE tasks SET state = ?, priority = ?, attempts = attempts - 1, preemptions = preemptions + 1 "
                 "WHERE id = ? AND state IN (?, ?)",
                 [TaskState.PENDING, PRIORITY_HEAD, task_id, TaskState.WAITING, TaskState.RUNNING])


def fail_at_walltime(conn: Connection, task_id: int) -> None:
    """The waiting or running task failed, killed at its walltime once too often."""
    conn.execute("UPDATE tasks SET state = ?, walltime_kills = walltime_kills + 1 WHERE id = ? AND state IN (?, ?)",
                 [TaskState.FAILED, task_id, TaskState.WAITING, TaskState.RUNNING])


def resubmit(conn: Connection, task_id: int, priority: int, walltime: bool) -> None:
    """Put the waiting or running task back in the bag at ``priority``, one resubmission more
    (and one walltime kill more if ``walltime``)."""
    conn.execute("UPDATE tasks SET state = ?, priority = ?, resubmits = resubmits + 1, "
                 "walltime_kills = walltime_kills + ? WHERE id = ? AND state IN (?, ?)",
                 [TaskState.PENDING, priority, int(walltime), task_id, TaskState.WAITING, TaskState.RUNNING])


def undecided_endings(conn: Connection, campaign_id: int, undecided: tuple[str, ...]) -> list[dict[str, Any]]:
    """The jobs of the campaign's waiting or running tasks that ended in an ``undecided`` state:
    each task's latest job only, once no copy of it is active, with the task's name and counters."""
    return dicts(conn.execute(
        "SELECT j.id, j.task_id, j.cluster_id, j.remote_id, j.state, j.exit_code, j.kill_reason, "
        # from the campaign's tasks in flight (the bag's index), then their jobs: never from
        # the jobs by state, which would read every failed job the grid ever had
        f"t.name, t.resubmits, t.walltime_kills FROM tasks t {dialect.indexed_by(conn, 'tasks_bag')} "
        f"{dialect.ordered_join(conn)} jobs j ON j.task_id = t.id "
        f"WHERE t.campaign_id = ? AND t.state IN (?, ?) AND {indexed('t')} "
        f"AND j.state IN ({','.join('?' * len(undecided))}) "
        # Only the task's latest job: an earlier attempt's ending was decided when it ended,
        # and deciding it again would re-queue the task while its current attempt runs. And
        # only once no copy of the task is active: a replica (finalize scheduler) that ends
        # badly decides nothing while another copy runs, since that copy may still win.
        "AND j.id = (SELECT max(id) FROM jobs WHERE task_id = t.id) "
        f"AND NOT EXISTS (SELECT 1 FROM jobs a WHERE a.task_id = t.id AND a.state IN {sql_in(JOB_ACTIVE)})",
        [campaign_id, TaskState.WAITING, TaskState.RUNNING, *undecided]))


def failed_among(tasks: str, args: list[object]) -> tuple[str, list[object]]:
    """A condition on ``campaigns`` (what :func:`cigri.api.access.reopen` takes), with its
    arguments: the campaigns of the failed tasks among ``tasks`` (a subquery of task ids, with ``args``)."""
    return f"id IN (SELECT campaign_id FROM tasks WHERE state = ? AND id IN ({tasks}))", [TaskState.FAILED, *args]


def requeue_failed(conn: Connection, tasks: str, args: list[object]) -> int:
    """Put the failed tasks among ``tasks`` (a subquery of task ids, with ``args``) of campaigns
    under way back at the head of the bag, with fresh counters; return how many."""
    return conn.execute(
        f"UPDATE tasks SET state = ?, priority = {PRIORITY_HEAD}, resubmits = 0, walltime_kills = 0 WHERE state = ? "
        f"AND id IN ({tasks}) AND campaign_id IN (SELECT id FROM campaigns WHERE state IN (?, ?))",
        [TaskState.PENDING, TaskState.FAILED, *args, *CAMPAIGN_ACTIVE]).rowcount


def delete_campaign(conn: Connection, campaign_id: int) -> None:
    """Delete the campaign's tasks (a purge; its jobs are gone first)."""
    conn.execute("DELETE FROM tasks WHERE campaign_id = ?", [campaign_id])


def state_totals(conn: Connection) -> dict[str, int]:
    """How many tasks of every campaign are in each state: a simulation's outcome."""
    return dict(conn.execute("SELECT state, count(*) FROM tasks GROUP BY state").fetchall())


def failed_per_bucket(conn: Connection, campaign_id: int, since: float, until: float, step: float,
                      end: float) -> dict[int, int]:
    """``{bucket: tasks}``: the campaign's failed tasks by the bucket of ``step`` seconds from
    ``since`` their last job ended in (``end`` for those with none; -1: before ``since``)."""
    # The failed tasks are read through the bag's index, each at its last job's end, or at the
    # campaign's end (now, while it runs) for a task that failed without an ended job (a
    # prologue failed on every cluster).
    bucket = dialect.truncated(conn, "(at - :since) / :step")
    failed = f"""
WITH ends AS (SELECT coalesce((SELECT max(j.finished_at) FROM jobs j WHERE j.task_id = t.id), :end) AS at
              FROM tasks t {dialect.indexed_by(conn, "tasks_bag")}
              WHERE t.campaign_id = :campaign AND t.state = 'failed' AND {indexed('t')})
SELECT CASE WHEN at < :since THEN -1 ELSE {bucket} END AS bucket, count(*)
FROM ends WHERE at < :until GROUP BY bucket
"""
    return dict(conn.execute(failed, {"campaign": campaign_id, "since": since, "until": until, "step": step,
                                       "end": end}).fetchall())


def copy_block(conn: Any, campaign_id: int, first_id: int, rows: Iterable[tuple[str, str]]) -> int:
    """PostgreSQL: COPY the campaign's tasks (name, param), ids from ``first_id`` on in order, and
    move the ids' sequence past them; return the highest id (``first_id - 1`` if none)."""
    last_id = first_id - 1
    with conn.raw.cursor().copy("COPY tasks(id, campaign_id, name, param) FROM STDIN") as copy:
        for last_id, (name, param) in enumerate(rows, first_id):
            copy.write_row((last_id, campaign_id, name, param))
    if last_id >= first_id:
        conn.execute("SELECT setval(pg_get_serial_sequence('tasks', 'id'), ?)", [last_id])
    return last_id


def first_name_taken(conn: Connection, campaign_id: int, first: int, last: int, low: int) -> tuple[int, str] | None:
    """The first of the campaign's tasks ``first..last`` (just added) whose name one of its
    earlier tasks (ids ``low..first - 1``) has: (task id, name)."""
    row = conn.execute(
        "SELECT id, name FROM tasks WHERE id BETWEEN ? AND ? AND campaign_id = ? AND name IN "
        "(SELECT name FROM tasks WHERE id BETWEEN ? AND ? AND campaign_id = ?) ORDER BY id LIMIT 1",
        [first, last, campaign_id, low, first - 1, campaign_id]).fetchone()
    return None if row is None else (int(row[0]), str(row[1]))
