"""CiGri 3.2's listings, for the scripts written around its clients: its event listing
(``gridstat -e``), its usage bars (``gridclusters -b``), its values as its Ruby printed them and
clusters named by number. Its JSON documents are :mod:`cigri.cigri3`'s."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cigri.cigri3 import date, message
from cigri.errors import NotFound

if TYPE_CHECKING:
    from cigri.client import Client

SEPARATOR = "-" * 78


def cluster_name(client: Client, given: str) -> str:
    """A cluster named as CiGri's options named it, by its number (``gridclusters`` shows it),
    or by its name."""
    if not given.isdigit():
        return given
    for cluster in client.cluster_table():
        if cluster["id"] == int(given):
            return str(cluster["name"])
    raise NotFound(f"cluster #{given}: no such cluster")


def to_s(value: Any) -> str:
    """A value as Ruby's ``to_s`` wrote it in CiGri's listings (``true``, not ``True``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def event_lines(items: list[dict[str, Any]]) -> list[str]:
    """CiGri's ``print_events``: a separator before each event and after the last."""
    if not items:
        return ["No events!"]
    lines = []
    for e in items:
        job = f" of job {e['job_id']}" if e["job_id"] is not None else ""
        cluster = f" on {e['cluster']}" if e["cluster"] else ""
        lines += [SEPARATOR, f"{e['id']}: ({e['state']}) {e['code']}{job} at {date(e['created_at'])}{cluster}",
                  *message(e).split("\n")]
    return [*lines, SEPARATOR]


# --- gridclusters -b -----------------------------------------------------------------------

BAR_WIDTH = 80
_COLOURS = {"unavailable": "\033[41m \033[0m", "used": "\033[43m \033[0m", "used_by_cigri": "\033[47m \033[0m",
            "free": "\033[42m \033[0m"}  # red, yellow, white, green, as CiGri drew them
_PLAIN = {"unavailable": "x", "used": "o", "used_by_cigri": "#", "free": "."}  # NO_COLOR


def bar(usage: dict[str, int], colour: bool) -> str:
    """One cluster's 80-column bar: unavailable, used by others, used by cigri, free; each part
    ``part * 80 // max`` cells, as CiGri's integer arithmetic made them."""
    cells = _COLOURS if colour else _PLAIN
    total = usage["max_resources"]
    used_by_others = usage["used_resources"] - usage["used_by_cigri"]
    parts = {"unavailable": usage["unavailable_resources"], "used": used_by_others,
             "used_by_cigri": usage["used_by_cigri"],
             "free": total - usage["used_by_cigri"] - used_by_others - usage["unavailable_resources"]}
    return "".join(cells[name] * (max(0, n) * BAR_WIDTH // total if total else 0) for name, n in parts.items())


def legend(colour: bool) -> str:
    cells = _COLOURS if colour else _PLAIN
    return " ".join(f"{cells[name]}={name}" for name in _COLOURS)
