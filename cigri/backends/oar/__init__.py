"""The OAR 2.5 backend: one dialect (OAR's commands over SSH, or its REST API) on its transport.

``transport = "ssh"`` runs ``oarsub``/``oarstat``/``oardel``/``oarnodes`` on the front-end
(:mod:`.commands`); ``transport = "rest"`` talks to ``oarapi`` (:mod:`.rest`) with HTTP basic
auth (``user`` and the password in ``password_file``), or without ``password_file`` in OAR's
trusted-proxy mode (an ``X-Remote-Ident: <user>`` header, as CiGri sent). Either way a batch is
one array job (:mod:`.batch`).

``calls`` counts operations, as the core pays for them. Requests per operation: over SSH one
each, except output_tail (2: the job's record, then ``tail``); over REST submit 3 (the
user's jobs that run and those that ended recently, then the POST; adopting a re-sent batch: 4
GETs), poll 1 per 400 jobs,
cancel 1 per 400 jobs to see which still run, 1 per running job for its SIGTERM (``kill_grace``),
then per array whose running jobs are all to be killed 2 (its members, ``oardel --array``) and
1 per other running job, capacity 3,
output_tail 2.

Identity (:mod:`cigri.backends.identity`): over SSH, ``identity = "sudo"`` writes a batch's files
and runs ``oarsub``, ``oardel`` and ``tail`` as the job's login (``sudo -n -u LOGIN``); over REST,
``"ident"`` names the login in ``X-Remote-Ident`` to the API's trusted front. Polls and capacity
stay the account's; a group's status file is read as its job's owner.

Over REST, a re-sent batch is recognised only while its jobs run or for ``rest.ADOPT_WINDOW``
after they ended, and output tails are empty for directories whose path is not plain (OAR's
media API runs ``tail`` on the path through a shell, unquoted).

Grouped jobs (temporal grouping): a group is one OAR job; while groups run or have just ended,
a poll also reads their status files: one more command over SSH, one media ``GET`` per group
over REST (where grouping needs a plain directory, else every job runs alone).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cigri.backends import Capacity, JobSpec, RemoteJob, identity
from cigri.backends import _grouping as grouping
from cigri.backends.oar import commands, rest
from cigri.backends.oar.batch import Batch, build, job_keys, launch_directory, status_path
from cigri.errors import BackendError, ConfigError, SubmissionRefused

if TYPE_CHECKING:  # imported by OARBackend: gridsub imports the dialect's checks (.expressions), not these
    from cigri.backends._http import HTTPTransport
    from cigri.backends._ssh import CommandResult, SSHTransport

DEFAULT_TIMEOUT = 30.0
# oardel kills with SIGKILL at once, so cigri sends SIGTERM first (oardel --signal) and kills
# this long after, while the cycle waits: kept short, and only when a job was running
DEFAULT_KILL_GRACE = 5.0
REMOTE_ID = re.compile(r"[0-9]+(\+[0-9]+)?\Z")  # an OAR job (+ position in its group)


class _OverSSH:
    """The commands over SSH; ``owner`` is the login they act as through sudo ("": the account)."""

    def __init__(self, name: str, ssh: SSHTransport) -> None:
        self.name, self.ssh = name, ssh

    def _run(self, what: str, argv: list[str], stdin: str | None = None) -> str:
        """Run one command; a failure is the cluster's, named by what failed and its stderr."""
        result: CommandResult = self.ssh.run(argv, stdin)
        if result.status != 0:
            raise BackendError(f"{self.name}: {what} failed ({result.status}): {result.stderr.strip()[-300:]}")
        return result.stdout

    def submit(self, batch: Batch, keys: list[str], login: str, owner: str) -> dict[str, str]:
        """Any exit of oarsub but 0 is its verdict on the batch: oarsub waits for OAR's database
        until it answers (``OAR::IO::connect`` retries without end), so an outage there is a hang,
        which the SSH timeout turns into the cluster's failure, never a refusal."""
        argv, script = commands.submit(batch, login, owner)
        result = self.ssh.run(argv, script)
        if result.status not in (0, commands.TRY_AGAIN):
            raise SubmissionRefused(f"{self.name}: oarsub refused the batch: {result.stderr.strip()[-300:]}")
        if result.status != 0:
            raise BackendError(f"{self.name}: oarstat failed: {result.stderr.strip()[-300:]}")
        return commands.parse_submitted(result.stdout, keys)

    def poll(self, remote_ids: list[str]) -> tuple[dict[str, RemoteJob], dict[str, str], dict[str, str]]:
        stdout = self._run("oarstat", commands.poll(remote_ids))
        return commands.parse_poll(stdout), commands.commands_of(stdout), commands.owners_of(stdout)

    def read(self, paths: dict[str, str]) -> dict[str, str]:
        return grouping.parse_read(self._run("read the status files", commands.read(paths)))

    def cancel(self, remote_ids: list[str], grace: float, owner: str) -> None:
        if grace and commands.signalled(self.ssh.run(commands.terminate(remote_ids, owner)).stdout):
            time.sleep(grace)
        self.ssh.run(commands.cancel(remote_ids, owner))  # oardel fails for ended or unknown jobs: nothing to do

    def capacity(self, properties: str) -> Capacity:
        return commands.parse_capacity(self._run("oarnodes", commands.capacity(properties)))

    def output_tail(self, remote_id: str, stream: str, lines: int, member: int | None, owner: str) -> str:
        path = commands.output_path(self._run("oarstat", commands.job_record(remote_id)), remote_id, stream, member)
        return "" if path is None else self.ssh.run(commands.tail(path, lines, owner)).stdout


