"""Use cases: what users and admins can ask of cigri. The CLI only calls these and renders."""

from __future__ import annotations

import json
import math
import sqlite3
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from cigri import bag, cluster_caps
from cigri import db as database
from cigri import predictor
from cigri.config import ClassConfig, Config, UserConfig
from cigri.errors import InputError, NotFound, Refused
from cigri.events import Severity, close, record
from cigri.grid import Grid
from cigri.users import acting_user, is_admin, require_admin
from cigri.jdl import iter_params, parse_jdl
from cigri.jdl.params import describe, param_rows
from cigri.jdl.parser import CampaignSpec, ParamSource, cluster_keys
from cigri.states import (CAMPAIGN_ACTIVE, JOB_ACTIVE, TASK_OPEN, CampaignState, JobState, KillReason, TaskState,
                          sql_in)

if TYPE_CHECKING:
    from cigri.metascheduler.fairshare import Allocation, Scenario

INSERT_CHUNK = 10_000


def current_user() -> str:
    """The Unix user running the command (never an environment variable: see :mod:`cigri.users`)."""
    return acting_user()


# --- submission -------------------------------------------------------------------------

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
    settings = grid.config.settings
    return parse_jdl(jdl.text, known_clusters=grid.cluster_backends(), user=user, base_dir=jdl.base_dir,
                     default_walltime=settings.default_walltime,
                     default_resources=settings.default_resources, source=jdl.source,
                     classes=grid.config.class_users(), default_class=grid.config.default_class(),
                     homes=grid.cluster_homes(user))


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
        campaign = _owned_campaign(grid, conn, campaign_id, user)
        if campaign["state"] == CampaignState.CANCELLED:
            raise Refused(f"campaign {campaign_id} is cancelled")
        count = _insert_tasks(conn, campaign_id, ParamSource(file=param_file),
                              grid.config.settings.max_submission_tasks)
        if count == 0:  # as a submission without parameters; nor may an ended campaign reopen for none
            raise InputError(f"{param_file}: no parameters to add")
        _reopen(conn, "id = ?", [campaign_id])
    return count


def _reopen(conn: sqlite3.Connection, where: str, args: list[Any]) -> None:
    """Put the ended campaigns matching ``where`` (a fixed SQL condition) back in treatment:
    new tasks or resubmitted ones. A cancelled campaign stays cancelled."""
    conn.execute(f"UPDATE campaigns SET state = ?, finished_at = NULL WHERE state IN (?, ?) AND {where}",
                 [CampaignState.IN_TREATMENT, CampaignState.TERMINATED, CampaignState.FAILED, *args])


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


# --- control ------------------------------------------------------------------------------

def _storable(row_id: int) -> bool:
    """Whether SQLite can hold ``row_id`` (a 64-bit integer): a larger one names no row, and
    binding it would raise OverflowError instead of the answer "no such ..."."""
    return -2**63 <= row_id < 2**63


def _owned_campaign(grid: Grid, conn: sqlite3.Connection, campaign_id: int, user: str) -> dict[str, Any]:
    """The campaign, if ``user`` may act on it: its owner or an admin; otherwise Refused (exit 1)."""
    row = conn.execute("SELECT id, user, state FROM campaigns WHERE id = ?", [campaign_id]).fetchone() \
        if _storable(campaign_id) else None
    if row is None:
        raise NotFound(f"campaign {campaign_id}: no such campaign")
    if row[1] != user and not is_admin(grid.config, user):
        raise Refused(f"campaign {campaign_id}: belongs to {row[1]}, not to {user}")
    return {"id": row[0], "user": row[1], "state": row[2]}


def cancel(grid: Grid, campaign_id: int, *, user: str) -> None:
    """Cancel a campaign: its open tasks are cancelled now; nikita kills its jobs next cycle."""
    with database.write(grid.db) as conn:
        campaign = _owned_campaign(grid, conn, campaign_id, user)
        if campaign["state"] not in CAMPAIGN_ACTIVE:
            raise Refused(f"campaign {campaign_id} is already {campaign['state']}")
        conn.execute("UPDATE campaigns SET state = ?, finished_at = ? WHERE id = ?",
                     [CampaignState.CANCELLED, database.now(), campaign_id])
        bag.end_all(conn, campaign_id, TASK_OPEN, TaskState.CANCELLED)
        conn.execute(f"UPDATE jobs SET kill_reason = ? WHERE campaign_id = ? AND state IN {sql_in(JOB_ACTIVE)}",
                     [KillReason.USER, campaign_id])
        record(conn, "USER_CANCEL", f"campaign cancelled by {user}", campaign_id=campaign_id)


def pause(grid: Grid, campaign_id: int, *, user: str) -> None:
    _move_campaign(grid, campaign_id, user, CampaignState.IN_TREATMENT, CampaignState.PAUSED)


def resume(grid: Grid, campaign_id: int, *, user: str) -> None:
    _move_campaign(grid, campaign_id, user, CampaignState.PAUSED, CampaignState.IN_TREATMENT)


