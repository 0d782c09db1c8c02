"""Benchmark: N trivial tasks end to end on the local backend, in tasks per second.

cigri: ``gridsub -f JDL --wait --period P`` on a fresh CIGRI_HOME (no daemon, so gridsub
drives the cycles itself), timed from its launch until it exits 0; then ``gridstat -c 1
--json`` must count N terminated tasks. The JDL is ``nb_jobs = N``, ``exec_file =
/bin/true``; the one cluster is ``[clusters.local]`` with ``slots`` slots and a generous
``max_waiting``. The tap (``[runner]``) keeps cigri's defaults unless ``--tap-initial``,
``--tap-max`` or ``--job-ratio`` are given.

Baselines, measured in the same run on the same N tasks and slots:

- ``seq N | xargs -P SLOTS -I{} /bin/true``, timed the same way;
- HyperQueue (``pip install 'cigri[bench]'``): a LocalCluster with one worker of SLOTS cores,
  one Job of N ``/bin/true`` programs, timed from building the job to ``wait_for_jobs``
  returning (server and worker start-up not counted). If it cannot be imported or started,
  the reason is printed and the other figures still are.

Goal (issue): cigri >= 400 tasks/s and at least HyperQueue's rate.

    python bench/local_throughput.py [--tasks N] [--slots S] [--period P] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL = 400.0
BIN = Path(sys.executable).parent

# Run in a child interpreter: HyperQueue's server and worker live in threads of the process
# that starts them, print a banner on stdout, and die with it.
HQ_SCRIPT = r"""
import json, os, sys, time
from hyperqueue import Job, LocalCluster
from hyperqueue.cluster import WorkerConfig
tasks, slots, root = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
work = os.path.join(root, "work")
os.makedirs(work)
with LocalCluster(server_dir=os.path.join(root, "server")) as cluster:
    cluster.start_worker(WorkerConfig(cores=slots))
    client = cluster.client()
    started = time.perf_counter()
    job = Job(default_workdir=work)
    for _ in range(tasks):
        job.program(["/bin/true"])
    ok = client.wait_for_jobs([client.submit(job)], raise_on_error=False)
    seconds = time.perf_counter() - started
