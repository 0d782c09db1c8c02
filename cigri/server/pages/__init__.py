"""The dashboard: server-rendered pages for users and admins, at the server's root beside the
API, reading through the same use cases (:mod:`cigri.api`) with the viewer's name.

One router per page family (:mod:`.grid`, :mod:`.campaigns`, :mod:`.events`, :mod:`.admin`,
:mod:`.login`); what they share is :mod:`.web`; the plots' geometry is :mod:`.plots`, drawn as
SVG by the templates (``cigri/server/templates``). The pages' only static file is their
stylesheet, and they have no script (the API's docs page, :mod:`cigri.server.routes.docs`, has
its own).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from cigri.server.pages import admin, campaigns, events, grid, login

ROUTERS = [login.router, grid.router, campaigns.router, events.router, admin.router]


def install(app: FastAPI) -> None:
    """Add the pages and their stylesheet to the server's app (outside its API contract)."""
    for router in ROUTERS:
        app.include_router(router)
    app.mount("/static", StaticFiles(directory=Path(__file__).parent.parent / "static"), name="static")
