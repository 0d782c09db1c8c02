"""SIGKILL of ``gridsub`` in the middle of a 1,000,000-line submission: all of it or nothing.

The submission is one transaction (campaign, properties and every task); a kill at any moment
must leave either no trace of the campaign or the whole of it, and a database that the next
command opens without repair.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import time

import pytest
from harness import BIN, Cigri

LINES = 1_000_000


def _campaign_sizes(cigri: Cigri) -> list[int]:
    """Tasks of every campaign in the database, after checking the file's integrity."""
    conn = sqlite3.connect(cigri.home / "cigri.db")
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT count(*) FROM tasks WHERE campaign_id NOT IN (SELECT id FROM campaigns)"
                            ).fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM campaign_properties WHERE campaign_id NOT IN "
                            "(SELECT id FROM campaigns)").fetchone() == (0,)
        return [n for (n,) in conn.execute(
            "SELECT (SELECT count(*) FROM tasks t WHERE t.campaign_id = c.id) FROM campaigns c ORDER BY c.id")]
    finally:
        conn.close()


@pytest.mark.slow
def test_a_killed_million_line_submission_leaves_all_or_nothing(cigri: Cigri) -> None:
    params = cigri.tmp / "million.txt"
    with params.open("w") as out:
        for start in range(0, LINES, 100_000):
            out.write("".join(f"p{i} {i} x\n" for i in range(start, start + 100_000)))
    jdl = cigri.jdl("million", exec_file="/bin/true", param_file=str(params))
    cigri.run("cigri", "db", "init")
    # one whole submission first: it must go in, and its duration places the kills inside one
    began = time.monotonic()
    cigri.run("gridsub", "-f", str(jdl), timeout=120)
    duration = time.monotonic() - began
    assert _campaign_sizes(cigri) == [LINES]
    seed = random.randrange(1 << 32)
    rng = random.Random(seed)
    # one kill while the JDL is read and checked, three spread over the ingest; a submission that
    # ends before its kill (the machine's load changed) gives its own duration to the next moments
    fractions = [rng.uniform(0.05, 0.25), *sorted(rng.uniform(0.3, 0.8) for _ in range(3))]
    outcomes: list[tuple[float, str, list[int]]] = []
    while fractions and len(outcomes) < 10:
        moment = fractions[0] * duration
        began = time.monotonic()
        proc = subprocess.Popen([str(BIN / "gridsub"), "-f", str(jdl)], env=cigri.env, cwd=cigri.tmp,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            proc.wait(moment)
            outcome = "exited before the kill"
            duration = time.monotonic() - began
        except subprocess.TimeoutExpired:
            outcome = "killed"
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            fractions.pop(0)
        sizes = _campaign_sizes(cigri)
        outcomes.append((round(moment, 2), outcome, sizes))
        assert all(size == LINES for size in sizes), f"seed {seed}: a partial campaign: {outcomes}"
    print(f"\ngridsub SIGKILLs (after seconds, outcome, campaign sizes; the last whole one took {duration:.1f} s): "
          f"{outcomes} (seed {seed})")
    assert not fractions, f"seed {seed}: fewer than 4 kills in 10 submissions: {outcomes}"
