"""``/campaigns``: submit, list, detail, pause, resume, cancel, add parameters, and a
campaign's tasks, jobs, events and JDL."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartParser

from cigri import api
from cigri.errors import InputError, TooLarge
from cigri.server.request import Session, authenticated, page_limit, page_offset, pool, session, upload_by
from cigri.server.auth import Caller

router = APIRouter(tags=["campaigns"])
SPOOL_IN_MEMORY = 1 << 16  # an upload's first bytes are held in memory, the rest in a private file
MAX_JDLS = 100  # campaigns one submission may hold
# Starlette holds each file part's first megabyte in memory before its file: a form of many parts
# would be held whole. The parts of a submission (a JDL, its lines) go to disk after this.
MultiPartParser.spool_max_size = SPOOL_IN_MEMORY
NOWHERE = Path("/nonexistent")  # what a relative param_file is named against: the client read it


@router.get("/campaigns", summary="List campaigns (summaries)")
def list_campaigns(session: Session = Depends(session), user: str | None = None,
                   mine: bool = Query(False, description="Only the caller's campaigns."),
                   state: list[str] = Query([], description="Only campaigns in these states."),
                   include_finished: bool = Query(False, alias="all", description="Ended campaigns too."),
                   name: str | None = Query(None, description="Only campaigns whose name matches this shell "
                                                              "pattern (povray*)."),
                   since: float | None = Query(None, description="Only campaigns submitted at or after this "
                                                                 "time (epoch seconds)."),
                   limit: int = page_limit(), offset: int = page_offset()) -> list[dict[str, Any]]:
    """Campaign summaries, oldest first, as ``gridstat [-a] [-u USER] --json`` (public, as CiGri's)."""
    return api.list_campaigns(session.grid, user=session.user if mine else user, include_finished=include_finished,
                              states=state, name=name, since=since, limit=limit, offset=offset)


@router.post("/campaigns", status_code=201, summary="Submit campaigns")
async def submit(request: Request, caller: Caller = Depends(authenticated),
                 strict: bool = Query(False, description="Refuse CiGri 3.2's forms instead of warning.")
                 ) -> dict[str, Any]:
    """One JDL as ``application/json``; or ``multipart/form-data`` with parts ``jdl`` (one per
    campaign, in order; a file part's name is what errors call it) and, for the i-th JDL naming
    a ``param_file``, its lines as file part ``params.i`` (or ``params_error.i``: why its submitter
    could not open them). All or none, as ``gridsub``; each
    campaign comes back with the warnings of the CiGri forms its JDL used."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip()
    if content_type == "multipart/form-data":
        await upload_by(request, caller)
        form = await request.form(max_files=2 * MAX_JDLS, max_fields=2 * MAX_JDLS, max_part_size=SPOOL_IN_MEMORY)
        try:
            most = pool(request).config.limits.request_body_bytes
            jdls = [await _jdl_part(value, index, form.get(f"params.{index}"), most, form.get(f"params_error.{index}"))
                    for index, value in enumerate(form.getlist("jdl"))]
            if not jdls:
                raise InputError("jdl: no JDL part in the form", field="jdl")
            results = await _submit(request, jdls, caller, strict)
        finally:
            await form.close()
    elif content_type in ("application/json", ""):
        results = await _submit(request, [api.JDLText(utf8_text(await request.body(), "JDL"), NOWHERE, "JDL")], caller,
                                strict)
    else:
        raise InputError(f"Content-Type: expected application/json or multipart/form-data, got {content_type!r}")
    return {"campaigns": [result._asdict() for result in results]}


async def _submit(request: Request, jdls: list[api.JDLText], caller: Caller, strict: bool) -> list[api.Submitted]:
    """Once the whole request is in (uploads spooled), the submission, with a grid of the pool."""
    async with pool(request).grid() as grid:
        return await run_in_threadpool(api.submit_all, grid, jdls, user=caller.user, strict=strict)


async def _jdl_part(value: UploadFile | str, index: int, params: UploadFile | str | None, most: int,
                    unopened: UploadFile | str | None) -> api.JDLText:
    """The ``index``-th JDL of a form, with its parameter lines, or why its submitter could not
    open them (``params_error.i``: the JDL's other mistakes are said with it)."""
    if isinstance(value, UploadFile):
        source = value.filename or f"jdl[{index}]"
        body = await value.read(most + 1)  # a JDL is held whole: no more than any other body
        if len(body) > most:
            raise TooLarge(f"{source}: a JDL of more than {most:,} bytes (limits.request_body_bytes); give its "
                           "parameters as a param_file", field="jdl")
        text = utf8_text(body, source)
    else:
        source, text = f"jdl[{index}]", value
    if params is not None and not isinstance(params, UploadFile):
        raise InputError(f"params.{index}: expected a file part", field=f"params.{index}")
    lines = None if params is None else api.Lines(params.file, params.filename or f"params.{index}")
    return api.JDLText(text, NOWHERE, source, lines, unopened if isinstance(unopened, str) else None)


def utf8_text(body: bytes, source: str) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{source}: not valid UTF-8") from None


@router.get("/campaigns/{campaign_id}", summary="One campaign in detail")
def campaign(campaign_id: int, session: Session = Depends(session)) -> dict[str, Any]:
    """The campaign as ``gridstat -c N --json``: its summary, and per cluster its jobs and figures."""
    return api.campaign_detail(session.grid, campaign_id, user=session.user)


@router.post("/campaigns/{campaign_id}/pause", summary="Pause a campaign")
def pause(campaign_id: int, session: Session = Depends(session)) -> dict[str, Any]:
    api.pause(session.grid, campaign_id, user=session.user)
    return {"id": campaign_id, "state": "paused"}


@router.post("/campaigns/{campaign_id}/resume", summary="Resume a paused campaign")
def resume(campaign_id: int, session: Session = Depends(session)) -> dict[str, Any]:
    api.resume(session.grid, campaign_id, user=session.user)
    return {"id": campaign_id, "state": "in_treatment"}


@router.post("/campaigns/{campaign_id}/cancel", summary="Cancel a campaign")
@router.delete("/campaigns/{campaign_id}", summary="Cancel a campaign (CiGri's DELETE)")
def cancel(campaign_id: int, session: Session = Depends(session)) -> dict[str, Any]:
    """Its open tasks are cancelled now, its jobs killed at the next cycle."""
    api.cancel(session.grid, campaign_id, user=session.user)
    return {"id": campaign_id, "state": "cancelled"}


@router.post("/campaigns/{campaign_id}/tasks", status_code=201, summary="Add parameters to a campaign")
async def extend(campaign_id: int, request: Request, caller: Caller = Depends(authenticated),
                 name: str = Query("PARAMS", description="What errors call the lines (the file's name)."),
                 strict: bool = Query(False, description="Refuse CiGri's JSON array instead of warning.")
                 ) -> dict[str, Any]:
    """The body is parameter lines (``gridsub -c N -F FILE``): read whole into a private spool
    first, so the database is untouched until the upload is complete."""
    await upload_by(request, caller)
    with tempfile.SpooledTemporaryFile(SPOOL_IN_MEMORY) as spool:
        async for chunk in request.stream():
            spool.write(chunk)
        spool.seek(0)
        async with pool(request).grid() as grid:
            added = await run_in_threadpool(api.extend, grid, campaign_id, api.Lines(spool, name),  # type: ignore[arg-type]
                                            user=caller.user, strict=strict)
    return added._asdict()


@router.get("/campaigns/{campaign_id}/tasks", summary="A campaign's tasks with their jobs")
def tasks(campaign_id: int, session: Session = Depends(session), limit: int = page_limit(),
          offset: int = page_offset(), state: list[str] = Query([], description="Only tasks in these states.")
          ) -> list[dict[str, Any]]:
    """As ``gridstat -c N -f --json``, a page at a time (``limit`` tasks after ``offset``)."""
    return list(api.campaign_tasks(session.grid, campaign_id, user=session.user, states=state, limit=limit,
                                   offset=offset))


@router.get("/campaigns/{campaign_id}/share", summary="Why a campaign gets what it gets (its owner)")
def share(campaign_id: int, session: Session = Depends(session)) -> dict[str, Any]:
    """As ``gridstat -c N --why --json``: the campaign's line of ``cigri shares``, readable by
    its owner; the clusters are asked their capacity now."""
    return api.campaign_share(session.grid, campaign_id, user=session.user)


@router.get("/campaigns/{campaign_id}/history", summary="A campaign's tasks terminated over time")
def history(campaign_id: int, session: Session = Depends(session),
            since: float | None = Query(None, alias="from", description="Epoch seconds (default: its start)."),
            until: float | None = Query(None, alias="to", description="Epoch seconds (default: its end, or now)."),
            points: int = Query(200, ge=1, le=10_000, description="Most buckets.")) -> dict[str, Any]:
    """Per cluster its throughput, and the campaign's progress, bucket by bucket (the dashboard's plots)."""
    return api.campaign_history(session.grid, campaign_id, user=session.user, since=since, until=until,
                                points=points)


@router.get("/campaigns/{campaign_id}/jobs", summary="A campaign's jobs")
def jobs(campaign_id: int, session: Session = Depends(session), active: bool = False, limit: int = page_limit(),
         offset: int = page_offset()) -> list[dict[str, Any]]:
    return api.campaign_jobs(session.grid, campaign_id, user=session.user, active_only=active, limit=limit,
                             offset=offset)


@router.get("/campaigns/{campaign_id}/events", summary="A campaign's events")
def events(campaign_id: int, session: Session = Depends(session), include_closed: bool = Query(False, alias="all"),
           limit: int = page_limit(), offset: int = page_offset()) -> list[dict[str, Any]]:
    return api.list_events(session.grid, user=session.user, campaign_id=campaign_id, include_closed=include_closed,
                           limit=limit, offset=offset)


@router.get("/imports/v3/campaigns/{v3_id}", summary="The campaign a CiGri campaign became at cigri import-v3")
def imported(v3_id: int, session: Session = Depends(session)) -> dict[str, int]:
    return {"id": api.imported_campaign(session.grid, v3_id, user=session.user)}


@router.get("/campaigns/{campaign_id}/jdl", summary="The JDL a campaign was submitted with")
def jdl(campaign_id: int, session: Session = Depends(session)) -> dict[str, Any]:
    return api.campaign_jdl(session.grid, campaign_id, user=session.user)


@router.get("/campaigns/{campaign_id}/clusters", summary="A campaign's clusters: its jobs there, prologue and epilogue")
def clusters(campaign_id: int, session: Session = Depends(session)) -> list[dict[str, Any]]:
    return api.campaign_clusters(session.grid, campaign_id, user=session.user)


@router.get("/campaigns/{campaign_id}/throughput", summary="A campaign's tasks terminated over its life")
def throughput(campaign_id: int, session: Session = Depends(session),
               points: int = Query(60, ge=1, le=10_000, description="Buckets of equal length.")) -> dict[str, Any]:
    """As ``gridstat -c N --plot --json``."""
    return api.campaign_throughput(session.grid, campaign_id, user=session.user, points=points)


class Purge(BaseModel):
    """Ended campaigns to purge, by number, or every one that ended more than ``ended_days``
    days ago (admins): one or the other."""

    campaigns: list[int] = Field(default=[], max_length=10_000)
    ended_days: float | None = None


@router.post("/campaigns/purge", summary="Delete ended campaigns with their tasks, jobs and events (all or none)")
def purge_many(body: Purge, session: Session = Depends(session)) -> dict[str, Any]:
    """As ``cigri purge N… | --ended-days D``: each campaign its owner's or an admin's, every
    one ended, or nothing is purged; ``ended_days`` is for admins."""
    if bool(body.campaigns) == (body.ended_days is not None):
        raise InputError("give campaigns or ended_days, not both", field="campaigns")
    if body.ended_days is not None:
        return {"purged": api.purge_ended(session.grid, days=body.ended_days, user=session.user)}
    return {"purged": api.purge(session.grid, body.campaigns, user=session.user)}


@router.post("/campaigns/{campaign_id}/purge", summary="Delete an ended campaign with its tasks, jobs and events")
def purge(campaign_id: int, session: Session = Depends(session)) -> dict[str, Any]:
    """As ``griddel --purge N``: its owner's or an admin's; a campaign still running is refused."""
    api.purge(session.grid, [campaign_id], user=session.user)
    return {"id": campaign_id, "purged": True}