def _move_campaign(grid: Grid, campaign_id: int, user: str, before: CampaignState, after: CampaignState) -> None:
    with database.write(grid.db) as conn:
        campaign = _owned_campaign(grid, conn, campaign_id, user)
        if campaign["state"] != before:
            raise Refused(f"campaign {campaign_id} is {campaign['state']}, not {before}")
        conn.execute("UPDATE campaigns SET state = ? WHERE id = ? AND state = ?", [after, campaign_id, before])


def cancel_job(grid: Grid, job_id: int, *, user: str) -> None:
    """Ask nikita to kill one job; its task is then cancelled, not resubmitted."""
    with database.write(grid.db) as conn:
        row = conn.execute("SELECT campaign_id, state FROM jobs WHERE id = ?", [job_id]).fetchone() \
            if _storable(job_id) else None
        if row is None:
            raise NotFound(f"job {job_id}: no such job")
        _owned_campaign(grid, conn, row[0], user)
        if row[1] not in JOB_ACTIVE:
            raise Refused(f"job {job_id} is already {row[1]}")
        conn.execute("UPDATE jobs SET kill_reason = ? WHERE id = ?", [KillReason.USER, job_id])
        record(conn, "USER_CANCEL", f"job cancelled by {user}", campaign_id=row[0], job_id=job_id, kind="job")


# --- status -------------------------------------------------------------------------------

TASK_COUNT_KEYS = ("total", "pending", "waiting", "running", "terminated", "failed", "cancelled")


def _task_counts(grid: Grid, campaign_id: int) -> dict[str, int]:
    counts = dict.fromkeys(TASK_COUNT_KEYS, 0)
    counts.update(bag.counts(grid.db, campaign_id))
    counts["total"] = sum(counts[s] for s in TaskState)
    return counts


def _campaign_row(grid: Grid, campaign_id: int) -> dict[str, Any]:
    rows = list(grid.db.query("SELECT * FROM campaigns WHERE id = ?", [campaign_id])) if _storable(campaign_id) else []
    if not rows:
        raise NotFound(f"campaign {campaign_id}: no such campaign")
    return rows[0]


def campaign_summary(grid: Grid, campaign_id: int, now: float | None = None) -> dict[str, Any]:
    """The stable ``--json`` document of one campaign (see README, "gridstat --json")."""
    return _summary(grid, campaign_id, database.now() if now is None else now)[0]


def _summary(grid: Grid, campaign_id: int, now: float) -> tuple[dict[str, Any], predictor.CampaignFigures]:
    """The summary with the predictor's figures: throughput over the last hour, remaining
    time and ETA (the end time once the campaign is over)."""
    row = _campaign_row(grid, campaign_id)
    counts = _task_counts(grid, campaign_id)
    figures = predictor.campaign_figures(grid.db, campaign_id, now,
                                         remaining=counts["pending"] + counts["waiting"] + counts["running"])
    return {
        "id": row["id"], "name": row["name"], "user": row["user"], "state": row["state"],
        "submitted_at": row["submitted_at"], "started_at": row["started_at"],
        "finished_at": row["finished_at"], "tasks": counts,
        "progress": round(100 * (counts["terminated"] + counts["failed"] + counts["cancelled"])
                          / counts["total"], 1) if counts["total"] else 100.0,
        "open_events": grid.db.execute("SELECT count(*) FROM events WHERE campaign_id = ? AND state = 'open'",
                                       [campaign_id]).fetchone()[0],
        "replicas": grid.db.execute(  # extra copies of running tasks (finalize scheduler)
            f"SELECT count(*) - count(DISTINCT task_id) FROM jobs WHERE campaign_id = ? AND kind = 'task' "
            f"AND state IN {sql_in(JOB_ACTIVE)}", [campaign_id]).fetchone()[0],
        "throughput_per_hour": figures.throughput_per_hour,
        "remaining_seconds": figures.remaining_seconds,
        "eta": row["finished_at"] or figures.eta,
    }, figures


