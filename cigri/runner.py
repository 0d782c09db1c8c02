"""The runner: send the jobs the schedulers created, one submit call (one array) per batch of
at most ``api_chunk_size`` remote jobs, every batch in the cycle that formed it. How many jobs
a cycle creates is the taps' and the allocation's business; CiGri v3's one array per cycle on
top of them held an idle 1,000-core cluster to 100 new jobs a cycle.

Jobs are created in ``submitting`` before any remote call, keyed by cigri's job id; their batch
and their temporal group (:mod:`cigri.grouping`) are fixed in the database before the call too.
If the process dies during the call, the next runner sends the same batch again and the
backend's idempotent submit adopts what already started instead of starting it twice.

A cluster that refuses a batch outright (:class:`~cigri.errors.SubmissionRefused`: more cores
than it has, an unknown partition...) would refuse it forever: its jobs are forgotten, their
tasks go back to the head of the bag for the campaign's other clusters (no attempt counted),
and an opening ``SUBMISSION_ERROR`` event carrying the cluster's words keeps that cluster out
of the campaign until someone fixes it (CiGri's blacklist of a cluster for a campaign). With no
cluster left, the tasks wait in the bag and the event says so. Any other failure (unreachable,
timeout) leaves the jobs ``submitting``, to be re-sent next cycle.

A cluster that refuses a batch for its submit limit (:class:`~cigri.errors.SubmitLimitReached`)
takes the same jobs later: the batch is halved until what fits is sent (a few calls, once an
hour at most: :mod:`cigri.cluster_caps` remembers the limit), and the jobs that do not fit go
back to the head of the bag, nothing failed and no attempt counted. Where the cluster's words
also cover a job it can never run (slurmrestd), one job refused while the cluster holds none of
the campaign's is such a job: it is refused as any other.

A batch is built from its campaign's stored data: a task whose parameter line no shell could
split fails alone, and a campaign whose settings make building its batch raise is set aside
(:mod:`cigri.faults`); the rest of such a batch goes back to the head of the bag, to be formed
again without it.

A gang campaign's jobs (JDL ``gang``) are grouped by whole gangs, each gang one remote job that
starts its members together (:mod:`cigri.metascheduler.gangs`); a smaller last gang goes in a
batch of its own, as a batch's gangs are alike.
"""

from __future__ import annotations

import logging
import sqlite3
from collections import Counter, deque
from itertools import groupby
from typing import Any

from cigri import cluster_caps, faults, grouping
from cigri import db as database
from cigri.backends import JobSpec
from cigri.cycle_context import CycleContext
from cigri.db import jobs as stored_jobs
from cigri.db import tasks as stored_tasks
from cigri.db.events import refused_clusters
from cigri.errors import SubmissionRefused, SubmitLimitReached
from cigri.events import open_event, record
from cigri.jdl import split_param
from cigri.jdl.parser import oar_job_types
from cigri.jdl.walltime import format_walltime
from cigri.joblog import log_submission
from cigri.metascheduler import gangs, windows

log = logging.getLogger("cigri.runner")
DEFAULT_CHUNK = 100  # CiGri's array size; api_chunk_size per cluster
GANG_MARGIN = 60  # seconds a gang's job outlives its members' walltime: each member's own kill is seen first


