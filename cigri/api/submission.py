"""Submitting campaigns and adding parameters to them: everything is checked before anything is
written, and a submission is one transaction (all or nothing)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from cigri import admission, bag
from cigri import db as database
from cigri.api.access import owned_campaign, reopen
from cigri.errors import InputError, Refused
from cigri.grid import Grid
from cigri.jdl import compat, iter_params, parse_jdl
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


class Submitted(NamedTuple):
    """A campaign created or extended: its id, the tasks added, and the warning lines of the
    CiGri forms its JDL or parameter file used (:mod:`cigri.jdl.compat`), for the caller to show."""

    campaign_id: int
    tasks: int
    warnings: tuple[str, ...] = ()


def submit(grid: Grid, jdl_text: str, *, base_dir: Path, user: str, source: str = "JDL") -> tuple[int, int]:
    """Create a campaign and all its tasks in one transaction; return (campaign id, tasks)
    (its warnings are :func:`submit_all`'s)."""
    return submit_all(grid, [JDLText(jdl_text, base_dir, source)], user=user)[0][:2]


def submit_all(grid: Grid, jdls: Sequence[JDLText], *, user: str, strict: bool = False) -> list[Submitted]:
    """Create several campaigns in one transaction, all or none: every JDL is validated and
    admitted before any row is written, and a problem found while streaming a parameter file
    undoes them all. ``strict`` refuses CiGri's forms instead of warning about them."""
    specs = [_parse(grid, jdl, user, strict) for jdl in jdls]
    stored: list[Submitted] = []
    with _ingest(grid) as conn:
        for spec, jdl in zip(specs, jdls):  # the task limit bounds the transaction, so all its JDLs
            campaign_id, count = _store(conn, grid, spec, user, jdl.source, before=sum(s.tasks for s in stored))
            admission.check_tasks(grid.config.admission, count)
            stored.append(Submitted(campaign_id, count, spec.warnings))
    return stored


def _parse(grid: Grid, jdl: JDLText, user: str, strict: bool) -> CampaignSpec:
    settings = grid.config.settings
    spec = parse_jdl(jdl.text, known_clusters=grid.cluster_backends(), user=user, base_dir=jdl.base_dir,
                     default_walltime=settings.default_walltime,
                     default_resources=settings.default_resources, source=jdl.source,
                     classes=grid.config.class_users(), default_class=grid.config.default_class(),
                     homes=grid.cluster_homes(user), strict=strict, site_defaults=grid.config.admission.defaults)
    admission.check_campaign(grid.config.admission, user, spec.class_name, spec.clusters,
                             spec.params.count if spec.params.count is not None else
                             None if spec.params.inline is None else len(spec.params.inline))
    return spec


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
                elif key == "exec_file":  # CiGri's program with arguments (jdl.compat.command_words)
                    value = [word.replace("{CAMPAIGN_ID}", str(campaign_id)) for word in value]
                rows.append((campaign_id, clusters[cluster], key, json.dumps(value)))
    conn.executemany("INSERT INTO campaign_properties(campaign_id, cluster_id, name, value) "
                     "VALUES (?, ?, ?, ?)", rows)
    count = _insert_tasks(conn, campaign_id, spec.params, grid.config.settings.max_submission_tasks, before)
    if count == 0:
        raise InputError(f"{source}: the campaign has no parameters")
    return campaign_id, count


def extend(grid: Grid, campaign_id: int, param_file: Path, *, user: str, strict: bool = False) -> Submitted:
    """Add a parameter file's tasks to an existing campaign (``gridsub -c N -F FILE``): lines,
    or CiGri's JSON array of strings (with a warning; ``strict`` reads lines only)."""
    source, warnings = _parameters(param_file, strict)
    with _ingest(grid) as conn:
        campaign = owned_campaign(grid, conn, campaign_id, user)
        if campaign["state"] == CampaignState.CANCELLED:
            raise Refused(f"campaign {campaign_id} is cancelled")
        count = _insert_tasks(conn, campaign_id, source, grid.config.settings.max_submission_tasks)
        if count == 0:  # as a submission without parameters; nor may an ended campaign reopen for none
            raise InputError(f"{param_file}: no parameters to add")
        admission.check_tasks(grid.config.admission, conn.execute(
            "SELECT nb_tasks FROM campaigns WHERE id = ?", [campaign_id]).fetchone()[0])
        reopen(conn, "id = ?", [campaign_id])
    return Submitted(campaign_id, count, warnings)


def _parameters(param_file: Path, strict: bool) -> tuple[ParamSource, tuple[str, ...]]:
    """The parameters of ``gridsub -F``: a file of lines, streamed, or CiGri's JSON array (a
    regular file's first bytes tell; a pipe is read once, as lines)."""
    if not param_file.is_file():
        return ParamSource(file=param_file), ()
    try:
        with param_file.open("rb") as handle:
            if handle.read(4096).removeprefix(compat.BOM).lstrip()[:1] != b"[":
                return ParamSource(file=param_file), ()
            handle.seek(0)
            text = handle.read().decode("utf-8-sig", errors="replace")
    except OSError as error:
        raise InputError(f"{param_file}: {error.strerror}") from None
    array = compat.parameters_file(text)
    if array is None:
        return ParamSource(file=param_file), ()
    warnings = compat.Warnings(str(param_file), strict)
    warnings.add("read as CiGri's JSON array of parameters (cigri's form: one parameter per line)")
    return ParamSource(inline=tuple(array)), tuple(warnings.lines)


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
