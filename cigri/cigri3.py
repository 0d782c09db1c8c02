"""CiGri 3.2's JSON documents, built from cigri's own answers: same keys, same layout,
cigri's values (``docs/coming-from-cigri.md`` says which value stands for which). Its REST API
under ``/cigri-api`` (:mod:`cigri.server.routes.cigri3`) answers them to CiGri's clients, and
the commands print them for the scripts written around those clients (``gridstat -d``,
``gridsub -d``)."""

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


def events(items: list[dict[str, Any]], offset: int = 0) -> dict[str, Any]:
    """``GET /campaigns/<id>/events`` and ``GET /events``."""
    return {"items": [{"id": e["id"], "class": e["class"], "code": e["code"], "job_id": e["job_id"],
                       "cluster_id": e["cluster_id"], "cluster_name": e["cluster"],
                       "date_open": date(e["created_at"]), "message": message(e),
                       "parent": None, "state": e["state"]} for e in items],
            "total": sum(e["state"] == "open" for e in items), "offset": offset}


def event(e: dict[str, Any]) -> dict[str, Any]:
    """``GET /events/<id>``: CiGri's event columns from cigri's event."""
    return {"id": e["id"], "class": e["class"], "code": e["code"], "state": e["state"], "job_id": e["job_id"],
            "campaign_id": e["campaign_id"], "cluster_id": e["cluster_id"], "parent": None,
            "date_open": date(e["created_at"]), "date_closed": date(e["closed_at"]),
            "date_update": date(e["updated_at"]), "message": message(e), "notified": None, "checked": None,
            "links": [link("self", f"/events/{e['id']}"), link("parent", "/events")], "cluster_name": e["cluster"]}


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


TINY_THROUGHPUT = 1e-16  # what CiGri answered for no throughput, so that clients may divide by it


def stats(detail: dict[str, Any]) -> dict[str, Any]:
    """``GET /campaigns/<id>/stats`` from ``campaign_detail``: durations in seconds, throughput
    in jobs a second, the remaining time in seconds, and the failure and resubmission rates:
    failed tasks, and jobs that ended otherwise with their task going on, out of those and the
    terminated tasks."""
    tasks = detail["tasks"]
    throughput = detail["throughput_per_second"] or TINY_THROUGHPUT
    left = tasks["pending"] + tasks["waiting"] + tasks["running"]
    remaining = detail["remaining_seconds"]
    ended_otherwise = sum(c["jobs"].get("ended_otherwise", 0) for c in detail["clusters"])
    resubmitted = max(0, ended_otherwise - tasks["failed"] - tasks["cancelled"])
    return {"average_jobs_duration": detail["average_duration"], "stddev_jobs_duration": detail["duration_stddev"],
            "jobs_throughput": throughput, "remaining_time": left / throughput if remaining is None else remaining,
            "failures_rate": _rate(tasks["failed"], tasks["terminated"]),
            "resubmit_rate": _rate(resubmitted, tasks["terminated"])}


def _rate(part: int, terminated: int) -> float:
    return part / (part + terminated) if part + terminated else 0.0


def clusters(table: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """``GET /clusters`` from ``cluster_table``."""
    items = [{"id": c["id"], "name": c["name"], "links": [link("self", f"/clusters/{c['id']}"),
                                                          link("parent", "/clusters")]} for c in table]
    return {"items": items, "total": len(items), "links": [link("self", "/clusters"), link("parent", "/")]}


def cluster(entry: dict[str, Any]) -> dict[str, Any]:
    """``GET /clusters/<id>`` from a ``list_clusters`` entry: its description, never a
    credential, with CiGri's ``stress_factor`` as ``"<stress>/<factor>"``."""
    return {"id": entry["id"], "name": entry["name"], "batch": entry["backend"], "enabled": True,
            "ssh_host": "",  # CiGri's gridclusters -i and -b append it to a string: never null
            "blacklisted": entry["blacklisted"], "under_stress": entry["under_stress"],
            "stress_factor": f"{entry['stress'] or 0}/{entry['stress_factor']}",
            "max_jobs": entry["max_jobs"], "total_slots": entry["total_slots"], "free_slots": entry["free_slots"],
            "links": [link("self", f"/clusters/{entry['id']}"), link("parent", "/clusters")]}


def gridusage(usage: dict[str, Any], cluster_ids: dict[str, int], latest: bool) -> dict[str, Any]:
    """``GET /gridusage`` from ``grid_usage``: a sample per moment, each cluster's resources in
    it (whole slots; cigri does not tell unavailable slots from used ones); ``latest``: the
    last moment only, as CiGri answered without bounds."""
    moments: dict[float, list[dict[str, Any]]] = {}
    for name, buckets in usage["clusters"].items():
        for bucket in buckets:
            moments.setdefault(bucket["at"], []).append({
                "cluster_name": name, "cluster_id": cluster_ids[name], "max_resources": round(bucket["total_slots"]),
                "used_resources": round(bucket["used_slots"]), "used_by_cigri": round(bucket["cigri_running"]),
                "unavailable_resources": 0})
    items = [{"date": int(at), "clusters": moments[at]} for at in sorted(moments)]
    if latest:
        items = items[-1:]
    return {"items": items, "from": int(usage["from"]), "to": int(usage["to"]), "total": len(items),
            "links": [link("self", "/gridusage"), link("parent", "/")]}


def subscription(row: dict[str, Any]) -> dict[str, Any]:
    """An item of ``GET /notifications``: CiGri's ``user_notifications`` columns."""
    return {"grid_user": row["user"], "type": row["kind"], "identity": row["target"], "severity": row["severity"]}


def answer(status: int, title: str, text: str) -> dict[str, Any]:
    """CiGri's one document for an outcome: an acceptance (``202 Accepted``) or an error."""
    return {"status": status, "title": title, "message": text}
