"""The bag of tasks: which of a campaign's tasks wait for a job, in which order, and how many.

A campaign's tasks are inserted as *blocks* of consecutive ids, one per submission or
extension. A block's tail from ``next_fresh`` on holds its *fresh* tasks: pending, never taken,
at :data:`FRESH_PRIORITY`. They are taken in id order by moving ``next_fresh``, so they need no
index entry, and ingesting a million tasks pays for no index at all (HyperQueue keeps task
arrays as id ranges for the same reason). Every other task (taken once, requeued at
:data:`PRIORITY_HEAD` or :data:`PRIORITY_TAIL`, ended) is in the partial index ``tasks_bag``,
and counted per state in ``task_counts`` by triggers, so counting costs the same at any size.

Two invariants make this exact: a task leaves the fresh tail only by being taken (or by a
campaign-wide end, which empties the tail), and nothing ever puts a task back in the bag at
:data:`FRESH_PRIORITY`. Every query on a campaign's tasks by state goes through this module.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from sqlite_utils import Database

from cigri.states import JOB_ACTIVE, TaskState, sql_in

Reader = Database | sqlite3.Connection

FRESH_PRIORITY = 10  # the tasks table's default: a task never taken from the bag
PRIORITY_HEAD, PRIORITY_TAIL = 20, 0  # a requeued task goes before, or after, the fresh ones


def indexed(table: str = "") -> str:
    """The partial index's WHERE, verbatim (SQLite uses the index only when a query states it),
    its columns qualified by ``table`` in a join."""
    prefix = f"{table}." if table else ""
    return f"({prefix}state <> 'pending' OR {prefix}priority <> {FRESH_PRIORITY})"


INDEXED = indexed()


def add_block(conn: sqlite3.Connection, campaign_id: int, first_id: int, last_id: int) -> None:
    """Record tasks ``first_id..last_id``, just inserted for this campaign, as fresh."""
    conn.execute("INSERT INTO task_blocks(campaign_id, first_id, last_id, next_fresh) VALUES (?, ?, ?, ?)",
                 [campaign_id, first_id, last_id, first_id])


def span(db: Reader, campaign_id: int) -> tuple[int, int]:
    """The lowest and highest task id of the campaign: bounds for a rowid range scan."""
    low, high = db.execute("SELECT min(first_id), max(last_id) FROM task_blocks WHERE campaign_id = ?",
                           [campaign_id]).fetchone()
    return (low, high) if low is not None else (0, -1)


def take(conn: sqlite3.Connection, campaign_id: int, count: int) -> list[int]:
    """The ids of up to ``count`` pending tasks in bag order (head, fresh, tail), the fresh
    ones marked taken; the caller moves every returned task out of ``pending`` in the same
    transaction."""
    taken = _indexed_pending(conn, campaign_id, f"priority > {FRESH_PRIORITY}", count)
    blocks = conn.execute("SELECT first_id, last_id, next_fresh FROM task_blocks "
                          "WHERE campaign_id = ? AND next_fresh <= last_id ORDER BY first_id", [campaign_id])
    for first_id, last_id, next_fresh in blocks.fetchall():
        if len(taken) == count:
            break
        upto = min(last_id, next_fresh + count - len(taken) - 1)
        taken.extend(range(next_fresh, upto + 1))
        conn.execute("UPDATE task_blocks SET next_fresh = ? WHERE campaign_id = ? AND first_id = ?",
                     [upto + 1, campaign_id, first_id])
    taken += _indexed_pending(conn, campaign_id, f"priority < {FRESH_PRIORITY}", count - len(taken))
    return taken


def _indexed_pending(conn: sqlite3.Connection, campaign_id: int, where: str, limit: int) -> list[int]:
    if limit <= 0:
        return []
    return [r[0] for r in conn.execute(
        f"SELECT id FROM tasks WHERE campaign_id = ? AND state = ? AND {where} AND {INDEXED} "
        "ORDER BY priority DESC, id LIMIT ?", [campaign_id, TaskState.PENDING, limit])]


def _fresh(db: Reader, campaign_id: int) -> int:
    """The campaign's fresh tasks (pending, never taken)."""
    return int(db.execute("SELECT coalesce(sum(last_id - next_fresh + 1), 0) FROM task_blocks "
                          "WHERE campaign_id = ? AND next_fresh <= last_id", [campaign_id]).fetchone()[0])


