"""Check that every cluster declared in DIR/cigri.toml (written by up.sh) answers,
the way cigri talks to it: over SSH (paramiko) or REST (httpx).

usage: python smoke.py DIR [ENTRY...]      (needs paramiko and httpx; see smoke.sh)

For each [clusters.*] entry: ssh -> submit a `true` job with sbatch/oarsub and
see it finish; rest -> submit through the API and poll it to its end; plus the
advertised capacity (8 CPUs/cores). Besteffort: on every Slurm ssh entry a
`main` job must preempt (cancel) `besteffort` jobs filling the node; on OAR
(ssh) a normal job must kill a besteffort job; on Grid Engine (ssh) a job in
the queue must have tasks of the best-effort queue killed (qacct: failed 100, exit_status 137), qacct must know a finished job, qsub -w e must
refuse what no queue can run, a PE job gets its slots and h_vmem, and with identity = "sudo" a
job submitted through sudo runs as the first test user. DIR/limits.toml (slurm-b's
partition `capped`, partition QOS with MaxSubmitJobsPerUser, the number in its
comment): with the cap's worth of jobs queued there, one more is refused over
SSH and over REST, and a `main` job is still accepted; (partition `walled`,
MaxWall without DenyOnLimit): a longer job is accepted and pends with reason
QOSMaxWallDurationPerJobLimit. The last line is
`N passed, M failed`; the exit code is 1 when anything failed.
"""
from __future__ import annotations

import re
import sys
import time
import tomllib
from pathlib import Path

import httpx
import paramiko

RESULTS: list[tuple[str, bool]] = []
T0 = time.monotonic()


def check(name: str, cond, detail: str = "") -> bool:
    RESULTS.append((name, bool(cond)))
    mark = "ok  " if cond else "FAIL"
    print(f"{mark} {name}" + (f"  [{detail}]" if detail else "") + f"  ({time.monotonic() - T0:.1f}s)",
          flush=True)
    return bool(cond)


def wait_for(fn, timeout: float = 30.0, step: float = 0.3):
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > end:
            return v
        time.sleep(step)


class Remote:
    """One SSH connection to a cluster front-end; run() returns (rc, stdout, stderr)."""

    def __init__(self, e: dict):
        self.c = paramiko.SSHClient()
        self.c.load_host_keys(e["known_hosts"])
        self.c.set_missing_host_key_policy(paramiko.RejectPolicy())
        self.c.connect(e["host"], port=int(e["port"]), username=e["user"], key_filename=e["key_file"],
                       allow_agent=False, look_for_keys=False, timeout=10)

    def run(self, cmd: str, timeout: float = 60) -> tuple[int, str, str]:
        _, out, err = self.c.exec_command(cmd, timeout=timeout)
        rc = out.channel.recv_exit_status()
        return rc, out.read().decode(), err.read().decode()

    def close(self) -> None:
        self.c.close()


def login(name: str, e: dict) -> Remote | None:
    """The entry's front-end over SSH, or None once a failed check says why."""
    try:
        return Remote(e)
    except Exception as ex:  # noqa: BLE001
        check(f"{name}: ssh login", False, repr(ex))
        return None


def take_output(r: Remote, exec_dir: str, jid: str) -> str:
    """What job ``jid`` wrote to ``smoke-<jid>.out`` in the exec dir, removing the file."""
    return r.run(f"cat {exec_dir}/smoke-{jid}.out; rm -f {exec_dir}/smoke-{jid}.out")[1].strip()


# ---------------------------------------------------------------- Slurm
def slurm_state(r: Remote, jid: str) -> str:
    out = r.run(f"scontrol show job {jid}")[1]
    m = re.search(r"JobState=(\w+)", out)
    return m.group(1) if m else "?"


def slurm_ssh(name: str, e: dict, exec_dir: str) -> None:
    r = login(name, e)
    if r is None:
        return
    try:
        rc, out, err = r.run("sinfo -h -p " + e["partition"] + " -o %C")
        check(f"{name}: sinfo {e['partition']}", rc == 0 and out.strip().endswith("/8"), (out or err).strip())
        part = e["partition"]
        rc, out, err = r.run(f"sbatch --parsable -p {part} -D {exec_dir} -o smoke-%j.out --wrap 'echo smoke $SLURM_JOB_ID'")
        jid = out.strip().split(";")[0]
        if check(f"{name}: sbatch -p {part} echo", rc == 0 and jid.isdigit(), (out or err).strip()):
            st = wait_for(lambda: (s := slurm_state(r, jid)) in ("COMPLETED", "FAILED", "CANCELLED") and s, 30)
            check(f"{name}: job {jid} COMPLETED", st == "COMPLETED", str(st))
            text = take_output(r, exec_dir, jid)
            check(f"{name}: job wrote its output in the exec dir", text == f"smoke {jid}", text)
        slurm_preemption(name, e, r, exec_dir)
    finally:
        r.close()


