"""``/cigri-api``: CiGri 3.2's REST API, so that CiGri's own clients and scripts work unchanged
against ``cigri server``. Its routes, query parameters, status codes and documents
(:mod:`cigri.cigri3`), each a call to the same use case as ``/api/v1``; the caller is who the
server says it is (:func:`cigri.server.request.json_client`), never a header it cannot vouch for.
"""

from __future__ import annotations

import io
import json
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool

from cigri import api, cigri3
from cigri.errors import Forbidden, InputError, NotFound
from cigri.server.auth import Caller
from cigri.server.request import Session, json_client, json_session, pool
from cigri.server.routes.campaigns import NOWHERE, utf8_text

PREFIX = "/cigri-api"
CIGRI_PAGE = 100  # CiGri's default page of a campaign's jobs


def _pretty(pretty: str | None = Query(None, description="Indented output (any value but false).")) -> None:
    """Declares ``?pretty``, which every CiGri route takes (:func:`answer` reads it)."""


router = APIRouter(dependencies=[Depends(_pretty)], include_in_schema=False)


def answer(request: Request, document: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A document as CiGri's API printed it: compact, or indented with ``?pretty``."""
    pretty = request.query_params.get("pretty", "false") != "false"
    return Response(cigri3.dump(document, pretty), status_code=status, headers=headers, media_type="application/json")


def accepted(request: Request, text: str) -> Response:
    return answer(request, cigri3.answer(202, "Accepted", text), 202)


async def _json_object(request: Request, expected: str, field: str) -> dict[str, Any]:
    """The body as a JSON object; anything else (not JSON, not UTF-8, not an object) is bad
    input, said in one line naming what was expected."""
    try:
        body = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError):
        body = None
    if not isinstance(body, dict):
        raise InputError(f"expected a JSON object with {expected}", field=field)
    return body


def _flag(value: str | None) -> bool:
    """A CiGri switch (``?hold=1``): given, and not ``0`` or ``false``."""
    return value is not None and value.lower() not in ("0", "false")


# --- the root and campaigns --------------------------------------------------------------------

@router.get("/")
def root(request: Request, session: Session = Depends(json_session)) -> Response:
    return answer(request, {"links": [cigri3.link("self", "/"), cigri3.link("collection", "/campaigns", "campaigns"),
                                      cigri3.link("collection", "/clusters", "clusters")]})


@router.get("/campaigns")
def campaigns(request: Request, session: Session = Depends(json_session)) -> Response:
    """The campaigns not ended, everyone's (their summaries are public, as CiGri's)."""
    found = api.list_campaigns(session.grid, states=("in_treatment", "paused"))
    return answer(request, cigri3.campaigns(found), headers={"Allow": "GET,POST"})


@router.get("/campaigns/{campaign_id}")
def campaign(campaign_id: int, request: Request, session: Session = Depends(json_session)) -> Response:
    summary = api.campaign_summary(session.grid, campaign_id, user=session.user)
    return answer(request, cigri3.campaign(summary, api.campaign_clusters(session.grid, campaign_id, user=session.user)))


@router.get("/campaigns/{campaign_id}/stats")
def stats(campaign_id: int, request: Request, session: Session = Depends(json_session)) -> Response:
    return answer(request, cigri3.stats(api.campaign_detail(session.grid, campaign_id, user=session.user)))


@router.get("/campaigns/{campaign_id}/jdl")
def jdl(campaign_id: int, request: Request, session: Session = Depends(json_session)) -> Response:
    return answer(request, api.campaign_jdl(session.grid, campaign_id, user=session.user))


@router.get("/campaigns/{campaign_id}/jobs")
def jobs(campaign_id: int, request: Request, session: Session = Depends(json_session),
         limit: int = Query(CIGRI_PAGE, ge=1, le=10_000), offset: int = Query(0, ge=0)) -> Response:
    """A page of the campaign's tasks, a row per job (``gridstat -f`` follows ``next``)."""
    total = api.campaign_summary(session.grid, campaign_id, user=session.user)["tasks"]["total"]
    page = list(api.campaign_tasks(session.grid, campaign_id, user=session.user, offset=offset, limit=limit))
    if not page:
        return answer(request, {"title": "No jobs found", "message": "No more jobs"})
    return answer(request, cigri3.jobs(campaign_id, total, page, offset, limit))


