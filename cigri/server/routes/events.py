"""``/events``: what went wrong, and fixing it."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict, Field

from cigri import api
from cigri.server.request import Session, page_limit, page_offset, session

router = APIRouter(tags=["events"])


@router.get("/events", summary="List events")
def events(session: Session = Depends(session), campaign: int | None = None,
           global_only: bool = Query(False, alias="global", description="Only the clusters' own events."),
           include_closed: bool = Query(False, alias="all", description="Closed events too."),
           limit: int = page_limit(), offset: int = page_offset()) -> list[dict[str, Any]]:
    """As ``gridevents --json``: the caller's campaigns' and the clusters' open events, oldest first."""
    return api.list_events(session.grid, user=session.user, campaign_id=campaign, global_only=global_only,
                           include_closed=include_closed, limit=limit, offset=offset)


@router.get("/events/{event_id}", summary="One event")
def event(event_id: int, session: Session = Depends(session)) -> dict[str, Any]:
    return api.event(session.grid, event_id, user=session.user)


class Fix(BaseModel):
    """Exactly one of ``event``, ``campaign`` or ``global`` chooses the open events to close."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    event: int | None = None
    campaign: int | None = None
    global_: bool = Field(False, alias="global")
    resubmit: bool = False


@router.post("/events/fix", summary="Close events, and resubmit their failed tasks")
def fix(body: Fix, session: Session = Depends(session)) -> dict[str, int]:
    """As ``gridevents --fix [--resubmit]``: closing lifts the blacklists the events hold."""
    return api.fix_events(session.grid, user=session.user, event_id=body.event, campaign_id=body.campaign,
                          global_only=body.global_, resubmit=body.resubmit)
