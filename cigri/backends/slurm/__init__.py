"""The Slurm backend: one dialect (sbatch/squeue over SSH, or slurmrestd) on its transport.

``transport = "ssh"`` runs Slurm's commands on the front-end (:mod:`.commands`);
``transport = "rest"`` talks to slurmrestd with a JWT read from ``token_file`` (:mod:`.rest`).
Either way a batch is one job array (:mod:`.batch`) and every operation is one remote call:
one submit per batch, one poll for any number of jobs, one cancel (REST: one ``DELETE`` per
job, slurmrestd has no bulk cancel), one capacity. ``calls`` counts them by operation, so tests
can hold the core to its budget.

slurmrestd cannot read files, so over REST :meth:`SlurmBackend.output_tail` goes through SSH
when the cluster also has ``host`` (and ``user``, ``key_file``...) configured, and is empty otherwise.
Identity (:mod:`cigri.backends.identity`): over SSH, ``identity = "sudo"`` runs ``sbatch``,
``scancel`` and ``tail`` as the job's login (``sudo -n -u LOGIN``); over REST, ``"impersonate"``
names the login in ``X-SLURM-USER-NAME`` under the SlurmUser token of ``token_file`` and
``"tokens"`` sends the login's own token (``gridtoken``). Polls and capacity stay the account's.
Best-effort jobs go to ``best_effort_partition`` and/or ``best_effort_qos``; without either they
run as normal jobs. Grouped jobs (temporal grouping) need SSH too: their status files are read
with one more command per poll while groups run or have just ended; over REST alone every job
runs alone, and a gang is refused.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

from cigri.backends import Capacity, JobSpec, RemoteJob, TokenOf, identity
from cigri.backends import _grouping as grouping
from cigri.backends._http import HTTPTransport
from cigri.backends._ssh import SSHTransport
from cigri.backends.slurm import commands, rest
from cigri.backends.slurm.batch import REMOTE_ID, Batch, array_task_ids, build
from cigri.errors import BackendError, ClusterAuthFailure, ConfigError, SubmissionRefused

DEFAULT_TIMEOUT = 30.0


def _sudo_login(options: dict[str, Any], user: str) -> str:
    """The login SSH commands for ``user``'s jobs run as through sudo; "": the account itself."""
    login = identity.acting_login(options, user)
    return "" if login == options["user"] else login


class _OverSSH:
    """The commands over SSH, those acting for a user (``user``: the jobs' owner) through sudo."""

    def __init__(self, ssh: SSHTransport, options: dict[str, Any]) -> None:
        self.ssh, self.options = ssh, options

    def run(self, what: str, argv: list[str]) -> str:
        """stdout of a command that must succeed; it fails mostly when slurmctld is unreachable."""
        result = self.ssh.run(argv)
        if result.status != 0:
            raise BackendError(f"{self.ssh.cluster}: {what} failed (exit {result.status}): {result.stderr.strip()[:300]}")
        return result.stdout

    def submit(self, batch: Batch, user: str) -> str:
        result = self.ssh.run(commands.submit_argv(batch, _sudo_login(self.options, user)), batch.script)
        if result.status != 0:
            words = result.stderr.strip()[:300]
            raise commands.submit_error(result.stderr)(f"{self.ssh.cluster}: submission refused: {words}")
        return commands.parse_submit(result.stdout)

    def poll(self, remote_ids: list[str]) -> dict[str, RemoteJob]:
        return commands.parse_poll(self.run("squeue", commands.poll_argv(remote_ids)), remote_ids)

    def cancel(self, remote_ids: list[str], user: str) -> None:
        self.ssh.run(commands.cancel_argv(remote_ids, _sudo_login(self.options, user)))

    def capacity(self, partition: str) -> Capacity:
        return commands.parse_capacity(self.run("sinfo", commands.capacity_argv(partition)))


class _OverREST:
    """slurmrestd, acting for a user (``user``: the jobs' owner) as the identity mode says."""

    def __init__(self, http: HTTPTransport, options: dict[str, Any], token_of: TokenOf) -> None:
        self.http, self.options, self.token_of = http, options, token_of

    def _as(self, user: str, refused: type[BackendError]) -> dict[str, str]:
        """The headers acting as ``user``'s login: none for the account itself."""
        login = identity.acting_login(self.options, user)
        if login == self.options["user"]:
            return {}
        if identity.mode(self.options) != identity.TOKENS:
            return {"X-SLURM-USER-NAME": login}
        token = self.token_of(user)
        if not token:
            raise refused(f"{user} has no token for this cluster (gridtoken add)")
        return rest.headers(login, token)

    def submit(self, batch: Batch, user: str) -> str:
        headers = self._as(user, SubmissionRefused)
        login = headers.get("X-SLURM-USER-NAME", self.options["user"])
        try:
            job = rest.find_array(self.http.request("GET", rest.JOBS), batch.name, login)
            if job is None:
                # a refusal (bad partition, impossible request) comes as 4xx/5xx with its reason in ``errors``
                payload = rest.submit_payload(batch, login, identity.remote_home(self.options, user))
                remote_id = rest.parse_submit(self.http.request("POST", rest.SUBMIT, json=payload, headers=headers,
                                                                accept=(200, 201, 400, 500)))
                # an accepted array may still never start: its pending reason says so at once
                job = rest.parse_job(self.http.request("GET", rest.job_path(remote_id)))
        except ClusterAuthFailure as error:
            if not headers:
                raise
            raise SubmissionRefused(f"slurmrestd refused to act as {login}: {error}") from None
        remote_id, reason = rest.array_id(job), rest.never_start_reason(job)
        if reason is not None:
            self.cancel([remote_id], user)
            raise SubmissionRefused(f"slurmrestd accepted an array the cluster can never run "
                                    f"(pending reason {reason})")
        return remote_id

    def poll(self, remote_ids: list[str]) -> dict[str, RemoteJob]:
        return rest.parse_jobs(self.http.request("GET", rest.JOBS), remote_ids)

    def cancel(self, remote_ids: list[str], user: str) -> None:
        headers = self._as(user, ClusterAuthFailure)
        for remote_id in remote_ids:
            self.http.request("DELETE", rest.job_path(remote_id), headers=headers, accept=rest.CANCEL_ANSWERS)

    def capacity(self, partition: str) -> Capacity:
        return rest.parse_nodes(self.http.request("GET", rest.NODES), partition)


