"""Running ``cigri server``: its files, its sockets, its cycles, and stopping cleanly.

One service: the API (uvicorn, on a Unix socket and optionally TCP, both in one event loop)
and the scheduling cycles (a child process it starts and watches, one writer's worth of
cycles, as ``cigri daemon``). It holds the grid's daemon lock, so no daemon or second server
drives the same grid. SIGTERM and SIGINT stop accepting requests, let the current cycle finish, and exit; a
``kill -9`` loses nothing (every change is one transaction; clients get one line while it is
down, and systemd restarts it).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
import multiprocessing
import os
import signal
import socket
import stat
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import uvicorn

from cigri.config import Config, parse_listen
from cigri.daemon import LoopStatus, cycle_loop, daemon_lock
from cigri.errors import CigriError, ConfigError
from cigri.grid import open_grid
from cigri.logs import rate_limit_logs
from cigri.server.app import create_app
from cigri.server.auth import Front
from cigri.server.guard import Admission, Limits, fit_descriptors, protocol, tls_context

log = logging.getLogger("cigri.server")
# What a flood of requests makes speak once per request: rate-limited (cigri.logs.rate_limit_logs).
SERVER_LOGGERS = ("cigri.server", "cigri.server.guard", "uvicorn.error", "asyncio")
PR_SET_PDEATHSIG = 1  # prctl(2)


class Cycles:
    """The scheduling cycles, in a child process the server starts, watches and restarts: the
    API's threads and the cycles then share no interpreter lock (bench/api.py measured a cycle
    twice as slow beside 50 polling clients in one process). The child dies with the server
    (``PR_SET_PDEATHSIG``, even on ``kill -9``) and stops after its current cycle when the
    server stops.

    Each child is stopped through a pipe of its own (:class:`StopPipe`), not a shared
    multiprocessing Event: a child killed while waiting on such an Event leaves its condition
    counting a sleeper that never wakes, and the server's ``set()`` then waits for ever."""

    RESTART_DELAY = 5.0

    def __init__(self, config: Config) -> None:
        self.config = config
        context = multiprocessing.get_context("spawn")  # a fresh interpreter: nothing of the event loop
        self.context = context
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.stopping: Any = None  # the write end of the running child's stop pipe
        self.times = context.Array("d", [0.0, 0.0, 0.0])  # last start, last end, failures in a row
        self.error = context.Array("c", 512)  # the last failure, one line
        self.process: Any = None
        self.supervisor = threading.Thread(target=self._supervise, name="cigri-cycles", daemon=True)

    def start(self) -> None:
        self.supervisor.start()

    def _supervise(self) -> None:
        """Run the child; restart it when it dies, until the server stops (this thread starts
        it, and lives as long as it: the child's death signal is tied to its parent thread)."""
        while True:
            reader, writer = self.context.Pipe(duplex=False)
            with self.lock:
                if self.stop.is_set():
                    return
                self.stopping = writer
            self.process = self.context.Process(target=_run_cycles, name="cigri-cycles",
                                                args=(self.config, reader, self.times, self.error))
            self.process.start()
            reader.close()  # the child has its own
            self.process.join()
            with self.lock:
                self.stopping = None
            writer.close()
            if self.stop.is_set():
                return
            log.error("the cycle process ended (exit %s); restarting it in %ss", self.process.exitcode,
                      self.RESTART_DELAY)
            self.stop.wait(self.RESTART_DELAY)

    def status(self) -> dict[str, Any]:
        """For ``/healthz``: alive, and a cycle ended less than three periods ago or one is running."""
        started, ended, failures = (value or None for value in self.times[:])
        now = time.time()
        running = started is not None and (ended is None or ended < started)
        recent = ended is not None and now - ended < 3 * self.config.settings.cycle_period + 5
        alive = self.process is not None and self.process.is_alive()
        return {"ok": alive and (running or recent or started is None), "running": running,
                "last_started_at": started, "last_ended_at": ended, "failures_in_a_row": int(failures or 0),
                "last_error": bytes(self.error[:]).rstrip(b"\0").decode(errors="replace") or None}

    def join(self) -> None:
        with self.lock:
            self.stop.set()
            if self.stopping is not None:
                with contextlib.suppress(OSError):
                    self.stopping.send_bytes(b"stop")
        self.supervisor.join()


