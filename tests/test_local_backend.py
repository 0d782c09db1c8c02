"""The local backend with real processes: a real pool daemon, real jobs, real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cigri.backends import JobSpec, RemoteJob, RemoteState
from cigri.backends.local import LocalBackend
from cigri.backends.local.pool import COMMAND, alive, try_lock

ENDED = (RemoteState.COMPLETED, RemoteState.TIMEOUT, RemoteState.CANCELLED)


def wait_for(predicate: Callable[[], object], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {predicate}")
        time.sleep(0.02)


def pool_pid(backend: LocalBackend) -> int | None:
    """The live pool's pid (from its lock file), None when no pool holds the lock."""
    fd = os.open(backend.spool.lock, os.O_RDWR | os.O_CREAT)
    try:
        if try_lock(fd):
            return None
        lock = Path(backend.spool.lock)  # the pool writes its pid once it holds the lock
        wait_for(lambda: lock.read_text().strip(), 5)
        return int(lock.read_text())
    finally:
        os.close(fd)


def job(key: str, directory: Path, *argv: str, walltime: int = 60) -> JobSpec:
    return JobSpec(key=key, batch="b", name=f"job-{key}", argv=argv, directory=str(directory),
                   walltime_seconds=walltime, resources="")


def state(backend: LocalBackend, remote_id: str) -> RemoteJob:
    return backend.poll([remote_id])[remote_id]


def wait_state(backend: LocalBackend, remote_id: str, *states: RemoteState,
               timeout: float = 10.0) -> RemoteJob:
    wait_for(lambda: state(backend, remote_id).state in states, timeout)
    return state(backend, remote_id)


@pytest.fixture
def make_backend(tmp_path: Path) -> Iterator[Callable[[int], LocalBackend]]:
    backends: list[LocalBackend] = []

    def make(slots: int = 2) -> LocalBackend:
        backend = LocalBackend("test", {"slots": slots, "max_waiting": 5}, str(tmp_path / "spool"))
        backends.append(backend)
        return backend

    yield make
    for backend in backends:
        pid = pool_pid(backend)
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
        backend.close()


def test_job_runs_in_its_directory(make_backend: Callable[[int], LocalBackend], tmp_path: Path) -> None:
    backend = make_backend(2)
    work = tmp_path / "work" / "sub"  # does not exist yet: the pool creates it
    spec = job("1", work, "sh", "-c", "echo hello > out.txt; echo to-stdout; echo to-stderr >&2")
    assert backend.submit([spec]) == {"1": "1"}
    done = wait_state(backend, "1", *ENDED)
    assert (done.state, done.exit_code) == (RemoteState.COMPLETED, 0)
    assert done.started_at is not None and done.finished_at is not None
    assert done.started_at <= done.finished_at + 0.01
    assert done.node
    assert (work / "out.txt").read_text() == "hello\n"
    assert backend.output_tail("1", "stdout", 5) == "to-stdout\n"
    assert backend.output_tail("1", "stderr", 5) == "to-stderr\n"
    assert oct(os.stat(backend.spool.root).st_mode & 0o777) == oct(0o700)


def test_array_never_exceeds_slots(make_backend: Callable[[int], LocalBackend], tmp_path: Path) -> None:
    backend = make_backend(2)
    log = tmp_path / "events"
    script = f'echo "s $(date +%s.%N)" >> {log}; sleep 0.1; echo "e $(date +%s.%N)" >> {log}'
    ids = backend.submit([job(str(i), tmp_path, "sh", "-c", script) for i in range(20)])
    capacities = []
    while not all(j.state in ENDED for j in backend.poll(list(ids.values())).values()):
        capacities.append(backend.capacity())
        time.sleep(0.02)
    jobs = backend.poll(list(ids.values())).values()
    assert {(j.state, j.exit_code) for j in jobs} == {(RemoteState.COMPLETED, 0)}
    assert all(c.total_slots == 2 and c.free_slots >= 0 for c in capacities)
    assert any(c.queued_jobs > 0 for c in capacities)
    # Ends sort before starts at equal times: a job's end is logged before its slot frees.
    events = sorted((float(t), kind == "s") for kind, t in (line.split() for line in log.read_text().splitlines()))
    assert len(events) == 40
    running = peak = 0
    for _, is_start in events:
        running += 1 if is_start else -1
        peak = max(peak, running)
    assert peak == 2


