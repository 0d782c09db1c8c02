"""Temporal grouping inside a job script, and the status files every batch dialect reads.

A group is one remote job (a Slurm array task, an OAR array job, a Grid Engine array task) whose
script branch runs its specs one after another, each in a subshell with its own environment, its
own output files (``<prefix>+<n>.stdout``/``.stderr``) and its own walltime (``timeout``),
appending two lines per spec to the group's status file ``<prefix>.status`` in the job's
directory::

    <n> start <epoch> <walltime>
    <n> end <epoch> <exit status, or "timeout">

and, when the job is signalled (cancelled, preempted, killed at its walltime), one line
``kill <epoch> <signal>``. Spec ``n`` of the group whose remote id is ``G`` has the remote id
``G+n``. At poll time the backend polls ``G`` once and reads the status file: an ended spec
reports its own ending, and when the group ended first (cancelled, preempted, killed at its
walltime) the spec it was running shares the group's fate and those it never started are
``PREEMPTED``: back to the head of the bag without costing an attempt. The dialects only say
where the prefix and the status file are; this module writes the shell and reads the file.

A lone job of a resource manager that forgets its ended jobs (Slurm without accounting, Grid
Engine) keeps a status file too, as a group of one (:data:`ALONE`, member 0, its outputs named
``<prefix>.stdout``): its trace, which tells how it ended once the cluster no longer does
(:func:`forgotten`), so that a job that ended is never taken for lost and run again.

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
# whole job at once: the trap runs as soon as the running spec's subshell returns, and notes the
# kill in the status file. A cluster may signal the job's processes one at a time (Slurm's
# proctrack/linuxproc, deepest first), so the script's own TERM can come after it saw its running
# spec die, even after that spec's subshell wrote its end and returned: a spec that ended by a
# signal (status above 128, which its subshell returns) holds the group a second before the next
# spec starts, long enough for the job's own TERM (or a cluster's warning, below) to come and end
# it; a spec's program that died of a signal by itself (a segfault) only costs that second. The
# group runs under umask 077 (its status file is private); each spec gets the job's own back.
_COMMON = """\
cigri_kill() { [ -z "$prefix" ] || echo "kill $(date +%s.%N) $1" >> "$prefix.status"; exit "$2"; }
trap 'cigri_kill TERM 143' TERM
trap 'cigri_kill INT 130' INT
trap 'cigri_kill HUP 129' HUP
cigri_killed() { if [ "$1" -gt 128 ]; then sleep 1; [ -z "$cigri_term" ] || exit "$cigri_term"; fi; }
cigri_exec() { o=$1; shift; IGNOREexec >"$o.stdout" 2>"$o.stderr"; umask "$cigri_umask"; exec "$@"; }
RUN
cigri_member() {
  n=$1 w=$2
  shift 2
  start=$(date +%s.%N)
  echo "$n start $start $w" >> "$prefix.status"
  cigri_run cigri_exec "$prefix+$n" timeout --foreground -k KILL_GRACE "$w" "$@"
  s=$?
  end=$(date +%s.%N)
  if [ "$s" -eq 124 ] || [ "$s" -eq 137 ]; then [ $((${end%.*} - ${start%.*})) -lt "$w" ] || s=timeout; fi
  echo "$n end $end $s" >> "$prefix.status"
  [ "$s" = timeout ] || return "$s"
}
cigri_alone() {
  echo "0 start $(date +%s.%N) $1" >> "$prefix.status"
  shift
  cigri_run cigri_exec "$prefix" "$@"
  s=$?
  echo "0 end $(date +%s.%N) $s" >> "$prefix.status"
  exit "$s"
}
""".replace("KILL_GRACE", str(KILL_GRACE))
# The spec's program in a subshell, waited for in the foreground: the script's own traps run
# once it returns (the cluster signals the program itself).
_FOREGROUND = 'cigri_run() { ("$@"); }'
# Where the cluster warns a job's whole process group with a signal before it kills it (Grid
# Engine's SIGUSR2, qsub -notify), the program ignores the warning, and the script, waiting for
# it in the background, notes the kill and sends SIGTERM to the job's processes: the program has
# the cluster's notify time to clean up, as it has Slurm's KillWait. A group's member shells do
# not ignore it: a group ends at once.
_NOTIFIED = """\
cigri_notified() {
  [ -z "$cigri_term" ] || return 0
  cigri_term=143
  trap '' TERM
  [ -z "$prefix" ] || echo "kill $(date +%s.%N) SIGNAL" >> "$prefix.status"
  kill -TERM 0
}
trap cigri_notified SIGNAL
cigri_run() {
  "$@" &
  cigri_child=$!
  while wait "$cigri_child"; s=$?; [ "$s" -gt 128 ] && kill -0 "$cigri_child" 2>/dev/null; do :; done
  [ -z "$cigri_term" ] || exit "$cigri_term"
  return "$s"
}"""


def functions(notify: str = "") -> str:
    """The shell functions of a job script (see :data:`_COMMON`); ``notify``: the signal the cluster
    sends the job's process group before it kills it, where it does not send SIGTERM itself."""
    if not notify:
        return _COMMON.replace("IGNORE", "").replace("RUN", _FOREGROUND)
    return _COMMON.replace("IGNORE", f"trap '' {notify}; ").replace("RUN", _NOTIFIED.replace("SIGNAL", notify))