class _OverREST:
    """oarapi; ``owner`` is the login named in ``X-Remote-Ident`` ("": the account's own requests)."""

    def __init__(self, http: HTTPTransport, options: dict[str, Any]) -> None:
        self.http, self.options = http, options

    @staticmethod
    def _as(owner: str) -> dict[str, str] | None:
        return {"X-Remote-Ident": owner} if owner else None

    def _get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        return self.http.request("GET", path, params=params)

    def submit(self, batch: Batch, keys: list[str], login: str, owner: str) -> dict[str, str]:
        payload = rest.submit(batch, identity.login_home(self.options, login))
        named = [job_id for path, params in rest.recent_jobs(login, time.time())
                 for job_id in rest.named(self._get(path, params), batch.name)]
        if named:
            array_id = rest.array_of(self._get(rest.job(named[0])))
            return rest.found_ids(self._get(*rest.array_jobs(array_id)), keys)
        # oarsub's refusal comes as 400 or 500 with its words in ``message``
        return rest.parse_submitted(self.http.request("POST", "/jobs.json", json=payload, headers=self._as(owner),
                                                      accept=(200, 201, 202, 400, 500)), keys)

    def poll(self, remote_ids: list[str]) -> tuple[dict[str, RemoteJob], dict[str, str], dict[str, str]]:
        found: dict[str, RemoteJob] = {}
        command_of: dict[str, str] = {}
        owner_of: dict[str, str] = {}
        for path, params in rest.poll(remote_ids):
            answer = self._get(path, params)
            found.update(rest.parse_poll(answer))
            command_of.update(rest.commands_of(answer))
            owner_of.update(rest.owners_of(answer))
        return found, command_of, owner_of

    def read(self, paths: dict[str, str]) -> dict[str, str]:
        return {path: self.http.text("GET", rest.media(path), self._as(owner)) for path, owner in paths.items()}

    def cancel(self, remote_ids: list[str], grace: float, owner: str) -> None:
        """Kill only what has not ended; a whole array (a cancelled campaign's batch) with one
        request, other jobs one request each. 400 from oardel: the job ended meanwhile."""
        wanted = set(remote_ids)
        answers = [self._get(path, params) for path, params in rest.poll(remote_ids)]
        running = [remote_id for answer in answers for remote_id in rest.running(answer)]
        headers = self._as(owner)
        if grace and running:
            for remote_id in running:
                self.http.request("POST", rest.terminate(remote_id), headers=headers, accept=(202,))
            time.sleep(grace)
        for answer in answers:
            for array_id, active in rest.active_by_array(answer).items():
                if len(active) > 1 and rest.ids(self._get(*rest.array_members(array_id))) <= wanted:
                    self.http.request("POST", rest.cancel_array(array_id), headers=headers, accept=(202, 400))
                    continue
                for remote_id in active:
                    self.http.request("DELETE", rest.cancel(remote_id), headers=headers, accept=(202, 400, 404))

    def capacity(self, properties: str) -> Capacity:
        return rest.parse_capacity(self._get(*rest.resources()), self._get(rest.busy_resources()),
                                   self._get(*rest.waiting_jobs()), properties)

    def output_tail(self, remote_id: str, stream: str, lines: int, member: int | None, owner: str) -> str:
        path = rest.output_tail(self.http.request("GET", rest.job(remote_id), accept=(200, 404)), stream, lines,
                                member)
        return "" if path is None else self.http.text("GET", path, self._as(owner))


