"""``cigri import-v3``: move a CiGri v3 site's database (PostgreSQL) into cigri's.

Brought over: clusters (a name cigri has is that cluster; another becomes an OAR REST cluster
with the CiGri row's URL, not contacted at all until an admin completes its options and lifts
its CLUSTER_IMPORTED event), campaigns under CiGri's numbers where cigri never gave them, with
their JDLs read as CiGri read them (:mod:`cigri.jdl.compat`), their parameters as tasks under
CiGri's names, their jobs, their events (an open one covering its job, for ``--fix
--resubmit``) and the notification subscriptions. A campaign still running continues where it
was: its running and waiting jobs keep their remote ids and are polled as cigri's own (adopted,
never resubmitted), its tasks still in CiGri's bag or queues are pending here. A job CiGri may
have sent without recording its id is never sent again on its own: its task waits, failed,
under an UNCONFIRMED_LAUNCH event, for its owner to look on the cluster.

A parameter line is read as gridsub reads one. CiGri appended it to a shell command line and
stored what the shell could not read as well: a line holding a single quoting character (a lone
quote as in ``p06 it's``, or a trailing backslash) pairs with nothing, so its words are its
blank-separated words, and it is converted to them, that one quoted. Any other line cigri cannot
read (quotes that pair some other way, a line break, a control character in the task name, no
task name) is refused: that task and its jobs are not imported, and the rest is. The report has
a line per row converted or refused.

The whole import is one transaction (all or nothing; ``kill -9`` leaves nothing half done),
and ``v3_imports`` records which CiGri row became which, so a second run changes nothing.
What cigri keeps in its configuration (user priorities, admission rules) is not written: the
report says what to put there.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from cigri import bag
from cigri import db as database
from cigri.db import campaigns as stored_campaigns
from cigri.db import counts as stored_counts
from cigri.db import events as stored_events
from cigri.db import jobs as stored_jobs
from cigri.db import notifications as stored_notifications
from cigri.db import tasks as stored_tasks
from cigri.errors import CigriError, InputError
from cigri.events import CATALOGUE, IMPORTED, UNCONFIRMED, Severity, record
from cigri.grid import Grid
from cigri.jdl import parse_jdl, split_param
from cigri.jdl.params import MAX_LINE_BYTES
from cigri.jdl.parser import cluster_keys, control_character
from cigri.notify import addresses
from cigri.states import CAMPAIGN_ACTIVE, CampaignState, JobState, KillReason, TaskState
from cigri.users import require_admin

# CiGri's job states, as cigri's. to_launch never reached a cluster (its task is pending); launching
# may have (CiGri posts the array first, then records its ids): see _unconfirmed
JOB_STATES = {"terminated": JobState.TERMINATED, "event": JobState.FAILED, "running": JobState.RUNNING,
              "remote_waiting": JobState.WAITING, "submitted": JobState.WAITING, "batch_waiting": JobState.WAITING,
              "launching": JobState.LOST}
ACTIVE = ("running", "remote_waiting", "submitted", "batch_waiting")
SEVERITIES = ("low", "medium", "high")
BATCHES = {"oar3": "OAR 3", "g5k": "Grid'5000's API"}  # CiGri's batch kinds other than OAR 2.5
QUOTING = ("'", '"', "\\")  # what makes a shell (and split_param) read a line other than by blanks
_BLANKS = re.compile(r"[ \t]+")  # between a line's words (split_param's blanks; a line break is refused)


@dataclass
class Report:
    """What an import did, and what an admin has left to do."""

    clusters_added: list[str] = field(default_factory=list)
    campaigns: int = 0
    tasks: int = 0
    jobs: int = 0
    adopted: int = 0  # running or waiting jobs that cigri now follows
    unconfirmed: int = 0  # jobs CiGri may have sent with no id kept: their tasks wait for their owners
    usage_samples: int = 0  # CiGri's grid_usage and queue_counts, as the usage history
    events: int = 0
    subscriptions: int = 0
    skipped_campaigns: int = 0  # imported by an earlier run
    converted: int = 0  # parameter lines cigri reads only once quoted
    refused: int = 0  # parameter lines cigri cannot read: their tasks are not imported
    notes: list[str] = field(default_factory=list)


def import_v3(grid: Grid, dsn: str, *, user: str, password_file: Path | None = None) -> Report:
    """Import the CiGri v3 database at ``dsn`` (a ``postgresql://`` URL or libpq's ``key=value``
    words, without a password); admins only."""
    require_admin(grid.config, user, "importing a CiGri v3 database")
    try:
        import psycopg
        from psycopg.rows import dict_row
    except ImportError:
        raise CigriError("import-v3 needs psycopg: pip install 'cigri[import]'") from None
    try:
        with psycopg.connect(dsn, row_factory=dict_row, connect_timeout=10,
                             password=_password(psycopg, dsn, password_file)) as source:
            source.read_only = True
            v3 = _read(source)
    except psycopg.errors.UndefinedTable as error:
        raise InputError(f"--dsn: not a CiGri v3 database: {error.diag.message_primary}") from None
    except psycopg.Error as error:
        raise InputError(f"--dsn: {' '.join(str(error).split())}") from None
    report = Report()
    with database.write(grid.db) as conn:
        clusters = _clusters(conn, grid, v3["clusters"], v3["users_mapping"], report)
        done = {(kind, v3_id) for kind, v3_id in conn.execute("SELECT kind, v3_id FROM v3_imports")}
        first_free = database.next_id(conn, "campaigns")  # CiGri's ids from there on are kept: those first
        for campaign in sorted(v3["campaigns"], key=lambda c: c["id"] < first_free):
            if ("campaign", campaign["id"]) in done:
                report.skipped_campaigns += 1
                continue
            _campaign(conn, grid, v3, campaign, clusters, report)
        _events(conn, v3, clusters, done, report)
        _usage(conn, v3, clusters, done, report)
        _subscriptions(conn, grid, v3["user_notifications"], done, report)
    _configuration_notes(v3, report)
    return report


def _password(psycopg: Any, dsn: str, password_file: Path | None) -> str | None:
    """The password libpq does not find by itself (``PGPASSWORD``, ``~/.pgpass`` or the file
    ``PGPASSFILE`` names): ``--password-file``'s first line (None: libpq's). A DSN holding one
    is refused: the command line is every local user's to read (``ps``)."""
    try:
        words = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as error:
        raise InputError(f"--dsn: {' '.join(str(error).split())}", field="dsn") from None
    if "password" in words:
        raise InputError("--dsn: holds a password, which every user of this host reads in the process list: give "
                         "it in PGPASSWORD, ~/.pgpass (or the file PGPASSFILE names) or --password-file FILE",
                         field="dsn")
    if password_file is None:
        return None
    try:
        password = password_file.read_text(encoding="utf-8").partition("\n")[0].rstrip("\r")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"--password-file: cannot read {password_file}: {getattr(error, 'strerror', None) or error}",
                         field="password_file") from None
    if not password:
        raise InputError(f"--password-file: {password_file} holds no password on its first line",
                         field="password_file")
    return password