def test_exit_codes(make_backend: Callable[[int], LocalBackend], tmp_path: Path) -> None:
    backend = make_backend(2)
    backend.submit([job("3", tmp_path, "sh", "-c", "exit 3"), job("nx", tmp_path, "/no/such/program")])
    assert wait_state(backend, "3", *ENDED).exit_code == 3
    missing = wait_state(backend, "nx", *ENDED)
    assert (missing.state, missing.exit_code) == (RemoteState.COMPLETED, 127)


def test_unusable_directory_fails_with_127(make_backend: Callable[[int], LocalBackend], tmp_path: Path) -> None:
    backend = make_backend(2)
    (tmp_path / "file").write_text("")
    backend.submit([job("1", tmp_path / "file" / "sub", "true")])
    done = wait_state(backend, "1", *ENDED)
    assert (done.state, done.exit_code) == (RemoteState.COMPLETED, 127)
    assert "cannot start" in backend.output_tail("1", "stderr", 1)


def test_walltime_kills_the_job(make_backend: Callable[[int], LocalBackend], tmp_path: Path) -> None:
    backend = make_backend(2)
    backend.submit([job("1", tmp_path, "sh", "-c", "echo $$ > pid; exec sleep 30", walltime=1)])
    wait_for(lambda: (tmp_path / "pid").exists() and (tmp_path / "pid").read_text().strip())
    pid = int((tmp_path / "pid").read_text())
    done = wait_state(backend, "1", *ENDED, timeout=6)
    assert (done.state, done.exit_code) == (RemoteState.TIMEOUT, None)
    wait_for(lambda: not alive(pid), timeout=4)


def test_cancel_running_job(make_backend: Callable[[int], LocalBackend], tmp_path: Path) -> None:
    backend = make_backend(2)
    # A TERM-proof job: only the SIGKILL after the grace period ends it.
    script = "trap '' TERM; echo $$ > pid; while :; do sleep 0.1; done"
    backend.submit([job("1", tmp_path, "sh", "-c", script)])
    wait_for(lambda: (tmp_path / "pid").exists() and (tmp_path / "pid").read_text().strip())
    pid = int((tmp_path / "pid").read_text())
    assert state(backend, "1").state == RemoteState.RUNNING
    started = time.monotonic()
    backend.cancel(["1"])
    assert time.monotonic() - started < 1, "cancel must not wait for the kill"
    assert wait_state(backend, "1", *ENDED).state == RemoteState.CANCELLED
    wait_for(lambda: not alive(pid), timeout=5)
    wait_for(lambda: backend.capacity().free_slots == 2)
    backend.cancel(["1", "unknown"])  # ended and unknown ids are ignored
    assert state(backend, "1").state == RemoteState.CANCELLED


def test_cancel_queued_job(make_backend: Callable[[int], LocalBackend], tmp_path: Path) -> None:
    backend = make_backend(1)
    backend.submit([job("1", tmp_path, "sleep", "30"), job("2", tmp_path, "touch", "ran")])
    wait_state(backend, "1", RemoteState.RUNNING)
    assert state(backend, "2").state == RemoteState.QUEUED
    assert backend.capacity().free_slots == 0
    backend.cancel(["2"])
    assert wait_state(backend, "2", *ENDED).state == RemoteState.CANCELLED
    backend.cancel(["1"])
    assert wait_state(backend, "1", *ENDED).state == RemoteState.CANCELLED
    assert not (tmp_path / "ran").exists()


def test_arguments_arrive_literally(make_backend: Callable[[int], LocalBackend], tmp_path: Path) -> None:
    backend = make_backend(2)
    args = ("a;b", "$(touch pwned)", "`touch pwned`", "'\"", "*", "line1\nline2", "-n", "--x",
            "", " spaced  out ", "$HOME", "\\", "> pwned", "| touch pwned", "&& touch pwned")
    printer = "import sys; sys.stdout.write('\\0'.join(sys.argv[1:]))"
    backend.submit([job("1", tmp_path, sys.executable, "-c", printer, *args)])
    assert wait_state(backend, "1", *ENDED).exit_code == 0
    out = Path(backend.spool.job("1", "stdout")).read_text()
    assert tuple(out.split("\0")) == args
    assert not list(tmp_path.rglob("pwned"))
    assert not list(Path("/").glob("pwned"))