def campaign_detail(grid: Grid, campaign_id: int, now: float | None = None) -> dict[str, Any]:
    """Summary plus, per cluster, the jobs by state, durations, throughput, remaining time and
    ETA (:func:`predictor.cluster_remaining`; once the campaign is over, its end), tap and
    affinity penalty.

    Reads only the bag's index, the active jobs, ``campaign_stats`` and the recent terminated
    jobs' index: it costs the same for ten tasks as for a million.
    """
    moment = database.now() if now is None else now
    summary, figures = _summary(grid, campaign_id, moment)
    names = {cid: name for name, cid in grid.cluster_ids().items()}
    per_cluster: dict[int, dict[str, Any]] = {}

    def entry(cluster_id: int) -> dict[str, Any]:
        return per_cluster.setdefault(cluster_id, {
            "cluster": names[cluster_id], "jobs": {}, "average_duration": None, "duration_stddev": None,
            "throughput_per_hour": None, "remaining_seconds": None, "eta": None, "tap": None,
            "affinity_penalty": 0.0})

    held: dict[int, int] = defaultdict(int)  # active task jobs per cluster
    for cluster_id, state, n in grid.db.execute(
            f"SELECT cluster_id, state, count(*) FROM jobs WHERE campaign_id = ? AND state IN {sql_in(JOB_ACTIVE)} "
            f"AND kind = 'task' GROUP BY cluster_id, state", [campaign_id]):
        entry(cluster_id)["jobs"][state] = n
        held[cluster_id] += n
    for cluster_id, cluster in figures.clusters.items():
        entry(cluster_id)["jobs"].update(terminated=cluster.terminated, ended_otherwise=cluster.ended_otherwise)
        entry(cluster_id).update(average_duration=cluster.average_duration, duration_stddev=cluster.duration_stddev,
                                 throughput_per_hour=cluster.throughput_per_hour)
    for cluster_id, part in predictor.cluster_remaining(grid.db, campaign_id, moment, figures.clusters,
                                                        pending=summary["tasks"]["pending"], held=held).items():
        entry(cluster_id).update(remaining_seconds=part.remaining_seconds, eta=summary["finished_at"] or part.eta)
    for cluster_id, rate in predictor.taps(grid.db, campaign_id).items():
        entry(cluster_id)["tap"] = rate
    for (_, cluster_id), penalty in predictor.affinity_penalties(grid.db, [campaign_id], moment).items():
        entry(cluster_id)["affinity_penalty"] = round(penalty, 3)
    summary.update({
        "clusters": list(per_cluster.values()),
        "average_duration": figures.average_duration,
        "duration_stddev": figures.duration_stddev,
        "throughput_per_second": None if figures.throughput_per_hour is None else figures.throughput_per_hour / 3600,
    })
    return summary


def list_campaigns(grid: Grid, *, user: str | None, include_finished: bool) -> list[dict[str, Any]]:
    where, args = [], []
    if user:
        where.append("user = ?")
        args.append(user)
    if not include_finished:
        where.append(f"state IN {sql_in(CAMPAIGN_ACTIVE)}")
    clause = ("WHERE " + " AND ".join(where)) if where else ""
    ids = [r[0] for r in grid.db.execute(f"SELECT id FROM campaigns {clause} ORDER BY id", args)]
    return [campaign_summary(grid, i) for i in ids]


def campaign_tasks(grid: Grid, campaign_id: int) -> Iterator[dict[str, Any]]:
    """Every task of a campaign with its jobs (``gridstat -f``), streamed."""
    _campaign_row(grid, campaign_id)
    jobs: dict[int, list[dict[str, Any]]] = {}
    for job in grid.db.query(
            "SELECT j.id, j.task_id, c.name AS cluster, j.state, j.remote_id, j.exit_code, j.node, "
            "j.started_at, j.finished_at FROM jobs j JOIN clusters c ON c.id = j.cluster_id "
            "WHERE j.campaign_id = ? AND j.task_id IS NOT NULL ORDER BY j.id", [campaign_id]):
        jobs.setdefault(job.pop("task_id"), []).append(job)
    low, high = bag.span(grid.db, campaign_id)
    for task in grid.db.query("SELECT id, name, param, state, attempts FROM tasks WHERE id BETWEEN ? AND ? "
                              "AND campaign_id = ? ORDER BY id", [low, high, campaign_id]):
        task["jobs"] = jobs.get(task["id"], [])
        yield task


def job_info(grid: Grid, job_id: int) -> dict[str, Any]:
    rows = list(grid.db.query(
        "SELECT j.*, c.name AS cluster, t.name AS task, t.param FROM jobs j JOIN clusters c ON c.id = j.cluster_id "
        "LEFT JOIN tasks t ON t.id = j.task_id WHERE j.id = ?", [job_id])) if _storable(job_id) else []
    if not rows:
        raise NotFound(f"job {job_id}: no such job")
    return rows[0]


def job_output(grid: Grid, job_id: int, stream: str, *, user: str, lines: int = 1000) -> str:
    """The tail of a job's stdout or stderr; only its owner may read it."""
    job = job_info(grid, job_id)
    campaign = _campaign_row(grid, job["campaign_id"])
    if campaign["user"] != user and not is_admin(grid.config, user):
        raise Refused(f"job {job_id}: belongs to {campaign['user']}, not to {user}")
    if not job["remote_id"]:
        raise Refused(f"job {job_id} has not reached its cluster yet")
    return grid.backend(job["cluster_id"]).output_tail(job["remote_id"], stream, lines)


# --- events and notifications ---------------------------------------------------------

_EVENT_COLUMNS = ("e.id, e.class, e.code, e.severity, e.state, e.campaign_id, c.name AS cluster, e.job_id, e.task_id, "
                  "e.count, e.examples, e.message, e.stderr_tail, e.created_at, e.updated_at, e.closed_at")


def _event_rows(grid: Grid, where: str, args: list[Any]) -> list[dict[str, Any]]:
    rows = list(grid.db.query(f"SELECT {_EVENT_COLUMNS} FROM events e LEFT JOIN clusters c ON c.id = e.cluster_id "
                              f"LEFT JOIN campaigns p ON p.id = e.campaign_id WHERE {where} ORDER BY e.id", args))
    for row in rows:
        row["examples"] = json.loads(row["examples"])
    return rows