class OARBackend:
    """:class:`~cigri.backends.ClusterBackend` for an OAR 2.5 cluster."""

    def __init__(self, name: str, options: dict[str, Any]) -> None:
        self.name = name
        self.options = options
        self.calls: Counter[str] = Counter()
        self.properties = str(options.get("properties", ""))
        self.project = str(options.get("project", ""))
        user = str(options.get("user", ""))
        if not user:
            raise ConfigError(f"clusters.{name}.user: required (the OAR user cigri submits as)")
        timeout = float(options.get("timeout", DEFAULT_TIMEOUT))
        pace = float(options.get("min_interval", 0.0))
        self.kill_grace = float(options.get("kill_grace", DEFAULT_KILL_GRACE))  # checked by the configuration
        self._transport: SSHTransport | HTTPTransport
        self._via: _OverSSH | _OverREST
        if options.get("transport") == "rest":
            from cigri.backends._http import HTTPTransport

            headers = {"Accept": "application/json"}  # the API answers 406 to httpx's default */*
            auth = None
            if "password_file" in options:
                auth = (user, _secret(name, str(options["password_file"])))
            else:
                headers["X-Remote-Ident"] = user
            self._transport = HTTPTransport(name, str(options["base_url"]), headers, timeout, auth, pace)
            self._via = _OverREST(self._transport, options)
        else:
            from cigri.backends._ssh import SSHTransport

            self._transport = SSHTransport(name, str(options["host"]), int(options.get("port", 22)), user,
                                           options.get("key_file"), options.get("known_hosts"), timeout, pace)
            self._via = _OverSSH(name, self._transport)

    def submit(self, specs: list[JobSpec]) -> dict[str, str]:
        """One array job for the batch, or the jobs an interrupted earlier call already started
        (OAR inserts an array in one statement: a batch is there whole or not at all)."""
        if not specs:
            return {}
        directory = specs[0].directory
        if isinstance(self._via, _OverREST) and launch_directory(directory) != directory:
            specs = [replace(spec, group="", group_walltime_seconds=0) for spec in specs]  # unreadable status
        batch = build(specs, self.properties, self.project)
        self.calls["submit"] += 1
        keys = job_keys(specs)
        login = identity.acting_login(self.options, specs[0].user)
        found = self._via.submit(batch, keys, login, self._owner(login))
        return grouping.ids(grouping.split(specs), [found[key] for key in keys])

    def poll(self, remote_ids: list[str]) -> dict[str, RemoteJob]:
        """One poll of the OAR jobs, plus the status files of the groups that started."""
        valid = [i for i in dict.fromkeys(remote_ids) if REMOTE_ID.match(i)]
        found: dict[str, RemoteJob] = {}
        statuses: dict[str, dict[int, grouping.Member]] = {}
        if valid:
            self.calls["poll"] += 1
            found, command_of, owner_of = self._via.poll(list(dict.fromkeys(grouping.group_of(i) for i in valid)))
            paths = {group: path for group in grouping.needing_status(valid, found)
                     if (path := status_path(command_of.get(group, ""))) is not None}
            owners = {path: self._owner(owner_of.get(group, "")) for group, path in paths.items()}
            texts = self._via.read(owners) if paths else {}
            statuses = {group: grouping.parse_status(texts.get(path, "")) for group, path in paths.items()}
        return grouping.members(remote_ids, found, statuses)

    def cancel(self, remote_ids: list[str], user: str = "") -> None:
        """Cancelling a grouped job cancels its whole group (see :mod:`cigri.backends._grouping`)."""
        jobs = grouping.remote_jobs(remote_ids, REMOTE_ID)
        if jobs:
            self.calls["cancel"] += 1
            self._via.cancel(jobs, self.kill_grace, self._owner(identity.acting_login(self.options, user)))

    def capacity(self) -> Capacity:
        self.calls["capacity"] += 1
        return self._via.capacity(self.properties)

    def output_tail(self, remote_id: str, stream: str, lines: int, user: str = "") -> str:
        """The end of ``cigri.<key>.<stream>`` in the job's directory, read as its owner."""
        if stream not in ("stdout", "stderr"):
            raise ValueError(f"unknown stream {stream!r}")
        match = REMOTE_ID.match(remote_id)
        if lines <= 0 or match is None:
            return ""
        self.calls["tail"] += 1
        member = int(match[1][1:]) if match[1] else None
        owner = self._owner(identity.acting_login(self.options, user))
        return self._via.output_tail(grouping.group_of(remote_id), stream, lines, member, owner)

    def _owner(self, login: str) -> str:
        """Whom a call acts as besides the account: ``login``, or "" when it is the account (or
        when the mode acts as no one else: basic auth cannot name another user)."""
        return "" if login == self.options["user"] or not identity.per_user(self.options) else login

    def close(self) -> None:
        self._transport.close()


def _secret(cluster: str, path: str) -> str:
    """The API password, read from its file; only the file is ever named in an error."""
    try:
        return Path(path).read_text().strip()
    except OSError as error:
        raise ConfigError(f"clusters.{cluster}.password_file: cannot read {path}: {error.strerror}") from None
