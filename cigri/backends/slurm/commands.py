"""The Slurm command-line dialect (sbatch, squeue, sacct, scancel, sinfo): argv in, text out.

Pure: builds the argv of one remote command per operation and parses what it prints. Where an
operation needs more than one Slurm command, it runs as one fixed ``sh -c`` script whose text
is a constant here and whose inputs (names, ids) are positional arguments, so each operation
costs exactly one SSH round trip and nothing from a job ever becomes shell code.
"""

from __future__ import annotations

from cigri.backends import Capacity, RemoteJob, RemoteState, node_size
from cigri.backends.slurm.batch import Batch
from cigri.backends.slurm.states import NEVER_STARTS, translate
from cigri.errors import BackendError, ClusterBadAnswer, SubmissionRefused, SubmitLimitReached

# Acting as a job's owner: $owner is empty (run as the cluster's account) or the owner's login,
# as whom sudo runs the command (the cluster's sudoers allows exactly sbatch, scancel and tail).
AS_OWNER = """\
as_owner() { if [ -n "$owner" ]; then sudo -n -u "$owner" -- "$@"; else "$@"; fi; }
"""

# $1 = array name, $2 = owner ("": the account); the rest are sbatch's flags; the job script
# comes on stdin. An array of that name of the owner's already there (an interrupted earlier
# submission) is adopted. sbatch accepts some arrays that will never start (more CPUs than any
# node has, a QOS per-job limit without DenyOnLimit...) and leaves them pending; their pending
# reason says so at once (states.NEVER_STARTS): such an array is cancelled and refused, adopted or new.
SUBMIT = AS_OWNER + """\
name=$1 owner=$2
shift 2
cd /  # whatever the owner may enter: sbatch gets the job's directory in --chdir
found=$(squeue -h -t all -u "${owner:-$(id -un)}" --name="$name" -o %F) || exit
if [ -n "$found" ]; then
  id=$(printf '%s\\n' "$found" | head -n 1)
else
  id=$(as_owner sbatch --parsable "$@") || exit
  id=${id%%;*}
fi
reason=$(squeue -h -j "$id" -o %r 2>/dev/null | head -n 1)
case "$reason" in
  PATTERNS)
    as_owner scancel "$id"
    echo "the cluster can never run this array (pending reason $reason)" >&2
    exit 1 ;;
esac
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
# only answers where accounting is configured.
POLL = """\
SLURM_TIME_FORMAT=%s
export SLURM_TIME_FORMAT
out=$(squeue -h -t all -r -O 'JobArrayID:|,State:|,exit_code:|,NodeList:|,StartTime:|,EndTime:|') || exit
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
sacct -n -P -X -j "$missing" -o JobID,State,ExitCode,NodeList,Start,End 2>/dev/null
exit 0
"""

# $1 = partition (may be empty). Nodes are listed once per partition: the parser dedups them.
CAPACITY = """\
sinfo -h -N ${1:+-p "$1"} -O 'NodeList:|,CPUsState:|,Memory:|,AllocMem:|' || exit
echo '#pending'
squeue -h -r -t PENDING ${1:+-p "$1"} -o %i | wc -l
"""

# $1 = remote id, $2 = stdout|stderr, $3 = lines, $4 = owner ("": the account). The file is in
# the job's WorkDir, named after its cluster and id (see batch.job_script), and read as the job's
# owner; a grouped job (<array task>+<n>) is looked up by its array task.
TAIL = AS_OWNER + """\
g=${1%+*} owner=$4
job=$(squeue -h -t all -r -O 'JobArrayID:|,Cluster:|,WorkDir:|' | awk -F'|' -v id="$g" '
  $1 == id { sub(/^[^|]*[|]/, ""); sub(/[|]$/, ""); print; exit }')
[ -n "$job" ] || job=$(sacct -n -P -X -j "$g" -o Cluster,WorkDir 2>/dev/null | head -n 1)
[ -n "$job" ] || exit 0
as_owner tail -n "$3" -- "${job#*|}/cigri.${job%%|*}.$1.$2" 2>/dev/null
exit 0
"""

# $@ = array tasks running groups; prints "#<id>" then the group's status file (see _grouping),
# read as the job's owner (Slurm's word for it) when that is not the account itself.
STATUS = """\
me=$(id -un)
squeue -h -t all -r -O 'JobArrayID:|,Cluster:|,WorkDir:|,UserName:|' | awk -F'|' -v ids="$*" '
  BEGIN { n = split(ids, want, " "); for (i = 1; i <= n; i++) wanted[want[i]] = 1 }
  ($1 in wanted) { id = $1; sub(/^[^|]*[|]/, ""); sub(/[|]$/, ""); print id "|" $0 }' |
while IFS='|' read -r id cluster dir user; do
  printf '#%s\\n' "$id"
  file=$dir/cigri.$cluster.$id.status
  if [ "$user" = "$me" ]; then tail -n +1 -- "$file"; else sudo -n -u "$user" -- tail -n +1 -- "$file"; fi 2>/dev/null
done
exit 0
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


def as_owner(owner: str, argv: list[str]) -> list[str]:
    """``argv`` run as the job's owner (``""``: as the cluster's account)."""
    return ["sudo", "-n", "-u", owner, "--", *argv] if owner else argv


def submit_argv(batch: Batch, owner: str = "") -> list[str]:
    """Run with the job script (``batch.script``) on stdin."""
    return ["sh", "-c", SUBMIT, "sh", batch.name, owner, *sbatch_flags(batch)]


def parse_submit(stdout: str) -> str:
    """The array id, from ``sbatch --parsable`` (``42`` or ``42;cluster``) or an adopted array."""
    first = stdout.strip().split("\n", 1)[0].split(";", 1)[0].strip()
    if not first.isascii() or not first.isdigit():
        raise ClusterBadAnswer(f"sbatch printed no job id: {stdout.strip()[:200]!r}")
    return first


def poll_argv(remote_ids: list[str]) -> list[str]:
    return ["sh", "-c", POLL, "sh", *remote_ids]


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


def parse_poll(stdout: str, remote_ids: list[str]) -> dict[str, RemoteJob]:
    """Every wanted id: from squeue's lines, then sacct's; ids neither knows are UNKNOWN."""
    wanted = set(remote_ids)
    found: dict[str, RemoteJob] = {}
    squeue, _, sacct = stdout.partition("#sacct\n")
    for line in squeue.splitlines():
        fields = line.split("|")
        if fields[0] in wanted:
            if len(fields) < 6 or _number(fields[2]) is None:
                raise ClusterBadAnswer(f"unexpected squeue line {line!r}")
            found[fields[0]] = _job(fields[0], fields[1], _number(fields[2]), *fields[3:6])
    for line in sacct.splitlines():
        fields = line.split("|")
        if fields[0] in wanted and fields[0] not in found and len(fields) >= 6:
            found[fields[0]] = _job(fields[0], fields[1], _sacct_status(fields[2]), *fields[3:6])
    return {i: found.get(i, RemoteJob(i, RemoteState.UNKNOWN)) for i in remote_ids}


def cancel_argv(remote_ids: list[str], owner: str = "") -> list[str]:
    """scancel exits 0 even for unknown ids: the next poll tells what happened."""
    return as_owner(owner, ["scancel", *remote_ids])


def capacity_argv(partition: str) -> list[str]:
    return ["sh", "-c", CAPACITY, "sh", partition]


def parse_capacity(stdout: str) -> Capacity:
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


def status_argv(group_ids: list[str]) -> list[str]:
    return ["sh", "-c", STATUS, "sh", *group_ids]


def tail_argv(remote_id: str, stream: str, lines: int, owner: str = "") -> list[str]:
    return ["sh", "-c", TAIL, "sh", remote_id, stream, str(lines), owner]
