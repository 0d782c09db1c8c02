"""Server mode: the commands are clients of ``cigri server``'s REST API, over its Unix socket
(the kernel tells the server who we are) or HTTPS with a token. Answers are the use cases' own
JSON, and each error comes back as the error it was on the server (same words, same exit
status); a server that does not answer is one line."""

from __future__ import annotations

import ipaddress
import json
import os
import stat
from collections.abc import Iterator
from typing import Any, BinaryIO

import httpx

from cigri.uploads import JDLText, Lines, Submitted
from cigri.errors import (BackendError, CigriError, Forbidden, InputError, LimitExceeded, NotFound, Refused, TooLarge,
                          Unauthenticated, Unavailable)

TIMEOUT = httpx.Timeout(30.0, connect=5.0, read=600.0)  # a submission of millions of lines takes minutes
PAGE = 10_000  # items asked at a time by a listing (the server's most)
ERRORS: dict[int, type[CigriError]] = {400: InputError, 401: Unauthenticated, 403: Forbidden, 404: NotFound,
                                       409: Refused, 413: TooLarge, 429: LimitExceeded, 502: BackendError,
                                       503: Unavailable}


class HTTPClient:
    direct = False

    def __init__(self, address: str, token: str | None, *, ca_file: str | None = None) -> None:
        self.address = address
        headers = {"User-Agent": "cigri-client", "X-Requested-With": "cigri"}  # the server's CSRF proof
        if address.startswith("unix:"):
            transport = httpx.HTTPTransport(uds=address.removeprefix("unix:"))
            self.http = httpx.Client(transport=transport, base_url="http://cigri/api/v1", timeout=TIMEOUT,
                                     headers=headers)
        elif address.startswith(("https://", "http://")):
            url = httpx.URL(address)
            if token:
                if url.scheme != "https" and not _loopback(url.host):
                    raise InputError(f"CIGRI_SERVER {address}: a token is sent only over https:// (or to loopback)")
                headers["Authorization"] = f"Bearer {token}"
            self.http = httpx.Client(base_url=str(url.join("/api/v1")), timeout=TIMEOUT, headers=headers,
                                     verify=ca_file or True)
        else:
            raise InputError(f"CIGRI_SERVER {address!r}: expected unix:/path/to/cigri.sock or https://host:port")
        me = self._json("GET", "/whoami")
        self.user: str = me["user"]
        self.admin: bool = me["admin"]

    # --- transport ---------------------------------------------------------------------

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TimeoutException:
            raise Unavailable(f"cigri server {self.address}: no answer in time") from None
        except (httpx.TransportError, OSError) as error:
            reason = " ".join(str(error).split()) or type(error).__name__
            raise Unavailable(f"cigri server {self.address}: not answering ({reason})") from None
        if response.status_code >= 400:
            raise _error(response)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._request(method, path, **kwargs).json()

    # --- campaigns -----------------------------------------------------------------------

    def submit(self, jdls: list[JDLText], *, strict: bool = False) -> list[Submitted]:
        files: list[tuple[str, tuple[str, Any, str]]] = []
        unopened: dict[str, str] = {}  # the param_files this process could not open, said with the JDLs' mistakes
        for index, jdl in enumerate(jdls):
            files.append(("jdl", (jdl.source, jdl.text.encode(), "application/json")))
            if jdl.params is not None:
                files.append((f"params.{index}", (jdl.params.name, _sized_or_not(jdl.params.stream), "text/plain")))
            if jdl.params_error is not None:
                unopened[f"params_error.{index}"] = jdl.params_error
        answer = self._json("POST", "/campaigns", files=files, data=unopened, params={"strict": strict})
        return [_submitted(entry) for entry in answer["campaigns"]]

    def extend(self, campaign_id: int, lines: Lines, *, strict: bool = False) -> Submitted:
        return _submitted(self._json("POST", f"/campaigns/{campaign_id}/tasks", params={"name": lines.name,
                                                                                        "strict": strict},
                                     content=_chunks(lines), headers={"Content-Type": "text/plain"}))

    def campaigns(self, *, user: str | None = None, mine: bool = False, include_finished: bool = False,
                  states: tuple[str, ...] = (), name: str | None = None,
                  since: float | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"mine": mine, "all": include_finished, "state": list(states)}
        for key, value in (("user", user), ("name", name), ("since", since)):
            if value is not None:
                params[key] = value
        return list(self._pages("/campaigns", params))

    def campaign(self, campaign_id: int) -> dict[str, Any]:
        return self._json("GET", f"/campaigns/{campaign_id}")  # type: ignore[no-any-return]

    def campaign_share(self, campaign_id: int) -> dict[str, Any]:
        return self._json("GET", f"/campaigns/{campaign_id}/share")  # type: ignore[no-any-return]

    def tasks(self, campaign_id: int, *, states: tuple[str, ...] = (), offset: int = 0,
              limit: int | None = None) -> Iterator[dict[str, Any]]:
        return self._pages(f"/campaigns/{campaign_id}/tasks", {"state": list(states)}, offset, limit)

    def _pages(self, path: str, params: dict[str, Any], offset: int = 0,
               limit: int | None = None) -> Iterator[dict[str, Any]]:
        """A listing's items, a page of at most :data:`PAGE` at a time, until a page comes back short."""
        left = limit
        while left is None or left > 0:
            size = PAGE if left is None else min(left, PAGE)
            page = self._json("GET", path, params={**params, "limit": size, "offset": offset})
            yield from page
            if len(page) < size:
                return
            offset += len(page)
            left = None if left is None else left - len(page)

    def campaign_jdl(self, campaign_id: int) -> dict[str, Any]:
        return self._json("GET", f"/campaigns/{campaign_id}/jdl")  # type: ignore[no-any-return]

    def imported_campaign(self, v3_id: int) -> int:
        return int(self._json("GET", f"/imports/v3/campaigns/{v3_id}")["id"])

    def campaign_clusters(self, campaign_id: int) -> list[dict[str, Any]]:
        return self._json("GET", f"/campaigns/{campaign_id}/clusters")  # type: ignore[no-any-return]

    def campaign_throughput(self, campaign_id: int, points: int) -> dict[str, Any]:
        return self._json("GET", f"/campaigns/{campaign_id}/throughput",  # type: ignore[no-any-return]
                          params={"points": points})

    def purge(self, campaign_id: int) -> None:
        self._request("POST", f"/campaigns/{campaign_id}/purge")

    def purge_campaigns(self, campaign_ids: list[int]) -> list[int]:
        return list(self._json("POST", "/campaigns/purge", json={"campaigns": campaign_ids})["purged"])

    def purge_ended(self, days: float) -> list[int]:
        return list(self._json("POST", "/campaigns/purge", json={"ended_days": days})["purged"])

    def pause(self, campaign_id: int) -> None:
        self._request("POST", f"/campaigns/{campaign_id}/pause")

    def resume(self, campaign_id: int) -> None:
        self._request("POST", f"/campaigns/{campaign_id}/resume")

    def cancel(self, campaign_id: int) -> None:
        self._request("POST", f"/campaigns/{campaign_id}/cancel")

    # --- jobs ------------------------------------------------------------------------------

    def job(self, job_id: int) -> dict[str, Any]:
        return self._json("GET", f"/jobs/{job_id}")  # type: ignore[no-any-return]

    def job_output(self, job_id: int, stream: str) -> str:
        if stream not in ("stdout", "stderr"):
            raise InputError(f"stream: expected stdout or stderr, got {stream!r}")
        return self._request("GET", f"/jobs/{job_id}/{stream}").text

    def cancel_job(self, job_id: int) -> None:
        self._request("POST", f"/jobs/{job_id}/cancel")

    def job_on_cluster(self, job_id: int) -> dict[str, Any]:
        return self._json("GET", f"/jobs/{job_id}/remote")  # type: ignore[no-any-return]

    def mark_job_event(self, job_id: int, message: str) -> int:
        return int(self._json("POST", f"/jobs/{job_id}/events", json={"message": message})["id"])

    # --- events and notifications ------------------------------------------------------------

    def events(self, *, campaign_id: int | None = None, global_only: bool = False,
               include_closed: bool = False) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"global": global_only, "all": include_closed}
        if campaign_id is not None:
            params["campaign"] = campaign_id
        return list(self._pages("/events", params))

    def event(self, event_id: int) -> dict[str, Any]:
        return self._json("GET", f"/events/{event_id}")  # type: ignore[no-any-return]

    def fix_events(self, *, event_id: int | None = None, campaign_id: int | None = None, global_only: bool = False,
                   resubmit: bool = False) -> dict[str, int]:
        body = {"event": event_id, "campaign": campaign_id, "global": global_only, "resubmit": resubmit}
        return self._json("POST", "/events/fix", json=body)  # type: ignore[no-any-return]

    def subscribe(self, *, kind: str, target: str, severity: str) -> dict[str, Any]:
        return self._json("POST", "/notifications", json={"kind": kind, "target": target,  # type: ignore[no-any-return]
                                                          "severity": severity})

    def confirm_subscription(self, subscription_id: int, code: str) -> dict[str, Any]:
        return self._json("POST", f"/notifications/{subscription_id}/confirm", json={"code": code})  # type: ignore[no-any-return]

    def unsubscribe(self, subscription_id: int) -> None:
        self._request("DELETE", f"/notifications/{subscription_id}")

    def subscriptions(self, *, all_users: bool = False) -> list[dict[str, Any]]:
        return self._json("GET", "/notifications", params={"all": all_users})  # type: ignore[no-any-return]

    # --- clusters, fair share, tokens ----------------------------------------------------------

    def clusters(self) -> list[dict[str, Any]]:
        return self._json("GET", "/clusters")  # type: ignore[no-any-return]

    def usage(self, hours: float) -> list[dict[str, Any]]:
        return self._json("GET", "/gridusage/summary", params={"hours": hours})  # type: ignore[no-any-return]

    def core_hours(self, hours: float) -> list[dict[str, Any]]:
        return self._json("GET", "/gridusage/core-hours", params={"hours": hours})  # type: ignore[no-any-return]

    def cluster_table(self) -> list[dict[str, Any]]:
        return self._json("GET", "/clusters/config")  # type: ignore[no-any-return]

    def add_cluster(self, name: str, backend: str, options: dict[str, Any]) -> None:
        self._request("POST", "/clusters", json={"name": name, "backend": backend, "options": options})

    def remove_cluster(self, name: str) -> None:
        self._request("DELETE", f"/clusters/{name}")

    def blacklist(self, name: str, reason: str | None) -> None:
        if reason is None:
            self._request("POST", f"/clusters/{name}/unblacklist")
        else:
            self._request("POST", f"/clusters/{name}/blacklist", json={"reason": reason})

    def cancel_cluster_campaigns(self, name: str) -> list[int]:
        return list(self._json("POST", f"/clusters/{name}/cancel-campaigns")["cancelled"])

    def test_cluster(self, name: str, directory: str | None, timeout: float) -> dict[str, Any]:
        return self._json("POST", f"/clusters/{name}/test",  # type: ignore[no-any-return]
                          json={"directory": directory, "timeout": timeout}, timeout=timeout + 60)

    def shares(self) -> dict[str, Any]:
        return self._json("GET", "/shares")  # type: ignore[no-any-return]

    def classes(self) -> list[dict[str, Any]]:
        return self._json("GET", "/classes")  # type: ignore[no-any-return]

    def users(self) -> dict[str, Any]:
        return self._json("GET", "/users")  # type: ignore[no-any-return]

    def create_token(self, *, owner: str | None, ttl: str | None, note: str) -> dict[str, Any]:
        return self._json("POST", "/tokens", json={"user": owner, "ttl": ttl, "note": note})  # type: ignore[no-any-return]

    def tokens(self, *, all_users: bool = False) -> list[dict[str, Any]]:
        return self._json("GET", "/tokens", params={"all": all_users})  # type: ignore[no-any-return]

    def revoke_token(self, token_id: int) -> None:
        self._request("DELETE", f"/tokens/{token_id}")

    def add_cluster_token(self, cluster: str, token: str) -> dict[str, Any]:
        return self._json("PUT", f"/cluster-tokens/{cluster}", json={"token": token})  # type: ignore[no-any-return]

    def cluster_tokens(self) -> list[dict[str, Any]]:
        return self._json("GET", "/cluster-tokens")  # type: ignore[no-any-return]

    def remove_cluster_token(self, cluster: str) -> None:
        self._request("DELETE", f"/cluster-tokens/{cluster}")

    def cycles(self) -> dict[str, Any]:
        """The server's own cycles, as its ``/healthz`` (at the root, outside the API) tells
        them; a 503 is its answer that they do not run."""
        url = self.http.base_url.copy_with(path="/healthz")
        try:
            answer = self.http.get(url)
            return answer.json()["cycles"]  # type: ignore[no-any-return]
        except (httpx.HTTPError, OSError, ValueError, KeyError, TypeError) as error:
            raise Unavailable(f"cigri server {self.address}: /healthz: {' '.join(str(error).split())}") from None

    def drive_cycle(self) -> None:
        """The server runs the cycles."""
        return None

    def close(self) -> None:
        self.http.close()


