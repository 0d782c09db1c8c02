"""Every job runs as the user who submitted it, on every backend (docs/identity.md).

Parametrized by ``backend_targets.IDENTITY_NAMES``: the local pool (cigri runs as root here, so it
switches to each owner's account) and every cluster of the clusters files in a per-user identity
mode (``tests/clusters/up.sh`` with ``CIGRI_TEST_USERS``: sudo over SSH, slurmrestd
impersonation, OAR's trusted front, each user's own token). Two real Unix users (the first two of
``CIGRI_TEST_USERS``, default ``cigri-u1 cigri-u2``) submit campaigns through cigri's own use
cases and cycles; the clusters, the file system and the users' own shells say who ran what.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import sqlite3
import stat
import tempfile
import time
from collections.abc import Iterator
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
from backend_targets import IDENTITY_NAMES, REMOTE, TOKEN_CLUSTERS, Target, Targets, clusters_file
from harness import REAL_CLUSTERS, on_systems
from test_backends import ended, spec, token, wait
from unix_users import NAMES, ensure_users, run_as, shared_install

from cigri import api, config
from cigri.backends import RemoteState, identity, oar
from cigri.backends import _grouping as grouping
from cigri.backends._commands import Commands
from cigri.backends.slurm import rest as slurm_rest
from cigri.config import FILE_KEYS, ClusterConfig
from cigri.cycle import run_cycle
from cigri.errors import BackendError, NotFound, Refused
from cigri.grid import Grid, open_grid
from cigri.states import CAMPAIGN_ACTIVE

pytestmark = REAL_CLUSTERS  # the real clusters' capacity is shared: one test at a time

TASK = """#!/bin/sh
# $1: the task's name; $2: seconds to run; the rest: files cigri keeps from everyone else,
# which this job must not read
id -un
seconds=$2
shift 2
for secret; do
  if cat -- "$secret" >/dev/null 2>"$HOME/.cigri-test-err.$$"; then echo "READ $secret"
  else echo "DENIED $secret: $(cat "$HOME/.cigri-test-err.$$")"; fi
