"""Every backend cigri knows, in one table: its cluster keys, its transports with the keys each
cannot open without and the identity modes each offers, what a JDL may send it, and how to open
it. The configuration checks a cluster's table against it (:mod:`cigri.config`), ``cigri
cluster add`` names what it holds, ``cigri doctor`` and the runner open clusters through it
(:func:`cigri.backends.open_backend`), and ``tests/test_docs.py`` holds the docs to it.

Opening a backend imports its package only then: a command that never contacts a cluster pays
for none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cigri.backends.identity import ACCOUNT, IDENT, IMPERSONATE, SUDO, TOKENS

if TYPE_CHECKING:
    from cigri.backends import ClusterBackend, TokenOf


@dataclass(frozen=True)
class Transport:
    """One way to reach a resource manager."""

    needs: tuple[str, ...]  # the keys it cannot be opened without
    identities: tuple[str, ...] = (ACCOUNT,)  # the identity modes it offers (docs/identity.md)


@dataclass(frozen=True)
class Opening:
    """What opening a cluster may need beside its name and options."""

    spool_root: str
    token_of: TokenOf


@dataclass(frozen=True)
class Backend:
    name: str
    summary: str  # what it reaches, in a few words
    keys: Mapping[str, type]  # every key of its [clusters.NAME] table but backend
    open: Callable[[str, dict[str, Any], Opening], ClusterBackend]
    transports: Mapping[str, Transport] = field(default_factory=dict)  # none: it has no transport key
    logins: bool = True  # its jobs run as a login of the cluster's user map (docs/identity.md)
    job_id_variable: str = "$CIGRI_JOB_ID"  # what a prologue's {OAR_JOB_ID} stands for
    # what a JDL's resources and properties must pass to be sent (each raises ValueError or
    # SubmissionRefused saying why not); imported only when a JDL names such a cluster
    jdl_checks: Callable[[], Mapping[str, Callable[[str], object]]] = lambda: {}

    @property
    def remote(self) -> bool:
        """Whether its jobs run on another machine, reached through a transport."""
        return bool(self.transports)

    def transport(self, options: Mapping[str, Any]) -> str | None:
        """The cluster's transport: its ``transport`` key, or the backend's only one."""
        if "transport" in options or len(self.transports) != 1:
            value = options.get("transport")
            return value if isinstance(value, str) else None
        return next(iter(self.transports))


# How much of a cluster cigri takes, and whose logins its jobs run as (docs/identity.md).
_TAPS: dict[str, type] = {"max_waiting": int, "max_jobs": int, "job_ratio": str, "remote_waiting_timeout": float,
                          "stress_factor": float}
_LOGINS: dict[str, type] = {"logins": dict, "logins_only": bool}
# Every batch system over SSH or REST: the front-end or the API, cigri's account there, and how it
# paces its calls.
_COMMON: dict[str, type] = {
    "transport": str, "user": str, "timeout": float, "min_interval": float, "api_chunk_size": int,
    "properties": str, "project": str, "group_seconds": int, "home": str, "identity": str, **_TAPS, **_LOGINS,
}
_SSH: dict[str, type] = {"host": str, "port": int, "key_file": str, "known_hosts": str}
_REST: dict[str, type] = {"base_url": str}
_OVER_SSH = Transport(("host", "user"), (ACCOUNT, SUDO))


def _local(name: str, options: dict[str, Any], opening: Opening) -> ClusterBackend:
    from cigri.backends.local import LocalBackend

    return LocalBackend(name, options, opening.spool_root)


def _slurm(name: str, options: dict[str, Any], opening: Opening) -> ClusterBackend:
    from cigri.backends.slurm import SlurmBackend

    return SlurmBackend(name, options, opening.token_of)


def _oar(name: str, options: dict[str, Any], opening: Opening) -> ClusterBackend:
    from cigri.backends.oar import OARBackend

    return OARBackend(name, options)


def _gridengine(name: str, options: dict[str, Any], opening: Opening) -> ClusterBackend:
    from cigri.backends.gridengine import GridEngineBackend

    return GridEngineBackend(name, options)


def _sim(name: str, options: dict[str, Any], opening: Opening) -> ClusterBackend:
    from cigri.backends.sim import SimBackend

    return SimBackend(name, options)


def _slurm_checks() -> Mapping[str, Callable[[str], object]]:
    from cigri.backends.slurm import batch

    return {"resources": batch.shape, "properties": batch.constraint}


def _oar_checks() -> Mapping[str, Callable[[str], object]]:
    from cigri.backends.oar import expressions

    return {"resources": expressions.check_resource_filters, "properties": expressions.check_properties}


def _gridengine_checks() -> Mapping[str, Callable[[str], object]]:
    from cigri.backends.gridengine import requests

    return {"resources": requests.slots, "properties": requests.parse}


BACKENDS: dict[str, Backend] = {backend.name: backend for backend in (
    Backend("local", "this machine's own pool of cores",
            {"slots": int, **_TAPS, **_LOGINS, "pool_account": str}, _local),
    Backend("slurm", "Slurm: its commands over SSH, or slurmrestd",
            {**_COMMON, **_SSH, **_REST, "token_file": str, "partition": str, "best_effort_partition": str,
             "best_effort_qos": str}, _slurm,
            {"ssh": _OVER_SSH,
             "rest": Transport(("base_url", "user", "token_file"), (ACCOUNT, IMPERSONATE, TOKENS))},
            job_id_variable="$SLURM_JOB_ID", jdl_checks=_slurm_checks),
    Backend("oar", "OAR 2.5: its commands over SSH, or its REST API",
            {**_COMMON, **_SSH, **_REST, "password_file": str, "kill_grace": float}, _oar,
            # no password_file over REST: OAR's trusted-proxy mode
            {"ssh": _OVER_SSH, "rest": Transport(("base_url", "user"), (ACCOUNT, IDENT))},
            job_id_variable="$OAR_JOB_ID", jdl_checks=_oar_checks),
    Backend("gridengine", "Grid Engine (Son of Grid Engine, Altair/Univa, Open Cluster Scheduler): "
                          "its commands over SSH",
            {**_COMMON, **_SSH, "queue": str, "best_effort_queue": str, "parallel_environment": str,
             "memory_complex": str}, _gridengine,
            {"ssh": _OVER_SSH}, job_id_variable="$JOB_ID", jdl_checks=_gridengine_checks),
    Backend("sim", "a simulated cluster (cigri simulate)",
            {"cores": int, "memory_gb": float, "seed": int, "local_load": float, "local_load_steps": str,
             "local_max_cores": int, "trace": str, "task_seconds": float, "submit_limit": int, "node_cores": int,
             **_TAPS}, _sim, logins=False),
)}
