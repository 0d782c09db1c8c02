"""Gangs on the local pool: real subprocesses, started all together or not at all.

Armada: "all jobs in the gang are scheduled onto the same cluster at the same time or not at
all". The pool starts a gang's members together once it has a slot for each, first come,
first served: nothing queued behind a waiting gang overtakes it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from test_local_backend import ENDED, job, make_backend, wait_for  # noqa: F401 (make_backend is a fixture)

from cigri.backends.local import LocalBackend
from cigri.errors import SubmissionRefused


def test_a_gang_waits_for_a_slot_per_member_then_starts_whole(make_backend: Callable[[int], LocalBackend],  # noqa: F811
                                                               tmp_path: Path) -> None:
    """4 slots: 3 single jobs of 2 s hold 3; a gang of 4 queued behind them waits for all 4 slots
    (one free slot is not a start), then its members start together; a single job queued after
    the gang starts only once the gang has."""
    backend = make_backend(4)
    singles = [job(f"s{i}", tmp_path, "sleep", "2") for i in range(3)]
    gang = [replace(job(f"g{i}", tmp_path, "sleep", "1"), group="g0", gang=True) for i in range(4)]
    after = [job("after", tmp_path, "sleep", "0")]
    ids = backend.submit(singles + gang + after)
    wait_for(lambda: all(j.state in ENDED for j in backend.poll(list(ids.values())).values()), timeout=30)
    jobs = backend.poll(list(ids.values()))
    single_end = max(jobs[s.key].finished_at or 0 for s in singles)
    gang_starts = [jobs[g.key].started_at or 0 for g in gang]
    assert min(gang_starts) >= single_end - 0.05  # not one member early in the one free slot
    assert max(gang_starts) - min(gang_starts) < 0.5
    assert (jobs["after"].started_at or 0) >= min(gang_starts)


def test_a_gang_larger_than_the_pool_is_refused(make_backend: Callable[[int], LocalBackend],  # noqa: F811
                                                tmp_path: Path) -> None:
    backend = make_backend(2)
    with pytest.raises(SubmissionRefused, match="a gang of 3 needs more than its 2 slots"):
        backend.submit([replace(job(f"g{i}", tmp_path, "true"), group="g", gang=True) for i in range(3)])