done
rm -f "$HOME/.cigri-test-err.$$"
sleep "$seconds"
"""


@pytest.fixture(scope="module")
def users() -> list[str]:
    return [entry.pw_name for entry in ensure_users(NAMES[:2])]


@pytest.fixture(params=IDENTITY_NAMES)
def site(request: pytest.FixtureRequest, users: list[str], tmp_path: Path, targets: Targets,
         monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    built = Site(targets.get(request.param), users, tmp_path, monkeypatch)
    try:
        yield built
    finally:
        built.close()


class Site:
    """A cigri of one cluster (the target's), run as root with its home under the test's tmp
    path, as a site would run it; each user with a private work directory on the cluster."""

    def __init__(self, target: Target, users: list[str], tmp: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.target, self.users = target, users
        for name in [n for n in os.environ if n.startswith("CIGRI_")]:
            monkeypatch.delenv(name)
        monkeypatch.setattr(config, "SYSTEM_FILE", tmp / "absent.toml")
        monkeypatch.setattr(config, "USER_FILE", tmp / "absent.toml")
        path = tmp / "cigri.toml"
        path.write_text(_toml(ClusterConfig(target.name, target.kind, target.options)))
        self.grid: Grid = open_grid(config.load(environ={"CIGRI_CONFIG": str(path), "CIGRI_HOME": str(tmp / "home")}))
        self.logins = {user: self.login(user) for user in users}
        # the local pool's jobs need a directory the users may enter (pytest's are root's alone)
        self.exec_root = target.exec_root if target.remote else Path(tempfile.mkdtemp(prefix="cigri-identity-"))
        self.exec_root.chmod(0o1777)
        self.dirs = {user: self._workdir(user) for user in users}
        for cluster in TOKEN_CLUSTERS:
            if cluster.name == target.name:
                for user in users:
                    api.add_cluster_token(self.grid, target.name, _user_token(user), user=user)

    def login(self, user: str) -> str:
        login = identity.login(self.target.options, user)
        assert login is not None
        return login

    def _workdir(self, user: str) -> Path:
        """A directory of the user's login, closed to everyone else, holding the task."""
        entry = pwd.getpwnam(self.login(user))
        path = self.exec_root / f"{self.target.name}-{self.login(user)}-{secrets.token_hex(3)}"
        path.mkdir(mode=0o700)
        (path / "task.sh").write_text(TASK)
        (path / "task.sh").chmod(0o700)
        for item in (path, path / "task.sh"):
            os.chown(item, entry.pw_uid, entry.pw_gid)
        return path

    def submit(self, user: str, *params: str) -> int:
        document = {"name": f"identity-{user}", "exec_file": str(self.dirs[user] / "task.sh"),
                    "exec_directory": str(self.dirs[user]), "params": list(params), "walltime": "00:10:00",
                    "clusters": {self.target.name: {}}}
        return api.submit(self.grid, json.dumps(document), base_dir=self.dirs[user], user=user)[0]

    def jobs(self, campaign_id: int) -> list[dict[str, Any]]:
        return list(self.grid.db.query("SELECT * FROM jobs WHERE campaign_id = ? ORDER BY id", [campaign_id]))

    def run_until_ended(self, campaign_ids: list[int], timeout: float = 240,
                        seen: dict[str, str] | None = None) -> None:
        """Run cycles until the campaigns end; ``seen`` gets each running job's owner as the
        cluster itself tells it (remote id -> owner)."""
        deadline = time.monotonic() + timeout
        while True:
            run_cycle(self.grid)
            if seen is not None:
                for job in self.grid.db.query("SELECT remote_id FROM jobs WHERE state = 'running'"):
                    if job["remote_id"] not in seen and (owner := self.owner_seen_by_cluster(job["remote_id"])):
                        seen[job["remote_id"]] = owner
            states = [self.grid.db.execute("SELECT state FROM campaigns WHERE id = ?", [i]).fetchone()[0]
                      for i in campaign_ids]
            if not set(states) & set(CAMPAIGN_ACTIVE):
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.target.name}: campaigns {campaign_ids} still {states} after {timeout}s")
            time.sleep(1)

    def owner_seen_by_cluster(self, remote_id: str) -> str | None:
        """Who the cluster says runs the job: squeue's %u, slurmrestd's user_name, qstat's JB_owner,
        OAR's owner, the local process's uid (None: the process ended meanwhile)."""
        backend: Any = self.grid.backend(self.grid.cluster_ids()[self.target.name])
        job = grouping.group_of(remote_id)
        if self.target.kind == "local":
            pid = backend.conn.execute("SELECT pid FROM jobs WHERE key = ?", [remote_id]).fetchone()[0]
            try:
                uid = int(Path(f"/proc/{pid}/status").read_text().split("\nUid:")[1].split()[1])
            except FileNotFoundError:
                return None
            return pwd.getpwuid(uid).pw_name
        via = backend.via
        if self.target.kind == "slurm" and isinstance(via, Commands):
            return str(via.run("squeue", ["squeue", "-h", "-t", "all", "-j", job, "-o", "%u"]).strip())
        if self.target.kind == "slurm":
            return str(via.http.request("GET", slurm_rest.job_path(job))["jobs"][0]["user_name"])
        if self.target.kind == "gridengine":  # qstat lists a task until it ends
            listed = via.run("qstat", ["qstat", "-u", "*", "-g", "d", "-xml"])
            number, _, task = job.partition(".")
            owners = re.findall(rf"<JB_job_number>{number}</JB_job_number>.*?<JB_owner>([^<]+)</JB_owner>"
                                rf".*?<tasks>{task}</tasks>", listed, re.DOTALL)
            return owners[0] if owners else None
        record = via._get(oar.rest.job(job)) if isinstance(via, oar._OverREST) else \
            json.loads(via.run("oarstat", ["oarstat", "-J", "-j", job]))[job]
        return str(record["owner"])

    def output_file(self, job: dict[str, Any], stream: str = "stdout") -> Path:
        """Where the job's output is, on the file system this test shares with the cluster."""
        if self.target.kind == "local":
            return self.grid.config.spool_path / self.target.name / "jobs" / str(job["id"]) / stream
        directory = Path(json.loads(self.grid.db.execute(
            "SELECT value FROM campaign_properties WHERE campaign_id = ? AND name = 'exec_directory'",
            [job["campaign_id"]]).fetchone()[0]))
        if self.target.kind == "slurm":
            cluster = "slurm-a" if self.target.name.startswith("slurm-a") else "slurm-b"
            return directory / f"cigri.{cluster}.{job['remote_id']}.{stream}"
        if self.target.kind == "gridengine":  # cigri.<cell>.<task>
            return next(directory.glob(f"cigri.*.{job['remote_id']}.{stream}"))
        return directory / f"cigri.{job['id']}.{stream}"

    def close(self) -> None:
        for row in self.grid.db.query("SELECT id, user FROM campaigns WHERE state IN ('in_treatment', 'paused')"):
            api.cancel(self.grid, row["id"], user="root")
        run_cycle(self.grid)  # nikita kills what is left
        self.grid.close()
        if not self.target.remote:
            shutil.rmtree(self.exec_root)


