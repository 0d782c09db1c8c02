"""The OAR dialect over SSH for :class:`~cigri.backends._commands.Commands`: argv to run on
the front-end and parsers of what they print.

Pure: nothing here talks to a cluster. Every argv is passed word by word to
:meth:`SSHTransport.run`, which quotes each word; the ``sh -c`` programs are fixed strings
that take everything variable as positional arguments. OAR remembers every job it ran, so its
jobs need no trace.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cigri.backends import Capacity, JobSpec, node_size
from cigri.backends._batch import Acting, Polled
from cigri.backends._commands import AS_OWNER, as_owner
from cigri.backends.oar import batch as batches
from cigri.backends.oar.batch import Batch, build, job_keys
from cigri.backends.oar.states import remote_job
from cigri.errors import BackendError, ClusterBadAnswer, SubmissionRefused

if TYPE_CHECKING:
    from cigri.backends._ssh import CommandResult

REMEMBERS = True
LOCATES = True

# One round trip per batch. If the owner has jobs with the batch's name (in any state: a re-sent
# batch), print them (oarstat's JSON) and stop; otherwise write the script (stdin) and the
# parameter file (the lines up to "--", none of which is "--") into the launch directory, private
# to the owner, and run oarsub, which prints one OAR_JOB_ID= line per job. The files are written
# and oarsub runs as the owner ($2; "": the cluster's account) through sudo, which the cluster's
# sudoers limits to exactly oarsub, oardel, tail and tee; from / (the account's home may be
# closed to them). Exit 75: oarstat failed (try again later); any other failure is oarsub's
# refusal ("There are not enough resources for your request"...) or sudo's.
SUBMIT = AS_OWNER + r"""found=$(oarstat -J --sql "$1") || exit 75
if [ -n "$found" ]; then printf '%s
' "$found"; exit 0; fi
set -e
cd /
owner=$2 dir=$3 script=$4 params=$5
shift 5
(umask 077; as_owner tee -- "$dir/$script" >/dev/null)
lines=
while [ "$1" != -- ]; do lines="$lines$1
"; shift; done
shift
(umask 077; printf '%s' "$lines" | as_owner tee -- "$dir/$params" >/dev/null)
as_owner "$@"
"""

TRY_AGAIN = 75  # SUBMIT's exit status when oarstat failed

# The resources (restricted by the cluster's properties if any), then how many jobs wait.
CAPACITY = """oarnodes -J "$@" || exit
echo
oarstat --sql "state = 'Waiting'" | grep -c '^[0-9]' || true
"""


def sql_text(value: str) -> str:
    """A SQL string literal for ``oarstat --sql``."""
    return "'" + value.replace("'", "''") + "'"


def submit_argv(specs: list[JobSpec], options: Mapping[str, Any], acting: Acting, owner: str,
                index: str) -> tuple[list[str], str]:
    """The batch's ``oarsub`` (or the adoption of its jobs), as :func:`submit`."""
    return submit(build(specs, str(options.get("properties", "")), str(options.get("project", ""))), acting.login,
                  owner)


def parse_submit(cluster: str, result: CommandResult, specs: list[JobSpec]) -> list[str]:
    """Any exit of oarsub but 0 is its verdict on the batch: oarsub waits for OAR's database
    until it answers (``OAR::IO::connect`` retries without end), so an outage there is a hang,
    which the SSH timeout turns into the cluster's failure, never a refusal."""
    if result.status == TRY_AGAIN:
        raise BackendError(f"{cluster}: oarstat failed: {result.stderr.strip()[-300:]}")
    if result.status != 0:
        raise SubmissionRefused(f"{cluster}: oarsub refused the batch: {result.stderr.strip()[-300:]}")
    keys = job_keys(specs)
    found = parse_submitted(result.stdout, keys)
    return [found[key] for key in keys]


def submit(batch: Batch, login: str, owner: str = "") -> tuple[list[str], str]:
    """``(argv, stdin)`` adopting the batch's jobs of ``login`` or submitting it as one array job,
    as ``owner`` (``""``: as the cluster's account, which is ``login``)."""
    parameters = f"{batch.launch_directory.rstrip('/')}/{batch.parameters_name}"
    oarsub = ["oarsub", "-n", batch.name, "-l", batch.resources, "-d", batch.launch_directory,
              "-O", "/dev/null", "-E", batch.oar_stderr, "--array-param-file", parameters]
    if batch.properties:
        oarsub += ["-p", batch.properties]
    if batch.project:
        oarsub += ["--project", batch.project]
    for job_type in batch.types:
        oarsub += ["-t", job_type]
    oarsub.append(f"sh {batch.script_name}")
    # -u is ignored with --sql: the user is part of the condition
    mine = f"job_user = {sql_text(login)} AND job_name = {sql_text(batch.name)}"
    argv = ["sh", "-c", SUBMIT, "sh", mine, owner, batch.launch_directory, batch.script_name,
            batch.parameters_name, *batch.parameters, "--", *oarsub]
    return argv, batch.script


