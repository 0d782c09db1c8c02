"""The bag of tasks (cigri.bag): fresh tasks live as id ranges, every other one in a partial
index. Each test compares what the bag says with the ground truth, a plain scan of the tasks."""

from __future__ import annotations

import json
import random
import sqlite3
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlite_utils import Database

from cigri import api, bag, config
from cigri import db as database
from cigri.grid import Grid, open_grid
from cigri.states import TASK_OPEN, TaskState
from cigri.users import acting_user

USER = acting_user()  # the local cluster takes the campaigns of the account running cigri


@pytest.fixture
def grid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Grid]:
    monkeypatch.setenv("CIGRI_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CIGRI_CONFIG", raising=False)
    g = open_grid(config.load())
    yield g
    g.close()


def submit(grid: Grid, tmp_path: Path, names: list[str]) -> int:
    document = {"name": "b", "params": names, "exec_file": "/bin/true", "clusters": {"local": {}}}
    return api.submit(grid, json.dumps(document), base_dir=tmp_path, user=USER)[0]


def extend(grid: Grid, tmp_path: Path, campaign_id: int, names: list[str]) -> None:
    more = tmp_path / "more.txt"
    more.write_text("".join(f"{n}\n" for n in names))
    api.extend(grid, campaign_id, api.Lines(more.open("rb"), str(more)), user=USER)


def truth(db: Database | sqlite3.Connection, campaign_id: int) -> dict[str, int]:
    """Per-state counts by a full scan, ignoring every index."""
    return dict(db.execute("SELECT state, count(*) FROM tasks NOT INDEXED WHERE campaign_id = ? GROUP BY state",
                           [campaign_id]).fetchall())


def bag_order(db: Database | sqlite3.Connection, campaign_id: int) -> list[int]:
    """The order the bag must follow, by a full scan: priority, then submission."""
    return [r[0] for r in db.execute("SELECT id FROM tasks NOT INDEXED WHERE campaign_id = ? AND state = 'pending' "
                                     "ORDER BY priority DESC, id", [campaign_id])]


def requeue(conn: sqlite3.Connection, task_id: int, priority: int) -> None:
    conn.execute("UPDATE tasks SET state = 'pending', priority = ? WHERE id = ?", [priority, task_id])


def assert_consistent(grid: Grid, campaign_id: int) -> None:
    assert bag.counts(grid.db, campaign_id) == truth(grid.db, campaign_id)
    for states in [(TaskState.PENDING,), TASK_OPEN, (TaskState.FAILED, TaskState.WAITING)]:
        expected = sum(truth(grid.db, campaign_id).get(s, 0) for s in states)
        assert bag.count(grid.db, campaign_id, states) == expected
        assert bag.count(grid.db, campaign_id, states, limit=3) == min(3, expected)


def test_the_bag_gives_head_then_fresh_blocks_then_tail(grid: Grid, tmp_path: Path) -> None:
    first = submit(grid, tmp_path, [f"a{i}" for i in range(6)])
    other = submit(grid, tmp_path, [f"a{i}" for i in range(3)])  # the same names: another campaign
    extend(grid, tmp_path, first, ["b0", "b1", "b2"])  # a second block, after the other campaign's
    assert_consistent(grid, first)
    with database.write(grid.db) as conn:
        taken = bag.take(conn, first, 4)
        assert taken == bag_order(conn, first)[:4]
        conn.executemany("UPDATE tasks SET state = 'running' WHERE id = ?", [(t,) for t in taken])
        requeue(conn, taken[0], bag.PRIORITY_TAIL)
        requeue(conn, taken[3], bag.PRIORITY_HEAD)
    assert_consistent(grid, first)
    with database.write(grid.db) as conn:
        expected = bag_order(conn, first)
        assert len(expected) == 7  # 2 requeued + 2 fresh of the first block + 3 of the second
        taken = []
        for count in (3, 10):  # each take leaves the bag before the next, as the workqueue does
            taken += bag.take(conn, first, count)
            conn.executemany("UPDATE tasks SET state = 'waiting' WHERE id = ?", [(t,) for t in taken])
        assert taken == expected
    assert bag.count(grid.db, first, (TaskState.PENDING,)) == 0
    assert_consistent(grid, first)
    assert bag.counts(grid.db, other) == {"pending": 3}


def test_ending_a_campaign_ends_its_fresh_tasks_too(grid: Grid, tmp_path: Path) -> None:
    campaign_id = submit(grid, tmp_path, [f"t{i}" for i in range(10)])
    other = submit(grid, tmp_path, ["x", "y"])
    with database.write(grid.db) as conn:
        conn.executemany("UPDATE tasks SET state = 'running' WHERE id = ?", [(t,) for t in bag.take(conn, campaign_id, 3)])
    api.cancel(grid, campaign_id, user=USER)
    assert truth(grid.db, campaign_id) == {"cancelled": 10}
    assert_consistent(grid, campaign_id)
    assert bag.take(grid.db.conn, campaign_id, 5) == []
    assert truth(grid.db, other) == bag.counts(grid.db, other) == {"pending": 2}