def _toml(cluster: ClusterConfig) -> str:
    """The configuration of a grid of this one cluster."""
    lines = [f"[clusters.{cluster.name}]", f'backend = "{cluster.backend}"']
    for key, value in cluster.options.items():
        if isinstance(value, dict):
            value = "{" + ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in value.items()) + "}"
        else:
            value = json.dumps(value)
        lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n"


def _user_token(user: str) -> str:
    """The user's own token for slurm-b, as up.sh wrote it (`scontrol token`'s output)."""
    path = clusters_file().parent / "slurm" / "slurm-b" / f"jwt.{user}"  # type: ignore[union-attr]
    return path.read_text().strip().removeprefix("SLURM_JWT=")


def _secrets(site: Site) -> list[str]:
    """Files no job may read: cigri's database, its spool's, its token store, and every key,
    token and password file of the test clusters."""
    site.grid.tokens.put("probe", site.users[0], "a-token-nobody-may-read")  # beside the users' real ones
    files = [site.grid.config.database_path, site.grid.tokens.root / "probe" / site.users[0]]
    if site.target.kind == "local":
        site.grid.backend(site.grid.cluster_ids()[site.target.name]).capacity()  # opens the spool's database
        files.append(site.grid.config.spool_path / site.target.name / "spool.db")
    for cluster in [*REMOTE, *TOKEN_CLUSTERS]:  # known_hosts are public keys
        files += [Path(str(cluster.options[key])) for key in FILE_KEYS if key in cluster.options and key != "known_hosts"]
    return [str(path) for path in dict.fromkeys(files) if path.exists()]


def _private(path: Path, owner: str) -> None:
    info = path.stat()
    assert pwd.getpwuid(info.st_uid).pw_name == owner, f"{path} belongs to uid {info.st_uid}, not {owner}"
    assert not info.st_mode & 0o077, f"{path}: mode {stat.filemode(info.st_mode)}, open to others"


def test_campaigns_of_two_users_run_side_by_side_each_as_its_owner(site: Site) -> None:
    first, second = site.users
    secrets_ = _secrets(site)
    campaigns = {user: site.submit(user, f"{user}-a 8 {' '.join(secrets_)}", f"{user}-b 8") for user in site.users}
    seen: dict[str, str] = {}
    site.run_until_ended(list(campaigns.values()), seen=seen)
    for user, campaign_id in campaigns.items():
        login, other = site.logins[user], site.logins[second if user == first else first]
        jobs = site.jobs(campaign_id)
        assert [j["state"] for j in jobs] == ["terminated", "terminated"], jobs
        for job in jobs:
            assert seen.get(job["remote_id"]) == login, f"{site.target.name}: the cluster ran {job['remote_id']} " \
                                                        f"as {seen.get(job['remote_id'])}, not {login}"
            output = site.output_file(job)
            assert output.read_text().splitlines()[0] == login  # the task's own `id -un`
            _private(output, login)
            refused = run_as(other, ["cat", str(output)])
            assert refused.returncode != 0 and "Permission denied" in refused.stderr
            if site.target.reads_output:
                assert api.job_output(site.grid, job["id"], "stdout", user=user).splitlines()[0] == login
            for call in (lambda: api.job_output(site.grid, job["id"], "stdout", user=other_user(site, user)),
                         lambda: api.cancel_job(site.grid, job["id"], user=other_user(site, user))):
                with pytest.raises(NotFound, match=f"job {job['id']}: no such job"):  # another's: as none
                    call()
    lines = site.output_file(site.jobs(campaigns[first])[0]).read_text().splitlines()
    assert len(lines) == 1 + len(secrets_) and all(line.startswith("DENIED") for line in lines[1:]), lines
    assert all("Permission denied" in line for line in lines[1:]), lines


def other_user(site: Site, user: str) -> str:
    return next(u for u in site.users if u != user)


def test_a_user_cannot_cancel_or_read_another_users_job_on_the_cluster(site: Site) -> None:
    """Below cigri's own checks, the cluster itself refuses: a call acting as the second user
    does not reach the first one's job. A batch sent again is adopted from its owner's jobs."""
    first, second = site.users
    backend = site.grid.backend(site.grid.cluster_ids()[site.target.name])
    target = Target(site.target.name, site.target.kind, site.target.options, backend, site.target.exec_root)
    key = token()
    job = dataclasses.replace(spec(key, site.dirs[first], str(site.dirs[first] / "task.sh"), "long", "300"),
                              user=first)
    remote_id = backend.submit([job])[key]
    try:
        assert backend.submit([job]) == {key: remote_id}  # re-sent, it is found among its owner's jobs
        wait(target, [remote_id], lambda j: j.state == RemoteState.RUNNING)
        try:
            backend.cancel([remote_id], second)
        except BackendError:  # refused outright: fine too
            pass
        assert backend.output_tail(remote_id, "stdout", 5, second) == ""
        time.sleep(5)
        assert backend.poll([remote_id])[remote_id].state == RemoteState.RUNNING, "the other user's cancel killed it"
        if site.target.reads_output:
            assert backend.output_tail(remote_id, "stdout", 5, first).splitlines()[0] == site.logins[first]
    finally:
        backend.cancel([remote_id], first)
    assert wait(target, [remote_id], ended, timeout=60)[remote_id].state in (RemoteState.CANCELLED,
                                                                              RemoteState.COMPLETED)


