"""A cycle must cost the same after a million ended jobs as after a thousand: the jobs and
tasks that ended are history, and no statement a cycle runs may walk them. A query plan can
look right and still do it (a SEARCH of ``jobs_active`` for ``state = 'terminated'`` reads
every ended job), so this counts the SQLite virtual machine's steps instead, through real
cycles in the simulator: deterministic, and independent of the machine's speed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cigri import simulate as simulation
from cigri.cycle import run_cycle
from harness import size

STEPS = 1000  # VM instructions between two calls of the progress handler
CYCLES = size(300, 600)  # simulated cycles of 30 s: 5 h in CI (CIGRI_TEST_FULL=1), 2.5 h otherwise


def test_a_cycle_costs_the_same_however_many_jobs_ended_before(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    # constant 60 s tasks on 16 cores with a 30 s cycle: every cycle, about 8 jobs end and 8
    # start, so past the predictor's one-hour window the cycles do the same work to the end;
    # and each cycle, a one-task campaign with a prologue and an epilogue is submitted, runs, ends
    costs: list[int] = []

    def counted_cycle(grid: Any) -> Any:
        steps = [0]

        def tick() -> int:
            steps[0] += 1
            return 0

        grid.db.conn.set_progress_handler(tick, STEPS)
        try:
            return run_cycle(grid)
        finally:
            grid.db.conn.set_progress_handler(None, STEPS)
            costs.append(steps[0])

    monkeypatch.setattr(simulation, "run_cycle", counted_cycle)
    report = simulation.simulate(simulation.parse_scenario({
        "seed": 1, "cycle_period": 30, "clusters": {"c1": {"cores": 16}},
        "campaigns": [{"user": "u", "tasks": 8 * CYCLES, "type": "normal",
                       "duration": {"law": "constant", "seconds": 60}},
                      *({"user": "v", "tasks": 1, "submit_hours": i / 120, "type": "normal",
                         "jdl": {"prologue": ["true"], "epilogue": ["true"]},
                         "duration": {"law": "constant", "seconds": 60}} for i in range(CYCLES))]}), tmp_path)
    assert report["finished"] and report["tasks"] == {"terminated": 9 * CYCLES}
    assert len(costs) >= CYCLES  # one cycle every 30 s, none skipped: cycle i runs at 30 i seconds
    # from 1.1 h (1,000 jobs and 130 campaigns ended), and near the end (4,000 and 600; 2,000 and 300)
    early, late = costs[135:195], costs[-100:-40]
    assert sum(late) / len(late) <= 1.05 * sum(early) / len(early), (sum(early) / len(early), sum(late) / len(late))
