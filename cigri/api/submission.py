"""Submitting campaigns and adding parameters to them.

Everything is checked before anything is written: the JDLs are parsed, then every parameter
line is read and checked into a stage (:mod:`cigri.api.staging`) with no lock held, and only
then is one write transaction taken, all or nothing, that copies the staged lines into the bag.
A parameter file is opened by the submitting user's own process (the command, direct or as a
client of the server) and reaches cigri as a stream: cigri never opens a path a JDL names.
"""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO

from cigri import admission, bag
from cigri import db as database
from cigri.api.access import owned_campaign, reopen
from cigri.api.staging import Stage, StagedPart, staging
from cigri.db import campaigns as stored_campaigns
from cigri.db import tasks as stored_tasks
from cigri.errors import InputError, LimitExceeded, Refused
from cigri.grid import Grid
from cigri.jdl import compat, parse_jdl
from cigri.jdl.params import describe
from cigri.jdl.parser import CampaignSpec, ParamSource, cluster_keys
from cigri.states import CampaignState, TaskState
from cigri.uploads import JDLText, Lines, Submitted, local_jdl


def submit(grid: Grid, jdl_text: str, *, base_dir: Path, user: str, source: str = "JDL") -> tuple[int, int]:
    """Create a campaign and all its tasks in one transaction; return (campaign id, tasks) (its
    warnings are :func:`submit_all`'s). For callers in the submitting user's own process (its
    ``param_file`` is opened here)."""
    campaign_id, tasks, _ = submit_all(grid, [local_jdl(jdl_text, base_dir=base_dir, user=user, source=source)],
                                       user=user)[0]
    return campaign_id, tasks


def submit_all(grid: Grid, jdls: Sequence[JDLText], *, user: str, strict: bool = False) -> list[Submitted]:
    """Create several campaigns in one transaction, all or none: every JDL is parsed and
    admitted, and every parameter line read and checked, before the campaigns are written
    together. ``strict`` refuses CiGri's forms instead of warning about them."""
    specs = _parse_all(grid, jdls, user, strict)
    refused = grid.refusals(user)
    for spec, jdl in zip(specs, jdls):  # a cluster that would never run the user's jobs (docs/identity.md)
        for cluster in spec.clusters:
            if cluster in refused:
                raise Refused(f"{jdl.source}: cluster {cluster}: {refused[cluster]}")
    with _stage(grid) as stage:
        parts: list[StagedPart] = []
        for spec, jdl in zip(specs, jdls):  # the limits bound the whole submission, so all its JDLs
            part = stage.add(_source(spec, jdl))
            if part.count == 0:
                raise InputError(f"{jdl.source}: the campaign has no parameters")
            admission.check_tasks(grid.config.admission, part.count)
            parts.append(part)
        with _ingest(grid, stage) as conn:
            _within_limits(grid, conn, user, parts)
            return [Submitted(_store(conn, grid, spec, user, part, stage), part.count, spec.warnings)
                    for spec, part in zip(specs, parts)]


def extend(grid: Grid, campaign_id: int, lines: Lines, *, user: str, strict: bool = False) -> Submitted:
    """Add parameter lines to one of ``user``'s campaigns (``gridsub -c N -F FILE``): lines, or
    CiGri's JSON array of strings (with a warning; ``strict`` refuses it). An ended campaign is
    in treatment again."""
    _extensible(grid, grid.db.conn, campaign_id, user)  # before reading anything: a wrong id is told at once
    source, warnings = _parameters(lines, strict)
    with _stage(grid) as stage:
        part = stage.add(source)
        if part.count == 0:  # as a submission without parameters; nor may an ended campaign reopen for none
            raise InputError(f"{lines.name}: no parameters to add")
        with _ingest(grid, stage) as conn:
            campaign = _extensible(grid, conn, campaign_id, user)
            admission.check_tasks(grid.config.admission, stored_campaigns.nb_tasks(conn, campaign_id) + part.count)
            _within_limits(grid, conn, campaign["user"], [part])
            first_id = _insert_tasks(conn, campaign_id, part, stage)
            _refuse_names_taken(conn, campaign_id, part, first_id, stage)
            reopen(conn, "id = ?", [campaign_id])
    return Submitted(campaign_id, part.count, warnings)


JSON_SNIFF = 4096  # bytes read to tell CiGri's JSON array of parameters from lines


def _parameters(lines: Lines, strict: bool) -> tuple[ParamSource, tuple[str, ...]]:
    """The parameters of ``gridsub -F``: lines, streamed, or CiGri's JSON array (its first
    bytes tell; an array is read whole, as JSON must be)."""
    head = lines.stream.read(JSON_SNIFF)
    stream = io.BufferedReader(_Prefixed(head, lines.stream))
    if head.removeprefix(compat.BOM).lstrip()[:1] != b"[":
        return ParamSource(file=Path(lines.name), stream=stream), ()
    array = compat.parameters_file(stream.read().decode("utf-8-sig", errors="replace"))
    if array is None:
        raise InputError(f"{lines.name}: starts with '[' but is not CiGri's JSON array of parameters (strings)")
    warnings = compat.Warnings(lines.name, strict)
    warnings.add("read as CiGri's JSON array of parameters (cigri's form: one parameter per line)")
    return ParamSource(inline=tuple(array)), tuple(warnings.lines)