FUNCTION = functions()


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


def alone(spec: JobSpec, prefix: str, quote: Callable[[str], str], walltime: int) -> list[str]:
    """The lines of a script branch running one job that leaves its trace (:data:`FUNCTION`'s
    ``cigri_alone``); ``prefix`` is a shell word as for :func:`branch`, ``walltime`` the limit the
    cluster enforces (seconds), which tells a kill at the walltime from another."""
    return [*(f"  export {name}={quote(value)}" for name, value in spec.environment.items()),
            "  umask 077", f"  prefix={prefix}",
            f"  cigri_alone {walltime} " + " ".join(quote(word) for word in spec.argv)]


def same_size(jobs: list[list[JobSpec]]) -> bool:
    """Whether every gang of a batch has as many members: one array or oarsub has one request."""
    return len({len(members) for members in jobs if members[0].gang}) <= 1


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


def killed_at(text: str) -> float | None:
    """When a status file says its job was signalled (its first ``kill`` line), else None."""
    for line in text.splitlines():
        words = line.split()
        if len(words) == 3 and words[0] == "kill":
            return _seconds(words[1])
    return None


def unfinished(text: str) -> bool:
    """Whether a status file says its job was killed without a word: a spec started and never
    ended, and no ``kill`` line."""
    return killed_at(text) is None and any(member.status is None for member in parse_status(text).values())


def forgotten(remote_id: str, text: str) -> RemoteJob:
    """A job the cluster no longer knows, read from its status file (a lone job's trace, or its
    group's): how it ended, so that a job that ran is never taken for lost and run again.

    A lone job that ended by itself is completed with its exit status; one that was signalled is
    cancelled, or timed out when the signal came at its walltime (the cluster cannot say which of
    a cancel, a preemption or a node's loss signalled it: cigri knows its own cancels). A group
    ended as its members say (:func:`member_job`), the member it was running when signalled
    cancelled, those it never started preempted. Unknown: no file (the job never started, or its
    directory is gone), or a job that died without a word (its node failed).
    """
    members, killed = parse_status(text), killed_at(text)
    match = MEMBER_ID.match(remote_id)
    if match is not None:
        ends = [m.finished_at for m in members.values() if m.finished_at is not None]
        state = RemoteState.CANCELLED if killed is not None else RemoteState.COMPLETED
        group = RemoteJob(match[1], state if members else RemoteState.UNKNOWN,
                          finished_at=killed if killed is not None else max(ends, default=None))
        return member_job(remote_id, group, members.get(int(match[2])))
    alone = members.get(0)
    if alone is None:
        return RemoteJob(remote_id, RemoteState.UNKNOWN)
    if killed is not None:
        limit = alone.walltime or 0
        timed_out = limit > 0 and alone.started_at is not None and killed - alone.started_at >= limit
        return RemoteJob(remote_id, RemoteState.TIMEOUT if timed_out else RemoteState.CANCELLED, None, None,
                         alone.started_at, killed)
    if alone.status is None or not alone.status.isdigit():
        return RemoteJob(remote_id, RemoteState.UNKNOWN)
    return RemoteJob(remote_id, RemoteState.COMPLETED, int(alone.status), None, alone.started_at, alone.finished_at)


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
