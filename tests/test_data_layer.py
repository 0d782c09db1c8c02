"""The data layer (``cigri/db/``) stands below the use cases: it imports none of them, and the
table groups moved behind it are written to nowhere else (docs/development.md, "Where SQL lives")."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The tables whose every statement lives in cigri/db/.
GATHERED = ("tokens", "subscriptions", "mail_codes", "outbox", "events", "event_jobs", "campaigns", "tasks", "jobs",
            "task_blocks", "task_counts", "campaign_properties", "campaign_stats", "campaign_cluster_health", "taps",
            "affinity_penalties", "throughput_minutes", "clusters", "counts")
STATEMENT = re.compile(rf"\b(?:FROM|INTO|UPDATE|JOIN|TABLE)\s+(?:{'|'.join(GATHERED)})\b")
# Other databases, whose tables have some of these names: CiGri v3's, which the import reads (it
# writes cigri's through the layer), and the local pool's own spool of jobs.
OTHER_DATABASES = {Path("cigri/import_v3.py"), Path("cigri/backends/local/pool.py"),
                   Path("cigri/backends/local/__init__.py")}


def test_the_layer_imports_no_use_case_and_no_server() -> None:
    probe = ("import sys, cigri.db, cigri.db.campaigns, cigri.db.clusters, cigri.db.counts, cigri.db.events, cigri.db.jobs, "
             "cigri.db.notifications, cigri.db.tasks, cigri.db.tokens; "
             "print(sorted(m for m in sys.modules if m.startswith(('cigri.api', 'cigri.server', 'cigri.cli'))))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert result.stdout.strip() == "[]"


def test_the_gathered_tables_are_written_only_in_the_layer() -> None:
    found = [f"{path.relative_to(REPO)}:{number}: {line.strip()}"
             for folder in ("cigri", "cli") for path in sorted((REPO / folder).rglob("*.py"))
             if "db" not in path.relative_to(REPO / folder).parts[:1] and path.relative_to(REPO) not in OTHER_DATABASES
             for number, line in enumerate(path.read_text().splitlines(), 1) if STATEMENT.search(line)]
    assert found == []
