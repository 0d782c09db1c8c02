"""One suite, every backend: what the core relies on, checked against real resource managers.

Parametrized by ``backend_targets.NAMES``: the local pool, and each cluster of the clusters file
(Slurm over SSH and REST, OAR over SSH and REST, Grid Engine over SSH). Jobs write into a fresh directory of the
shared exec directory, which this process reads back.
"""

from __future__ import annotations

import dataclasses
import json
import os
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cigri.backends import JobSpec, RemoteJob, RemoteState, identity, oar
from cigri.errors import CigriError, SubmissionRefused

from backend_targets import (BEST_EFFORT_NAMES, FORGETTING_NAMES, MEMORY_NAMES, OAR_NAMES, REMOTE, Target, Targets,
                             clusters_file)
from harness import REAL_CLUSTERS, on_systems, wait_for
from unix_users import NAMES as USERS

pytestmark = REAL_CLUSTERS

ENDED = (RemoteState.COMPLETED, RemoteState.TIMEOUT, RemoteState.CANCELLED, RemoteState.PREEMPTED)
HOSTILE = ("; touch pwned-semicolon", "$(touch pwned-subst)", "`touch pwned-backtick`", "it's \"quoted\"",
           "two\nlines", "*", "?", "[a-z]*", "-n", "--help", "", " spaced  out ", "\\", "$HOME", "${PATH}",
           "a|b&c>d<e", "~", "#not a comment", "é ü 日本")


def spec(key: str, directory: Path, *argv: str, walltime: int = 600, resources: str = "core=1",
         batch: str | None = None, environment: dict[str, str] | None = None, best_effort: bool = False) -> JobSpec:
    return JobSpec(key=key, batch=batch or key, name=f"conformance-{key}", argv=argv, directory=str(directory),
                   walltime_seconds=walltime, resources=resources, environment=environment or {},
                   best_effort=best_effort)


def token() -> str:
    return secrets.token_hex(4)


def wait(target: Target, ids: list[str], done: Callable[[RemoteJob], bool], timeout: float = 90) -> dict[str, RemoteJob]:
    deadline = time.monotonic() + timeout
    while True:
        jobs = target.backend.poll(ids)
        if all(done(job) for job in jobs.values()):
            return jobs
        if time.monotonic() > deadline:
            raise AssertionError(f"{target.name}: still waiting after {timeout}s: {list(jobs.values())}")
        time.sleep(0.5 if target.remote else 0.05)


def ended(job: RemoteJob) -> bool:
    return job.state in ENDED


@on_systems()
def test_clusters_file_is_there_in_ci() -> None:
    if os.environ.get("CI") == "true" and clusters_file() is None:
        pytest.fail("CI=true but no clusters file: run tests/clusters/up.sh or set CIGRI_TEST_CLUSTERS")


def test_one_task_runs_and_its_output_is_read(cluster: Target) -> None:
    key = token()
    remote_id = cluster.submit([spec(key, cluster.workdir("one"), "/bin/echo", "hello from cigri")])[key]
    job = wait(cluster, [remote_id], ended)[remote_id]
    assert (job.state, job.exit_code) == (RemoteState.COMPLETED, 0)
    expected = "hello from cigri\n" if cluster.reads_output else ""
    assert cluster.backend.output_tail(remote_id, "stdout", 5) == expected


def test_an_array_of_five_in_one_call(cluster: Target) -> None:
    batch, directory = token(), cluster.workdir("array")
    specs = [spec(f"{batch}-{i}", directory, "/bin/sh", "-c", 'echo "task $0"; exit "$0"', str(i), batch=batch)
             for i in range(5)]
    calls = getattr(cluster.backend, "calls", Counter())
    before = Counter(calls)
    ids = cluster.submit(specs)
    assert list(ids) == [s.key for s in specs] and len(set(ids.values())) == 5
    jobs = wait(cluster, list(ids.values()), ended)
    assert [(jobs[ids[s.key]].state, jobs[ids[s.key]].exit_code) for s in specs] == \
        [(RemoteState.COMPLETED, i) for i in range(5)]
    if calls:  # the backends that count their remote calls: one per operation, whatever the batch size
        assert calls["submit"] - before["submit"] == 1
        polls = calls["poll"]
        cluster.backend.poll(list(ids.values()))
        assert calls["poll"] == polls + 1


