"""Temporal grouping inside a job script, shared by the Slurm and OAR dialects.

A group is one remote job (a Slurm array task, an OAR array job) whose script branch runs its
specs one after another, each in a subshell with its own environment, its own output files
(``<prefix>+<n>.stdout``/``.stderr``) and its own walltime (``timeout``), appending two lines
per spec to the group's status file ``<prefix>.status`` in the job's directory::

    <n> start <epoch> <walltime>
    <n> end <epoch> <exit status, or "timeout">

Spec ``n`` of the group whose remote id is ``G`` has the remote id ``G+n``. At poll time the
backend polls ``G`` once and reads the status file: an ended spec reports its own ending, and
when the group ended first (cancelled, preempted, killed at its walltime) the spec it was
running shares the group's fate and those it never started are ``PREEMPTED``: back to the head
of the bag without costing an attempt. The dialects only say where the prefix and the status
file are; this module writes the shell and reads the file.

cigri's own files (outputs, status files) are created private to the job's owner
(:data:`SAVE_UMASK`, :func:`private_outputs`); the program runs with the job's own umask.

A gang (``JobSpec.gang``) is a group whose specs start together instead: each in the background,
behind the words the dialect gives to launch it inside the job's allocation (Slurm's ``srun``
for a job step), and the job waits for them all. Its status file says the same.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from cigri.backends import JobSpec, RemoteJob, RemoteState

SEPARATOR = "+"
MEMBER_ID = re.compile(r"(.+)\+([0-9]+)\Z")
KILL_GRACE = 10  # seconds between a spec's SIGTERM at its walltime and its SIGKILL

# First in every job script: the umask the job runs its program with, restored after cigri made
# its own files (created with umask 077: its owner's alone).
SAVE_UMASK = "cigri_umask=$(umask)"

# Defined once per script. A TERM (scancel, oardel, preemption, the group's walltime) ends the
# whole group at once: the trap runs as soon as the running spec's subshell returns. A cluster
# may signal the job's processes one at a time (Slurm's proctrack/linuxproc, deepest first), so
# the script's own TERM can come after it saw its running spec die, even after that spec's
# subshell wrote its end and returned: a spec that ended by a signal (status above 128, which
# its subshell returns) holds the group a second before the next spec starts, long enough for
# the job's own TERM to come and end it; a spec's program that died of a signal by itself (a
# segfault) only costs that second. The group runs under umask 077 (its status file is
# private); each spec gets the job's own back.
FUNCTION = """\
trap 'exit 143' TERM INT HUP
cigri_killed() { if [ "$1" -gt 128 ]; then sleep 1; fi; }
cigri_member() {
  n=$1 w=$2
  shift 2
  start=$(date +%s.%N)
  echo "$n start $start $w" >> "$prefix.status"
  (exec >"$prefix+$n.stdout" 2>"$prefix+$n.stderr"; umask "$cigri_umask"; exec timeout --foreground -k KILL_GRACE "$w" "$@")
  s=$?
  end=$(date +%s.%N)
  if [ "$s" -eq 124 ] || [ "$s" -eq 137 ]; then [ $((${end%.*} - ${start%.*})) -lt "$w" ] || s=timeout; fi
  echo "$n end $end $s" >> "$prefix.status"
  [ "$s" = timeout ] || return "$s"
}
""".replace("KILL_GRACE", str(KILL_GRACE))

# $@ = owner and status file, pairs; prints "#<path>" then the file (nothing when it does not
# exist yet), read as its owner ("": as the caller, the cluster's account).
READ = """\
while [ $# -ge 2 ]; do
  printf '#%s\\n' "$2"
  if [ -z "$1" ]; then tail -n +1 -- "$2"; else sudo -n -u "$1" -- tail -n +1 -- "$2"; fi 2>/dev/null
  shift 2
done
exit 0
"""


def private_outputs(stdout: str, stderr: str) -> list[str]:
    """Script lines sending the rest of the job's output to these files (shell words), made
    private to the job's owner, the program keeping the job's umask."""
    return ["  umask 077", f"  exec >{stdout} 2>{stderr}", '  umask "$cigri_umask"']


@dataclass(frozen=True)
class Member:
    """What a group's status file says about one of its specs."""

    started_at: float | None = None
    walltime: int | None = None
    finished_at: float | None = None
    status: str | None = None  # the exit status, or "timeout"


def member_id(group_id: str, position: int) -> str:
    return f"{group_id}{SEPARATOR}{position}"


def group_of(remote_id: str) -> str:
    """The remote id of the job running ``remote_id`` (itself when it is not grouped)."""
    match = MEMBER_ID.match(remote_id)
    return match[1] if match else remote_id


def remote_jobs(remote_ids: list[str], valid: re.Pattern[str]) -> list[str]:
    """The distinct remote jobs behind well-formed ids, in order: cancelling a member of a group
    cancels the job running the whole group."""
    return list(dict.fromkeys(group_of(i) for i in remote_ids if valid.match(i)))


def split(specs: list[JobSpec]) -> list[list[JobSpec]]:
    """The remote jobs of a batch, in order: consecutive specs of one group, or one spec alone."""
    jobs: list[list[JobSpec]] = []
    for spec in specs:
        if spec.group and jobs and jobs[-1][0].group == spec.group:
            jobs[-1].append(spec)
        else:
            jobs.append([spec])
    return jobs


def ids(groups: list[list[JobSpec]], remote_ids: list[str]) -> dict[str, str]:
    """``{key: remote id}`` once each remote job (group or lone spec) has its id."""
    result = {}
    for members, remote_id in zip(groups, remote_ids, strict=True):
        if members[0].group:
            result.update({spec.key: member_id(remote_id, n) for n, spec in enumerate(members)})
        else:
            result[members[0].key] = remote_id
    return result


def branch(members: list[JobSpec], prefix: str, quote: Callable[[str], str], launch: tuple[str, ...] = ()) -> list[str]:
    """The lines of a script branch running a group, or a gang at once behind ``launch``;
    ``prefix`` is a shell word (it may expand ``$SLURM_ARRAY_JOB_ID``...), every other value
    goes through ``quote``."""
    lines = ["  umask 077", f"  prefix={prefix}"]
    gang = members[0].gang
    for n, spec in enumerate(members):
        exports = "".join(f"export {name}={quote(value)}; " for name, value in spec.environment.items())
        argv = " ".join(quote(word) for word in ((*launch, *spec.argv) if gang else spec.argv))
        lines.append(f"  ({exports}cigri_member {n} {spec.walltime_seconds} {argv})"
                     + (" &" if gang else ' || cigri_killed "$?"'))
    if gang:
        lines.append("  wait")
    return lines


def same_size(jobs: list[list[JobSpec]]) -> bool:
    """Whether every gang of a batch has as many members: one array or oarsub has one request."""
    return len({len(members) for members in jobs if members[0].gang}) <= 1


def parse_read(stdout: str) -> dict[str, str]:
    """``{path: content}`` from what :data:`READ` printed."""
    files: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in stdout.splitlines():
        if line.startswith("#"):
            current = files.setdefault(line[1:], [])
        elif current is not None:
            current.append(line)
    return {path: "\n".join(lines) for path, lines in files.items()}


def parse_status(text: str) -> dict[int, Member]:
    """The status file of a group; a half-written last line is ignored."""
    members: dict[int, Member] = {}
    for line in text.splitlines():
        words = line.split()
        if len(words) != 4 or not words[0].isdigit():
            continue
        n, what, at, value = int(words[0]), words[1], _seconds(words[2]), words[3]
        if what == "start" and value.isdigit():
            members[n] = Member(at, int(value))
        elif what == "end" and n in members:
            members[n] = Member(members[n].started_at, members[n].walltime, at, value)
    return members


def _seconds(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:  # a date(1) without %N prints "1700000000.N"
        whole = text.split(".", 1)[0]
        return float(whole) if whole.isdigit() else None


def member_job(remote_id: str, group: RemoteJob, member: Member | None) -> RemoteJob:
    """One spec's state from its group's and the group's status file (None: never started)."""
    if group.state in (RemoteState.QUEUED, RemoteState.UNKNOWN):
        return RemoteJob(remote_id, group.state)
    if member is not None and member.status is not None:
        if member.status == "timeout":
            return RemoteJob(remote_id, RemoteState.TIMEOUT, None, group.node, member.started_at, member.finished_at)
        code = int(member.status) if member.status.isdigit() else 1
        return RemoteJob(remote_id, RemoteState.COMPLETED, code, group.node, member.started_at, member.finished_at)
    started = member.started_at if member is not None else None
    if group.state == RemoteState.RUNNING:  # waiting its turn inside a running job still holds the slot
        return RemoteJob(remote_id, RemoteState.RUNNING, None, group.node, started)
    if member is None:  # the group ended before its turn: not the task's fault
        return RemoteJob(remote_id, RemoteState.PREEMPTED, None, group.node, None, group.finished_at)
    if group.state == RemoteState.TIMEOUT:  # the group's walltime, not the spec's own
        return RemoteJob(remote_id, RemoteState.PREEMPTED, None, group.node, started, group.finished_at)
    if group.state == RemoteState.COMPLETED:  # the script itself died under the spec (a node failure)
        return RemoteJob(remote_id, RemoteState.UNKNOWN)
    return RemoteJob(remote_id, group.state, None, group.node, started, group.finished_at)


def members(remote_ids: list[str], groups: dict[str, RemoteJob],
            statuses: dict[str, dict[int, Member]]) -> dict[str, RemoteJob]:
    """The state of every wanted id, grouped or not, from the polled jobs and the status files read."""
    result = {}
    for remote_id in remote_ids:
        match = MEMBER_ID.match(remote_id)
        group = groups.get(group_of(remote_id), RemoteJob(group_of(remote_id), RemoteState.UNKNOWN))
        if match is None:
            result[remote_id] = group
        else:
            result[remote_id] = member_job(remote_id, group, statuses.get(match[1], {}).get(int(match[2])))
    return result


def needing_status(remote_ids: list[str], groups: dict[str, RemoteJob]) -> list[str]:
    """The groups among the wanted ids whose status file has something to tell (started ones)."""
    wanted = dict.fromkeys(m[1] for i in remote_ids if (m := MEMBER_ID.match(i)))
    return [g for g in wanted if g in groups and groups[g].state not in (RemoteState.QUEUED, RemoteState.UNKNOWN)]
