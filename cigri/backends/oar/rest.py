"""The OAR dialect over its REST API (OAR 2.5 ``oarapi``): requests to send and answer parsers.

Pure: nothing here talks to a cluster. How the script reaches the cluster: ``POST /jobs``
with ``script`` (the API writes it to a file byte for byte in its temporary directory, copies
it into ``workdir`` and submits it from there) and ``param_file`` (written to a file the same
way). The jobs are launched from the home of the login they run as, and the script enters each
job's directory: launched from that directory, a campaign whose directory was the API's own
temporary directory (``/tmp``) was refused (``cp: … are the same file``). Nothing variable goes
into ``command``: OAR 2.5's API pastes the command, and every option, into a ``bash -c "..."``
line escaping only double quotes, so ``$``, backquotes and backslashes would be evaluated.
The options it does get (name, resources, the home, OAR's stderr file, properties, project)
are checked for those characters.
"""

from __future__ import annotations

import re
import urllib.parse
from collections import Counter
from typing import Any

from cigri.backends import Capacity, RemoteJob, node_size
from cigri.backends.oar import batch as batches
from cigri.backends.oar.batch import Batch
from cigri.backends.oar.states import remote_job
from cigri.errors import ClusterBadAnswer, SubmissionRefused

# The characters OAR 2.5's API lets its shell evaluate inside an option value.
_UNSAFE_OPTION = re.compile(r"[`$\\\n]")
CURRENT_STATES = "Finishing,Running,Resuming,Suspended,Launching,toLaunch,Waiting,toAckReservation,Hold"
UNBOUNDED = 1_000_000  # OAR pages every list (500 items by default): ask for all at once
POLL_CHUNK = 400  # job ids per GET: keeps the URL under Apache's 8 KiB request line
# How long after its jobs ended a re-sent batch is still recognised (see recent_jobs).
ADOPT_WINDOW = 3600


def recent_jobs(user: str, now: float) -> list[tuple[str, dict[str, Any]]]:
    """Where a re-sent batch looks for itself (its name, not its ids, is known): the user's
    jobs that have not ended, by state, and those that ended within ``ADOPT_WINDOW``, by date.
    One list by date misses a job between its scheduling and its start (OAR has set its start
    time, its state is toLaunch or Launching, and none of the date query's cases matches it);
    listing every job the user ever had would not scale, so a batch re-sent later than that
    after its jobs ended runs again."""
    return [("/jobs.json", {"user": user, "state": f"{CURRENT_STATES},toError", "limit": UNBOUNDED}),
            ("/jobs.json", {"user": user, "state": "Terminated,Error", "from": int(now) - ADOPT_WINDOW,
                            "limit": UNBOUNDED})]


def named(answer: Any, name: str) -> list[str]:
    """Ids of the jobs in a ``recent_jobs`` answer with the batch's name."""
    return [str(job["id"]) for job in _items(answer) if job.get("name") == name]


def job(remote_id: str) -> str:
    return f"/jobs/{remote_id}.json"


def array_of(answer: Any) -> str:
    """The array id in a ``job`` answer."""
    if not isinstance(answer, dict) or answer.get("array_id") is None:
        raise ClusterBadAnswer(f"job record without array_id: {str(answer)[:200]}")
    return str(answer["array_id"])


def array_jobs(array_id: str) -> tuple[str, dict[str, Any]]:
    """Every job of an array, in any state, with its command."""
    return "/jobs/details.json", {"array": array_id, "limit": UNBOUNDED}


def found_ids(answer: Any, keys: list[str]) -> dict[str, str]:
    """``{key: job id}`` of a re-sent batch, from its array's ``array_jobs``."""
    found = {job[1]: str(record["id"]) for record in _items(answer)
             if (job := batches.job_of(str(record.get("command") or ""))) is not None}
    if any(key not in found for key in keys):
        raise ClusterBadAnswer(f"the array named after the batch lacks some of its jobs: {sorted(found)}")
    return {key: found[key] for key in keys}


