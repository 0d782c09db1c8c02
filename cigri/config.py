"""Configuration: frozen dataclasses loaded from TOML layers.

Precedence, lowest first: built-in defaults < ``/etc/cigri/cigri.toml`` < the user's file in
the XDG config dir < the file named by ``CIGRI_CONFIG`` < ``CIGRI_*`` environment variables <
command-line flags (passed as ``overrides``). ``CIGRI_HOME`` moves every path under one
directory. Every key is documented in ``conf/cigri.toml``; an unknown key or a bad value is
a :class:`ConfigError` naming the key.
"""

from __future__ import annotations

import ipaddress
import math
import os
import re
import tomllib
from dataclasses import dataclass, field, fields
from datetime import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import platformdirs

from cigri.admission import Admission, from_toml
from cigri.backends.registry import BACKENDS
from cigri.errors import ConfigError

SYSTEM_FILE = Path("/etc/cigri/cigri.toml")
LOG_LEVELS = ("debug", "info", "warning", "error")
PATH_KEYS = ("home", "database", "spool", "log_dir")  # empty in a file: derived (see _with_paths)
CLUSTER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
USER_FILE = Path(platformdirs.user_config_dir("cigri")) / "cigri.toml"


@dataclass(frozen=True)
class Settings:
    """The ``[cigri]`` section: paths, cycle and job defaults."""

    home: str = ""
    database: str = ""
    spool: str = ""
    log_dir: str = ""
    cycle_period: float = 10.0
    leader_lease: float = 20.0  # PostgreSQL: seconds a server's lead on the cycles lasts unrenewed
    default_walltime: str = "01:00:00"
    default_resources: str = "core=1"
    stderr_tail_lines: int = 5
    max_resubmit: int = 4
    max_submission_tasks: int = 5_000_000
    blacklist_after: int = 3
    autofix_delay: float = 30.0
    failure_rate: float = 0.5
    failure_rate_min: int = 10
    stuck_delay: float = 600.0
    counts_retention_days: float = 30.0
    admins: str = ""
    admin_group: str = ""
    log_level: str = "info"
    log_format: str = "text"
    log_jobs: bool = False


JOB_RATIOS = ("two_way_adaptive", "adaptive_down_exponential_up", "slow_start", "cigri_tap")


@dataclass(frozen=True)
class RunnerSettings:
    """The ``[runner]`` section: how many jobs may wait per campaign and cluster (the predictor's
    taps) and when waiting jobs are flood-killed; the last three are per-cluster defaults."""

    tap_initial: int = 3
    tap_factor: float = 1.5
    tap_max: int = 100
    flood_grace: float = 60.0
    penalty_half_life: float = 900.0
    job_ratio: str = JOB_RATIOS[0]
    remote_waiting_timeout: float = 900.0
    stress_factor: float = 1.0


@dataclass(frozen=True)
class NotifySettings:
    """The ``[notify]`` section: how notifications are sent and retried."""

    smtp_host: str = ""
    smtp_port: int = 25
    smtp_starttls: bool = False
    smtp_user: str = ""
    smtp_password_file: str = ""
    mail_from: str = "cigri@localhost"
    subject_tag: str = "[cigri]"
    timeout: float = 10.0
    max_tries: int = 8
    retry_delay: float = 30.0
    webhook_allow: tuple[str, ...] = ()  # CIDR networks webhooks may reach besides public addresses
    user_address: str = ""  # each user's own mail address, "{user}@example.org"; others are confirmed first


@dataclass(frozen=True)
class MetaschedulerSettings:
    """The ``[metascheduler]`` section: fair-share preemption, the night of campaign types, and
    how late a straggler is replicated."""

    preempt_fraction: float = 0.10
    preempt_deadzone: float = 0.10
    preempt_horizon: float = 300.0
    preempt_threshold: float = 0.8
    replica_delay: float = 60.0
    night: str = "19:00-07:00"
    weekend: bool = True
    init_cap: int = 0
    expand_by_doubling: bool = True
    placement: str = "spread"