@router.get("/campaigns/{campaign_id}/jobs/finished")
def finished_jobs(campaign_id: int, request: Request, session: Session = Depends(json_session)) -> Response:
    """The campaign's jobs that ended, terminated or failed (``gridclean``)."""
    ended = [job for job in api.campaign_jobs(session.grid, campaign_id, user=session.user)
             if job["state"] in ("terminated", "failed")]
    return answer(request, {"items": [cigri3.job(job) for job in ended]})


@router.get("/campaigns/{campaign_id}/events")
def campaign_events(campaign_id: int, request: Request, session: Session = Depends(json_session),
                    limit: int = Query(CIGRI_PAGE, ge=1, le=10_000), offset: int = Query(0, ge=0),
                    all_events: str | None = Query(None, alias="all")) -> Response:
    found = api.list_events(session.grid, user=session.user, campaign_id=campaign_id,
                            include_closed=_flag(all_events), limit=limit, offset=offset)
    if not found:
        raise NotFound(f"campaign {campaign_id}: no events")
    return answer(request, cigri3.events(found, offset))


@router.delete("/campaigns/{campaign_id}/events")
def fix_campaign_events(campaign_id: int, request: Request, session: Session = Depends(json_session),
                        resubmit: str | None = None) -> Response:
    """``gridevents -c N -f [-r]``: close the campaign's open events, resubmitting their tasks."""
    return _fix(request, session, resubmit, f"Campaign {campaign_id} events", campaign_id=campaign_id)


def _fix(request: Request, session: Session, resubmit: str | None, what: str, *, event_id: int | None = None,
         campaign_id: int | None = None) -> Response:
    """``gridevents -f [-r]`` on one event, or on a campaign's."""
    api.fix_events(session.grid, user=session.user, event_id=event_id, campaign_id=campaign_id,
                   resubmit=_flag(resubmit))
    return accepted(request, f"{what} closed")


@router.post("/campaigns")
async def submit(request: Request, caller: Caller = Depends(json_client)) -> Response:
    """``gridsub``: the body is one JDL; the new campaign comes back, with its ``Location``."""
    jdl = api.JDLText(utf8_text(await request.body(), "JDL"), NOWHERE, "JDL")
    async with pool(request).grid() as grid:
        [submitted] = await run_in_threadpool(api.submit_all, grid, [jdl], user=caller.user)
        summary = await run_in_threadpool(api.campaign_summary, grid, submitted.campaign_id, user=caller.user)
    return answer(request, cigri3.campaign(summary), 201, {"Location": f"/campaigns/{submitted.campaign_id}"})


@router.post("/campaigns/{campaign_id}/jobs")
async def extend(campaign_id: int, request: Request, caller: Caller = Depends(json_client)) -> Response:
    """``gridsub -c N -J '[...]'``: the body is a JSON array of parameter lines."""
    lines = api.Lines(io.BytesIO(await request.body()), "jobs")
    async with pool(request).grid() as grid:
        await run_in_threadpool(api.extend, grid, campaign_id, lines, user=caller.user)
        summary = await run_in_threadpool(api.campaign_summary, grid, campaign_id, user=caller.user)
    return answer(request, cigri3.campaign(summary), 201)


@router.put("/campaigns/{campaign_id}")
def update(campaign_id: int, request: Request, session: Session = Depends(json_session),
           state: str = Query(..., description="paused or in_treatment.")) -> Response:
    """Pause or resume, as CiGri's ``PUT``, by the same use cases as ``DELETE ?hold`` and ``?resume``."""
    moves = {"paused": api.pause, "in_treatment": api.resume}
    if state not in moves:
        raise InputError(f"state: expected paused or in_treatment, got {state!r}", field="state")
    moves[state](session.grid, campaign_id, user=session.user)
    return answer(request, cigri3.campaign(api.campaign_summary(session.grid, campaign_id, user=session.user)), 202)


@router.delete("/campaigns/{campaign_id}")
def delete(campaign_id: int, request: Request, session: Session = Depends(json_session),
           hold: str | None = None, resume: str | None = None, purge: str | None = None) -> Response:
    """``griddel``: cancel; ``?hold=1`` pauses, ``?resume=1`` resumes, ``?purge=1`` purges an
    ended campaign. As in CiGri, naming one chooses it, whatever its value (``?hold=0`` pauses:
    never a cancel); any other parameter is refused before this."""
    chosen = [name for name, value in (("hold", hold), ("resume", resume), ("purge", purge)) if value is not None]
    if len(chosen) > 1:
        raise InputError(f"give one of hold, resume and purge, not {' and '.join(chosen)}", field=chosen[1])
    action = chosen[0] if chosen else "cancel"
    if action == "hold":
        api.pause(session.grid, campaign_id, user=session.user)
    elif action == "resume":
        api.resume(session.grid, campaign_id, user=session.user)
    elif action == "purge":
        api.purge(session.grid, [campaign_id], user=session.user)
    else:
        api.cancel(session.grid, campaign_id, user=session.user)
    words = {"hold": "paused", "resume": "resumed", "purge": "will be purged", "cancel": "cancelled"}
    return accepted(request, f"Campaign {campaign_id} {words[action]}")


