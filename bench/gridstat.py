"""Benchmark: `gridstat -c N --json` on a 1,000,000-task campaign.

Baseline, measured in the same run: the same command on a 10-task campaign in the same
database, so the ratio shows how the answer time grows with the campaign (goal: flat, and
well under a second).

    python bench/gridstat.py [--tasks N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def run(*args: str, env: dict[str, str]) -> str:
    return subprocess.run([str(BIN / args[0]), *args[1:]], env=env, check=True, capture_output=True,
                          text=True).stdout


def best_of(runs: int, *args: str, env: dict[str, str]) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        run(*args, env=env)
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "CIGRI_HOME": tmp, "NO_COLOR": "1"}
        for name, count in (("small", 10), ("big", args.tasks)):
            jdl = Path(tmp) / f"{name}.json"
            jdl.write_text(json.dumps({"name": name, "nb_jobs": count, "exec_file": "/bin/true",
                                       "clusters": {"local": {}}}))
            run("gridsub", "-f", str(jdl), env=env)
        startup = best_of(3, "gridstat", "--version", env=env)
        small = best_of(5, "gridstat", "-c", "1", "--json", env=env)
        big = best_of(5, "gridstat", "-c", "2", "--json", env=env)
    print(f"gridstat -c N --json: {args.tasks:,} tasks {big:.3f} s, 10 tasks {small:.3f} s "
          f"(process start-up alone {startup:.3f} s); ratio {big / small:.2f}x (goal: flat, < 1 s)")


if __name__ == "__main__":
    main()
