"""The suite's own machinery: tests that share a Unix user's home, a real cluster or a built
wheel are kept on one xdist worker by ``xdist_group`` (``--dist loadgroup``). Some pytest and
xdist versions ignore the mark without a word, and those tests then race each other."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

GROUPED = '''
import os
import pytest

pytestmark = pytest.mark.xdist_group("together")


@pytest.mark.parametrize("n", range(6))
def test_records_its_worker(n):
    with open(os.environ["WORKERS_FILE"], "a") as out:
        out.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
'''


def test_a_group_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    workers = tmp_path / "workers"
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "3",
                             "--dist", "loadgroup", "-o", "addopts=", str(tmp_path)],
                            cwd=tmp_path, env={"WORKERS_FILE": str(workers), "PATH": "/usr/bin:/bin"},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-2000:]
    assert len(workers.read_text().split()) == 6
    assert len(set(workers.read_text().split())) == 1, "xdist_group ignored: pin pytest (see pyproject.toml)"