def test_unknown_ids_are_unknown(cluster: Target) -> None:
    ids = ["987654321", "987654321_0", "no-such-job"]
    assert {i: j.state for i, j in cluster.backend.poll(ids).items()} == dict.fromkeys(ids, RemoteState.UNKNOWN)
    cluster.backend.cancel(ids)


def test_cancel_a_running_job(cluster: Target) -> None:
    key = token()
    remote_id = cluster.submit([spec(key, cluster.workdir("cancel"), "/bin/sleep", "300")])[key]
    wait(cluster, [remote_id], lambda j: j.state == RemoteState.RUNNING)
    cluster.backend.cancel([remote_id])
    job = wait(cluster, [remote_id], ended, timeout=60)[remote_id]
    if cluster.kind == "oar":  # sleep ends on cigri's SIGTERM before oardel: OAR says it ended by itself
        assert (job.state, job.exit_code) == (RemoteState.COMPLETED, 143)
    else:
        assert job.state == RemoteState.CANCELLED


def test_a_cancelled_job_gets_sigterm_before_the_kill(cluster: Target) -> None:
    """Nikita's kills (fair share, flood control, losing replicas) leave a task time to clean up:
    the cluster sends SIGTERM and kills only after its grace period."""
    key, directory = token(), cluster.workdir("grace")
    script = ('trap \'echo "$(date +%s.%N)" > "$0/term"; sleep 1; echo done > "$0/cleaned"; exit 143\' TERM; '
              'touch "$0/started"; while :; do sleep 0.2; done')
    remote_id = cluster.submit([spec(key, directory, "/bin/sh", "-c", script, str(directory))])[key]
    wait(cluster, [remote_id], lambda j: (directory / "started").exists() or ended(j))
    cluster.backend.cancel([remote_id])
    wait(cluster, [remote_id], ended, timeout=60)
    deadline = time.monotonic() + 10
    while not (directory / "cleaned").exists() and time.monotonic() < deadline:
        time.sleep(0.2)  # a shared directory may show the file a little after the job's end
    assert (directory / "term").exists(), f"{cluster.name}: the job got no SIGTERM"
    assert (directory / "cleaned").read_text() == "done\n", f"{cluster.name}: killed within a second of SIGTERM"


def test_capacity(cluster: Target) -> None:
    capacity = cluster.backend.capacity()
    assert capacity.total_slots >= (8 if cluster.remote else 1)
    assert 0 <= capacity.free_slots <= capacity.total_slots
    assert capacity.queued_jobs >= 0
    # Slurm says how much memory no job holds (the test nodes have 8000 MiB); the others do not
    assert (capacity.free_memory_mb is not None) == (cluster.kind == "slurm")
    assert capacity.free_memory_mb is None or 0 < capacity.free_memory_mb <= 8000 * capacity.total_slots
    # one node's size: tests/clusters/up.sh gives each cluster one node of 8 cores (Slurm: and
    # 8000 MiB; OAR and Grid Engine do not say), the local pool is one node of its slots
    node = {"slurm": (8, 8000), "oar": (8, None), "gridengine": (8, None),
            "local": (cluster.options.get("slots"), None)}[cluster.kind]
    assert (capacity.node_cores, capacity.node_memory_mb) == node


@pytest.mark.parametrize("target", [c.name for c in REMOTE if c.backend == "slurm"], indirect=True)
def test_slurm_counts_a_running_jobs_memory_as_held_only_where_it_allocates_memory(cluster: Target) -> None:
    """slurm-b allocates memory (CR_Core_Memory), slurm-a does not (CR_Core; tests/clusters/up.sh):
    the capacity must tell them apart, or cigri counts its running jobs' memory twice."""
    key = token()
    job = dataclasses.replace(spec(key, cluster.workdir("held"), "/bin/sleep", "60"), memory_mb=2048)
    remote_id = cluster.submit([job])[key]
    try:
        wait(cluster, [remote_id], lambda j: j.state != RemoteState.QUEUED)
        capacity = cluster.backend.capacity()
    finally:
        cluster.backend.cancel([remote_id])
    assert capacity.free_memory_mb is not None and capacity.free_memory_mb + capacity.allocated_memory_mb == 8000
    if cluster.name.startswith("slurm-b"):
        assert capacity.allocated_memory_mb >= 2048
    else:
        assert capacity.allocated_memory_mb == 0


