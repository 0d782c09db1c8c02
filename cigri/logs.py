"""Logging: stderr for people, ``{log_dir}/cigri.log`` for the grid's own processes (cycles,
the daemon, the server), as text or one JSON object per line (``cigri.log_format``)."""

from __future__ import annotations

import copy
import json
import logging
import os
import re
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

from cigri import config as configuration


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or "(no message)"


TEXT_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"
# A URL's userinfo and query string: where webhooks and REST APIs carry passwords and tokens.
_URL = re.compile(r"\b(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^\s/?#]*@)?(?P<rest>[^\s?#\"'<>]*)"
                  r"(?P<query>\?[^\s#\"'<>]*)?")


def redact(text: str) -> str:
    """``text`` with every URL's credentials and query string masked, as each log line is
    written: libraries log URLs (httpx each request's, at INFO) and errors quote them."""
    return _URL.sub(lambda m: m["scheme"] + ("***@" if m["userinfo"] else "") + m["rest"]
                    + ("?***" if m["query"] else ""), text)


class TextFormatter(logging.Formatter):
    """:data:`TEXT_FORMAT`; ``tracebacks=False`` (stderr without ``CIGRI_DEBUG``) ends a record's
    line with its error's type and message instead, the traceback being the log file's."""

    def __init__(self, tracebacks: bool) -> None:
        super().__init__(TEXT_FORMAT)
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        if self.tracebacks or record.exc_info is None:
            return redact(super().format(record))
        brief = copy.copy(record)  # the record itself goes on to the log file, traceback and all
        brief.exc_info = brief.exc_text = None
        return redact(f"{super().format(brief)}: {_brief(record.exc_info[1])}")


class JSONFormatter(logging.Formatter):
    """One JSON object per line, for log shippers: time, level, logger, message, exception
    (the traceback, or with ``tracebacks=False`` the error's type and message)."""

    def __init__(self, tracebacks: bool) -> None:
        super().__init__()
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        entry = {"time": datetime.fromtimestamp(record.created).isoformat(timespec="milliseconds"),
                 "level": record.levelname.lower(), "logger": record.name, "message": redact(record.getMessage()),
                 "pid": record.process}
        if record.exc_info:
            entry["exception"] = redact(self.formatException(record.exc_info) if self.tracebacks
                                        else _brief(record.exc_info[1]))
        return json.dumps(entry)


def _brief(error: BaseException | None) -> str:
    return f"{type(error).__name__}: {_one_line(error)}" if error is not None else "(no error)"


def setup_logging(verbose: bool) -> None:
    """Stderr shows warnings, INFO with ``-v``, DEBUG with ``CIGRI_DEBUG``; tracebacks only with
    ``CIGRI_DEBUG``, as for a command's own error."""
    level = logging.DEBUG if os.environ.get("CIGRI_DEBUG") else logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, stream=sys.stderr)
    use_log_format("text")
    _quiet_libraries()


def _quiet_libraries() -> None:
    """httpx logs every request at INFO, the log file's default level: one line per call to
    each REST cluster and webhook, each cycle. Its warnings and errors still come through."""
    logging.getLogger("httpx").setLevel(logging.WARNING)


def _formatter(log_format: str, tracebacks: bool) -> logging.Formatter:
    return JSONFormatter(tracebacks) if log_format == "json" else TextFormatter(tracebacks)


def use_log_format(log_format: str) -> None:
    """``cigri.log_format`` applies to stderr once the configuration is read (the log file
    is opened with it)."""
    for handler in logging.getLogger().handlers:
        if not isinstance(handler, logging.FileHandler):
            handler.setFormatter(_formatter(log_format, tracebacks=bool(os.environ.get("CIGRI_DEBUG"))))


def log_to_file(path: Path, settings: configuration.Settings) -> None:
    """Cycles (``cigri cycle``, ``cigri daemon``) also log to a file at ``cigri.log_level``;
    stderr keeps the level chosen by ``setup_logging``."""
    root = logging.getLogger()
    for handler in root.handlers:
        handler.setLevel(max(handler.level, root.level))
    level = logging.getLevelName(settings.log_level.upper())
    path.touch(mode=0o600, exist_ok=True)  # private from its first line, whatever the umask
    file_handler = logging.FileHandler(path)
    file_handler.setFormatter(_formatter(settings.log_format, tracebacks=True))
    file_handler.setLevel(level)
    root.addHandler(file_handler)
    root.setLevel(min(root.level, level))
    _quiet_libraries()


class RateLimit(logging.Filter):
    """At most ``burst`` lines of one kind (a logger's message before its arguments) per
    ``window`` seconds; the first line let through after some were dropped says how many. A
    flood of bad requests then costs the log a few lines a minute, not one per request."""

    def __init__(self, burst: int = 20, window: float = 60.0) -> None:
        super().__init__()
        self.burst, self.window = burst, window
        self.seen: dict[tuple[str, str], tuple[float, int, int]] = {}  # kind -> (window start, lines, dropped)
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        kind = (record.name, str(record.msg))
        now = time.monotonic()
        with self.lock:
            start, lines, dropped = self.seen.get(kind, (now, 0, 0))
            if now - start >= self.window:
                start, lines = now, 0
            if lines >= self.burst:
                self.seen[kind] = (start, lines, dropped + 1)
                return False
            self.seen[kind] = (start, lines + 1, 0)
            if len(self.seen) > 10_000:
                self.seen = {k: v for k, v in self.seen.items() if now - v[0] < self.window}
        if dropped:
            record.msg = f"{record.msg} ({dropped} more like it dropped in the last {self.window:g}s)"
        return True


def rate_limit_logs(names: tuple[str, ...]) -> None:
    """Give each of these loggers a :class:`RateLimit` (a logger's own filter sees each record
    once, whatever handlers it reaches)."""
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RateLimit) for f in logger.filters):
            logger.addFilter(RateLimit())