def _read(source: Any) -> dict[str, list[dict[str, Any]]]:
    """Every table the import reads, whole (a site's database fits in memory: CiGri's own API
    read it in pages of 100, but its campaigns are its history, not its parameters' bytes)."""
    tables = {
        "clusters": "SELECT id, name, api_url, batch, enabled, properties, api_chunk_size FROM clusters ORDER BY id",
        "campaigns": "SELECT id, grid_user, state, type, name, submission_time, completion_time, jdl "
                     "FROM campaigns ORDER BY id",
        "parameters": "SELECT id, campaign_id, name, param FROM parameters WHERE id > 0 ORDER BY campaign_id, id",
        "bag_of_tasks": "SELECT campaign_id, param_id, priority FROM bag_of_tasks",
        "jobs_to_launch": "SELECT b.campaign_id, b.param_id FROM jobs_to_launch q "
                          "JOIN bag_of_tasks b ON b.id = q.task_id",
        "jobs": "SELECT id, campaign_id, param_id, cluster_id, state, return_code, submission_time, start_time, "
                "stop_time, node_name, remote_id, tag FROM jobs ORDER BY id",
        "events": "SELECT id, class, code, state, job_id, cluster_id, campaign_id, parent, date_open, date_closed, "
                  "message FROM events ORDER BY id",
        "user_notifications": "SELECT id, grid_user, type, identity, severity FROM user_notifications ORDER BY id",
        "users_priority": "SELECT grid_user, cluster_id, priority FROM users_priority ORDER BY id",
        "admission_rules": "SELECT id, code FROM admission_rules ORDER BY id",
        "users_mapping": "SELECT grid_login, cluster_login, cluster_id FROM users_mapping "
                         "ORDER BY cluster_id, grid_login",
        "grid_usage": "SELECT date, cluster_id, max_resources, used_resources, unavailable_resources, used_by_cigri "
                      "FROM grid_usage ORDER BY date",
        "queue_counts": "SELECT date, cluster_id, sum(jobs_count) AS waiting FROM queue_counts "
                        "GROUP BY date, cluster_id ORDER BY date",
        "tasks_affinity": "SELECT count(*) AS count FROM tasks_affinity",
    }
    with source.cursor() as cursor:
        result = {}
        for name, sql in tables.items():
            cursor.execute(sql)
            result[name] = list(cursor.fetchall())
        return result