class StopPipe:
    """The cycle process's stop: the read end of a pipe the server writes to when it stops. Its
    end closed (the server gone) stops it too."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader

    def is_set(self) -> bool:
        return bool(self.reader.poll(0))

    def wait(self, timeout: float | None = None) -> bool:
        return bool(self.reader.poll(timeout))


def _run_cycles(config: Config, stop: Any, times: Any, error: Any) -> None:
    """The child process: cycles until the server writes to ``stop`` (a pipe's read end),
    reporting each into the shared ``times``."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # the server gone (kill -9 included), the cycles go too
    if os.getppid() == 1:  # it died before that was set
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the server, which stops the cycles itself
    os.umask(0o077)
    from cigri.logs import log_to_file  # this process's own handler on the server's log file

    log_to_file(config.log_path / "cigri.log", config.settings)

    def report(status: LoopStatus) -> None:  # into the memory the server reads
        times[:] = [status.started_at or 0.0, status.ended_at or 0.0, float(status.failures_in_a_row)]
        error[:] = (status.last_error or "").encode()[:512].ljust(512, b"\0")

    grid = open_grid(config)
    try:
        cycle_loop(grid, StopPipe(stop), report=report)
    finally:
        grid.close()


class _Listener(uvicorn.Server):
    """A uvicorn server whose signals are the process's (two listeners share one handler)."""

    def capture_signals(self) -> contextlib.AbstractContextManager[None]:  # type: ignore[override]
        return contextlib.nullcontext()


def unix_socket(path: Path) -> socket.socket:
    """The server's Unix socket, reachable by every local user (who they are is the kernel's
    answer, not a file permission): a stale socket of a dead server is replaced, a live one is
    refused. Its directory must let users through (``o+x``): the home is made 0711 if needed."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o711)
    directory = path.parent.stat()
    if not directory.st_mode & stat.S_IXOTH:
        os.chmod(path.parent, stat.S_IMODE(directory.st_mode) | 0o011)
    if path.exists() or path.is_symlink():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
        except OSError:
            path.unlink()
        else:
            raise CigriError(f"{path}: a server already answers there")
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    os.chmod(path, 0o666)
    sock.listen(256)
    return sock


def tcp_socket(listen: str) -> socket.socket:
    host, port = parse_listen(listen)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, so that asyncio sets TCP_NODELAY on each connection (it checks the
    # protocol number): without it every answer waited on Nagle and a delayed ACK, 40 ms
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise CigriError(f"server.listen {listen}: {error.strerror}") from None
    sock.listen(256)
    return sock


def serve(config: Config, *, ready: Any = None) -> None:
    """Run the server until SIGTERM or SIGINT. ``ready(sockets)`` is called once listening."""
    os.umask(0o077)
    grid = open_grid(config)  # creates the home, spool and logs, migrates, takes the configured clusters
    grid.close()
    if config.server.tls_cert:
        for key in ("tls_cert", "tls_key"):
            if not Path(getattr(config.server, key)).is_file():
                raise ConfigError(f"server.{key}: no such file {getattr(config.server, key)}")
    check_front(config)
    uploads = config.spool_path / "uploads"  # what a request spools lands in the server's own, private spool
    uploads.mkdir(mode=0o700, exist_ok=True)
    tempfile.tempdir = str(uploads)
    rate_limit_logs(SERVER_LOGGERS)
    app = create_app(config)
    with daemon_lock(grid):
        sockets = [unix_socket(Path(config.server.socket))]
        if config.server.listen:
            sockets.append(tcp_socket(config.server.listen))
        cycles = Cycles(config)
        app.state.cigri.cycles = cycles
        per_listener = fit_descriptors(config, len(sockets))
        listeners = [_listener(app, config, sock, per_listener) for sock in sockets]
        cycles.start()
        log.info("server started: %s%s, cycles every %ss", config.server.socket,
                 f", {config.server.listen}{' (https)' if config.server.tls_cert else ''}" if config.server.listen
                 else "", config.settings.cycle_period)
        try:
            asyncio.run(_serve(listeners, sockets, ready))
        finally:  # the socket stays: while the server is down, clients are told it does not answer
            cycles.join()
            app.state.cigri.pool.close()
            log.info("server stopped")


def _listener(app: Any, config: Config, sock: socket.socket, connections: int) -> _Listener:
    """One listener in the server's bounds (:mod:`cigri.server.guard`): no proxy header is
    read (who is calling is the peer's, never a header's), and TLS is the guard's."""
    server = config.server
    unix = sock.family == socket.AF_UNIX
    front: Front = app.state.cigri.front
    admission = Admission(connections, server.max_connections_per_peer,
                          frozenset(front.uids) if unix else frozenset(front.addresses))
    tls = tls_context(config) if server.tls_cert and not unix else None
    limits = Limits(server.header_timeout, server.body_timeout, server.max_header_bytes, tls)
    return _Listener(uvicorn.Config(app, lifespan="off", access_log=False, log_config=None,
                                    http=protocol(admission, limits), proxy_headers=False,
                                    timeout_keep_alive=max(1, round(server.idle_timeout)),
                                    timeout_graceful_shutdown=10, backlog=1024))


def check_front(config: Config) -> None:
    """A front over TCP is refused at start unless it sends a secret (``server.trusted_proxies``
    needs ``server.front_secret_file``: the configuration checks it); the secret file must be
    readable, long enough and private (the server's own, 0600)."""
    if not config.server.front_secret_file:
        return
    Front.of(config)
    path = Path(config.server.front_secret_file)
    if stat.S_IMODE(path.stat().st_mode) & 0o077:
        raise ConfigError(f"server.front_secret_file: {path} is readable by others; chmod 600 {path}")


async def _serve(listeners: list[_Listener], sockets: list[socket.socket], ready: Any) -> None:
    loop = asyncio.get_running_loop()

    def stop() -> None:
        for listener in listeners:
            listener.should_exit = True

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop)
    tasks = [asyncio.create_task(listener.serve(sockets=[sock])) for listener, sock in zip(listeners, sockets)]
    while not all(listener.started for listener in listeners) and not any(task.done() for task in tasks):
        await asyncio.sleep(0.01)
    if ready is not None:
        ready(sockets)
    await asyncio.gather(*tasks)
