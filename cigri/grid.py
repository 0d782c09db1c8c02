"""The grid as seen by one process: configuration, database and cluster backends."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from cigri import db as database
from cigri.backends import ClusterBackend, identity, open_backend
from cigri.backends.registry import BACKENDS
from cigri.cluster_tokens import TokenStore
from cigri.config import Config
from cigri.db import campaigns as stored_campaigns
from cigri.db import clusters as stored_clusters
from cigri.db import events as stored_events
from cigri.errors import CigriError, Refused
from cigri.events import IMPORTED
from cigri.jdl.parser import cluster_home


@dataclass
class Grid:
    config: Config
    db: Database
    _backends: dict[int, ClusterBackend] = field(default_factory=dict)
    _properties: dict[int, dict[int, dict[str, Any]]] = field(default_factory=dict)

    def backend(self, cluster_id: int) -> ClusterBackend:
        """The cluster's backend, opened once per process. A cluster ``cigri import-v3`` added
        is refused until an admin lifts its hold: its options are CiGri's guesses, and what
        it holds of CiGri's may still run there."""
        if cluster_id not in self._backends:
            row = stored_clusters.definition(self.db.conn, cluster_id)
            name = row[0]
            if stored_events.holding_code(self.db.conn, cluster_id) == IMPORTED:
                raise Refused(f"cluster {name}: imported from CiGri v3 and not contacted until an admin sets its "
                              f"options ([clusters.{name}] in cigri.toml) and lifts it (cigri cluster unblacklist {name})")
            self._backends[cluster_id] = open_backend(name, row[1], json.loads(row[2]), str(self.config.spool_path),
                                                      lambda user: self.tokens.get(name, user))
        return self._backends[cluster_id]

    @property
    def tokens(self) -> TokenStore:
        """The users' own tokens for clusters (:mod:`cigri.cluster_tokens`)."""
        return TokenStore(self.config.home / "tokens")

    def service_account(self) -> str:
        """The Unix account cigri runs as: the owner of its database (as for the admin role)."""
        from cigri.users import owner_of

        return owner_of(self.config.owned_path)

    def refusals(self, user: str) -> dict[str, str]:
        """Why ``user``'s jobs cannot run on some clusters (:func:`identity.refusal`), by name."""
        account, tokens = self.service_account(), self.tokens
        found = {}
        for name, backend, options in stored_clusters.definitions(self.db.conn):
            if backend not in BACKENDS or not BACKENDS[backend].logins:  # the simulator's jobs are nobody's
                continue
            why = identity.refusal(backend, json.loads(options), user, account,
                                   partial(_has_token, tokens, name))
            if why is not None:
                found[name] = why
        return found

    def refused_cluster_ids(self, user: str) -> set[int]:
        """The ids of the clusters that never run ``user``'s jobs, prologues and epilogues included."""
        names = self.refusals(user)
        return {cluster_id for name, cluster_id in self.cluster_ids().items() if name in names}

    def campaign_properties(self, campaign_ids: list[int]) -> dict[int, dict[int, dict[str, Any]]]:
        """:func:`cigri.db.campaigns.properties`, each campaign's decoded once per process:
        they are written with the campaign, in its submission's transaction, and never change
        (decoding them a few times per cycle was a third of a 100-campaign cycle). Read only."""
        missing = [i for i in campaign_ids if i not in self._properties]
        if missing:
            self._properties.update((i, values) for i, values in stored_campaigns.properties(self.db.conn, missing).items()
                                    if values)
        return {i: self._properties.get(i, {}) for i in campaign_ids}

    def cluster_ids(self) -> dict[str, int]:
        return {name: cid for cid, name in stored_clusters.names(self.db.conn).items()}

    def cluster_backends(self) -> dict[str, str]:
        """Each cluster's backend (``oar``, ``slurm``, ``local``, ``sim``), by name."""
        return stored_clusters.backends(self.db.conn)

    def cluster_homes(self, user: str) -> dict[str, str]:
        """What ``{HOME}`` means on each cluster for ``user``'s jobs (:func:`cluster_home`)."""
        return {name: cluster_home(backend, json.loads(options), user)
                for name, backend, options in stored_clusters.definitions(self.db.conn)}

    def close(self) -> None:
        for backend in self._backends.values():
            backend.close()
        self.db.close()


def _has_token(tokens: TokenStore, cluster: str, user: str) -> bool:
    return tokens.get(cluster, user) is not None


def open_grid(config: Config) -> Grid:
    """Open the database and make its cluster table match the configuration."""
    for path in (config.home, config.spool_path, config.log_path):
        try:
            Path(path).mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as error:  # the environment (a file in the way, no permission), as in database.connect
            raise CigriError(f"cannot create directory {error.filename or path}: {error.strerror}") from None
    grid = Grid(config, database.open_store(config.store_location))
    _sync_clusters(grid)
    return grid


def _sync_clusters(grid: Grid) -> None:
    """Configured clusters are upserted; admin-added ones are left alone."""
    wanted = {c.name: (c.backend, json.dumps(c.options, sort_keys=True)) for c in grid.config.clusters}
    current = stored_clusters.configured(grid.db.conn)
    if current == wanted:
        return
    with database.write(grid.db) as conn:
        for name, (backend, options) in wanted.items():
            stored_clusters.upsert_configured(conn, name, backend, options)
        for name in set(current) - set(wanted):
            stored_clusters.unconfigure(conn, name)