def _clusters(conn: sqlite3.Connection, grid: Grid, rows: list[dict[str, Any]], mapping: list[dict[str, Any]],
              report: Report) -> dict[int, int]:
    """CiGri's cluster ids as cigri's. A cluster cigri lacks is added, held by a CLUSTER_IMPORTED
    event in the same transaction: nothing is sent there, not even a poll or a cancel, until an
    admin has set its options and lifts it (CiGri's row gives only its URL, and what CiGri left
    there may still run)."""
    from cigri.api.clusters import insert_cluster

    known, names = grid.cluster_ids(), {row["id"]: row["name"] for row in rows}
    logins = _logins(rows, mapping, report)
    for row in rows:
        if row["batch"] != "oar2_5":
            report.notes.append(f"cluster {row['name']} is {BATCHES.get(row['batch'], row['batch'])} in CiGri, "
                                "whose REST API cigri does not speak: OAR keeps its commands there, so make it "
                                f"backend = \"oar\", transport = \"ssh\" in [clusters.{row['name']}] of "
                                "cigri.toml (docs/backends.md), or leave it blacklisted")
        if row["name"] in known:
            continue
        cluster_id = insert_cluster(conn, row["name"], "oar", {
            "transport": "rest", "base_url": row["api_url"], "user": "cigri", "properties": row["properties"] or "",
            "api_chunk_size": row["api_chunk_size"] or 100, "logins": logins.pop(row["id"], {})})
        reason = (f"imported from CiGri v3 ({row['batch']} at {row['api_url']}): set its options in [clusters."
                  f"{row['name']}] of cigri.toml, then cigri cluster unblacklist {row['name']}")
        event_id = record(conn, IMPORTED, f"cluster {row['name']} {reason}", cluster_id=cluster_id)
        stored_events.take_cluster(conn, cluster_id, event_id, reason, database.now())
        report.clusters_added.append(row["name"])
        report.notes.append(f"cluster {row['name']} added as an OAR REST cluster at {row['api_url']}, not contacted "
                            f"until you set its options in [clusters.{row['name']}] of cigri.toml and run cigri "
                            f"cluster unblacklist {row['name']}")
        if not row["enabled"]:
            report.notes.append(f"cluster {row['name']} was disabled in CiGri: leave it blacklisted here")
    for cluster_id, table in logins.items():  # clusters cigri has: their logins are the configuration's
        entries = ", ".join(f"{json.dumps(user)} = {json.dumps(login)}" for user, login in table.items())
        report.notes.append(f"users_mapping: put logins = {{{entries}}} in [clusters.{names[cluster_id]}] of "
                            "cigri.toml")
    known = grid.cluster_ids()
    return {row["id"]: known[row["name"]] for row in rows}


