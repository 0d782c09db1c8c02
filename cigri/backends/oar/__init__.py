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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cigri.backends import Capacity, JobSpec, RemoteJob, identity
from cigri.backends._batch import Acting, BatchBackend, Polled
from cigri.backends._commands import Commands, open_ssh
from cigri.backends.oar import commands, rest
from cigri.backends.oar.batch import build, job_keys, launch_directory
from cigri.errors import ConfigError

if TYPE_CHECKING:  # imported by OARBackend: gridsub imports the dialect's checks (.expressions), not these
    from cigri.backends._http import HTTPTransport

DEFAULT_TIMEOUT = 30.0
# oardel kills with SIGKILL at once, so cigri sends SIGTERM first (oardel --signal) and kills
# this long after, while the cycle waits: kept short, and only when a job was running
DEFAULT_KILL_GRACE = 5.0
REMOTE_ID = re.compile(r"[0-9]+(\+[0-9]+)?\Z")  # an OAR job (+ position in its group)


class _OverREST:
    """oarapi; a call for a job's owner names their login in ``X-Remote-Ident`` (identity ``ident``)."""

    def __init__(self, http: HTTPTransport, options: dict[str, Any], kill_grace: float) -> None:
        self.http, self.options, self.kill_grace = http, options, kill_grace

    def _as(self, acting: Acting) -> dict[str, str] | None:
        """Whom a call acts as besides the account: basic auth cannot name another user."""
        if acting.login == self.options["user"] or not identity.per_user(self.options):
            return None
        return {"X-Remote-Ident": acting.login}

    def _get(self, path: str, params: dict[str, Any] | None = None) -> Any:
        return self.http.request("GET", path, params=params)

    def groups(self, directory: str) -> str:
        if launch_directory(directory) == directory:
            return ""
        return "OAR's media API reads no file whose path is not plain (it runs tail through a shell, unquoted)"

    def submit(self, specs: list[JobSpec], acting: Acting) -> list[str]:
        batch = build(specs, str(self.options.get("properties", "")), str(self.options.get("project", "")))
        keys = job_keys(specs)
        payload = rest.submit(batch, identity.login_home(self.options, acting.login))
        named = [job_id for path, params in rest.recent_jobs(acting.login, time.time())
                 for job_id in rest.named(self._get(path, params), batch.name)]
        if named:
            array_id = rest.array_of(self._get(rest.job(named[0])))
            found = rest.found_ids(self._get(*rest.array_jobs(array_id)), keys)
        else:
            # oarsub's refusal comes as 400 or 500 with its words in ``message``
            found = rest.parse_submitted(self.http.request("POST", "/jobs.json", json=payload,
                                                           headers=self._as(acting),
                                                           accept=(200, 201, 202, 400, 500)), keys)
        return [found[key] for key in keys]

    def poll(self, job_ids: list[str]) -> Polled:
        found: dict[str, RemoteJob] = {}
        files: dict[str, tuple[str, str]] = {}
        for path, params in rest.poll(job_ids):
            answer = self._get(path, params)
            found.update(rest.parse_poll(answer))
            files.update(rest.files(answer))
        return Polled(found, files)

    def statuses(self, group_ids: list[str], polled: Polled) -> dict[str, str]:
        """One media ``GET`` per group, as the group's owner."""
        texts = {}
        for group in group_ids:
            if group in polled.files:
                owner, prefix = polled.files[group]
                acting = Acting(owner, owner)
                texts[group] = self.http.text("GET", rest.media(f"{prefix}.status"), self._as(acting))
        return texts

    def traces(self, job_ids: list[str]) -> dict[str, str]:
        return {}  # OAR remembers every job it ran

    def cancel(self, job_ids: list[str], acting: Acting) -> None:
        """Kill only what has not ended; a whole array (a cancelled campaign's batch) with one
        request, other jobs one request each. 400 from oardel: the job ended meanwhile."""
        wanted = set(job_ids)
        answers = [self._get(path, params) for path, params in rest.poll(job_ids)]
        running = [job_id for answer in answers for job_id in rest.running(answer)]
        headers = self._as(acting)
        if self.kill_grace and running:
            for job_id in running:
                self.http.request("POST", rest.terminate(job_id), headers=headers, accept=(202,))
            time.sleep(self.kill_grace)
        for answer in answers:
            for array_id, active in rest.active_by_array(answer).items():
                if len(active) > 1 and rest.ids(self._get(*rest.array_members(array_id))) <= wanted:
                    self.http.request("POST", rest.cancel_array(array_id), headers=headers, accept=(202, 400))
                    continue
                for job_id in active:
                    self.http.request("DELETE", rest.cancel(job_id), headers=headers, accept=(202, 400, 404))

    def capacity(self) -> Capacity:
        return rest.parse_capacity(self._get(*rest.resources()), self._get(rest.busy_resources()),
                                   self._get(*rest.waiting_jobs()), str(self.options.get("properties", "")))

    def output_tail(self, remote_id: str, stream: str, lines: int, acting: Acting) -> str:
        match = REMOTE_ID.match(remote_id)
        member = int(match[1][1:]) if match is not None and match[1] else None
        job = remote_id.partition("+")[0]
        path = rest.output_tail(self.http.request("GET", rest.job(job), accept=(200, 404)), stream, lines, member)
        return "" if path is None else self.http.text("GET", path, self._as(acting))

    def close(self) -> None:
        self.http.close()


class OARBackend(BatchBackend):
    """:class:`~cigri.backends.ClusterBackend` for an OAR 2.5 cluster."""

    def __init__(self, name: str, options: dict[str, Any]) -> None:
        user = str(options.get("user", ""))
        if not user:
            raise ConfigError(f"clusters.{name}.user: required (the OAR user cigri submits as)")
        timeout = float(options.get("timeout", DEFAULT_TIMEOUT))
        kill_grace = float(options.get("kill_grace", DEFAULT_KILL_GRACE))  # checked by the configuration
        if options.get("transport") == "rest":
            from cigri.backends._http import HTTPTransport

            headers = {"Accept": "application/json"}  # the API answers 406 to httpx's default */*
            auth = None
            if "password_file" in options:
                auth = (user, _secret(name, str(options["password_file"])))
            else:
                headers["X-Remote-Ident"] = user
            http = HTTPTransport(name, str(options["base_url"]), headers, timeout, auth,
                                 float(options.get("min_interval", 0.0)))
            super().__init__(name, options, _OverREST(http, options, kill_grace), REMOTE_ID)
        else:
            super().__init__(name, options, Commands(name, options, open_ssh(name, options, timeout), commands,
                                                     kill_grace), REMOTE_ID)


def _secret(cluster: str, path: str) -> str:
    """The API password, read from its file; only the file is ever named in an error."""
    try:
        return Path(path).read_text().strip()
    except OSError as error:
        raise ConfigError(f"clusters.{cluster}.password_file: cannot read {path}: {error.strerror}") from None
