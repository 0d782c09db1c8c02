"""Fixtures shared by the test modules, and the number of pytest-xdist workers."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import Cigri


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: xdist's one worker per core, plus one. The tests mostly run the real
    commands and wait for what they start (cycles, jobs, a server), so with one worker per core
    a fifth of the CPU idled. With the real clusters, the extra worker keeps the cores busy while their tests, one after the other
    on one worker (``REAL_CLUSTERS``), wait for remote jobs."""
    from xdist.plugin import pytest_xdist_auto_num_workers as per_core

    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own reading of the variable
    return per_core(config) + 1


@pytest.fixture
def cigri(tmp_path: Path) -> Iterator[Cigri]:
    """One isolated cigri installation; whatever it left running is stopped after the test."""
    installation = Cigri(tmp_path)
    try:
        yield installation
    finally:
        installation.cleanup()