def events(grid: Grid, *, user: str, campaign_id: int | None = None, global_only: bool = False,
           include_closed: bool = False) -> list[dict[str, Any]]:
    """Events ``user`` may read, oldest first: a campaign's (its owner's or an admin's), the
    clusters' own (``global_only``; anyone), or by default every event of the user's campaigns
    plus the clusters' (an admin: every event)."""
    where: list[str] = ["1"]
    args: list[object] = []
    if campaign_id is not None:
        _owned_campaign(grid, grid.db.conn, campaign_id, user)
        where.append("e.campaign_id = ?")
        args.append(campaign_id)
    elif global_only:
        where.append("e.class = 'cluster' AND e.campaign_id IS NULL")
    elif not is_admin(grid.config, user):
        where.append("(p.user = ? OR e.campaign_id IS NULL)")
        args.append(user)
    if not include_closed:
        where.append("e.state = 'open'")
    return _event_rows(grid, " AND ".join(where), args)


def event(grid: Grid, event_id: int, *, user: str) -> dict[str, Any]:
    """One event with every detail; a campaign's event only for its owner or an admin."""
    rows = _event_rows(grid, "e.id = ?", [event_id]) if _storable(event_id) else []
    if not rows:
        raise NotFound(f"event {event_id}: no such event")
    _may_fix_or_read(grid, rows[0], user, fixing=False)
    return rows[0]


def _may_fix_or_read(grid: Grid, row: dict[str, Any], user: str, *, fixing: bool) -> None:
    if row["campaign_id"] is not None:
        owner = grid.db.execute("SELECT user FROM campaigns WHERE id = ?", [row["campaign_id"]]).fetchone()[0]
        if owner != user and not is_admin(grid.config, user):
            raise Refused(f"event {row['id']}: belongs to {owner}'s campaign {row['campaign_id']}, not to {user}")
    elif fixing:
        require_admin(grid.config, user, f"fixing cluster event {row['id']}")


def fix_events(grid: Grid, *, user: str, event_id: int | None = None, campaign_id: int | None = None,
               global_only: bool = False, resubmit: bool = False) -> dict[str, int]:
    """Close open events (lifting the blacklists they hold) and, with ``resubmit``, put the
    failed tasks they cover back at the head of the bag; one transaction. Nothing to close is
    refused (exit 1)."""
    if sum([event_id is not None, campaign_id is not None, global_only]) != 1:
        raise InputError("--fix needs exactly one of -e EVENT, -c CAMPAIGN or -g")
    if event_id is not None:
        row = event(grid, event_id, user=user)
        _may_fix_or_read(grid, row, user, fixing=True)
        where, args = "id = ?", [event_id]
    elif campaign_id is not None:
        where, args = "campaign_id = ?", [campaign_id]
    else:
        require_admin(grid.config, user, "fixing the clusters' events")
        where, args = "class = 'cluster' AND campaign_id IS NULL", []
    with database.write(grid.db) as conn:
        if campaign_id is not None:
            _owned_campaign(grid, conn, campaign_id, user)
        ids = [r[0] for r in conn.execute(f"SELECT id FROM events WHERE state = 'open' AND {where}", args)]
        if not ids:
            raise Refused("nothing to fix: " + (f"event {event_id} is not open" if event_id is not None else
                                                "no open event"))
        close(conn, f"id IN ({','.join('?' * len(ids))})", ids)
        resubmitted = _resubmit_failed(conn, ids) if resubmit else 0
        resubmitted += _retry_prologues(conn, ids, resubmit)
    return {"closed": len(ids), "resubmitted": resubmitted}


def _retry_prologues(conn: sqlite3.Connection, event_ids: list[int], resubmit: bool) -> int:
    """A fixed PROLOGUE_FAILED event runs its prologue again on its cluster (the failure may
    have been the cluster's: a file system down, a module server away); with ``resubmit``, the
    tasks the failure ended without running them go back to the bag first. Return those."""
    from cigri.metascheduler.schedulers import workqueue  # the metascheduler's import cost, only when fixing

    resubmitted = 0
    for campaign_id, cluster_id in conn.execute(
            f"SELECT DISTINCT campaign_id, cluster_id FROM events WHERE code = 'PROLOGUE_FAILED' "
            f"AND id IN ({','.join('?' * len(event_ids))})", event_ids).fetchall():
        if resubmit and (requeued := bag.requeue_never_run(conn, campaign_id)):
            resubmitted += requeued
            _reopen(conn, "id = ?", [campaign_id])
        if conn.execute(f"SELECT state IN {sql_in(CAMPAIGN_ACTIVE)} FROM campaigns WHERE id = ?",
                        [campaign_id]).fetchone()[0]:
            workqueue.add_script_job(conn, campaign_id, cluster_id, "prologue")
    return resubmitted