def _logins(rows: list[dict[str, Any]], mapping: list[dict[str, Any]], report: Report) -> dict[int, dict[str, str]]:
    """CiGri's ``users_mapping`` as each cluster's ``logins`` (user -> login), by CiGri cluster
    id. Its rows holding an OAR 3 JWT (``Bearer ...``) are counted, never copied or printed:
    no cigri backend speaks OAR 3's REST API, and over SSH jobs run as their owners' logins."""
    names = {row["id"]: row["name"] for row in rows}
    logins: dict[int, dict[str, str]] = {}
    tokens: dict[int, int] = {}
    for row in mapping:
        login = row["cluster_login"] or ""
        if row["cluster_id"] not in names:
            continue
        if login.startswith("Bearer "):
            tokens[row["cluster_id"]] = tokens.get(row["cluster_id"], 0) + 1
        elif login and login != row["grid_login"]:
            logins.setdefault(row["cluster_id"], {})[row["grid_login"]] = login
    for cluster_id, count in tokens.items():
        report.notes.append(f"users_mapping: {count} OAR 3 token(s) of cluster {names[cluster_id]} not imported: "
                            "cigri does not speak OAR 3's REST API; over SSH (identity = \"sudo\") jobs run as "
                            "their owners' logins and need none")
    return logins


def _epoch(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _campaign(conn: sqlite3.Connection, grid: Grid, v3: dict[str, list[dict[str, Any]]], campaign: dict[str, Any],
              clusters: dict[int, int], report: Report) -> None:
    v3_id, user = campaign["id"], campaign["grid_user"]
    record_only = not (campaign["jdl"] or "").strip()  # CiGri kept no JDL: what ran is known, not how to run more
    settings = {} if record_only else _settings(grid, campaign, report)
    if settings is None:
        return
    stored = [p for p in v3["parameters"] if p["campaign_id"] == v3_id]
    lines = _parameters(campaign, stored, report)
    params = [p for p in stored if p["id"] in lines]
    refused = {p["id"] for p in stored} - set(lines)
    jobs = [j for j in v3["jobs"] if j["campaign_id"] == v3_id and j["param_id"] not in refused]
    state = v3_state = CampaignState(campaign["state"])
    if record_only and state in CAMPAIGN_ACTIVE:
        state = CampaignState.CANCELLED
        report.notes.append(f"campaign {v3_id} has no JDL in CiGri: kept as a record, cancelled here (its tasks and "
                            "jobs as they were; its running jobs are followed to their end, not killed)")
    submitted = _epoch(campaign["submission_time"]) or database.now()
    ended = [j["stop_time"].timestamp() for j in jobs if j["stop_time"] is not None]
    finished = (_epoch(campaign["completion_time"]) or max(ended, default=submitted)) \
        if state in (CampaignState.TERMINATED, CampaignState.CANCELLED) else None
    document = {k: v for k, v in json.loads(campaign["jdl"] or "{}").items() if k != "params"}
    kept = v3_id >= database.next_id(conn, "campaigns")  # never given here: users keep their number
    campaign_id = conn.execute(
        "INSERT INTO campaigns(id, name, user, state, jobs_type, jdl, submitted_at, finished_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        [v3_id if kept else None, campaign["name"] or f"cigri-v3-{v3_id}", user, state, campaign["type"],
         json.dumps(document), submitted, finished]).fetchone()[0]
    if not kept:
        report.notes.append(f"campaign {v3_id} of CiGri is campaign {campaign_id} here: cigri had given {v3_id}; "
                            f"the commands also take it as v3:{v3_id}")
    names = grid.cluster_ids()
    cluster_names = {cluster_id: name for name, cluster_id in names.items()}
    stored_campaigns.add_properties(conn, [(campaign_id, names[cluster], key, json.dumps(_campaign_id(value, campaign_id)))
                                           for cluster, values in settings.items() for key in cluster_keys()
                                           if key in values for value in [values[key]]])
    task_ids = _tasks(conn, v3, campaign_id, state, params, lines, jobs)
    for job in jobs:
        _job(conn, job, campaign, campaign_id, task_ids, clusters, cluster_names, v3_state, report)
    conn.execute("INSERT INTO v3_imports(kind, v3_id, cigri_id) VALUES ('campaign', ?, ?)", [v3_id, campaign_id])
    report.campaigns += 1
    report.tasks += len(params)


