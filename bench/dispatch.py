"""Benchmark: N short tasks dispatched into a real test cluster through cigri, against the
resource manager's own job array of the same tasks, in the same run.

Every task runs ``task.sh NAME``, which writes the time it started into ``start.NAME`` in a fresh
directory of the clusters' shared exec dir. A run's rate is N task-starts over the time from
just before its submission to the last start (start files are read back, so both sides are
timed the same way). The cluster's entry is read from ``DIR/single.toml`` (``--clusters DIR``):
every job as the front-end's account.

- direct: one ``sbatch --array=0-(N-1)`` (Slurm), ``oarsub --array N`` (OAR) or ``qsub -t 1-N``
  (Grid Engine) over SSH;
- cigri: ``gridsub -f JDL --wait --period P`` on a fresh CIGRI_HOME (gridsub drives the cycles:
  back to back while they send jobs, then every P seconds, by default cigri's default
  ``cycle_period``, the pace of a daemon: on a 2-core machine the cluster's own launcher needs
  both cores, and every status call cigri makes there slows the starts being measured),
  the cluster with ``max_waiting``/``api_chunk_size`` and the tap opened to N, so that one submit
  call sends every task; once without and once with temporal grouping
  (``"temporal_grouping": true``, ``temporal_grouping_batch_duration`` = ``--group-seconds``).

Goals (issue 3 §3, issue 35): cigri ≥ 0.9× the direct array without grouping, ≥ 5× with grouping.

    python bench/dispatch.py --cluster slurm-a-ssh [--tasks 500] [--repeat N] [--clusters /tmp/cigri-clusters]
    python bench/slurm_dispatch.py         (the same, --cluster slurm-a-ssh --tasks 500 by default)
    python bench/oar_dispatch.py           (--cluster oar-ssh --tasks 100)
    python bench/gridengine_dispatch.py    (--cluster gridengine-ssh --tasks 500)
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

from cigri.backends._commands import open_ssh
from cigri.config import Settings

BIN = Path(sys.executable).parent
TASK = '#!/bin/sh\ndate +%s.%N > "start.$1"\n'


def prepare(exec_root: Path, label: str) -> Path:
    directory = exec_root / f"bench-{label}-{secrets.token_hex(3)}"
    directory.mkdir()
    directory.chmod(0o1777)
    program = directory / "task.sh"
    program.write_text(TASK)
    program.chmod(0o755)
    return directory


def wait_starts(directory: Path, tasks: int, since: float, timeout: float) -> float:
    """Task-starts per second once every task has started."""
    deadline = time.time() + timeout
    while len(starts := [text for path in directory.glob("start.*") if (text := path.read_text().strip())]) < tasks:
        if time.time() > deadline:  # a start file is created before its time is written in it
            raise SystemExit(f"{directory}: only {len(starts)} of {tasks} tasks started after {timeout}s")
        time.sleep(0.2)
    return tasks / (max(float(text) for text in starts) - since)


def direct_submission(options: dict[str, Any], backend: str, program: str, directory: Path,
                      tasks: int) -> tuple[list[str], str | None]:
    """The resource manager's own array of the tasks: its argv, and its job script on stdin if any."""
    if backend == "slurm":
        return ["sbatch", "--parsable", f"--array=0-{tasks - 1}", f"--chdir={directory}", "--output=/dev/null",
                "--time=5", f"--partition={options.get('partition', 'main')}",
                f"--wrap={program} d$SLURM_ARRAY_TASK_ID"], None
    if backend == "oar":
        return ["oarsub", "--array", str(tasks), "-d", str(directory), "-O", "/dev/null", "-E", "/dev/null",
                "-l", "core=1,walltime=0:05:00", f"{program} d$OAR_ARRAY_INDEX"], None
    queue = ["-q", options["queue"]] if options.get("queue") else []
    return (["qsub", "-terse", "-t", f"1-{tasks}", "-wd", str(directory), "-o", "/dev/null", "-e", "/dev/null",
             "-S", "/bin/sh", "-l", "h_rt=300", *queue], f'#!/bin/sh\nexec {program} "d$SGE_TASK_ID"\n')


