"""Nikita on a real local pool: the kill reason decides the fate of the killed job's task."""

from __future__ import annotations

import time
from pathlib import Path

from test_submit import grid, submit  # noqa: F401  (grid is a fixture)

from cigri.cycle import run_cycle
from cigri.grid import Grid
from cigri.states import JobState, KillReason, TaskState


def _jobs(grid: Grid, campaign_id: int) -> list[tuple[int, int, str]]:
    return grid.db.execute("SELECT id, task_id, state FROM jobs WHERE campaign_id = ? ORDER BY id",
                           [campaign_id]).fetchall()


def _cycle_until(grid: Grid, done: object, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        run_cycle(grid)
        time.sleep(0.1)


def test_a_users_kill_cancels_the_task_a_preemption_or_flood_kill_requeues_it(grid: Grid, tmp_path: Path) -> None:  # noqa: F811
    params = tmp_path / "params"
    params.write_text("30\n31\n32\n")
    campaign_id, _ = submit(grid, {"name": "kills", "exec_file": "/bin/sleep", "param_file": str(params),
                                   "clusters": {"local": {}}, "exec_directory": str(tmp_path)}, tmp_path)
    sent = (JobState.WAITING, JobState.RUNNING)  # on the machine's cores or queued in the pool
    _cycle_until(grid, lambda: [s in sent for _, _, s in _jobs(grid, campaign_id)] == [True] * 3, "three jobs sent")
    (user_job, user_task, _), (preempt_job, preempt_task, _), (flood_job, flood_task, _) = _jobs(grid, campaign_id)
    grid.db.conn.executemany("UPDATE jobs SET kill_reason = ? WHERE id = ?",
                        [(KillReason.USER, user_job), (KillReason.PREEMPT, preempt_job), (KillReason.FLOOD, flood_job)])
    run_cycle(grid)  # nikita kills at the end of the cycle
    states = {job: state for job, _, state in _jobs(grid, campaign_id)}
    assert (states[user_job], states[preempt_job], states[flood_job]) == \
        (JobState.CANCELLED, JobState.PREEMPTED, JobState.PREEMPTED)
    run_cycle(grid)  # colombo decides; the requeued tasks are sent again
    tasks = dict(grid.db.execute("SELECT id, state FROM tasks WHERE campaign_id = ?", [campaign_id]).fetchall())
    assert tasks[user_task] == TaskState.CANCELLED
    attempts = dict(grid.db.execute("SELECT id, attempts FROM tasks WHERE campaign_id = ?", [campaign_id]).fetchall())
    for task in (preempt_task, flood_task):
        assert tasks[task] in (TaskState.PENDING, TaskState.WAITING, TaskState.RUNNING)
        assert attempts[task] <= 1  # the killed attempt was not charged
    assert grid.db.execute("SELECT count(*) FROM jobs WHERE task_id IN (?, ?) AND state IN ('submitting', "
                           "'waiting', 'running')", [preempt_task, flood_task]).fetchone()[0] == 2
    messages = dict(grid.db.execute("SELECT signature, message FROM events WHERE code = 'BEST_EFFORT_KILL' "
                                    "AND campaign_id = ?", [campaign_id]).fetchall())
    assert messages == {"preempt": "job preempted by cigri's fair share; task resubmitted",
                        "flood": "job killed by flood control: it waited too long or beyond the tap; task resubmitted"}
