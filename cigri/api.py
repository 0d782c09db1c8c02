"""Use cases: what users and admins can ask of cigri. The CLI only calls these and renders."""

from __future__ import annotations

import getpass
import json
import os
import sqlite3
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cigri import db as database
from cigri.errors import InputError, NotFound, Refused
from cigri.grid import Grid
from cigri.jdl import iter_params, parse_jdl
from cigri.jdl.params import describe
from cigri.jdl.parser import ParamSource, cluster_keys
from cigri.states import CAMPAIGN_ACTIVE, JOB_ACTIVE, TASK_OPEN, CampaignState, KillReason, TaskState, sql_in

if TYPE_CHECKING:
    from cigri.metascheduler.fairshare import Allocation, Scenario

INSERT_CHUNK = 10_000


def current_user() -> str:
    return os.environ.get("CIGRI_USER") or getpass.getuser()


# --- submission -------------------------------------------------------------------------

def submit(grid: Grid, jdl_text: str, *, base_dir: Path, user: str, source: str = "JDL") -> tuple[int, int]:
    """Create a campaign and all its tasks in one transaction; return (campaign id, tasks)."""
    clusters = grid.cluster_ids()
    settings = grid.config.settings
    spec = parse_jdl(jdl_text, known_clusters=sorted(clusters), user=user, base_dir=base_dir,
                     default_walltime=settings.default_walltime,
                     default_resources=settings.default_resources, source=source,
                     classes=grid.config.class_users(), default_class=grid.config.default_class())
    with database.write(grid.db) as conn:
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
        count = _insert_tasks(conn, campaign_id, spec.params)
        if count == 0:
            raise InputError(f"{source}: the campaign has no parameters")
    return campaign_id, count


def extend(grid: Grid, campaign_id: int, param_file: Path, *, user: str) -> int:
    """Add a parameter file's tasks to an existing campaign (``gridsub -c N -F FILE``)."""
    with database.write(grid.db) as conn:
        campaign = _owned_campaign(conn, campaign_id, user)
        if campaign["state"] == CampaignState.CANCELLED:
            raise Refused(f"campaign {campaign_id} is cancelled")
        count = _insert_tasks(conn, campaign_id, ParamSource(file=param_file))
        conn.execute("UPDATE campaigns SET state = ?, finished_at = NULL WHERE id = ? AND state = ?",
                     [CampaignState.IN_TREATMENT, campaign_id, CampaignState.TERMINATED])
    return count


def _insert_tasks(conn: sqlite3.Connection, campaign_id: int, source: ParamSource) -> int:
    """Stream parameters into the bag in chunks; a duplicate name aborts the transaction."""
    params = iter_params(source)
    total = 0
    while chunk := list(islice(params, INSERT_CHUNK)):
        before = conn.total_changes
        try:
            conn.executemany("INSERT INTO tasks(campaign_id, name, param) VALUES (?, ?, ?)",
                             [(campaign_id, name, line) for _, name, line in chunk])
        except sqlite3.IntegrityError:
            position, name, _ = chunk[conn.total_changes - before]  # rows before it were inserted
            raise InputError(f"{describe(source, position)}: duplicate task name {name!r} "
                             "(the first word of a line names its task)") from None
        total += len(chunk)
    conn.execute("UPDATE campaigns SET nb_tasks = nb_tasks + ? WHERE id = ?", [total, campaign_id])
    return total


# --- control ------------------------------------------------------------------------------

def _owned_campaign(conn: sqlite3.Connection, campaign_id: int, user: str) -> dict[str, Any]:
    row = conn.execute("SELECT id, user, state FROM campaigns WHERE id = ?", [campaign_id]).fetchone()
    if row is None:
        raise NotFound(f"campaign {campaign_id}: no such campaign")
    if row[1] != user and user != "root":
        raise Refused(f"campaign {campaign_id}: belongs to {row[1]}, not to {user}")
    return {"id": row[0], "user": row[1], "state": row[2]}


def cancel(grid: Grid, campaign_id: int, *, user: str) -> None:
    """Cancel a campaign: its open tasks are cancelled now; nikita kills its jobs next cycle."""
    with database.write(grid.db) as conn:
        campaign = _owned_campaign(conn, campaign_id, user)
        if campaign["state"] not in CAMPAIGN_ACTIVE:
            raise Refused(f"campaign {campaign_id} is already {campaign['state']}")
        conn.execute("UPDATE campaigns SET state = ?, finished_at = ? WHERE id = ?",
                     [CampaignState.CANCELLED, database.now(), campaign_id])
        conn.execute(f"UPDATE tasks SET state = ? WHERE campaign_id = ? AND state IN {sql_in(TASK_OPEN)}",
                     [TaskState.CANCELLED, campaign_id])
        conn.execute(f"UPDATE jobs SET kill_reason = ? WHERE campaign_id = ? AND state IN {sql_in(JOB_ACTIVE)}",
                     [KillReason.USER, campaign_id])


