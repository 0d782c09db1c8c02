"""Benchmark: `gridsub` of a 1,000,000-line parameter file (time and peak RSS).

Baseline, measured in the same run: a bare sqlite3 ``executemany`` of the same rows
(campaign id, name, line) into a table with no index, in one transaction.
Goal (issue #2): at most 2x the baseline time, at most 200 MB peak RSS.

    python bench/ingest.py [--lines N]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def write_params(path: Path, lines: int) -> None:
    with path.open("w") as handle:
        for i in range(lines):
            handle.write(f"task{i:07d} --input data/{i % 977}.dat --seed {i * 7919 % 100003}\n")


def baseline(params: Path, db_path: Path) -> float:
    """Read the file, take the first word, and executemany into a plain table."""
    started = time.perf_counter()
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE tasks (campaign_id INTEGER, name TEXT, param TEXT)")
    with params.open() as handle, conn:
        conn.executemany("INSERT INTO tasks VALUES (1, ?, ?)",
                         ((line.split(None, 1)[0], line.strip()) for line in handle))
    conn.close()
    return time.perf_counter() - started


def gridsub(jdl: Path, home: Path) -> tuple[float, float, dict]:
    """Run the real command; return (seconds, peak RSS in MB, its JSON answer)."""
    env = {**os.environ, "CIGRI_HOME": str(home), "NO_COLOR": "1"}
    command = [str(Path(sys.executable).parent / "gridsub"), "-f", str(jdl), "--json"]
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - started
    out, err = process.stdout.read(), process.stderr.read()
    if status != 0:
        sys.exit(f"gridsub failed: {err.decode()}")
    return seconds, usage.ru_maxrss / 1024, json.loads(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        params = root / "params.txt"
        write_params(params, args.lines)
        jdl = root / "campaign.json"
        jdl.write_text(json.dumps({"name": "ingest", "param_file": str(params), "exec_file": "/bin/true",
                                   "clusters": {"local": {}}}))
        base = baseline(params, root / "baseline.db")
        seconds, rss, answer = gridsub(jdl, root / "home")
        assert answer["tasks"] == args.lines, answer
    ratio = seconds / base
    print(f"ingest of {args.lines:,} lines: gridsub {seconds:.2f} s, peak RSS {rss:.0f} MB; "
          f"baseline executemany {base:.2f} s; ratio {ratio:.2f}x (goal <= 2x, <= 200 MB)")


if __name__ == "__main__":
    main()
