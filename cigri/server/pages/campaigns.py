"""The campaigns pages: the list (the viewer's, everyone's for an admin), one campaign with its
figures, failed tasks, events and plots, its tasks found by name, a job's output, and its
owner's pause, resume and cancel."""

from __future__ import annotations

from typing import Any, TypedDict
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from cigri import api
from cigri.errors import InputError
from cigri.server.pages import plots
from cigri.server.pages.web import (HEADERS, PageRoute, PageSession, Refresh, check_csrf, csv_response,
                                    page_session, refreshing, render)
from cigri.states import CAMPAIGN_ACTIVE, TaskState

router = APIRouter(route_class=PageRoute, include_in_schema=False)
PAGE = 50  # campaigns a page of the list shows, tasks a page of a campaign's tasks
FAILED_SHOWN = 10  # failed tasks a campaign's page lists first; all of them on its tasks page
EVENTS_SHOWN = 20  # open events a campaign's page lists (each a collapsed group); all on the events page
HISTORY_POINTS = 200
ACTIONS = {"pause": api.pause, "resume": api.resume, "cancel": api.cancel}
OUTPUT_LINES = 1000  # of a job's stdout or stderr, as the API's default


@router.get("/campaigns")
def campaigns(session: PageSession = Depends(page_session), state: str = "", user: str = "",
              page: int = Query(1, ge=1), refresh: Refresh = Depends(refreshing)) -> Response:
    """Newest first, a page at a time; an admin may choose a user (from a list: nothing typed
    that a refresh would lose), anyone else sees their own."""
    owner = (user.strip() or None) if session.caller.admin else session.user
    rows = api.list_campaigns(session.grid, user=owner, include_finished=True, states=[state] if state else [],
                              limit=PAGE + 1, offset=(page - 1) * PAGE, newest_first=True)
    query = {key: value for key, value in (("state", state), ("user", user)) if value}
    return render("campaigns.html", session, active="campaigns", campaigns=rows[:PAGE], states=api.CAMPAIGN_STATES,
                  state=state, user=user, page=page, refresh=refresh,
                  owners=api.campaign_owners(session.grid) if session.caller.admin else [],
                  **pager(query, page, more=len(rows) > PAGE))


@router.get("/campaigns/{campaign_id}")
def campaign(campaign_id: int, session: PageSession = Depends(page_session), done: str = "",
             refresh: Refresh = Depends(refreshing)) -> Response:
    """Its figures, then what failed: its first failed tasks (each linked to its last job's
    output) and its open events, each a collapsed group; then its clusters and its plots. The
    page's length is bounded however many tasks failed: the rest are on its tasks page."""
    detail = api.campaign_detail(session.grid, campaign_id, user=session.user)
    history = api.campaign_history(session.grid, campaign_id, user=session.user, points=HISTORY_POINTS)
    events = api.list_events(session.grid, user=session.user, campaign_id=campaign_id, limit=EVENTS_SHOWN + 1)
    failed = list(api.campaign_tasks(session.grid, campaign_id, user=session.user, states=("failed",),
                                     limit=FAILED_SHOWN))
    window = urlencode({"from": history["from"], "to": history["to"], "points": HISTORY_POINTS})
    return render("campaign.html", session, active="campaigns", campaign=detail, events=events[:EVENTS_SHOWN],
                  more_events=len(events) > EVENTS_SHOWN, failed=failed, owner=detail["user"] == session.user,
                  done=done if done in ACTIONS else "", window=window,
                  refresh=refresh if detail["state"] in CAMPAIGN_ACTIVE else refresh.settled(),
                  throughput=throughput_chart(history), progress=progress_chart(history))


@router.get("/campaigns/{campaign_id}/tasks")
def tasks(campaign_id: int, session: PageSession = Depends(page_session), name: str = "", state: str = "",
          page: int = Query(1, ge=1)) -> Response:
    """A campaign's tasks (failed ones first asked for), found by name, a page at a time, each
    with its jobs and their outputs. It does not refresh: one types into its search."""
    detail = api.campaign_summary(session.grid, campaign_id, user=session.user)
    rows = list(api.campaign_tasks(session.grid, campaign_id, user=session.user, states=[state] if state else [],
                                   name=name_pattern(name), limit=PAGE + 1, offset=(page - 1) * PAGE))
    query = {key: value for key, value in (("name", name), ("state", state)) if value}
    return render("tasks.html", session, active="campaigns", campaign=detail, tasks=rows[:PAGE], name=name,
                  state=state, states=[s.value for s in TaskState], page=page,
                  **pager(query, page, more=len(rows) > PAGE))