def run(ctx: CycleContext) -> int:
    """Submit every batch to its cluster, none to a cluster left out of this cycle (a failed call
    leaves it out at once); return how many jobs were sent."""
    _form_batches(ctx)
    rows = stored_jobs.to_submit(ctx.grid.db.conn)
    settings = ctx.grid.campaign_properties(sorted({r["campaign_id"] for r in rows}))
    gang = gangs.sizes(ctx.grid.db.conn, settings)
    night = windows.is_night(ctx.grid.config.metascheduler, database.now())  # semi-best-effort runs normal by night
    batches = deque(list(group) for _, group in groupby(rows, key=lambda r: (r["cluster_id"], r["batch"])))
    at_limit: dict[int, SubmitLimitReached] = {}  # clusters that took no more this cycle, and their words
    refused: set[tuple[int, int]] = set()  # (campaign, cluster): refused this cycle, its other batches not sent
    sent = 0
    while batches:
        jobs = batches.popleft()
        campaign_id, cluster_id = jobs[0]["campaign_id"], jobs[0]["cluster_id"]
        if cluster_id not in ctx.capacities:
            continue
        if cluster_id in at_limit or (campaign_id, cluster_id) in refused or campaign_id in ctx.set_aside \
                or _unreadable(ctx, jobs):
            _withdraw(ctx, jobs)
            continue
        specs: list[JobSpec] | None = None
        with ctx.isolated("runner", campaign_id=campaign_id):
            values = settings[campaign_id][cluster_id]
            if gang[campaign_id] > 1:  # its members run side by side, each within its own walltime
                group_walltime = values["walltime"] + GANG_MARGIN
            else:
                group_walltime = grouping.group_walltime(max(Counter(j["run_group"] for j in jobs).values()),
                                                         values["walltime"],
                                                         grouping.target_seconds(values,
                                                                                 ctx.cluster_options(cluster_id)))
            specs = batch_specs(jobs, values, ctx.home(cluster_id, jobs[0]["user"]), group_walltime, night,
                                gang=gang[campaign_id] > 1)
        if specs is None:  # the campaign was set aside
            _withdraw(ctx, jobs)
            continue
        try:
            remote_ids = ctx.grid.backend(cluster_id).submit(specs)
        except SubmitLimitReached as error:
            halves = _halve(ctx, jobs)
            if halves:  # the first half may fit; whatever fits of the second is tried after it
                batches.extendleft(reversed(halves))
            elif error.maybe_job and not _holds(ctx, campaign_id, cluster_id):
                _refused(ctx, jobs, error)
                refused.add((campaign_id, cluster_id))
            else:
                at_limit[cluster_id] = error
                _withdraw(ctx, jobs)
            continue
        except SubmissionRefused as error:
            _refused(ctx, jobs, error)
            refused.add((campaign_id, cluster_id))
            continue
        except Exception as error:  # unreachable, timeout...: the jobs stay `submitting`, re-sent next cycle
            ctx.cluster_failed(cluster_id, "submission", error, campaign_id=campaign_id)
            continue
        log_submission(ctx.grid.config, ctx.grid.backend(cluster_id).name, jobs[0]["user"], specs, remote_ids)
        now = database.now()
        with database.write(ctx.grid.db) as conn:
            stored_jobs.submitted(conn, [(int(spec.key), remote_ids[spec.key]) for spec in specs], now)
        sent += len(specs)
    for cluster_id, words in at_limit.items():
        _learn_limit(ctx, cluster_id, words)
    return sent


def _unreadable(ctx: CycleContext, jobs: list[dict[str, Any]]) -> bool:
    """Fail the tasks of the batch whose parameter line cannot be split (:mod:`cigri.faults`);
    whether there were any."""
    unreadable = []
    for job in jobs:
        if job["kind"] == "task":
            try:
                split_param(job["param"])
            except ValueError as error:
                unreadable.append((job, f"its parameter line cannot be split as a shell would ({error})"))
    if unreadable:
        with database.write(ctx.grid.db) as conn:
            for job, why in unreadable:
                faults.set_aside_task(conn, job, why)
        for job, why in unreadable:
            log.error("campaign %s: task %s set aside: %s: %r", job["campaign_id"], job["task"], why,
                      job["param"][:200])
    return bool(unreadable)


