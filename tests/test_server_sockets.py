"""The server's listening sockets: how they are made decides what every request costs."""

from __future__ import annotations

import socket
import stat
from pathlib import Path

from cigri.server.run import tcp_socket, unix_socket
from service import free_port


def test_the_tcp_socket_answers_without_nagles_delay() -> None:
    """asyncio sets TCP_NODELAY on a connection only when its socket names IPPROTO_TCP: a plain
    SOCK_STREAM socket left every answer waiting on Nagle and a delayed ACK (40 ms a request)."""
    sock = tcp_socket(f"127.0.0.1:{free_port()}")
    try:
        assert sock.proto == socket.IPPROTO_TCP
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    finally:
        sock.close()


def test_the_unix_socket_is_everyones_and_a_stale_one_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "home" / "cigri.sock"
    first = unix_socket(path)
    first.close()  # a server killed with -9 leaves its socket file behind
    second = unix_socket(path)
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o666
        assert path.parent.stat().st_mode & stat.S_IXOTH
    finally:
        second.close()