def _campaign_id(value: Any, campaign_id: int) -> Any:
    if isinstance(value, str):
        return value.replace("{CAMPAIGN_ID}", str(campaign_id))
    if isinstance(value, list):
        return [_campaign_id(v, campaign_id) for v in value]
    return value


def _settings(grid: Grid, campaign: dict[str, Any], report: Report) -> dict[str, dict[str, Any]] | None:
    """Each cluster's settings, from CiGri's expanded JDL read by cigri's parser as CiGri read
    it (its parameters are CiGri's rows, not the JDL's copy)."""
    try:
        document = json.loads(campaign["jdl"] or "")
        document = {k: v for k, v in document.items() if k not in ("params", "param_file", "nb_jobs")}
        document.update(nb_jobs=1, clusters={name: value for name, value in document.get("clusters", {}).items()
                                             if name in grid.cluster_ids()})
        settings = grid.config.settings
        spec = parse_jdl(json.dumps(document), known_clusters=grid.cluster_backends(), user=campaign["grid_user"],
                         base_dir=Path("/"), default_walltime=settings.default_walltime,
                         default_resources=settings.default_resources, source=f"campaign {campaign['id']}",
                         homes=grid.cluster_homes(campaign["grid_user"]))
    except (ValueError, AttributeError, InputError) as error:
        report.notes.append(f"campaign {campaign['id']} not imported: its JDL: {' '.join(str(error).split())}")
        return None
    return spec.clusters


def _parameters(campaign: dict[str, Any], params: list[dict[str, Any]], report: Report) -> dict[int, tuple[str, str]]:
    """``{CiGri parameter id: (task name, line)}`` of the lines cigri can read, converted where
    :func:`_readable` does; a line per row converted or refused in the report."""
    lines = {}
    for param in params:
        where = f"campaign {campaign['id']}, parameter {param['id']} ({json.dumps(param['name'])})"
        try:
            name, line = lines[param["id"]] = _named(param["name"], *_readable(param["param"] or ""))
        except InputError as error:
            report.refused += 1
            report.notes.append(f"{where}: not imported, nor its jobs: {error}")
            continue
        if line != param["param"]:
            report.converted += 1
            report.notes.append(f"{where}: parameter line {json.dumps(param['param'])} imported as "
                                f"{json.dumps(line)}: its lone {_quoting(param['param'])[0]} is the character "
                                "itself, its words unchanged")
    return lines


def _named(stored: str | None, first_word: str, line: str) -> tuple[str, str]:
    """The task's name as CiGri had it (its ``name`` column: distinct in a campaign, where first
    words may not be), else the line's first word as gridsub takes it."""
    if not stored or not stored.strip():
        return first_word, line
    if (control := control_character(stored)) is not None:
        raise InputError(f"the task name contains the control character U+{ord(control):04X}")
    return stored, line


def _quoting(line: str) -> list[str]:
    return [c for c in line if c in QUOTING]


def _readable(line: str) -> tuple[str, str]:
    """A CiGri parameter line as gridsub would take it, ``(task name, line)``: as it is when
    cigri reads it, else its blank-separated words quoted when it holds a single quoting
    character (no other reading of its words exists). InputError, one line, otherwise."""
    if "\n" in line or "\r" in line:
        raise InputError("the line holds a line break")
    if len(line.encode()) >= MAX_LINE_BYTES:
        raise InputError(f"the line is longer than {MAX_LINE_BYTES} bytes")
    try:
        words = split_param(line)
    except ValueError as error:
        if len(_quoting(line)) != 1:
            raise InputError(f"the line cannot be split as a shell would ({error}); its owner may quote it and "
                             "submit it again") from None
        words = [word for word in _BLANKS.split(line) if word]
        line = " ".join(_quote(word) for word in words)
    if not words or not words[0]:
        raise InputError("the line has no task name")
    if (control := control_character(words[0])) is not None:
        raise InputError(f"the task name contains the control character U+{ord(control):04X}")
    return words[0], line


def _quote(word: str) -> str:
    """A word holding one quoting character, quoted by the other kind of quote; others as they are."""
    if "'" in word:
        return f'"{word}"'
    return f"'{word}'" if _quoting(word) else word