@pytest.mark.parametrize("target", MEMORY_NAMES, indirect=True)
def test_the_memory_asked_is_reserved(cluster: Target) -> None:
    """The JDL's memory reaches Slurm (--mem) and Grid Engine (its memory_complex): within a
    node's 8000 MiB the job runs, beyond it the cluster refuses it at submission (it could never
    run)."""
    key, directory = token(), cluster.workdir("memory")
    ok = dataclasses.replace(spec(key, directory, "/bin/sh", "-c", "echo fits > fits"), memory_mb=2048)
    remote_id = cluster.submit([ok])[key]
    assert wait(cluster, [remote_id], ended)[remote_id].state == RemoteState.COMPLETED
    assert (directory / "fits").read_text() == "fits\n"
    big = token()
    with pytest.raises(SubmissionRefused, match="memory|configuration|never run|no suitable queues"):
        cluster.submit([dataclasses.replace(spec(big, directory, "/bin/true"), memory_mb=64 * 1024)])


def test_stderr_tail_of_a_failing_task(cluster: Target) -> None:
    key = token()
    remote_id = cluster.submit([spec(key, cluster.workdir("fail"), "/bin/sh", "-c",
                                     "echo first >&2; echo oops >&2; exit 3")])[key]
    job = wait(cluster, [remote_id], ended)[remote_id]
    assert (job.state, job.exit_code) == (RemoteState.COMPLETED, 3)
    assert cluster.backend.output_tail(remote_id, "stderr", 1) == ("oops\n" if cluster.reads_output else "")


def test_shell_metacharacters_arrive_literally(cluster: Target) -> None:
    key = token()
    directory = cluster.workdir("meta dir 'q' $(x) ;")
    program = 'printf "%s\\0" "$@" > argv.bin; printf "%s" "$HOSTILE" > env.bin'
    remote_id = cluster.submit([spec(key, directory, "/bin/sh", "-c", program, "sh", *HOSTILE,
                                     environment={"HOSTILE": "$(touch pwned-env)'\"\n`x`"})])[key]
    job = wait(cluster, [remote_id], ended)[remote_id]
    assert (job.state, job.exit_code) == (RemoteState.COMPLETED, 0)
    assert (directory / "argv.bin").read_bytes() == b"".join(w.encode() + b"\0" for w in HOSTILE)
    assert (directory / "env.bin").read_text() == "$(touch pwned-env)'\"\n`x`"
    assert not list(directory.parent.glob("**/pwned*"))


def test_characters_of_the_latin1_range_arrive_as_utf8(cluster: Target) -> None:
    """Alone in a batch (no character beyond U+00FF beside them), é and ï once reached OAR's
    REST API's jobs as Latin-1 bytes: arguments, environment and directory arrive as sent."""
    key = token()
    directory = cluster.workdir(f"répertoire-{key}")
    program = 'printf "%s\\0" "$@" > argv.bin; printf "%s" "$WORD" > env.bin'
    remote_id = cluster.submit([spec(key, directory, "/bin/sh", "-c", program, "sh", "héllo", "naïve",
                                     environment={"WORD": "déjà"})])[key]
    job = wait(cluster, [remote_id], ended)[remote_id]
    assert (job.state, job.exit_code) == (RemoteState.COMPLETED, 0)
    assert (directory / "argv.bin").read_bytes() == "héllo\0naïve\0".encode()
    assert (directory / "env.bin").read_bytes() == "déjà".encode()