@dataclass(frozen=True)
class ServerSettings:
    """The ``[server]`` section: where ``cigri server`` listens and whom it trusts."""

    socket: str = ""  # Unix socket for the users of this machine; empty: {home}/cigri.sock
    listen: str = ""  # HOST:PORT for remote users (tokens); empty: no TCP
    tls_cert: str = ""  # PEM certificate and key: HTTPS on the TCP port
    tls_key: str = ""
    trusted_header: str = "X-CIGRI-USER"  # where a trusted front names the user
    front_users: str = ""  # Unix accounts of a front on this host, connecting to the socket
    trusted_proxies: str = ""  # addresses of a front over TCP, which must also send front_secret_file's secret
    front_secret_file: str = ""
    threads: int = 8  # requests served at once (each a database connection)
    token_ttl: str = "30d"  # lifetime of a token when `cigri token create` gives no --ttl
    max_token_ttl: str = "365d"
    max_connections: int = 512  # per listener (the socket, the TCP port), at once
    max_connections_per_peer: int = 64  # from one uid on the socket, one address over TCP (a front: exempt)
    header_timeout: float = 10.0  # seconds for a request's line and headers (and a TLS handshake)
    body_timeout: float = 30.0  # longest silence inside a request body
    idle_timeout: float = 5.0  # an idle connection between requests is closed after this
    max_header_bytes: int = 65_536  # request line and headers
    sessions_per_user: int = 16  # the dashboard's browser sessions one user may hold

    def front_user_names(self) -> list[str]:
        return self.front_users.replace(",", " ").split()

    def front_addresses(self) -> list[str]:
        return self.trusted_proxies.replace(",", " ").split()


@dataclass(frozen=True)
class LimitSettings:
    """The ``[limits]`` section: what one user may take of a shared grid, so that no user can
    hurt the others (the server enforces them; direct mode too)."""

    pending_tasks: int = 10_000_000  # tasks waiting in the bags of a user's unfinished campaigns
    submission_param_bytes: int = 1 << 30  # parameter bytes one submission may add
    param_bytes: int = 4 << 30  # parameter bytes stored for a user's unfinished campaigns
    requests_per_minute: int = 1200  # API requests of one user (HTTP 429 beyond, with Retry-After)
    request_body_bytes: int = 16 << 20  # a request body, a parameter upload aside
    kept_tasks: int = 50_000_000  # tasks kept for all of a user's campaigns, ended ones too, until purged
    kept_param_bytes: int = 16 << 30  # parameter bytes likewise
    body_memory: int = 128 << 20  # request bodies the server holds in memory at once, all users together
    tokens_per_user: int = 100  # valid API tokens one user holds
    subscriptions_per_user: int = 20  # notification targets one user subscribes


@dataclass(frozen=True)
class ClientSettings:
    """The ``[client]`` section: how the commands reach a server (``CIGRI_SERVER`` wins)."""

    server: str = ""  # unix:/path/cigri.sock or https://host:port; empty: the site's socket if it exists
    ca_file: str = ""  # PEM certificates to trust for an https server (default: the system's)


@dataclass(frozen=True)
class DatabaseSettings:
    """The ``[database]`` section: a PostgreSQL store (``CIGRI_DATABASE_URL``); empty: the SQLite
    file ``cigri.database``. A password belongs in ``~/.pgpass`` or ``PGPASSFILE``, not here."""

    url: str = ""  # postgresql://user@host[:port]/dbname[?target_session_attrs=read-write]


POLICIES = ("fair_share", "fixed_share", "reserve")
PLACEMENTS = ("spread", "pack")
CLASS_KEYS: dict[str, type] = {"priority": int, "weight": float, "policy": str, "users": list, "clusters": list,
                               "default": bool, "finalize": bool, "pool": str, "min_user_limit_percent": float,
                               "init_cap": int, "expand_by_doubling": bool}
USER_KEYS: dict[str, type] = {"allotment": int, "allotment_memory_gb": float, "affinity": dict, "weight": float}
POOL_KEYS: dict[str, type] = {"clusters": list, "parent": str}


@dataclass(frozen=True)
class PoolConfig:
    """One ``[pools.NAME]`` table: a set of clusters, nested in its ``parent`` (DUCC's nodepool)."""

    name: str
    clusters: tuple[str, ...] = ()
    parent: str | None = None  # None: a subpool of the whole grid


@dataclass(frozen=True)
class ClassConfig:
    """One ``[classes.NAME]`` table: a share of the grid (README, "Fair share")."""

    name: str
    priority: int = 0  # lower is served first
    weight: float = 1.0
    policy: str = "fair_share"
    users: tuple[str, ...] | None = None  # None: every user
    clusters: tuple[str, ...] | None = None  # None: every cluster
    default: bool = False
    finalize: bool | None = None  # replicate tail stragglers; None: only best-effort campaigns
    pool: str | None = None  # None: the whole grid's (clusters in no pool; it squats in every pool)
    min_user_limit_percent: float | None = None  # YARN's; None: users share equally (by weight)
    init_cap: int | None = None  # DUCC's initialization cap; None: metascheduler.init_cap
    expand_by_doubling: bool | None = None  # None: metascheduler.expand_by_doubling

    @property
    def counts_allotment(self) -> bool:
        """Its jobs are never preempted, so they count against their user's allotment."""
        return self.policy != "fair_share"