def _tasks(conn: sqlite3.Connection, v3: dict[str, list[dict[str, Any]]], campaign_id: int, state: CampaignState,
           params: list[dict[str, Any]], lines: dict[int, tuple[str, str]],
           jobs: list[dict[str, Any]]) -> dict[int, int]:
    """One task per CiGri parameter, in order, in one block with no fresh tail: a task still in
    CiGri's bag or queues is pending at the head of the bag (at its tail if CiGri put it there)."""
    bag_priority = {row["param_id"]: row["priority"] for row in v3["bag_of_tasks"]
                    if row["campaign_id"] == params[0]["campaign_id"]} if params else {}
    by_param: dict[int, list[dict[str, Any]]] = {}
    for job in jobs:
        by_param.setdefault(job["param_id"], []).append(job)
    rows = []
    for param in params:
        attempts = by_param.get(param["id"], [])
        states = {j["state"] for j in attempts if not _unconfirmed(j)}
        priority = bag.PRIORITY_TAIL if bag_priority.get(param["id"]) == 0 else bag.PRIORITY_HEAD
        if "terminated" in states:
            task_state = TaskState.TERMINATED
        elif "running" in states:
            task_state = TaskState.RUNNING
        elif states & set(ACTIVE):
            task_state = TaskState.WAITING
        elif any(_unconfirmed(j) for j in attempts):  # held by its UNCONFIRMED_LAUNCH event
            task_state = TaskState.FAILED
        elif param["id"] in bag_priority or "to_launch" in states or not attempts:
            task_state = TaskState.PENDING
        else:
            task_state = TaskState.FAILED
        if state == CampaignState.CANCELLED and task_state not in (TaskState.TERMINATED, TaskState.FAILED):
            task_state = TaskState.CANCELLED
        name, line = lines[param["id"]]
        rows.append((campaign_id, name, line, priority, task_state,
                     len([j for j in attempts if j["state"] in JOB_STATES])))
    if not rows:
        return {}
    first_id = database.next_id(conn, "tasks")
    conn.executemany("INSERT INTO tasks(campaign_id, name, param, priority, state, attempts) VALUES (?, ?, ?, ?, ?, ?)",
                     rows)
    last_id = first_id + len(rows) - 1
    stored_tasks.add_block(conn, campaign_id, first_id, last_id)
    conn.execute("UPDATE task_blocks SET next_fresh = ? WHERE campaign_id = ? AND first_id = ?",
                 [last_id + 1, campaign_id, first_id])
    conn.execute("UPDATE campaigns SET nb_tasks = ? WHERE id = ?", [len(rows), campaign_id])
    return {param["id"]: first_id + n for n, param in enumerate(params)}


def _unconfirmed(job: dict[str, Any]) -> bool:
    """A job CiGri may have sent without recording where: ``launching`` (the array was being
    posted) or any live state with no remote id. Sending its task again may run it twice."""
    return job["state"] == "launching" or job["state"] in ACTIVE and job["remote_id"] is None


def _job(conn: sqlite3.Connection, job: dict[str, Any], campaign: dict[str, Any], campaign_id: int,
         task_ids: dict[int, int], clusters: dict[int, int], cluster_names: dict[int, str], v3_state: CampaignState,
         report: Report) -> None:
    """One CiGri job as cigri's: a running or waiting one keeps its remote id, to be polled
    (adopted; killed if CiGri's campaign was cancelled); an unconfirmed one is lost here, its
    task held by an event until its owner has looked on the cluster."""
    if job["state"] not in JOB_STATES or job["cluster_id"] not in clusters:
        return
    kind = job["tag"] if job["tag"] in ("prologue", "epilogue") else "task"
    code = job["return_code"]
    exit_code = code >> 8 if code is not None and code > 255 else code  # CiGri kept OAR's wait status
    unconfirmed = _unconfirmed(job)
    active = job["state"] in ACTIVE and not unconfirmed
    task_id = task_ids.get(job["param_id"]) if kind == "task" else None
    job_id = stored_jobs.insert_imported(
        conn, campaign_id=campaign_id, task_id=task_id, cluster_id=clusters[job["cluster_id"]], kind=kind,
        state=JobState.LOST if unconfirmed else JOB_STATES[job["state"]],
        remote_id=None if job["remote_id"] is None else str(job["remote_id"]), batch=f"v3-{job['id']}",
        created_at=_epoch(job["submission_time"]) or database.now(), submitted_at=_epoch(job["submission_time"]),
        started_at=_epoch(job["start_time"]), finished_at=None if active else _epoch(job["stop_time"]),
        exit_code=exit_code, node=job["node_name"],
        kill_reason=KillReason.USER if active and v3_state == CampaignState.CANCELLED else None)
    conn.execute("INSERT INTO v3_imports(kind, v3_id, cigri_id) VALUES ('job', ?, ?)", [job["id"], job_id])
    report.jobs += 1
    report.adopted += active
    if unconfirmed:
        cluster = cluster_names[clusters[job["cluster_id"]]]
        record(conn, UNCONFIRMED, f"CiGri was sending jobs of its campaign {campaign['id']} to {cluster} (OAR job "
                                  f"name cigri.{campaign['id']}, user {campaign['grid_user']}) when its database "
                                  "was imported, and recorded no id: they may run there. Look there; then "
                                  "gridevents --fix --resubmit sends their tasks again, --fix alone leaves them",
               campaign_id=campaign_id, cluster_id=clusters[job["cluster_id"]], job_id=job_id, task_id=task_id)
        report.unconfirmed += 1