@pytest.mark.parametrize("site", [c.name for c in TOKEN_CLUSTERS], indirect=True)
def test_a_user_without_a_token_is_refused_at_submission(site: Site) -> None:
    first, second = site.users
    api.remove_cluster_token(site.grid, site.target.name, user=second)
    assert [t["cluster"] for t in api.list_cluster_tokens(site.grid, user=second)] == []
    assert [t["cluster"] for t in api.list_cluster_tokens(site.grid, user=first)] == [site.target.name]
    with pytest.raises(Refused, match=f"cluster {site.target.name}: {second} has no token for this cluster"):
        site.submit(second, "t 1")
    token_file = site.grid.tokens.root / site.target.name / first
    _private(token_file, "root")
    _private(token_file.parent, "root")


@on_systems()
def test_cigri_not_running_as_root_refuses_another_users_campaign_on_local(tmp_path: Path, users: list[str],
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The database is the account cigri runs as; not root, it runs no one else's job."""
    first, second = users
    for name in [n for n in os.environ if n.startswith("CIGRI_")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr(config, "SYSTEM_FILE", tmp_path / "absent.toml")
    monkeypatch.setattr(config, "USER_FILE", tmp_path / "absent.toml")
    path = tmp_path / "cigri.toml"
    path.write_text('[clusters.local]\nbackend = "local"\n')
    grid = open_grid(config.load(environ={"CIGRI_CONFIG": str(path), "CIGRI_HOME": str(tmp_path / "home")}))
    try:
        os.chown(grid.config.database_path, pwd.getpwnam(first).pw_uid, -1)
        document = json.dumps({"name": "x", "exec_file": "/bin/true", "nb_jobs": 1, "clusters": {"local": {}}})
        with pytest.raises(Refused, match=f"cluster local: cigri runs as {first}, not root: it runs no one else's "
                                          f"jobs on the local cluster"):
            api.submit(grid, document, base_dir=tmp_path, user=second)
        assert grid.db.execute("SELECT count(*) FROM campaigns").fetchone()[0] == 0
        assert api.submit(grid, document, base_dir=tmp_path, user=first)[1] == 1
    finally:
        grid.close()


POOL_AS_USER = """
import json, sys, time
from cigri.backends import JobSpec, open_backend
backend = open_backend("local", "local", {"slots": 2}, sys.argv[1])
spec = JobSpec(key="k1", batch="k1", name="k1", argv=("/usr/bin/id", "-un"), directory=sys.argv[1],
               walltime_seconds=60, resources="core=1", user=sys.argv[2])
backend.submit([spec])
for _ in range(200):
    job = backend.poll(["k1"])["k1"]
    if job.state == "completed":
        break
    time.sleep(0.1)
print(json.dumps({"state": job.state, "exit_code": job.exit_code, "stderr": backend.output_tail("k1", "stderr", 5)}))
"""


@on_systems()
def test_a_pool_not_running_as_root_never_runs_another_users_job(users: list[str]) -> None:
    """Its last line of defence: the job ends with status 127 and says why, and never runs."""
    first, second = users
    python = shared_install() / "python"
    spool = Path(tempfile.mkdtemp(prefix="cigri-identity-"))  # pytest's directories are root's alone
    try:
        os.chown(spool, pwd.getpwnam(first).pw_uid, -1)
        done = run_as(first, [str(python), "-c", POOL_AS_USER, str(spool), second], cwd=spool)
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)
        assert (result["state"], result["exit_code"]) == ("completed", 127)
        assert f"the pool runs as {first}, not root: it runs no one else's job (this one is {second}'s)" \
            in result["stderr"]
        conn = sqlite3.connect(spool / "local" / "spool.db")
        try:
            assert conn.execute("SELECT pid FROM jobs WHERE key = 'k1'").fetchone()[0] is None  # never started
        finally:
            conn.close()
    finally:
        lock = spool / "local" / "pool.lock"
        if lock.exists() and lock.read_text().strip():
            with suppress(ProcessLookupError):
                os.kill(int(lock.read_text()), signal.SIGTERM)  # the pool this test started, idle
        shutil.rmtree(spool)
