"""``/notifications``: the caller's mail and webhook subscriptions."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict

from cigri import api
from cigri.server.app import Session, session

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
    subscription_id = api.subscribe(session.grid, user=session.user, kind=body.kind, target=body.target,
                                    severity=body.severity)
    return {"id": subscription_id, "kind": body.kind, "target": api.shown_target(body.target),
            "severity": body.severity}


@router.delete("/notifications/{subscription_id}", summary="Remove a subscription")
def unsubscribe(subscription_id: int, session: Session = Depends(session)) -> dict[str, Any]:
    api.unsubscribe(session.grid, subscription_id, user=session.user)
    return {"id": subscription_id, "removed": True}