def _resubmit_failed(conn: sqlite3.Connection, event_ids: list[int]) -> int:
    """The failed tasks of these events go back to the head of the bag with fresh counters; their
    ended campaigns (not cancelled ones) are in treatment again."""
    marks = ",".join("?" * len(event_ids))
    tasks = f"SELECT ej.task_id FROM event_jobs ej WHERE ej.event_id IN ({marks}) AND ej.task_id IS NOT NULL"
    _reopen(conn, f"id IN (SELECT campaign_id FROM tasks WHERE state = ? AND id IN ({tasks}))",
            [TaskState.FAILED, *event_ids])
    return conn.execute(
        f"UPDATE tasks SET state = ?, priority = {bag.PRIORITY_HEAD}, resubmits = 0, walltime_kills = 0 WHERE state = ? "
        f"AND id IN ({tasks}) AND campaign_id IN (SELECT id FROM campaigns WHERE state IN (?, ?))",
        [TaskState.PENDING, TaskState.FAILED, *event_ids, *CAMPAIGN_ACTIVE]).rowcount


NOTIFY_KINDS = ("mail", "webhook")


def subscribe(grid: Grid, *, user: str, kind: str, target: str, severity: str) -> int:
    """Subscribe ``user`` to notifications of at least ``severity``; an existing subscription
    to the same target gets the new severity. Return its id."""
    import httpx

    if severity not in {s.value for s in Severity}:
        raise InputError(f"severity: expected low, medium or high, got {severity!r}")
    if kind == "mail":
        local, at, domain = target.partition("@")
        if not (local and at and domain) or any(ch.isspace() or ord(ch) < 32 for ch in target) or "@" in domain:
            raise InputError(f"mail address: {target!r} is not an address")
    elif kind == "webhook":
        try:
            url = httpx.URL(target)
        except httpx.InvalidURL:
            url = None
        if url is None or url.scheme not in ("http", "https") or not url.host:
            raise InputError("webhook URL: expected http://HOST/... or https://HOST/...")
    else:
        raise InputError(f"kind: expected one of {', '.join(NOTIFY_KINDS)}, got {kind!r}")
    if kind == "mail" and not grid.config.notify.smtp_host:  # what the notifier needs to send a mail
        raise Refused("notify.smtp_host is not set: mail notifications cannot be sent on this grid "
                      "(ask an admin, or subscribe a --webhook)")
    with database.write(grid.db) as conn:
        return conn.execute(
            "INSERT INTO subscriptions(user, kind, target, severity, created_at) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(user, kind, target) DO UPDATE SET severity = excluded.severity RETURNING id",
            [user, kind, target, severity, database.now()]).fetchone()[0]


def unsubscribe(grid: Grid, subscription_id: int, *, user: str) -> None:
    """Remove a subscription (its unsent messages go with it): its owner's or, for an admin, any."""
    with database.write(grid.db) as conn:
        row = conn.execute("SELECT user FROM subscriptions WHERE id = ?", [subscription_id]).fetchone() \
            if _storable(subscription_id) else None
        if row is None:
            raise NotFound(f"subscription {subscription_id}: no such subscription")
        if row[0] != user and not is_admin(grid.config, user):
            raise Refused(f"subscription {subscription_id}: belongs to {row[0]}, not to {user}")
        conn.execute("DELETE FROM subscriptions WHERE id = ?", [subscription_id])


def subscriptions(grid: Grid, *, user: str, all_users: bool = False) -> list[dict[str, Any]]:
    """``user``'s subscriptions (an admin may ask for everyone's) with their messages' fate."""
    if all_users:
        require_admin(grid.config, user, "listing everyone's subscriptions")
    rows = list(grid.db.query(
        "SELECT s.id, s.user, s.kind, s.target, s.severity, s.created_at, "
        "count(o.id) FILTER (WHERE o.state = 'sent') AS sent, "
        "count(o.id) FILTER (WHERE o.state = 'pending') AS pending, "
        "count(o.id) FILTER (WHERE o.state = 'dead') AS failed, "
        "(SELECT last_error FROM outbox WHERE subscription_id = s.id AND last_error IS NOT NULL "
        " ORDER BY id DESC LIMIT 1) AS last_error "
        "FROM subscriptions s LEFT JOIN outbox o ON o.subscription_id = s.id "
        f"{'' if all_users else 'WHERE s.user = ?'} GROUP BY s.id ORDER BY s.id", [] if all_users else [user]))
    for row in rows:
        row["target"] = shown_target(row["target"])
    return rows


def shown_target(target: str) -> str:
    """A subscription's target as shown to people: the password in a webhook URL's userinfo
    masked (``https://bot:***@host/...``), since secrets never appear in output."""
    parts = urlsplit(target)
    if parts.password is None:
        return target
    userinfo, _, host = parts.netloc.rpartition("@")
    return target.replace(parts.netloc, f"{userinfo.split(':', 1)[0]}:***@{host}", 1)


