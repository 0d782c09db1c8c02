"""The admins' pages: the fair share drawn (``cigri shares``), and the users, classes and
tokens. Each use case refuses a viewer who is not an admin, as the API does."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from cigri import api
from cigri.errors import InputError
from cigri.server.pages import plots
from cigri.server.pages.web import (HEADERS, PageRoute, PageSession, Refresh, check_csrf, page_session, refreshing,
                                    render)
from cigri.users import require_admin

router = APIRouter(route_class=PageRoute, include_in_schema=False)
HELD = ("target", "held")  # the measures of every share chart: jobs; held are running or queued, as a target counts


@router.get("/shares")
def shares(session: PageSession = Depends(page_session), refresh: Refresh = Depends(refreshing)) -> Response:
    allocation = api.current_shares(session.grid, user=session.user)
    charts = [plots.bar_chart(f"{title}: target against held", HELD,
                              [(str(row["name"]), [row["target"], row["running"] + row["queued"]], "")
                               for row in allocation[key]], unit="jobs")
              for key, title in (("classes", "Classes"), ("users", "Users")) if allocation[key]]
    placements = [(f"{c['id']} on {cluster}",
                   [c["target"].get(cluster, 0), c["running"].get(cluster, 0) + c["queued"].get(cluster, 0)], "")
                  for c in allocation["campaigns"]
                  for cluster in sorted(set(c["target"]) | set(c["running"]) | set(c["queued"]))]
    if placements:
        charts.append(plots.bar_chart("Campaigns per cluster: target against held", HELD, placements,
                                      unit="jobs"))
    return render("shares.html", session, active="shares", shares=allocation, charts=charts, refresh=refresh)


@router.get("/admin")
def admin(session: PageSession = Depends(page_session), refresh: Refresh = Depends(refreshing)) -> Response:
    require_admin(session.grid.config, session.user, "the admin page")
    tokens = api.list_tokens(session.grid, user=session.user, all_users=True)
    return render("admin.html", session, active="admin", users=api.list_users(session.grid),
                  classes=api.list_classes(session.grid), tokens=list(reversed(tokens)),
                  leader=api.cycle_leader(session.grid), shared=bool(session.grid.config.database.url), refresh=refresh)


@router.post("/admin/tokens/revoke")
async def revoke(request: Request, session: PageSession = Depends(page_session)) -> Response:
    form = await check_csrf(request, session)
    token_id = form.get("token", "")
    if not token_id.isdigit():
        raise InputError("token: expected an id", field="token")
    await run_in_threadpool(api.revoke_token, session.grid, int(token_id), user=session.user)
    return RedirectResponse("/admin#tokens", status_code=303, headers=HEADERS)