def pause(grid: Grid, campaign_id: int, *, user: str) -> None:
    _move_campaign(grid, campaign_id, user, CampaignState.IN_TREATMENT, CampaignState.PAUSED)


def resume(grid: Grid, campaign_id: int, *, user: str) -> None:
    _move_campaign(grid, campaign_id, user, CampaignState.PAUSED, CampaignState.IN_TREATMENT)


def _move_campaign(grid: Grid, campaign_id: int, user: str, before: CampaignState, after: CampaignState) -> None:
    with database.write(grid.db) as conn:
        campaign = _owned_campaign(conn, campaign_id, user)
        if campaign["state"] != before:
            raise Refused(f"campaign {campaign_id} is {campaign['state']}, not {before}")
        conn.execute("UPDATE campaigns SET state = ? WHERE id = ? AND state = ?", [after, campaign_id, before])


def cancel_job(grid: Grid, job_id: int, *, user: str) -> None:
    """Ask nikita to kill one job; its task is then cancelled, not resubmitted."""
    with database.write(grid.db) as conn:
        row = conn.execute("SELECT campaign_id, state FROM jobs WHERE id = ?", [job_id]).fetchone()
        if row is None:
            raise NotFound(f"job {job_id}: no such job")
        _owned_campaign(conn, row[0], user)
        if row[1] not in JOB_ACTIVE:
            raise Refused(f"job {job_id} is already {row[1]}")
        conn.execute("UPDATE jobs SET kill_reason = ? WHERE id = ?", [KillReason.USER, job_id])


# --- status -------------------------------------------------------------------------------

TASK_COUNT_KEYS = ("total", "pending", "waiting", "running", "terminated", "failed", "cancelled")


def _task_counts(grid: Grid, campaign_id: int) -> dict[str, int]:
    counts = dict.fromkeys(TASK_COUNT_KEYS, 0)
    for state, n in grid.db.execute("SELECT state, count(*) FROM tasks WHERE campaign_id = ? GROUP BY state",
                                    [campaign_id]):
        counts[state] = n
    counts["total"] = sum(counts[s] for s in TaskState)
    return counts


def _campaign_row(grid: Grid, campaign_id: int) -> dict[str, Any]:
    rows = list(grid.db.query("SELECT * FROM campaigns WHERE id = ?", [campaign_id]))
    if not rows:
        raise NotFound(f"campaign {campaign_id}: no such campaign")
    return rows[0]


def campaign_summary(grid: Grid, campaign_id: int) -> dict[str, Any]:
    """The stable ``--json`` document of one campaign (see README, "gridstat --json")."""
    row = _campaign_row(grid, campaign_id)
    counts = _task_counts(grid, campaign_id)
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
        "replicas": grid.db.execute(  # extra copies of running tasks (finalize scheduler)
            f"SELECT count(*) - count(DISTINCT task_id) FROM jobs WHERE campaign_id = ? AND kind = 'task' "
            f"AND state IN {sql_in(JOB_ACTIVE)}", [campaign_id]).fetchone()[0],
    }


