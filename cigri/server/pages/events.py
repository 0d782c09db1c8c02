"""The events page: the open events the viewer may read, by cluster and campaign, and fixing
(closing, resubmitting) those they may fix."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from cigri import api
from cigri.errors import InputError
from cigri.server.pages.web import (HEADERS, PageRoute, PageSession, Refresh, check_csrf, page_session, refreshing,
                                    render)

router = APIRouter(route_class=PageRoute, include_in_schema=False)


@router.get("/events")
def events(session: PageSession = Depends(page_session), closed: int = 0, resubmitted: int = 0,
           refresh: Refresh = Depends(refreshing)) -> Response:
    """The clusters' own events (an admin fixes them) and those of each campaign (its owner or
    an admin), oldest first, each a collapsed group."""
    by_cluster: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_campaign: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for event in api.list_events(session.grid, user=session.user):
        if event["campaign_id"] is None:
            by_cluster[event["cluster"] or "grid"].append(event)
        else:
            by_campaign[event["campaign_id"]].append(event)
    return render("events.html", session, active="events", by_cluster=dict(sorted(by_cluster.items())),
                  by_campaign=dict(sorted(by_campaign.items())), closed=closed, resubmitted=resubmitted,
                  refresh=refresh)


@router.post("/events/fix")
async def fix(request: Request, session: PageSession = Depends(page_session)) -> Response:
    """``gridevents --fix [--resubmit]`` of one event (``event``) or of a campaign's (``campaign``)."""
    form = await check_csrf(request, session)
    event_id, campaign_id = (_id(form, key) for key in ("event", "campaign"))
    if (event_id is None) == (campaign_id is None):
        raise InputError("fix: name one event or one campaign")
    done = await run_in_threadpool(lambda: api.fix_events(session.grid, user=session.user, event_id=event_id,
                                                          campaign_id=campaign_id,
                                                          resubmit=form.get("resubmit") == "yes"))
    return RedirectResponse(f"/events?closed={done['closed']}&resubmitted={done['resubmitted']}", status_code=303,
                            headers=HEADERS)


def _id(form: dict[str, str], key: str) -> int | None:
    if not form.get(key):
        return None
    if not form[key].isdigit():
        raise InputError(f"{key}: expected an id", field=key)
    return int(form[key])
