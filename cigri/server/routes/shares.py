"""``/shares``, ``/classes`` and ``/users``: the fair share explained, the classes and the users."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from cigri import api
from cigri.server.request import Session, session

router = APIRouter(tags=["fair share"])


@router.get("/shares", summary="The live fair-share allocation explained (admins)")
def shares(session: Session = Depends(session)) -> dict[str, Any]:
    return api.current_shares(session.grid, user=session.user)


@router.get("/classes", summary="The classes and their load")
def classes(session: Session = Depends(session)) -> list[dict[str, Any]]:
    return api.list_classes(session.grid)


@router.get("/users", summary="The users, their limits and load")
def users(session: Session = Depends(session)) -> dict[str, Any]:
    return api.list_users(session.grid)
