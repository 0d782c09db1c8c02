"""What one scheduling cycle knows about the clusters, gathered once at its start.

Cluster health lives here too: every failed call to a cluster raises an event named by the
error (CLUSTER_TIMEOUT, CLUSTER_AUTH_FAILURE...); a cluster with a failed call in
``blacklist_after`` cycles in a row is blacklisted, and an automatic blacklist is re-checked
with a real capacity call every ``autofix_delay`` seconds and lifted when the cluster answers.
A cluster an admin blacklisted is drained: it gets no new job, but the jobs cigri has there are
still polled (and killed on request, as on any cluster), so they end and their campaigns with them.
A cluster set aside for a fault (:mod:`cigri.faults`) is neither used nor polled nor re-checked.
A cluster ``cigri import-v3`` added is dormant: nothing at all is sent there, not even a cancel,
until an admin lifts its CLUSTER_IMPORTED event.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from cigri import db as database
from cigri import faults
from cigri.backends import Capacity
from cigri.db import clusters as stored_clusters
from cigri.db import events as stored
from cigri.errors import BackendError
from cigri.events import (CONNECTION_CODES, IMPORTED, MANUALLY_DISABLED, blacklist_cluster, close, close_cluster_problems,
                          record)
from cigri.grid import Grid
from cigri.jdl.parser import cluster_home

log = logging.getLogger("cigri.cycle")


@dataclass
class CycleContext:
    grid: Grid
    capacities: dict[int, Capacity] = field(default_factory=dict)  # usable clusters only
    draining: set[int] = field(default_factory=set)  # blacklisted by an admin: no new job, the others followed
    dormant: set[int] = field(default_factory=set)  # imported from CiGri, not lifted yet: nothing sent, none polled
    options: dict[int, dict[str, Any]] = field(default_factory=dict)
    backends: dict[int, str] = field(default_factory=dict)  # each cluster's backend name (slurm, oar, local, sim)
    names: dict[int, str] = field(default_factory=dict)  # each cluster's name, for what the cycle logs
    failed: set[int] = field(default_factory=set)  # clusters with a failed call this cycle
    drains: dict[tuple[int, int], int] = field(default_factory=dict)  # (campaign, cluster): jobs ending within a period
    set_aside: set[int] = field(default_factory=set)  # campaigns no step touches (cigri.faults)

    def name(self, cluster_id: int) -> str:
        """The cluster's name, as logs and messages call it (its id if it is gone)."""
        return self.names.get(cluster_id, f"#{cluster_id}")

    def cluster_options(self, cluster_id: int) -> dict[str, Any]:
        return self.options.get(cluster_id, {})

    def home(self, cluster_id: int, user: str) -> str:
        """Where ``user``'s prologues and epilogues run on the cluster (:func:`cluster_home`)."""
        return cluster_home(self.backends[cluster_id], self.cluster_options(cluster_id), user)

    def cluster_failed(self, cluster_id: int, what: str, error: Exception, campaign_id: int | None = None) -> None:
        """A cluster call failed: the cluster is left out of this cycle, an event says why, and
        the first failure of the cycle counts toward blacklisting it."""
        log.warning("cluster %s: %s failed: %s", self.name(cluster_id), what, error)
        self.capacities.pop(cluster_id, None)
        code = error.code if isinstance(error, BackendError) else "CLUSTER_UNREACHABLE"
        first = cluster_id not in self.failed
        self.failed.add(cluster_id)
        limit = self.grid.config.settings.blacklist_after
        with database.write(self.grid.db) as conn:
            record(conn, code, f"{what} failed: {error}", cluster_id=cluster_id, campaign_id=campaign_id,
                   signature=what)
            if first and stored_clusters.count_failure(conn, cluster_id) >= limit:
                blacklist_cluster(conn, cluster_id, f"{limit} cycle(s) in a row with a failed call; last: "
                                                    f"{what} ({code})")
                log.warning("cluster %s blacklisted after %s failing cycle(s)", self.name(cluster_id), limit)

    @contextmanager
    def isolated(self, step: str, *, campaign_id: int | None = None, cluster_id: int | None = None,
                 conn: sqlite3.Connection | None = None) -> Iterator[None]:
        """Run one campaign's (or one cluster's) share of ``step``: if it raises a fault
        (:mod:`cigri.faults`), the unit is set aside and the step goes on with the others.
        ``conn``: the step's open transaction, where the unit's writes are undone by a
        savepoint; without it, the block's own transaction has rolled them back."""
        if conn is not None:
            conn.execute("SAVEPOINT unit")
        try:
            yield
        except Exception as error:
            if not faults.is_fault(error):
                raise
            if conn is not None:
                conn.execute("ROLLBACK TO unit")
                conn.execute("RELEASE unit")
            self._set_aside(step, error, campaign_id, cluster_id, conn)
        else:
            if conn is not None:
                conn.execute("RELEASE unit")

    def _set_aside(self, step: str, error: Exception, campaign_id: int | None, cluster_id: int | None,
                   conn: sqlite3.Connection | None) -> None:
        unit = f"campaign {campaign_id}" if cluster_id is None else f"cluster {self.name(cluster_id)}"
        log.error("%s set aside: the %s raised on its data", unit, step, exc_info=error)
        with database.write(self.grid.db) if conn is None else nullcontext(conn) as writer:
            if cluster_id is None:
                assert campaign_id is not None
                faults.set_aside_campaign(writer, campaign_id, step, error)
                self.set_aside.add(campaign_id)
            else:
                faults.set_aside_cluster(writer, cluster_id, step, error)
                self.capacities.pop(cluster_id, None)
                self.draining.discard(cluster_id)

    def settle(self) -> None:
        """End of cycle: a cluster used without any failure starts its failure count again."""
        healthy = [cid for cid in self.capacities if cid not in self.failed]
        if healthy and stored_clusters.any_failures(self.grid.db.conn, healthy):
            with database.write(self.grid.db) as conn:
                stored_clusters.reset_failures(conn, healthy)


