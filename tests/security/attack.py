"""What the attack suite sends: raw bytes to a real ``cigri server`` on loopback, as an attacker
with a shell account would, and what comes back. Every attack is bounded in count and time."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STATUS = re.compile(rb"^HTTP/1\.[01] (\d{3})", re.M)


def connect(port: int, source: str = "127.0.0.1", timeout: float = 10) -> socket.socket:
    """A TCP connection to the server from ``source`` (any address of 127.0.0.0/8 is this host)."""
    sock = socket.socket()
    sock.settimeout(timeout)
    sock.bind((source, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def request(method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b"") -> bytes:
    """One HTTP/1.1 request, as bytes (``Host`` and ``Content-Length`` added unless given)."""
    fields = {"Host": "127.0.0.1", **(headers or {})}
    if body and "Content-Length" not in fields and "Transfer-Encoding" not in fields:
        fields["Content-Length"] = str(len(body))
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
    return head.encode("latin-1") + body


def exchange(port: int, data: bytes, *, source: str = "127.0.0.1", timeout: float = 15) -> bytes:
    """Send ``data``, then read until the server closes or ``timeout`` (what it answered)."""
    with connect(port, source, timeout) as sock:
        sock.sendall(data)
        return read_until_closed(sock, timeout)


def read_until_closed(sock: socket.socket, timeout: float) -> bytes:
    received = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        except ConnectionResetError:
            break
        if not chunk:
            break
        received += chunk
    return received


def statuses(answer: bytes) -> list[int]:
    return [int(code) for code in STATUS.findall(answer)]


def one(answer: bytes) -> tuple[int, Any]:
    """The status and the JSON body of a single answer."""
    head, _, body = answer.partition(b"\r\n\r\n")
    codes = statuses(head)
    assert codes, answer[:300]
    try:
        return codes[0], json.loads(body) if body else None
    except json.JSONDecodeError:
        return codes[0], body.decode(errors="replace")


def closed_within(sock: socket.socket, seconds: float) -> float | None:
    """How long the server took to close an idle connection (None: still open after ``seconds``)."""
    started = time.monotonic()
    sock.settimeout(seconds)
    try:
        while sock.recv(65536):
            pass
    except TimeoutError:
        return None
    except ConnectionResetError:
        pass
    return time.monotonic() - started


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident memory (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for {pid}")


def open_descriptors(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def chunks(total: int, size: int = 1 << 20) -> Iterator[bytes]:
    """``total`` bytes of one JSON string's worth of filler, ``size`` at a time."""
    block = b"a" * size
    yield b'{"name": "' + block[: size - 10]
    sent = size
    while sent < total:
        yield block
        sent += size