class _Unsized:
    """A stream whose length cannot be known in advance (a pipe, stdin): without ``fileno`` or
    ``seek``, httpx sends it chunked instead of declaring the size of an empty file."""

    def __init__(self, stream: BinaryIO) -> None:
        self.stream = stream

    def read(self, size: int = -1) -> bytes:
        return self.stream.read(size)


def _sized_or_not(stream: BinaryIO) -> Any:
    try:
        regular = stat.S_ISREG(os.fstat(stream.fileno()).st_mode)
    except (OSError, ValueError, AttributeError):
        regular = False
    return stream if regular else _Unsized(stream)


def _submitted(entry: dict[str, Any]) -> Submitted:
    return Submitted(entry["campaign_id"], entry["tasks"], tuple(entry.get("warnings", ())))


def _chunks(lines: Lines) -> Iterator[bytes]:
    """A parameter file sent as it is read, never held whole."""
    while chunk := lines.stream.read(1 << 20):
        yield chunk


def _error(response: httpx.Response) -> CigriError:
    """The server's error as the error it was there: its words, and the class that gives the
    command its exit status."""
    try:
        body = response.json()
        message, field = str(body["error"]), body.get("field")
        if isinstance(body.get("problems"), list):  # several problems: a line each, as in direct mode
            message = "\n".join(str(line) for line in body["problems"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        message, field = f"HTTP {response.status_code}: {' '.join(response.text.split())[:200]}", None
    kind = ERRORS.get(response.status_code, CigriError)
    if kind is LimitExceeded:
        retry = response.headers.get("Retry-After")
        return LimitExceeded(message, retry_after=float(retry) if retry and retry.isdigit() else None, field=field)
    return kind(message, field=field)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