def slurm_preemption(name: str, e: dict, r: Remote, exec_dir: str) -> None:
    """8 one-CPU besteffort jobs fill the node; a main job must cancel one and run."""
    be, main = e["best_effort_partition"], e["partition"]
    rc, out, err = r.run(f"sbatch --parsable -p {be} --array=0-7 -D {exec_dir} -o /dev/null --wrap 'sleep 300'")
    arr = out.strip()
    if not check(f"{name}: sbatch -p {be} --array=0-7 sleep", rc == 0 and arr.isdigit(), (out or err).strip()):
        return
    try:
        # full = no idle CPU left and some of our tasks run (other users' main jobs may hold CPUs)
        def full():
            idle = r.run(f"sinfo -h -p {main} -o %C")[1].strip().split("/")
            return len(idle) == 4 and idle[1] == "0" and r.run(f"squeue -h -j {arr} -t R -o %i")[1].split()
        running = wait_for(full, 30)
        check(f"{name}: besteffort tasks fill the node", running,
              f"{len(running or [])} of ours running; " + r.run(f"sinfo -h -p {main} -o %C")[1].strip())
        rc, out, err = r.run(f"sbatch --parsable -p {main} -D {exec_dir} -o /dev/null --wrap true")
        jid = out.strip()
        t = time.monotonic()
        st = wait_for(lambda: (s := slurm_state(r, jid)) in ("COMPLETED", "FAILED", "CANCELLED") and s, 60)
        check(f"{name}: main job {jid} preempts besteffort and COMPLETES", st == "COMPLETED",
              f"{st} after {time.monotonic() - t:.1f}s")
        states = r.run(f"squeue -h -t all -j {arr} -o '%i %T'")[1].split("\n")
        preempted = [s.split()[0] for s in states if s.endswith("PREEMPTED")]
        check(f"{name}: a besteffort task is PREEMPTED", preempted, " ".join(preempted))
    finally:
        r.run(f"scancel {arr}")


def slurm_rest(name: str, e: dict, exec_dir: str) -> None:
    token = Path(e["token_file"]).read_text().strip()
    base = e["base_url"].rstrip("/") + "/slurm/v0.0.38"
    with httpx.Client(headers={"X-SLURM-USER-NAME": e["user"], "X-SLURM-USER-TOKEN": token},
                      timeout=10) as s:
        try:
            r = s.get(f"{base}/ping")
        except httpx.HTTPError as ex:
            check(f"{name}: GET ping", False, repr(ex))
            return
        check(f"{name}: GET ping", r.status_code == 200, str(r.status_code))
        nodes = s.get(f"{base}/nodes").json().get("nodes", [])
        check(f"{name}: GET nodes -> 8 cpus", nodes and nodes[0]["cpus"] == 8,
              f"cpus {nodes[0]['cpus']} alloc {nodes[0]['alloc_cpus']}" if nodes else "no node")
        bad = httpx.get(f"{base}/ping", headers={"X-SLURM-USER-NAME": e["user"], "X-SLURM-USER-TOKEN": "x"})
        # slurmrestd 22.05 answers 500 (not 401) to a malformed token
        check(f"{name}: bad token rejected", bad.status_code >= 400, str(bad.status_code))
        for part in (e["partition"], e["best_effort_partition"]):
            job = {"script": "#!/bin/sh\ntrue\n",
                   "job": {"name": "smoke", "partition": part, "current_working_directory": exec_dir,
                           "standard_output": "/dev/null", "environment": {"PATH": "/usr/bin:/bin"}}}
            r = s.post(f"{base}/job/submit", json=job)
            jid = r.json().get("job_id") if r.status_code == 200 else None
            if not check(f"{name}: POST job/submit ({part})", jid, f"job {jid}" if jid else f"{r.status_code} {r.text[:300]}"):
                continue

            def done(jid=jid):
                jobs = s.get(f"{base}/job/{jid}").json().get("jobs") or [{}]
                st = jobs[0].get("job_state")
                return st if st in ("COMPLETED", "FAILED", "CANCELLED", "PREEMPTED") else None
            st = wait_for(done, 30)
            check(f"{name}: job {jid} ({part}) COMPLETED", st == "COMPLETED", str(st))


