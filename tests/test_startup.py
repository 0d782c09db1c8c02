"""The user commands load only what they use: every import is paid again at each start, and a
start is most of what a status command costs (docs/performance.md)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from harness import Cigri

# Modules a submission or a status read in direct mode never needs, each a noticeable part of a
# start: the metascheduler's fair share and schedulers (cycles only), pydantic (the server's
# FastAPI; typer 0.29 built a validator per option with it), and the notifications' transports.
NOT_AT_START = ("cigri.metascheduler.metascheduler", "cigri.metascheduler.fairshare", "pydantic", "smtplib", "ssl",
                "httpx")

# Runs a command's entry point as its console script does, then writes every module it loaded.
PROBE = """
import atexit, importlib, json, sys
out, command = sys.argv[1], sys.argv[2]
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv = sys.argv[2:]
importlib.import_module("cigri.cli." + command).main()
"""


def loaded(cigri: Cigri, command: str, *args: str) -> set[str]:
    out = cigri.tmp / "modules.json"
    result = subprocess.run([sys.executable, "-c", PROBE, str(out), command, *args], env=cigri.env, cwd=cigri.tmp,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    return set(json.loads(out.read_text()))


@pytest.mark.parametrize("args", [("gridsub", "-f", "{jdl}"), ("gridstat",), ("gridstat", "-c", "1", "--json"),
                                  ("gridevents", "-c", "1")], ids=" ".join)
def test_a_submission_and_status_reads_load_neither_the_metascheduler_nor_pydantic(cigri: Cigri,
                                                                                    args: tuple[str, ...]) -> None:
    jdl = cigri.jdl("startup", exec_file="/bin/true", params=["a", "b"])
    if args[0] != "gridsub":
        cigri.submit(jdl)
    modules = loaded(cigri, *(arg.format(jdl=jdl) for arg in args))
    assert "cigri.cli." + args[0] in modules  # the probe ran the command
    assert not modules & set(NOT_AT_START), sorted(modules & set(NOT_AT_START))