# --- events ---------------------------------------------------------------------------------

@router.get("/events")
def events(request: Request, session: Session = Depends(json_session),
           limit: int = Query(CIGRI_PAGE, ge=1, le=10_000), offset: int = Query(0, ge=0)) -> Response:
    """The clusters' own open events (``gridevents -g``)."""
    found = api.list_events(session.grid, user=session.user, global_only=True, limit=limit, offset=offset)
    if not found:
        raise NotFound("no open global events")
    return answer(request, cigri3.events(found, offset))


@router.get("/events/{event_id}")
def event(event_id: int, request: Request, session: Session = Depends(json_session)) -> Response:
    return answer(request, cigri3.event(api.event(session.grid, event_id, user=session.user)))


@router.delete("/events/{event_id}")
def fix_event(event_id: int, request: Request, session: Session = Depends(json_session),
              resubmit: str | None = None) -> Response:
    return _fix(request, session, resubmit, f"Event {event_id}", event_id=event_id)


@router.post("/events")
async def new_event(request: Request, session: Session = Depends(json_session)) -> Response:
    """``gridevents --blacklist-cluster`` and ``--mark-job-event`` (admins): a cluster's
    ``CLUSTER_MANUALLY_DISABLED`` blacklists it; a job's event marks it. Anyone else is refused
    first, as CiGri refused all but root (the use cases would answer a job as missing)."""
    if not session.caller.admin:
        raise Forbidden("only an admin creates events")
    body = await _json_object(request, "class, and cluster_id or job_id", "class")
    text = str(body.get("message") or "")
    if body.get("class") == "cluster" and isinstance(body.get("cluster_id"), int):
        name = await run_in_threadpool(_cluster_name, session, body["cluster_id"])
        await run_in_threadpool(api.set_blacklist, session.grid, name, text or "blacklisted by an admin",
                                user=session.user)
    elif body.get("class") == "job" and isinstance(body.get("job_id"), int):
        await run_in_threadpool(api.mark_job_event, session.grid, body["job_id"], text, user=session.user)
    else:
        raise InputError("expected class cluster with an integer cluster_id, or class job with an integer job_id",
                         field="class")
    return answer(request, cigri3.answer(201, "Created", "New event created"), 201)


def _cluster_name(session: Session, cluster_id: int) -> str:
    for cluster in api.cluster_table(session.grid):
        if cluster["id"] == cluster_id:
            return str(cluster["name"])
    raise NotFound(f"cluster #{cluster_id}: no such cluster")


# --- jobs -----------------------------------------------------------------------------------

@router.get("/jobs/{job_id}")
def job(job_id: int, request: Request, session: Session = Depends(json_session)) -> Response:
    return answer(request, cigri3.job(api.job_info(session.grid, job_id, user=session.user)))


@router.get("/jobs/{job_id}/stdout")
def stdout(job_id: int, request: Request, session: Session = Depends(json_session)) -> Response:
    return answer(request, {"output": api.job_output(session.grid, job_id, "stdout", user=session.user)})


@router.get("/jobs/{job_id}/stderr")
def stderr(job_id: int, request: Request, session: Session = Depends(json_session)) -> Response:
    return answer(request, {"output": api.job_output(session.grid, job_id, "stderr", user=session.user)})


@router.get("/jobs/{job_id}/cinfos")
def cinfos(job_id: int, request: Request, session: Session = Depends(json_session)) -> Response:
    """The job as its cluster sees it now (``gridstat -j J -C``), in cigri's words."""
    return answer(request, api.job_on_cluster(session.grid, job_id, user=session.user))


@router.delete("/jobs/{job_id}")
def cancel_job(job_id: int, request: Request, session: Session = Depends(json_session)) -> Response:
    """``griddel -j J``: nikita kills it at the next cycle."""
    api.cancel_job(session.grid, job_id, user=session.user)
    return accepted(request, f"Job {job_id} cancel event created")


# --- clusters and their use -----------------------------------------------------------------

@router.get("/clusters")
def clusters(request: Request, session: Session = Depends(json_session)) -> Response:
    return answer(request, cigri3.clusters(api.cluster_table(session.grid)))