def gather(grid: Grid) -> CycleContext:
    """Ask every usable cluster for its capacity, and re-check automatic blacklists that are due."""
    ctx = CycleContext(grid, set_aside=faults.set_aside_campaigns(grid.db.conn))
    now = database.now()
    for cluster_id, name, backend, options, blacklisted, event_id, checked_at, held_by in \
            stored.clusters_and_holders(grid.db.conn):
        ctx.options[cluster_id], ctx.backends[cluster_id], ctx.names[cluster_id] = json.loads(options), backend, name
        if blacklisted and held_by == faults.CODE:  # set aside: lifted by fixing its event only
            continue
        if blacklisted and held_by == IMPORTED:  # not contacted, cancels included, until an admin lifts it
            ctx.dormant.add(cluster_id)
            continue
        if blacklisted and (event_id is None or held_by == MANUALLY_DISABLED):  # an admin's: lifted by an admin only
            ctx.draining.add(cluster_id)
            continue
        if blacklisted and now - (checked_at or 0) < grid.config.settings.autofix_delay:
            continue
        try:
            capacity = grid.backend(cluster_id).capacity()
        except Exception as error:  # any backend failure must not stop the other clusters
            if blacklisted:
                with database.write(grid.db) as conn:
                    stored_clusters.mark_checked(conn, cluster_id, now)
            else:
                ctx.cluster_failed(cluster_id, "capacity", error)
            continue
        if blacklisted or stored.open_on_cluster(grid.db.conn, cluster_id, CONNECTION_CODES):
            with database.write(grid.db) as conn:
                if blacklisted:
                    close(conn, *stored.fixable(event_id=event_id))
                    log.warning("cluster %s answers again: blacklist lifted", name)
                close_cluster_problems(conn, cluster_id)
        ctx.capacities[cluster_id] = capacity
    return ctx
