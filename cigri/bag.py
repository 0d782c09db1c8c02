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
:data:`FRESH_PRIORITY`. Every query on a campaign's tasks by state goes through this module, whose SQL
is in :mod:`cigri.db.tasks`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from sqlite_utils import Database

from cigri.db import tasks as stored
from cigri.db.store import connection
from cigri.db.tasks import FRESH_PRIORITY, INDEXED, PRIORITY_HEAD, PRIORITY_TAIL, indexed
from cigri.states import TaskState

__all__ = ["FRESH_PRIORITY", "INDEXED", "PRIORITY_HEAD", "PRIORITY_TAIL", "count", "counts", "end_all", "indexed",
           "take"]

Reader = Database | sqlite3.Connection


def take(conn: sqlite3.Connection, campaign_id: int, count: int) -> list[int]:
    """The ids of up to ``count`` pending tasks in bag order (head, fresh, tail), the fresh
    ones marked taken; the caller moves every returned task out of ``pending`` in the same
    transaction."""
    taken = stored.requeued(conn, campaign_id, head=True, limit=count)
    for first_id, last_id, next_fresh in stored.fresh_blocks(conn, campaign_id):
        if len(taken) == count:
            break
        upto = min(last_id, next_fresh + count - len(taken) - 1)
        taken.extend(range(next_fresh, upto + 1))
        stored.take_fresh(conn, campaign_id, first_id, upto + 1)
    taken += stored.requeued(conn, campaign_id, head=False, limit=count - len(taken))
    return taken


def count(db: Reader, campaign_id: int, states: Iterable[TaskState], limit: int | None = None) -> int:
    """The campaign's tasks in ``states``, at most ``limit``."""
    conn, states = connection(db), tuple(states)
    total = stored.fresh(conn, campaign_id) if TaskState.PENDING in states else 0
    total += stored.counted(conn, campaign_id, states)
    return total if limit is None else min(total, limit)


def counts(db: Reader, campaign_id: int) -> dict[str, int]:
    """The campaign's tasks per state (states with none are absent)."""
    conn = connection(db)
    result = stored.counted_per_state(conn, campaign_id)
    if pending := stored.fresh(conn, campaign_id):
        result[TaskState.PENDING] = result.get(TaskState.PENDING, 0) + pending
    return result


def end_all(conn: sqlite3.Connection, campaign_id: int, states: Iterable[TaskState], end: TaskState) -> int:
    """Move every task of the campaign in ``states`` to ``end`` (a cancel, a failed prologue);
    return how many. Fresh tasks are ended too, so the fresh tails are emptied."""
    states = tuple(states)
    ended = stored.end_indexed(conn, campaign_id, states, end)
    if TaskState.PENDING in states:
        ended += stored.end_fresh(conn, campaign_id, end)
    return ended
