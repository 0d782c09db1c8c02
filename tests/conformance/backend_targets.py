"""The backends the conformance suite runs against: the local pool, always, and every cluster of
the file named by ``CIGRI_TEST_CLUSTERS`` (a cigri.toml, or the directory holding it; default
``/tmp/cigri-clusters/cigri.toml`` as written by ``tests/clusters/up.sh``).

A module of its own (not conftest.py) so the test module can import it: ``tests/conftest.py``
already owns the name ``conftest``."""

from __future__ import annotations

import os
import secrets
import signal
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cigri import config
from cigri.backends import ClusterBackend, JobSpec, identity, open_backend
from cigri.backends.local import LocalBackend
from cigri.backends.local.pool import try_lock
from harness import clusters_file
from unix_users import NAMES as USERS, ensure_users

DEFAULT_CLUSTERS = Path("/tmp/cigri-clusters/cigri.toml")


def _remote_clusters(path: Path | None) -> list[config.ClusterConfig]:
    if path is None or not path.is_file():
        return []
    with path.open("rb") as handle:
        names = set(tomllib.load(handle).get("clusters", {})) - {"local"}
    loaded = config.load(environ={"CIGRI_CONFIG": str(path), "CIGRI_HOME": str(path.parent / "cigri-home")})
    return [c for c in loaded.clusters if c.name in names]


def _exec_root() -> Path:
    """Where remote jobs write: ``CIGRI_TEST_EXEC_DIR``, else ``exec`` beside the clusters file."""
    named = os.environ.get("CIGRI_TEST_EXEC_DIR")
    return Path(named) if named else (clusters_file() or DEFAULT_CLUSTERS).parent / "exec"


REMOTE = _remote_clusters(clusters_file())
NAMES = ["local", *(c.name for c in REMOTE)]
# the clusters whose jobs run with their owner's own token (tokens.toml beside the clusters file)
TOKEN_CLUSTERS = _remote_clusters(clusters_file().with_name("tokens.toml") if clusters_file() else None)
# the targets where jobs run as their owner: the local pool, and every cluster in a per-user mode
IDENTITY_NAMES = ["local", *(c.name for c in [*REMOTE, *TOKEN_CLUSTERS] if identity.per_user(c.options))]
# the targets that can preempt best-effort jobs: OAR always, Slurm with a best-effort partition or QOS,
# Grid Engine with a best-effort queue
BEST_EFFORT_NAMES = [c.name for c in REMOTE if c.backend == "oar"
                     or {"best_effort_partition", "best_effort_qos", "best_effort_queue"} & set(c.options)]
OAR_NAMES = [c.name for c in REMOTE if c.backend == "oar"]
# the targets that reserve the memory a job asks for: Slurm, and Grid Engine (its memory_complex)
MEMORY_NAMES = [c.name for c in REMOTE if c.backend in ("slurm", "gridengine")]
# the Slurm clusters over SSH: squeue forgets an ended job MinJobAge seconds after its end (slurm-a has
# no accounting; slurm-b's sacct still knows it)
FORGETTING_NAMES = [c.name for c in REMOTE if c.backend == "slurm" and c.options.get("transport") == "ssh"]
FORGOTTEN_TEST = "test_a_job_slurm_forgot_is_read_from_its_trace"
# the targets that run a group as one remote job: Slurm needs SSH to read the status files
GROUPING_NAMES = [c.name for c in REMOTE if c.backend != "slurm" or "host" in c.options]


@dataclass
class Target:
    """One backend under test and where its jobs may write."""

    name: str
    kind: str  # local, slurm, oar, gridengine
    options: dict[str, Any]
    backend: ClusterBackend
    exec_root: Path  # on a file system both the cluster's jobs and this process see
    submitted: list[str] = field(default_factory=list)
    forgotten: dict[str, str] = field(default_factory=dict)  # FORGOTTEN_TEST's jobs: key -> remote id

    @property
    def remote(self) -> bool:
        return self.kind != "local"

    @property
    def reads_output(self) -> bool:
        """slurmrestd cannot read files: over REST without SSH options the tail is empty."""
        return not (self.kind == "slurm" and self.options.get("transport") == "rest" and "host" not in self.options)

    @property
    def min_walltime(self) -> int:
        """The shortest walltime the resource manager honours (Slurm counts whole minutes)."""
        return {"local": 2, "slurm": 60}.get(self.kind, 30)

    def workdir(self, label: str) -> Path:
        """A fresh directory every job of the cluster can write to."""
        path = self.exec_root / f"{self.name}-{label}-{secrets.token_hex(3)}"
        path.mkdir(parents=True)
        path.chmod(0o777)
        return path

    def submit(self, specs: list[JobSpec]) -> dict[str, str]:
        ids = self.backend.submit(specs)
        self.submitted += ids.values()
        return ids


class Targets:
    """Backends built on first use and shared by the session. ``forgetting``: the targets where
    FORGOTTEN_TEST runs, whose jobs start with the target's first use, to count down while the
    other tests run."""

    def __init__(self, tmp: Path, forgetting: frozenset[str] = frozenset()) -> None:
        self.tmp = tmp
        self.forgetting = forgetting
        self.built: dict[str, Target] = {}
        self.tokens: dict[str, str] = {}  # the users' own tokens, for the clusters in TOKEN_CLUSTERS

    def get(self, name: str) -> Target:
        if name not in self.built:
            spool = str(self.tmp / "spool")
            if name == "local":
                options: dict[str, Any] = {"slots": 8}
                backend = open_backend(name, "local", options, spool)
                self.built[name] = Target(name, "local", options, backend, self.tmp / "exec")
            else:
                cluster = next(c for c in [*REMOTE, *TOKEN_CLUSTERS] if c.name == name)
                backend = open_backend(cluster.name, cluster.backend, cluster.options, spool, self.tokens.get)
                self.built[name] = Target(name, cluster.backend, cluster.options, backend, _exec_root())
                if name in self.forgetting:
                    self.built[name].forgotten = forgotten_jobs(self.built[name])
        return self.built[name]

    def close(self) -> None:
        for target in self.built.values():
            target.backend.close()
            if isinstance(target.backend, LocalBackend):
                _stop_pool(target.backend)


def forgotten_jobs(target: Target) -> dict[str, str]:
    """Sent for FORGOTTEN_TEST: a job failing with exit 3, and a group of two (exit 0, then 2), of
    the first test user where jobs run as their owner; ``{key: remote id}``."""
    owner = USERS[0] if identity.per_user(target.options) else ""
    directory, group = str(target.workdir("forgotten")), secrets.token_hex(4)
    lone = JobSpec(f"{group}-alone", f"{group}-alone", "forgotten", ("/bin/sh", "-c", "echo oops >&2; exit 3"),
                   directory, 60, "core=1", user=owner)
    members = [JobSpec(f"{group}-{n}", group, "forgotten", ("/bin/sh", "-c", f"exit {n * 2}"), directory, 60,
                       "core=1", user=owner, group=group, group_walltime_seconds=120) for n in range(2)]
    if owner:
        ensure_users()
    return {**target.backend.submit([lone]), **target.backend.submit(members)}


def _stop_pool(backend: LocalBackend) -> None:
    fd = os.open(backend.spool.lock, os.O_RDWR | os.O_CREAT)
    try:
        if not try_lock(fd):
            os.kill(int(Path(backend.spool.lock).read_text()), signal.SIGTERM)
    finally:
        os.close(fd)