def slurm_capped(d: Path, only: set[str]) -> None:
    """Partition capped (DIR/limits.toml): CAP jobs fill the cap, one more is refused."""
    f = d / "limits.toml"
    if not f.exists():
        return
    text = f.read_text()
    entries = {n: e for n, e in tomllib.loads(text).get("clusters", {}).items() if e.get("partition") == "capped"}
    ssh_name = next((n for n, e in entries.items() if e.get("transport") == "ssh"), None)
    rest_name = next((n for n, e in entries.items() if e.get("transport") == "rest"), None)
    if ssh_name is None or (only and not only & set(entries)):
        return
    print(f"--- {ssh_name}, {rest_name} (limits.toml)", flush=True)
    m = re.search(r"MaxSubmitJobsPerUser = (\d+)", text)
    if not check(f"{ssh_name}: limits.toml states the cap", m, text.splitlines()[1] if text.count("\n") > 1 else text):
        return
    cap, e, part = int(m.group(1)), entries[ssh_name], entries[ssh_name]["partition"]
    exec_dir = str(d / "exec")
    r = login(ssh_name, e)
    if r is None:
        return
    arr = ""
    try:
        # jobs of ours already queued in the partition count toward the cap too
        queued = len(r.run(f"squeue -h -r -u {e['user']} -p {part} -t PD,R,CG,S -o %i")[1].split())
        if queued < cap:
            rc, out, err = r.run(f"sbatch --parsable -p {part} --array=0-{cap - queued - 1} -D {exec_dir} "
                                 "-o /dev/null --wrap 'sleep 120'")
            arr = out.strip()
            if not check(f"{ssh_name}: {cap - queued} jobs fill the cap of {cap}", rc == 0 and arr.isdigit(),
                         (out or err).strip()):
                return
        rc, out, err = r.run(f"sbatch --parsable -p {part} -D {exec_dir} -o /dev/null --wrap true")
        check(f"{ssh_name}: job {cap + 1} refused by sbatch", rc != 0 and "QOSMaxSubmitJobPerUserLimit" in err,
              f"rc {rc}: " + " | ".join((out + err).strip().splitlines()))
        rc, out, err = r.run(f"sbatch --parsable -p main -D {exec_dir} -o /dev/null --wrap true")
        check(f"{ssh_name}: partition main is not capped", rc == 0 and out.strip().isdigit(), (out or err).strip())
        if rest_name:
            er = entries[rest_name]
            token = Path(er["token_file"]).read_text().strip()
            job = {"script": "#!/bin/sh\ntrue\n",
                   "job": {"name": "smoke-capped", "partition": er["partition"], "current_working_directory": exec_dir,
                           "standard_output": "/dev/null", "environment": {"PATH": "/usr/bin:/bin"}}}
            resp = httpx.post(er["base_url"].rstrip("/") + "/slurm/v0.0.38/job/submit", json=job, timeout=10,
                              headers={"X-SLURM-USER-NAME": er["user"], "X-SLURM-USER-TOKEN": token})
            errs = [x.get("error_code") for x in resp.json().get("errors", [])] if resp.text.startswith("{") else []
            # slurmrestd 22.05: HTTP 500, errors[0].error_code 2050 (ESLURM_ACCOUNTING_POLICY)
            check(f"{rest_name}: job {cap + 1} refused by POST job/submit", resp.status_code >= 400 and 2050 in errs,
                  f"{resp.status_code} {errs}")
    finally:
        if arr:
            r.run(f"scancel {arr}")
        r.close()


def slurm_walled(d: Path, only: set[str]) -> None:
    """Partition walled (DIR/limits.toml): a job over its MaxWall is accepted, then pends for that reason."""
    f = d / "limits.toml"
    if not f.exists():
        return
    entries = {n: e for n, e in tomllib.loads(f.read_text()).get("clusters", {}).items()
               if e.get("partition") == "walled" and e.get("transport") == "ssh"}
    name = next(iter(entries), None)
    if name is None or (only and name not in only):
        return
    print(f"--- {name} (limits.toml)", flush=True)
    r = login(name, entries[name])
    if r is None:
        return
    try:
        rc, out, err = r.run(f"sbatch --parsable -p walled -t 20 -D {d / 'exec'} -o /dev/null --wrap true")
        jid = out.strip()
        if not check(f"{name}: a 20-minute job is accepted", rc == 0 and jid.isdigit(), (out or err).strip()):
            return
        reason = wait_for(lambda: r.run(f"squeue -h -j {jid} -o %r")[1].strip() or None, 10)
        check(f"{name}: it pends for QOSMaxWallDurationPerJobLimit", reason == "QOSMaxWallDurationPerJobLimit",
              str(reason))
        r.run(f"scancel {jid}")
    finally:
        r.close()


