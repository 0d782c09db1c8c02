"""``/tokens``: the caller's API tokens (an admin: anyone's)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, ConfigDict

from cigri import api
from cigri.errors import Forbidden
from cigri.server.request import Session, session

router = APIRouter(tags=["tokens"])


@router.get("/tokens", summary="List tokens (never their secrets)")
def tokens(session: Session = Depends(session),
           all_users: bool = Query(False, alias="all", description="Everyone's (admins).")) -> list[dict[str, Any]]:
    return api.list_tokens(session.grid, user=session.user, all_users=all_users)


class NewToken(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user: str | None = None
    ttl: str | None = None
    note: str = ""


@router.post("/tokens", status_code=201, summary="Create a token (its secret is shown once)")
def create(body: NewToken, session: Session = Depends(session)) -> dict[str, Any]:
    """Over the Unix socket a user makes tokens for themself; an admin for anyone, anywhere. A
    token cannot make another one (it would outlive its own expiry)."""
    if session.caller.method == "token" and not session.caller.admin:
        raise Forbidden("tokens are made over the server's Unix socket (cigri token create on its host)")
    return api.create_token(session.grid, user=session.user, owner=body.user, ttl=body.ttl, note=body.note)


class ClusterToken(BaseModel):
    model_config = ConfigDict(extra="forbid")

    token: str


@router.get("/cluster-tokens", summary="The clusters where the caller registered a token (never the tokens)")
def cluster_tokens(session: Session = Depends(session)) -> list[dict[str, Any]]:
    """As ``gridtoken list --json``."""
    return api.list_cluster_tokens(session.grid, user=session.user)


@router.put("/cluster-tokens/{cluster}", summary="Register the caller's own token for a cluster")
def add_cluster_token(cluster: str, body: ClusterToken, session: Session = Depends(session)) -> dict[str, Any]:
    """As ``gridtoken add``: for a cluster whose jobs run with their owner's token."""
    return api.add_cluster_token(session.grid, cluster, body.token, user=session.user)


@router.delete("/cluster-tokens/{cluster}", summary="Forget the caller's token for a cluster")
def remove_cluster_token(cluster: str, session: Session = Depends(session)) -> dict[str, Any]:
    api.remove_cluster_token(session.grid, cluster, user=session.user)
    return {"cluster": cluster, "removed": True}


@router.delete("/tokens/{token_id}", summary="Revoke a token")
def revoke(token_id: int, session: Session = Depends(session)) -> dict[str, Any]:
    api.revoke_token(session.grid, token_id, user=session.user)
    return {"id": token_id, "revoked": True}
