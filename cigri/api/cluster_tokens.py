"""Users' own tokens for the clusters that run jobs with them (``identity = "tokens"``), as
CiGri's ``gridtoken``: one per user and cluster, kept by cigri (:mod:`cigri.cluster_tokens`),
never shown again once registered."""

from __future__ import annotations

import json
from typing import Any

from cigri.backends import identity
from cigri.cluster_tokens import check_token
from cigri.db import clusters as stored_clusters
from cigri.db import jobs as stored_jobs
from cigri.errors import NotFound, Refused
from cigri.grid import Grid


def _token_cluster(grid: Grid, cluster: str, user: str) -> str:
    """``user``'s login on ``cluster``, a cluster whose jobs run with their owner's token."""
    row = stored_clusters.backend_and_options(grid.db.conn, cluster)
    if row is None:
        raise NotFound(f"cluster {cluster}: no such cluster")
    options = json.loads(row[1])
    if identity.mode(options) != identity.TOKENS:
        raise Refused(f"cluster {cluster}: its jobs do not run with their owner's token "
                      f"(identity {identity.mode(options)!r}): no token to register")
    login = identity.login(options, user)
    if login is None:
        raise Refused(f"cluster {cluster}: {user} has no login there")
    return login


def add_cluster_token(grid: Grid, cluster: str, token: str, *, user: str) -> dict[str, Any]:
    """Register (or replace) ``user``'s token for ``cluster``; its jobs there use it from now on."""
    login = _token_cluster(grid, cluster, user)
    grid.tokens.put(cluster, user, check_token(token))
    return {"cluster": cluster, "login": login}


def list_cluster_tokens(grid: Grid, *, user: str) -> list[dict[str, Any]]:
    """The clusters where ``user`` registered a token, and when; never the tokens."""
    return [{"cluster": cluster, "registered_at": at} for cluster, at in grid.tokens.clusters_of(user).items()]


def remove_cluster_token(grid: Grid, cluster: str, *, user: str) -> None:
    """Forget ``user``'s token for ``cluster``; refused while cigri still needs it to act on
    their jobs there (to cancel them, to read their outputs)."""
    if grid.tokens.get(cluster, user) is None:
        raise NotFound(f"cluster {cluster}: {user} has no token there")
    active = stored_jobs.count_active_of(grid.db.conn, cluster, user)
    if active:
        raise Refused(f"cluster {cluster}: {active} of {user}'s jobs are active there and need the token; "
                      "cancel them or wait for them to end")
    grid.tokens.remove(cluster, user)
