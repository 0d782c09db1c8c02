"""Real Unix users for the tests that need them, and a cigri they can run.

The server's identity tests and the jobs-run-as-their-owner tests need distinct, real Unix
accounts (``CIGRI_TEST_USERS``, default ``cigri-u1 cigri-u2``), created here when missing (as
root; ``.ci/run`` and ``tests/clusters/up.sh`` create them too). Those users cannot run the
test's own interpreter when it lives under ``/root`` (0700), so :func:`shared_install` builds a
virtual environment from the system's ``/usr/bin/python3`` with a copy of this checkout
installed, readable by everyone, once per version of the sources.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import pwd
import shutil
import subprocess
from pathlib import Path
from typing import Any

from harness import require_root, unavailable

REPO = Path(__file__).resolve().parents[1]
NAMES: tuple[str, ...] = tuple(os.environ.get("CIGRI_TEST_USERS", "cigri-u1 cigri-u2").split())
SERVICE = os.environ.get("CIGRI_TEST_SERVICE", "cigri-svc")  # the account a site's cigri server runs as
SYSTEM_PYTHON = Path("/usr/bin/python3")
SOURCES = ("cigri", "cli", "jdl")


def ensure_users(names: tuple[str, ...] = NAMES) -> list[pwd.struct_passwd]:
    """The test users' password entries, each created (with a home) if missing."""
    require_root("the multi-user tests create Unix users and run commands as them")
    entries = []
    for name in names:
        try:
            entries.append(pwd.getpwnam(name))
        except KeyError:
            subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", name], check=True,
                           capture_output=True)
            entries.append(pwd.getpwnam(name))
    return entries


def _sources_digest() -> str:
    digest = hashlib.sha256()
    for top in SOURCES:
        for path in sorted((REPO / top).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(path.relative_to(REPO).as_posix().encode() + b"\0" + path.read_bytes())
    digest.update((REPO / "pyproject.toml").read_bytes())
    return digest.hexdigest()[:16]


def shared_install() -> Path:
    """The ``bin`` directory of a virtual environment every user can run, holding this
    checkout's cigri (built from a clean copy of the sources, so no build/ or egg-info lands
    in the checkout). Built once per version of the sources, under a lock: parallel test
    workers wait for one build instead of racing."""
    if not SYSTEM_PYTHON.exists():
        unavailable(f"{SYSTEM_PYTHON} is missing: the test users need an interpreter they can run")
    root = Path("/tmp") / f"cigri-shared-venv-{_sources_digest()}"
    with open(f"{root}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "ready").exists():
            shutil.rmtree(root, ignore_errors=True)
            source = Path(f"{root}.src")
            shutil.rmtree(source, ignore_errors=True)
            ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")
            for name in SOURCES:
                shutil.copytree(REPO / name, source / name, ignore=ignore)
            for name in ("pyproject.toml", "README.md"):
                shutil.copy(REPO / name, source / name)
            subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", str(root)], check=True, capture_output=True)
            subprocess.run([str(root / "bin" / "pip"), "install", "-q", str(source)], check=True,
                           capture_output=True)
            shutil.rmtree(source, ignore_errors=True)
            subprocess.run(["chmod", "-R", "a+rX", str(root)], check=True)
            (root / "ready").touch()
    return root / "bin"


def _as(user: str, env: dict[str, str] | None) -> dict[str, Any]:
    """What runs a process as ``user``: its uid, primary and supplementary groups, its home as
    the working directory, and a login's basic environment plus ``env``."""
    entry = pwd.getpwnam(user)
    base = {"HOME": entry.pw_dir, "USER": user, "LOGNAME": user, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    return {"env": {**base, **(env or {})}, "cwd": entry.pw_dir, "user": entry.pw_uid, "group": entry.pw_gid,
            "extra_groups": os.getgrouplist(user, entry.pw_gid)}


def run_as(user: str, argv: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None,
           stdin: str | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` as ``user`` to its end; never raises on a non-zero exit."""
    options = _as(user, env)
    if cwd is not None:
        options["cwd"] = cwd
    return subprocess.run(argv, text=True, capture_output=True, input=stdin, timeout=timeout, **options)


def start_as(user: str, argv: list[str], *, env: dict[str, str] | None = None,
             log: Path | None = None) -> subprocess.Popen[bytes]:
    """Start ``argv`` as ``user`` in the background, its output going to ``log``."""
    output = open(log, "ab") if log is not None else subprocess.DEVNULL
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=output, stderr=output, **_as(user, env))
    finally:
        if log is not None:
            output.close()  # type: ignore[union-attr]
