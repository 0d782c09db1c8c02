"""What every page shares: who is looking (:func:`page_session`), rendering a template with
the headers a page needs, forms' CSRF check, errors as pages, and data as CSV.

A page reads through the use cases of :mod:`cigri.api` with the viewer's name, exactly as the
API's routes do, so a page shows what the API would show that user and no more; nothing is
kept between requests but the sessions themselves.
"""

from __future__ import annotations

import csv
import io
import math
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.routing import APIRoute
from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from cigri import __version__
from cigri import db as database
from cigri.errors import CigriError, Forbidden, Unauthenticated
from cigri.grid import Grid
from cigri.server.request import ServerState, identified, pool
from cigri.server.auth import Caller, check_not_cross_site, token_caller

SESSION_COOKIE = "cigri_session"
CSRF_FIELD = "csrf"
REFRESH = 30  # seconds between two loads of a page that refreshes (``?refresh=0``: not at all)
# No script, style or frame from anywhere but this server; no inline script or style at all.
HEADERS = {"Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; "
                                      "frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
           "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin", "Cache-Control": "no-store"}


@dataclass(frozen=True)
class PageSession:
    """One page request's grid, its viewer, and the CSRF token of the forms shown to them."""

    grid: Grid
    caller: Caller
    csrf: str
    holder: str  # whom the CSRF token is for: "session:ID" or "METHOD:USER"

    @property
    def user(self) -> str:
        return self.caller.user


class LoginNeeded(Exception):
    """No credential, or a session whose token has ended: the login form, then back here."""

    def __init__(self, ended: bool = False) -> None:
        super().__init__("login needed")
        self.ended = ended


def state_of(request: Request) -> ServerState:
    return request.app.state.cigri  # type: ignore[no-any-return]


async def page_session(request: Request) -> AsyncIterator[PageSession]:
    """The FastAPI dependency of every page: the viewer, from the session cookie if there is
    one (its token checked again now), else as the API identifies callers (a trusted front, a
    token, the socket); counted against the user's rate. The viewer is known before a
    database connection is taken for the page."""
    state = state_of(request)
    session_id = request.cookies.get(SESSION_COOKIE)
    if session_id:
        token = state.sessions.token(session_id)
        if token is None:
            raise LoginNeeded(ended=True)
        try:
            async with pool(request).grid() as grid:
                caller = await run_in_threadpool(token_caller, grid, token)
        except Unauthenticated:
            state.sessions.close(session_id)
            raise LoginNeeded(ended=True) from None
        caller, holder = replace(caller, method="session"), f"session:{session_id}"
        state.rate.take(caller.user)
    else:
        try:
            caller = await identified(request)
        except Unauthenticated:
            raise LoginNeeded() from None
        holder = f"{caller.method}:{caller.user}"
    async with pool(request).grid() as grid:
        yield PageSession(grid, caller, state.sessions.csrf(holder), holder)


async def check_csrf(request: Request, session: PageSession) -> dict[str, str]:
    """The posted form's fields, if it comes from no other site and carries the CSRF token of
    the viewer's forms; else Forbidden (403): a form posted from another site, or forged."""
    check_not_cross_site(request.scope)
    form = await request.form(max_files=0, max_fields=50, max_part_size=1 << 16)
    fields = {key: value for key, value in form.items() if isinstance(value, str)}
    if not state_of(request).sessions.csrf_matches(session.holder, fields.get(CSRF_FIELD, "")):
        raise Forbidden("this form is not one the dashboard showed you (missing or wrong CSRF token): reload the page")
    return fields


@dataclass(frozen=True)
class Refresh:
    """How often a page that shows moving figures reloads itself (an HTML ``meta`` refresh: the
    pages have no script), with the link that turns that off, or on again. A page one types into
    (a search, the login) does not refresh: the reload would lose the typing."""

    seconds: int  # 0: off
    path: str
    query: tuple[tuple[str, str], ...]  # the page's parameters but ``refresh``
    asked: bool  # ``?refresh=`` was given

    @property
    def toggle(self) -> str:
        """This page with refreshing turned the other way."""
        return f"{self.path}?{urlencode([*self.query, ('refresh', '0' if self.seconds else str(REFRESH))])}"

    def settled(self) -> Refresh:
        """For a page whose figures no longer move (an ended campaign's): off unless asked."""
        return self if self.asked else replace(self, seconds=0)