# ---------------------------------------------------------------- OAR
def oar_state(r: Remote, jid: str) -> str:
    out = r.run(f"oarstat -s -j {jid}")[1].split()
    return out[-1] if out else "?"


def oar_ssh(name: str, e: dict, exec_dir: str) -> None:
    r = login(name, e)
    if r is None:
        return
    try:
        rc, out, err = r.run("oarnodes -s | grep -c Alive")
        check(f"{name}: oarnodes -> 8 Alive", out.strip() == "8", (out or err).strip())
        rc, out, err = r.run(f"cd {exec_dir} && oarsub -l core=1,walltime=0:05:00 -n smoke 'echo smoke $OAR_JOB_ID'")
        m = re.search(r"OAR_JOB_ID=(\d+)", out)
        if check(f"{name}: oarsub echo", rc == 0 and m, " ".join((out or err).strip().splitlines()[-1:])):
            jid = m.group(1)
            st = wait_for(lambda: (s := oar_state(r, jid)) in ("Terminated", "Error") and s, 60)
            check(f"{name}: job {jid} Terminated", st == "Terminated", str(st))
            f = f"{exec_dir}/OAR.smoke.{jid}"
            text = r.run(f"cat {f}.stdout; rm -f {f}.stdout {f}.stderr")[1].strip()
            check(f"{name}: job wrote its output in the exec dir", text == f"smoke {jid}", text)
        # besteffort: one besteffort job on all 8 cores, then a normal 1-core job kills it
        rc, out, err = r.run(f"cd {exec_dir} && oarsub -t besteffort -l core=8,walltime=0:10:00 -n be 'sleep 300'")
        m = re.search(r"OAR_JOB_ID=(\d+)", out)
        if not check(f"{name}: oarsub -t besteffort core=8", rc == 0 and m, " ".join((out or err).strip().splitlines()[-1:])):
            return
        be = m.group(1)
        try:
            check(f"{name}: besteffort job {be} Running",
                  wait_for(lambda: oar_state(r, be) == "Running", 60), oar_state(r, be))
            rc, out, err = r.run(f"cd {exec_dir} && oarsub -l core=1,walltime=0:05:00 -n prio true")
            jid = re.search(r"OAR_JOB_ID=(\d+)", out).group(1)
            t = time.monotonic()
            st = wait_for(lambda: (s := oar_state(r, jid)) in ("Terminated", "Error") and s, 90)
            check(f"{name}: normal job {jid} kills the besteffort job and Terminates", st == "Terminated",
                  f"{st} after {time.monotonic() - t:.1f}s")
            check(f"{name}: besteffort job {be} ended in Error", oar_state(r, be) == "Error", oar_state(r, be))
        finally:
            r.run(f"oardel {be} >/dev/null 2>&1")
    finally:
        r.close()


def oar_rest(name: str, e: dict, exec_dir: str) -> None:
    """Basic auth with password_file; without, OAR's trusted front (X-Remote-Ident names the user)."""
    base = e["base_url"].rstrip("/")
    if "password_file" in e:
        login = {"auth": (e["user"], Path(e["password_file"]).read_text().strip())}
    else:
        login = {"headers": {"X-Remote-Ident": e["user"]}}
    with httpx.Client(timeout=20, **login) as s:
        try:
            res = s.get(f"{base}/resources.json")
        except httpx.HTTPError as ex:
            check(f"{name}: GET resources", False, repr(ex))
            return
        total = res.json().get("total") if res.status_code == 200 else None
        check(f"{name}: GET resources -> 8", total == 8, f"total {total}" if total else f"{res.status_code} {res.text[:300]}")
        who = s.get(f"{base}/whoami.json").json().get("authenticated_user")
        check(f"{name}: whoami = {e['user']}", who == e["user"], str(who))
        anon = httpx.post(f"{base}/jobs.json", json={"resource": "/core=1", "command": "true"})
        check(f"{name}: anonymous submission rejected", anon.status_code == 401, str(anon.status_code))
        r = s.post(f"{base}/jobs.json", json={"resource": "/core=1,walltime=00:05:00", "command": "true",
                                              "name": "smoke", "directory": exec_dir})
        jid = r.json().get("id") if r.status_code in (200, 201) else None
        if check(f"{name}: POST jobs", jid, f"job {jid}" if jid else f"{r.status_code} {r.text[:300]}"):
            def done():
                st = s.get(f"{base}/jobs/{jid}.json").json().get("state")
                return st if st in ("Terminated", "Error") else None
            st = wait_for(done, 60)
            check(f"{name}: job {jid} Terminated", st == "Terminated", str(st))


