"""Configuration: frozen dataclasses loaded from TOML layers.

Precedence, lowest first: built-in defaults < ``/etc/cigri/cigri.toml`` < the user's file in
the XDG config dir < the file named by ``CIGRI_CONFIG`` < ``CIGRI_*`` environment variables <
command-line flags (passed as ``overrides``). ``CIGRI_HOME`` moves every path under one
directory. Every key is documented in ``conf/cigri.toml``; an unknown key or a bad value is
a :class:`ConfigError` naming the key.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import platformdirs

from cigri.errors import ConfigError

SYSTEM_FILE = Path("/etc/cigri/cigri.toml")
LOG_LEVELS = ("debug", "info", "warning", "error")
USER_FILE = Path(platformdirs.user_config_dir("cigri")) / "cigri.toml"


@dataclass(frozen=True)
class Settings:
    """The ``[cigri]`` section: paths, cycle and job defaults."""

    home: str = ""
    database: str = ""
    spool: str = ""
    log_dir: str = ""
    cycle_period: float = 10.0
    default_walltime: str = "01:00:00"
    default_resources: str = "core=1"
    stderr_tail_lines: int = 5
    max_attempts: int = 5
    log_level: str = "info"
    log_format: str = "text"


@dataclass(frozen=True)
class RunnerSettings:
    """The ``[runner]`` section: CiGri's adaptive tap."""

    tap_initial: int = 3
    tap_factor: float = 1.5
    tap_max: int = 100


@dataclass(frozen=True)
class ClusterConfig:
    """One ``[clusters.NAME]`` table: which backend and its options."""

    name: str
    backend: str
    options: dict[str, Any] = field(default_factory=dict)


_REMOTE_KEYS: dict[str, type] = {
    "transport": str, "host": str, "port": int, "user": str, "key_file": str, "known_hosts": str,
    "base_url": str, "timeout": float, "min_interval": float,
    "api_chunk_size": int, "max_waiting": int, "properties": str, "project": str, "group_seconds": int,
}
CLUSTER_KEYS: dict[str, dict[str, type]] = {
    "local": {"slots": int, "max_waiting": int},
    "slurm": {**_REMOTE_KEYS, "token_file": str, "partition": str, "best_effort_partition": str,
              "best_effort_qos": str},
    "oar": {**_REMOTE_KEYS, "password_file": str},
    "sim": {"cores": int, "memory_gb": float, "seed": int, "local_load": float, "local_load_steps": str,
            "local_max_cores": int, "trace": str, "task_seconds": float, "max_waiting": int},
}
TRANSPORT_NEEDS = {"ssh": ("host", "user"), "rest": ("base_url",)}


@dataclass(frozen=True)
class Config:
    settings: Settings
    runner: RunnerSettings
    clusters: tuple[ClusterConfig, ...]

    @property
    def home(self) -> Path:
        return Path(self.settings.home)

    @property
    def database_path(self) -> Path:
        return Path(self.settings.database)

    @property
    def spool_path(self) -> Path:
        return Path(self.settings.spool)

    @property
    def log_path(self) -> Path:
        return Path(self.settings.log_dir)


SECTIONS: dict[str, type] = {"cigri": Settings, "runner": RunnerSettings}


def _coerce(key: str, value: Any, kind: type) -> Any:
    """Check one value against the declared type; accept ints where floats are expected."""
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, bool):
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if not isinstance(value, kind):
        raise ConfigError(f"{key}: expected {kind.__name__}, got {value!r}")
    return value


def _from_env_text(key: str, text: str, kind: type) -> Any:
    try:
        return kind(text) if kind is not str else text
    except ValueError:
        raise ConfigError(f"{key}: expected {kind.__name__}, got {text!r}") from None


def _field_types(cls: type) -> dict[str, type]:
    return {f.name: {"str": str, "int": int, "float": float}[str(f.type)] for f in fields(cls)}


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"{path}: {error}") from None
    except OSError as error:
        raise ConfigError(f"{path}: {error.strerror}") from None


