"""gridclusters: every cluster with its slots, cigri's use of it and its blacklist state."""

from __future__ import annotations

import typer

from cigri import api
from cigri.cli import common

app = typer.Typer(add_completion=True, help="Show the grid's clusters.")


@app.command()
@common.errors_to_exit
def gridclusters(
    as_json: bool = typer.Option(False, "--json", help="Print one JSON value."),
    version: bool = common.VersionOption,
) -> None:
    """List clusters: total / free / used-by-cigri slots, free memory (where the cluster says)
    and blacklist state."""
    clusters = api.clusters(common.grid())
    if as_json:
        return common.print_json(clusters)
    common.print_table(None, ["cluster", "backend", "total", "free", "free memory", "used by cigri", "queued",
                              "blacklisted", "problem"],
                       [[c["name"], c["backend"], c["total_slots"], c["free_slots"],
                         None if c["free_memory_mb"] is None else f"{c['free_memory_mb'] / 1024:.1f} GiB",
                         c["used_by_cigri"], c["queued_jobs"],
                         c["blacklist_reason"] or ("yes" if c["blacklisted"] else "no"), c["error"]] for c in clusters])


def main() -> None:
    app()
