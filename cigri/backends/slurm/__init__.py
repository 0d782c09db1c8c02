"""The Slurm backend: the batch base (:mod:`cigri.backends._batch`) with one of Slurm's dialects.

``transport = "ssh"`` runs Slurm's commands on the front-end (:mod:`.commands`, on
:mod:`cigri.backends._commands`); ``transport = "rest"`` talks to slurmrestd with a JWT read from
``token_file`` (:mod:`.rest`). Either way a batch is one job array (:mod:`.batch`) and every
operation is one remote call: one submit per batch, one poll for any number of jobs, one cancel
(REST: one ``DELETE`` per job, slurmrestd has no bulk cancel), one capacity; over SSH an output
tail is two (where the job writes, then ``tail``). ``calls`` counts them by operation, so tests
can hold the core to its budget.

slurmrestd cannot read files, so over REST :meth:`SlurmBackend.output_tail` goes through SSH
when the cluster also has ``host`` (and ``user``, ``key_file``...) configured, and is empty otherwise.
Identity (:mod:`cigri.backends.identity`): over SSH, ``identity = "sudo"`` runs ``sbatch``,
``scancel`` and ``tail`` as the job's login (``sudo -n -u LOGIN``); over REST, ``"impersonate"``
names the login in ``X-SLURM-USER-NAME`` under the SlurmUser token of ``token_file`` and
``"tokens"`` sends the login's own token (``gridtoken``). Polls and capacity stay the account's.
Best-effort jobs go to ``best_effort_partition`` and/or ``best_effort_qos``; without either they
run as normal jobs. Grouped jobs (temporal grouping) need SSH too: their status files are read
with one more command per poll while groups run or have just ended (two over REST: squeue says
where they are); over REST alone every job runs alone, and a gang is refused. Without accounting,
squeue forgets a job ``MinJobAge`` seconds after its end: a job over SSH it forgot is read from
its trace (:mod:`cigri.backends._commands`); over REST alone, it is lost.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cigri.backends import Capacity, JobSpec, TokenOf, identity
from cigri.backends._batch import Acting, BatchBackend, Polled
from cigri.backends._commands import Commands, open_ssh
from cigri.backends.slurm import commands, rest
from cigri.backends.slurm.batch import build
from cigri.errors import BackendError, ClusterAuthFailure, ConfigError, SubmissionRefused

if TYPE_CHECKING:  # httpx is imported when a cluster is opened over REST, not by the JDL's checks
    from cigri.backends._http import HTTPTransport

DEFAULT_TIMEOUT = 30.0
REMOTE_ID = re.compile(r"[0-9]+_[0-9]+(\+[0-9]+)?\Z")  # an array task (+ position in its group)


class _OverREST:
    """slurmrestd, acting for a user as the identity mode says; files (status files, output
    tails) are read over SSH when the cluster has SSH options too."""

    def __init__(self, http: HTTPTransport, options: dict[str, Any], token_of: TokenOf,
                 ssh: Commands | None) -> None:
        self.http, self.options, self.token_of, self.ssh = http, options, token_of, ssh

    def _as(self, acting: Acting, refused: type[BackendError]) -> dict[str, str]:
        """The headers acting as the owner's login: none for the account itself."""
        if acting.login == self.options["user"]:
            return {}
        if identity.mode(self.options) != identity.TOKENS:
            return {"X-SLURM-USER-NAME": acting.login}
        token = self.token_of(acting.user)
        if not token:
            raise refused(f"{acting.user} has no token for this cluster (gridtoken add)")
        return rest.headers(acting.login, token)

    def groups(self, directory: str) -> str:
        return "" if self.ssh is not None else "slurmrestd reads no file: give the cluster host and user for SSH"

    def submit(self, specs: list[JobSpec], acting: Acting) -> list[str]:
        batch = build(specs, self.options)
        headers = self._as(acting, SubmissionRefused)
        login = headers.get("X-SLURM-USER-NAME", self.options["user"])
        try:
            job = rest.find_array(self.http.request("GET", rest.JOBS), batch.name, login)
            if job is None:
                # a refusal (bad partition, impossible request) comes as 4xx/5xx with its reason in ``errors``
                payload = rest.submit_payload(batch, login, identity.remote_home(self.options, acting.user))
                remote_id = rest.parse_submit(self.http.request("POST", rest.SUBMIT, json=payload, headers=headers,
                                                                accept=(200, 201, 400, 500)))
                # an accepted array may still never start: its pending reason says so at once
                job = rest.parse_job(self.http.request("GET", rest.job_path(remote_id)))
        except ClusterAuthFailure as error:
            if not headers:
                raise
            raise SubmissionRefused(f"slurmrestd refused to act as {login}: {error}") from None
        array, reason = rest.array_id(job), rest.never_start_reason(job)
        if reason is not None:
            self.cancel([array], acting)
            raise SubmissionRefused(f"slurmrestd accepted an array the cluster can never run "
                                    f"(pending reason {reason})")
        return [f"{array}_{index}" for index in range(batch.size)]

    def poll(self, job_ids: list[str]) -> Polled:
        return Polled(rest.parse_jobs(self.http.request("GET", rest.JOBS), job_ids))

    def statuses(self, group_ids: list[str], polled: Polled) -> dict[str, str]:
        """Where slurmrestd does not say (the cluster's name is missing), squeue over SSH does."""
        return self.ssh.statuses(group_ids, self.ssh.poll(group_ids)) if self.ssh is not None else {}

    def traces(self, job_ids: list[str]) -> dict[str, str]:
        return {}  # the index is kept by submissions over SSH

    def cancel(self, job_ids: list[str], acting: Acting) -> None:
        headers = self._as(acting, ClusterAuthFailure)
        for job_id in job_ids:
            self.http.request("DELETE", rest.job_path(job_id), headers=headers, accept=rest.CANCEL_ANSWERS)

    def capacity(self) -> Capacity:
        return rest.parse_nodes(self.http.request("GET", rest.NODES), str(self.options.get("partition", "")))

    def output_tail(self, remote_id: str, stream: str, lines: int, acting: Acting) -> str:
        return self.ssh.output_tail(remote_id, stream, lines, acting) if self.ssh is not None else ""

    def close(self) -> None:
        self.http.close()
        if self.ssh is not None:
            self.ssh.close()


class SlurmBackend(BatchBackend):
    """:class:`~cigri.backends.ClusterBackend` for a Slurm cluster."""

    def __init__(self, name: str, options: dict[str, Any], token_of: TokenOf = lambda _user: None) -> None:
        timeout = float(options.get("timeout", DEFAULT_TIMEOUT))
        ssh = Commands(name, options, open_ssh(name, options, timeout), commands) if "host" in options else None
        if options["transport"] == "rest":
            user = str(options.get("user", ""))
            if not user or "token_file" not in options:
                raise ConfigError(f"clusters.{name}: slurmrestd needs user and token_file")
            try:
                token = Path(str(options["token_file"])).read_text().strip()
            except OSError as error:
                raise ConfigError(f"clusters.{name}.token_file: {error.strerror}") from None
            from cigri.backends._http import HTTPTransport

            http = HTTPTransport(name, str(options["base_url"]), rest.headers(user, token), timeout,
                                 min_interval=float(options.get("min_interval", 0.0)))
            super().__init__(name, options, _OverREST(http, options, token_of, ssh), REMOTE_ID)
        elif ssh is not None:
            super().__init__(name, options, ssh, REMOTE_ID)
        else:
            raise ConfigError(f"clusters.{name}.host: required with transport 'ssh'")
