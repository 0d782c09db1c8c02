"""``cigri classes`` and ``cigri users``: the configured classes and user registry with what
each holds now, read from the configuration and the database only. Real commands on the
local pool; every figure below is worked out by hand from the configuration and the JDLs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness import Cigri, wait_for

from cigri import api, config
from cigri.grid import open_grid
from cigri.users import acting_user

ME = acting_user()  # gridsub's user: the campaigns of anyone else go in through the api
SHARES = f"""[clusters.local]
backend = "local"
slots = 8
# bob is a name, not a Unix account: his jobs run as the account running the tests
logins = {{bob = "{ME}"}}
[classes.gold]
policy = "fixed_share"
weight = 3
users = ["{ME}"]
[classes.silver]
priority = 10
default = true
finalize = false
clusters = ["local"]
init_cap = 2
expand_by_doubling = false
[users]
allotment = 4
[users.bob]
allotment = 8
allotment_memory_gb = 16
[users.bob.affinity]
local = 2
[users.carol]
allotment = 2
"""


def _submit_as(cigri: Cigri, user: str, jdl: Path) -> int:
    """gridsub submits as the Unix user running it: another user's campaign goes into the same
    database through the api."""
    grid = open_grid(config.load(environ=cigri.env, system_files=False))
    try:
        return api.submit(grid, jdl.read_text(), base_dir=cigri.tmp, user=user)[0]
    finally:
        grid.close()


def _sleepers(cigri: Cigri, name: str, tasks: int, **fields: Any) -> Path:
    return cigri.jdl(name, exec_file="/bin/sleep", params=[str(300 + i) for i in range(tasks)], **fields)


def _two_users(cigri: Cigri) -> None:
    """Gold (fixed_share, allotment 4 cores): my 3 tasks of 2 cores and 1 GB, of which 2 run.
    Silver (fair_share): my 1 task, and bob's 4 tasks of which max_jobs lets 2 run. 7 cores of 8."""
    cigri.config.write_text(SHARES)
    cigri.submit(_sleepers(cigri, "gold", 3, resources="core=2", memory="1G", **{"class": "gold"}))
    cigri.submit(_sleepers(cigri, "mine", 1))
    _submit_as(cigri, "bob", _sleepers(cigri, "bobs", 4, max_jobs=2))


def _class(name: str, **figures: Any) -> dict[str, Any]:
    settings = {"gold": {"priority": 0, "weight": 3.0, "policy": "fixed_share", "users": [ME], "clusters": None,
                         "default": False, "finalize": None, "init_cap": 0, "expand_by_doubling": True,
                         "campaigns": 1, "users_active": 1},
                "silver": {"priority": 10, "weight": 1.0, "policy": "fair_share", "users": None, "clusters": ["local"],
                           "default": True, "finalize": False, "init_cap": 2, "expand_by_doubling": False,
                           "campaigns": 2, "users_active": 2}}
    return {"name": name, **settings[name], **figures}


def _user(name: str, held_cores: int = 0, held_memory_gb: float = 0.0, **figures: Any) -> dict[str, Any]:
    settings = {"bob": {"configured": True, "allotment": 8, "allotment_memory_gb": 16.0, "affinity": {"local": 2.0},
                        "classes": ["silver"], "campaigns": 1},
                "carol": {"configured": True, "allotment": 2, "allotment_memory_gb": None, "affinity": {},
                          "classes": ["silver"], "campaigns": 0, "pending": 0, "waiting": 0, "running": 0},
                ME: {"configured": False, "allotment": 4, "allotment_memory_gb": None, "affinity": {},
                     "classes": ["gold", "silver"], "campaigns": 2}}
    return {"name": name, **settings[name], **figures,
            "held_non_preemptable": {"cores": held_cores, "memory_gb": held_memory_gb}}


def _users(**rows: dict[str, Any]) -> dict[str, Any]:
    return {"default": {"allotment": 4, "allotment_memory_gb": None, "affinity": {}},
            "users": [rows[name] for name in sorted(rows)]}


