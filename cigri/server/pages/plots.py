"""Plots drawn on the server: the geometry of line and bar charts, which ``_charts.html``
turns into inline SVG. No script and no library in the browser: a chart is text in the page,
styled by the page's stylesheet (its colours follow the light or dark scheme the reader
prefers), with its axes, units and legend; the numbers behind it are the page's CSV and JSON.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

WIDTH, HEIGHT = 960, 300  # the viewBox: a chart is drawn as wide as the page (the stylesheet)
CHAR = 6.2  # pixels of a legend's character, about (11 px system-ui)
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 34, 42  # margins: the y labels, the legend, the x labels
COLOURS = 8  # series styles s0..s7 of the stylesheet
# Time ticks a chart may use (seconds): the first giving at most MAX_TICKS ticks.
TIME_STEPS = (60, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400, 172800, 345600, 604800)
MAX_TICKS = 8

Point = tuple[float, float | None]  # None: no value there (the line breaks)


@dataclass(frozen=True)
class Series:
    name: str
    points: Sequence[Point]
    style: int = 0  # its colour, s0..s7
    dashed: bool = False


@dataclass(frozen=True)
class Tick:
    at: float  # pixels along the axis
    label: str


@dataclass(frozen=True)
class Line:
    name: str
    path: str  # SVG path data
    style: int
    dashed: bool
    legend_x: float = 0.0  # where its entry of the legend starts


@dataclass(frozen=True)
class LineChart:
    title: str
    y_label: str
    x_label: str
    width: int
    height: int
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    lines: list[Line]
    empty: bool  # no point at all: the chart says so
    plot_left: int = LEFT  # the plotting area, in pixels
    plot_top: int = TOP

    @property
    def plot_right(self) -> int:
        return self.width - RIGHT

    @property
    def plot_bottom(self) -> int:
        return self.height - BOTTOM


def iso(epoch: float) -> str:
    """An instant in ISO 8601, UTC, as the CSV files give it beside the epoch seconds."""
    return datetime.fromtimestamp(epoch, timezone.utc).isoformat(timespec="seconds")


def buckets(rows: Sequence[dict[str, Any]], key: str, since: float, until: float, step: float,
            missing: float | None = None) -> list[Point]:
    """The ``key`` of rows starting at ``at`` every ``step`` from ``since`` (a use case's
    series, which leaves out the empty buckets), as a point in the middle of every bucket up to
    ``until``; an absent bucket is ``missing`` (None: a gap). The last bucket may end past
    ``until``: its point is in the middle of its part before ``until``, on the chart."""
    found = {round((row["at"] - since) / step): row[key] for row in rows}
    return [(since + i * step + min(step, until - since - i * step) / 2, found.get(i, missing))
            for i in range(math.ceil((until - since) / step))]


def nice_ticks(high: float, count: int = 5) -> list[float]:
    """Round values from 0 to at least ``high``, about ``count`` of them: steps of 1, 2 or 5
    times a power of ten."""
    if high <= 0 or not math.isfinite(high):
        return [0.0, 1.0]
    raw = high / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(math.ceil(high / step - 1e-9) + 1)]


def _tick_label(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:g}"


def time_ticks(since: float, until: float) -> list[tuple[float, str]]:
    """Instants on round UTC minutes, hours or days between ``since`` and ``until``, labelled
    by what changes between them (the hour, or the day)."""
    span = until - since
    step = next((s for s in TIME_STEPS if span / s <= MAX_TICKS), TIME_STEPS[-1])
    first = math.ceil(since / step) * step
    fmt = "%H:%M" if step < 86400 and span <= 2 * 86400 else "%m-%d %H:%M" if step < 86400 else "%m-%d"
    return [(t, datetime.fromtimestamp(t, timezone.utc).strftime(fmt))
            for t in range(int(first), int(until) + 1, step)]


def line_chart(title: str, series: Sequence[Series], *, since: float, until: float, y_label: str,
               x_label: str = "time (UTC)", width: int = WIDTH, height: int = HEIGHT,
               y_max: float | None = None) -> LineChart:
    """Lines of ``series`` over time from ``since`` to ``until`` (epoch seconds), on a y axis
    from 0 to a round value above the highest point (or ``y_max``)."""
    values = [y for s in series for _, y in s.points if y is not None]
    ticks = nice_ticks(y_max if y_max is not None else max(values, default=0.0))
    top = ticks[-1]
    x0, x1, y0, y1 = LEFT, width - RIGHT, height - BOTTOM, TOP

    def x(t: float) -> float:
        return x0 + (x1 - x0) * (t - since) / (until - since)

    def y(v: float) -> float:
        return y0 - (y0 - y1) * v / top

    lines = []
    for s in series:
        runs: list[list[str]] = [[]]  # stretches without a gap; one alone is drawn as a dot
        for t, v in s.points:
            if v is None:
                runs.append([])
            else:
                runs[-1].append(f"{x(t):.1f} {y(v):.1f}")
        path = " ".join("M" + " L".join(run) + (" l0 0" if len(run) == 1 else "") for run in runs if run)
        lines.append(Line(s.name, path, s.style % COLOURS, s.dashed))
    lines = _legend(lines, x1)
    return LineChart(title, y_label, x_label, width, height,
                     [Tick(round(x(t), 1), label) for t, label in time_ticks(since, until)],
                     [Tick(round(y(v), 1), _tick_label(v)) for v in ticks], lines, not values)


def _legend(lines: list[Line], right: float) -> list[Line]:
    """The legend's entries side by side, ending at ``right``: a sample of the line, its name."""
    widths = [40 + CHAR * len(line.name) for line in lines]
    x = right - sum(widths)
    placed = []
    for line, width in zip(lines, widths):
        placed.append(replace(line, legend_x=round(x, 1)))
        x += width
    return placed


@dataclass(frozen=True)
class Bar:
    label: str
    values: tuple[float, ...]  # one per measure
    widths: tuple[float, ...]  # pixels
    note: str  # shown after the bars (a reason, a unit)


@dataclass(frozen=True)
class BarChart:
    title: str
    measures: tuple[str, ...]  # what each bar of a row is (legend)
    unit: str
    width: int
    label_width: int
    bar_height: int
    row_height: int
    rows: list[Bar]
    scale: list[Tick]

    @property
    def height(self) -> int:
        return TOP + self.row_height * len(self.rows) + BOTTOM

    @property
    def plot_right(self) -> int:
        return self.width - RIGHT


def bar_chart(title: str, measures: Sequence[str], rows: Sequence[tuple[str, Sequence[float], str]], *,
              unit: str, width: int = WIDTH, label_width: int = 180) -> BarChart:
    """Horizontal bars, one group per row (``label``, one value per measure, a note), on a
    common scale from 0: target against held, per class, user, campaign or cluster."""
    ticks = nice_ticks(max((v for _, values, _ in rows for v in values), default=0.0))
    span = width - RIGHT - label_width
    bar_height = 9
    return BarChart(title, tuple(measures), unit, width, label_width, bar_height, bar_height * len(measures) + 10,
                    [Bar(label, tuple(values), tuple(round(span * v / ticks[-1], 1) for v in values), note)
                     for label, values, note in rows],
                    [Tick(round(label_width + span * v / ticks[-1], 1), _tick_label(v)) for v in ticks])
