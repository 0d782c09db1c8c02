"""Direct mode: the command opens the grid's database itself and calls the use cases, as the
Unix user running it. For one person and their own grid: a database that is another
account's is refused (a shared grid is used through its server)."""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cigri import api
from cigri.uploads import JDLText, Lines, Submitted
from cigri.config import Config
from cigri.errors import CigriError
from cigri.grid import Grid, open_grid
from cigri.logs import log_to_file
from cigri.users import is_admin

if TYPE_CHECKING:
    from cigri.cycle import CycleReport


@dataclass
class DirectClient:
    grid: Grid
    user: str
    admin: bool
    direct: bool = True
    logging_cycles: bool = False

    @classmethod
    def open(cls, config: Config) -> DirectClient:
        refuse_others_database(config)
        grid = open_grid(config)
        user = api.current_user()
        return cls(grid, user, is_admin(config, user))

    def submit(self, jdls: list[JDLText], *, strict: bool = False) -> list[Submitted]:
        return api.submit_all(self.grid, jdls, user=self.user, strict=strict)

    def extend(self, campaign_id: int, lines: Lines, *, strict: bool = False) -> Submitted:
        return api.extend(self.grid, campaign_id, lines, user=self.user, strict=strict)

    def campaigns(self, *, user: str | None = None, mine: bool = False, include_finished: bool = False,
                  states: tuple[str, ...] = (), name: str | None = None,
                  since: float | None = None) -> list[dict[str, Any]]:
        return api.list_campaigns(self.grid, user=self.user if mine else user, include_finished=include_finished,
                                  states=states, name=name, since=since)

    def campaign(self, campaign_id: int) -> dict[str, Any]:
        return api.campaign_detail(self.grid, campaign_id, user=self.user)

    def campaign_share(self, campaign_id: int) -> dict[str, Any]:
        return api.campaign_share(self.grid, campaign_id, user=self.user)

    def tasks(self, campaign_id: int, *, states: tuple[str, ...] = (), offset: int = 0,
              limit: int | None = None) -> Iterator[dict[str, Any]]:
        return api.campaign_tasks(self.grid, campaign_id, user=self.user, states=states, offset=offset, limit=limit)

    def campaign_jdl(self, campaign_id: int) -> dict[str, Any]:
        return api.campaign_jdl(self.grid, campaign_id, user=self.user)

    def imported_campaign(self, v3_id: int) -> int:
        return api.imported_campaign(self.grid, v3_id, user=self.user)

    def campaign_clusters(self, campaign_id: int) -> list[dict[str, Any]]:
        return api.campaign_clusters(self.grid, campaign_id, user=self.user)

    def campaign_throughput(self, campaign_id: int, points: int) -> dict[str, Any]:
        return api.campaign_throughput(self.grid, campaign_id, user=self.user, points=points)

    def purge(self, campaign_id: int) -> None:
        api.purge(self.grid, [campaign_id], user=self.user)

    def purge_campaigns(self, campaign_ids: list[int]) -> list[int]:
        return api.purge(self.grid, campaign_ids, user=self.user)

    def purge_ended(self, days: float) -> list[int]:
        return api.purge_ended(self.grid, days=days, user=self.user)

    def pause(self, campaign_id: int) -> None:
        api.pause(self.grid, campaign_id, user=self.user)

    def resume(self, campaign_id: int) -> None:
        api.resume(self.grid, campaign_id, user=self.user)

    def cancel(self, campaign_id: int) -> None:
        api.cancel(self.grid, campaign_id, user=self.user)

    def job(self, job_id: int) -> dict[str, Any]:
        return api.job_info(self.grid, job_id, user=self.user)

    def job_output(self, job_id: int, stream: str) -> str:
        return api.job_output(self.grid, job_id, stream, user=self.user)

    def cancel_job(self, job_id: int) -> None:
        api.cancel_job(self.grid, job_id, user=self.user)

    def job_on_cluster(self, job_id: int) -> dict[str, Any]:
        return api.job_on_cluster(self.grid, job_id, user=self.user)

    def mark_job_event(self, job_id: int, message: str) -> int:
        return api.mark_job_event(self.grid, job_id, message, user=self.user)

    def events(self, *, campaign_id: int | None = None, global_only: bool = False,
               include_closed: bool = False) -> list[dict[str, Any]]:
        return api.list_events(self.grid, user=self.user, campaign_id=campaign_id, global_only=global_only,
                               include_closed=include_closed)

    def event(self, event_id: int) -> dict[str, Any]:
        return api.event(self.grid, event_id, user=self.user)

    def fix_events(self, *, event_id: int | None = None, campaign_id: int | None = None, global_only: bool = False,
                   resubmit: bool = False) -> dict[str, int]:
        return api.fix_events(self.grid, user=self.user, event_id=event_id, campaign_id=campaign_id,
                              global_only=global_only, resubmit=resubmit)

    def subscribe(self, *, kind: str, target: str, severity: str) -> dict[str, Any]:
        return api.subscribe(self.grid, user=self.user, kind=kind, target=target, severity=severity)

    def confirm_subscription(self, subscription_id: int, code: str) -> dict[str, Any]:
        return api.confirm_subscription(self.grid, subscription_id, code, user=self.user)

    def unsubscribe(self, subscription_id: int) -> None:
        api.unsubscribe(self.grid, subscription_id, user=self.user)

    def subscriptions(self, *, all_users: bool = False) -> list[dict[str, Any]]:
        return api.list_subscriptions(self.grid, user=self.user, all_users=all_users)

    def clusters(self) -> list[dict[str, Any]]:
        return api.list_clusters(self.grid)

    def usage(self, hours: float) -> list[dict[str, Any]]:
        return api.usage(self.grid, hours)

    def core_hours(self, hours: float) -> list[dict[str, Any]]:
        return api.core_hours(self.grid, hours, user=self.user)

    def cluster_table(self) -> list[dict[str, Any]]:
        return api.cluster_table(self.grid)

    def add_cluster(self, name: str, backend: str, options: dict[str, Any]) -> None:
        api.add_cluster(self.grid, name, backend, options, user=self.user)

    def remove_cluster(self, name: str) -> None:
        api.remove_cluster(self.grid, name, user=self.user)

    def blacklist(self, name: str, reason: str | None) -> None:
        api.set_blacklist(self.grid, name, reason, user=self.user)

    def cancel_cluster_campaigns(self, name: str) -> list[int]:
        return api.cancel_cluster_campaigns(self.grid, name, user=self.user)

    def test_cluster(self, name: str, directory: str | None, timeout: float) -> dict[str, Any]:
        return api.test_cluster(self.grid, name, directory, timeout, user=self.user)

    def shares(self) -> dict[str, Any]:
        return api.current_shares(self.grid, user=self.user)

    def classes(self) -> list[dict[str, Any]]:
        return api.list_classes(self.grid)

    def users(self) -> dict[str, Any]:
        return api.list_users(self.grid)

    def create_token(self, *, owner: str | None, ttl: str | None, note: str) -> dict[str, Any]:
        return api.create_token(self.grid, user=self.user, owner=owner, ttl=ttl, note=note)

    def tokens(self, *, all_users: bool = False) -> list[dict[str, Any]]:
        return api.list_tokens(self.grid, user=self.user, all_users=all_users)

    def revoke_token(self, token_id: int) -> None:
        api.revoke_token(self.grid, token_id, user=self.user)

    def add_cluster_token(self, cluster: str, token: str) -> dict[str, Any]:
        return api.add_cluster_token(self.grid, cluster, token, user=self.user)

    def cluster_tokens(self) -> list[dict[str, Any]]:
        return api.list_cluster_tokens(self.grid, user=self.user)

    def remove_cluster_token(self, cluster: str) -> None:
        api.remove_cluster_token(self.grid, cluster, user=self.user)

    def cycles(self) -> dict[str, Any]:
        return api.cycles(self.grid)

    def drive_cycle(self) -> CycleReport | None:
        """The grid's owner (an admin) runs a cycle when no daemon does, logging it as ``cigri
        cycle`` would; anyone else never: a cycle runs the local cluster's jobs as whoever runs
        it, and reads the clusters' key files."""
        from cigri.cycle import drive  # here: the whole cycle's imports would slow every plain command
        from cigri.daemon import daemon_running

        if not self.admin:
            return None
        if not self.logging_cycles:
            log_to_file(self.grid.config.log_path / "cigri.log", self.grid.config.settings)
            self.logging_cycles = True
        return drive(self.grid, daemon_running(self.grid))

    def close(self) -> None:
        self.grid.close()


def refuse_others_database(config: Config) -> None:
    """Direct mode is one person's own grid: a database that belongs to another account (a
    site's, made group-writable in the past) is refused, since every rule about who may do what
    could be bypassed by writing it; root may still open any (it could anyway)."""
    try:
        owner = os.stat(config.owned_path).st_uid
    except OSError:
        return
    if owner != os.geteuid() and os.geteuid() != 0:
        try:
            name = pwd.getpwuid(owner).pw_name
        except KeyError:
            name = str(owner)
        raise CigriError(f"{config.owned_path} belongs to {name}: a shared grid is used through its server "
                         "(set CIGRI_SERVER, or [client] server, to its socket or URL)")
