"""The campaigns pages: the list (the viewer's, everyone's for an admin), one campaign with its
figures, plots, events and failed tasks, and its owner's pause, resume and cancel."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from cigri import api
from cigri.errors import InputError
from cigri.server.pages import plots
from cigri.server.pages.web import HEADERS, PageRoute, PageSession, check_csrf, csv_response, page_session, render

router = APIRouter(route_class=PageRoute, include_in_schema=False)
PAGE = 50  # campaigns a page of the list shows
FAILED_SHOWN = 50  # failed tasks a campaign's page lists
HISTORY_POINTS = 200
ACTIONS = {"pause": api.pause, "resume": api.resume, "cancel": api.cancel}


@router.get("/campaigns")
def campaigns(session: PageSession = Depends(page_session), state: str = "", user: str = "",
              page: int = Query(1, ge=1)) -> Response:
    """Newest first, a page at a time; an admin may choose a user, anyone else sees their own."""
    owner = (user.strip() or None) if session.caller.admin else session.user
    rows = api.list_campaigns(session.grid, user=owner, include_finished=True, states=[state] if state else [],
                              limit=PAGE + 1, offset=(page - 1) * PAGE, newest_first=True)
    query = {key: value for key, value in (("state", state), ("user", user)) if value}
    return render("campaigns.html", session, active="campaigns", campaigns=rows[:PAGE], states=api.CAMPAIGN_STATES,
                  state=state, user=user, page=page,
                  previous=urlencode({**query, "page": page - 1}) if page > 1 else None,
                  next=urlencode({**query, "page": page + 1}) if len(rows) > PAGE else None)


@router.get("/campaigns/{campaign_id}")
def campaign(campaign_id: int, session: PageSession = Depends(page_session), done: str = "",
             refresh: int = Query(0, ge=0)) -> Response:
    detail = api.campaign_detail(session.grid, campaign_id, user=session.user)
    history = api.campaign_history(session.grid, campaign_id, user=session.user, points=HISTORY_POINTS)
    events = api.list_events(session.grid, user=session.user, campaign_id=campaign_id)
    failed = list(api.campaign_tasks(session.grid, campaign_id, user=session.user, states=("failed",),
                                     limit=FAILED_SHOWN + 1))
    window = urlencode({"from": history["from"], "to": history["to"], "points": HISTORY_POINTS})
    return render("campaign.html", session, active="campaigns", campaign=detail, events=events,
                  failed=failed[:FAILED_SHOWN], more_failed=len(failed) > FAILED_SHOWN,
                  owner=detail["user"] == session.user, done=done if done in ACTIONS else "",
                  refresh=max(10, refresh) if refresh else 0, window=window,
                  throughput=throughput_chart(history), progress=progress_chart(history))


def throughput_chart(history: dict[str, Any]) -> plots.LineChart:
    since, until, step = history["from"], history["to"], history["step"]
    series = [plots.Series(name, plots.buckets(rows, "per_hour", since, until, step, missing=0.0), index)
              for index, (name, rows) in enumerate(history["clusters"].items())]
    if len(series) > 1:
        every = plots.buckets(history["progress"], "terminated", since, until, step, missing=0.0)
        series.append(plots.Series("all clusters", [(t, 3600 * (n or 0) / step) for t, n in every], 7, dashed=True))
    return plots.line_chart("Throughput", series, since=since, until=until, y_label="tasks terminated per hour")


def progress_chart(history: dict[str, Any]) -> plots.LineChart:
    since, until, step = history["from"], history["to"], history["step"]
    return plots.line_chart(f"Progress (of {history['tasks']} tasks)", [
        plots.Series("tasks terminated", plots.buckets(history["progress"], "percent", since, until, step), 2)],
        since=since, until=until, y_label="% of tasks terminated", y_max=100)


@router.post("/campaigns/{campaign_id}/{action}")
async def act(campaign_id: int, action: str, request: Request,
              session: PageSession = Depends(page_session)) -> Response:
    """Pause, resume or cancel (confirmed by a ticked box), from the campaign's page."""
    form = await check_csrf(request, session)
    if action not in ACTIONS:
        raise InputError(f"{action}: expected pause, resume or cancel", field="action")
    if action == "cancel" and form.get("confirm") != "yes":
        raise InputError("cancel: tick the box that confirms it", field="confirm")
    await run_in_threadpool(ACTIONS[action], session.grid, campaign_id, user=session.user)
    return RedirectResponse(f"/campaigns/{campaign_id}?done={action}", status_code=303, headers=HEADERS)


@router.get("/campaigns/{campaign_id}/history.json")
def history_json(campaign_id: int, session: PageSession = Depends(page_session),
                 since: float | None = Query(None, alias="from"), until: float | None = Query(None, alias="to"),
                 points: int = Query(HISTORY_POINTS, ge=1, le=10_000)) -> Response:
    """The API's ``/campaigns/N/history`` answer for the same window."""
    return JSONResponse(api.campaign_history(session.grid, campaign_id, user=session.user, since=since, until=until,
                                             points=points), headers=HEADERS)


@router.get("/campaigns/{campaign_id}/history.csv")
def history_csv(campaign_id: int, session: PageSession = Depends(page_session),
                since: float | None = Query(None, alias="from"), until: float | None = Query(None, alias="to"),
                points: int = Query(HISTORY_POINTS, ge=1, le=10_000)) -> Response:
    """Both plotted series, one row per bucket: the tasks terminated there on each cluster
    (``cluster`` empty: on all of them, with the progress)."""
    history = api.campaign_history(session.grid, campaign_id, user=session.user, since=since, until=until,
                                   points=points)
    rows: list[list[Any]] = [[row["at"], plots.iso(row["at"]), "", row["terminated"],
                              round(3600 * row["terminated"] / history["step"], 3), row["cumulative"], row["percent"]]
                             for row in history["progress"]]
    rows += [[row["at"], plots.iso(row["at"]), name, row["terminated"], row["per_hour"], "", ""]
             for name, series in history["clusters"].items() for row in series]
    return csv_response(sorted(rows, key=lambda row: (row[0], row[2])),
                        ("at", "at_utc", "cluster", "terminated", "per_hour", "cumulative", "percent"),
                        f"cigri-campaign-{campaign_id}-history.csv")
