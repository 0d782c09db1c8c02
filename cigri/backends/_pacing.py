"""Keep a minimum interval between two calls to the same cluster (``min_interval``)."""

from __future__ import annotations

import time


class Pacer:
    def __init__(self, min_interval: float) -> None:
        self.min_interval = min_interval
        self._last = 0.0

    def wait(self) -> None:
        delay = self._last + self.min_interval - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        self._last = time.monotonic()
