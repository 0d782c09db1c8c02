"""Clusters: their capacity and cigri's use of them, their history, and the admin's operations."""

from __future__ import annotations

import json
import sqlite3
import math
from typing import Any

from cigri import cluster_caps
from cigri import db as database
from cigri.db import campaigns as stored_campaigns
from cigri.db import clusters as stored_clusters
from cigri.db import counts as stored_counts
from cigri.db import events as stored_events
from cigri.db import jobs as stored_jobs
from cigri.errors import InputError, NotFound, Refused
from cigri.events import MANUALLY_DISABLED, close, record
from cigri.grid import Grid
from cigri.predictor import stress
from cigri.users import require_admin


def list_clusters(grid: Grid, *, cluster_id: int | None = None) -> list[dict[str, Any]]:
    """Every cluster (``cluster_id``: that one only) with its capacity (asked live), cigri's own use of it (``used_by_cigri``:
    its jobs running there; ``queued_by_cigri``: those it sent, or is sending, that wait in its
    queue: they use no slot yet), the most jobs it takes from cigri (``max_jobs``, or the
    submit limit learned; None: no cap) and its stress (its users' waiting jobs per free slot,
    as the predictor measures it), its ``stress_factor`` and whether it is ``under_stress``."""
    result = []
    jobs = stored_jobs.use_per_cluster(grid.db.conn)
    stressed = stored_events.stressed_clusters(grid.db.conn)
    caps = cluster_caps.caps(grid.db.conn, database.now())
    for row in stored_clusters.listing(grid.db.conn, cluster_id):
        running, queued, waiting = jobs.get(row["id"], (0, 0, 0))
        entry: dict[str, Any] = {"id": row["id"], "name": row["name"], "backend": row["backend"],
                                 "source": row["source"], "blacklisted": bool(row["blacklisted"]),
                                 "blacklist_reason": row["blacklist_reason"], "used_by_cigri": running,
                                 "queued_by_cigri": queued, "max_jobs": caps.get(row["id"]),
                                 "stress_factor": json.loads(row["options"]).get("stress_factor",
                                                                                 grid.config.runner.stress_factor),
                                 "under_stress": row["id"] in stressed}
        try:
            capacity = grid.backend(row["id"]).capacity()
            entry.update(total_slots=capacity.total_slots, free_slots=capacity.free_slots,
                         free_memory_mb=capacity.free_memory_mb, queued_jobs=capacity.queued_jobs, error=None,
                         stress=round(stress(max(0, capacity.queued_jobs - waiting), capacity.free_slots), 3))
        except Exception as error:  # a broken cluster is reported, not fatal for the listing
            entry.update(total_slots=None, free_slots=None, free_memory_mb=None, queued_jobs=None, error=str(error),
                         stress=None)
        result.append(entry)
    return result


def usage(grid: Grid, hours: float) -> list[dict[str, Any]]:
    """Every cluster's use over the last ``hours``, from the counts each cycle samples (CiGri's
    grid_usage), in :func:`clusters`' order: means of its total and free slots and of cigri's
    running and waiting jobs, cigri's most running jobs, and the job-hours cigri ran there (each
    sample's running jobs until the cluster's next sample, the last one's for a cycle period).
    A cluster without a sample in the window has None for each figure."""
    if not 0 < hours < math.inf:  # also rejects nan
        raise InputError(f"hours: must be > 0 and finite, got {hours!r}")
    return stored_counts.usage(grid.db.conn, database.now() - hours * 3600, grid.config.settings.cycle_period)


SAMPLES_PER_BUCKET = 8  # the most samples a bucket of grid_usage averages


def grid_usage(grid: Grid, *, since: float | None = None, until: float | None = None,
               points: int = 500) -> dict[str, Any]:
    """Every cluster's use between ``since`` and ``until`` (epoch seconds; default the last
    day), from the counts each cycle samples (CiGri's ``/gridusage``): per cluster, at most
    ``points`` buckets of equal length, each the means of the cluster's total, used and free
    slots and of cigri's running and waiting jobs over at most :data:`SAMPLES_PER_BUCKET` of
    its samples, evenly spread across it (every sample when the cycles took fewer; ``samples``
    says how many). A month of samples is read in the time of a few thousand rows."""
    until = database.now() if until is None else until
    since = until - 86_400 if since is None else since
    if not (math.isfinite(since) and math.isfinite(until) and since < until):
        raise InputError("from, to: expected epoch seconds with from < to", field="from")
    if points < 1:
        raise InputError("points: must be >= 1", field="points")
    step = max(grid.config.settings.cycle_period, (until - since) / points)
    sub = step / SAMPLES_PER_BUCKET
    series = {}
    for cluster_id, name in stored_clusters.ids_and_names(grid.db.conn):
        rows = stored_counts.series(grid.db.conn, cluster_id, since, until, step, sub)
        series[name] = [{"at": round(since + row.pop("bucket") * step, 3), **row} for row in rows]
    return {"from": since, "to": until, "step": step, "clusters": series}


