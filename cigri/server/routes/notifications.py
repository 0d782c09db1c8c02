"""``/notifications``: the caller's mail and webhook subscriptions."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict

from cigri import api
from cigri.server.request import Session, session

router = APIRouter(tags=["notifications"])


@router.get("/notifications", summary="List subscriptions")
def subscriptions(session: Session = Depends(session),
                  all_users: bool = Query(False, alias="all", description="Everyone's (admins).")
                  ) -> list[dict[str, Any]]:
    return api.list_subscriptions(session.grid, user=session.user, all_users=all_users)


class Subscription(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str
    target: str
    severity: str = "medium"


@router.post("/notifications", status_code=201, summary="Subscribe (again, to change the severity)")
def subscribe(body: Subscription, session: Session = Depends(session)) -> dict[str, Any]:
    """A mail address other than the caller's own is mailed a code and sent nothing else until
    confirmed (``confirmed``: false)."""
    return api.subscribe(session.grid, user=session.user, kind=body.kind, target=body.target, severity=body.severity)


class Confirmation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    code: str


@router.post("/notifications/{subscription_id}/confirm", summary="Confirm a mail subscription with its mailed code")
def confirm(subscription_id: int, body: Confirmation, session: Session = Depends(session)) -> dict[str, Any]:
    return api.confirm_subscription(session.grid, subscription_id, body.code, user=session.user)


@router.delete("/notifications/{subscription_id}", summary="Remove a subscription")
def unsubscribe(subscription_id: int, session: Session = Depends(session)) -> dict[str, Any]:
    api.unsubscribe(session.grid, subscription_id, user=session.user)
    return {"id": subscription_id, "removed": True}
