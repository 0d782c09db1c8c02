"""What one scheduling cycle knows about the clusters, gathered once at its start."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from cigri import db as database
from cigri.backends import Capacity
from cigri.events import close_cluster_events, open_event
from cigri.grid import Grid

log = logging.getLogger("cigri.cycle")


@dataclass
class CycleContext:
    grid: Grid
    capacities: dict[int, Capacity] = field(default_factory=dict)  # usable clusters only
    options: dict[int, dict[str, Any]] = field(default_factory=dict)

    def cluster_options(self, cluster_id: int) -> dict[str, Any]:
        return self.options.get(cluster_id, {})

    def cluster_failed(self, cluster_id: int, what: str, error: Exception) -> None:
        """A cluster call failed: the cluster is left out of this cycle and an event says why."""
        log.warning("cluster %s: %s failed: %s", cluster_id, what, error)
        self.capacities.pop(cluster_id, None)
        with database.write(self.grid.db) as conn:
            open_event(conn, "cluster", "CLUSTER_UNREACHABLE", f"{what} failed: {error}", cluster_id=cluster_id)


def gather(grid: Grid) -> CycleContext:
    """Ask every non-blacklisted cluster for its capacity."""
    ctx = CycleContext(grid)
    for cluster_id, options, blacklisted in grid.db.execute("SELECT id, options, blacklisted FROM clusters"):
        ctx.options[cluster_id] = json.loads(options)
        if blacklisted:
            continue
        try:
            ctx.capacities[cluster_id] = grid.backend(cluster_id).capacity()
        except Exception as error:  # any backend failure must not stop the other clusters
            ctx.cluster_failed(cluster_id, "capacity", error)
            continue
        with database.write(grid.db) as conn:
            close_cluster_events(conn, cluster_id, "CLUSTER_UNREACHABLE")
    return ctx