def _events(conn: sqlite3.Connection, v3: dict[str, list[dict[str, Any]]], clusters: dict[int, int],
            done: set[tuple[str, int]], report: Report) -> None:
    """CiGri's events of imported campaigns and its global ones, with their states, dates and
    the severity cigri gives their code. An open job event covers its job, so ``gridevents --fix
    --resubmit`` puts its task back; an event CiGri filed under another says so in its message."""
    campaigns = dict(conn.execute("SELECT v3_id, cigri_id FROM v3_imports WHERE kind = 'campaign'").fetchall())
    jobs = dict(conn.execute("SELECT v3_id, cigri_id FROM v3_imports WHERE kind = 'job'").fetchall())
    tasks = stored_jobs.imported_tasks(conn)
    events = dict(conn.execute("SELECT v3_id, cigri_id FROM v3_imports WHERE kind = 'event'").fetchall())
    for event in v3["events"]:
        if ("event", event["id"]) in done or event["campaign_id"] is not None and event["campaign_id"] not in campaigns:
            continue
        opened = _epoch(event["date_open"]) or database.now()
        kind = {"notify": "campaign", "log": "cluster"}.get(event["class"], event["class"])
        message = event["message"] or ""
        if event["parent"] is not None:  # CiGri's follow-ups (RESUBMIT after EXIT_ERROR...) name what they follow
            parent = events.get(event["parent"])
            message += f" (after event {parent})" if parent is not None else f" (after CiGri's event {event['parent']})"
        job_id = jobs.get(event["job_id"])
        severity = CATALOGUE[event["code"]].severity if event["code"] in CATALOGUE else Severity.MEDIUM
        event_id = stored_events.insert_imported(
            conn, kind=kind, code=event["code"], severity=severity, state=event["state"],
            campaign_id=campaigns.get(event["campaign_id"]), cluster_id=clusters.get(event["cluster_id"]),
            job_id=job_id, message=message, created_at=opened, closed_at=_epoch(event["date_closed"]))
        if event["state"] == "open" and job_id is not None:
            stored_events.cover(conn, event_id, job_id, tasks[job_id])
        conn.execute("INSERT INTO v3_imports(kind, v3_id, cigri_id) VALUES ('event', ?, ?)", [event["id"], event_id])
        events[event["id"]] = event_id
        report.events += 1


