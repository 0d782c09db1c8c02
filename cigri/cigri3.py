"""CiGri 3.2's JSON documents, built from cigri's own answers: same keys, same layout,
cigri's values (``docs/coming-from-cigri.md`` says which value stands for which). The commands
print them for the scripts written around CiGri's clients (``gridstat -d``, ``gridsub -d``)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any


def dump(document: Any, pretty: bool = False) -> str:
    """Ruby's ``JSON.generate`` (compact) or ``JSON.pretty_generate`` (``-p``), UTF-8 as is,
    with the final newline CiGri's API added."""
    if pretty:
        return json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n"


def date(epoch: float | None) -> str | None:
    """A time as CiGri's database gave it to its API: local, ISO 8601 with the offset."""
    return None if epoch is None else datetime.fromtimestamp(epoch).astimezone().isoformat(timespec="seconds")


def link(rel: str, href: str, title: str | None = None) -> dict[str, str]:
    return {"rel": rel, "href": href} if title is None else {"rel": rel, "href": href, "title": title}


def campaign(summary: dict[str, Any], clusters: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``GET /campaigns/<id>`` (with ``clusters``: ``campaign_clusters``' entries) from a summary."""
    campaign_id = summary["id"]
    document: dict[str, Any] = {
        "id": campaign_id, "name": summary["name"], "user": summary["user"], "state": summary["state"],
        "has_events": summary["open_events"] > 0, "submission_time": int(summary["submitted_at"]),
        "total_jobs": summary["tasks"]["total"], "finished_jobs": summary["tasks"]["terminated"],
        "links": [link("self", f"/campaigns/{campaign_id}"), link("parent", "/campaigns"),
                  link("collection", f"/campaigns/{campaign_id}/jobs", "jobs"),
                  link("collection", f"/campaigns/{campaign_id}/events", "events"),
                  link("item", f"/campaigns/{campaign_id}/jdl", "jdl")]}
    if clusters is not None:
        document["clusters"] = {str(c["cluster_id"]): {"cluster_name": c["cluster"], "active_jobs": c["active_jobs"],
                                                       "queued_jobs": c["queued_jobs"], "prologue_ok": c["prologue_ok"],
                                                       "epilogue_ok": c["epilogue_ok"]} for c in clusters}
    return document


def campaigns(summaries: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """``GET /campaigns``."""
    items = [campaign(s) for s in summaries]
    return {"items": items, "total": len(items), "links": [link("self", "/campaigns"), link("parent", "/")]}


def jobs(campaign_id: int, total: int, tasks: Iterable[dict[str, Any]], offset: int, limit: int) -> dict[str, Any]:
    """``GET /campaigns/<id>/jobs``: a row per job of the page's tasks, a ``pending`` row for a
    task without a job, and a ``next`` link while tasks are left."""
    items, count = [], 0
    for task in tasks:
        count += 1
        for job in task["jobs"] or [None]:
            items.append({"id": task["id"], "name": task["name"], "parameters": task["param"],
                          "cluster": job and job["cluster"], "cigri_job_id": job and job["id"],
                          "remote_id": job and integer(job["remote_id"]),
                          "state": job["state"] if job else task["state"],
                          "href": f"/campaigns/{campaign_id}/jobs/{task['id']}"})
    links = [link("self", f"/campaigns/{campaign_id}/jobs"), link("parent", f"/campaigns/{campaign_id}")]
    if offset + count < total:
        links.append(link("next", f"/campaigns/{campaign_id}/jobs?limit={limit}&offset={offset + limit}"))
    return {"items": items, "total": total, "offset": offset, "limit": limit, "links": links}


def integer(value: str | None) -> int | str | None:
    """A remote or batch id as CiGri's integer columns held it (a grouped job's ``N+K`` stays text)."""
    return int(value) if value is not None and value.isdigit() else value


def message(event: dict[str, Any]) -> str:
    """An event's message with its stderr tail, as CiGri wrote the tail into the message."""
    tail = (event.get("stderr_tail") or "").rstrip("\n")
    return f"{event['message']}\n{tail}" if tail else event["message"]


def events(items: list[dict[str, Any]]) -> dict[str, Any]:
    """``GET /campaigns/<id>/events``."""
    return {"items": [{"id": e["id"], "class": e["class"], "code": e["code"], "job_id": e["job_id"],
                       "cluster_id": e["cluster_id"], "cluster_name": e["cluster"],
                       "date_open": date(e["created_at"]), "message": message(e),
                       "parent": None, "state": e["state"]} for e in items],
            "total": sum(e["state"] == "open" for e in items), "offset": 0}


def job(info: dict[str, Any]) -> dict[str, Any]:
    """``GET /jobs/<id>``: CiGri's job columns from cigri's job."""
    return {"id": info["id"], "param": info["param"], "grid_user": info["user"], "campaign_id": info["campaign_id"],
            "param_id": info["task_id"], "batch_id": integer(info["batch"]), "cluster_id": info["cluster_id"],
            "collect_id": None, "state": info["state"], "return_code": info["exit_code"],
            "submission_time": date(info["submitted_at"]), "start_time": date(info["started_at"]),
            "stop_time": date(info["finished_at"]), "node_name": info["node"], "resources_used": None,
            "remote_id": integer(info["remote_id"]), "tag": None if info["kind"] == "task" else info["kind"],
            "runner_options": None,
            "links": [link("self", f"/jobs/{info['id']}"), link("parent", "/jobs")], "cluster_name": info["cluster"]}

