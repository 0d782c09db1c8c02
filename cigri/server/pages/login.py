"""Logging in with an API token (a session cookie), and out."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from cigri.errors import Unauthenticated
from cigri.server.request import peer_of, pool
from cigri.server.auth import check_not_cross_site, check_token_transport, token_caller
from cigri.server.pages.web import (HEADERS, SESSION_COOKIE, PageRoute, PageSession, check_csrf, page_session, render,
                                    state_of)

router = APIRouter(route_class=PageRoute, include_in_schema=False)


def local_path(target: str) -> str:
    """Where to go after logging in: a path of this server, never another site."""
    return target if target.startswith("/") and not target.startswith("//") and "\\" not in target else "/"


@router.get("/login")
def login_form(next: str = "/", ended: int = 0) -> Response:
    return render("login.html", None, next=local_path(next), ended=bool(ended), message="")


@router.post("/login")
async def login(request: Request) -> Response:
    """A valid token opens a session: its id goes back in an HttpOnly, SameSite=Strict cookie
    (Secure over HTTPS), and the browser to where it was going. Like a token in a header, a
    token in this form is taken only over HTTPS or from a loopback address, and only from this
    site's own login page. Failed logins count against the address they come from."""
    state = state_of(request)
    check_not_cross_site(request.scope)
    peer = peer_of(request.scope)
    state.failures.check(peer)
    form = await request.form(max_files=0, max_fields=10, max_part_size=1 << 12)
    token, target = str(form.get("token", "")).strip(), local_path(str(form.get("next", "/")))
    try:
        check_token_transport(request.scope)
        async with pool(request).grid() as grid:
            caller = await run_in_threadpool(token_caller, grid, token)
    except Unauthenticated as error:
        state.failures.take(peer)
        return render("login.html", None, status=401, next=target, ended=False, message=str(error))
    state.rate.take(caller.user)
    response = RedirectResponse(target, status_code=303, headers=HEADERS)
    response.set_cookie(SESSION_COOKIE, state.sessions.open(caller.user, token), httponly=True, samesite="strict",
                        secure=request.scope.get("scheme") == "https", path="/")
    return response


@router.post("/logout")
async def logout(request: Request, session: PageSession = Depends(page_session)) -> Response:
    await check_csrf(request, session)
    if session.holder.startswith("session:"):
        state_of(request).sessions.close(session.holder.removeprefix("session:"))
    response = RedirectResponse("/login", status_code=303, headers=HEADERS)
    response.delete_cookie(SESSION_COOKIE, path="/")
    return response