@pytest.mark.slow
@pytest.mark.parametrize("field", ["properties", "project"])
def test_hostile_properties_and_project_are_refused_or_literal(cluster: Target, field: str) -> None:
    """The JDL's ``properties`` and ``project`` reach the resource manager as one literal word:
    it may refuse them, but nothing in them is ever run (no shell on the way)."""
    directory = cluster.workdir(f"hostile-{field}")
    marker = f"pwned-{field}-{token()}"
    for value in (f"; touch {marker}", f"$(touch {marker})", f"`touch {marker}`", f"x' || touch {marker} || '",
                  f"x\ntouch {marker}"):
        key = token()
        job = dataclasses.replace(spec(key, directory, "/bin/true"), **{field: value})
        try:
            remote_id = cluster.submit([job])[key]
        except CigriError:  # refused by cigri's checks or by the resource manager: fine
            continue
        try:  # a job whose literal properties match no resource may wait for ever: that is fine too
            wait(cluster, [remote_id], ended, timeout=20)
        except AssertionError:
            cluster.backend.cancel([remote_id])
    homes = [directory.parent, Path.cwd(), Path(os.path.expanduser("~gridtest")), Path.home()]
    assert not [p for home in homes if home.is_dir() for p in home.glob(f"{marker}*")]


@pytest.mark.parametrize("target", OAR_NAMES, indirect=True)
def test_oar_job_types_reach_oar_one_by_one(cluster: Target) -> None:
    """The JDL's ``cluster_job_type``: each type one ``-t`` (one element of REST's ``type``), a
    comma inside a type kept, besteffort added; a type OAR does not know is refused in its words."""
    key, directory = token(), cluster.workdir("types")
    job = dataclasses.replace(spec(key, directory, "/bin/true", best_effort=True),
                              job_types=("idempotent", "timesharing=user,*"))
    remote_id = cluster.submit([job])[key]
    assert sorted(_oar_record(cluster, remote_id)["types"]) == ["besteffort", "idempotent", "timesharing=user,*"]
    assert wait(cluster, [remote_id], ended)[remote_id].state == RemoteState.COMPLETED
    key = token()
    with pytest.raises(SubmissionRefused, match="unknown job type: bogus"):
        cluster.submit([dataclasses.replace(spec(key, directory, "/bin/true"), job_types=("bogus",))])


def _oar_record(cluster: Target, remote_id: str) -> dict[str, Any]:
    """The job as OAR itself records it, read over the backend's own transport."""
    via = cluster.backend.via  # type: ignore[attr-defined]
    if isinstance(via, oar._OverREST):
        return via._get(oar.rest.job(remote_id))  # type: ignore[no-any-return]
    return json.loads(via.run("oarstat", ["oarstat", "-J", "-j", remote_id]))[remote_id]  # type: ignore[no-any-return]


def test_resubmitting_a_batch_adopts_it(cluster: Target) -> None:
    """A batch sent again (the runner died during the first call) runs once, with the same ids."""
    batch, directory = token(), cluster.workdir("adopt")
    specs = [spec(f"{batch}-{i}", directory, "/bin/sh", "-c", 'echo ran >> "runs.$0"', str(i), batch=batch)
             for i in range(2)]
    first = cluster.submit(specs)
    assert cluster.submit(specs) == first
    wait(cluster, list(first.values()), ended)
    assert cluster.submit(specs) == first
    for i in range(2):
        assert (directory / f"runs.{i}").read_text() == "ran\n"


@pytest.mark.parametrize("target", BEST_EFFORT_NAMES, indirect=True)
def test_best_effort_jobs_are_preempted(cluster: Target) -> None:
    """Best-effort tasks fill the cluster; a normal job needing their CPUs has them killed.
    The local pool has no preemption, so it is not a target of this test."""
    total = cluster.backend.capacity().total_slots
    batch, directory = token(), cluster.workdir("besteffort")
    fillers = cluster.submit([spec(f"{batch}-{i}", directory, "/bin/sleep", "300", batch=batch, best_effort=True)
                              for i in range(total)])
    # other jobs (a walltime test's) may hold CPUs: count the fillers that got one
    running = _settled_running(cluster, list(fillers.values()))
    key = token()
    normal = cluster.submit([spec(key, directory, "/bin/sleep", "30", resources=f"core={running}")])[key]
    jobs = wait(cluster, [normal], lambda j: j.state != RemoteState.QUEUED)
    assert jobs[normal].state == RemoteState.RUNNING
    deadline = time.monotonic() + 30  # a cluster may take a moment to say so (Grid Engine kills, then records)
    while not (states := Counter(j.state for j in cluster.backend.poll(list(fillers.values())).values()))[
            RemoteState.PREEMPTED] and time.monotonic() < deadline:
        time.sleep(0.5)
    assert states[RemoteState.PREEMPTED] >= 1, states
    assert not states[RemoteState.COMPLETED] and not states[RemoteState.CANCELLED], states