# ---------------------------------------------------------------- Grid Engine
def qacct(r: Remote, jid: str) -> dict[str, str]:
    """The accounting record of job (or task ``ID.TASK``) ``jid``, empty until it is written."""
    job, _, task = jid.partition(".")
    rc, out, _ = r.run(f"qacct -j {job}" + (f" -t {task}" if task else ""))
    fields = (line.split(None, 1) for line in out.splitlines() if " " in line.strip())
    return {key: value.strip() for key, value in fields} if rc == 0 else {}


def in_qstat(r: Remote, job: str) -> bool:
    return r.run(f"qstat -j {job}")[0] == 0


def gridengine_ssh(name: str, e: dict, d: Path) -> None:
    exec_dir = str(d / "exec")
    r = login(name, e)
    if r is None:
        return
    try:
        queue, be = e["queue"], e["best_effort_queue"]
        out = r.run("qstat -g c")[1]
        totals = {f[0]: f[5] for f in (line.split() for line in out.splitlines()) if len(f) > 5}
        check(f"{name}: qstat -g c: {queue} and {be} have 8 slots", totals.get(queue) == totals.get(be) == "8",
              str({q: totals.get(q) for q in (queue, be)}))
        # -shell no: the arguments reach the program as they are (with -b y alone a shell splits them again)
        rc, out, err = r.run(f"qsub -terse -b y -shell no -wd {exec_dir} -o 'smoke-$JOB_ID.out' -j y "
                             "/bin/sh -c 'echo smoke $JOB_ID; exit 3'")
        jid = out.strip()
        if check(f"{name}: qsub echo; exit 3", rc == 0 and jid.isdigit(), (out or err).strip()):
            t = time.monotonic()
            left = wait_for(lambda: not in_qstat(r, jid), 30)
            t_left = time.monotonic()
            check(f"{name}: job {jid} left qstat", left, f"after {t_left - t:.1f}s")
            record = wait_for(lambda: qacct(r, jid), 15)
            check(f"{name}: qacct: job {jid} exit_status 3, failed 0",
                  record.get("exit_status") == "3" and record.get("failed", "").split()[:1] == ["0"],
                  f"{record.get('exit_status')}/{record.get('failed')}; in qacct {time.monotonic() - t_left:.1f}s "
                  "after it left qstat")
            text = take_output(r, exec_dir, jid)
            check(f"{name}: job wrote its output in the exec dir", text == f"smoke {jid}", text)
        for ask in ("-pe smp 64", f"-l {e['memory_complex']}=64G"):
            rc, out, err = r.run(f"qsub -w e -terse -b y -shell no -o /dev/null -j y {ask} /bin/true")
            check(f"{name}: qsub -w e {ask} refused", rc != 0 and "no suitable queues" in err,
                  f"rc {rc}: " + " | ".join((out + err).strip().splitlines()))
        rc, out, err = r.run(f"qsub -terse -b y -shell no -pe {e['parallel_environment']} 2 "
                             f"-l {e['memory_complex']}=1500M -wd {exec_dir} -o 'smoke-$JOB_ID.out' -j y "
                             "/bin/sh -c 'echo $NSLOTS $(ulimit -v)'")
        jid = out.strip()
        if check(f"{name}: qsub -pe smp 2 -l h_vmem=1500M", rc == 0 and jid.isdigit(), (out or err).strip()):
            wait_for(lambda: not in_qstat(r, jid), 30)
            text = take_output(r, exec_dir, jid)
            # h_vmem is asked per slot: the job's limit is the sum, in KiB
            check(f"{name}: 2 slots, ulimit -v of 2 x 1500M", text == f"2 {2 * 1500 * 1024}", text)
        if e.get("identity") == "sudo":
            gridengine_sudo(name, r, d)
        gridengine_preemption(name, e, r)
    finally:
        r.close()


