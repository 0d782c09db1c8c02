"""Ids are never given twice: purging the newest campaign must not hand its ids (campaign,
tasks, jobs, events) to the next one, whose jobs a cluster would otherwise take for the old
ones (an idempotent submit adopts a job it already ran: the new job shows ended, never run)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from service import Site, started

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with started() as built:
        yield built


def test_a_purged_campaigns_ids_go_to_no_one_else(site: Site) -> None:
    u1, u2 = site.users
    program = site.script("mark.sh", 'touch "$CIGRI_WORKDIR/ran-$CIGRI_CAMPAIGN_ID-$1"; [ "$1" != bad ]\n')
    first = site.submit(u1, site.jdl(u1, "first", exec_file=str(program), params=["a", "b", "c", "bad"],
                                     exec_directory=str(site.exec)))
    site.drain(u1, first)
    before = site.json(u1, "gridstat", "-c", str(first), "-f")
    events = [e["id"] for e in site.json(u1, "gridevents", "-c", str(first), "-a")]
    site.run(u1, "griddel", "--purge", str(first))

    second = site.submit(u2, site.jdl(u2, "second", exec_file=str(program), params=["a", "b", "c", "bad"],
                                      exec_directory=str(site.exec)))
    summary = site.drain(u2, second)
    after = site.json(u2, "gridstat", "-c", str(second), "-f")
    assert second > first
    assert min(t["id"] for t in after) > max(t["id"] for t in before)
    assert min(j["id"] for t in after for j in t["jobs"]) > max(j["id"] for t in before for j in t["jobs"])
    assert (summary["tasks"]["terminated"], summary["tasks"]["failed"]) == (3, 1)
    assert sorted(p.name for p in site.exec.glob(f"ran-{second}-*")) == [f"ran-{second}-{n}" for n in
                                                                          ("a", "b", "bad", "c")]
    assert min(e["id"] for e in site.json(u2, "gridevents", "-c", str(second), "-a")) > max(events)
