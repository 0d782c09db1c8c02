"""Which server runs the cycles, when several serve one PostgreSQL store.

Every server serves the API; the cycles run in one at a time, the holder of a lease in the
store (:mod:`cigri.db.leader`). It claims the lease before each cycle and renews it with every
write the cycle makes; a server that was frozen past the lease wakes up fenced: its epoch is
no longer the store's, and its writes are refused. Another takes over within the lease and one
cycle period. On SQLite one host holds the store, and its daemon lock (:mod:`cigri.daemon`)
already makes one process the driver: the lease is not used.
"""

from __future__ import annotations

import logging
import os
import socket

from cigri import db as database
from cigri.db import leader
from cigri.grid import Grid

log = logging.getLogger("cigri.leadership")


class Leadership:
    """This process's claim on the cycles of ``grid``."""

    def __init__(self, grid: Grid) -> None:
        self.grid = grid
        self.lease = grid.config.settings.leader_lease
        self.holder = f"{socket.gethostname()}:{os.getpid()}"
        self.epoch: int | None = None

    @property
    def shared(self) -> bool:
        """Several servers may drive this store: it is PostgreSQL's."""
        return bool(self.grid.config.database.url)

    def lead(self) -> bool:
        """Whether to run a cycle now: claim (or keep) the lease, and fence the grid's writes by its epoch."""
        if not self.shared:
            return True
        store = self.grid.db
        store.fence = None  # type: ignore[attr-defined]  # the claim itself is not fenced
        with database.write(store) as conn:
            epoch = leader.claim(conn, self.holder, self.lease)
        if epoch != self.epoch:
            if epoch is None:
                log.warning("lost the lead on the cycles (epoch %s): another server runs them", self.epoch)
            else:
                log.info("runs the cycles (epoch %s, lease %ss)", epoch, self.lease)
        self.epoch = epoch
        store.fence = None if epoch is None else (epoch, self.lease)  # type: ignore[attr-defined]
        return epoch is not None

    def release(self) -> None:
        """Give the lease up (a server stopping), so that another takes over at once."""
        if self.shared and self.epoch is not None:
            self.grid.db.fence = None  # type: ignore[attr-defined]
            with database.write(self.grid.db) as conn:
                leader.release(conn, self.epoch)
            log.info("gave up the lead on the cycles (epoch %s)", self.epoch)
            self.epoch = None