def test_classes_and_users_count_what_each_holds_as_the_jobs_queue_then_run(cigri: Cigri) -> None:
    _two_users(cigri)
    assert cigri.json("cigri", "classes") == {"classes": [
        _class("gold", pending=3, waiting=0, running=0), _class("silver", pending=5, waiting=0, running=0)]}
    assert cigri.json("cigri", "users") == _users(
        bob=_user("bob", pending=4, waiting=0, running=0), carol=_user("carol"),
        **{ME: _user(ME, pending=4, waiting=0, running=0)})

    cigri.cycle()  # the jobs are submitted: they wait until the next cycle sees them run
    assert cigri.json("cigri", "classes") == {"classes": [
        _class("gold", pending=1, waiting=2, running=0), _class("silver", pending=2, waiting=3, running=0)]}
    # a queued job holds its cores too; my silver job is preemptable and counts against nothing
    assert cigri.json("cigri", "users") == _users(
        bob=_user("bob", pending=2, waiting=2, running=0), carol=_user("carol"),
        **{ME: _user(ME, 4, 2.0, pending=1, waiting=1 + 2, running=0)})

    def all_running() -> bool:
        cigri.cycle()
        return sum(c["running"] for c in cigri.json("cigri", "classes")["classes"]) == 5

    wait_for(all_running, 60, "the five jobs running", step=0.1)
    assert cigri.json("cigri", "classes") == {"classes": [
        _class("gold", pending=1, waiting=0, running=2), _class("silver", pending=2, waiting=0, running=3)]}
    assert cigri.json("cigri", "users") == _users(
        bob=_user("bob", pending=2, waiting=0, running=2), carol=_user("carol"),
        **{ME: _user(ME, 4, 2.0, pending=1, waiting=0, running=3)})

    classes = cigri.run("cigri", "classes").stdout
    users = cigri.run("cigri", "users").stdout
    assert "\x1b" not in classes + users  # not a terminal: plain text
    rows = {line.split()[0]: line.split() for line in classes.splitlines()[1:]}
    assert rows == {"gold": ["gold", "0", "3", "fixed_share", ME, "all", "no", "best-effort", "1", "1", "1", "0", "2"],
                    "silver": ["silver", "10", "1", "fair_share", "everyone", "local", "yes", "no", "2", "2", "2",
                               "0", "3"]}
    lines = {line.split()[0]: line for line in users.splitlines()}
    assert lines["user"].split() == ["user", "configured", "classes", "campaigns", "pending", "waiting", "running",
                                     "held/allotment", "affinity"]
    assert lines[ME].split()[:7] == [ME, "no", "gold,silver", "2", "1", "0", "3"]
    assert "4/4 cores, 2 GB (no limit)" in lines[ME]
    assert lines["bob"].split()[:7] == ["bob", "yes", "silver", "1", "2", "0", "2"]
    assert "0/8 cores, 0/16 GB" in lines["bob"] and lines["bob"].endswith("local:2")
    assert lines["carol"].split()[1:] == ["yes", "silver", "0", "0", "0", "0", "0/2", "cores"]
    assert lines["defaults:"] == "defaults: allotment 4 cores, memory no limit, affinity none"


def test_without_classes_everything_is_in_the_implicit_default_class(cigri: Cigri) -> None:
    """No class, no [users]: one fair-share class ``default``; paused campaigns are active,
    cancelled ones are not."""
    cigri.submit(_sleepers(cigri, "first", 6))
    paused = cigri.submit(_sleepers(cigri, "paused", 2))
    cancelled = cigri.submit(_sleepers(cigri, "cancelled", 5))
    cigri.run("griddel", "-p", str(paused))
    cigri.run("griddel", str(cancelled))
    assert cigri.json("cigri", "classes") == {"classes": [
        {"name": "default", "priority": 0, "weight": 1.0, "policy": "fair_share", "users": None, "clusters": None,
         "default": True, "finalize": None, "init_cap": 0, "expand_by_doubling": True, "campaigns": 2,
         "users_active": 1, "pending": 6 + 2, "waiting": 0,
         "running": 0}]}
    assert cigri.json("cigri", "users") == {
        "default": {"allotment": None, "allotment_memory_gb": None, "affinity": {}},
        "users": [{"name": ME, "configured": False, "allotment": None, "allotment_memory_gb": None, "affinity": {},
                   "classes": ["default"], "campaigns": 2, "pending": 8, "waiting": 0, "running": 0,
                   "held_non_preemptable": {"cores": 0, "memory_gb": 0.0}}]}
    assert cigri.run("cigri", "users").stdout.splitlines()[-1] == \
        "defaults: allotment no limit, memory no limit, affinity none"