print("HQ-RESULT " + json.dumps({"seconds": seconds, "ok": ok}), flush=True)
"""


def run_cigri(root: Path, tasks: int, slots: int, period: float, tap: dict[str, int | str]) -> float:
    """Seconds from launching ``gridsub --wait`` until it exits 0; checks every task terminated."""
    root.mkdir()
    config = root / "cigri.toml"
    text = f'[clusters.local]\nbackend = "local"\nslots = {slots}\nmax_waiting = {max(100_000, tasks)}\n'
    if tap:
        text += "\n[runner]\n" + "".join(f"{key} = {json.dumps(value)}\n" for key, value in tap.items())
    config.write_text(text)
    jdl = root / "campaign.json"
    jdl.write_text(json.dumps({"name": "throughput", "nb_jobs": tasks, "exec_file": "/bin/true",
                               "clusters": {"local": {}}}))
    env = {**os.environ, "CIGRI_HOME": str(root / "home"), "CIGRI_CONFIG": str(config), "NO_COLOR": "1"}
    env.pop("CIGRI_DATABASE", None)
    command = [str(BIN / "gridsub"), "-f", str(jdl), "--wait", "--period", str(period), "--json"]
    try:
        started = time.perf_counter()
        done = subprocess.run(command, env=env, capture_output=True)
        seconds = time.perf_counter() - started
        if done.returncode != 0:
            sys.exit(f"gridsub --wait exited {done.returncode}: {done.stderr.decode()}")
        stat = subprocess.run([str(BIN / "gridstat"), "-c", "1", "--json"], env=env, capture_output=True)
        if stat.returncode != 0:
            sys.exit(f"gridstat failed: {stat.stderr.decode()}")
        counts = json.loads(stat.stdout)["tasks"]
        if counts["terminated"] != tasks:
            sys.exit(f"cigri: {counts['terminated']} of {tasks} tasks terminated: {counts}")
        return seconds
    finally:
        stop_pool(root / "home" / "spool" / "local")


def stop_pool(spool: Path) -> None:
    """The local pool daemon idles for a minute after the last job: stop the one we started."""
    try:
        pid = int((spool / "pool.lock").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass


def run_xargs(tasks: int, slots: int) -> float:
    started = time.perf_counter()
    subprocess.run(f"seq {tasks} | xargs -P {slots} -I{{}} /bin/true", shell=True, check=True)
    return time.perf_counter() - started


def run_hyperqueue(root: Path, tasks: int, slots: int) -> tuple[float | None, str]:
    """(seconds, "") or (None, why it could not run)."""
    root.mkdir()
    try:
        done = subprocess.run([sys.executable, "-c", HQ_SCRIPT, str(tasks), str(slots), str(root)],
                              capture_output=True, timeout=max(600, tasks / 10),
                              env={**os.environ, "TQDM_DISABLE": "1"})
    except subprocess.TimeoutExpired:
        return None, "timed out"
    for line in done.stdout.decode(errors="replace").splitlines():
        if line.startswith("HQ-RESULT "):
            result = json.loads(line.removeprefix("HQ-RESULT "))
            return (result["seconds"], "") if result["ok"] else (None, "some tasks failed")
    err = done.stderr.decode(errors="replace").strip().splitlines()
    return None, (err[-1] if err else f"exit status {done.returncode}")


def spread(rates: list[float]) -> str:
    if len(rates) == 1:
        return f"{rates[0]:.0f} tasks/s"
    return (f"{statistics.median(rates):.0f} tasks/s (median of {len(rates)}; "
            f"min {min(rates):.0f}, max {max(rates):.0f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--slots", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--period", type=float, default=0.02, help="gridsub --period (seconds between cycles)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each system (median, min, max)")
    parser.add_argument("--tap-initial", type=int, help="[runner] tap_initial (default: cigri's)")
    parser.add_argument("--tap-max", type=int, help="[runner] tap_max (default: cigri's)")
    parser.add_argument("--job-ratio", help="[runner] job_ratio (default: cigri's)")
    parser.add_argument("--no-hyperqueue", action="store_true", help="skip the HyperQueue baseline")
    args = parser.parse_args()
    tap = {k: v for k, v in (("tap_initial", args.tap_initial), ("tap_max", args.tap_max),
                             ("job_ratio", args.job_ratio)) if v is not None}
    n = args.tasks
    rates: dict[str, list[float]] = {"cigri": [], "xargs": [], "hyperqueue": []}
    hq_error = "skipped (--no-hyperqueue)" if args.no_hyperqueue else ""
    with tempfile.TemporaryDirectory(prefix="cigri-bench-") as tmp:
        for run in range(args.repeat):  # interleaved, so a busy spell hits every system alike
            rates["cigri"].append(n / run_cigri(Path(tmp) / f"cigri{run}", n, args.slots, args.period, tap))
            rates["xargs"].append(n / run_xargs(n, args.slots))
            if not hq_error:
                seconds, hq_error = run_hyperqueue(Path(tmp) / f"hq{run}", n, args.slots)
                if seconds is not None:
                    rates["hyperqueue"].append(n / seconds)
    cigri = statistics.median(rates["cigri"])
    settings = f"{n:,} tasks of /bin/true, {args.slots} slots"
    print(f"cigri      {settings}, gridsub --wait --period {args.period}"
          f"{''.join(f', {k}={v}' for k, v in tap.items())}: {spread(rates['cigri'])}")
    print(f"xargs      seq {n} | xargs -P {args.slots} -I{{}} /bin/true: {spread(rates['xargs'])}; "
          f"cigri/xargs {cigri / statistics.median(rates['xargs']):.2f}x")
    if rates["hyperqueue"]:
        hq = statistics.median(rates["hyperqueue"])
        print(f"HyperQueue LocalCluster, 1 worker of {args.slots} cores, 1 job of {n:,} tasks: "
              f"{spread(rates['hyperqueue'])}; cigri/HyperQueue {cigri / hq:.2f}x")
    else:
        hq = None
        print(f"HyperQueue not measured: {hq_error}")
    met = cigri >= GOAL and (hq is None or cigri >= hq)
    print(f"goal: cigri >= {GOAL:.0f} tasks/s and >= HyperQueue: {cigri:.0f} tasks/s -> "
          f"{'met' if met else 'NOT met'}{' (HyperQueue unmeasured)' if hq is None else ''}")


if __name__ == "__main__":
    main()