def _halve(ctx: CycleContext, jobs: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Split a batch the cluster refused for its submit limit in two at a remote job's boundary
    (a group stays whole), the second half its own batch from now on, so that a re-sent half is
    the same half; [] when the batch is a single remote job."""
    starts = [i for i, job in enumerate(jobs) if job["run_group"] is None or job["run_group"] == job["id"]]
    if len(starts) < 2:
        return []
    cut = starts[len(starts) // 2]
    first, second = jobs[:cut], jobs[cut:]
    key = str(second[0]["id"])
    with database.write(ctx.grid.db) as conn:
        stored_jobs.rebatch(conn, [job["id"] for job in second], key)
    for job in second:
        job["batch"] = key
    return [first, second]


def _holds(ctx: CycleContext, campaign_id: int, cluster_id: int) -> bool:
    """Whether the cluster took some of the campaign's jobs: words that cover both a submit limit
    and a job the cluster can never run then mean the limit, as the same job was accepted."""
    return stored_jobs.holds(ctx.grid.db.conn, campaign_id, cluster_id)


def _withdraw(ctx: CycleContext, jobs: list[dict[str, Any]]) -> None:
    """These jobs never reached their cluster (at its submit limit, or refusing their campaign):
    they are forgotten and their tasks go back to the head of the bag, their attempt not counted
    (a task another copy still runs, a replica's, stays as it is)."""
    with database.write(ctx.grid.db) as conn:
        _forget(conn, [job["id"] for job in jobs])


def _forget(conn: sqlite3.Connection, job_ids: list[int]) -> None:
    stored_tasks.withdrawn(conn, stored_jobs.forget_unsent(conn, job_ids))


def _learn_limit(ctx: CycleContext, cluster_id: int, error: SubmitLimitReached) -> None:
    """Remember how many jobs the cluster let cigri hold, and say so (one event per limit)."""
    with database.write(ctx.grid.db) as conn:
        limit = cluster_caps.learn(conn, cluster_id, database.now())
        record(conn, "SUBMIT_LIMIT", f"the cluster takes no more than {limit} of cigri's jobs: cigri holds at most "
                                     f"{limit} there for {cluster_caps.LEARNED_SECONDS / 3600:g} h (`max_jobs` "
                                     f"sets it for good); it said: {error}",
               cluster_id=cluster_id, signature=f"{limit} jobs")
    log.info("cluster %s: submit limit reached at %s job(s): %s", ctx.name(cluster_id), limit, error)


def _refused(ctx: CycleContext, jobs: list[dict[str, Any]], error: Exception) -> None:
    """The cluster will never run these jobs of one campaign as described: they are forgotten,
    their tasks go back to the head of the bag, and an opening event with the cluster's words
    keeps the cluster out of the campaign (:func:`cigri.db.events.refused_clusters`) until it is
    fixed, saying which of its clusters are left."""
    campaign_id, cluster_id, user = jobs[0]["campaign_id"], jobs[0]["cluster_id"], jobs[0]["user"]
    name = ctx.name(cluster_id)
    log.warning("campaign %s: cluster %s refused %s job(s): %s", campaign_id, name, len(jobs), error)
    names = {cid: cluster for cluster, cid in ctx.grid.cluster_ids().items()}
    closed = ctx.grid.refused_cluster_ids(user)
    with database.write(ctx.grid.db) as conn:
        _forget(conn, [job["id"] for job in jobs])
        closed |= refused_clusters(conn).get(campaign_id, set())
        left = [names[k] for k in ctx.grid.campaign_properties([campaign_id])[campaign_id]
                if k != cluster_id and k not in closed]
        open_event(conn, "campaign", "SUBMISSION_ERROR",
                   f"cluster {name} refused {len(jobs)} job(s): {error}. Their tasks are back in the bag "
                   + (f"for the campaign's other clusters ({', '.join(left)})" if left else
                      f"and wait there: no other cluster of the campaign takes its jobs (griddel {campaign_id} "
                      "cancels it)")
                   + f"; no job of the campaign goes to {name} until this event is fixed (gridevents --fix, "
                     "once the cluster can run them)",
                   campaign_id=campaign_id, cluster_id=cluster_id)


def _form_batches(ctx: CycleContext) -> None:
    """Give new ``submitting`` jobs their batch and temporal group before any remote call, so a
    re-sent batch is the same batch. One batch per campaign, cluster and kind holds at most
    ``api_chunk_size`` remote jobs (lone jobs or groups)."""
    rows = stored_jobs.unbatched(ctx.grid.db.conn)
    if not rows:
        return
    settings = ctx.grid.campaign_properties(sorted({r[2] for r in rows}))
    gang = gangs.sizes(ctx.grid.db.conn, settings)
    updates = []
    for (cluster_id, campaign_id, kind), group in groupby(rows, key=lambda r: (r[1], r[2], r[3])):
        ids = [r[0] for r in group]
        if campaign_id in ctx.set_aside:  # unbatched, its jobs go back to the bag
            continue
        with ctx.isolated("runner", campaign_id=campaign_id):
            size = 1 if kind != "task" else gang[campaign_id] if gang[campaign_id] > 1 else \
                _group_size(ctx, campaign_id, cluster_id, settings[campaign_id].get(cluster_id, {}), len(ids))
            chunk = size * int(ctx.cluster_options(cluster_id).get("api_chunk_size", DEFAULT_CHUNK))
            updates += _batches(ids, size, chunk, alike_gangs=gang[campaign_id] > 1 and kind == "task")
    with database.write(ctx.grid.db) as conn:
        stored_jobs.set_batches(conn, updates)


def _batches(ids: list[int], size: int, chunk: int, alike_gangs: bool) -> list[tuple[str, int | None, int]]:
    """``(batch, run_group, job id)`` of jobs in groups of ``size``, ``chunk`` jobs a batch; a
    smaller last gang is a batch of its own (``alike_gangs``)."""
    updates: list[tuple[str, int | None, int]] = []
    for start in range(0, len(ids), chunk):
        batch = ids[start:start + chunk]
        for first in range(0, len(batch), size):
            members = batch[first:first + size]
            run_group = members[0] if size > 1 else None
            alike = not alike_gangs or len(members) == size
            updates += [(str(batch[0] if alike else members[0]), run_group, job_id) for job_id in members]
    return updates


def _group_size(ctx: CycleContext, campaign_id: int, cluster_id: int, values: dict[str, Any], jobs: int) -> int:
    target = grouping.target_seconds(values, ctx.cluster_options(cluster_id))
    if target <= 0:
        return 1
    capacity = ctx.capacities.get(cluster_id)
    return grouping.group_size(target, grouping.average_duration(ctx.grid.db, campaign_id, cluster_id),
                               values.get("temporal_grouping") is True, jobs,
                               capacity.free_slots if capacity else 1)


def batch_specs(jobs: list[dict[str, Any]], settings: dict[str, Any], home: str, group_walltime: int = 0,
                night: bool = False, gang: bool = False) -> list[JobSpec]:
    """Translate the job rows of one batch (one campaign's) and their campaign's settings on
    that cluster into JobSpecs (``home``: where its prologue or epilogue runs there;
    ``group_walltime``: the walltime of the remote job when a job is grouped; ``gang``: its
    groups are gangs). What the whole batch shares is worked out once."""
    shared = {
        "resources": settings["resources"], "properties": settings.get("properties", ""),
        "project": settings.get("project", ""), "job_types": oar_job_types(settings.get("cluster_job_type", "")),
        "best_effort": windows.job_type(settings.get("type"), night) == windows.BEST_EFFORT
        and not settings.get("test_mode"), "gang": gang,
    }
    return [_job_spec(job, settings, home, group_walltime, shared) for job in jobs]


def _job_spec(job: dict[str, Any], settings: dict[str, Any], home: str, group_walltime: int,
              shared: dict[str, Any]) -> JobSpec:
    kind = job["kind"]
    walltime = settings["walltime"] if kind == "task" else settings.get(f"{kind}_walltime", settings["walltime"])
    directory = settings["exec_directory"]
    if kind == "task":
        program = settings["exec_file"]  # a list: CiGri's program and arguments (jdl.compat.command_words)
        argv = (*(program if isinstance(program, list) else [program]), *split_param(job["param"]))
        name = job["task"]
    else:  # prologue/epilogue: the user's own shell lines, run from the home there (CiGri issue #35)
        argv = ("/bin/sh", "-c", settings[kind])
        name = kind
        directory = home
    environment = {  # the 2009 design's names and aliases; CIGRI_NODE_FILE is the backend's (where it has one)
        "CIGRI_JOB_ID": str(job["id"]),
        "CIGRI_JOBID": str(job["id"]),
        "CIGRI_CAMPAIGN_ID": str(job["campaign_id"]),
        "CIGRI_CAMPAIGNID": str(job["campaign_id"]),
        "CIGRI_JOB_NAME": name,
        "CIGRI_JOBNAME": name,
        "CIGRI_TASK_NAME": name,
        "CIGRI_USER": job["user"],
        "CIGRI_WORKDIR": directory,
        "CIGRI_WORKING_DIRECTORY": directory,
        "CIGRI_RESOURCES": settings["resources"],
        "CIGRI_WALLTIME": format_walltime(walltime),
        "CIGRI_WALLTIME_SECONDS": str(walltime),
    }
    return JobSpec(
        key=str(job["id"]), batch=job["batch"], name=f"cigri.{job['campaign_id']}.{job['id']}", argv=argv,
        directory=directory, walltime_seconds=walltime, environment=environment,
        group=str(job["run_group"] or ""), group_walltime_seconds=group_walltime if job["run_group"] else 0,
        memory_mb=int(settings.get("memory", 0)) if kind == "task" else 0, user=job["user"],
        **{**shared, "gang": shared["gang"] and bool(job["run_group"])},
    )
