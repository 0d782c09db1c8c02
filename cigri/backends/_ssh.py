"""The SSH transport (paramiko): run a command on a cluster's front-end and read its output.

Slurm over SSH and OAR over SSH share it and differ only in dialect. Every argument is
quoted with :func:`shlex.quote` before it reaches the remote shell; nothing from a user is
ever evaluated there. Host keys are checked against the configured ``known_hosts`` (an
unknown host is refused, never trusted on first use).
"""

from __future__ import annotations

import shlex
import socket
import time
from dataclasses import dataclass

import paramiko

from cigri.backends._pacing import Pacer
from cigri.errors import BackendError, ClusterAuthFailure, ClusterTimeout


@dataclass(frozen=True)
class CommandResult:
    status: int
    stdout: str
    stderr: str


class SSHTransport:
    def __init__(self, cluster: str, host: str, port: int, user: str, key_file: str | None,
                 known_hosts: str | None, timeout: float, min_interval: float = 0.0) -> None:
        self.cluster, self.host, self.port, self.user = cluster, host, port, user
        self.key_file, self.known_hosts, self.timeout = key_file, known_hosts, timeout
        self._client: paramiko.SSHClient | None = None
        self._pacer = Pacer(min_interval)

    def _transport(self) -> paramiko.Transport:
        """The open connection, made again if it dropped."""
        transport = self._client.get_transport() if self._client is not None else None
        if transport is None or not transport.is_active():
            transport = self._connect().get_transport()
            assert transport is not None, "paramiko connects a transport or raises"
        return transport

    def _connect(self) -> paramiko.SSHClient:
        self.close()
        client = paramiko.SSHClient()
        if self.known_hosts:
            client.load_host_keys(self.known_hosts)
        else:
            client.load_system_host_keys()
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            client.connect(self.host, port=self.port, username=self.user, key_filename=self.key_file,
                           allow_agent=False, look_for_keys=self.key_file is None, timeout=self.timeout,
                           banner_timeout=self.timeout, auth_timeout=self.timeout)
        except paramiko.AuthenticationException as error:
            raise ClusterAuthFailure(f"{self.cluster}: ssh authentication failed for {self.user}@{self.host}: {error}") from None
        except (socket.timeout, TimeoutError) as error:
            raise ClusterTimeout(f"{self.cluster}: ssh connection to {self.host}:{self.port} timed out") from error
        except (OSError, paramiko.SSHException) as error:
            raise BackendError(f"{self.cluster}: ssh {self.host}:{self.port}: {error}") from None
        self._client = client
        return client

    def run(self, argv: list[str], stdin: str | None = None, timeout: float | None = None) -> CommandResult:
        """Run ``argv`` (quoted word by word) and wait for it, within the timeout."""
        command = " ".join(shlex.quote(word) for word in argv)
        self._pacer.wait()
        transport = self._transport()
        try:
            channel = transport.open_session(timeout=self.timeout)
            channel.settimeout(timeout or self.timeout)
            channel.exec_command(command)
            if stdin is not None:
                channel.sendall(stdin.encode())
            channel.shutdown_write()
            stdout, stderr = _drain(channel, timeout or self.timeout)
            status = channel.recv_exit_status()
            channel.close()
        except (socket.timeout, TimeoutError):
            self.close()
            raise ClusterTimeout(f"{self.cluster}: {argv[0]} did not answer within {timeout or self.timeout}s") from None
        except (OSError, EOFError, paramiko.SSHException) as error:
            self.close()
            raise BackendError(f"{self.cluster}: ssh connection lost during {argv[0]}: {error}") from None
        return CommandResult(status, stdout.decode(errors="replace"), stderr.decode(errors="replace"))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _drain(channel: paramiko.Channel, timeout: float) -> tuple[bytes, bytes]:
    """Read stdout and stderr until the command ends, both at once so neither window fills."""
    out, err = bytearray(), bytearray()
    deadline = time.monotonic() + timeout
    while True:
        busy = False
        if channel.recv_ready():
            out += channel.recv(65536)
            busy = True
        if channel.recv_stderr_ready():
            err += channel.recv_stderr(65536)
            busy = True
        if not busy:
            if channel.exit_status_ready():
                return bytes(out), bytes(err)
            if time.monotonic() > deadline:
                raise TimeoutError
            time.sleep(0.005)
