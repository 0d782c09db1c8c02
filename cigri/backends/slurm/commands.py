"""The Slurm command-line dialect (sbatch, squeue, sacct, scancel, sinfo) for
:class:`~cigri.backends._commands.Commands`: argv in, text out.

Pure: builds the argv of one remote command per operation and parses what it prints. Where an
operation needs more than one Slurm command, it runs as one fixed ``sh -c`` script whose text
is a constant here and whose inputs (names, ids) are positional arguments, so each operation
costs exactly one SSH round trip and nothing from a job ever becomes shell code. Slurm forgets
an ended job after ``MinJobAge`` where it has no accounting (``sacct``): submissions keep where
their jobs write in the front-end's index, and every job leaves its trace there
(:mod:`cigri.backends._grouping`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cigri.backends import Capacity, JobSpec, RemoteJob, RemoteState, node_size
from cigri.backends import _grouping as grouping
from cigri.backends._batch import Acting, Polled
from cigri.backends._commands import AS_OWNER, REMEMBER, as_owner
from cigri.backends.slurm.batch import Batch, build
from cigri.backends.slurm.states import NEVER_STARTS, translate
from cigri.errors import BackendError, ClusterBadAnswer, SubmissionRefused, SubmitLimitReached

if TYPE_CHECKING:
    from cigri.backends._ssh import CommandResult

REMEMBERS = False  # without accounting, squeue forgets a job MinJobAge seconds after its end
LOCATES = True

# $1 = array name, $2 = owner ("": the account), $3 = the index, $4 = the jobs' directory; the
# rest are sbatch's flags; the job script comes on stdin. An array of that name of the owner's
# already there (an interrupted earlier submission) is adopted. sbatch accepts some arrays that
# will never start (more CPUs than any node has, a QOS per-job limit without DenyOnLimit...) and
# leaves them pending; their pending reason says so at once (states.NEVER_STARTS): such an array
# is cancelled and refused, adopted or new. The index keeps where the array's jobs write:
# <directory>/cigri.<Slurm's cluster name>.<array id>_<task>.
SUBMIT = AS_OWNER + REMEMBER + """\
name=$1 owner=$2 cigri_index=$HOME/$3 directory=$4
shift 4
cd /  # whatever the owner may enter: sbatch gets the job's directory in --chdir
found=$(squeue -h -t all -u "${owner:-$(id -un)}" --name="$name" -o %F) || exit
if [ -n "$found" ]; then
  id=$(printf '%s\\n' "$found" | head -n 1)
else
  id=$(as_owner sbatch --parsable "$@") || exit
  id=${id%%;*}
fi
job=$(squeue -h -j "$id" -O 'Reason:|,Cluster:|' 2>/dev/null | head -n 1)
reason=${job%%|*} cluster=${job#*|}
case "$reason" in
  PATTERNS)
    as_owner scancel "$id"
    echo "the cluster can never run this array (pending reason $reason)" >&2
    exit 1 ;;