def direct(options: dict[str, Any], backend: str, directory: Path, tasks: int) -> float:
    ssh = open_ssh("bench", options, 30.0)
    argv, script = direct_submission(options, backend, str(directory / "task.sh"), directory, tasks)
    since = time.time()
    result = ssh.run(argv, script)
    ssh.close()
    if result.status != 0:
        raise SystemExit(f"direct submission failed: {result.stderr}")
    return wait_starts(directory, tasks, since, 1800)


def through_cigri(name: str, options: dict[str, Any], directory: Path, tasks: int, group_seconds: int,
                  period: float) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "cigri.toml"
        lines = ["[runner]", f"tap_initial = {tasks}", f"tap_max = {tasks}", f"[clusters.{name}]"]
        lines += [f"{k} = {json.dumps(v)}" for k, v in
                  {**options, "max_waiting": tasks, "api_chunk_size": tasks}.items()]
        config.write_text("\n".join(lines) + "\n")
        grouping = {"temporal_grouping": True, "temporal_grouping_batch_duration": group_seconds} \
            if group_seconds else {"temporal_grouping": False}
        jdl = Path(tmp) / "bench.json"
        jdl.write_text(json.dumps({
            "name": "dispatch", "exec_file": str(directory / "task.sh"), "exec_directory": str(directory),
            "walltime": "00:05:00", "type": "normal", "params": [f"c{i}" for i in range(tasks)],
            "clusters": {name: grouping}}))
        env = {"CIGRI_HOME": str(Path(tmp) / "home"), "CIGRI_CONFIG": str(config), "PATH": "/usr/bin:/bin"}
        since = time.time()
        subprocess.run([str(BIN / "gridsub"), "-f", str(jdl), "--wait", "--period", str(period)], env=env,
                       check=True, stdout=subprocess.DEVNULL, timeout=1800)
        return wait_starts(directory, tasks, since, 60)


def main(default_cluster: str = "slurm-a-ssh", default_tasks: int = 500) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cluster", default=default_cluster)
    parser.add_argument("--tasks", type=int, default=default_tasks)
    parser.add_argument("--clusters", type=Path, default=Path("/tmp/cigri-clusters"))
    parser.add_argument("--group-seconds", type=int, default=60)
    parser.add_argument("--period", type=float, default=Settings.cycle_period)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each side; medians are compared")
    args = parser.parse_args()
    # single.toml: every job as the front-end's account (cigri.toml may run them as their owners,
    # and this process's user is no test user): dispatch is measured, not identity
    single = args.clusters / "single.toml"
    try:
        with single.open("rb") as handle:
            clusters = tomllib.load(handle).get("clusters", {})
    except OSError as error:
        parser.error(f"{single}: {error.strerror} (bring the test clusters up: tests/clusters/up.sh)")
    if args.cluster not in clusters:
        parser.error(f"{single}: no cluster {args.cluster!r} (known: {', '.join(clusters) or 'none'})")
    options = clusters[args.cluster]
    backend = options.get("backend")
    if backend not in ("slurm", "oar", "gridengine"):
        parser.error(f"{args.cluster}: backend {backend!r} has no array to compare with (slurm, oar, gridengine)")
    exec_root = args.clusters / "exec"
    runs: dict[str, list[float]] = {}
    for _ in range(args.repeat):  # interleaved, so that a drift of the cluster's pace hits every side
        runs.setdefault("direct", []).append(direct(options, backend, prepare(exec_root, "direct"), args.tasks))
        for label, seconds in (("cigri, arrays", 0), ("cigri, temporal grouping", args.group_seconds)):
            runs.setdefault(label, []).append(
                through_cigri(args.cluster, options, prepare(exec_root, "cigri"), args.tasks, seconds, args.period))
    rate = statistics.median(runs.pop("direct"))
    print(f"direct {backend} array: {args.tasks} tasks, {rate:.2f} task-starts/s (median of {args.repeat})")
    for label, rates in runs.items():
        mine = statistics.median(rates)
        print(f"{label}: {mine:.2f} task-starts/s, {mine / rate:.2f}x the direct array "
              f"(runs: {', '.join(f'{r:.2f}' for r in rates)})")


if __name__ == "__main__":
    main()
