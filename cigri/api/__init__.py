"""Use cases: what users and admins can ask of cigri, one module per resource.

The commands (directly or through ``cigri server``) only call these and render. Every function
takes the grid and, where it matters, the acting user as a value: nothing here reads the
environment to learn who is calling.
"""

from __future__ import annotations

from cigri.api.accounting import core_hours
from cigri.api.admin import cancel_cluster_campaigns, mark_job_event, purge, purge_ended
from cigri.api.campaigns import (CAMPAIGN_STATES, TASK_COUNT_KEYS, campaign_clusters, campaign_detail, campaign_jdl,
                                 campaign_owners, campaign_summary, campaign_tasks, campaign_throughput, cancel,
                                 imported_campaign, list_campaigns, pause, resume)
from cigri.api.cluster_tokens import add_cluster_token, list_cluster_tokens, remove_cluster_token
from cigri.api.clusters import (add_cluster, cluster_table, first_sample, grid_usage, list_clusters, remove_cluster,
                                set_blacklist, test_cluster, usage)
from cigri.api.cycles import cycle_leader, cycles
from cigri.api.events import event, fix_events, list_events
from cigri.api.history import campaign_history
from cigri.api.jobs import STREAMS, campaign_jobs, cancel_job, job_info, job_on_cluster, job_output
from cigri.api.notifications import (NOTIFY_KINDS, confirm_subscription, list_subscriptions, shown_target, subscribe,
                                     unsubscribe)
from cigri.api.shares import (campaign_share, current_shares, explain, list_classes, list_users, read_scenario,
                              shares_of_scenario)
from cigri.api.staging import INSERT_CHUNK
from cigri.api.submission import extend, parameter_room, submit, submit_all
from cigri.api.tokens import create_token, list_tokens, revoke_token, token_user
from cigri.import_v3 import import_v3
from cigri.uploads import JDLText, Lines, Submitted, local_jdl
from cigri.users import acting_user

__all__ = ["CAMPAIGN_STATES", "INSERT_CHUNK", "NOTIFY_KINDS", "STREAMS", "TASK_COUNT_KEYS", "JDLText", "Lines",
           "Submitted", "add_cluster", "add_cluster_token", "campaign_clusters", "campaign_detail",
           "campaign_history", "campaign_jdl", "campaign_jobs", "campaign_owners", "campaign_share",
           "campaign_summary",
           "campaign_tasks", "campaign_throughput", "cancel", "cancel_cluster_campaigns", "cancel_job",
           "cluster_table", "confirm_subscription", "core_hours", "create_token", "current_shares", "current_user", "cycle_leader", "cycles", "event",
           "explain", "extend", "first_sample", "fix_events", "grid_usage", "import_v3", "imported_campaign", "job_info", "job_on_cluster",
           "job_output", "list_campaigns", "list_classes", "list_cluster_tokens", "list_clusters", "list_events",
           "list_subscriptions", "list_tokens", "list_users", "local_jdl", "mark_job_event", "parameter_room", "pause",
           "purge",
           "purge_ended", "read_scenario", "remove_cluster", "remove_cluster_token", "resume", "revoke_token",
           "set_blacklist", "shares_of_scenario", "shown_target", "submit", "submit_all", "subscribe", "test_cluster",
           "token_user", "unsubscribe", "usage"]


def current_user() -> str:
    """The Unix user running the command (never an environment variable: see :mod:`cigri.users`)."""
    return acting_user()