def clusters(grid: Grid) -> list[dict[str, Any]]:
    """Every cluster with its capacity (asked live), cigri's own use of it and the most jobs it
    takes from cigri (``max_jobs``, or the submit limit learned; None: no cap)."""
    result = []
    used = cluster_caps.active_jobs(grid.db.conn)
    caps = cluster_caps.caps(grid.db.conn, database.now())
    for row in grid.db.query("SELECT * FROM clusters ORDER BY name"):
        entry: dict[str, Any] = {"name": row["name"], "backend": row["backend"], "source": row["source"],
                                 "blacklisted": bool(row["blacklisted"]),
                                 "blacklist_reason": row["blacklist_reason"],
                                 "used_by_cigri": used.get(row["id"], 0), "max_jobs": caps.get(row["id"])}
        try:
            capacity = grid.backend(row["id"]).capacity()
            entry.update(total_slots=capacity.total_slots, free_slots=capacity.free_slots,
                         free_memory_mb=capacity.free_memory_mb, queued_jobs=capacity.queued_jobs, error=None)
        except Exception as error:  # a broken cluster is reported, not fatal for the listing
            entry.update(total_slots=None, free_slots=None, free_memory_mb=None, queued_jobs=None, error=str(error))
        result.append(entry)
    return result


_USAGE = """
WITH samples AS (
    SELECT cluster_id, at, waiting, running, total_slots, free_slots,
           coalesce(lead(at) OVER (PARTITION BY cluster_id ORDER BY at), at + :period) - at AS span
    FROM counts WHERE cluster_id IN (SELECT id FROM clusters) AND at >= :since),
figures AS (
    SELECT cluster_id, count(*) AS samples, min(at) AS since, max(at) AS until,
           round(avg(total_slots), 3) AS mean_total_slots, round(avg(free_slots), 3) AS mean_free_slots,
           round(avg(running), 3) AS mean_running, max(running) AS max_running,
           round(avg(waiting), 3) AS mean_waiting, round(sum(running * span) / 3600, 3) AS cigri_job_hours
    FROM samples GROUP BY cluster_id)
SELECT c.name, coalesce(f.samples, 0) AS samples, f.since, f.until, f.mean_total_slots, f.mean_free_slots,
       f.mean_running, f.max_running, f.mean_waiting, f.cigri_job_hours
FROM clusters c LEFT JOIN figures f ON f.cluster_id = c.id ORDER BY c.name
"""


def usage(grid: Grid, hours: float) -> list[dict[str, Any]]:
    """Every cluster's use over the last ``hours``, from the counts each cycle samples (CiGri's
    grid_usage), in :func:`clusters`' order: means of its total and free slots and of cigri's
    running and waiting jobs, cigri's most running jobs, and the job-hours cigri ran there (each
    sample's running jobs until the cluster's next sample, the last one's for a cycle period).
    A cluster without a sample in the window has None for each figure."""
    if not 0 < hours < math.inf:  # also rejects nan
        raise InputError(f"hours: must be > 0 and finite, got {hours!r}")
    return list(grid.db.query(_USAGE, {"since": database.now() - hours * 3600,
                                       "period": grid.config.settings.cycle_period}))


# --- administration -----------------------------------------------------------------------

def add_cluster(grid: Grid, name: str, backend: str, options: dict[str, Any]) -> None:
    from cigri.config import _cluster_configs

    [cluster] = _cluster_configs({name: {"backend": backend, **options}})  # validates, raises ConfigError
    with database.write(grid.db) as conn:
        if conn.execute("SELECT 1 FROM clusters WHERE name = ?", [name]).fetchone():
            raise Refused(f"cluster {name} already exists")
        conn.execute("INSERT INTO clusters(name, backend, options, source) VALUES (?, ?, ?, 'admin')",
                     [name, backend, json.dumps(cluster.options, sort_keys=True)])


def remove_cluster(grid: Grid, name: str) -> None:
    """Remove an admin-added cluster no campaign names, with what only it refers to: its taps,
    its usage samples and its own events (a campaign's rows would block it: blacklist instead)."""
    with database.write(grid.db) as conn:
        row = conn.execute("SELECT id, source FROM clusters WHERE name = ?", [name]).fetchone()
        if row is None:
            raise NotFound(f"cluster {name}: no such cluster")
        if row[1] == "config":
            raise Refused(f"cluster {name} is defined in the configuration; remove it there")
        if conn.execute("SELECT 1 FROM campaign_properties WHERE cluster_id = ? LIMIT 1", [row[0]]).fetchone():
            raise Refused(f"cluster {name} is used by campaigns; blacklist it instead")
        for table in ("taps", "counts"):
            conn.execute(f"DELETE FROM {table} WHERE cluster_id = ?", [row[0]])
        conn.execute("DELETE FROM event_jobs WHERE event_id IN (SELECT id FROM events WHERE cluster_id = ?)", [row[0]])
        conn.execute("DELETE FROM events WHERE cluster_id = ?", [row[0]])
        conn.execute("DELETE FROM clusters WHERE id = ?", [row[0]])