@dataclass(frozen=True)
class UserConfig:
    """The ``[users]`` defaults, or one ``[users.NAME]`` table over them."""

    allotment: int | None = None  # most cores held by non-preemptable work; None: no limit
    allotment_memory_gb: float | None = None
    affinity: dict[str, float] = field(default_factory=dict)  # cluster -> weight, higher preferred
    weight: float = 1.0  # share against the other users of a class


@dataclass(frozen=True)
class Users:
    default: UserConfig = UserConfig()
    named: dict[str, UserConfig] = field(default_factory=dict)

    def of(self, name: str) -> UserConfig:
        return self.named.get(name, self.default)


@dataclass(frozen=True)
class ClusterConfig:
    """One ``[clusters.NAME]`` table: which backend and its options."""

    name: str
    backend: str
    options: dict[str, Any] = field(default_factory=dict)


CLUSTER_KEYS: dict[str, dict[str, type]] = {name: dict(kind.keys) for name, kind in BACKENDS.items()}
MAX_KILL_GRACE = 60.0  # seconds between SIGTERM and the kill where cigri gives the grace (OAR)
FILE_KEYS = ("key_file", "known_hosts", "token_file", "password_file")  # cluster keys naming a file cigri reads


@dataclass(frozen=True)
class Config:
    settings: Settings
    runner: RunnerSettings
    clusters: tuple[ClusterConfig, ...]
    notify: NotifySettings = NotifySettings()
    metascheduler: MetaschedulerSettings = MetaschedulerSettings()
    classes: tuple[ClassConfig, ...] = ()  # empty: one fair-share class named "default"
    users: Users = Users()
    server: ServerSettings = ServerSettings()
    limits: LimitSettings = LimitSettings()
    client: ClientSettings = ClientSettings()
    admission: Admission = Admission()  # [admission]: cigri.admission
    pools: tuple[PoolConfig, ...] = ()
    database: DatabaseSettings = DatabaseSettings()

    def default_class(self) -> str:
        marked = [c.name for c in self.classes if c.default] or [c.name for c in self.classes if c.name == "default"]
        return marked[0] if marked else "default"

    def class_of(self, name: str | None) -> ClassConfig:
        """The class a campaign of class ``name`` is scheduled in: that class while it is
        configured, else the default one (without any class, the implicit fair-share ``default``)."""
        by_name = {c.name: c for c in self.classes}
        return by_name.get(name or "") or by_name.get(self.default_class()) or ClassConfig("default")

    def init_cap(self, class_name: str | None) -> int:
        """DUCC's initialization cap for a campaign of this class: the class's, else the grid's."""
        own = self.class_of(class_name).init_cap
        return self.metascheduler.init_cap if own is None else own

    def expands_by_doubling(self, class_name: str | None) -> bool:
        """After its first success, does a campaign of this class grow by doubling (else to its share at once)?"""
        own = self.class_of(class_name).expand_by_doubling
        return self.metascheduler.expand_by_doubling if own is None else own

    def class_users(self) -> dict[str, frozenset[str] | None] | None:
        """Each class and its allowed users (None: everyone); None when no class is configured."""
        if not self.classes:
            return None
        return {c.name: None if c.users is None else frozenset(c.users) for c in self.classes}

    @property
    def home(self) -> Path:
        return Path(self.settings.home)

    @property
    def database_path(self) -> Path:
        return Path(self.settings.database)

    @property
    def store_location(self) -> Path | str:
        """Where the store is: ``[database] url`` when set, else the SQLite file."""
        return self.database.url or self.database_path

    @property
    def owned_path(self) -> Path:
        """The path whose owner is the grid's account: its SQLite file, or its home when the
        store is PostgreSQL (no file of the grid's then)."""
        return self.home if self.database.url else self.database_path

    @property
    def store_name(self) -> str:
        """The store as messages name it: the SQLite file, or the URL without its password."""
        if not self.database.url:
            return str(self.database_path)
        from cigri.db.postgres import shown

        return shown(self.database.url)

    @property
    def spool_path(self) -> Path:
        return Path(self.settings.spool)

    @property
    def log_path(self) -> Path:
        return Path(self.settings.log_dir)


SECTIONS: dict[str, type] = {"cigri": Settings, "runner": RunnerSettings, "notify": NotifySettings,
                             "metascheduler": MetaschedulerSettings, "server": ServerSettings,
                             "limits": LimitSettings, "client": ClientSettings, "database": DatabaseSettings}


