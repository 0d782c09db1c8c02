"""The wheel carries every sub-package and data file; a package missing from pyproject fails."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.xdist_group("wheel")  # one worker builds the wheel, once
# Source directory -> the package it becomes (pyproject's package-dir).
SOURCES = {"cigri": "cigri", "cli": "cigri/cli", "jdl": "cigri/jdl"}
DATA = ["cigri/py.typed", "cigri/jdl/schema.json", "cigri/jdl/examples/demo.json"]


def expected_inits() -> set[str]:
    """Every ``__init__.py`` under the source dirs, as a path inside the wheel."""
    result = set()
    for source, package in SOURCES.items():
        for init in (REPO / source).rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                result.add(f"{package}/{init.relative_to(REPO / source).as_posix()}")
    return result


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """Build from a clean copy of the sources, so no stale build/ of the repo leaks in."""
    tmp = tmp_path_factory.mktemp("wheel")
    source, dist = tmp / "src", tmp / "dist"
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")
    for name in (*SOURCES, "man"):
        shutil.copytree(REPO / name, source / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (REPO / name).exists():
            shutil.copy(REPO / name, source / name)
    if importlib.util.find_spec("build") is not None:
        command = [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(source)]
    else:
        command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(dist), str(source)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    (built,) = dist.glob("cigri-*.whl")
    with zipfile.ZipFile(built) as archive:
        yield archive


def test_expected_list_covers_the_known_subpackages() -> None:
    assert {"cigri/__init__.py", "cigri/backends/local/__init__.py", "cigri/metascheduler/schedulers/__init__.py",
            "cigri/cli/__init__.py", "cigri/jdl/__init__.py"} <= expected_inits()


def test_every_subpackage_and_data_file_is_in_the_wheel(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    assert sorted(expected_inits() - names) == []
    assert sorted(set(DATA) - names) == []


def test_wheel_installs_nothing_outside_cigri(wheel: zipfile.ZipFile) -> None:
    """The package, its metadata, and its manual pages where man(1) looks beside bin/."""
    tops = {name.split("/", 1)[0] for name in wheel.namelist()}
    assert {top for top in tops if not top.endswith((".dist-info", ".data"))} == {"cigri"}
    data = {name.split("/", 2)[2] for name in wheel.namelist() if name.split("/", 1)[0].endswith(".data")}
    assert data == {f"share/man/man{page.suffix[1:]}/{page.name}" for page in (REPO / "man").glob("*.[15]")}
    assert {"share/man/man1/gridsub.1", "share/man/man5/cigri-jdl.5"} <= data


def test_the_installed_package_type_checks(wheel: zipfile.ZipFile, tmp_path: Path) -> None:
    """``py.typed`` tells users' mypy to trust cigri's hints, so they must hold. Checked on the
    wheel's layout: in the source tree ``cigri.cli`` and ``cigri.jdl`` live in other folders."""
    wheel.extractall(tmp_path)
    result = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", "-p", "cigri"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