def campaign_detail(grid: Grid, campaign_id: int) -> dict[str, Any]:
    """Summary plus per-cluster progress, throughput, durations and remaining time.

    Reads only the bag's index, the active jobs and ``campaign_stats``: it costs the same
    for ten tasks as for a million.
    """
    summary = campaign_summary(grid, campaign_id)
    names = {cid: name for name, cid in grid.cluster_ids().items()}
    per_cluster: dict[int, dict[str, Any]] = {}

    def entry(cluster_id: int) -> dict[str, Any]:
        return per_cluster.setdefault(cluster_id, {"cluster": names[cluster_id], "jobs": {}})

    for cluster_id, state, n in grid.db.execute(
            f"SELECT cluster_id, state, count(*) FROM jobs WHERE campaign_id = ? AND state IN {sql_in(JOB_ACTIVE)} "
            f"AND kind = 'task' GROUP BY cluster_id, state", [campaign_id]):
        entry(cluster_id)["jobs"][state] = n
    done = duration_sum = 0.0
    first_start, last_end = None, None
    for row in grid.db.query("SELECT * FROM campaign_stats WHERE campaign_id = ?", [campaign_id]):
        cluster = entry(row["cluster_id"])
        cluster["jobs"]["terminated"] = row["terminated"]
        cluster["jobs"]["ended_otherwise"] = row["failed"]
        cluster["average_duration"] = row["duration_sum"] / row["terminated"] if row["terminated"] else None
        done += row["terminated"]
        duration_sum += row["duration_sum"]
        first_start = min(filter(None, (first_start, row["first_start"])), default=None)
        last_end = max(filter(None, (last_end, row["last_end"])), default=None)
    throughput = done / (last_end - first_start) if done and first_start and last_end and last_end > first_start else None
    remaining = summary["tasks"]["pending"] + summary["tasks"]["waiting"] + summary["tasks"]["running"]
    summary.update({
        "clusters": list(per_cluster.values()),
        "average_duration": duration_sum / done if done else None,
        "throughput_per_second": throughput,
        "remaining_seconds": 0 if not remaining else (remaining / throughput if throughput else None),
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
    for task in grid.db.query("SELECT id, name, param, state, attempts FROM tasks WHERE campaign_id = ? "
                              "ORDER BY id", [campaign_id]):
        task["jobs"] = jobs.get(task["id"], [])
        yield task


def job_info(grid: Grid, job_id: int) -> dict[str, Any]:
    rows = list(grid.db.query(
        "SELECT j.*, c.name AS cluster, t.name AS task, t.param FROM jobs j JOIN clusters c ON c.id = j.cluster_id "
        "LEFT JOIN tasks t ON t.id = j.task_id WHERE j.id = ?", [job_id]))
    if not rows:
        raise NotFound(f"job {job_id}: no such job")
    return rows[0]


def job_output(grid: Grid, job_id: int, stream: str, *, user: str, lines: int = 1000) -> str:
    """The tail of a job's stdout or stderr; only its owner may read it."""
    job = job_info(grid, job_id)
    campaign = _campaign_row(grid, job["campaign_id"])
    if campaign["user"] != user and user != "root":
        raise Refused(f"job {job_id}: belongs to {campaign['user']}, not to {user}")
    if not job["remote_id"]:
        raise Refused(f"job {job_id} has not reached its cluster yet")
    return grid.backend(job["cluster_id"]).output_tail(job["remote_id"], stream, lines)


def events(grid: Grid, *, campaign_id: int | None, include_closed: bool) -> list[dict[str, Any]]:
    where, args = [], []
    if campaign_id is not None:
        _campaign_row(grid, campaign_id)
        where.append("e.campaign_id = ?")
        args.append(campaign_id)
    if not include_closed:
        where.append("e.state = 'open'")
    clause = ("WHERE " + " AND ".join(where)) if where else ""
    return list(grid.db.query(
        f"SELECT e.id, e.class, e.code, e.state, e.campaign_id, c.name AS cluster, e.job_id, e.task_id, "
        f"e.message, e.stderr_tail, e.created_at, e.closed_at FROM events e "
        f"LEFT JOIN clusters c ON c.id = e.cluster_id {clause} ORDER BY e.id", args))


def clusters(grid: Grid) -> list[dict[str, Any]]:
    """Every cluster with its capacity (asked live) and cigri's own use of it."""
    result = []
    used = dict(grid.db.execute(
        f"SELECT cluster_id, count(*) FROM jobs WHERE state IN {sql_in(JOB_ACTIVE)} GROUP BY cluster_id"))
    for row in grid.db.query("SELECT * FROM clusters ORDER BY name"):
        entry: dict[str, Any] = {"name": row["name"], "backend": row["backend"], "source": row["source"],
                                 "blacklisted": bool(row["blacklisted"]),
                                 "blacklist_reason": row["blacklist_reason"],
                                 "used_by_cigri": used.get(row["id"], 0)}
        try:
            capacity = grid.backend(row["id"]).capacity()
            entry.update(total_slots=capacity.total_slots, free_slots=capacity.free_slots,
                         queued_jobs=capacity.queued_jobs, error=None)
        except Exception as error:  # a broken cluster is reported, not fatal for the listing
            entry.update(total_slots=None, free_slots=None, queued_jobs=None, error=str(error))
        result.append(entry)
    return result


# --- administration -----------------------------------------------------------------------

def add_cluster(grid: Grid, name: str, backend: str, options: dict[str, Any]) -> None:
    from cigri.config import _cluster_configs

    _cluster_configs({name: {"backend": backend, **options}})  # validates, raises ConfigError
    with database.write(grid.db) as conn:
        if conn.execute("SELECT 1 FROM clusters WHERE name = ?", [name]).fetchone():
            raise Refused(f"cluster {name} already exists")
        conn.execute("INSERT INTO clusters(name, backend, options, source) VALUES (?, ?, ?, 'admin')",
                     [name, backend, json.dumps(options, sort_keys=True)])


def remove_cluster(grid: Grid, name: str) -> None:
    with database.write(grid.db) as conn:
        row = conn.execute("SELECT id, source FROM clusters WHERE name = ?", [name]).fetchone()
        if row is None:
            raise NotFound(f"cluster {name}: no such cluster")
        if row[1] == "config":
            raise Refused(f"cluster {name} is defined in the configuration; remove it there")
        if conn.execute("SELECT 1 FROM campaign_properties WHERE cluster_id = ? LIMIT 1", [row[0]]).fetchone():
            raise Refused(f"cluster {name} is used by campaigns; blacklist it instead")
        conn.execute("DELETE FROM taps WHERE cluster_id = ?", [row[0]])
        conn.execute("DELETE FROM clusters WHERE id = ?", [row[0]])


def set_blacklist(grid: Grid, name: str, reason: str | None) -> None:
    """Blacklist (reason given) or unblacklist (reason None) a whole cluster."""
    with database.write(grid.db) as conn:
        cursor = conn.execute(
            "UPDATE clusters SET blacklisted = ?, blacklist_reason = ?, blacklisted_at = ? WHERE name = ?",
            [reason is not None, reason, database.now() if reason else None, name])
        if cursor.rowcount == 0:
            raise NotFound(f"cluster {name}: no such cluster")


def test_cluster(grid: Grid, name: str, directory: str, timeout: float) -> dict[str, Any]:
    """Submit a tiny job to a cluster and follow it to its end (CiGri's grid_test_cluster)."""
    import time

    from cigri.backends import JobSpec, RemoteState

    cluster_id = grid.cluster_ids().get(name)
    if cluster_id is None:
        raise NotFound(f"cluster {name}: no such cluster")
    backend = grid.backend(cluster_id)
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
    from cigri.metascheduler import fairshare, gather

    capacities, unreachable = {}, []
    for cluster_id, name, blacklisted in grid.db.execute("SELECT id, name, blacklisted FROM clusters ORDER BY name"):
        if blacklisted:
            unreachable.append({"name": name, "error": "blacklisted"})
            continue
        try:
            capacities[cluster_id] = grid.backend(cluster_id).capacity()
        except Exception as error:  # a broken cluster is left out, as the cycle does
            unreachable.append({"name": name, "error": str(error)})
    gathered = gather(grid.db.conn, grid.config, capacities, database.now())
    fraction = grid.config.metascheduler.preempt_fraction
    result = explain(gathered.scenario, fairshare.allocate(gathered.scenario, fraction))
    for campaign in result["campaigns"]:
        campaign["name"] = gathered.names.get(campaign["id"])
    result["clusters_left_out"] = unreachable
    return result


def shares_of_scenario(path: Path, preempt_fraction: float) -> dict[str, Any]:
    """``cigri shares --scenario``: the allocation of a hypothetical grid read from a JSON file."""
    from cigri.metascheduler import fairshare

    try:
        data = json.loads(path.read_text())
    except OSError as error:
        raise InputError(f"{path}: {error.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise InputError(f"{path}: not valid JSON: {error}") from None
    try:
        scenario = fairshare.scenario_from_json(data)
    except ValueError as error:
        raise InputError(f"{path}: {error}") from None
    return explain(scenario, fairshare.allocate(scenario, preempt_fraction))


def explain(scenario: Scenario, allocation: Allocation) -> dict[str, Any]:
    """The allocation's JSON with per-class and per-user totals (running, target, demand)."""
    from cigri.metascheduler import fairshare

    result = fairshare.allocation_to_json(allocation)
    totals = dict.fromkeys(("campaigns", "demand", "running", "target", "preempt"), 0)
    classes = {c.name: {"name": c.name, "priority": c.priority, "weight": c.weight, "policy": str(c.policy), **totals}
               for c in scenario.classes or (fairshare.ClassSpec("default"),)}
    users: dict[str, dict[str, Any]] = {}
    for campaign in result["campaigns"]:
        for entry in (classes[campaign["class"]], users.setdefault(campaign["user"], {"name": campaign["user"], **totals})):
            entry["campaigns"] += 1
            entry["demand"] += campaign["demand"]
            for key in ("running", "target", "preempt"):
                entry[key] += sum(campaign[key].values())
    result["classes"] = list(classes.values())
    result["users"] = sorted(users.values(), key=lambda u: u["name"])
    return result