def set_blacklist(grid: Grid, name: str, reason: str | None) -> None:
    """Blacklist (reason given) or unblacklist (reason None) a whole cluster."""
    with database.write(grid.db) as conn:
        row = conn.execute("SELECT id, blacklist_event_id FROM clusters WHERE name = ?", [name]).fetchone()
        if row is None:
            raise NotFound(f"cluster {name}: no such cluster")
        if row[1] is not None:  # an automatic blacklist: an admin's decision replaces it
            close(conn, "id = ?", [row[1]])
        conn.execute("UPDATE clusters SET blacklisted = ?, blacklist_reason = ?, blacklisted_at = ?, failures = 0 "
                     "WHERE id = ?", [reason is not None, reason, database.now() if reason else None, row[0]])


def test_cluster(grid: Grid, name: str, directory: str | None, timeout: float, *, user: str) -> dict[str, Any]:
    """Submit a tiny job to a cluster and follow it to its end (CiGri's grid_test_cluster), in
    ``directory``, else the home of the account that runs ``user``'s jobs there (not /tmp:
    OAR's REST API copies its script from /tmp into the job's directory, and fails on itself)."""
    import time

    from cigri.backends import JobSpec, RemoteState

    cluster_id = grid.cluster_ids().get(name)
    if cluster_id is None:
        raise NotFound(f"cluster {name}: no such cluster")
    backend = grid.backend(cluster_id)
    directory = directory or grid.cluster_homes(user)[name]
    key = f"test-{int(time.time() * 1000)}"
    spec = JobSpec(key=key, batch=key, name=f"cigri.test.{key}", argv=("/bin/echo", "cigri test"),
                   directory=directory, walltime_seconds=300, resources="core=1",
                   environment={"CIGRI_JOB_ID": key})
    started = time.monotonic()
    capacity = backend.capacity()
    remote_id = backend.submit([spec])[key]
    submitted = time.monotonic()
    while True:
        job = backend.poll([remote_id])[remote_id]
        if job.state not in (RemoteState.QUEUED, RemoteState.RUNNING):
            break
        if time.monotonic() - started > timeout:
            backend.cancel([remote_id])
            raise Refused(f"cluster {name}: test job {remote_id} still {job.state} after {timeout:.0f}s; cancelled")
        time.sleep(0.5)
    result = {"cluster": name, "remote_id": remote_id, "state": str(job.state), "exit_code": job.exit_code,
              "total_slots": capacity.total_slots, "free_slots": capacity.free_slots,
              "submit_seconds": round(submitted - started, 3),
              "round_trip_seconds": round(time.monotonic() - started, 3),
              "stdout": backend.output_tail(remote_id, "stdout", 5)}
    if job.state != RemoteState.COMPLETED or job.exit_code != 0:
        raise Refused(f"cluster {name}: test job ended {job.state} with exit code {job.exit_code}")
    return result


# --- fair share ---------------------------------------------------------------------------

def shares(grid: Grid) -> dict[str, Any]:
    """The live allocation explained: what the next cycle would give every class, user,
    campaign and cluster, asking each cluster its capacity now; nothing is written."""
    from cigri.metascheduler import allocate, gather

    capacities, unreachable = {}, []
    for cluster_id, name, blacklisted, reason in grid.db.execute(
            "SELECT id, name, blacklisted, blacklist_reason FROM clusters ORDER BY name"):
        if blacklisted:
            unreachable.append({"name": name, "error": f"blacklisted: {reason}" if reason else "blacklisted"})
            continue
        try:
            capacities[cluster_id] = grid.backend(cluster_id).capacity()
        except Exception as error:  # a broken cluster is left out, as the cycle does
            unreachable.append({"name": name, "error": str(error)})
    gathered = gather(grid, capacities, database.now())
    result = explain(gathered.scenario, allocate(grid.config, gathered.scenario))
    for campaign in result["campaigns"]:
        campaign["name"] = gathered.names.get(campaign["id"])
    result["clusters_left_out"] = unreachable
    return result