def _coerce(key: str, value: Any, kind: type) -> Any:
    """Check one value against the declared type; accept ints where floats are expected."""
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind in (int, float) and isinstance(value, bool):
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if kind is tuple:  # a TOML array of strings
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{key}: expected a list of strings, got {value!r}")
        return tuple(value)
    if not isinstance(value, kind):
        raise ConfigError(f"{key}: expected {kind.__name__}, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):  # nan slips past every comparison, inf past every bound
        raise ConfigError(f"{key}: expected a finite number, got {value!r}")
    return value


def _from_env_text(key: str, text: str, kind: type) -> Any:
    """An environment variable's text read as the declared type, then checked as a TOML value is."""
    if kind is bool:
        if text.lower() not in ("true", "false", "1", "0"):
            raise ConfigError(f"{key}: expected true or false, got {text!r}")
        return text.lower() in ("true", "1")
    if kind is tuple:  # comma- or space-separated
        return tuple(text.replace(",", " ").split())
    try:
        value = kind(text) if kind is not str else text
    except ValueError:
        raise ConfigError(f"{key}: expected {kind.__name__}, got {text!r}") from None
    return _coerce(key, value, kind)


def _field_types(cls: type) -> dict[str, type]:
    return {f.name: {"str": str, "int": int, "float": float, "bool": bool, "tuple[str, ...]": tuple}[str(f.type)]
            for f in fields(cls)}


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: {error}") from None
    except UnicodeDecodeError as error:  # TOML is UTF-8; a Latin-1 comment is enough
        raise ConfigError(f"{path}: not UTF-8 (byte {error.object[error.start]:#04x} at offset {error.start})") from None
    except OSError as error:
        raise ConfigError(f"{path}: {error.strerror}") from None


def _merge_layer(values: dict[str, dict[str, Any]], clusters: dict[str, dict[str, Any]],
                 layer: dict[str, Any], origin: str, shares: dict[str, dict[str, Any]] | None = None) -> None:
    for section, content in layer.items():
        if section == "admission" and shares is not None:  # checked whole, once every layer is in
            if not isinstance(content, dict):
                raise ConfigError(f"{origin}: [admission] must be a table")
            shares["admission"].update(content)
            continue
        if section in ("classes", "users", "pools") and shares is not None:
            _merge_shares(shares[section], section, content, origin)
            continue
        if section == "clusters":
            if not isinstance(content, dict):
                raise ConfigError(f"{origin}: clusters: expected a table of clusters")
            for name, table in content.items():
                if not isinstance(table, dict):
                    raise ConfigError(f"{origin}: clusters.{name}: expected a table")
                clusters.setdefault(name, {}).update(table)
            continue
        if section not in SECTIONS:
            raise ConfigError(f"{origin}: unknown section [{section}]")
        if not isinstance(content, dict):
            raise ConfigError(f"{origin}: [{section}] must be a table")
        types = _field_types(SECTIONS[section])
        for key, value in content.items():
            if key not in types:
                raise ConfigError(f"{origin}: unknown key {section}.{key}")
            values[section][key] = _coerce(f"{section}.{key}", value, types[key])


def _merge_shares(tables: dict[str, Any], section: str, content: Any, origin: str) -> None:
    """``[classes.NAME]`` tables, or ``[users]`` defaults and ``[users.NAME]`` tables, key by key."""
    if not isinstance(content, dict):
        raise ConfigError(f"{origin}: {section}: expected a table")
    for name, value in content.items():
        if isinstance(value, dict) and not (section == "users" and name == "affinity"):
            tables.setdefault(name, {}).update(value)
        elif section == "users":
            tables.setdefault("", {})[name] = value
        else:
            raise ConfigError(f"{origin}: {section}.{name}: expected a table")


def _pool_configs(tables: dict[str, dict[str, Any]]) -> tuple[PoolConfig, ...]:
    """Pools nest through ``parent`` without a loop and never share a cluster."""
    pools = {}
    for name, table in tables.items():
        values = {key: _share_value(f"pools.{name}.{key}", POOL_KEYS, key, value) for key, value in table.items()}
        pools[name] = PoolConfig(name, tuple(values.get("clusters", ())), values.get("parent"))
    owner: dict[str, str] = {}
    for pool in pools.values():
        for cluster in pool.clusters:
            if owner.setdefault(cluster, pool.name) != pool.name:
                raise ConfigError(f"pools.{pool.name}.clusters: {cluster} is already in pool {owner[cluster]}; "
                                  "pools never overlap")
        seen, above = {pool.name}, pool.parent
        while above is not None:
            if above not in pools:
                raise ConfigError(f"pools.{pool.name}.parent: unknown pool {above!r}")
            if above in seen:
                raise ConfigError(f"pools.{pool.name}.parent: pools nest in a loop through {above}")
            seen.add(above)
            above = pools[above].parent
    return tuple(pools.values())


def _class_configs(tables: dict[str, dict[str, Any]], pools: tuple[PoolConfig, ...]) -> tuple[ClassConfig, ...]:
    result = []
    for name, table in tables.items():
        values = {key: _share_value(f"classes.{name}.{key}", CLASS_KEYS, key, value) for key, value in table.items()}
        if values.get("policy", "fair_share") not in POLICIES:
            raise ConfigError(f"classes.{name}.policy: expected one of {', '.join(POLICIES)}, got {values['policy']!r}")
        if not values.get("weight", 1.0) > 0:
            raise ConfigError(f"classes.{name}.weight: must be > 0")
        if "pool" in values and values["pool"] not in {p.name for p in pools}:
            raise ConfigError(f"classes.{name}.pool: unknown pool {values['pool']!r} "
                              f"(known: {', '.join(p.name for p in pools) or 'none'})")
        if "min_user_limit_percent" in values:
            if not 0 < values["min_user_limit_percent"] <= 100:
                raise ConfigError(f"classes.{name}.min_user_limit_percent: must be > 0 and <= 100")
            if values.get("policy", "fair_share") != "fair_share":
                raise ConfigError(f"classes.{name}.min_user_limit_percent: only a fair_share class shares among users")
        for key in ("users", "clusters"):
            if key in values:
                values[key] = tuple(values[key])
        result.append(ClassConfig(name, **values))
    marked = [c.name for c in result if c.default]
    if len(marked) > 1:
        raise ConfigError(f"classes.{marked[1]}.default: only one class may be the default ({marked[0]} is)")
    if result and not marked and "default" not in tables:
        raise ConfigError(f"classes.{result[0].name}.default: no class is the default; set default = true on one")
    return tuple(result)


def _users(tables: dict[str, dict[str, Any]]) -> Users:
    defaults = {key: _share_value(f"users.{key}", USER_KEYS, key, value) for key, value in tables.get("", {}).items()}
    named = {name: UserConfig(**{**defaults, **{key: _share_value(f"users.{name}.{key}", USER_KEYS, key, value)
                                                for key, value in table.items()}})
             for name, table in tables.items() if name}
    for name, user in (("users", UserConfig(**defaults)), *((f"users.{n}", u) for n, u in named.items())):
        if not user.weight > 0:
            raise ConfigError(f"{name}.weight: must be > 0")
    return Users(UserConfig(**defaults), named)


def _share_value(where: str, kinds: dict[str, type], key: str, value: Any) -> Any:
    """One class or user value, checked: lists of names, per-cluster numbers, counts >= 0."""
    if key not in kinds:
        raise ConfigError(f"unknown key {where}")
    kind = kinds[key]
    if kind is list:
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise ConfigError(f"{where}: expected a list of names, got {value!r}")
        return value
    if kind is str and not (isinstance(value, str) and value):
        raise ConfigError(f"{where}: expected a name, got {value!r}")
    if kind is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a table of cluster = number, got {value!r}")
        return {k: _coerce(f"{where}.{k}", v, float) for k, v in value.items()}
    value = _coerce(where, value, kind)
    if kind in (int, float) and key != "priority" and value < 0:
        raise ConfigError(f"{where}: must be >= 0")
    return value


def _cluster_configs(clusters: dict[str, dict[str, Any]]) -> tuple[ClusterConfig, ...]:
    result = []
    for name, table in clusters.items():
        if not CLUSTER_NAME.fullmatch(name):  # it names the cluster's spool directory
            raise ConfigError(f"clusters.{name!r}: a cluster name is letters, digits, '_', '.' and '-', "
                              "starting with a letter or digit")
        table = dict(table)
        backend = table.pop("backend", None)
        if not isinstance(backend, str) or backend not in CLUSTER_KEYS:  # TOML may give a list
            raise ConfigError(f"clusters.{name}.backend: expected one of {sorted(CLUSTER_KEYS)}, got {backend!r}")
        kinds = CLUSTER_KEYS[backend]
        for key, value in table.items():
            if key not in kinds:
                raise ConfigError(f"unknown key clusters.{name}.{key}")
            table[key] = value = _coerce(f"clusters.{name}.{key}", value, kinds[key])
            if isinstance(value, (int, float)) and value < 0:
                raise ConfigError(f"clusters.{name}.{key}: must be >= 0")
            if key == "kill_grace" and value > MAX_KILL_GRACE:  # the cycle waits for it
                raise ConfigError(f"clusters.{name}.kill_grace: must be <= {MAX_KILL_GRACE:g} seconds")
            if key == "job_ratio" and value not in JOB_RATIOS:
                raise ConfigError(f"clusters.{name}.job_ratio: expected one of {', '.join(JOB_RATIOS)}, got {value!r}")
            if key == "base_url" and not _is_http_url(value):
                raise ConfigError(f"clusters.{name}.base_url: expected an http:// or https:// URL, got {value!r}")
            if key in FILE_KEYS:  # read by cigri, on this machine: paramiko and open() do not expand ~
                table[key] = os.path.expanduser(value)
            if key == "logins":
                _check_logins(name, value)
        kind = BACKENDS[backend]
        if kind.remote:
            transport = kind.transport(table)
            if transport is None or transport not in kind.transports:
                expected = " or ".join(repr(t) for t in kind.transports)
                raise ConfigError(f"clusters.{name}.transport: expected {expected}, got {table.get('transport')!r}")
            for key in kind.transports[transport].needs:
                if key not in table:
                    raise ConfigError(f"clusters.{name}.{key}: required with backend {backend!r} and "
                                      f"transport {transport!r}")
            _check_identity(name, backend, transport, table)
        if backend == "sim":
            from cigri.backends.sim import check  # the world's own checks; not imported for real clusters

            check(name, table)
        result.append(ClusterConfig(name, backend, table))
    return tuple(result)


def _check_identity(name: str, backend: str, transport: str, table: dict[str, Any]) -> None:
    """The identity mode the backend and transport offer, and a user map of plain login names."""
    from cigri.backends import identity

    modes = BACKENDS[backend].transports[transport].identities
    if identity.mode(table) not in modes:
        raise ConfigError(f"clusters.{name}.identity: expected one of {', '.join(modes)} with backend {backend!r} "
                          f"and transport {transport!r}, got {table['identity']!r}")
    if identity.mode(table) == identity.IDENT and "password_file" in table:
        raise ConfigError(f"clusters.{name}.password_file: not with identity 'ident', which names each job's login "
                          "to OAR's trusted front instead")


def _check_logins(name: str, logins: dict[str, Any]) -> None:
    """The user map: cigri user -> a plain login name, or "" for none."""
    from cigri.backends import identity

    for user, login in logins.items():
        if not isinstance(login, str) or (login and not identity.LOGIN.match(login)):
            raise ConfigError(f"clusters.{name}.logins.{user}: expected a login name, or \"\" for none, got {login!r}")


def _is_http_url(text: str) -> bool:
    """Whether ``text`` is an absolute http(s) URL with a host and, if it says one, a valid port."""
    try:
        url = urlsplit(text)
        return url.scheme in ("http", "https") and bool(url.hostname) and url.port != 0  # .port: ValueError if bad
    except ValueError:
        return False


def load(overrides: dict[str, Any] | None = None, environ: dict[str, str] | None = None,
         system_files: bool = True) -> Config:
    """Build the configuration from every layer. ``overrides`` maps ``section.key`` to a value;
    ``system_files=False`` skips the system and user files (the simulator's private grid)."""
    env = os.environ if environ is None else environ
    values: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    clusters: dict[str, dict[str, Any]] = {}
    shares: dict[str, dict[str, Any]] = {"classes": {}, "users": {}, "pools": {}, "admission": {}}
    layers = [SYSTEM_FILE, USER_FILE] if system_files else []
    if env.get("CIGRI_CONFIG"):
        explicit = Path(env["CIGRI_CONFIG"])
        if not explicit.is_file():
            raise ConfigError(f"CIGRI_CONFIG: no such file {explicit}")
        layers.append(explicit)
    for path in layers:
        if path.is_file():
            _merge_layer(values, clusters, _read_file(path), str(path), shares)
    for section, cls in SECTIONS.items():
        prefix = "CIGRI_" if section == "cigri" else f"CIGRI_{section.upper()}_"
        for key, kind in _field_types(cls).items():
            text = env.get(prefix + key.upper())
            if text == "" and section == "cigri" and key in PATH_KEYS:  # it would silently mean the default
                raise ConfigError(f"{prefix + key.upper()}: must not be empty (unset it for the default)")
            if text is not None:
                values[section][key] = _from_env_text(prefix + key.upper(), text, kind)
    layer: dict[str, dict[str, Any]] = {}
    for dotted, value in (overrides or {}).items():
        section, _, key = dotted.partition(".")
        layer.setdefault(section, {})[key] = value
    _merge_layer(values, clusters, layer, "overrides", shares)
    settings = _with_paths(Settings(**values["cigri"]))
    runner = RunnerSettings(**values["runner"])
    notify = NotifySettings(**values["notify"])
    _check(settings, runner)
    _check_notify(notify)
    if not clusters:
        clusters = {"local": {"backend": "local"}}
    metascheduler = MetaschedulerSettings(**values["metascheduler"])
    _check_metascheduler(metascheduler)
    server = ServerSettings(**{**values["server"],
                               "socket": values["server"].get("socket") or str(Path(settings.home) / "cigri.sock")})
    limits = LimitSettings(**values["limits"])
    _check_server(server, limits)
    pools = _pool_configs(shares["pools"])
    database = DatabaseSettings(**values["database"])
    _check_database(database, settings)
    return Config(settings, runner, _cluster_configs(clusters), notify, metascheduler=metascheduler,
                  classes=_class_configs(shares["classes"], pools), users=_users(shares["users"]), server=server,
                  limits=limits, client=ClientSettings(**values["client"]), admission=from_toml(shares["admission"]),
                  pools=pools, database=database)


def _check_database(database: DatabaseSettings, settings: Settings) -> None:
    if not database.url:
        return
    if not database.url.startswith(("postgresql://", "postgres://")):
        raise ConfigError("database.url: expected postgresql://user@host[:port]/dbname (SQLite: cigri.database)")
    if not 0 < settings.leader_lease < math.inf:
        raise ConfigError("cigri.leader_lease: must be > 0 and finite")


def _with_paths(settings: Settings) -> Settings:
    """Derive every path from ``home`` unless set explicitly."""
    home = Path(settings.home or platformdirs.user_data_dir("cigri")).expanduser()
    return Settings(**{
        **{f.name: getattr(settings, f.name) for f in fields(settings)},
        "home": str(home),
        "database": settings.database or str(home / "cigri.db"),
        "spool": settings.spool or str(home / "spool"),
        "log_dir": settings.log_dir or str(home / "log"),
    })


def _check(settings: Settings, runner: RunnerSettings) -> None:
    from cigri.jdl.walltime import parse_walltime

    try:
        parse_walltime(settings.default_walltime)
    except ValueError as error:
        raise ConfigError(f"cigri.default_walltime: {error}") from None
    if not 0 < settings.cycle_period < math.inf:  # also rejects nan
        raise ConfigError("cigri.cycle_period: must be > 0 and finite")

    for key in ("stderr_tail_lines", "max_resubmit", "autofix_delay", "failure_rate_min", "stuck_delay",
                "counts_retention_days"):
        if not getattr(settings, key) >= 0:
            raise ConfigError(f"cigri.{key}: must be >= 0")
    if settings.blacklist_after < 1:
        raise ConfigError("cigri.blacklist_after: must be >= 1")
    if settings.max_submission_tasks < 1:
        raise ConfigError("cigri.max_submission_tasks: must be >= 1")
    if not 0 < settings.failure_rate <= 1:
        raise ConfigError("cigri.failure_rate: must be > 0 and <= 1")
    if settings.log_level not in LOG_LEVELS:
        raise ConfigError(f"cigri.log_level: expected one of {', '.join(LOG_LEVELS)}, got {settings.log_level!r}")
    if settings.log_format not in ("text", "json"):
        raise ConfigError(f"cigri.log_format: expected 'text' or 'json', got {settings.log_format!r}")
    if runner.tap_initial < 1 or runner.tap_max < runner.tap_initial:
        raise ConfigError("runner.tap_initial: must be >= 1 and <= runner.tap_max")
    if runner.tap_factor < 1:
        raise ConfigError("runner.tap_factor: must be >= 1")
    if runner.job_ratio not in JOB_RATIOS:
        raise ConfigError(f"runner.job_ratio: expected one of {', '.join(JOB_RATIOS)}, got {runner.job_ratio!r}")
    if not runner.penalty_half_life > 0:
        raise ConfigError("runner.penalty_half_life: must be > 0")
    for key in ("flood_grace", "remote_waiting_timeout", "stress_factor"):
        if not getattr(runner, key) >= 0:  # also rejects nan
            raise ConfigError(f"runner.{key}: must be >= 0")


def _check_notify(notify: NotifySettings) -> None:
    if not 0 < notify.smtp_port < 65536:
        raise ConfigError("notify.smtp_port: must be between 1 and 65535")
    if notify.max_tries < 1:
        raise ConfigError("notify.max_tries: must be >= 1")
    if not (notify.timeout > 0 and notify.retry_delay >= 0):
        raise ConfigError("notify.timeout: must be > 0" if not notify.timeout > 0 else "notify.retry_delay: must be >= 0")
    for network in notify.webhook_allow:
        try:
            ipaddress.ip_network(network)
        except ValueError as error:
            raise ConfigError(f"notify.webhook_allow: {error}") from None
    if notify.user_address and not re.fullmatch(r"[\w.+-]*\{user\}[\w.+-]*@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*",
                                                notify.user_address, re.ASCII):
        raise ConfigError(f"notify.user_address: expected an address with {{user}} in its local part, such as "
                          f"\"{{user}}@example.org\", got {notify.user_address!r}")


def _check_server(server: ServerSettings, limits: LimitSettings) -> None:
    if server.listen:
        parse_listen(server.listen)
    if bool(server.tls_cert) != bool(server.tls_key):
        raise ConfigError("server.tls_cert and server.tls_key: give both (HTTPS) or neither")
    if server.threads < 1:
        raise ConfigError("server.threads: must be >= 1")
    for key in ("token_ttl", "max_token_ttl"):
        try:
            parse_duration(getattr(server, key))
        except ValueError as error:
            raise ConfigError(f"server.{key}: {error}") from None
    for key in ("pending_tasks", "submission_param_bytes", "param_bytes", "requests_per_minute", "request_body_bytes",
                "kept_tasks", "kept_param_bytes", "body_memory", "tokens_per_user",
                "subscriptions_per_user"):
        if getattr(limits, key) < 1:
            raise ConfigError(f"limits.{key}: must be >= 1")
    if limits.body_memory < limits.request_body_bytes:
        raise ConfigError("limits.body_memory: must hold at least one body of limits.request_body_bytes")
    for key in ("max_connections", "max_connections_per_peer", "max_header_bytes", "sessions_per_user",
                "header_timeout", "body_timeout", "idle_timeout"):
        if getattr(server, key) <= 0:
            raise ConfigError(f"server.{key}: must be > 0")
    for address in server.front_addresses():
        try:
            ipaddress.ip_address(address)
        except ValueError:
            raise ConfigError(f"server.trusted_proxies: {address!r} is not an IP address") from None
    if server.front_addresses() and not server.front_secret_file:
        raise ConfigError("server.trusted_proxies: a front over TCP must also send a secret (server.front_secret_file): "
                          "from its address any user of its host could name anyone; or connect the front to the "
                          "socket (server.front_users)")


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8443`` for IPv6) -> (host, port); ConfigError naming server.listen."""
    host, sep, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"server.listen: expected HOST:PORT, got {text!r}")
    return host, int(port)


_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw]?)$")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``3600`` (seconds) -> seconds > 0; ValueError otherwise."""
    match = _DURATION.match(text.strip())
    if match is None or float(match[1]) <= 0:
        raise ValueError(f"expected a duration such as 30d, 12h, 90m or 3600 (seconds), got {text!r}")
    return float(match[1]) * _UNIT_SECONDS[match[2]]