def test_submit_is_idempotent(make_backend: Callable[[int], LocalBackend], tmp_path: Path) -> None:
    backend = make_backend(2)
    spec = job("42", tmp_path, "sh", "-c", "echo run >> runs")
    assert backend.submit([spec, spec]) == {"42": "42"}
    assert backend.submit([spec]) == {"42": "42"}
    wait_state(backend, "42", *ENDED)
    assert backend.submit([spec]) == {"42": "42"}
    time.sleep(0.3)
    assert (tmp_path / "runs").read_text() == "run\n"


def test_jobs_survive_a_killed_pool(make_backend: Callable[[int], LocalBackend], tmp_path: Path) -> None:
    backend = make_backend(2)
    backend.submit([job("1", tmp_path, "sh", "-c", "sleep 2; echo done > done")])
    wait_state(backend, "1", RemoteState.RUNNING)
    first = pool_pid(backend)
    assert first is not None
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: not alive(first))
    done = wait_state(backend, "1", *ENDED)  # the poll restarts the pool
    assert (done.state, done.exit_code) == (RemoteState.COMPLETED, 0)
    assert (tmp_path / "done").read_text() == "done\n"
    second = pool_pid(backend)
    assert second is not None and second != first
    wait_for(lambda: backend.capacity().free_slots == 2)  # the new pool adopted and settled it


def test_one_pool_per_spool(make_backend: Callable[[int], LocalBackend], tmp_path: Path) -> None:
    backend = make_backend(2)
    backend.submit([job("1", tmp_path, "true")])
    first = pool_pid(backend)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    subprocess.run([sys.executable, "-c", COMMAND, backend.spool.root, "2"], env=env, check=True, timeout=10)
    time.sleep(0.5)
    assert pool_pid(backend) == first


def test_output_tail(make_backend: Callable[[int], LocalBackend], tmp_path: Path) -> None:
    backend = make_backend(2)
    backend.submit([job("1", tmp_path, "seq", "100000")])
    wait_state(backend, "1", *ENDED)
    assert backend.output_tail("1", "stdout", 3) == "99998\n99999\n100000\n"
    assert backend.output_tail("1", "stdout", 0) == ""
    assert backend.output_tail("1", "stderr", 3) == ""
    assert backend.output_tail("nope", "stdout", 3) == ""


def test_unknown_ids(make_backend: Callable[[int], LocalBackend]) -> None:
    backend = make_backend(2)
    jobs = backend.poll(["nope", "../etc", ""])
    assert {j.state for j in jobs.values()} == {RemoteState.UNKNOWN}


def test_exit_status_survives_a_killed_pool(make_backend: Callable[[int], LocalBackend], tmp_path: Path) -> None:
    """Jobs are the pool's children; once it is gone its keeper reaps them and keeps their status."""
    backend = make_backend(2)
    backend.submit([job("1", tmp_path, "sh", "-c", "sleep 1; echo bye >&2; exit 7")])
    wait_state(backend, "1", RemoteState.RUNNING)
    first = pool_pid(backend)
    assert first is not None
    os.kill(first, signal.SIGKILL)
    wait_for(lambda: not alive(first))
    done = wait_state(backend, "1", *ENDED)
    assert (done.state, done.exit_code) == (RemoteState.COMPLETED, 7)
    assert backend.output_tail("1", "stderr", 1) == "bye\n"


def test_a_job_costs_its_directory_and_two_files(make_backend: Callable[[int], LocalBackend], tmp_path: Path) -> None:
    backend = make_backend(2)
    backend.submit([job(str(i), tmp_path, "true") for i in range(5)])
    for i in range(5):
        wait_state(backend, str(i), *ENDED)
    assert sorted(os.listdir(backend.spool.jobs)) == [str(i) for i in range(5)]
    assert {tuple(sorted(os.listdir(backend.spool.job(str(i))))) for i in range(5)} == {("stderr", "stdout")}


def test_many_short_jobs_all_complete_once(make_backend: Callable[[int], LocalBackend], tmp_path: Path) -> None:
    """Batches of starts and ends recorded per loop: none lost, none run twice."""
    backend = make_backend(2)
    ids = backend.submit([job(str(i), tmp_path, "sh", "-c", f"echo {i} >> runs") for i in range(200)])
    wait_for(lambda: all(j.state in ENDED for j in backend.poll(list(ids)).values()), timeout=60)
    assert {(j.state, j.exit_code) for j in backend.poll(list(ids)).values()} == {(RemoteState.COMPLETED, 0)}
    assert sorted(int(n) for n in (tmp_path / "runs").read_text().split()) == list(range(200))