@router.get("/clusters/{cluster_id}")
def cluster(cluster_id: int, request: Request, session: Session = Depends(json_session)) -> Response:
    for entry in api.list_clusters(session.grid, cluster_id=cluster_id):  # only its capacity is asked
        return answer(request, cigri3.cluster(entry))
    raise NotFound(f"cluster #{cluster_id}: no such cluster")


@router.get("/gridusage")
def gridusage(request: Request, session: Session = Depends(json_session),
              since: float | None = Query(None, alias="from"), until: float | None = Query(None, alias="to")
              ) -> Response:
    """The sampled use of every cluster between ``from`` and ``to``; without them, the latest."""
    usage = api.grid_usage(session.grid, since=since, until=until)
    ids = {str(c["name"]): int(c["id"]) for c in api.cluster_table(session.grid)}
    return answer(request, cigri3.gridusage(usage, ids, latest=since is None and until is None))


# --- notifications and cluster tokens -------------------------------------------------------

@router.get("/notifications")
def notifications(request: Request, session: Session = Depends(json_session)) -> Response:
    rows = api.list_subscriptions(session.grid, user=session.user)
    return answer(request, {"items": [cigri3.subscription(row) for row in rows],
                            "links": [cigri3.link("self", "/notifications/")]})


def _mail_only(kind: str) -> None:
    if kind == "jabber":
        raise InputError("jabber: cigri sends no XMPP; subscribe a mail address or a webhook (gridnotify --webhook)",
                         field="type")
    if kind != "mail":
        raise NotFound(f"notifications/{kind}: no such notification type")


@router.post("/notifications/{kind}")
async def subscribe(kind: str, request: Request, session: Session = Depends(json_session)) -> Response:
    """``gridnotify -m ADDRESS -s SEVERITY``; the body is ``{identity, severity}``."""
    _mail_only(kind)
    body = await _json_object(request, "identity and severity", "identity")
    if not isinstance(body.get("identity"), str):
        raise InputError("expected a JSON object with identity and severity", field="identity")
    await run_in_threadpool(api.subscribe, session.grid, user=session.user, kind=kind, target=body["identity"],
                            severity=str(body.get("severity") or "medium"))
    return answer(request, cigri3.answer(201, "Created", "New subscription created"), 201)


@router.delete("/notifications/{kind}")
def unsubscribe(kind: str, request: Request, identity: str, session: Session = Depends(json_session)) -> Response:
    _mail_only(kind)
    found = [row["id"] for row in api.list_subscriptions(session.grid, user=session.user)
             if row["kind"] == kind and row["target"] == identity]
    if not found:
        raise NotFound(f"no {kind} subscription of {session.user} to {identity}")
    for subscription_id in found:
        api.unsubscribe(session.grid, subscription_id, user=session.user)
    return answer(request, cigri3.answer(202, "Deleted", "Unsubscription ok"), 202)


@router.get("/tokens")
def tokens(request: Request, session: Session = Depends(json_session)) -> Response:
    """The clusters where the caller registered a token; never the tokens (cigri shows none)."""
    ids = {str(c["name"]): int(c["id"]) for c in api.cluster_table(session.grid)}
    rows = api.list_cluster_tokens(session.grid, user=session.user)
    return answer(request, {"items": [{"cluster_id": ids.get(row["cluster"]), "cluster_name": row["cluster"],
                                       "registered_at": cigri3.date(row["registered_at"])} for row in rows],
                            "links": [cigri3.link("self", "/tokens/")]})


@router.post("/tokens")
async def add_token(request: Request, session: Session = Depends(json_session)) -> Response:
    """``gridtoken -i CLUSTER -t TOKEN``; the body is ``{cluster_id, token}``."""
    body = await _json_object(request, "an integer cluster_id and a token", "token")
    if not isinstance(body.get("cluster_id"), int) or not isinstance(body.get("token"), str):
        raise InputError("expected a JSON object with an integer cluster_id and a token", field="token")
    name = await run_in_threadpool(_cluster_name, session, body["cluster_id"])
    await run_in_threadpool(api.add_cluster_token, session.grid, name, body["token"], user=session.user)
    return answer(request, cigri3.answer(201, "Created", "New token registered"), 201)


@router.delete("/tokens/{cluster_id}")
def remove_token(cluster_id: int, request: Request, session: Session = Depends(json_session)) -> Response:
    api.remove_cluster_token(session.grid, _cluster_name(session, cluster_id), user=session.user)
    return answer(request, cigri3.answer(202, "Deleted", "Token removed"), 202)