class Pager(TypedDict):
    previous: str | None
    next: str | None


def pager(query: dict[str, str], page: int, *, more: bool) -> Pager:
    """The query strings of the pages before and after ``page`` (None where there is none),
    keeping the page's filters."""
    return {"previous": urlencode({**query, "page": page - 1}) if page > 1 else None,
            "next": urlencode({**query, "page": page + 1}) if more else None}


def name_pattern(search: str) -> str | None:
    """What a search by task name matches: a shell pattern as typed (``input_1*``), else any
    name holding the text."""
    if not search.strip():
        return None
    search = search.strip()
    return search if any(c in search for c in "*?[") else f"*{search}*"


@router.get("/jobs/{job_id}/{stream}")
def output(job_id: int, stream: str, session: PageSession = Depends(page_session)) -> Response:
    """The tail of a job's stdout or stderr, read on its cluster as the job's owner (the use
    case of ``gridstat -j J -O/-E``): its owner's, or an admin's, to read."""
    text = api.job_output(session.grid, job_id, stream, user=session.user, lines=OUTPUT_LINES)
    job = api.job_info(session.grid, job_id, user=session.user)
    return render("output.html", session, active="campaigns", job=job, stream=stream, text=text,
                  lines=OUTPUT_LINES)


def throughput_chart(history: dict[str, Any]) -> plots.LineChart:
    since, until, step = history["from"], history["to"], history["step"]
    series = [plots.Series(name, plots.buckets(rows, "per_hour", since, until, step, missing=0.0), index)
              for index, (name, rows) in enumerate(history["clusters"].items())]
    if len(series) > 1:
        series.append(plots.Series("all clusters", plots.buckets(history["progress"], "per_hour", since, until, step),
                                   7, dashed=True))
    return plots.line_chart("Throughput", series, since=since, until=until, y_label="tasks terminated per hour")


def progress_chart(history: dict[str, Any]) -> plots.LineChart:
    """The campaign's tasks ended (terminated or failed: its progress, as its figures count
    it), and those terminated, in percent of its tasks, at the end of every bucket from the
    window's start: the line ends at the progress the page's figures show."""
    since, until, step, tasks = history["from"], history["to"], history["step"], history["tasks"] or 1

    def percent(key: str, before: str) -> list[plots.Point]:
        rows = history["progress"]
        start = (rows[0][key] - sum(rows[0][k] for k in before.split())) if rows else 0
        return [(since, 100 * start / tasks)] + [(min(since + (i + 1) * step, until), 100 * row[key] / tasks)
                                                for i, row in enumerate(rows)]

    return plots.line_chart(f"Progress (of {history['tasks']} tasks)", [
        plots.Series("tasks ended (terminated or failed)", percent("ended", "terminated failed"), 2),
        plots.Series("tasks terminated", percent("cumulative", "terminated"), 0, dashed=True)],
        since=since, until=until, y_label="% of tasks", y_max=100)


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
    (``cluster`` empty: on all of them, with those failed and the progress)."""
    history = api.campaign_history(session.grid, campaign_id, user=session.user, since=since, until=until,
                                   points=points)
    rows: list[list[Any]] = [[row["at"], plots.iso(row["at"]), "", row["terminated"], row["per_hour"], row["failed"],
                              row["cumulative"], row["ended"], row["percent"]] for row in history["progress"]]
    rows += [[row["at"], plots.iso(row["at"]), name, row["terminated"], row["per_hour"], "", "", "", ""]
             for name, series in history["clusters"].items() for row in series]
    return csv_response(sorted(rows, key=lambda row: (row[0], row[2])),
                        ("at", "at_utc", "cluster", "terminated", "per_hour", "failed", "cumulative", "ended",
                         "percent"),
                        f"cigri-campaign-{campaign_id}-history.csv")
