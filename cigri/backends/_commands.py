"""A resource manager's commands over SSH, written once: the :class:`~cigri.backends._batch.Via`
of Slurm, OAR and Grid Engine over SSH, each a :class:`Dialect` of pure argv builders and parsers.

Every operation is one command on the front-end (:class:`~cigri.backends._ssh.SSHTransport`
quotes each word; a dialect's ``sh -c`` programs are constants taking everything variable as
positional arguments), run as the cluster's account; the calls that act for a job's owner run
the batch commands as the owner's login through ``sudo -n -u LOGIN`` (:data:`AS_OWNER`), which
the cluster's sudoers limits to exactly those commands. Files (a group's status file, an output
tail, a trace) are read as their owner with ``tail`` (:data:`FILES`).

Where a job writes: every remote job has a *file prefix*, a path: its outputs are
``<prefix>.stdout`` and ``.stderr`` (a grouped member's ``<prefix>+<n>.stdout``...), its status
file ``<prefix>.status``. A poll says it for the jobs the cluster still knows, when its dialect
can. A resource manager that forgets ended jobs (Slurm without accounting, Grid Engine, whose
qstat shows only the jobs that have not ended) cannot say it later, so its submissions keep, on
the front-end in the account's home, an index of where each of their remote jobs writes
(:data:`REMEMBER`, ``~/.local/state/cigri/jobs/<cluster>/<job id>``: the owner's login, then the
prefix, kept :data:`INDEX_DAYS` days; and, where the cluster cannot find a batch by its name
once its jobs ended, ``<batch's name>``: its job id): a job the cluster forgot is read from its own status
file, its trace, and its output tails stay readable.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from cigri.backends import Capacity, JobSpec
from cigri.backends import _grouping as grouping
from cigri.backends._batch import Acting, Polled
from cigri.errors import BackendError

if TYPE_CHECKING:  # paramiko is imported when a cluster is opened, not by the JDL's checks
    from cigri.backends._ssh import CommandResult, SSHTransport

INDEX_DAYS = 90  # how long the index keeps where a job writes: longer than any job and any outage
# Acting as a job's owner: $owner is empty (run as the cluster's account) or the owner's login.
AS_OWNER = """\
as_owner() { if [ -n "$owner" ]; then sudo -n -u "$owner" -- "$@"; else "$@"; fi; }
"""
# For a submission's program, run as the cluster's account with $cigri_index set: keep where job
# $1 writes ($2, its file prefix) and whose it is ($owner), and with $3 (a batch's name) which
# job that batch is, dropping what is older than INDEX_DAYS. A failure to keep it fails nothing:
# the job runs, and is read while the cluster knows it.
REMEMBER = """\
cigri_remember() {
  if (umask 077 && mkdir -p -- "$cigri_index" && printf '%s\\n%s' "$owner" "$2" > "$cigri_index/$1" &&
      { [ -z "$3" ] || printf '%s\\n' "$1" > "$cigri_index/$3"; }); then
    find "$cigri_index" -type f -mtime +INDEX_DAYS -exec rm -f -- {} + 2>/dev/null
  else
    echo "cigri: cannot keep where job $1 writes in $cigri_index" >&2
  fi
  return 0
}
""".replace("INDEX_DAYS", str(INDEX_DAYS))
# cigri_read LINES [LABEL READER KEY FILE]...: for each quadruple, prints "#<label>", then the last
# LINES lines ("+1": all) of FILE, or with a KEY of the file whose name is the prefix the index
# $cigri_index keeps for job KEY followed by FILE, read as READER ("": the account; "-": the
# owner the index keeps for KEY); nothing more when the file or the index entry does not exist.
READ = """\
cigri_read() {
  lines=$1
  shift
  while [ $# -ge 4 ]; do
    printf '#%s\\n' "$1"
    reader=$2 file=$4
    if [ -n "$3" ]; then
      entry=$cigri_index/$3
      if [ -f "$entry" ]; then
        [ "$reader" != - ] || reader=$(head -n 1 -- "$entry")
        file=$(tail -n +2 -- "$entry")$file
      else
        file=
      fi
    fi
    if [ -z "$file" ]; then :
    elif [ -z "$reader" ]; then tail -n "$lines" -- "$file"
    else sudo -n -u "$reader" -- tail -n "$lines" -- "$file"; fi 2>/dev/null
    shift 4
  done
}
"""
# $1 = the index (from the account's home); the rest: cigri_read's arguments.
FILES = READ + """\
cigri_index=$HOME/$1
shift
cigri_read "$@"
exit 0
"""


def as_owner(owner: str, argv: list[str]) -> list[str]:
    """``argv`` run as the jobs' owner (``""``: as the cluster's account), as :data:`AS_OWNER` does
    inside a program."""
    return ["sudo", "-n", "-u", owner, "--", *argv] if owner else argv


def index(cluster: str) -> str:
    """Where the index of a cluster's jobs is, from the account's home on the front-end."""
    return f".local/state/cigri/jobs/{cluster}"


class Dialect(Protocol):
    """A resource manager's commands: what each operation runs and how to read what it prints.
    Pure (a module: :mod:`cigri.backends.slurm.commands`...). ``owner`` is the login a command
    runs as through sudo, ``""`` for the cluster's account; ``index`` where the index is."""

    REMEMBERS: bool  # every job it ran stays known (OAR): no index, no traces
    LOCATES: bool  # its poll says where its jobs write (their file prefixes)

    def submit_argv(self, specs: list[JobSpec], options: Mapping[str, Any], acting: Acting, owner: str,
                    index: str) -> tuple[list[str], str]:
        """The command submitting (or adopting) the batch, and its stdin."""
        ...

    def parse_submit(self, cluster: str, result: CommandResult, specs: list[JobSpec]) -> list[str]:
        """One remote id per remote job; raises what a failure means (a refusal, a submit limit,
        a failure worth another try)."""
        ...

    def poll_argv(self, job_ids: list[str], index: str) -> list[str]:
        ...

    def parse_poll(self, stdout: str, job_ids: list[str], options: Mapping[str, Any]) -> Polled:
        """The jobs it knows, and the file prefix of each with its owner's login (the job's user)."""
        ...

    def terminate_argv(self, job_ids: list[str], owner: str) -> list[str] | None:
        """SIGTERM first, where the cancel itself kills at once (OAR); None: the cancel signals."""
        ...

    def signalled(self, stdout: str) -> bool:
        """Whether the terminate reached a running job (worth its grace)."""
        ...

    def cancel_argv(self, job_ids: list[str], owner: str) -> list[str]:
        ...

    def capacity_argv(self, options: Mapping[str, Any]) -> list[str]:
        ...

    def parse_capacity(self, stdout: str, options: Mapping[str, Any]) -> Capacity:
        ...

    def trace(self, job_id: str) -> tuple[str, str]:
        """The index entry of a remote job and the rest of its file prefix after the entry's."""
        ...