def gridengine_sudo(name: str, r: Remote, d: Path) -> None:
    """The front-end's account submits as a test user, whose job the accounting then names."""
    user = (d / "users").read_text().split()[0]
    rc, out, err = r.run(f"sudo -n -u {user} -- qsub -terse -b y -shell no -o /dev/null -j y /bin/true")
    jid = out.strip()
    if check(f"{name}: sudo -u {user} qsub", rc == 0 and jid.isdigit(), (out or err).strip()):
        record = wait_for(lambda: qacct(r, jid), 30)
        check(f"{name}: qacct: job {jid} ran as {user}", record.get("owner") == user, str(record.get("owner")))


def gridengine_preemption(name: str, e: dict, r: Remote) -> None:
    """8 best-effort tasks fill the host; a normal job runs and has one killed."""
    queue, be = e["queue"], e["best_effort_queue"]
    rc, out, err = r.run(f"qsub -terse -b y -shell no -q {be} -t 1-8 -o /dev/null -j y /bin/sleep 300")
    arr = out.strip().split(".")[0]
    if not check(f"{name}: qsub -q {be} -t 1-8 sleep", rc == 0 and arr.isdigit(), (out or err).strip()):
        return
    def running(job: str) -> list[list[str]]:
        """qstat's lines of the job's running tasks (the last field: the task's index)."""
        return [f for f in (line.split() for line in r.run("qstat -s r -u '*'")[1].splitlines()) if f and f[0] == job]

    try:
        check(f"{name}: 8 best-effort tasks run", wait_for(lambda: len(running(arr)) == 8, 30),
              f"{len(running(arr))} running")
        rc, out, err = r.run(f"qsub -terse -b y -shell no -q {queue} -pe {e['parallel_environment']} 2 "
                             "-o /dev/null -j y /bin/sleep 5")
        jid = out.strip()
        t = time.monotonic()
        started = wait_for(lambda: running(jid), 30)
        check(f"{name}: a normal job {jid} starts", started, f"after {time.monotonic() - t:.1f}s")
        killed = wait_for(lambda: len(running(arr)) < 8 and running(arr), 30)
        tasks = {f[-1] for f in killed or []}
        gone = sorted(set(map(str, range(1, 9))) - tasks)
        check(f"{name}: best-effort tasks killed", gone, f"tasks {' '.join(gone)} of {arr}")
        if gone:
            record = wait_for(lambda: qacct(r, f"{arr}.{gone[0]}"), 15)
            check(f"{name}: qacct: task {arr}.{gone[0]} in {be}, failed 100, exit_status 137",
                  record.get("qname") == be and record.get("failed", "").split()[:1] == ["100"]
                  and record.get("exit_status", "").split()[:1] == ["137"],
                  f"{record.get('qname')}, {record.get('failed')}, {record.get('exit_status')}")
    finally:
        r.run(f"qdel {arr}")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    d = Path(argv[0]).resolve()
    clusters = tomllib.loads((d / "cigri.toml").read_text()).get("clusters", {})
    exec_dir = str(d / "exec")
    only = set(argv[1:])
    for name, e in clusters.items():
        if only and name not in only:
            continue
        kind = (e.get("backend"), e.get("transport"))
        print(f"--- {name} ({'/'.join(x for x in kind if x)})", flush=True)
        try:
            if kind == ("slurm", "ssh"):
                slurm_ssh(name, e, exec_dir)
            elif kind == ("slurm", "rest"):
                slurm_rest(name, e, exec_dir)
            elif kind == ("oar", "ssh"):
                oar_ssh(name, e, exec_dir)
            elif kind == ("oar", "rest"):
                oar_rest(name, e, exec_dir)
            elif kind == ("gridengine", "ssh"):
                gridengine_ssh(name, e, d)
            elif e.get("backend") == "local":
                print("     (embedded local backend: nothing to reach)")
            else:
                check(f"{name}: known backend/transport", False, str(kind))
        except Exception as ex:  # noqa: BLE001 - a crash is one failed check, not the end
            check(f"{name}: no exception", False, repr(ex))
    try:
        slurm_capped(d, only)
    except Exception as ex:  # noqa: BLE001
        check("capped: no exception", False, repr(ex))
    try:
        slurm_walled(d, only)
    except Exception as ex:  # noqa: BLE001
        check("walled: no exception", False, repr(ex))
    passed = sum(ok for _, ok in RESULTS)
    failed = len(RESULTS) - passed
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not RESULTS else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
