"""Use cases: what users and admins can ask of cigri, one module per resource.

The commands (directly or through ``cigri server``) only call these and render. Every function
takes the grid and, where it matters, the acting user as a value: nothing here reads the
environment to learn who is calling.
"""

from __future__ import annotations

from cigri.api.accounting import core_hours
from cigri.api.campaigns import (TASK_COUNT_KEYS, campaign_detail, campaign_summary, campaign_tasks, cancel,
                                 list_campaigns, pause, resume)
from cigri.api.cluster_tokens import add_token, list_tokens, remove_token
from cigri.api.clusters import add_cluster, list_clusters, remove_cluster, set_blacklist, test_cluster, usage
from cigri.api.events import event, fix_events, list_events
from cigri.api.jobs import cancel_job, job_info, job_output
from cigri.api.notifications import NOTIFY_KINDS, list_subscriptions, shown_target, subscribe, unsubscribe
from cigri.api.shares import (current_shares, explain, list_classes, list_users, read_scenario,
                              shares_of_scenario)
from cigri.api.submission import INSERT_CHUNK, JDLText, extend, submit, submit_all
from cigri.users import acting_user

__all__ = ["INSERT_CHUNK", "NOTIFY_KINDS", "TASK_COUNT_KEYS", "JDLText", "add_cluster", "add_token", "campaign_detail",
           "campaign_summary", "campaign_tasks", "cancel", "cancel_job", "core_hours", "current_shares", "current_user", "event",
           "explain", "extend", "fix_events", "job_info", "job_output", "list_campaigns", "list_classes",
           "list_clusters", "list_events", "list_subscriptions", "list_tokens", "list_users", "pause", "read_scenario",
           "remove_cluster", "remove_token", "resume", "set_blacklist", "shares_of_scenario", "shown_target", "submit", "submit_all",
           "subscribe", "test_cluster", "unsubscribe", "usage"]


def current_user() -> str:
    """The Unix user running the command (never an environment variable: see :mod:`cigri.users`)."""
    return acting_user()
