"""A site's cap on the jobs cigri's account may have on a cluster (Slurm's ``MaxSubmitJobs``),
and the admin's ``max_jobs``: nothing fails, the cluster is used up to its cap, and the cap a
refusal reveals is learned exactly, so the cluster is not refused again every cycle.

These run full cycles in the simulator, whose ``submit_limit`` refuses a batch whole as Slurm
refuses an array; the real Slurm refusal is in ``tests/test_live_site_limits.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cigri import simulate as simulation
from cigri.backends.sim import SimBackend
from cigri.backends.slurm import commands
from cigri.cycle import run_cycle
from cigri.errors import BackendError, SubmissionRefused, SubmitLimitReached


def _held(grid: Any) -> dict[str, int]:
    return dict(grid.db.execute(
        "SELECT c.name, count(j.id) FROM clusters c LEFT JOIN jobs j ON j.cluster_id = c.id "
        "AND j.state IN ('waiting', 'running') GROUP BY c.name"))


def _observe(monkeypatch: pytest.MonkeyPatch) -> tuple[list[dict[str, Any]], list[int]]:
    """Record, after each cycle, the jobs cigri holds per cluster, what it learned and the tasks'
    attempts; and every batch size a sim cluster refused for its limit."""
    cycles: list[dict[str, Any]] = []
    refused: list[int] = []

    def observed_cycle(grid: Any) -> Any:
        result = run_cycle(grid)
        cycles.append({"held": _held(grid),
                       "learned": dict(grid.db.execute("SELECT name, submit_limit FROM clusters")),
                       "attempts": grid.db.execute("SELECT max(attempts) FROM tasks").fetchone()[0],
                       "events": dict(grid.db.execute("SELECT code, sum(count) FROM events GROUP BY code"))})
        return result

    submit = SimBackend.submit

    def counted_submit(self: SimBackend, specs: list[Any]) -> dict[str, str]:
        try:
            return submit(self, specs)
        except SubmitLimitReached:
            refused.append(len(specs))
            raise

    monkeypatch.setattr(simulation, "run_cycle", observed_cycle)
    monkeypatch.setattr(SimBackend, "submit", counted_submit)
    return cycles, refused


def test_a_site_submit_limit_fails_nothing_and_is_learned_exactly(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    # 20 free cores, but the site lets cigri's account have 7 jobs: the second cycle's batch of
    # about 17 is refused whole, halved until what fits (4) is sent, and one more job refused
    cycles, refused = _observe(monkeypatch)
    report = simulation.simulate(simulation.parse_scenario({
        "seed": 1, "cycle_period": 30, "clusters": {"c1": {"cores": 20, "submit_limit": 7}},
        "campaigns": [{"user": "u", "tasks": 60, "type": "normal", "duration": {"law": "constant", "seconds": 120}}]}),
        tmp_path)
    assert report["tasks"] == {"terminated": 60}
    assert cycles[-1]["attempts"] == 1  # a job that did not fit was no attempt
    assert max(c["held"]["c1"] for c in cycles) == 7  # the cap was used, never passed
    assert cycles[1]["learned"]["c1"] == 7 and cycles[1]["held"]["c1"] == 7
    # one cycle of halving, then never refused again: the learned limit bounds the next cycles
    assert refused and refused[-1] == 1 and len(refused) <= 6, refused
    assert cycles[-1]["events"].get("SUBMIT_LIMIT") == 1
    assert "SUBMISSION_ERROR" not in cycles[-1]["events"]


def test_max_jobs_bounds_a_cluster_and_fair_share_sends_the_rest_elsewhere(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    cycles, refused = _observe(monkeypatch)
    report = simulation.simulate(simulation.parse_scenario({
        "seed": 1, "cycle_period": 30, "max_hours": 0.5,
        "clusters": {"c1": {"cores": 20, "max_jobs": 5}, "c2": {"cores": 20}},
        "campaigns": [{"user": "u", "tasks": 400, "type": "normal", "duration": {"law": "constant", "seconds": 600}}]}),
        tmp_path)
    assert max(c["held"]["c1"] for c in cycles) == 5
    assert all(c["held"]["c1"] == 5 for c in cycles[2:])
    assert all(c["held"]["c2"] >= 20 for c in cycles[2:])  # the rest goes where there is room
    assert report["timeline"][-1]["busy"] == 25
    assert not refused and "SUBMIT_LIMIT" not in cycles[-1]["events"]


@pytest.mark.parametrize(("stderr", "meaning"), [
    # sbatch's two lines on a site with a per-user submit cap (the reason, then the policy)
    ("sbatch: error: QOSMaxSubmitJobPerUserLimit\nsbatch: error: Batch job submission failed: Job violates "
     "accounting/QOS policy (job submit limit, user's size and/or time limits)\n", SubmitLimitReached),
    ("sbatch: error: AssocMaxSubmitJobLimit\nsbatch: error: Batch job submission failed: Job violates "
     "accounting/QOS policy (job submit limit, user's size and/or time limits)\n", SubmitLimitReached),
    ("sbatch: error: AssocGrpSubmitJobsLimit\nsbatch: error: Batch job submission failed: Job violates "
     "accounting/QOS policy (job submit limit, user's size and/or time limits)\n", SubmitLimitReached),
    # the same policy line for a job that can never run there: a refusal
    ("sbatch: error: QOSMaxWallDurationPerJobLimit\nsbatch: error: Batch job submission failed: Job violates "
     "accounting/QOS policy (job submit limit, user's size and/or time limits)\n", SubmissionRefused),
    ("sbatch: error: Batch job submission failed: Invalid partition name specified\n", SubmissionRefused),
    ("sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)\n",
     BackendError),
])
def test_sbatch_words_say_whether_to_wait_retry_or_give_up(stderr: str, meaning: type) -> None:
    assert commands.submit_error(stderr) is meaning