def _merge_layer(values: dict[str, dict[str, Any]], clusters: dict[str, dict[str, Any]],
                 layer: dict[str, Any], origin: str) -> None:
    for section, content in layer.items():
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


def _cluster_configs(clusters: dict[str, dict[str, Any]]) -> tuple[ClusterConfig, ...]:
    result = []
    for name, table in clusters.items():
        table = dict(table)
        backend = table.pop("backend", None)
        if backend not in CLUSTER_KEYS:
            raise ConfigError(f"clusters.{name}.backend: expected one of {sorted(CLUSTER_KEYS)}, got {backend!r}")
        kinds = CLUSTER_KEYS[backend]
        for key, value in table.items():
            if key not in kinds:
                raise ConfigError(f"unknown key clusters.{name}.{key}")
            table[key] = value = _coerce(f"clusters.{name}.{key}", value, kinds[key])
            if isinstance(value, (int, float)) and value < 0:
                raise ConfigError(f"clusters.{name}.{key}: must be >= 0")
        if backend not in ("local", "sim"):
            transport = table.get("transport")
            if transport not in TRANSPORT_NEEDS:
                raise ConfigError(f"clusters.{name}.transport: expected 'ssh' or 'rest', got {transport!r}")
            for key in TRANSPORT_NEEDS[transport]:
                if key not in table:
                    raise ConfigError(f"clusters.{name}.{key}: required with transport {transport!r}")
        result.append(ClusterConfig(name, backend, table))
    return tuple(result)


def load(overrides: dict[str, Any] | None = None, environ: dict[str, str] | None = None,
         system_files: bool = True) -> Config:
    """Build the configuration from every layer. ``overrides`` maps ``section.key`` to a value;
    ``system_files=False`` skips the system and user files (the simulator's private grid)."""
    env = os.environ if environ is None else environ
    values: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    clusters: dict[str, dict[str, Any]] = {}
    layers = [SYSTEM_FILE, USER_FILE] if system_files else []
    if env.get("CIGRI_CONFIG"):
        explicit = Path(env["CIGRI_CONFIG"])
        if not explicit.is_file():
            raise ConfigError(f"CIGRI_CONFIG: no such file {explicit}")
        layers.append(explicit)
    for path in layers:
        if path.is_file():
            _merge_layer(values, clusters, _read_file(path), str(path))
    for section, cls in SECTIONS.items():
        prefix = "CIGRI_" if section == "cigri" else f"CIGRI_{section.upper()}_"
        for key, kind in _field_types(cls).items():
            text = env.get(prefix + key.upper())
            if text is not None:
                values[section][key] = _from_env_text(prefix + key.upper(), text, kind)
    layer: dict[str, dict[str, Any]] = {}
    for dotted, value in (overrides or {}).items():
        section, _, key = dotted.partition(".")
        layer.setdefault(section, {})[key] = value
    _merge_layer(values, clusters, layer, "overrides")
    settings = _with_paths(Settings(**values["cigri"]))
    runner = RunnerSettings(**values["runner"])
    _check(settings, runner)
    if not clusters:
        clusters = {"local": {"backend": "local"}}
    return Config(settings, runner, _cluster_configs(clusters))


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
    if not settings.cycle_period > 0:  # also rejects nan
        raise ConfigError("cigri.cycle_period: must be > 0")
    if settings.stderr_tail_lines < 0 or settings.max_attempts < 1:
        raise ConfigError("cigri.max_attempts: must be >= 1" if settings.max_attempts < 1
                          else "cigri.stderr_tail_lines: must be >= 0")
    if settings.log_level not in LOG_LEVELS:
        raise ConfigError(f"cigri.log_level: expected one of {', '.join(LOG_LEVELS)}, got {settings.log_level!r}")
    if settings.log_format not in ("text", "json"):
        raise ConfigError(f"cigri.log_format: expected 'text' or 'json', got {settings.log_format!r}")
    if runner.tap_initial < 1 or runner.tap_max < runner.tap_initial:
        raise ConfigError("runner.tap_initial: must be >= 1 and <= runner.tap_max")
    if runner.tap_factor < 1:
        raise ConfigError("runner.tap_factor: must be >= 1")
