"""Submitting campaigns and adding parameters to them: everything is checked before anything is
written, and a submission is one transaction (all or nothing)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cigri import bag
from cigri import db as database
from cigri.api.access import owned_campaign, reopen
from cigri.errors import InputError, Refused
from cigri.grid import Grid
from cigri.jdl import iter_params, parse_jdl
from cigri.jdl.params import describe, param_rows
from cigri.jdl.parser import CampaignSpec, ParamSource, cluster_keys
from cigri.states import CampaignState

INSERT_CHUNK = 10_000


@dataclass(frozen=True)
class JDLText:
    """A JDL as read, with what it is resolved against: the directory of its relative
    ``param_file`` and the name its errors give it."""

    text: str
    base_dir: Path
    source: str = "JDL"


def submit(grid: Grid, jdl_text: str, *, base_dir: Path, user: str, source: str = "JDL") -> tuple[int, int]:
    """Create a campaign and all its tasks in one transaction; return (campaign id, tasks)."""
    return submit_all(grid, [JDLText(jdl_text, base_dir, source)], user=user)[0]


def submit_all(grid: Grid, jdls: Sequence[JDLText], *, user: str) -> list[tuple[int, int]]:
    """Create several campaigns in one transaction, all or none: every JDL is validated before
    any row is written, and a problem found while streaming a parameter file undoes them all.
    Return (campaign id, tasks) per JDL, in order."""
    specs = [_parse(grid, jdl, user) for jdl in jdls]
    stored: list[tuple[int, int]] = []
    with _ingest(grid) as conn:
        for spec, jdl in zip(specs, jdls):  # the task limit bounds the transaction, so all its JDLs
            stored.append(_store(conn, grid, spec, user, jdl.source, before=sum(n for _, n in stored)))
    return stored


def _parse(grid: Grid, jdl: JDLText, user: str) -> CampaignSpec:
    from cigri.metascheduler import gangs  # not at import: status commands start without the metascheduler

    settings = grid.config.settings
    return parse_jdl(jdl.text, known_clusters=grid.cluster_backends(), user=user, base_dir=jdl.base_dir,
                     default_walltime=settings.default_walltime,
                     default_resources=settings.default_resources, source=jdl.source,
                     classes=grid.config.class_users(), default_class=grid.config.default_class(),
                     homes=grid.cluster_homes(user), cluster_cores=gangs.cluster_cores(grid.db.conn))


def _store(conn: sqlite3.Connection, grid: Grid, spec: CampaignSpec, user: str, source: str,
           before: int) -> tuple[int, int]:
    """Write one campaign, its properties and its tasks inside the caller's transaction, which
    has added ``before`` tasks already."""
    clusters = grid.cluster_ids()
    campaign_id = conn.execute(
        "INSERT INTO campaigns(name, user, state, jobs_type, jdl, submitted_at, class, priority) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [spec.name, user, CampaignState.IN_TREATMENT, spec.jobs_type, json.dumps(spec.document),
         database.now(), spec.class_name, spec.priority]).lastrowid
    assert campaign_id is not None
    rows = []
    for cluster, values in spec.clusters.items():
        for key in cluster_keys():
            if key in values:
                value = values[key]
                if isinstance(value, str):
                    value = value.replace("{CAMPAIGN_ID}", str(campaign_id))
                rows.append((campaign_id, clusters[cluster], key, json.dumps(value)))
    conn.executemany("INSERT INTO campaign_properties(campaign_id, cluster_id, name, value) "
                     "VALUES (?, ?, ?, ?)", rows)
    count = _insert_tasks(conn, campaign_id, spec.params, grid.config.settings.max_submission_tasks, before)
    if count == 0:
        raise InputError(f"{source}: the campaign has no parameters")
    return campaign_id, count


def extend(grid: Grid, campaign_id: int, param_file: Path, *, user: str) -> int:
    """Add a parameter file's tasks to an existing campaign (``gridsub -c N -F FILE``)."""
    with _ingest(grid) as conn:
        campaign = owned_campaign(grid, conn, campaign_id, user)
        if campaign["state"] == CampaignState.CANCELLED:
            raise Refused(f"campaign {campaign_id} is cancelled")
        count = _insert_tasks(conn, campaign_id, ParamSource(file=param_file),
                              grid.config.settings.max_submission_tasks)
        if count == 0:  # as a submission without parameters; nor may an ended campaign reopen for none
            raise InputError(f"{param_file}: no parameters to add")
        reopen(conn, "id = ?", [campaign_id])
    return count