_WINDOW = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)-([01]?\d|2[0-3]):([0-5]\d)$")


def parse_window(text: str) -> tuple[time, time] | None:
    """``"19:00-07:00"`` -> (start, end); ``""`` -> None (no night)."""
    if not text:
        return None
    match = _WINDOW.match(text.strip())
    if match is None:
        raise ValueError(f"expected HH:MM-HH:MM or an empty string, got {text!r}")
    start, end = time(int(match[1]), int(match[2])), time(int(match[3]), int(match[4]))
    if start == end:
        raise ValueError(f"{text!r} is empty: start and end are the same")
    return start, end


def _check_metascheduler(settings: MetaschedulerSettings) -> None:
    if not 0 <= settings.preempt_fraction <= 1:
        raise ConfigError("metascheduler.preempt_fraction: must be between 0 and 1")
    if not 0 <= settings.preempt_deadzone < math.inf:  # also rejects nan
        raise ConfigError("metascheduler.preempt_deadzone: must be >= 0 and finite")
    if not 0 <= settings.preempt_horizon < math.inf:  # also rejects nan
        raise ConfigError("metascheduler.preempt_horizon: must be >= 0 and finite")
    if not 0 <= settings.preempt_threshold <= 1:  # also rejects nan
        raise ConfigError("metascheduler.preempt_threshold: must be between 0 and 1")
    if not 0 <= settings.replica_delay < math.inf:  # also rejects nan
        raise ConfigError("metascheduler.replica_delay: must be >= 0 and finite")
    if settings.init_cap < 0:
        raise ConfigError("metascheduler.init_cap: must be >= 0 (0: no initialization cap)")
    if settings.placement not in PLACEMENTS:
        raise ConfigError(f"metascheduler.placement: expected one of {', '.join(PLACEMENTS)}, got {settings.placement!r}")
    try:
        parse_window(settings.night)
    except ValueError as error:
        raise ConfigError(f"metascheduler.night: {error}") from None
