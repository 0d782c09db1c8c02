"""Who a job runs as on a cluster: the user map and the identity modes (``docs/identity.md``).

Every job belongs to a cigri user, its campaign's owner. On each cluster that user has a login:
the name its ``logins`` table gives it, else the same name (``logins_only = true``: only the
users listed there have one; a login written ``""`` means none). A user without a login on a
cluster is never scheduled there.

Each Slurm, OAR or Grid Engine cluster runs jobs in one identity mode, its ``identity`` key (the
modes each backend and transport offer: :mod:`cigri.backends.registry`):

- ``account`` (the default, a single-user setup): every job runs as the cluster's ``user``;
- ``sudo`` (over SSH, any of them): the cluster's ``user`` runs the batch commands as the job's login through
  ``sudo -n -u LOGIN``, which the cluster's sudoers limits to exactly those commands;
- ``impersonate`` (Slurm over REST): requests name the login in ``X-SLURM-USER-NAME`` under a
  token of SlurmUser (``token_file``), which slurmrestd's ``auth/jwt`` lets act as anyone;
- ``tokens`` (Slurm over REST): requests carry the login's own token, registered with ``gridtoken``;
- ``ident`` (OAR over REST): requests name the login in ``X-Remote-Ident``, which OAR's API
  trusts behind its front (as CiGri did), without a ``password_file``.

Whatever the mode, the cluster's ``user`` polls every job (one call per cluster and cycle) and
reads capacity; submitting, cancelling and reading outputs act as the job's login. The local
cluster always runs a job as its owner's login there, a Unix account of this machine: its pool
runs as cigri's own account, or as ``pool_account`` (a service of its own); as root it switches
to each login but root (unless cigri itself runs as root), as anyone else it runs only its own
account's jobs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from cigri.errors import SubmissionRefused

ACCOUNT, SUDO, IMPERSONATE, TOKENS, IDENT = "account", "sudo", "impersonate", "tokens", "ident"
# A login the batch commands and sudo take as one word, never as an option
LOGIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\Z")
# What OAR 2.5's REST API keeps of a user name: its first run of \w (it reads "a-b" as "a")
OAR_REST_LOGIN = re.compile(r"\w+\Z", re.ASCII)
OAR_REFUSED = ("root", "oar")  # logins whose jobs OAR's default admission rule refuses ("root and oar users...")


def mode(options: Mapping[str, Any]) -> str:
    return str(options.get("identity") or ACCOUNT)


def per_user(options: Mapping[str, Any]) -> bool:
    """Whether jobs take their owner's login on this cluster (any mode but ``account``)."""
    return mode(options) != ACCOUNT


def login(options: Mapping[str, Any], user: str) -> str | None:
    """``user``'s login on the cluster (the user map), None when it has none."""
    logins = options.get("logins") or {}
    if user in logins:
        return str(logins[user]) or None
    return None if options.get("logins_only") else user


def acting_login(options: Mapping[str, Any], user: str) -> str:
    """The login a call made for ``user``'s jobs acts as: the login in a per-user mode, the
    cluster's account otherwise (and for cigri's own jobs, ``user`` empty)."""
    account = str(options.get("user", ""))
    if not user or not per_user(options):
        return account
    name = login(options, user)
    if name is None or not LOGIN.match(name):
        raise SubmissionRefused(f"{user} has no login on this cluster" if name is None else
                                f"{user}'s login {name!r} is not a plain user name")
    return name


def remote_home(options: Mapping[str, Any], user: str = "") -> str:
    """The home of the login ``user``'s jobs run as on a remote cluster: the ``home``
    option with ``{login}`` replaced (default ``/home/{login}``); the account's for a user
    without a login there (whose jobs never run there)."""
    name = str(options.get("user", ""))
    if user and per_user(options):
        name = login(options, user) or name
    return login_home(options, name)


def login_home(options: Mapping[str, Any], name: str) -> str:
    """The home of the login ``name`` on a remote cluster: the ``home`` option with
    ``{login}`` replaced (default ``/home/{login}``)."""
    return str(options.get("home") or "/home/{login}").replace("{login}", name)


def refusal(backend: str, options: Mapping[str, Any], user: str, service_account: str,
            has_token: Callable[[str], bool]) -> str | None:
    """Why ``user``'s jobs cannot run on the cluster, None when they can, for a backend whose jobs
    run as a login of the user map (its registry entry's ``logins``). ``service_account``: the
    Unix account cigri runs as, which writes the local cluster's spool; ``has_token(user)``:
    whether the user registered a token for the cluster (``gridtoken``)."""
    name = login(options, user)
    if name is None:
        return f"{user} has no login on this cluster (its logins)"
    if backend == "local":  # a Unix account here: the pool fails a job of a user it does not know
        return _local_refusal(name, str(options.get("pool_account") or ""), service_account)
    if not per_user(options):
        return None
    if not LOGIN.match(name):
        return f"{user}'s login {name!r} is not a plain user name"
    if backend == "oar" and name in OAR_REFUSED:
        return (f"OAR refuses the jobs of {name} (its admission rules admit neither root nor oar): "
                f"{user}'s jobs need another login there (logins)")
    if mode(options) == IDENT and not OAR_REST_LOGIN.match(name):
        return (f"{user}'s login {name!r} cannot be named to OAR's REST API, which keeps only letters, "
                "digits and '_' (map it to such a login in logins)")
    if mode(options) == TOKENS and not has_token(user):
        return f"{user} has no token for this cluster (gridtoken add)"
    return None


def _local_refusal(name: str, pool_account: str, service_account: str) -> str | None:
    """Why the local pool would not run ``name``'s jobs (:mod:`cigri.backends.local.pool`): it
    switches users only as root, and never to root for a spool that root does not write."""
    pool = pool_account or service_account
    if pool == "root":
        if name != "root" or service_account == "root":
            return None
        return (f"the local pool runs no job as root: cigri runs as {service_account}, whose spool never has a job "
                "run with root's rights")
    if name == pool:
        return None
    who = f"the local pool runs as {pool}" if pool_account else f"cigri runs as {pool}"
    return f"{who}, not root: it runs no one else's jobs on the local cluster ({name}'s would run with its rights)"
