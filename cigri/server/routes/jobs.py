"""``/jobs/{id}``: one job, its output's tail, and killing it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from fastapi.responses import PlainTextResponse

from cigri import api
from cigri.server.app import Session, session

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