esac
[ -z "$job" ] || cigri_remember "$id" "$directory/cigri.${cluster%|}.$id"
echo "$id"
""".replace("PATTERNS", "|".join(NEVER_STARTS))
# sbatch's words when slurmctld did not answer: worth another try, unlike a refusal
TRANSIENT = ("Unable to contact slurm controller", "Socket timed out", "Zero Bytes were transmitted")
# the reasons slurmctld gives when the account has as many jobs as a limit lets it submit (an
# array counts each of its tasks); sbatch prints the reason on its own line before "Job violates
# accounting/QOS policy", which also covers limits a job can never meet (QOSMaxWallDurationPerJobLimit)
SUBMIT_LIMITS = ("MaxSubmitJob", "GrpSubmitJob")


def submit_error(stderr: str) -> type[BackendError]:
    """What a failed submission means: try again next cycle, wait for jobs to end, or never."""
    if any(words in stderr for words in TRANSIENT):
        return BackendError
    if any(reason in stderr for reason in SUBMIT_LIMITS):
        return SubmitLimitReached
    return SubmissionRefused


# $@ = the remote ids wanted, of any user. squeue knows every job younger than MinJobAge (its
# lines of other jobs are dropped here); the ids it has forgotten are asked to sacct, which
# only answers where accounting is configured. Each line ends with where the job writes: its
# owner, its cluster and its working directory (last: a directory may hold a "|").
POLL = """\
SLURM_TIME_FORMAT=%s
export SLURM_TIME_FORMAT
fields='JobArrayID:|,State:|,exit_code:|,NodeList:|,StartTime:|,EndTime:|,UserName:|,Cluster:|,WorkDir:|'
out=$(squeue -h -t all -r -O "$fields") || exit
out=$(printf '%s\\n' "$out" | awk -F'|' -v ids="$*" '
  BEGIN { n = split(ids, want, " "); for (i = 1; i <= n; i++) wanted[want[i]] = 1 }
  ($1 in wanted)')
[ -z "$out" ] || printf '%s\\n' "$out"
missing=$(printf '%s\\n' "$out" | awk -F'|' -v ids="$*" '
  BEGIN { n = split(ids, want, " ") }
  { seen[$1] = 1 }
  END { for (i = 1; i <= n; i++) if (!(want[i] in seen)) printf "%s%s", (c++ ? "," : ""), want[i] }')
[ -n "$missing" ] || exit 0
echo '#sacct'
sacct -n -P -X -j "$missing" -o JobID,State,ExitCode,NodeList,Start,End,User,Cluster,WorkDir 2>/dev/null
exit 0
"""

# $1 = partition (may be empty). Nodes are listed once per partition: the parser dedups them.
CAPACITY = """\
sinfo -h -N ${1:+-p "$1"} -O 'NodeList:|,CPUsState:|,Memory:|,AllocMem:|' || exit
echo '#pending'
squeue -h -r -t PENDING ${1:+-p "$1"} -o %i | wc -l
"""


def sbatch_flags(batch: Batch) -> list[str]:
    flags = [f"--array=0-{batch.size - 1}", f"--job-name={batch.name}", f"--chdir={batch.directory}",
             f"--time={batch.minutes}", "--output=/dev/null", "--error=/dev/null"]
    shape = batch.shape
    if shape.nodes is not None:
        flags += [f"--nodes={shape.nodes}", "--ntasks-per-node=1"]
    flags += [f"--ntasks={shape.tasks}", f"--cpus-per-task={shape.cpus_per_task}"]
    if shape.exclusive:
        flags.append("--exclusive")
    if batch.memory_mb:
        flags.append(f"--mem={batch.memory_mb}M")
    if batch.memory_per_cpu_mb:
        flags.append(f"--mem-per-cpu={batch.memory_per_cpu_mb}M")
    for flag, value in (("partition", batch.partition), ("qos", batch.qos), ("account", batch.account),
                        ("constraint", batch.constraint)):
        if value:
            flags.append(f"--{flag}={value}")
    return flags


def submit_argv(specs: list[JobSpec], options: Mapping[str, Any], acting: Acting, owner: str,
                index: str) -> tuple[list[str], str]:
    """The array's submission, the job script on stdin."""
    batch = build(specs, options)
    return ["sh", "-c", SUBMIT, "sh", batch.name, owner, index, batch.directory, *sbatch_flags(batch)], batch.script


def parse_submit(cluster: str, result: CommandResult, specs: list[JobSpec]) -> list[str]:
    """The array's task ids, from ``sbatch --parsable`` (``42`` or ``42;cluster``) or an adopted array."""
    if result.status != 0:
        words = result.stderr.strip()[:300]
        raise submit_error(result.stderr)(f"{cluster}: submission refused: {words}")
    first = result.stdout.strip().split("\n", 1)[0].split(";", 1)[0].strip()
    if not first.isascii() or not first.isdigit():
        raise ClusterBadAnswer(f"sbatch printed no job id: {result.stdout.strip()[:200]!r}")
    return [f"{first}_{index}" for index in range(len(grouping.split(specs)))]


def poll_argv(job_ids: list[str], index: str = "") -> list[str]:
    return ["sh", "-c", POLL, "sh", *job_ids]


def _number(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() else None


def _time(text: str) -> float | None:
    """An epoch (``SLURM_TIME_FORMAT=%s``); ``N/A``, ``Unknown`` and 0 mean not yet."""
    number = _number(text)
    return float(number) if number else None


def _job(remote_id: str, state: str, status: int | None, node: str, start: str, end: str) -> RemoteJob:
    remote, code = translate(state, status)
    ended = remote not in (RemoteState.QUEUED, RemoteState.RUNNING)
    return RemoteJob(remote_id, remote, code, node or None,
                     None if remote == RemoteState.QUEUED else _time(start), _time(end) if ended else None)


def _sacct_status(exit_code: str) -> int:
    """sacct's ``code:signal`` as a raw wait status."""
    code, _, signal = exit_code.partition(":")
    return ((_number(code) or 0) << 8) | (_number(signal) or 0)


def parse_poll(stdout: str, job_ids: list[str], options: Mapping[str, Any] | None = None) -> Polled:
    """The wanted ids squeue's lines know, then sacct's (the others are not there), and where
    each writes (``<directory>/cigri.<cluster>.<id>``, see :mod:`.batch`)."""
    wanted = set(job_ids)
    found: dict[str, RemoteJob] = {}
    files: dict[str, tuple[str, str]] = {}
    squeue, _, sacct = stdout.partition("#sacct\n")
    for lines, status_of in ((squeue, _number), (sacct, _sacct_status)):
        for line in lines.splitlines():
            fields = line.split("|", 8)
            if fields[0] not in wanted or fields[0] in found:
                continue
            status = status_of(fields[2]) if len(fields) == 9 else None
            if status is None:
                if lines is sacct:  # sacct's words for another job: it answers what it has
                    continue
                raise ClusterBadAnswer(f"unexpected squeue line {line!r}")
            found[fields[0]] = _job(fields[0], fields[1], status, *fields[3:6])
            user, cluster, directory = fields[6:9]
            directory = directory.removesuffix("|") if lines is squeue else directory  # squeue ends each field with "|"
            if user and cluster and directory.startswith("/"):
                files[fields[0]] = (user, f"{directory.rstrip('/')}/cigri.{cluster}.{fields[0]}")
    return Polled(found, files)


def terminate_argv(job_ids: list[str], owner: str) -> list[str] | None:
    """None: scancel sends SIGTERM itself, and SIGKILL ``KillWait`` seconds later."""
    return None


def signalled(stdout: str) -> bool:
    return False


def cancel_argv(job_ids: list[str], owner: str = "") -> list[str]:
    """scancel exits 0 even for unknown ids: the next poll tells what happened."""
    return as_owner(owner, ["scancel", *job_ids])


def capacity_argv(options: Mapping[str, Any]) -> list[str]:
    return ["sh", "-c", CAPACITY, "sh", str(options.get("partition", ""))]


def parse_capacity(stdout: str, options: Mapping[str, Any] | None = None) -> Capacity:
    """Usable CPUs (allocated + idle) and idle CPUs of the partition's nodes, the memory no job
    holds and the memory jobs hold on the nodes with usable CPUs (MiB), pending jobs, and the
    nodes' size if alike."""
    nodes, _, pending = stdout.partition("#pending\n")
    usage: dict[str, tuple[int, int, int, int]] = {}
    sizes: dict[str, tuple[int, int]] = {}
    for line in nodes.splitlines():
        fields = line.split("|")
        texts = (*fields[1].split("/"), *fields[2:4]) if len(fields) == 5 else ()
        numbers = [number for text in texts if (number := _number(text)) is not None]
        if len(texts) != 6 or len(numbers) != 6:  # CPUs allocated/idle/other/total, memory, held
            raise ClusterBadAnswer(f"unexpected sinfo line {line!r}")
        allocated, idle, _, cpus, memory, held = numbers
        name = fields[0].strip()
        usable = bool(allocated + idle)
        usage[name] = (allocated, idle, max(0, memory - held) if usable else 0, held if usable else 0)
        if usable:  # a drained or down node offers nothing
            sizes[name] = (cpus, memory)
    queued = _number(pending.strip())
    if not usage or queued is None:
        raise ClusterBadAnswer(f"unexpected sinfo/squeue answer {stdout[:200]!r}")
    allocated, idle, free_memory, held_memory = (sum(column) for column in zip(*usage.values()))
    node_cores, node_memory = node_size(sizes.values())
    return Capacity(allocated + idle, idle, queued, free_memory_mb=free_memory, node_cores=node_cores,
                    node_memory_mb=node_memory, allocated_memory_mb=held_memory)


def trace(job_id: str) -> tuple[str, str]:
    """Array task ``42_3`` is kept under its array, ``42``, its files named ``…42_3``."""
    array, _, task = job_id.partition("_")
    return array, f"_{task}"
