"""One user cannot hurt the others: parameters are read before any lock is taken, and each user
has caps on pending tasks, parameter bytes (per submission and in total), request bodies and
requests per minute, refused with 413 or 429 (and Retry-After) and nothing written."""

from __future__ import annotations

import json
import os
import pwd
import re
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import BIN, Cigri
from service import Site

pytestmark = pytest.mark.slow


def _fifo(path: Path, owner: str | None = None) -> Path:
    os.mkfifo(path, 0o600)
    if owner is not None:
        entry = pwd.getpwnam(owner)
        os.chown(path, entry.pw_uid, entry.pw_gid)
    return path


class StalledWriter:
    """Writes the first lines into a FIFO, then holds it open without writing, as a slow pipe
    does, until :meth:`finish`."""

    def __init__(self, fifo: Path, first: str, rest: str) -> None:
        self.fifo, self.first, self.rest = fifo, first, rest
        self.go = threading.Event()
        self.thread = threading.Thread(target=self._write)
        self.thread.start()

    def _write(self) -> None:
        with open(self.fifo, "w") as handle:
            handle.write(self.first)
            handle.flush()
            self.go.wait(120)
            handle.write(self.rest)

    def finish(self) -> None:
        self.go.set()
        self.thread.join(30)


def test_a_slow_parameter_pipe_holds_no_lock_in_direct_mode(cigri: Cigri) -> None:
    """The submission reads its parameter file before taking the write lock: while the pipe
    stalls, a cycle runs (it used to wait for the lock, and fail with 'database is locked')."""
    cigri.run("cigri", "db", "init")
    fifo = _fifo(cigri.tmp / "params.fifo")
    jdl = cigri.jdl("slow", exec_file="/bin/true", param_file=str(fifo))
    submission = subprocess.Popen([str(BIN / "gridsub"), "-f", str(jdl), "--json"], env=cigri.env, cwd=cigri.tmp,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writer = StalledWriter(fifo, "a 1\nb 2\n", "c 3\n")
    try:
        time.sleep(0.5)  # gridsub is reading the pipe, which stalls
        started = time.monotonic()
        cycle = subprocess.run([str(BIN / "cigri"), "cycle"], env={**cigri.env, "CIGRI_STUCK_DELAY": "600"},
                               capture_output=True, text=True, timeout=50)
        assert cycle.returncode == 0, cycle.stderr
        assert time.monotonic() - started < 10
    finally:
        writer.finish()
    out, err = submission.communicate(timeout=60)
    assert submission.returncode == 0, err
    assert cigri.stat(int(json.loads(out)["campaign_id"]))["tasks"]["total"] == 3


@pytest.fixture(scope="module")
def limited() -> Iterator[Site]:
    built = Site('[limits]\npending_tasks = 100\nsubmission_param_bytes = 1000\nparam_bytes = 1500\n'
                 'request_body_bytes = 2048\n')
    try:
        built.start()
        yield built
    finally:
        built.close()


def test_a_slow_upload_holds_no_lock_and_others_go_on(limited: Site) -> None:
    """u1's parameter file is a pipe that stalls mid-way: meanwhile u2 submits, the cycles run
    and u2's campaign ends; u1's submission completes when its pipe does."""
    u1, u2 = limited.users
    fifo = _fifo(limited.user_dir(u1) / "slow.fifo", owner=u1)
    program = limited.script("true.sh", "exit 0\n")
    jdl = limited.jdl(u1, "slow", exec_file=str(program), param_file=str(fifo))
    result: list[subprocess.CompletedProcess[str]] = []
    submitting = threading.Thread(target=lambda: result.append(limited.run(u1, "gridsub", "-f", str(jdl), "--json")))
    submitting.start()
    writer = StalledWriter(fifo, "a 1\nb 2\n", "c 3\n")
    try:
        other = limited.submit(u2, limited.jdl(u2, "meanwhile", exec_file=str(program), nb_jobs=2))
        assert limited.drain(u2, other, timeout=60)["state"] == "terminated"
        assert not result, "u1's submission ended while its pipe was still open"
    finally:
        writer.finish()
        submitting.join(60)
    assert result and result[0].returncode == 0


def test_per_user_limits_refuse_with_413_and_429_and_write_nothing(limited: Site) -> None:
    u1, u2 = limited.users
    program = limited.script("sleeper.sh", "sleep 60\n")
    held = limited.submit(u1, limited.jdl(u1, "held", exec_file=str(program), nb_jobs=80))
    limited.run(u1, "griddel", "-p", str(held))  # its tasks stay pending
    over = limited.run(u1, "gridsub", "-f", str(limited.jdl(u1, "over", exec_file=str(program), nb_jobs=30)),
                       expect=1)
    assert re.fullmatch(rf"gridsub: {u1}: 1\d\d tasks would be pending, more than the 100 one user may have "
                        r"waiting \(limits.pending_tasks\); submit the rest as these drain\n", over.stderr)
    other = limited.submit(u2, limited.jdl(u2, "theirs", exec_file=str(program), nb_jobs=80))  # per user
    limited.run(u2, "griddel", str(other))
    limited.run(u1, "griddel", str(held))

    big = limited.user_file(u1, "big.txt", "".join(f"t{i:04d} {'x' * 40}\n" for i in range(30)))  # 1,380 bytes
    refused = limited.run(u1, "gridsub", "-f", str(limited.jdl(u1, "big", exec_file=str(program),
                                                                 param_file=str(big))), expect=2)
    assert refused.stderr == (f"gridsub: {big}: more than the 1,000 bytes of parameters one submission may add "
                              "(limits.submission_param_bytes)\n")
    half = limited.user_file(u1, "half.txt", "".join(f"h{i:04d} {'y' * 40}\n" for i in range(18)))  # 828 bytes
    first = limited.submit(u1, limited.jdl(u1, "half1", exec_file=str(program), param_file=str(half)))
    limited.run(u1, "griddel", "-p", str(first))
    second = limited.run(u1, "gridsub", "-f", str(limited.jdl(u1, "half2", exec_file=str(program),
                                                                param_file=str(half))), expect=1)
    assert "bytes of parameters would be stored for your unfinished campaigns" in second.stderr
    assert "(limits.param_bytes)" in second.stderr
    limited.run(u1, "griddel", str(first))

    inline = {"name": "inline", "exec_file": str(program), "clusters": {"local": {}},
              "params": [f"p{i} {'z' * 60}" for i in range(20)]}  # 1,300 bytes of parameters in a small body
    hook = {"kind": "webhook", "target": "https://example.org/" + "q" * 3000}
    [(status, body, _), (too_big, refused_body, _)] = limited.http(u1, [("POST", "/campaigns", {"json": inline}),
                                                                      ("POST", "/notifications", {"json": hook})])
    assert (status, body) == (413, {"error": "$.params: more than the 1,000 bytes of parameters one submission may "
                                             "add (limits.submission_param_bytes)", "field": "$.params"})
    assert (too_big, refused_body) == (413, {"error": "request body: more than 2,048 bytes (limits.request_body_bytes, "
                                                      "or limits.submission_param_bytes for parameters)", "field": None})
    assert limited.json(u1, "gridnotify", "list") == []
    inline["params"] = [f"p{i} {'z' * 60}" for i in range(40)]  # JSON is held in memory: the small cap, whatever it carries
    [(status, body, _)] = limited.http(u1, [("POST", "/campaigns", {"json": inline})])
    assert (status, body["error"]) == (413, refused_body["error"])
    names = {c["name"] for c in limited.json("root", "gridstat", "-a")}
    assert not names & {"over", "big", "half2", "inline"}


def test_requests_per_minute_answer_429_with_retry_after() -> None:
    throttled = Site("[limits]\nrequests_per_minute = 20\n")
    try:
        throttled.start()
        u1, u2 = throttled.users
        answers = throttled.http(u1, [("GET", "/campaigns", {})] * 30)
        statuses = [status for status, _, _ in answers]
        assert statuses[:20] == [200] * 20 and 429 in statuses[20:]
        status, body, headers = answers[statuses.index(429)]
        assert body["error"].startswith(f"{u1}: more than 20 requests a minute (limits.requests_per_minute)")
        assert 1 <= int(headers["retry-after"]) <= 4
        assert [s for s, _, _ in throttled.http(u2, [("GET", "/campaigns", {})])] == [200]  # one user's bucket
        throttled.http(u1, [("GET", "/campaigns", {})] * 5)  # empty again, whatever refilled meanwhile
        refused = throttled.run(u1, "gridstat", expect=1)
        assert "requests a minute" in refused.stderr and refused.stderr.count("\n") == 1
    finally:
        throttled.close()