def test_bag_queries_use_the_partial_index(grid: Grid, tmp_path: Path) -> None:
    campaign_id = submit(grid, tmp_path, [f"t{i}" for i in range(50)])
    seen: list[str] = []
    grid.db.conn.set_trace_callback(seen.append)
    with database.write(grid.db) as conn:
        bag.take(conn, campaign_id, 5)
        bag.counts(conn, campaign_id)
        bag.count(conn, campaign_id, TASK_OPEN, limit=1)
        bag.end_all(conn, campaign_id, TASK_OPEN, TaskState.CANCELLED)
    grid.db.conn.set_trace_callback(None)
    plans = [(row[3], s) for s in seen if " tasks " in s
             for row in grid.db.conn.execute("EXPLAIN QUERY PLAN " + s)]
    assert plans and not [p for p in plans if p[0].startswith("SCAN tasks")], plans
    assert any("INDEX tasks_bag" in p[0] for p in plans)


def test_the_migration_describes_an_old_bag_exactly(tmp_path: Path) -> None:
    """A database from before the blocks (m007): interleaved campaigns, an extension, taken,
    requeued and ended tasks. After m008 the bag gives the same counts and order as before."""
    conn = sqlite3.connect(tmp_path / "old.db", isolation_level=None)
    db = Database(conn)
    database.migrations.apply(db, stop_before="m008_task_blocks")
    conn.execute("INSERT INTO campaigns(id, name, user, state, jdl, submitted_at) VALUES "
                 "(1, 'a', 'u', 'in_treatment', '{}', 0), (2, 'b', 'u', 'in_treatment', '{}', 0), "
                 "(3, 'c', 'u', 'cancelled', '{}', 0)")
    rows = [(1, f"a{i}") for i in range(10)] + [(2, f"b{i}") for i in range(5)] + \
        [(1, f"c{i}") for i in range(4)] + [(3, f"d{i}") for i in range(3)]
    conn.executemany("INSERT INTO tasks(campaign_id, name, param) VALUES (?, ?, ?)", [(c, n, n) for c, n in rows])
    # campaign 1: a0-a5 taken in order (a1 requeued at the head, a4 at the tail, a2 failed); b0 taken
    conn.execute("UPDATE tasks SET state = 'terminated', attempts = 1 WHERE id BETWEEN 1 AND 6")
    conn.execute("UPDATE tasks SET state = 'pending', priority = 20 WHERE id = 2")
    conn.execute("UPDATE tasks SET state = 'pending', priority = 0 WHERE id = 5")
    conn.execute("UPDATE tasks SET state = 'failed' WHERE id = 3")
    conn.execute("UPDATE tasks SET state = 'running' WHERE id = 11")
    conn.execute("UPDATE tasks SET state = 'cancelled' WHERE campaign_id = 3")
    before = {c: (truth(conn, c), bag_order(conn, c)) for c in (1, 2, 3)}
    database.migrations.apply(db)
    assert conn.execute("SELECT campaign_id, first_id, last_id, next_fresh FROM task_blocks ORDER BY first_id"
                        ).fetchall() == [(1, 1, 10, 7), (2, 11, 15, 12), (1, 16, 19, 16), (3, 20, 22, 23)]
    for campaign_id, (counts, order) in before.items():
        assert bag.counts(conn, campaign_id) == counts
        assert bag.take(conn, campaign_id, 100) == order
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert Counter(r[1] for r in conn.execute("PRAGMA index_list(tasks)")) == Counter(["tasks_bag"])


def test_the_counts_follow_every_way_a_task_changes(grid: Grid, tmp_path: Path) -> None:
    """``task_counts`` is kept by triggers: after random takes, state moves, requeues, inserts of
    tasks already ended (an import), a cancel and a purge, every campaign's counts are the scan's."""
    rng = random.Random(7)
    campaigns = [submit(grid, tmp_path, [f"t{i}" for i in range(40)]) for _ in range(3)]
    states = [s.value for s in TaskState]  # pending first: back to pending is a requeue
    with database.write(grid.db) as conn:
        for _ in range(300):
            campaign_id = rng.choice(campaigns)
            taken = [r[0] for r in conn.execute(f"SELECT id FROM tasks WHERE {bag.INDEXED}")]  # not fresh
            move = rng.randrange(4) if taken else 0
            if move == 0:  # as the workqueue does
                conn.executemany("UPDATE tasks SET state = 'waiting' WHERE id = ?",
                                 [(t,) for t in bag.take(conn, campaign_id, rng.randint(1, 5))])
            elif move == 1:
                conn.execute("UPDATE tasks SET state = ? WHERE id = ?", [rng.choice(states[1:]), rng.choice(taken)])
            elif move == 2:
                requeue(conn, rng.choice(taken), rng.choice([bag.PRIORITY_HEAD, bag.PRIORITY_TAIL]))
            else:
                conn.execute("INSERT INTO tasks(campaign_id, name, param, state) VALUES (?, 'x', '', ?)",
                             [campaign_id, rng.choice(states[1:])])
    for campaign_id in campaigns:
        assert_consistent(grid, campaign_id)
    api.cancel(grid, campaigns[0], user=USER)
    assert_consistent(grid, campaigns[0])
    api.purge(grid, [campaigns[0]], user=USER)
    assert bag.counts(grid.db, campaigns[0]) == {}
    assert grid.db.execute("SELECT count(*) FROM task_counts WHERE campaign_id = ?", [campaigns[0]]).fetchone()[0] == 0
