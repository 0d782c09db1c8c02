"""Fixtures shared by the test modules, and the number of pytest-xdist workers."""

from __future__ import annotations

import compileall
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import REAL_SYSTEMS, STORE, Cigri, busy_jobs, require_root, wait_for

SYSTEMS_USED = pytest.StashKey[tuple[str, ...]]()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: xdist's one worker per core, plus one. The tests mostly run the real
    commands and wait for what they start (cycles, jobs, a server), so with one worker per core
    a fifth of the CPU idled. With the real clusters, the extra worker keeps the cores busy while their tests, one after the other
    per batch system (``REAL_CLUSTERS``), wait for remote jobs."""
    from xdist.plugin import pytest_xdist_auto_num_workers as per_core

    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own reading of the variable
    return per_core(config) + 1


def pytest_configure(config: pytest.Config) -> None:
    """Compile cigri's modules once, before the workers start. The suite runs about a thousand
    commands; with ``PYTHONDONTWRITEBYTECODE`` set (as it is on some machines and CI images) each
    would compile the sources again, a fifth of a command's start."""
    if hasattr(config, "workerinput"):
        return  # an xdist worker: the controller has compiled them
    root = Path(__file__).resolve().parent.parent
    for package in ("cigri", "cli", "jdl"):  # cigri.cli and cigri.jdl live in cli/ and jdl/
        compileall.compile_dir(root / package, quiet=1)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked ``harness.needs_root`` is skipped for anyone but root (failed with ``CI=true``)."""
    marker = item.get_closest_marker("needs_root")
    if marker is not None:
        require_root(marker.args[0])


def real_systems(item: pytest.Item) -> tuple[str, ...]:
    """The batch systems a ``REAL_CLUSTERS`` test uses: those it names (``harness.on_systems``), or
    else read from its parameters' ids, which name its cluster ("slurm-a-ssh", "oar-rest",
    "local-spread-0"): none for the local pool alone, and both for a test whose parameters name
    neither (it spans the grid)."""
    named_by_test = item.get_closest_marker("real_clusters")
    if named_by_test is not None and "systems" in named_by_test.kwargs:
        return tuple(named_by_test.kwargs["systems"])
    ids = item.callspec.id.split("-") if isinstance(item, pytest.Function) and hasattr(item, "callspec") else []
    named = tuple(system for system in REAL_SYSTEMS if any(i.startswith(system) for i in ids))
    return named or (() if "local" in ids else REAL_SYSTEMS)


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each batch system's tests run one after the other on one xdist worker, Slurm's beside
    OAR's and Grid Engine's: a test that uses several joins the first one's group and also takes
    the others' locks (``_one_test_per_system``)."""
    for item in items:
        if item.get_closest_marker("real_clusters") is None:
            continue
        item.stash[SYSTEMS_USED] = systems = real_systems(item)
        if systems:
            item.add_marker(pytest.mark.xdist_group(f"real-{systems[0]}"))


@pytest.fixture(autouse=True)
def _one_test_per_system(request: pytest.FixtureRequest) -> Iterator[None]:
    """Hold the lock of each batch system the test uses, in one order (no deadlock), across the
    xdist workers: some tests fill a cluster, others count on its free cores. A system taken
    from the other group's worker is let end the jobs its last test cancelled."""
    held = []
    try:
        for rank, system in enumerate(request.node.stash.get(SYSTEMS_USED, ())):
            # read-only: the file may be another user's, as the run of a test's module as root left it
            handle = os.fdopen(os.open(Path(tempfile.gettempdir()) / f"cigri-tests-{system}.lock",
                                       os.O_RDONLY | os.O_CREAT, 0o644))
            held.append(handle)
            fcntl.flock(handle, fcntl.LOCK_EX)
            if rank:
                wait_for(lambda system=system: busy_jobs(system) == 0, 120, f"{system}'s last jobs to end", step=1)
        yield
    finally:
        for handle in reversed(held):
            handle.close()  # closing releases the lock


@pytest.fixture(scope="session")
def _postgres_server() -> Iterator[str | None]:
    """With ``CIGRI_TEST_STORE=postgresql``, one PostgreSQL server per xdist worker."""
    if STORE != "postgresql":
        yield None
        return
    from postgres import server

    with server() as url:
        yield url


@pytest.fixture(autouse=True)
def _store(_postgres_server: str | None, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test's grid in a database of its own on that server (``CIGRI_DATABASE_URL``, which
    every configuration the test loads and every command it runs reads); SQLite otherwise."""
    if _postgres_server is None:
        yield
        return
    from postgres import drop_database, fresh_database

    name = "t_" + format(abs(hash(request.node.nodeid)), "x")
    monkeypatch.setenv("CIGRI_DATABASE_URL", fresh_database(_postgres_server, name))
    monkeypatch.setenv("CIGRI_LEADER_LEASE", "5")  # a daemon killed by a test is replaced within seconds
    try:
        yield
    finally:
        drop_database(_postgres_server, name)


@pytest.fixture
def cigri(tmp_path: Path) -> Iterator[Cigri]:
    """One isolated cigri installation; whatever it left running is stopped after the test."""
    installation = Cigri(tmp_path)
    try:
        yield installation
    finally:
        installation.cleanup()
