"""``/clusters`` and ``/gridusage``: the clusters, cigri's use of them over time, and the
admin's operations on them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict

from cigri import api
from cigri.server.request import Session, session

router = APIRouter(tags=["clusters"])


@router.get("/clusters", summary="List clusters")
def clusters(session: Session = Depends(session)) -> list[dict[str, Any]]:
    """As ``gridclusters --json``: slots, cigri's use and cap, blacklist."""
    return api.list_clusters(session.grid)


@router.get("/clusters/config", summary="The clusters as configured, with their options")
def cluster_table(session: Session = Depends(session)) -> list[dict[str, Any]]:
    """As ``cigri cluster list --json``."""
    return api.cluster_table(session.grid)


@router.get("/gridusage", summary="The grid's use over time, per cluster")
def gridusage(session: Session = Depends(session),
              since: float | None = Query(None, alias="from", description="Epoch seconds (default: a day ago)."),
              until: float | None = Query(None, alias="to", description="Epoch seconds (default: now)."),
              points: int = Query(500, ge=1, le=10_000, description="Most samples per cluster (averaged buckets).")
              ) -> dict[str, Any]:
    """CiGri's ``/gridusage``: per cluster, its total and free slots and cigri's running and
    waiting jobs, sampled by every cycle and averaged into at most ``points`` buckets."""
    return api.grid_usage(session.grid, since=since, until=until, points=points)


@router.get("/gridusage/core-hours", summary="Core-hours of cigri's jobs per user, cluster and day")
def core_hours(session: Session = Depends(session), hours: float = Query(24.0, gt=0)) -> list[dict[str, Any]]:
    """As ``gridclusters --history HOURS --by-user --json``: the caller's, or everyone's for an admin."""
    return api.core_hours(session.grid, hours, user=session.user)


@router.get("/gridusage/summary", summary="Each cluster's use over the last hours")
def usage_summary(session: Session = Depends(session), hours: float = Query(24.0, gt=0)) -> list[dict[str, Any]]:
    """As ``gridclusters --history HOURS --json``."""
    return api.usage(session.grid, hours)


class NewCluster(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    backend: str = "local"
    options: dict[str, Any] = {}


@router.post("/clusters", status_code=201, summary="Add a cluster (admins)")
def add(body: NewCluster, session: Session = Depends(session)) -> dict[str, Any]:
    api.add_cluster(session.grid, body.name, body.backend, body.options, user=session.user)
    return {"name": body.name}


@router.delete("/clusters/{name}", summary="Remove a cluster no campaign uses (admins)")
def remove(name: str, session: Session = Depends(session)) -> dict[str, Any]:
    api.remove_cluster(session.grid, name, user=session.user)
    return {"name": name, "removed": True}


class Blacklist(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = "blacklisted by an admin"


@router.post("/clusters/{name}/blacklist", summary="Drain a cluster (admins)")
def blacklist(name: str, body: Blacklist, session: Session = Depends(session)) -> dict[str, Any]:
    api.set_blacklist(session.grid, name, body.reason, user=session.user)
    return {"name": name, "blacklisted": True}


@router.post("/clusters/{name}/cancel-campaigns", summary="Cancel every running campaign that may use a cluster (admins)")
def cancel_campaigns(name: str, session: Session = Depends(session)) -> dict[str, Any]:
    """As ``cigri cluster cancel-campaigns NAME``: their jobs are killed everywhere."""
    return {"cancelled": api.cancel_cluster_campaigns(session.grid, name, user=session.user)}


@router.post("/clusters/{name}/unblacklist", summary="Send jobs to a cluster again (admins)")
def unblacklist(name: str, session: Session = Depends(session)) -> dict[str, Any]:
    api.set_blacklist(session.grid, name, None, user=session.user)
    return {"name": name, "blacklisted": False}


class ClusterTest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    directory: str | None = None
    timeout: float = 120.0


@router.post("/clusters/{name}/test", summary="Run a tiny job on a cluster (admins)")
def test(name: str, body: ClusterTest, session: Session = Depends(session)) -> dict[str, Any]:
    return api.test_cluster(session.grid, name, body.directory, body.timeout, user=session.user)
