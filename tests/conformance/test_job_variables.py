"""The CIGRI_* variables of CiGri's 2009 design reach every job on every backend, as the
runner builds them: the job and campaign ids, the task's name, the working directory, and the
node file where the cluster gives one (OAR's)."""

from __future__ import annotations

import secrets
import time
from pathlib import Path

from backend_targets import Target
from harness import REAL_CLUSTERS
from unix_users import NAMES as USERS, ensure_users
from test_backends import ended, wait

from cigri.backends import RemoteState
from cigri.runner import batch_specs
from cigri.users import acting_user

pytestmark = REAL_CLUSTERS  # the real clusters' capacity is shared: one test at a time

NAMES = ("CIGRI_JOB_ID", "CIGRI_JOBID", "CIGRI_CAMPAIGN_ID", "CIGRI_CAMPAIGNID", "CIGRI_JOB_NAME", "CIGRI_JOBNAME",
         "CIGRI_TASK_NAME", "CIGRI_USER", "CIGRI_WORKDIR", "CIGRI_WORKING_DIRECTORY", "CIGRI_RESOURCES",
         "CIGRI_WALLTIME", "CIGRI_WALLTIME_SECONDS")
PROGRAM = """\
for name in NAMES CIGRI_NODE_FILE CIGRI_NODEFILE; do eval "printf '%s=%s\\n' $name \\"\\${$name}\\""; done > "$1.env"
if [ -n "$CIGRI_NODE_FILE" ]; then cat "$CIGRI_NODE_FILE" > "$1.nodes"; fi
""".replace("NAMES", " ".join(NAMES))


def test_cigri_job_variables(cluster: Target) -> None:
    ensure_users()
    # a real user with a login on every test cluster (where jobs run as their owner); on the local pool,
    # whose directories are this process's, the user running the tests
    owner = USERS[0] if cluster.remote else acting_user()
    directory = cluster.workdir("variables")
    (directory / "show.sh").write_text(PROGRAM)
    job_id, campaign_id = secrets.randbelow(10**9) + 10**9, secrets.randbelow(10**6) + 1
    settings = {"exec_file": "/bin/sh", "exec_directory": str(directory), "resources": "core=1",
                "walltime": max(60, cluster.min_walltime), "type": "normal"}
    row = {"id": job_id, "campaign_id": campaign_id, "kind": "task", "batch": str(job_id), "run_group": None,
           "task": "render-7", "param": "show.sh render-7", "user": owner}
    specs = batch_specs([row], settings, home=str(directory))
    remote_id = cluster.submit(specs)[str(job_id)]
    job = wait(cluster, [remote_id], ended)[remote_id]
    assert (job.state, job.exit_code) == (RemoteState.COMPLETED, 0)
    found = _read(directory / "render-7.env")
    assert {k: found[k] for k in NAMES} == {
        "CIGRI_JOB_ID": str(job_id), "CIGRI_JOBID": str(job_id), "CIGRI_CAMPAIGN_ID": str(campaign_id),
        "CIGRI_CAMPAIGNID": str(campaign_id), "CIGRI_JOB_NAME": "render-7", "CIGRI_JOBNAME": "render-7",
        "CIGRI_TASK_NAME": "render-7", "CIGRI_USER": owner, "CIGRI_WORKDIR": str(directory),
        "CIGRI_WORKING_DIRECTORY": str(directory), "CIGRI_RESOURCES": "core=1",
        "CIGRI_WALLTIME": time.strftime("%H:%M:%S", time.gmtime(settings["walltime"])),
        "CIGRI_WALLTIME_SECONDS": str(settings["walltime"])}
    if cluster.kind == "oar":  # OAR gives a node file: one line per core of the job
        assert found["CIGRI_NODE_FILE"] == found["CIGRI_NODEFILE"] != ""
        assert (directory / "render-7.nodes").read_text().split()
    else:  # Slurm and the local pool give none: the variables are not set rather than wrong
        assert found["CIGRI_NODE_FILE"] == found["CIGRI_NODEFILE"] == ""


def _read(path: Path) -> dict[str, str]:
    deadline = time.monotonic() + 30  # a shared file system may show the file a little late
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    return dict(line.split("=", 1) for line in path.read_text().splitlines())