def submit(batch: Batch, home: str) -> dict[str, Any]:
    """The ``POST /jobs.json`` payload submitting the batch as one array job, launched from
    ``home`` (the login's), OAR's own stderr in the batch's launch directory."""
    payload: dict[str, Any] = {
        "name": batch.name,
        "resource": batch.resources,
        "workdir": home,  # where the API copies the script and runs oarsub: never its temporary directory
        "directory": home,
        "stdout": "/dev/null",
        "stderr": f"{batch.launch_directory.rstrip('/')}/{batch.oar_stderr}",
    }
    if batch.properties:
        payload["property"] = batch.properties
    if batch.project:
        payload["project"] = batch.project
    if batch.types:
        payload["type"] = list(batch.types)  # oarapi passes each element as one --type
    for option, value in payload.items():
        if any(_UNSAFE_OPTION.search(word) for word in ([value] if isinstance(value, str) else value)):
            raise SubmissionRefused(f"{option} {value!r}: OAR's REST API would let its shell evaluate "
                                    "$, backquotes or backslashes in it")
    return {**payload, "script": batch.script, "param_file": batch.parameter_file}


def parse_submitted(answer: Any, keys: list[str]) -> dict[str, str]:
    """The jobs' ids, or oarsub's refusal: oarapi answers 400 for some of oarsub's exit statuses
    and 500 for the others, admission rules' refusals (254) among them; any other 500 is the
    API's own failure. No oarsub exit is transient: oarsub retries OAR's database until it
    answers, so an outage there is a hang, which the HTTP timeout reports as the cluster's."""
    if isinstance(answer, dict) and "cmd_output" not in answer and answer.get("message"):
        message = str(answer["message"])
        if answer.get("code") == 500 and not message.startswith("Oarsub command exited"):
            raise ClusterBadAnswer(f"oarapi failed: {message.strip()[-300:]}")
        words = message.split("\nCmd:", 1)[0]  # then the whole oarsub line: noise
        raise SubmissionRefused(f"oarsub refused the batch: {words.strip()[-300:]}")
    output = str(answer.get("cmd_output", "")) if isinstance(answer, dict) else ""
    ids = batches.submitted_ids(output)
    if len(ids) != len(keys):
        raise ClusterBadAnswer(f"oarsub printed {len(ids)} job ids for {len(keys)} jobs: {output[-300:]!r}")
    return dict(zip(keys, ids))


