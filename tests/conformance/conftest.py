"""Fixtures of the conformance suite: one backend per parameter, shared by the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from backend_targets import FORGOTTEN_TEST, NAMES, Target, Targets


@pytest.fixture(scope="session")
def targets(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Targets]:
    forgetting = frozenset(item.callspec.params["target"] for item in request.session.items
                           if getattr(item, "originalname", "") == FORGOTTEN_TEST and hasattr(item, "callspec"))
    built = Targets(tmp_path_factory.mktemp("conformance"), forgetting)
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
