"""Admission rules: a site's declarative policy on what may be submitted, checked at gridsub.

CiGri ran Ruby code from its ``admission_rules`` table; here the rules are data in the
configuration's ``[admission]`` section, never evaluated: who may submit which campaign type or
class to which cluster (CiGri's ``user_lists`` file read as it was), caps on the tasks and the
walltime of a campaign, and the per-cluster JDL defaults the site sets where a JDL sets none.
A refusal is CiGri's ``Admission rule error: <message>``, exit status 1 (a valid JDL the
site's policy refuses), and nothing is written.
"""

from __future__ import annotations

import grp
import json
import pwd
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cigri.errors import ConfigError, Refused

BEST_EFFORT = "best-effort"
RULE_KEYS = ("types", "classes", "clusters", "users", "groups", "message")


class AdmissionRefused(Refused):
    """The site's admission rules refuse the campaign (exit status 1)."""

    def __init__(self, message: str) -> None:
        super().__init__(f"Admission rule error: {message}")


@dataclass(frozen=True)
class Rule:
    """On the clusters it names, campaigns of the types and classes it names are for its
    users and groups only (an absent selector matches everything)."""

    types: tuple[str, ...] | None = None
    classes: tuple[str, ...] | None = None
    clusters: tuple[str, ...] | None = None
    users: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    message: str = ""

    def applies(self, campaign_type: str, class_name: str, cluster: str) -> bool:
        return all(selector is None or value in selector for selector, value in
                   ((self.types, campaign_type), (self.classes, class_name), (self.clusters, cluster)))

    def admits(self, user: str) -> bool:
        return user in self.users or any(_member(user, group) for group in self.groups)


@dataclass(frozen=True)
class Admission:
    """The ``[admission]`` section."""

    max_tasks: int = 0  # most tasks a campaign may hold; 0: no cap
    max_walltime: str = ""  # longest walltime of a job; "": no cap
    user_lists: str = ""  # CiGri's user_lists file; "": none
    defaults: dict[str, Any] = field(default_factory=dict)  # per-cluster JDL keys
    rules: tuple[Rule, ...] = ()


def from_toml(table: Mapping[str, Any]) -> Admission:
    """The ``[admission]`` section, checked: every problem is a :class:`ConfigError` naming its key."""
    from cigri.jdl.walltime import parse_walltime

    values: dict[str, Any] = {}
    for key, value in table.items():
        where = f"admission.{key}"
        if key == "max_tasks":
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"{where}: expected an integer >= 0, got {value!r}")
        elif key in ("max_walltime", "user_lists"):
            if not isinstance(value, str):
                raise ConfigError(f"{where}: expected a string, got {value!r}")
            if key == "max_walltime" and value:
                try:
                    parse_walltime(value)
                except ValueError as error:
                    raise ConfigError(f"{where}: {error}") from None
        elif key == "defaults":
            value = _defaults(value)
        elif key == "rules":
            if not isinstance(value, list):
                raise ConfigError(f"{where}: expected [[admission.rules]] tables")
            value = tuple(_rule(f"{where}[{n}]", rule) for n, rule in enumerate(value))
        else:
            raise ConfigError(f"unknown key {where}")
        values[key] = value
    return Admission(**values)


def _defaults(value: Any) -> dict[str, Any]:
    """Per-cluster JDL keys, checked against the JDL's own schema."""
    import jsonschema

    from cigri.jdl.parser import GLOBAL_ONLY, schema

    if not isinstance(value, dict):
        raise ConfigError("admission.defaults: expected a table of JDL keys")
    cluster = schema()["$defs"]["cluster"]
    for key, item in value.items():
        if key in GLOBAL_ONLY or key not in cluster["properties"] or key == "exec_file":
            raise ConfigError(f"admission.defaults.{key}: not a per-cluster JDL key a site may default")
        try:
            jsonschema.validate({key: item}, {**cluster, "$defs": schema()["$defs"]})
        except jsonschema.ValidationError as error:
            raise ConfigError(f"admission.defaults.{key}: {error.message}") from None
    return dict(value)


def _rule(where: str, table: Any) -> Rule:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: expected a table")
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key not in RULE_KEYS:
            raise ConfigError(f"unknown key {where}.{key}")
        if key == "message":
            if not isinstance(value, str):
                raise ConfigError(f"{where}.message: expected a string")
        elif not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ConfigError(f"{where}.{key}: expected a list of names, got {value!r}")
        values[key] = value if key == "message" else tuple(value)
    if not values.get("users") and not values.get("groups"):
        raise ConfigError(f"{where}: names no users and no groups: it would refuse everyone "
                          "(a cluster nobody may use is left out of the configuration)")
    return Rule(**values)


def check_campaign(admission: Admission, user: str, class_name: str, clusters: Mapping[str, Mapping[str, Any]],
                   tasks: int | None = None, written_types: Mapping[str, str] | None = None) -> None:
    """Refuse a campaign (its resolved per-cluster settings, and ``tasks`` once known) that the
    site's rules do not admit; the first refusal found is the one said. CiGri's rule 1 reads
    each cluster's type as the JDL wrote it (``written_types``): ``besteffort`` and a type
    CiGri did not know, though both run best-effort, need the user on its list."""
    from cigri.jdl.walltime import format_walltime, parse_walltime

    authorized = _user_lists(admission.user_lists)
    cap = parse_walltime(admission.max_walltime) if admission.max_walltime else 0
    for cluster, settings in clusters.items():
        campaign_type = settings.get("type", BEST_EFFORT)
        if authorized is not None and (written_types or {}).get(cluster, campaign_type) != BEST_EFFORT \
                and user not in authorized.get(cluster, ()):
            raise AdmissionRefused(f"You are not authorized to launch non best-effort jobs on cluster {cluster}!")
        for rule in admission.rules:
            if rule.applies(campaign_type, class_name, cluster) and not rule.admits(user):
                raise AdmissionRefused(rule.message or f"{user} may not submit {campaign_type} campaigns of class "
                                                       f"{class_name} to cluster {cluster}")
        for key in ("walltime", "prologue_walltime", "epilogue_walltime"):
            if cap and settings.get(key, 0) > cap:
                raise AdmissionRefused(f"{key} {format_walltime(settings[key])} on cluster {cluster} is above the "
                                       f"site's maximum, {format_walltime(cap)}")
    check_tasks(admission, tasks)


def check_tasks(admission: Admission, tasks: int | None) -> None:
    if tasks is not None and admission.max_tasks and tasks > admission.max_tasks:
        raise AdmissionRefused(f"{tasks:,} tasks: a campaign may hold at most {admission.max_tasks:,} on this site")


def _user_lists(path: str) -> dict[str, list[str]] | None:
    """CiGri's ``{"normal_authorized": {cluster: [user, ...]}}``, read at each submission as
    CiGri read it (an admin edits it without restarting anything)."""
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError) as error:
        raise Refused(f"admission.user_lists {path}: {getattr(error, 'strerror', None) or error}") from None
    lists = document.get("normal_authorized") if isinstance(document, dict) else None
    if not isinstance(lists, dict):
        raise Refused(f"admission.user_lists {path}: no \"normal_authorized\" object")
    return {cluster: users for cluster, users in lists.items() if isinstance(users, list)}


def _member(user: str, group: str) -> bool:
    try:
        entry = grp.getgrnam(group)
    except KeyError:
        return False
    if user in entry.gr_mem:
        return True
    try:
        return pwd.getpwnam(user).pw_gid == entry.gr_gid
    except KeyError:
        return False