class _Prefixed(io.RawIOBase):
    """A stream whose first bytes were already read: they come first, then the rest."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self.head, self.rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        data = self.head[:len(buffer)] if self.head else self.rest.read(len(buffer))
        self.head = self.head[len(data):] if self.head else b""
        buffer[:len(data)] = data
        return len(data)


def _extensible(grid: Grid, conn: sqlite3.Connection, campaign_id: int, user: str) -> dict[str, Any]:
    """The campaign, if ``user`` may add tasks to it: theirs (or an admin's), and not cancelled."""
    campaign = owned_campaign(grid, conn, campaign_id, user)
    if campaign["state"] == CampaignState.CANCELLED:
        raise Refused(f"campaign {campaign_id} is cancelled")
    return campaign


def _parse_all(grid: Grid, jdls: Sequence[JDLText], user: str, strict: bool) -> list[CampaignSpec]:
    """Every JDL parsed; the problems of all of them in one error, so that one try shows them all."""
    specs, problems = [], []
    for jdl in jdls:
        try:
            specs.append(_parse(grid, jdl, user, strict))
        except InputError as error:
            problems.append(error)
        if jdl.params_error is not None:  # a param_file its submitter could not open: one more of its mistakes
            problems.append(InputError(f"{jdl.source}: {jdl.params_error}", field="param_file"))
    if len(problems) > 1:
        raise InputError("\n".join(str(problem) for problem in problems))
    if problems:
        raise problems[0]
    return specs


def _parse(grid: Grid, jdl: JDLText, user: str, strict: bool) -> CampaignSpec:
    from cigri.metascheduler import gangs  # not at import: status commands start without the metascheduler

    settings = grid.config.settings
    spec = parse_jdl(jdl.text, known_clusters=grid.cluster_backends(), user=user, base_dir=jdl.base_dir,
                     default_walltime=settings.default_walltime,
                     default_resources=settings.default_resources, source=jdl.source,
                     classes=grid.config.class_users(), default_class=grid.config.default_class(),
                     homes=grid.cluster_homes(user), strict=strict, site_defaults=grid.config.admission.defaults,
                     cluster_cores=gangs.cluster_cores(grid.db.conn))
    admission.check_campaign(grid.config.admission, user, spec.class_name, spec.clusters,
                             spec.params.count if spec.params.count is not None else
                             None if spec.params.inline is None else len(spec.params.inline), spec.written_types)
    return spec


def _source(spec: CampaignSpec, jdl: JDLText) -> ParamSource:
    """The spec's parameters, a ``param_file`` read from the stream the submitter sent."""
    if spec.params.file is None:
        return spec.params
    if jdl.params is None:
        raise InputError(f"{jdl.source}: $.param_file: the file's lines were not sent with the JDL", field="param_file")
    return replace(spec.params, file=Path(jdl.params.name), stream=jdl.params.stream)


def _stage(grid: Grid) -> AbstractContextManager[Stage]:
    """A stage for one submission, under the per-submission limits."""
    return staging(grid.config.spool_path / "staging", max_tasks=grid.config.settings.max_submission_tasks,
                   max_bytes=grid.config.limits.submission_param_bytes)


def _within_limits(grid: Grid, conn: sqlite3.Connection, user: str, parts: list[StagedPart]) -> None:
    """LimitExceeded unless ``user`` stays within the per-user limits with these parts added:
    pending tasks and parameter bytes of the unfinished campaigns, and tasks and parameter
    bytes kept for all of them, ended ones included, until purged (a loop of submissions and
    cancels would otherwise fill the database)."""
    limits = grid.config.limits
    active = stored_campaigns.active_of(conn, user)
    pending = sum(bag.count(conn, i, (TaskState.PENDING,)) for i in active) + sum(p.count for p in parts)
    if pending > limits.pending_tasks:
        raise LimitExceeded(f"{user}: {pending:,} tasks would be pending, more than the {limits.pending_tasks:,} one "
                            "user may have waiting (limits.pending_tasks); submit the rest as these drain")
    stored, kept_bytes, kept_tasks = stored_campaigns.stored_by(conn, user)
    added_bytes, added_tasks = sum(p.bytes for p in parts), sum(p.count for p in parts)
    if stored + added_bytes > limits.param_bytes:
        raise LimitExceeded(f"{user}: {stored + added_bytes:,} bytes of parameters would be stored for your unfinished "
                            f"campaigns, more than the {limits.param_bytes:,} allowed (limits.param_bytes)")
    if kept_tasks + added_tasks > limits.kept_tasks or kept_bytes + added_bytes > limits.kept_param_bytes:
        raise LimitExceeded(f"{user}: your campaigns would keep {kept_tasks + added_tasks:,} tasks and "
                            f"{kept_bytes + added_bytes:,} bytes of parameters, more than the {limits.kept_tasks:,} "
                            f"and {limits.kept_param_bytes:,} allowed (limits.kept_tasks, limits.kept_param_bytes); "
                            "purge ended campaigns first: griddel --purge N")


def parameter_room(grid: Grid, user: str) -> int:
    """The parameter bytes ``user`` may still add (``limits.param_bytes`` and
    ``limits.kept_param_bytes``, less what is stored): the room the server's uploads of
    theirs share while they stream in (:mod:`cigri.server.limits`)."""
    stored, kept, _ = stored_campaigns.stored_by(grid.db.conn, user)
    limits = grid.config.limits
    return max(0, min(limits.param_bytes - stored, limits.kept_param_bytes - kept))


def _store(conn: sqlite3.Connection, grid: Grid, spec: CampaignSpec, user: str, part: StagedPart, stage: Stage) -> int:
    """Write one campaign, its properties and its staged tasks inside the caller's transaction;
    return its id."""
    clusters = grid.cluster_ids()
    campaign_id = stored_campaigns.insert(conn, name=spec.name, user=user, jobs_type=spec.jobs_type,
                                          jdl=json.dumps(spec.document), now=database.now(),
                                          class_name=spec.class_name, priority=spec.priority)
    rows = []
    for cluster, values in spec.clusters.items():
        for key in cluster_keys():
            if key in values:
                value = values[key]
                if isinstance(value, str):
                    value = value.replace("{CAMPAIGN_ID}", str(campaign_id))
                elif key == "exec_file":  # CiGri's program with arguments (jdl.compat.command_words)
                    value = [word.replace("{CAMPAIGN_ID}", str(campaign_id)) for word in value]
                rows.append((campaign_id, clusters[cluster], key, json.dumps(value)))
    stored_campaigns.add_properties(conn, rows)
    _insert_tasks(conn, campaign_id, part, stage)
    return campaign_id


@contextmanager
def _ingest(grid: Grid, stage: Stage) -> Iterator[sqlite3.Connection]:
    """The write transaction of a submission. On SQLite the stage is attached (ATTACH cannot
    run inside a transaction), and without a foreign-key lookup per task: every task references
    the campaign this transaction created or checked. PostgreSQL gets the stage's rows by COPY."""
    if not isinstance(grid.db.conn, sqlite3.Connection):
        with database.write(grid.db) as written:
            yield written
        return
    conn = grid.db.conn
    conn.execute("ATTACH DATABASE ? AS staged", [str(stage.path)])
    conn.execute("PRAGMA foreign_keys = OFF")
    try:
        with database.write(grid.db) as written:
            yield written
    finally:
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("DETACH DATABASE staged")


_GENERATED = ("WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < ?) "
              "SELECT {campaign}, CAST(i AS TEXT), CAST(i AS TEXT) FROM n")
_STAGED = "SELECT {campaign}, name, param FROM staged.params WHERE rowid BETWEEN ? AND ? ORDER BY rowid"


def _insert_tasks(conn: sqlite3.Connection, campaign_id: int, part: StagedPart, stage: Stage) -> int:
    """Copy a part's tasks into the bag as one block of fresh tasks (see :mod:`cigri.bag`), in
    one statement (SQLite does the per-row work, and no index is maintained) or one COPY
    (PostgreSQL); return the block's first task id."""
    first_id = database.next_id(conn, "tasks")
    if isinstance(conn, sqlite3.Connection):
        select, args = (_GENERATED, [part.count - 1]) if part.generated else (_STAGED, [part.first, part.last])
        last_id = stored_tasks.insert_block(conn, campaign_id, select, args)
    else:
        last_id = stored_tasks.copy_block(conn, campaign_id, first_id, stage.rows(part))
    assert last_id - first_id + 1 == part.count, "the write lock keeps one submission's ids consecutive"
    stored_tasks.add_block(conn, campaign_id, first_id, last_id)
    stored_campaigns.add_tasks(conn, campaign_id, part.count, part.bytes)
    return first_id


def _refuse_names_taken(conn: sqlite3.Connection, campaign_id: int, part: StagedPart, first_id: int,
                        stage: Stage) -> None:
    """InputError naming the first line just added (tasks ``first_id`` on) whose task name the
    campaign already had; the caller's transaction then writes nothing."""
    low, _ = stored_tasks.span(conn, campaign_id)
    taken = stored_tasks.first_name_taken(conn, campaign_id, first_id, first_id + part.count - 1, low)
    if taken is not None:
        task_id, name = taken
        raise InputError(f"{describe(part.source, stage.position(part.first + task_id - first_id))}: duplicate task "
                         f"name {name!r} (already in campaign {campaign_id}; the first word of a line names its task)")

