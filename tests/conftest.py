"""Fixtures shared by the test modules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import Cigri


@pytest.fixture
def cigri(tmp_path: Path) -> Iterator[Cigri]:
    """One isolated cigri installation; whatever it left running is stopped after the test."""
    installation = Cigri(tmp_path)
    try:
        yield installation
    finally:
        installation.cleanup()