def refreshing(request: Request, refresh: int = Query(REFRESH, ge=0)) -> Refresh:
    """The dependency of the pages that refresh: every :data:`REFRESH` seconds unless
    ``?refresh=0`` (or at another period, 10 s at least)."""
    return Refresh(max(10, refresh) if refresh else 0, request.url.path,
                   tuple((k, v) for k, v in request.query_params.multi_items() if k != "refresh"),
                   "refresh" in request.query_params)


# --- rendering -----------------------------------------------------------------------------

def when(epoch: float | None) -> str:
    """An instant as the pages show it: UTC, to the minute."""
    if epoch is None:
        return "—"
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "—"
    seconds = round(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours:02d}h"
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def number(value: float | None, digits: int = 1) -> str:
    """A figure as the pages print it (and as the tests read it back): ``digits`` decimals,
    thousands separated by a thin space; None is a dash."""
    if value is None:
        return "—"
    shown = f"{value:,}" if isinstance(value, int) else f"{value:,.{digits}f}"
    return shown.replace(",", "\u2009")


templates = Environment(loader=PackageLoader("cigri.server", "templates"), autoescape=True, trim_blocks=True,
                        lstrip_blocks=True, undefined=StrictUndefined)
templates.filters.update(when=when, duration=duration, number=number, quote=lambda text: quote(str(text), safe=""))


def render(template: str, session: PageSession | None, *, status: int = 200, refresh: Refresh | None = None,
           **context: Any) -> HTMLResponse:
    """A page; one that shows moving figures passes its :class:`Refresh`."""
    page = templates.get_template(template).render(viewer=session.caller if session else None,
                                                   csrf=session.csrf if session else "", csrf_field=CSRF_FIELD,
                                                   version=__version__, now=database.now(), refresh=refresh,
                                                   **context)
    return HTMLResponse(page, status_code=status, headers=HEADERS)


def csv_response(rows: Iterable[Sequence[Any]], header: Sequence[str], filename: str) -> Response:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return Response(out.getvalue(), media_type="text/csv; charset=utf-8",
                    headers={**HEADERS, "Content-Disposition": f'attachment; filename="{filename}"'})


def login_redirect(request: Request, ended: bool) -> RedirectResponse:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    response = RedirectResponse(f"/login?next={quote(target, safe='')}{'&ended=1' if ended else ''}",
                                status_code=303, headers=HEADERS)
    if ended:
        response.delete_cookie(SESSION_COOKIE, path="/")
    return response


def error_page(status: int, message: str) -> HTMLResponse:
    return render("error.html", None, status=status, status_code=status, message=message)


class PageRoute(APIRoute):
    """A page's route: its failures are pages too (the API's are JSON), a missing login sends
    to the login form, and the time the page took goes out as ``Server-Timing``."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def page(request: Request) -> Response:
            started = time.perf_counter()
            try:
                response = await handler(request)
            except LoginNeeded as needed:
                return login_redirect(request, needed.ended)
            except CigriError as error:
                response = error_page(error.http_status, " ".join(str(error).split()))
            except RequestValidationError as error:
                first = error.errors()[0] if error.errors() else {}
                where = ".".join(str(part) for part in first.get("loc", ()) if part not in ("query", "path", "body"))
                response = error_page(400, f"{where}: {first.get('msg', 'invalid')}" if where else "bad request")
            except HTTPException as error:
                response = error_page(error.status_code, str(error.detail))
            response.headers["Server-Timing"] = f"app;dur={1000 * (time.perf_counter() - started):.1f}"
            return response

        return page
