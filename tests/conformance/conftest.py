"""Fixtures of the conformance suite: one backend per parameter, shared by the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from backend_targets import NAMES, Target, Targets


@pytest.fixture(scope="session")
def targets(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Targets]:
    built = Targets(tmp_path_factory.mktemp("conformance"))
    try:
        yield built
    finally:
        built.close()


@pytest.fixture(scope="session", params=NAMES)
def target(request: pytest.FixtureRequest, targets: Targets) -> Target:
    return targets.get(request.param)


@pytest.fixture
def cluster(target: Target) -> Iterator[Target]:
    """The target for one test; what the test submitted is cancelled after it, ended or not."""
    yield target
    target.backend.cancel(target.submitted)
    target.submitted.clear()