def first_sample(grid: Grid) -> float | None:
    """When the oldest sample of the grid's use still kept was taken (None: none yet): how far
    back :func:`grid_usage` has anything to say."""
    return stored_counts.first_sample(grid.db.conn)


def cluster_table(grid: Grid) -> list[dict[str, Any]]:
    """Every cluster as the database holds it, with its backend options (``cigri cluster
    list``): names of hosts, accounts and files, never a secret's content."""
    rows = stored_clusters.as_stored(grid.db.conn)
    for row in rows:
        row["options"] = json.loads(row["options"])
        row["blacklisted"] = bool(row["blacklisted"])
    return rows


def add_cluster(grid: Grid, name: str, backend: str, options: dict[str, Any], *, user: str) -> None:
    """Add a cluster to the database after checking its keys (an admin's operation)."""
    require_admin(grid.config, user, "adding a cluster")
    with database.write(grid.db) as conn:
        insert_cluster(conn, name, backend, options)


def insert_cluster(conn: sqlite3.Connection, name: str, backend: str, options: dict[str, Any]) -> int:
    """Store a new cluster, its keys checked as the configuration's, in the caller's transaction
    (``cigri import-v3`` holds it there before anything can see it); return its id."""
    from cigri.config import _cluster_configs

    [cluster] = _cluster_configs({name: {"backend": backend, **options}})  # validates, raises ConfigError
    if stored_clusters.exists(conn, name):
        raise Refused(f"cluster {name} already exists")
    return stored_clusters.insert_admin_added(conn, name, backend, json.dumps(cluster.options, sort_keys=True))


def remove_cluster(grid: Grid, name: str, *, user: str) -> None:
    """Remove an admin-added cluster no campaign names, with what only it refers to: its taps,
    its usage samples and its own events (a campaign's rows would block it: blacklist instead)."""
    require_admin(grid.config, user, "removing a cluster")
    with database.write(grid.db) as conn:
        row = stored_clusters.id_and_source(conn, name)
        if row is None:
            raise NotFound(f"cluster {name}: no such cluster")
        if row[1] == "config":
            raise Refused(f"cluster {name} is defined in the configuration; remove it there")
        if stored_campaigns.cluster_in_use(conn, row[0]):
            raise Refused(f"cluster {name} is used by campaigns; blacklist it instead")
        stored_campaigns.forget_cluster_taps(conn, row[0])
        stored_counts.forget_cluster(conn, row[0])
        stored_events.delete_cluster_events(conn, row[0])
        stored_clusters.delete(conn, row[0])


def set_blacklist(grid: Grid, name: str, reason: str | None, *, user: str) -> None:
    """Blacklist (reason given) or unblacklist (reason None) a whole cluster (an admin's decision)."""
    require_admin(grid.config, user, "blacklisting a cluster" if reason is not None else "unblacklisting a cluster")
    with database.write(grid.db) as conn:
        row = stored_clusters.blacklist_holder(conn, name)
        if row is None:
            raise NotFound(f"cluster {name}: no such cluster")
        if row[1] is not None:  # the blacklist there was: an admin's decision replaces it
            close(conn, *stored_events.fixable(event_id=row[1]))
        event_id = None if reason is None else record(conn, MANUALLY_DISABLED, f"cluster {name} disabled by {user}: "
                                                      f"{reason}", cluster_id=row[0])
        stored_clusters.set_blacklist(conn, row[0], reason, database.now() if reason else None, event_id)


def test_cluster(grid: Grid, name: str, directory: str | None, timeout: float, *, user: str) -> dict[str, Any]:
    """Submit a tiny job to a cluster as ``user`` and follow it to its end (CiGri's
    grid_test_cluster), in ``directory``, else the home of the account that runs ``user``'s jobs
    there (not /tmp: OAR's REST API copies its script from /tmp into the job's directory, and
    fails on itself). An admin's operation."""
    require_admin(grid.config, user, "testing a cluster")
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
                   environment={"CIGRI_JOB_ID": key}, user=user)
    started = time.monotonic()
    capacity = backend.capacity()
    remote_id = backend.submit([spec])[key]
    submitted = time.monotonic()
    while True:
        job = backend.poll([remote_id])[remote_id]
        if job.state not in (RemoteState.QUEUED, RemoteState.RUNNING):
            break
        if time.monotonic() - started > timeout:
            backend.cancel([remote_id], user)
            raise Refused(f"cluster {name}: test job {remote_id} still {job.state} after {timeout:.0f}s; cancelled")
        time.sleep(0.5)
    result = {"cluster": name, "remote_id": remote_id, "state": str(job.state), "exit_code": job.exit_code,
              "total_slots": capacity.total_slots, "free_slots": capacity.free_slots,
              "submit_seconds": round(submitted - started, 3),
              "round_trip_seconds": round(time.monotonic() - started, 3),
              "stdout": backend.output_tail(remote_id, "stdout", 5, user)}
    if job.state != RemoteState.COMPLETED or job.exit_code != 0:
        raise Refused(f"cluster {name}: test job ended {job.state} with exit code {job.exit_code}")
    return result