def read_scenario(path: Path) -> Any:
    """A scenario file of ``cigri shares --scenario`` or ``cigri simulate``, parsed: both read
    it here, so both refuse the same bad files, each with one line naming the file."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise InputError(f"{path}: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise InputError(f"{path}: not valid UTF-8: {error}") from None
    except (ValueError, RecursionError) as error:  # too deep, or an integer of too many digits
        raise InputError(f"{path}: not valid JSON: {error}") from None
    _refuse_non_finite(path, data)
    return data


def _refuse_non_finite(path: Path, data: Any) -> None:
    """Python's json reads NaN, Infinity and 1e999, which JSON has not: NaN passes every bound a
    schema or a check sets, and an allocation or report printed them back as invalid JSON."""
    stack = [("scenario", data)]
    while stack:  # not recursive: the parser takes nesting nearly as deep as the interpreter allows
        where, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"{path}: {where}: expected a finite number, got {json.dumps(value)}")
        if isinstance(value, dict):
            stack.extend((f"{where}.{key}", item) for key, item in reversed(value.items()))
        elif isinstance(value, list):
            stack.extend((f"{where}[{index}]", item) for index, item in reversed(list(enumerate(value))))


def shares_of_scenario(path: Path, config: Config) -> dict[str, Any]:
    """``cigri shares --scenario``: the allocation of a hypothetical grid read from a JSON file."""
    from cigri.metascheduler import allocate, fairshare

    data = read_scenario(path)
    try:
        scenario = fairshare.scenario_from_json(data)
    except ValueError as error:
        raise InputError(f"{path}: {error}") from None
    return explain(scenario, allocate(config, scenario))


def explain(scenario: Scenario, allocation: Allocation) -> dict[str, Any]:
    """The allocation's JSON, with each class's priority, weight and policy."""
    from cigri.metascheduler import fairshare

    result = fairshare.allocation_to_json(allocation)
    specs = {c.name: c for c in scenario.classes or (fairshare.ClassSpec("default"),)}
    for entry in result["classes"]:
        spec = specs[entry["name"]]
        entry.update(priority=spec.priority, weight=spec.weight, policy=str(spec.policy))
    return result


# --- classes and users --------------------------------------------------------------------

@dataclass(frozen=True)
class _Load:
    """One active campaign: its class as the metascheduler reads it, its tasks in the bag and
    its held jobs (task jobs not marked for a kill; submitting ones count as waiting)."""

    id: int
    user: str
    class_name: str
    pending: int
    waiting: int
    running: int


def _loads(grid: Grid) -> list[_Load]:
    """Every active campaign's load, from the database only (no cluster is asked), in the class
    it is scheduled in (:meth:`Config.class_of`)."""
    jobs: dict[tuple[int, bool], int] = defaultdict(int)
    for campaign_id, running, count in grid.db.execute(
            f"SELECT campaign_id, state = ?, count(*) FROM jobs WHERE state IN {sql_in(JOB_ACTIVE)} "
            "AND kind = 'task' AND kill_reason IS NULL GROUP BY campaign_id, state = ?",
            [JobState.RUNNING, JobState.RUNNING]):
        jobs[(campaign_id, bool(running))] = count
    campaigns = grid.db.execute(f"SELECT id, user, class FROM campaigns WHERE state IN {sql_in(CAMPAIGN_ACTIVE)} "
                                "ORDER BY id").fetchall()
    return [_Load(i, user, grid.config.class_of(name).name, bag.count(grid.db, i, (TaskState.PENDING,)),
                  jobs[(i, False)], jobs[(i, True)]) for i, user, name in campaigns]


def _in_order(config: Config) -> list[ClassConfig]:
    """The classes in the metascheduler's evaluation order; without any, its implicit fair-share ``default``."""
    return sorted(config.classes or (ClassConfig("default"),), key=lambda c: (c.priority, c.name))


def _totals(loads: list[_Load]) -> dict[str, int]:
    return {"pending": sum(load.pending for load in loads), "waiting": sum(load.waiting for load in loads),
            "running": sum(load.running for load in loads)}


def classes(grid: Grid) -> list[dict[str, Any]]:
    """Every class as configured, in evaluation order, with what its active campaigns hold and
    wait for now (``cigri classes``): read from the configuration and the database only, so it
    answers while clusters are down."""
    loads, default = _loads(grid), grid.config.default_class()
    result = []
    for klass in _in_order(grid.config):
        members = [load for load in loads if load.class_name == klass.name]
        result.append({"name": klass.name, "priority": klass.priority, "weight": klass.weight, "policy": klass.policy,
                       "users": None if klass.users is None else list(klass.users),
                       "clusters": None if klass.clusters is None else list(klass.clusters),
                       "default": klass.name == default, "finalize": klass.finalize, "campaigns": len(members),
                       "users_active": len({load.user for load in members}), **_totals(members)})
    return result


def _user_settings(user: UserConfig) -> dict[str, Any]:
    return {"allotment": user.allotment, "allotment_memory_gb": user.allotment_memory_gb,
            "affinity": dict(user.affinity)}


def users(grid: Grid) -> dict[str, Any]:
    """The ``[users]`` defaults, and every user configured or with an active campaign (by name)
    with the effective allotment and affinity, the classes it may submit to, its load, and the
    cores and memory its jobs hold in fixed_share and reserve classes: what the allotment caps,
    each task costing what the metascheduler charges it (``cigri users``). No cluster is asked."""
    from cigri.metascheduler.metascheduler import task_cost

    config, loads = grid.config, _loads(grid)
    ordered = _in_order(config)
    capped = [load for load in loads if config.class_of(load.class_name).counts_allotment]
    costs = {i: task_cost(values) for i, values in grid.campaign_properties([load.id for load in capped]).items()}
    result = []
    for name in sorted(set(config.users.named) | {load.user for load in loads}):
        mine = [load for load in loads if load.user == name]
        held = [(load.waiting + load.running, *costs[load.id]) for load in mine if load.id in costs]
        memory_gb = sum((jobs * memory for jobs, _, memory in held), 0.0)
        result.append({"name": name, "configured": name in config.users.named, **_user_settings(config.users.of(name)),
                       "classes": [c.name for c in ordered if c.users is None or name in c.users],
                       "campaigns": len(mine), **_totals(mine),
                       "held_non_preemptable": {"cores": sum(jobs * cores for jobs, cores, _ in held),
                                                "memory_gb": round(memory_gb, 3)}})
    return {"default": _user_settings(config.users.default), "users": result}