@contextmanager
def _ingest(grid: Grid) -> Iterator[sqlite3.Connection]:
    """The write transaction of a submission, without a foreign-key lookup per task: every
    task references the campaign this transaction created or checked (a sixth of the time)."""
    grid.db.conn.execute("PRAGMA foreign_keys = OFF")
    try:
        with database.write(grid.db) as conn:
            yield conn
    finally:
        grid.db.conn.execute("PRAGMA foreign_keys = ON")


def _insert_tasks(conn: sqlite3.Connection, campaign_id: int, source: ParamSource, limit: int,
                  before: int = 0) -> int:
    """Stream parameters into the bag a block at a time, as one block of fresh tasks (see
    :mod:`cigri.bag`); a duplicate name, or more than ``limit`` tasks with the ``before`` this
    transaction added (the write lock is held throughout, and cycles wait for it), aborts it.

    One prepared statement, bound to whole blocks, with the campaign id in the SQL: the
    per-row work left is SQLite's, and no index is maintained. Names are checked once at the
    end, by one sort in SQLite (bounded memory, unlike a set of a million names).
    """
    sql = f"INSERT INTO tasks(campaign_id, name, param) VALUES ({int(campaign_id)}, ?, ?)"
    first_id = conn.execute("SELECT coalesce(max(id), 0) + 1 FROM tasks").fetchone()[0]
    total = 0
    where = "$.nb_jobs" if source.count is not None else source.file or "$.params"
    too_many = InputError(f"{where}: more than the {limit:,} tasks one submission may add "
                          "(cigri.max_submission_tasks); add the rest with gridsub -c N -F FILE")
    if source.count is not None and before + source.count > limit:
        raise too_many
    for rows in param_rows(source, INSERT_CHUNK):
        total += len(rows)
        if before + total > limit:
            raise too_many
        conn.executemany(sql, rows)
    if total == 0:
        return 0
    last_id = conn.execute("SELECT max(id) FROM tasks").fetchone()[0]
    assert last_id - first_id + 1 == total, "the write lock keeps one submission's ids consecutive"
    bag.add_block(conn, campaign_id, first_id, last_id)
    _refuse_duplicate_names(conn, campaign_id, source, first_id)
    conn.execute("UPDATE campaigns SET nb_tasks = nb_tasks + ? WHERE id = ?", [total, campaign_id])
    return total


def _refuse_duplicate_names(conn: sqlite3.Connection, campaign_id: int, source: ParamSource, first_id: int) -> None:
    """InputError naming the first parameter (in file order) whose name an earlier task of the
    campaign already has; the tasks from ``first_id`` on are the ones just inserted."""
    low, high = bag.span(conn, campaign_id)
    repeated = [r[0] for r in conn.execute(
        "SELECT name FROM tasks WHERE id BETWEEN ? AND ? AND campaign_id = ? GROUP BY name HAVING count(*) > 1",
        [low, high, campaign_id])]
    if not repeated:
        return
    wanted = set(repeated)
    first_seen = {name: f"already in campaign {campaign_id}" for (name,) in conn.execute(  # names from before this block
        "SELECT name FROM tasks WHERE id BETWEEN ? AND ? AND campaign_id = ?", [low, first_id - 1, campaign_id])
        if name in wanted}
    for position, name, _ in iter_params(source):
        if name in first_seen:
            raise InputError(f"{describe(source, position)}: duplicate task name {name!r} "
                             f"({first_seen[name]}; the first word of a line names its task)")
        if name in wanted:
            first_seen[name] = f"first at {describe(source, position)}"
    raise AssertionError("a repeated name was found in the database but not in the source")