class SlurmBackend:
    """:class:`~cigri.backends.ClusterBackend` for a Slurm cluster."""

    def __init__(self, name: str, options: dict[str, Any], token_of: TokenOf = lambda _user: None) -> None:
        self.name = name
        self.options = options
        self.calls: Counter[str] = Counter()
        timeout = float(options.get("timeout", DEFAULT_TIMEOUT))
        pace = float(options.get("min_interval", 0.0))
        self._ssh = SSHTransport(
            name, str(options["host"]), int(options.get("port", 22)), str(options["user"]),
            options.get("key_file"), options.get("known_hosts"), timeout, pace) if "host" in options else None
        self._http: HTTPTransport | None = None
        self._via: _OverSSH | _OverREST
        if options["transport"] == "rest":
            user = str(options.get("user", ""))
            if not user or "token_file" not in options:
                raise ConfigError(f"clusters.{name}: slurmrestd needs user and token_file")
            try:
                token = Path(str(options["token_file"])).read_text().strip()
            except OSError as error:
                raise ConfigError(f"clusters.{name}.token_file: {error.strerror}") from None
            self._http = HTTPTransport(name, str(options["base_url"]), rest.headers(user, token), timeout,
                                       min_interval=pace)
            self._via = _OverREST(self._http, options, token_of)
        elif self._ssh is not None:
            self._via = _OverSSH(self._ssh, options)
        else:
            raise ConfigError(f"clusters.{name}.host: required with transport 'ssh'")

    def submit(self, specs: list[JobSpec]) -> dict[str, str]:
        """One array for the batch, or the one an interrupted earlier call already started."""
        if not specs:
            return {}
        if self._ssh is None:  # no way to read a group's status files: every job runs alone, but a gang cannot
            if any(spec.gang for spec in specs):
                raise SubmissionRefused(f"{self.name}: a gang's members report through files only SSH reads; "
                                        "give the cluster host and user for SSH")
            specs = [replace(spec, group="", group_walltime_seconds=0) for spec in specs]
        batch = build(specs, self.options)
        self.calls["submit"] += 1
        return array_task_ids(specs, self._via.submit(batch, specs[0].user))

    def poll(self, remote_ids: list[str]) -> dict[str, RemoteJob]:
        """One poll of the array tasks, plus one read of the status files of started groups."""
        valid = [i for i in dict.fromkeys(remote_ids) if REMOTE_ID.match(i)]
        found: dict[str, RemoteJob] = {}
        statuses: dict[str, dict[int, grouping.Member]] = {}
        if valid:
            self.calls["poll"] += 1
            found = self._via.poll(list(dict.fromkeys(grouping.group_of(i) for i in valid)))
            started = grouping.needing_status(valid, found)
            if started and self._ssh is not None:
                text = _OverSSH(self._ssh, self.options).run("read the status files", commands.status_argv(started))
                statuses = {g: grouping.parse_status(t) for g, t in grouping.parse_read(text).items()}
        return grouping.members(remote_ids, found, statuses)

    def cancel(self, remote_ids: list[str], user: str = "") -> None:
        """Cancelling a grouped job cancels its whole group (see :mod:`cigri.backends._grouping`)."""
        jobs = grouping.remote_jobs(remote_ids, REMOTE_ID)
        if jobs:
            self.calls["cancel"] += 1
            self._via.cancel(jobs, user)

    def capacity(self) -> Capacity:
        self.calls["capacity"] += 1
        return self._via.capacity(str(self.options.get("partition", "")))

    def output_tail(self, remote_id: str, stream: str, lines: int, user: str = "") -> str:
        """The end of ``cigri.<remote id>.<stream>`` in the job's directory, read as its owner
        (needs SSH)."""
        if stream not in ("stdout", "stderr"):
            raise ValueError(f"unknown stream {stream!r}")
        if lines <= 0 or not REMOTE_ID.match(remote_id) or self._ssh is None:
            return ""
        self.calls["tail"] += 1
        return self._ssh.run(commands.tail_argv(remote_id, stream, lines, _sudo_login(self.options, user))).stdout

    def close(self) -> None:
        for transport in (self._http, self._ssh):
            if transport is not None:
                transport.close()
