"""The HTTP transport (httpx): JSON requests to a cluster's REST API.

Timeouts, refused connections, authentication failures, server errors and answers that
are not JSON become :class:`BackendError` subclasses, which the cycle turns into cluster
events; they never escape as raw httpx exceptions.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from cigri.backends._pacing import Pacer
from cigri.errors import (
    BackendError,
    ClusterAuthFailure,
    ClusterBadAnswer,
    ClusterTimeout,
)


def refusal(response: httpx.Response) -> str:
    """What an answer cigri did not expect says, on one line of at most 300 characters:
    slurmrestd's ``errors`` and oarapi's ``message`` first, for the first characters of their
    pretty-printed JSON are metadata (``"meta": {"plugin"...``)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    said: list[str] = []
    if isinstance(body, dict):
        said = [str(e.get("error") or e.get("description")) for e in body.get("errors") or []
                if isinstance(e, dict) and (e.get("error") or e.get("description"))]
        said += [body["message"]] if isinstance(body.get("message"), str) else []
    text = " ".join(("; ".join(said) or response.text).split())
    return text if len(text) <= 300 else f"{text[:300]}…"


class HTTPTransport:
    def __init__(self, cluster: str, base_url: str, headers: dict[str, str], timeout: float,
                 auth: tuple[str, str] | None = None, min_interval: float = 0.0) -> None:
        self.cluster = cluster
        self._timeout = timeout
        self._client = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, auth=auth,
                                    timeout=timeout)
        self._pacer = Pacer(min_interval)

    def request(self, method: str, path: str, *, json: Any = None, params: dict[str, Any] | None = None,
                headers: dict[str, str] | None = None, accept: tuple[int, ...] = (200, 201, 202)) -> Any:
        """Send one request (``headers`` over the transport's own); return the decoded JSON
        body (None when empty)."""
        where = f"{self.cluster}: {method} {path}"
        response = self._send(where, method, path, json=json, params=params, headers=headers)
        if response.status_code not in accept:
            raise ClusterBadAnswer(f"{where}: HTTP {response.status_code}: {refusal(response)}")
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise ClusterBadAnswer(f"{where}: answer is not JSON: {response.text[:200]!r}") from None

    def text(self, method: str, path: str, headers: dict[str, str] | None = None) -> str:
        """A plain-text resource (job output through OAR's media API)."""
        response = self._send(f"{self.cluster}: {method} {path}", method, path, headers=headers)
        return response.text if response.status_code == 200 else ""

    def _send(self, where: str, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """Paced, bounded in time, and with transport and authentication failures mapped to
        the backend errors every caller shares."""
        self._pacer.wait()
        try:
            response = self._fetch(method, path, **kwargs)
        except httpx.TimeoutException:
            raise ClusterTimeout(f"{where}: no answer within {self._timeout}s") from None
        except httpx.HTTPError as error:
            raise BackendError(f"{where}: {type(error).__name__}: {error}") from None
        if response.status_code in (401, 403):
            raise ClusterAuthFailure(f"{where}: authentication refused ({response.status_code})")
        return response

    def _fetch(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The whole answer within ``timeout`` seconds in all: httpx's timeouts bound each read,
        so a server trickling a byte at a time would otherwise hold the cycle for ever."""
        deadline = time.monotonic() + self._timeout
        request = self._client.build_request(method, path, **kwargs)
        response = self._client.send(request, stream=True)
        body = bytearray()
        try:
            for chunk in response.iter_bytes():
                body += chunk
                if time.monotonic() > deadline:
                    raise httpx.ReadTimeout("the answer did not end in time", request=request)
        finally:
            response.close()
        headers = {k: v for k, v in response.headers.items() if k.lower() == "content-type"}
        return httpx.Response(response.status_code, headers=headers, content=bytes(body), request=request)

    def close(self) -> None:
        self._client.close()
