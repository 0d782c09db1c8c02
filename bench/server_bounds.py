"""Benchmark: what the server's bounds cost and what they keep, in one run.

A real ``cigri server`` (run as the one running this, with 1,024 descriptors, as on a stock
system, through ``prlimit``) with its Unix socket and TCP on 127.0.0.1. Printed, each beside its
baseline measured in the same run:

- a read over the socket (``GET /api/v1/campaigns``, connect included), p50 and p95, while
  ``--flood`` (2,000) idle TCP connections from 50 loopback addresses are held, against the
  same read without them; the server's descriptors, and the log lines the flood cost;
- the same read while ``--slow`` (200) connections trickle their heads a byte a second;
- the server's resident memory (RSS) before, with the flood held, and its peak (VmHWM) after a
  1 GiB JSON body (chunked) and a declared 1 GiB one were refused (413), with the time each
  refusal took.

Goals (issue 33): the socket read under the flood <= 1 s; 413 for the 1 GiB bodies with the
server's RSS <= 300 MB.

    python bench/server_bounds.py [--flood 2000] [--slow 200] [--reads 200] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
SOURCES = 50


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def read_seconds(path: Path) -> float:
    started = time.perf_counter()
    with socket.socket(socket.AF_UNIX) as sock:
        sock.settimeout(30)
        sock.connect(str(path))
        sock.sendall(b"GET /api/v1/campaigns HTTP/1.1\r\nHost: cigri\r\nConnection: close\r\n\r\n")
        while sock.recv(65536):
            pass
    return time.perf_counter() - started


def reads(path: Path, count: int) -> dict[str, float]:
    values = [read_seconds(path) for _ in range(count)]
    return {"p50_ms": round(1000 * percentile(values, 0.5), 2), "p95_ms": round(1000 * percentile(values, 0.95), 2),
            "mean_ms": round(1000 * statistics.mean(values), 2)}


def memory(pid: int) -> dict[str, float]:
    status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return {"rss_mb": int(status["VmRSS"].split()[0]) / 1024, "peak_mb": int(status["VmHWM"].split()[0]) / 1024}


def flood(port: int, count: int) -> list[socket.socket]:
    held = []
    for i in range(count):
        sock = socket.socket()
        sock.bind((f"127.0.0.{2 + i % SOURCES}", 0))
        try:
            sock.connect(("127.0.0.1", port))
            held.append(sock)
        except OSError:
            sock.close()
    return held


def trickle(port: int, count: int, stop: threading.Event) -> None:
    socks = []
    for i in range(count):
        sock = socket.socket()
        sock.bind((f"127.0.1.{2 + i % SOURCES}", 0))
        sock.connect(("127.0.0.1", port))
        socks.append(sock)
    head = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"a" * 60
    for byte in head:
        if stop.is_set():
            break
        for sock in socks:
            try:
                sock.send(bytes([byte]))
            except OSError:
                pass
        time.sleep(1)
    for sock in socks:
        sock.close()


def refusal(port: int, token: str, head_extra: str, body: Any) -> tuple[int, float]:
    started = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(f"POST /api/v1/campaigns HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
                     f"Content-Type: application/json\r\n{head_extra}\r\n".encode())
        try:
            for chunk in body:
                sock.sendall(chunk)
        except OSError:
            pass
        sock.settimeout(30)
        answer = sock.recv(4096)
    return int(answer.split(b" ", 2)[1]), time.perf_counter() - started


def gigabyte_chunked() -> Any:
    block = b"a" * (1 << 20)
    yield b"%x\r\n%s\r\n" % (len(block) + 10, b'{"name": "' + block)
    for _ in range(1023):
        yield b"%x\r\n%s\r\n" % (len(block), block)
    yield b"0\r\n\r\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--flood", type=int, default=2000)
    parser.add_argument("--slow", type=int, default=200)
    parser.add_argument("--reads", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    resource.setrlimit(resource.RLIMIT_NOFILE, (args.flood + args.slow + 512,) * 2)
    root = Path(tempfile.mkdtemp(prefix="cigri-bench-bounds-"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = root / "cigri.toml"
    config.write_text(f'[cigri]\ncycle_period = 1.0\n[server]\nlisten = "127.0.0.1:{port}"\n')
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("CIGRI_")},
           "CIGRI_HOME": str(root / "home"), "CIGRI_CONFIG": str(config)}
    log = open(root / "server.log", "w")
    server = subprocess.Popen(["prlimit", "--nofile=1024:1024", "--", str(BIN / "cigri"), "server"], env=env,
                              stdout=log, stderr=subprocess.STDOUT)
    path = root / "home" / "cigri.sock"
    results: dict[str, Any] = {}
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                read_seconds(path)
                break
            except OSError:
                time.sleep(0.2)
        token = json.loads(subprocess.run([str(BIN / "cigri"), "token", "create", "--json"], env=env,
                                          capture_output=True, text=True, check=True).stdout)["token"]
        for _ in range(20):
            read_seconds(path)  # warm up
        results["read_without_flood"] = reads(path, args.reads)
        results["memory_idle"] = memory(server.pid)
        lines_before = len((root / "server.log").read_text().splitlines())
        held = flood(port, args.flood)
        results["read_under_flood"] = reads(path, args.reads)
        results["flood"] = {"connections": args.flood, "descriptors": len(os.listdir(f"/proc/{server.pid}/fd")),
                            "log_lines": len((root / "server.log").read_text().splitlines()) - lines_before}
        results["memory_under_flood"] = memory(server.pid)
        for sock in held:
            sock.close()
        stop = threading.Event()
        slow = threading.Thread(target=trickle, args=(port, args.slow, stop))
        slow.start()
        time.sleep(2)
        results["read_under_slow_heads"] = reads(path, args.reads)
        stop.set()
        slow.join()
        status, seconds = refusal(port, token, f"Content-Length: {1 << 30}\r\n", [])
        results["declared_gib"] = {"status": status, "seconds": round(seconds, 3)}
        status, seconds = refusal(port, token, "Transfer-Encoding: chunked\r\n", gigabyte_chunked())
        results["chunked_gib"] = {"status": status, "seconds": round(seconds, 3)}
        results["memory_after_gib"] = memory(server.pid)
    finally:
        server.terminate()
        server.wait(60)
        log.close()
    base, flooded = results["read_without_flood"], results["read_under_flood"]
    results["ratio_p95"] = round(flooded["p95_ms"] / base["p95_ms"], 2)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"socket read, p50/p95: {base['p50_ms']}/{base['p95_ms']} ms alone; "
          f"{flooded['p50_ms']}/{flooded['p95_ms']} ms under {args.flood} idle TCP connections "
          f"({results['ratio_p95']}x; goal <= 1 s); under {args.slow} trickled heads "
          f"{results['read_under_slow_heads']['p50_ms']}/{results['read_under_slow_heads']['p95_ms']} ms")
    flood_figures = results["flood"]
    print(f"flood: the server holds {flood_figures['descriptors']} descriptors (of 1,024; "
          f"server.max_connections fitted to them), its log {flood_figures['log_lines']} more lines")
    print(f"RSS: {results['memory_idle']['rss_mb']:.0f} MB idle, {results['memory_under_flood']['rss_mb']:.0f} MB "
          f"under the flood; 1 GiB bodies: declared {results['declared_gib']['status']} in "
          f"{results['declared_gib']['seconds']} s, chunked {results['chunked_gib']['status']} in "
          f"{results['chunked_gib']['seconds']} s; peak {results['memory_after_gib']['peak_mb']:.0f} MB "
          "(goal 413, <= 300 MB)")


if __name__ == "__main__":
    main()