def _settled_running(cluster: Target, ids: list[str]) -> int:
    """How many of the jobs run once starting has stopped (same count twice, 2 s apart)."""
    last = -1
    for _ in range(60):
        count = sum(j.state == RemoteState.RUNNING for j in cluster.backend.poll(ids).values())
        if count and count == last:
            return count
        last = count
        time.sleep(2)
    raise AssertionError(f"{cluster.name}: best-effort jobs never settled")


@pytest.mark.slow
@pytest.mark.parametrize("target", FORGETTING_NAMES, indirect=True)
def test_a_job_slurm_forgot_is_read_from_its_trace(cluster: Target) -> None:
    """squeue forgets an ended job MinJobAge seconds after its end (600 on the test clusters), and
    without accounting (slurm-a) nothing of Slurm's remembers it: the job's own trace says how it
    ended, so it is not lost and its task does not run again; its output stays readable (slurm-b's
    sacct still knows it). Its jobs were sent when the cluster was first used: they have been
    counting down while the other tests ran."""
    ids = cluster.forgotten
    via = cluster.backend.via  # type: ignore[attr-defined]
    config = via.run("scontrol", ["scontrol", "show", "config"])
    forget = int(next(line.split("=")[1].split()[0] for line in config.splitlines() if line.startswith("MinJobAge")))
    arrays = ",".join(sorted({remote_id.split("_")[0] for remote_id in ids.values()}))
    wait_for(lambda: not via.ssh.run(["squeue", "-h", "-t", "all", "-j", arrays, "-o", "%i"]).stdout.strip(),
             forget + 300, "squeue to forget the jobs", step=5)
    jobs = cluster.backend.poll(list(ids.values()))
    assert [(jobs[i].state, jobs[i].exit_code) for i in ids.values()] == \
        [(RemoteState.COMPLETED, 3), (RemoteState.COMPLETED, 0), (RemoteState.COMPLETED, 2)]
    alone = next(i for key, i in ids.items() if key.endswith("-alone"))
    owner = USERS[0] if identity.per_user(cluster.options) else ""
    assert cluster.backend.output_tail(alone, "stderr", 1, owner) == "oops\n"


@pytest.fixture(scope="session")
def walltime_jobs(request: pytest.FixtureRequest, targets: Targets) -> Iterator[dict[str, str | Exception]]:
    """A job outliving its walltime on every backend selected, all sent on first use so the
    backends that only kill after a minute (Slurm) count down together while the other tests run."""
    selected = [item.callspec.params["target"] for item in request.session.items
                if getattr(item, "originalname", "") == "test_walltime_kills_the_job"
                and item.module is not None and item.module.__name__ == __name__]
    jobs: dict[str, str | Exception] = {}
    for name in selected:
        try:
            target = targets.get(name)
            key = token()
            jobs[name] = target.backend.submit([spec(key, target.workdir("walltime"), "/bin/sleep", "600",
                                                     walltime=target.min_walltime)])[key]
        except Exception as error:  # reported by that backend's own test
            jobs[name] = error
    yield jobs
    for name, job in jobs.items():
        if isinstance(job, str):
            targets.get(name).backend.cancel([job])


@pytest.mark.slow
def test_walltime_kills_the_job(cluster: Target, walltime_jobs: dict[str, str | Exception]) -> None:
    """Last in the file: by the time each backend gets here its job has been counting down."""
    job = walltime_jobs[cluster.name]
    if isinstance(job, Exception):
        raise job
    done = wait(cluster, [job], ended, timeout=cluster.min_walltime + 120)[job]
    assert done.state == RemoteState.TIMEOUT


@pytest.mark.parametrize("target", [c.name for c in REMOTE], indirect=True)
def test_a_job_no_node_can_run_is_refused_at_submission(cluster: Target) -> None:
    """Not left pending forever: the runner fails it with the cluster's words (SUBMISSION_ERROR)."""
    key = token()
    with pytest.raises(SubmissionRefused, match="resources|configuration|never run|no suitable queues"):
        cluster.submit([spec(key, cluster.workdir("too-big"), "/bin/true", resources="core=64")])
