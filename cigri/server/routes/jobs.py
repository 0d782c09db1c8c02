"""``/jobs/{id}``: one job, as its cluster sees it too, its output's tail, killing it, and marking it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import PlainTextResponse
from pydantic import BaseModel, ConfigDict

from cigri import api
from cigri.server.request import Session, session

router = APIRouter(tags=["jobs"])


@router.get("/jobs/{job_id}", summary="One job")
def job(job_id: int, session: Session = Depends(session)) -> dict[str, Any]:
    """As ``gridstat -j J --json``."""
    return api.job_info(session.grid, job_id, user=session.user)


@router.get("/jobs/{job_id}/stdout", response_class=PlainTextResponse, summary="The tail of a job's stdout")
def stdout(job_id: int, session: Session = Depends(session), lines: int = Query(1000, ge=1, le=100_000)) -> str:
    return api.job_output(session.grid, job_id, "stdout", user=session.user, lines=lines)


@router.get("/jobs/{job_id}/stderr", response_class=PlainTextResponse, summary="The tail of a job's stderr")
def stderr(job_id: int, session: Session = Depends(session), lines: int = Query(1000, ge=1, le=100_000)) -> str:
    return api.job_output(session.grid, job_id, "stderr", user=session.user, lines=lines)


@router.post("/jobs/{job_id}/cancel", summary="Kill one job (its task is cancelled)")
@router.delete("/jobs/{job_id}", summary="Kill one job (CiGri's DELETE)")
def cancel(job_id: int, session: Session = Depends(session)) -> dict[str, Any]:
    api.cancel_job(session.grid, job_id, user=session.user)
    return {"id": job_id, "kill_requested": True}


@router.get("/jobs/{job_id}/remote", summary="One job as its cluster sees it now")
def remote(job_id: int, session: Session = Depends(session)) -> dict[str, Any]:
    """As ``gridstat -j J -C``: state, exit code, node and times, asked of the cluster."""
    return api.job_on_cluster(session.grid, job_id, user=session.user)


class Mark(BaseModel):
    model_config = ConfigDict(extra="forbid")

    message: str = ""


@router.post("/jobs/{job_id}/events", status_code=201, summary="Open a MANUAL_EVENT on a job (admins)")
def mark(job_id: int, body: Mark | None = None, session: Session = Depends(session)) -> dict[str, Any]:
    """As ``gridevents --mark-job-event J``: the event stays open until fixed."""
    return {"id": api.mark_job_event(session.grid, job_id, body.message if body else "", user=session.user)}
