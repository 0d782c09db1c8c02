"""The grid page: a card per cluster, and the grid's usage over a window, plotted and as data."""

from __future__ import annotations

from collections import Counter
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query
from fastapi.responses import JSONResponse, Response

from cigri import api
from cigri import db as database
from cigri.errors import InputError
from cigri.server.pages import plots
from cigri.server.pages.web import (HEADERS, PageRoute, PageSession, Refresh, csv_response, page_session,
                                    refreshing, render)

router = APIRouter(route_class=PageRoute, include_in_schema=False)
RANGES = {"1h": 3600, "24h": 86_400, "7d": 7 * 86_400, "30d": 30 * 86_400}
SHORTEST = 600  # seconds: the window of a grid younger than that (or without a sample)
POINTS = 240  # buckets per cluster: three pixels each
USAGE_COLUMNS = ("total_slots", "used_slots", "free_slots", "cigri_running", "cigri_waiting", "samples")
# What a cluster's chart draws of its series: the name, the style, dashed.
USAGE_LINES = (("total_slots", "total slots", 7, True), ("used_slots", "used slots", 1, False),
               ("cigri_running", "cigri running", 0, False), ("cigri_waiting", "cigri waiting", 3, True))


@router.get("/")
def grid(session: PageSession = Depends(page_session), range_: str = Query("", alias="range"),
         refresh: Refresh = Depends(refreshing)) -> Response:
    """The clusters now, and their use over a window: a range chosen (``?range=``), or by
    default one that fits the grid's age (:func:`fitting_window`)."""
    if range_ and range_ not in RANGES:
        raise InputError(f"range: expected one of {', '.join(RANGES)}", field="range")
    until = database.now()
    since = until - RANGES[range_] if range_ else fitting_window(api.first_sample(session.grid), until)
    clusters = api.list_clusters(session.grid)
    open_events = Counter(event["cluster"] for event in api.list_events(session.grid, user=session.user)
                          if event["cluster"] is not None)
    usage = api.grid_usage(session.grid, since=since, until=until, points=POINTS)
    charts = [(name, usage_chart(name, series, since, until, usage["step"]))
              for name, series in usage["clusters"].items()]
    return render("grid.html", session, active="grid", clusters=clusters, open_events=open_events, charts=charts,
                  ranges=list(RANGES), range=range_, span=until - since, refresh=refresh,
                  window=urlencode({"from": since, "to": until, "points": POINTS}))


def fitting_window(first_sample: float | None, until: float) -> float:
    """The default window's start: the grid's first sample, so that a young grid's plots are
    its whole life rather than a day mostly empty; a day at most, :data:`SHORTEST` at least."""
    oldest = until - RANGES["24h"]
    return min(until - SHORTEST, max(oldest, first_sample if first_sample is not None else until))


def usage_chart(cluster: str, series: list[dict[str, Any]], since: float, until: float,
                step: float) -> plots.LineChart:
    """One cluster's slots and cigri's jobs over the window, a point in the middle of each
    bucket; a bucket without a sample is a gap in the lines."""
    def points(key: str) -> list[plots.Point]:
        return plots.buckets(series, key, since, until, step)

    return plots.line_chart(f"{cluster}: slots and cigri's jobs", [
        plots.Series(label, points(key), style, dashed) for key, label, style, dashed in USAGE_LINES],
        since=since, until=until, y_label="slots (cores)")


@router.get("/grid/usage.json")
def usage_json(session: PageSession = Depends(page_session),
               since: float | None = Query(None, alias="from"), until: float | None = Query(None, alias="to"),
               points: int = Query(500, ge=1, le=10_000)) -> Response:
    """The API's ``/gridusage`` answer for the same window."""
    return JSONResponse(api.grid_usage(session.grid, since=since, until=until, points=points), headers=HEADERS)


@router.get("/grid/usage.csv")
def usage_csv(session: PageSession = Depends(page_session),
              since: float | None = Query(None, alias="from"), until: float | None = Query(None, alias="to"),
              points: int = Query(500, ge=1, le=10_000)) -> Response:
    """The same series, one row per cluster and bucket."""
    usage = api.grid_usage(session.grid, since=since, until=until, points=points)
    rows = ([name, row["at"], plots.iso(row["at"]), *(row[key] for key in USAGE_COLUMNS)]
            for name, series in usage["clusters"].items() for row in series)
    return csv_response(rows, ("cluster", "at", "at_utc", *USAGE_COLUMNS), "cigri-gridusage.csv")