def poll(remote_ids: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """``GET`` requests reading the given jobs in full (state, exit code, events, nodes, times)."""
    return [("/jobs/details.json", {"ids": ":".join(chunk), "limit": len(chunk)})
            for chunk in (remote_ids[i:i + POLL_CHUNK] for i in range(0, len(remote_ids), POLL_CHUNK))]


def parse_poll(answer: Any) -> dict[str, RemoteJob]:
    """Jobs OAR does not know are simply absent."""
    found = {}
    for record in _items(answer):
        job_id = str(record.get("id"))
        nodes = [n.get("network_address") for n in record.get("nodes") or []  # "scheduled": only planned
                 if isinstance(n, dict) and n.get("status") == "assigned"]
        events = [str(event.get("type")) for event in record.get("events") or []]
        found[job_id] = remote_job(job_id, str(record.get("state")), events, record.get("exit_code"),
                                   nodes[0] if nodes else None, record.get("start_time"), record.get("stop_time"))
    return found


def files(answer: Any) -> dict[str, tuple[str, str]]:
    """``{job id: (owner, file prefix)}`` of a ``poll`` answer's jobs of a batch: where each
    writes (see :func:`.batch.file_prefix`) and as whom its files are read."""
    return {str(record.get("id")): (str(record.get("owner") or ""), prefix) for record in _items(answer)
            if (prefix := batches.file_prefix(str(record.get("command") or ""))) is not None}


def output_tail(answer: Any, stream: str, lines: int, member: int | None = None) -> str | None:
    """``GET`` path of the last lines of a job's (or its ``member``-th grouped job's) ``stream``
    (media API), from its ``job`` answer.

    None if the job is not cigri's, or if its directory is not plain: the media API runs
    ``tail`` on the path through a shell, unquoted.
    """
    command = str(answer.get("command") or "") if isinstance(answer, dict) else ""
    path = batches.output_path(command, stream, member)
    if path is None or batches.launch_directory(path) != path:
        return None
    return f"{media(path)}?tail={lines}"


def media(path: str) -> str:
    """``GET`` path of a file (a plain path: the media API hands it to a shell unquoted)."""
    return f"/media{urllib.parse.quote(path)}"


def active_by_array(answer: Any) -> dict[str, list[str]]:
    """The jobs of a ``poll`` answer that have not ended, by array id: only those need a kill."""
    arrays: dict[str, list[str]] = {}
    for record in _items(answer):
        if record.get("state") not in ("Terminated", "Error"):
            arrays.setdefault(str(record.get("array_id")), []).append(str(record.get("id")))
    return arrays


def running(answer: Any) -> list[str]:
    """The jobs of a ``poll`` answer whose command runs: only those can take a signal."""
    return [str(record.get("id")) for record in _items(answer) if record.get("state") == "Running"]


def terminate(remote_id: str) -> str:
    """``POST`` path sending SIGTERM (15) to a running job's command (``oardel -s``)."""
    return f"/jobs/{remote_id}/signals/15.json"


def array_members(array_id: str) -> tuple[str, dict[str, Any]]:
    """The jobs of an array that have not ended."""
    return "/jobs.json", {"array": array_id, "state": CURRENT_STATES, "limit": UNBOUNDED}


def ids(answer: Any) -> set[str]:
    return {str(record.get("id")) for record in _items(answer)}


def cancel_array(array_id: str) -> str:
    """``POST`` path killing every job of an array at once (``oardel --array``)."""
    return f"/jobs/array/{array_id}/deletions/new.json"


def cancel(remote_id: str) -> str:
    """``DELETE`` path of one job (OAR 2.5 kills several at once only as a whole array)."""
    return f"/jobs/{remote_id}.json"


def resources() -> tuple[str, dict[str, Any]]:
    return "/resources/full.json", {"limit": UNBOUNDED}


def busy_resources() -> str:
    """Running job ids per resource id (``GET /resources/<property>/jobs``)."""
    return "/resources/resource_id/jobs.json"


def waiting_jobs() -> tuple[str, dict[str, Any]]:
    """A one-item page of the waiting jobs: its ``total`` is the count."""
    return "/jobs.json", {"state": "Waiting", "limit": 1}


def parse_capacity(resources_answer: Any, busy_answer: Any, waiting_answer: Any,
                   cluster_properties: str = "") -> Capacity:
    """Slots are OAR resources: ``Alive`` ones count, those running a job are busy. A node's
    size is its count of them (OAR's ``network_address``); OAR says nothing of its memory.

    The cluster's ``properties`` restrict the count when they are ``name = 'value'`` terms
    joined by ``AND`` (what CiGri understood too); other SQL cannot be applied here.
    """
    wanted = _equalities(cluster_properties)
    alive = {str(r.get("id")): r.get("network_address") for r in _items(resources_answer)
             if r.get("state") == "Alive" and all(str(r.get(k)) == v for k, v in wanted.items())}
    busy = {str(r.get("resource_id")) for r in _items(busy_answer) if r.get("jobs")}
    queued = waiting_answer.get("total", 0) if isinstance(waiting_answer, dict) else 0
    node_cores, _ = node_size((cores, None) for cores in Counter(alive.values()).values())
    return Capacity(len(alive), len(alive.keys() - busy), int(queued), node_cores=node_cores)


def _equalities(properties: str) -> dict[str, str]:
    terms = [t.strip() for t in re.split(r"\s+AND\s+", properties.strip(), flags=re.IGNORECASE) if t.strip()]
    pairs = [re.fullmatch(r"\(?\s*(\w+)\s*=\s*'([^']*)'\s*\)?", t) for t in terms]
    return {m[1]: m[2] for m in pairs if m} if all(pairs) else {}


def _items(answer: Any) -> list[dict[str, Any]]:
    """The items of an OAR collection (every list answer is one)."""
    if not isinstance(answer, dict) or not isinstance(answer.get("items"), list):
        raise ClusterBadAnswer(f"expected an OAR collection, got {str(answer)[:200]}")
    return [item for item in answer["items"] if isinstance(item, dict)]