def parse_submitted(stdout: str, keys: list[str]) -> dict[str, str]:
    """``{key: job id}`` from what ``submit`` printed: the jobs found, or oarsub's ids (in key order)."""
    if stdout.lstrip().startswith("{"):
        found = {job[1]: job_id for job_id, record in _jobs(stdout).items()
                 if (job := batches.job_of(str(record.get("command") or ""))) is not None}
        ids = [found.get(key) for key in keys]
        what = "the jobs named after the batch"
    else:
        ids = list(batches.submitted_ids(stdout))
        what = "oarsub's job ids"
    if len(ids) != len(keys) or None in ids:
        raise ClusterBadAnswer(f"{what} do not match the batch's {len(keys)} jobs: {stdout[-300:]!r}")
    return {key: str(job_id) for key, job_id in zip(keys, ids)}


def poll_argv(remote_ids: list[str], index: str = "") -> list[str]:
    """Full records (state, exit code, events, hosts, times, command) of the given jobs in one call."""
    argv = ["oarstat", "-J", "-f"]
    for remote_id in remote_ids:
        argv += ["-j", remote_id]
    return argv


def parse_poll(stdout: str, job_ids: list[str] | None = None, options: Mapping[str, Any] | None = None) -> Polled:
    """Jobs OAR does not know are simply absent; a job's files are where its command says."""
    records = _jobs(stdout)
    found = {}
    for job_id, job in records.items():
        hosts = job.get("assigned_network_address") or []
        events = [str(event.get("type")) for event in job.get("events") or []]
        found[job_id] = remote_job(job_id, str(job.get("state")), events, job.get("exit_code"),
                                   hosts[0] if hosts else None, job.get("startTime"), job.get("stopTime"))
    files = {job_id: (str(job.get("owner") or ""), prefix) for job_id, job in records.items()
             if (prefix := batches.file_prefix(str(job.get("command") or ""))) is not None}
    return Polled(found, files)


def terminate_argv(remote_ids: list[str], owner: str = "") -> list[str]:
    """SIGTERM to the running jobs' commands (the others are refused, one line each)."""
    return as_owner(owner, ["oardel", "--signal", "SIGTERM", *remote_ids])


def signalled(stdout: str) -> bool:
    """Whether ``terminate`` reached at least one job."""
    return "DONE." in stdout.splitlines()


def cancel_argv(remote_ids: list[str], owner: str = "") -> list[str]:
    """oardel fails for ended or unknown jobs: nothing to do."""
    return as_owner(owner, ["oardel", *remote_ids])


def capacity_argv(options: Mapping[str, Any]) -> list[str]:
    """The resources the cluster's ``properties`` select (all without)."""
    properties = str(options.get("properties", ""))
    sql = ["--sql", properties] if properties.strip() else []
    return ["sh", "-c", CAPACITY, "sh", *sql]


def parse_capacity(stdout: str, options: Mapping[str, Any] | None = None) -> Capacity:
    """Slots are OAR resources: ``Alive`` ones count, those running a job are busy. A node's
    size is its count of them (OAR's ``network_address``); OAR says nothing of its memory."""
    resources_text, _, queued_text = stdout.rstrip("\n").rpartition("\n")
    try:
        resources = json.loads(resources_text) if resources_text.strip() else {}
        queued = int(queued_text.strip())
    except ValueError:
        raise ClusterBadAnswer(f"unreadable oarnodes/oarstat output: {stdout[:200]!r}") from None
    alive = [r for r in resources.values() if isinstance(r, dict) and r.get("state") == "Alive"]
    node_cores, _ = node_size((cores, None) for cores in Counter(r.get("network_address") for r in alive).values())
    return Capacity(len(alive), sum(1 for r in alive if not r.get("jobs")), queued, node_cores=node_cores)


def trace(job_id: str) -> tuple[str, str]:
    """OAR keeps no index (it remembers every job)."""
    return job_id, ""


def _jobs(stdout: str) -> dict[str, dict[str, Any]]:
    """oarstat's JSON (an object keyed by job id); it prints nothing when no job matches."""
    if not stdout.strip():
        return {}
    try:
        jobs = json.loads(stdout)
    except ValueError:
        raise ClusterBadAnswer(f"oarstat did not print JSON: {stdout[:200]!r}") from None
    if not isinstance(jobs, dict):
        raise ClusterBadAnswer(f"oarstat printed {type(jobs).__name__}, not an object")
    return {str(job_id): job for job_id, job in jobs.items() if isinstance(job, dict)}
