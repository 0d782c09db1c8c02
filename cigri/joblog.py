"""Per-user submission logs (CiGri's ``LOG_JOBS``): what the runner sent, for a site to audit."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

from cigri import db as database
from cigri.backends import JobSpec
from cigri.config import Config


def log_submission(config: Config, cluster: str, user: str, specs: Sequence[JobSpec], remote_ids: dict[str, str]) -> None:
    """Append what was sent for ``user`` to ``cluster`` to ``{log_dir}/jobs/<cluster>_<user>``,
    one JSON line per job (CiGri's ``LOG_JOBS``), when ``cigri.log_jobs`` is on."""
    if not config.settings.log_jobs:
        return
    directory = Path(config.settings.log_dir) / "jobs"
    directory.mkdir(mode=0o700, exist_ok=True)
    lines = "".join(json.dumps({"at": database.now(), "job_id": spec.key, "remote_id": remote_ids.get(spec.key),
                                "name": spec.name, "argv": list(spec.argv), "directory": spec.directory,
                                "resources": spec.resources, "walltime_seconds": spec.walltime_seconds,
                                "best_effort": spec.best_effort, "properties": spec.properties,
                                "project": spec.project}) + "\n" for spec in specs)
    fd = os.open(directory / f"{cluster}_{user}", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a") as handle:  # one write per batch: lines of concurrent runners never interleave
        handle.write(lines)
