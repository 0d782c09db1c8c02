"""The Grid Engine command-line dialect (qsub, qstat, qacct, qdel) for
:class:`~cigri.backends._commands.Commands`: argv in, text out.

Pure, like Slurm's: one fixed ``sh -c`` program per operation, everything variable a positional
argument. qstat shows a task only until it ends; a poll then reads the accounting records of
the tasks it no longer lists (``qacct -j``, one per array) and their traces (through the
front-end's index, :mod:`cigri.backends._commands`), both in the same round trip
(:mod:`.states` says how they combine). Where accounting is off, or before the accounting file
has a record (Grid Engine writes it every ``accounting_flush_time``), the trace alone says how a
task ended: a task that ran is never taken for lost and run again.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Iterator, Mapping
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from cigri.backends import Capacity, JobSpec, RemoteJob, RemoteState, node_size
from cigri.backends import _grouping as grouping
from cigri.backends._batch import Acting, Polled
from cigri.backends._commands import AS_OWNER, READ, REMEMBER, as_owner
from cigri.backends.gridengine import states
from cigri.backends.gridengine.batch import build
from cigri.errors import BackendError, ClusterBadAnswer, SubmissionRefused, SubmitLimitReached

if TYPE_CHECKING:
    from cigri.backends._ssh import CommandResult

REMEMBERS = False  # qstat forgets a task as it ends
LOCATES = False  # qstat does not say where a task writes: the index does

# $1 = array name, $2 = owner ("": the account), $3 = the index, $4 = the jobs' directory; the
# rest are qsub's flags; the job script comes on stdin. A batch submitted before (the index keeps
# its job id by name, in any state) or still listed under the owner's name is adopted; qsub -w e
# refuses what no queue can ever run. The index keeps where the array's tasks write:
# <directory>/cigri.<cell>.<job id>.<task>.
SUBMIT = AS_OWNER + REMEMBER + """\
name=$1 owner=$2 cigri_index=$HOME/$3 directory=$4
shift 4
cd /  # whatever the owner may enter: qsub gets the job's directory in -wd
id=
[ ! -f "$cigri_index/$name" ] || id=$(head -n 1 -- "$cigri_index/$name")
if [ -z "$id" ]; then
  id=$(qstat -u "${owner:-$(id -un)}" -xml | awk -F'[<>]' -v name="$name" '
    /<JB_job_number>/ { job = $3 } /<JB_name>/ && $3 == name { print job; exit }') || exit 75
fi
if [ -z "$id" ]; then
  id=$(as_owner qsub -terse -N "$name" "$@") || exit
  id=${id%%.*}
fi
cigri_remember "$id" "$directory/cigri.${SGE_CELL:-default}.$id" "$name"
echo "$id"
"""
TRY_AGAIN = 75  # SUBMIT's exit status when qstat failed
# qsub's words when qmaster did not answer: worth another try, unlike a refusal
TRANSIENT = ("unable to contact qmaster", "commlib error", "failed receiving gdi request", "unable to send message")
# qmaster's words when cigri's account (or the owner) has as many jobs or tasks as it may
SUBMIT_LIMITS = ("jobs are allowed per user", "jobs are allowed per cluster", "array tasks are allowed")

# $1 = the index; the rest: the wanted tasks (<job>.<task>). Prints the front-end's UTC offset
# (qstat and qacct write local times), qstat's XML of every task not ended, then for the wanted
# tasks it does not list, their arrays' accounting records (once per array), the traces of those
# whose record does not say all (none yet, or a kill: a warned task's trace says so), and the
# jobs that ended last (qstat's zombies: Grid Engine's last finished_jobs).
POLL = READ + """\
cigri_index=$HOME/$1
shift
printf '#zone %s\\n' "$(date +%z)"
xml=$(qstat -u '*' -g d -xml) || exit
printf '%s\\n' "$xml"
gone=$(printf '%s\\n' "$xml" | awk -F'[<>]' -v ids="$*" '
  BEGIN { n = split(ids, want, " ") }
  /<JB_job_number>/ { job = $3 }
  /<tasks>/ { listed[job "." $3] = 1 }
  END { for (i = 1; i <= n; i++) if (!(want[i] in listed)) printf "%s ", want[i] }')
[ -n "$gone" ] || exit 0
accounting=$(for job in $(printf '%s\\n' $gone | sed 's/[.].*//' | sort -u); do
  printf '#qacct %s\\n' "$job"
  qacct -j "$job" 2>/dev/null
done)
printf '%s\\n' "$accounting"
traced=$(printf '%s\\n' "$accounting" | awk -v ids="$gone" '
  $1 == "jobnumber" { job = $2 } $1 == "taskid" { task = $2 } $1 == "failed" { failed = $2 }
  $1 == "exit_status" { plain[job "." task] = failed != 100 && $2 <= 128 }
  END { n = split(ids, want, " "); for (i = 1; i <= n; i++) if (!plain[want[i]]) print want[i] }')
for id in $traced; do cigri_read +1 "trace $id" - "${id%%.*}" ".${id#*.}.status"; done
zombies=$(qstat -u '*' -s z -xml | awk -F'[<>]' '/<JB_job_number>/ { printf "%s ", $3 }')
printf '#zombies %s\\n' "$zombies"
exit 0
"""

# $1 = the queue of normal jobs ("": every queue). Its queue instances (slots, states), then how
# many tasks wait.
CAPACITY = """\
qstat -f -xml ${1:+-q "$1"} || exit
echo '#pending'
qstat -u '*' -s p -g d | tail -n +3 | wc -l
"""
# a queue instance in one of these states runs no new job: unknown (execd down), alarm, disabled,
# suspended (by a calendar, a subordination or an admin), in error, orphaned, ambiguous
_UNUSABLE = set("uaACdDsSEoc")


def submit_argv(specs: list[JobSpec], options: Mapping[str, Any], acting: Acting, owner: str,
                index: str) -> tuple[list[str], str]:
    """The array's submission (qsub -t 1-N), the job script on stdin."""
    batch = build(specs, options)
    return (["sh", "-c", SUBMIT, "sh", batch.name, owner, index, batch.directory, "-t", f"1-{batch.size}",
             *batch.flags], batch.script)


def parse_submit(cluster: str, result: CommandResult, specs: list[JobSpec]) -> list[str]:
    """The array's task ids, ``<job id>.<i>`` from 1."""
    if result.status != 0:
        words = " ".join(result.stderr.split())[-300:]
        if result.status == TRY_AGAIN or any(w in result.stderr for w in TRANSIENT):
            raise BackendError(f"{cluster}: qstat/qsub failed: {words}")
        if any(w in result.stderr for w in SUBMIT_LIMITS):
            raise SubmitLimitReached(f"{cluster}: submission refused: {words}")
        raise SubmissionRefused(f"{cluster}: submission refused: {words}")
    first = result.stdout.strip().split("\n", 1)[0].strip()
    if not first.isascii() or not first.isdigit():
        raise ClusterBadAnswer(f"qsub printed no job id: {result.stdout.strip()[:200]!r}")
    return [f"{first}.{index}" for index in range(1, len(grouping.split(specs)) + 1)]


def poll_argv(job_ids: list[str], index: str) -> list[str]:
    return ["sh", "-c", POLL, "sh", index, *job_ids]


def parse_poll(stdout: str, job_ids: list[str], options: Mapping[str, Any]) -> Polled:
    """The wanted tasks qstat lists, those whose accounting record says how they ended (with their
    trace where it was read), and the traces read. An ended task without a record is left to its
    trace, unless the trace says it was killed without a word (a best-effort task's preemption)
    while Grid Engine still lists its job among those that ended last: its record, which will
    say why, is on its way (the accounting file is written every accounting_flush_time)."""
    wanted = set(job_ids)
    zone = timezone.utc
    found: dict[str, RemoteJob] = {}
    records: dict[str, states.Record] = {}
    traces: dict[str, str] = {}
    zombies: set[str] = set()
    for header, text in _sections(stdout):
        word, _, rest = header.partition(" ")
        if word == "zone":
            zone = _zone(rest)
            found.update(_listed(text, zone, wanted))
        elif word == "qacct":
            records.update(_records(rest, text, zone))
        elif word == "trace" and rest in wanted:
            traces[rest] = text
        elif word == "zombies":
            zombies.update(rest.split())
    best_effort_queue = str(options.get("best_effort_queue", ""))
    for job_id, record in records.items():
        if job_id in wanted and job_id not in found:
            found[job_id] = states.ended(job_id, record, traces.get(job_id, ""), best_effort_queue)
    for job_id, trace in traces.items():
        if job_id not in found and job_id.partition(".")[0] in zombies and grouping.unfinished(trace):
            found[job_id] = RemoteJob(job_id, RemoteState.RUNNING)  # killed: its record is on its way
    return Polled(found, texts=traces)


def _zone(text: str) -> timezone:
    """``date +%z``'s offset (``+0100``)."""
    match = re.fullmatch(r"([+-])([0-9]{2})([0-9]{2})", text.strip())
    if match is None:
        raise ClusterBadAnswer(f"unexpected time zone {text!r}")
    minutes = int(match[2]) * 60 + int(match[3])
    return timezone(timedelta(minutes=-minutes if match[1] == "-" else minutes))


def _listed(text: str, zone: timezone, wanted: set[str]) -> dict[str, RemoteJob]:
    """The wanted tasks ``qstat -g d -xml`` lists (each array task its own entry)."""
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as error:
        raise ClusterBadAnswer(f"qstat did not print XML ({error}): {text[:200]!r}") from None
    found = {}
    for entry in root.iter("job_list"):
        job, task = entry.findtext("JB_job_number", ""), entry.findtext("tasks", "")
        job_id = f"{job}.{task}"
        if job_id not in wanted:  # another user's, or not cigri's
            continue
        state = states.qstat_state(entry.findtext("state", ""))
        queue = entry.findtext("queue_name", "")
        started = _time(entry.findtext("JAT_start_time", ""), "%Y-%m-%dT%H:%M:%S", zone)
        if state == RemoteState.COMPLETED:  # in error: it never started
            found[job_id] = RemoteJob(job_id, state, 1)
        else:
            found[job_id] = RemoteJob(job_id, state, None, queue.partition("@")[2] or None,
                                      started if state == RemoteState.RUNNING else None)
    return found


def _records(job: str, text: str, zone: timezone) -> dict[str, states.Record]:
    """The tasks' records of one array's ``qacct -j`` (blocks of ``name value`` lines)."""
    records = {}
    for block in text.split("=" * 62):
        fields = dict(_field(line) for line in block.splitlines() if line.strip())
        task = fields.get("taskid", "")
        if fields.get("jobnumber") != job or not task.isdigit():
            continue
        failed, status = fields.get("failed", "").split(" ", 1)[0], fields.get("exit_status", "").split(" ", 1)[0]
        if not failed.isdigit() or not status.isdigit():
            raise ClusterBadAnswer(f"unexpected qacct record of job {job} task {task}: {block.strip()[:200]!r}")
        walltime = re.search(r"h_rt=([0-9]+)(?![0-9:])", fields.get("category", ""))
        records[f"{job}.{task}"] = states.Record(
            fields.get("qname", ""), fields.get("hostname", ""), int(failed), int(status),
            _time(fields.get("start_time", ""), "%a %b %d %H:%M:%S %Y", zone),
            _time(fields.get("end_time", ""), "%a %b %d %H:%M:%S %Y", zone), int(walltime[1]) if walltime else None)
    return records


def _field(line: str) -> tuple[str, str]:
    name, _, value = line.strip().partition(" ")
    return name, value.strip()


def _time(text: str, layout: str, zone: timezone) -> float | None:
    try:
        return datetime.strptime(text.strip(), layout).replace(tzinfo=zone).timestamp()
    except ValueError:  # "-/-", "undefined": not yet
        return None


def terminate_argv(job_ids: list[str], owner: str) -> list[str] | None:
    """None: qdel warns the task (-notify) and its script sends SIGTERM itself."""
    return None


def signalled(stdout: str) -> bool:
    return False


def cancel_argv(job_ids: list[str], owner: str = "") -> list[str]:
    """qdel of ended or unknown tasks fails for them alone: the next poll tells what happened."""
    return as_owner(owner, ["qdel", *job_ids])


def capacity_argv(options: Mapping[str, Any]) -> list[str]:
    return ["sh", "-c", CAPACITY, "sh", str(options.get("queue", ""))]


def parse_capacity(stdout: str, options: Mapping[str, Any]) -> Capacity:
    """The slots of the usable instances of the normal jobs' queue (every queue but the
    best-effort one where none is named), those no job holds, the waiting tasks, and the slots of
    a host, when alike (Grid Engine's memory is a per-slot limit: not counted)."""
    text, _, pending = stdout.partition("#pending\n")
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as error:
        raise ClusterBadAnswer(f"qstat -f did not print XML ({error}): {text[:200]!r}") from None
    queued = pending.strip()
    if not queued.isdigit():
        raise ClusterBadAnswer(f"unexpected count of waiting tasks {pending[:100]!r}")
    best_effort_queue = "" if options.get("queue") else str(options.get("best_effort_queue", ""))
    total = free = 0
    hosts: dict[str, int] = {}
    for instance in root.iter("Queue-List"):
        queue, _, host = instance.findtext("name", "").partition("@")
        if best_effort_queue and queue == best_effort_queue or set(instance.findtext("state", "")) & _UNUSABLE:
            continue
        numbers = [instance.findtext(tag, "") for tag in ("slots_total", "slots_used", "slots_resv")]
        if not all(number.isdigit() for number in numbers):
            raise ClusterBadAnswer(f"unexpected queue instance {ElementTree.tostring(instance)[:200]!r}")
        slots, used, reserved = (int(number) for number in numbers)
        total += slots
        free += max(0, slots - used - reserved)
        hosts[host] = hosts.get(host, 0) + slots
    node_cores, _ = node_size((slots, None) for slots in hosts.values())
    return Capacity(total, free, int(queued), node_cores=node_cores)


def trace(job_id: str) -> tuple[str, str]:
    """Task ``42.3`` is kept under its array, ``42``, its files named ``…42.3``."""
    job, _, task = job_id.partition(".")
    return job, f".{task}"


def _sections(stdout: str) -> Iterator[tuple[str, str]]:
    """``(header, text)`` of each ``#header`` section (the first, headerless, is qstat's XML)."""
    header = ""
    lines: list[str] = []
    for line in stdout.splitlines():
        if line.startswith("#"):
            yield header, "\n".join(lines)
            header, lines = line[1:], []
        else:
            lines.append(line)
    yield header, "\n".join(lines)