def count(db: Reader, campaign_id: int, states: Iterable[TaskState], limit: int | None = None) -> int:
    """The campaign's tasks in ``states``, at most ``limit``."""
    states = tuple(states)
    total = _fresh(db, campaign_id) if TaskState.PENDING in states else 0
    total += int(db.execute(f"SELECT coalesce(sum(n), 0) FROM task_counts WHERE campaign_id = ? "
                            f"AND state IN {sql_in(states)}", [campaign_id]).fetchone()[0])
    return total if limit is None else min(total, limit)


def counts(db: Reader, campaign_id: int) -> dict[str, int]:
    """The campaign's tasks per state (states with none are absent)."""
    result = dict(db.execute("SELECT state, n FROM task_counts WHERE campaign_id = ? AND n > 0",
                             [campaign_id]).fetchall())
    if pending := _fresh(db, campaign_id):
        result[TaskState.PENDING] = result.get(TaskState.PENDING, 0) + pending
    return result


def requeue_never_run(conn: sqlite3.Connection, campaign_id: int) -> int:
    """Put the campaign's failed tasks that never had a job (failed by a prologue failing on
    every cluster) back at the head of the bag, with fresh counters; return how many."""
    return conn.execute(f"UPDATE tasks SET state = ?, priority = {PRIORITY_HEAD}, resubmits = 0, walltime_kills = 0 "
                        f"WHERE campaign_id = ? AND state = ? AND {INDEXED} "
                        "AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.task_id = tasks.id)",
                        [TaskState.PENDING, campaign_id, TaskState.FAILED]).rowcount


def withdrawn(conn: sqlite3.Connection, task_ids: Iterable[int]) -> None:
    """Put back at the head of the bag the tasks whose jobs were withdrawn before they started
    (a cluster's submit limit or refusal, a pause), their attempt not counted. A task another
    copy still runs (a replica's) stays as it is; call it once the withdrawn jobs have ended or
    are gone."""
    conn.executemany(
        f"UPDATE tasks SET state = ?, priority = {PRIORITY_HEAD}, attempts = attempts - 1 WHERE id = ? "
        "AND state IN (?, ?) "
        f"AND NOT EXISTS (SELECT 1 FROM jobs WHERE task_id = tasks.id AND state IN {sql_in(JOB_ACTIVE)})",
        [(TaskState.PENDING, task_id, TaskState.WAITING, TaskState.RUNNING) for task_id in task_ids])


def end_all(conn: sqlite3.Connection, campaign_id: int, states: Iterable[TaskState], end: TaskState) -> int:
    """Move every task of the campaign in ``states`` to ``end`` (a cancel, a failed prologue);
    return how many. Fresh tasks are ended too, so the fresh tails are emptied."""
    states = tuple(states)
    ended = conn.execute(f"UPDATE tasks SET state = ? WHERE campaign_id = ? AND state IN {sql_in(states)} "
                         f"AND {INDEXED}", [end, campaign_id]).rowcount
    if TaskState.PENDING in states:
        for first_id, last_id, next_fresh in conn.execute(
                "SELECT first_id, last_id, next_fresh FROM task_blocks WHERE campaign_id = ? AND next_fresh <= last_id",
                [campaign_id]).fetchall():
            ended += conn.execute("UPDATE tasks SET state = ? WHERE id BETWEEN ? AND ?",
                                  [end, next_fresh, last_id]).rowcount
            conn.execute("UPDATE task_blocks SET next_fresh = ? WHERE campaign_id = ? AND first_id = ?",
                         [last_id + 1, campaign_id, first_id])
    return ended