@dataclass(frozen=True)
class _File:
    """A file to read (see :data:`READ`): ``path``, or with ``key`` the rest of its name after the
    prefix the index keeps for that job; read as ``reader`` (``"-"``: the owner the index keeps)."""

    label: str
    reader: str
    path: str
    key: str = ""


class Commands:
    """:class:`~cigri.backends._batch.Via` for a dialect over SSH."""

    def __init__(self, name: str, options: Mapping[str, Any], ssh: SSHTransport, dialect: Dialect,
                 kill_grace: float = 0.0) -> None:
        self.name, self.options, self.ssh, self.dialect = name, options, ssh, dialect
        self.kill_grace = kill_grace  # seconds between the terminate and the cancel, where there is one
        self.index = index(name)

    def run(self, what: str, argv: list[str], stdin: str | None = None) -> str:
        """stdout of a command that must succeed; a failure is the cluster's, named by what failed."""
        result = self.ssh.run(argv, stdin)
        if result.status != 0:
            raise BackendError(f"{self.name}: {what} failed (exit {result.status}): {result.stderr.strip()[-300:]}")
        return result.stdout

    def _owner(self, login: str) -> str:
        return "" if login == self.options["user"] else login

    def groups(self, directory: str) -> str:
        return ""

    def submit(self, specs: list[JobSpec], acting: Acting) -> list[str]:
        argv, stdin = self.dialect.submit_argv(specs, self.options, acting, self._owner(acting.login), self.index)
        return self.dialect.parse_submit(self.name, self.ssh.run(argv, stdin), specs)

    def poll(self, job_ids: list[str]) -> Polled:
        return self.dialect.parse_poll(self.run("the poll", self.dialect.poll_argv(job_ids, self.index)), job_ids,
                                       self.options)

    def statuses(self, group_ids: list[str], polled: Polled) -> dict[str, str]:
        return self._read([f for group in group_ids if (f := self._file(group, polled, ".status")) is not None])

    def traces(self, job_ids: list[str]) -> dict[str, str]:
        if self.dialect.REMEMBERS:
            return {}
        return self._read([self._indexed(job, ".status") for job in job_ids])

    def cancel(self, job_ids: list[str], acting: Acting) -> None:
        """Unknown and ended ids are ignored: the cancel commands' own failures say nothing the
        next poll does not."""
        owner = self._owner(acting.login)
        terminate = self.dialect.terminate_argv(job_ids, owner) if self.kill_grace else None
        if terminate is not None and self.dialect.signalled(self.ssh.run(terminate).stdout):
            time.sleep(self.kill_grace)
        self.ssh.run(self.dialect.cancel_argv(job_ids, owner))

    def capacity(self) -> Capacity:
        return self.dialect.parse_capacity(self.run("the capacity", self.dialect.capacity_argv(self.options)),
                                           self.options)

    def output_tail(self, remote_id: str, stream: str, lines: int, acting: Acting) -> str:
        """Found where the poll says the job writes, else through the index; read as ``acting``,
        whoever owns the job (the cluster refuses another user's file)."""
        job, member = grouping.group_of(remote_id), remote_id[len(grouping.group_of(remote_id)):]
        polled = self.poll([job]) if self.dialect.LOCATES else Polled({})
        file = self._file(job, polled, f"{member}.{stream}")
        if file is None:
            return ""
        stdout = self.run("the output tail", self._files_argv([replace(file, reader=self._owner(acting.login))],
                                                              str(lines)))
        return stdout.partition("\n")[2]

    def _file(self, job: str, polled: Polled, suffix: str) -> _File | None:
        """A job's file, read as its owner: where the poll saw the job, else where the index says."""
        if job in polled.files:
            login, prefix = polled.files[job]
            return _File(job, self._owner(login), prefix + suffix)
        return None if self.dialect.REMEMBERS else self._indexed(job, suffix)

    def _indexed(self, job: str, suffix: str) -> _File:
        key, stem = self.dialect.trace(job)
        return _File(job, "-", stem + suffix, key)

    def _files_argv(self, files: list[_File], lines: str) -> list[str]:
        return ["sh", "-c", FILES, "sh", self.index, lines,
                *(word for f in files for word in (f.label, f.reader, f.key, f.path))]

    def _read(self, files: list[_File]) -> dict[str, str]:
        if not files:
            return {}
        return parse_read(self.run("reading the status files", self._files_argv(files, "+1")))

    def close(self) -> None:
        self.ssh.close()


def parse_read(stdout: str) -> dict[str, str]:
    """``{label: content}`` from what :data:`FILES` printed for status files (which never hold a
    line starting with ``#``)."""
    files: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in stdout.splitlines():
        if line.startswith("#"):
            current = files.setdefault(line[1:], [])
        elif current is not None:
            current.append(line)
    return {label: "\n".join(lines) for label, lines in files.items()}


def open_ssh(name: str, options: Mapping[str, Any], timeout: float) -> SSHTransport:
    """The SSH transport a cluster's options describe."""
    from cigri.backends._ssh import SSHTransport

    return SSHTransport(name, str(options["host"]), int(options.get("port", 22)), str(options["user"]),
                        options.get("key_file"), options.get("known_hosts"), timeout,
                        float(options.get("min_interval", 0.0)))