def _usage(conn: sqlite3.Connection, v3: dict[str, list[dict[str, Any]]], clusters: dict[int, int],
           done: set[tuple[str, int]], report: Report) -> None:
    """CiGri's ``grid_usage`` and ``queue_counts`` as the usage history (``gridclusters
    --history``, the dashboard's plots): one sample per CiGri date and cluster, its slots from
    grid_usage (those not unavailable; free: neither used nor unavailable), cigri's running jobs
    from ``used_by_cigri`` and its waiting ones from the campaigns' queue counts summed."""
    if ("usage", 0) in done:
        return
    samples: dict[tuple[float, int], dict[str, Any]] = {}
    for row in v3["grid_usage"]:
        if row["cluster_id"] in clusters:
            total = (row["max_resources"] or 0) - (row["unavailable_resources"] or 0)
            samples[(row["date"].timestamp(), clusters[row["cluster_id"]])] = {
                "running": row["used_by_cigri"] or 0, "waiting": 0, "total_slots": total,
                "free_slots": max(0, total - (row["used_resources"] or 0))}
    for row in v3["queue_counts"]:
        if row["cluster_id"] in clusters and row["date"] is not None:
            sample = samples.setdefault((row["date"].timestamp(), clusters[row["cluster_id"]]),
                                        {"running": 0, "waiting": 0, "total_slots": None, "free_slots": None})
            sample["waiting"] = int(row["waiting"] or 0)
    stored_counts.add(conn, [(at, cluster_id, v["waiting"], v["running"], v["total_slots"], v["free_slots"])
                             for (at, cluster_id), v in sorted(samples.items())])
    conn.execute("INSERT INTO v3_imports(kind, v3_id, cigri_id) VALUES ('usage', 0, ?)", [len(samples)])
    report.usage_samples = len(samples)
    if samples:
        report.notes.append(f"{len(samples)} usage sample(s) of CiGri's grid_usage and queue_counts are in the usage "
                            "history (gridclusters --history); each cycle trims those older than [cigri] "
                            "counts_retention_days: raise it (0 keeps them all) to keep them")
    if affinity := v3["tasks_affinity"][0]["count"]:
        report.notes.append(f"tasks_affinity: {affinity} row(s) of per-parameter cluster priorities not imported: "
                            "cigri prefers clusters per user ([users.NAME.affinity]), not per task")


def _subscriptions(conn: sqlite3.Connection, grid: Grid, rows: list[dict[str, Any]], done: set[tuple[str, int]],
                   report: Report) -> None:
    """Mail subscriptions (CiGri's admin, ``%%admin%%``, is root here); Jabber has no equivalent.
    An address other than the user's own comes unconfirmed, as a new one would: said per row."""
    for row in rows:
        if ("subscription", row["id"]) in done:
            continue
        if row["type"] != "mail":
            report.notes.append(f"subscription of {row['grid_user']} by {row['type']} to {row['identity']} not "
                                "imported: cigri sends mail and webhooks (gridnotify)")
            continue
        user = "root" if row["grid_user"] == "%%admin%%" else row["grid_user"]
        severity = row["severity"] if row["severity"] in SEVERITIES else "medium"  # CiGri's empty meant medium
        stored_notifications.import_mail(conn, user, row["identity"], severity, database.now())
        if not addresses.confirmed(grid.config.notify, user, "mail", row["identity"], None):
            report.notes.append(f"mail subscription of {user} to {row['identity']} imported unconfirmed: nothing is "
                                f"mailed there until {user} runs gridnotify subscribe --mail {row['identity']} and "
                                "confirms the code mailed there (gridnotify confirm)")
        conn.execute("INSERT INTO v3_imports(kind, v3_id, cigri_id) VALUES ('subscription', ?, 0)", [row["id"]])
        report.subscriptions += 1


def _configuration_notes(v3: dict[str, list[dict[str, Any]]], report: Report) -> None:
    """What CiGri kept in its database and cigri keeps in cigri.toml."""
    names = {row["id"]: row["name"] for row in v3["clusters"]}
    for row in v3["users_priority"]:
        report.notes.append(f"users_priority: put [users.{row['grid_user']}.affinity] "
                            f"{names.get(row['cluster_id'], row['cluster_id'])} = {row['priority']} in cigri.toml")
    for row in v3["admission_rules"]:
        if "user_lists" in (row["code"] or "") and "normal_authorized" in (row["code"] or ""):
            report.notes.append("admission rule %d reads /etc/cigri/user_lists: put [admission] user_lists = "
                                "\"/etc/cigri/user_lists\" in cigri.toml" % row["id"])
        else:
            report.notes.append(f"admission rule {row['id']} is Ruby code, never run here: write it as "
                                "[admission] rules in cigri.toml")
