"""Parse and validate a JDL into a :class:`CampaignSpec`; nothing here touches the database.

Validation is two-staged: the JSON Schema in ``schema.json`` checks shapes and types, then
semantic checks (clusters exist, exactly one parameter source, mandatory ``exec_file``).
Every problem becomes one line naming the JSON path; all lines are reported together.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from cigri.backends import remote_home
from cigri.errors import InputError, SubmissionRefused, shown
from cigri.jdl import compat
from cigri.jdl.memory import parse_memory
from cigri.jdl.walltime import parse_walltime

if TYPE_CHECKING:  # jsonschema is imported only when a JDL is parsed: status commands start faster
    import jsonschema

GLOBAL_ONLY = ("name", "clusters", "param_file", "nb_jobs", "params", "jobs_type", "class", "priority", "gang")
BOOLEAN_KEYS = ("test_mode", "temporal_grouping", "dimensional_grouping", "finalize")
WALLTIME_KEYS = ("walltime", "prologue_walltime", "epilogue_walltime", "temporal_grouping_batch_duration")
SCRIPT_KEYS = ("prologue", "epilogue")
PATH_KEYS = ("exec_file", "exec_directory")
# One OAR job type (``idempotent``, ``timesharing=user,*``, ``token:licence=2``): no space, no
# quote, nothing a shell or OAR's REST API would interpret.
_JOB_TYPE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:=,*+/@-]*\Z")
# An OAR resource request: {property filters} (SQL, opaque here) and levels name=N|ALL|BEST.
_RESOURCE_FILTER = re.compile(r"\{[^{}]*\}")
_RESOURCE_LEVEL = re.compile(r"\s*([A-Za-z_]\w*)\s*=\s*([0-9]+|ALL|BEST)\s*\Z")


@cache
def schema() -> dict[str, Any]:
    return json.loads(resources.files("cigri.jdl").joinpath("schema.json").read_text())


@cache
def _validator() -> jsonschema.Draft202012Validator:
    import jsonschema

    # JSON's 2.0 or 1e300 are "integers" to JSON Schema; a count, walltime or max_jobs must be a true integer
    integers_only = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool))
    return jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=integers_only)(schema())


def cluster_keys() -> tuple[str, ...]:
    return tuple(schema()["$defs"]["cluster"]["properties"])


@dataclass(frozen=True)
class ParamSource:
    """Exactly one of: a file to stream, a count (params 0..N-1), or an inline list. A file is
    read from ``stream`` when one is given (opened by the submitting user's process, or an
    upload: the server never opens a path from a JDL), ``file`` then only naming it."""

    file: Path | None = None
    count: int | None = None
    inline: tuple[str, ...] | None = None
    stream: BinaryIO | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class CampaignSpec:
    name: str
    jobs_type: str
    clusters: dict[str, dict[str, Any]]  # cluster name -> resolved settings
    params: ParamSource
    document: dict[str, Any]  # the JDL as given, without inline params
    class_name: str = "default"  # the JDL's class, else the configuration's default class
    priority: int = 0  # among the user's own campaigns: served first, preempted last
    warnings: tuple[str, ...] = ()  # CiGri leniencies used (jdl.compat), one line each
    written_types: dict[str, str] = field(default_factory=dict)  # cluster -> its type before any leniency


def parse_jdl(text: str, *, known_clusters: Mapping[str, str], user: str, base_dir: Path,
              default_walltime: str, default_resources: str, source: str = "JDL",
              classes: Mapping[str, frozenset[str] | None] | None = None,
              default_class: str = "default", homes: Mapping[str, str] | None = None,
              strict: bool = False, site_defaults: Mapping[str, Any] | None = None,
              cluster_cores: Mapping[str, int] | None = None) -> CampaignSpec:
    """Validate a JDL text; raise :class:`InputError` listing every problem, one per line.

    ``known_clusters`` maps each cluster's name to its backend (``oar``, ``slurm``…);
    ``homes`` each cluster's :func:`cluster_home` (absent: ``user``'s home here);
    ``classes`` maps each configured class to its allowed users (None: everyone); None means
    the one implicit class ``default``. CiGri 3.2's forms are read as CiGri read them, each
    noted in the spec's ``warnings`` (:mod:`cigri.jdl.compat`); ``strict`` refuses them.
    ``site_defaults`` are per-cluster keys a site sets where the JDL sets none;
    ``cluster_cores`` the cores of the clusters whose size is known, against which a gang must
    fit somewhere.
    """
    warnings = compat.Warnings(source, strict)
    document = _load(text, source, warnings)
    written_types = compat.written_types(document)
    if not strict:
        compat.normalize(document, known_clusters, schema(), warnings)
    errors = sorted(_validator().iter_errors(document), key=_order)
    problems = [f"{_path(e)}: {_message(e)}" for e in errors]
    if isinstance(document, dict):  # and every problem the shapes let the other checks see, in one go
        flagged = {_path(e) for e in errors if e.validator not in ("required", "additionalProperties")}
        class_name = document.get("class", default_class)
        semantic = _semantic_problems(document, known_clusters) + (_class_problems(
            class_name, user, {"default": None} if classes is None else classes) if isinstance(class_name, str) else [])
        problems += [p for p in dict.fromkeys(semantic) if not _within(p.partition(": ")[0], flagged)]
    if problems:
        raise InputError("\n".join(_one_line(f"{source}: {p}") for p in problems))
    home = home_of(user)  # the parameter file is read here
    clusters = {name: _resolve(document, name, (homes or {}).get(name, home), known_clusters[name], warnings,
                               {"walltime": default_walltime, "resources": default_resources, **(site_defaults or {})})
                for name in document["clusters"]}
    problems = _gang_problems(int(document.get("gang", 1)), clusters, cluster_cores or {})
    if problems:
        raise InputError("\n".join(_one_line(f"{source}: {p}") for p in problems))
    param_file = document.get("param_file")
    if isinstance(param_file, str) and "$" in param_file:
        document["param_file"] = compat.expand_path(param_file, "$.param_file", home, warnings)
    return CampaignSpec(
        name=document["name"],
        jobs_type=document.get("jobs_type", "normal"),
        clusters=clusters,
        params=_param_source(document, home, base_dir),
        document={k: v for k, v in document.items() if k != "params"},
        class_name=class_name,
        priority=document.get("priority", 0),
        warnings=tuple(warnings.lines),
        written_types={name: written_types[name] for name in clusters if name in written_types},
    )


def _load(text: str, source: str, warnings: compat.Warnings) -> Any:
    """The JDL's JSON value; InputError naming ``source`` if it is not JSON cigri can store.
    Unless ``warnings`` are strict, read as CiGri's Ruby parser read it (:func:`compat.loads`)."""
    try:  # a byte order mark is dropped, as UTF-8 readers do
        text = text.removeprefix("\ufeff")
        document = json.loads(text, object_pairs_hook=_unique_keys) if warnings.strict else compat.loads(text, warnings)
    except _DuplicateKey as error:
        raise InputError(f"{source}: duplicate key {shown(error.args[0])} (JSON would keep only the last)") from None
    except json.JSONDecodeError as error:
        raise InputError(f"{source}: not valid JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    except RecursionError:
        raise InputError(f"{source}: not valid JSON: nested too deeply") from None
    except ValueError as error:  # an integer of more than sys.get_int_max_str_digits() digits
        raise InputError(f"{source}: not valid JSON: {error}") from None
    try:  # "\ud800" is valid JSON but not Unicode text: nothing could store or print it
        json.dumps(document, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        raise InputError(f"{source}: not valid JSON: a \\u escape makes an unpaired surrogate") from None
    return document


def param_file_path(text: str, *, base_dir: Path, user: str) -> Path | None:
    """Where the file named by a JDL's ``param_file`` is on the submitting user's machine
    (``~`` and ``{HOME}`` are that user's home, a relative path is relative to ``base_dir``),
    or None when the JDL names none (or is not a JSON object: the submission then says why).
    The submitting process opens it and sends its lines: cigri itself never opens a path that
    a JDL names."""
    lenient = compat.Warnings("JDL")  # the submission itself reports what CiGri's forms it used
    try:
        document = _load(text, "JDL", lenient)
    except InputError:
        return None
    if not isinstance(document, dict):
        return None
    value = next((v for k, v in reversed(document.items()) if k.lower() == "param_file"), None)  # CiGri's key case
    if not isinstance(value, str) or not value:
        return None
    home = home_of(user)
    path = Path(_expand_home(compat.expand_path(value, "$.param_file", home, lenient), home))
    return path if path.is_absolute() else base_dir / path


class _DuplicateKey(ValueError):
    """A JSON object names a key twice: json would silently keep the last value."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return document


def _one_line(problem: str) -> str:
    """A key or value with a line break must not split a problem over two lines."""
    return problem.replace("\r", "\\r").replace("\n", "\\n")


def _order(error: jsonschema.ValidationError) -> str:
    return "/".join(str(p) for p in error.absolute_path)


def _path(error: jsonschema.ValidationError) -> str:
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)


def _message(error: jsonschema.ValidationError) -> str:
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        known = schema.get("properties", {})
        extra = sorted(set(error.instance) - set(known))
        return "unknown key " + ", ".join(
            shown(k) + (f" (did you mean {shown(meant)}?)" if (meant := compat.close_key(k, known)) else "")
            for k in extra)
    if error.validator == "anyOf":
        return f"{shown(error.instance)} is not valid: {schema.get('description', 'wrong type')}"
    if error.validator == "required":
        return f"missing mandatory key {error.message.split(' ')[0]}"
    return error.message.replace(repr(error.instance), shown(error.instance))


def control_character(text: str) -> str | None:
    """The first character of ``text`` that breaks a line or drives a terminal (C0, DEL, C1,
    U+2028, U+2029), if any: a campaign's or a task's name is one line of text."""
    return next((c for c in text if unicodedata.category(c) in ("Cc", "Zl", "Zp")), None)


def _within(path: str, flagged: set[str]) -> bool:
    """Whether a problem at ``path`` is about a value the schema already refused (it, or a
    value inside it)."""
    return any(path == other or path.startswith((other + ".", other + "[")) for other in flagged)


def _semantic_problems(document: dict[str, Any], known_clusters: Mapping[str, str]) -> list[str]:
    """What the schema cannot check; each check reads only values of the shape it expects, so
    that a document the schema refused still gets every other problem reported."""
    problems = []
    name = document.get("name")
    control = control_character(name) if isinstance(name, str) else None
    if control is not None:  # a line break or an escape sequence would break gridstat's table
        problems.append(f"$.name: contains the control character U+{ord(control):04X}; a name is one line of text")
    sources = [k for k in ("param_file", "nb_jobs", "params") if k in document]
    if document.get("jobs_type") == "desktop_computing":
        problems.append("$.jobs_type: desktop_computing campaigns are not supported")
    elif len(sources) != 1:
        problems.append("exactly one of param_file, nb_jobs, params is required"
                        + (f" (got {', '.join(sources)})" if sources else ""))
    clusters = document.get("clusters")
    for name, settings in (clusters.items() if isinstance(clusters, dict) else ()):
        if name not in known_clusters:
            problems.append(f"$.clusters.{name}: unknown cluster (known: {', '.join(known_clusters) or 'none'})")
        if not isinstance(settings, dict):
            continue
        if "exec_file" not in settings and "exec_file" not in document:
            problems.append(f"$.clusters.{name}: missing mandatory key 'exec_file' (here or global)")
        for key, parse in (*((k, parse_walltime) for k in WALLTIME_KEYS), ("memory", parse_memory)):
            value, where = (settings[key], f"$.clusters.{name}.{key}") if key in settings else (document.get(key),
                                                                                                 f"$.{key}")
            if isinstance(value, (str, int)) and not isinstance(value, bool):
                try:
                    parse(value)
                except ValueError as error:
                    problems.append(f"{where}: {error}")
        dimensional = settings.get("dimensional_grouping", document.get("dimensional_grouping", False))
        if isinstance(dimensional, (bool, str)) and _boolean(dimensional):
            problems.append(f"$.clusters.{name}.dimensional_grouping: not supported by cigri")
        job_types = settings.get("cluster_job_type", document.get("cluster_job_type", ""))
        if isinstance(job_types, str) or isinstance(job_types, list) and all(isinstance(t, str) for t in job_types):
            problems += _job_type_problems(name, known_clusters.get(name), job_types)
        if isinstance(resources := settings.get("resources", document.get("resources")), str):
            problems += _resources_problems(name, known_clusters.get(name), resources)
        if isinstance(properties := settings.get("properties", document.get("properties")), str) and properties.strip():
            problems += _dialect_problems(name, known_clusters.get(name), "properties", properties)
    return problems


def _resources_problems(cluster: str, backend: str | None, resources: str) -> list[str]:
    """A request in OAR's syntax (``/nodes=2/core=4``, groups joined by ``+``), each count at
    least 1, then what the cluster's dialect checks (:func:`_dialect_problems`), so a request
    no cluster could read fails here and not as every task's submission error."""
    where = f"$.clusters.{cluster}.resources"
    for group in _RESOURCE_FILTER.sub("", resources).split("+"):
        for level in group.strip().removeprefix("/").split("/"):
            match = _RESOURCE_LEVEL.match(level)
            if match is None or match[1] == "walltime" or match[2].isdigit() and int(match[2]) < 1:
                return [f"{where}: {shown(level)} is not a resource level (name=N with N >= 1, ALL or BEST; "
                        "e.g. core=1 or /nodes=2/core=4; the walltime goes in walltime)"]
    return _dialect_problems(cluster, backend, "resources", resources)


def _dialect_problems(cluster: str, backend: str | None, key: str, value: str) -> list[str]:
    """What the cluster's resource manager must not or cannot take as ``resources`` or
    ``properties``, by its dialect's own check (imported only then: it is heavy), so that it is
    refused here and never sent: OAR runs the properties and resource filters as SQL
    (:mod:`cigri.backends.oar.expressions` says what it is sent), Slurm reads its shapes and a
    feature expression, Grid Engine its slots and requests (:mod:`cigri.backends.registry` names
    each system's)."""
    from cigri.backends.registry import BACKENDS

    kind = BACKENDS.get(backend or "")
    checks = kind.jdl_checks() if kind is not None else {}
    if key not in checks:
        return []
    try:
        checks[key](value)
    except (ValueError, SubmissionRefused) as error:
        return [f"$.clusters.{cluster}.{key}: {error}"]
    return []


def oar_job_types(value: str | list[str]) -> tuple[str, ...]:
    """The JDL's ``cluster_job_type``: a list, or CiGri's string of types separated by commas
    (a type holding a comma itself, like ``timesharing=user,*``, needs the list form)."""
    types = value.split(",") if isinstance(value, str) else value
    return tuple(t.strip() for t in types if t.strip())


def _job_type_problems(cluster: str, backend: str | None, value: str | list[str]) -> list[str]:
    where = f"$.clusters.{cluster}.cluster_job_type"
    types = oar_job_types(value)
    if types and backend not in ("oar", None):  # None: an unknown cluster, already reported
        return [f"{where}: OAR job types, but {cluster} is a {backend} cluster"]
    for job_type in types:
        if not _JOB_TYPE.match(job_type):
            return [f"{where}: {job_type!r} is not an OAR job type (letters, digits and _ . : = , * + / @ -)"]
        if job_type == "besteffort":
            return [f"{where}: besteffort comes from the campaign's type (best-effort), not from here"]
    return []


def _gang_problems(gang: int, clusters: Mapping[str, Mapping[str, Any]], cores: Mapping[str, int]) -> list[str]:
    """A gang's tasks start together in one job: they ask for cores of one node (not nodes), are
    never grouped one after another, and a whole gang must fit on at least one of the clusters
    (its cores as last seen, its ``max_jobs``)."""
    if gang == 1:
        return []
    from cigri.metascheduler.metascheduler import task_cost  # the cost the allocation charges a task

    problems, why_not = [], {}
    for name, settings in clusters.items():
        levels = {part.split("=")[0].strip() for part in _RESOURCE_FILTER.sub("", settings["resources"]).split("/")}
        if levels & {"nodes", "host", "network_address"}:
            problems.append(f"$.clusters.{name}.resources: the tasks of a gang ask for cores of one node "
                            "(core=N, cpu=N/core=M), not nodes")
        if settings.get("temporal_grouping") is True:
            problems.append(f"$.clusters.{name}.temporal_grouping: a gang's tasks start together, "
                            "they cannot run one after another")
        need = gang * task_cost({0: settings})[0]
        if settings.get("max_jobs", gang) < gang:
            why_not[name] = f"max_jobs {settings['max_jobs']}"
        elif need > cores.get(name, need):
            why_not[name] = f"{cores[name]} cores for {need}"
    if not problems and len(why_not) == len(clusters):
        problems.append(f"$.gang: a gang of {gang} fits on none of the campaign's clusters "
                        f"({'; '.join(f'{name}: {why}' for name, why in why_not.items())})")
    return problems


def _class_problems(name: str, user: str, classes: Mapping[str, frozenset[str] | None]) -> list[str]:
    if name not in classes:
        return [f"$.class: unknown class {shown(name)} (known: {', '.join(sorted(classes))})"]
    allowed = classes[name]
    if allowed is not None and user not in allowed:
        return [f"$.class: user {user} is not allowed in class {name!r}"]
    return []


def _boolean(value: bool | str) -> bool:
    return value if isinstance(value, bool) else value.lower() == "true"


def cluster_home(backend: str, options: Mapping[str, Any], user: str) -> str:
    """The home of whoever runs ``user``'s jobs on a cluster, what ``{HOME}`` and ``~`` mean
    there and where prologues run: on a remote cluster (Slurm, OAR, Grid Engine) the home of the
    login they run as (the cluster's ``home`` option, else ``/home/LOGIN``), elsewhere ``user``'s
    on this machine."""
    from cigri.backends.registry import BACKENDS

    kind = BACKENDS.get(backend)
    return remote_home(options, user) if kind is not None and kind.remote else home_of(user)


def home_of(user: str) -> str:
    try:
        return pwd.getpwnam(user).pw_dir
    except KeyError:
        return os.path.expanduser("~")


def _expand_home(value: str, home: str) -> str:
    value = value.replace("{HOME}", home)
    if value == "~" or value.startswith("~/"):
        value = home + value[1:]
    return value


def _resolve(document: dict[str, Any], cluster: str, home: str, backend: str, warnings: compat.Warnings,
             defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Per-cluster settings: cluster value > global value > default (the site's ``defaults``,
    then cigri's), with macros expanded.

    ``{CAMPAIGN_ID}`` is left in place: the id exists only once the campaign row is written.
    """
    merged: dict[str, Any] = {
        "type": "best-effort", "exec_directory": "{HOME}", "test_mode": False,
        "dimensional_grouping": False, "properties": "",
        "project": "", "cluster_job_type": "", "temporal_grouping_batch_duration": 900, **defaults,
    }
    merged.update({k: v for k, v in document.items() if k not in GLOBAL_ONLY})
    merged.update(document["clusters"][cluster])
    for key in BOOLEAN_KEYS:
        if key in merged:  # temporal_grouping absent: the cluster's group_seconds decides
            merged[key] = _boolean(merged[key])
    for key in WALLTIME_KEYS:
        if key in merged:
            merged[key] = parse_walltime(merged[key])
    if "max_jobs" in merged:
        merged["max_jobs"] = int(merged["max_jobs"])
    if "memory" in merged:
        merged["memory"] = parse_memory(merged["memory"])
    for key in SCRIPT_KEYS:
        if isinstance(merged.get(key), list):
            merged[key] = "\n".join(merged[key])
        if key in merged:
            merged[key] = compat.script_macros(merged[key], key, backend, warnings)
    for key in PATH_KEYS:
        merged[key] = compat.expand_path(_expand_home(merged[key], home), key, home, warnings)
    merged["exec_file"] = compat.command_words(merged["exec_file"], "exec_file", warnings)
    if merged["type"] == "besteffort":
        merged["type"] = "best-effort"
    return merged


def _param_source(document: dict[str, Any], home: str, base_dir: Path) -> ParamSource:
    if "params" in document:
        return ParamSource(inline=tuple(document["params"]))
    if "nb_jobs" in document:
        return ParamSource(count=int(document["nb_jobs"]))
    path = Path(_expand_home(document["param_file"], home))
    return ParamSource(file=path if path.is_absolute() else base_dir / path)
