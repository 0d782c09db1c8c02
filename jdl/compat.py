"""CiGri 3.2's leniencies: what its JDL parser, its Ruby JSON parser and its shell accepted that
cigri's own JDL does not, read with CiGri's meaning and each reported as one warning.

A site moving from CiGri keeps years of JDL files; each is accepted as CiGri read it, and each
leniency used leaves one warning line naming it and the modern form, so that users can update
their files. ``gridsub --strict`` applies none of them: the file then fails as cigri's own JDL
would (``Warnings(strict=True)`` refuses a leniency that cigri's JDL would otherwise accept
silently). What CiGri refused stays refused.

The leniencies, in the order they apply:

- JSON text: an escape JSON does not know (``\\$``) is the character itself, as Ruby's JSON
  parser read it; a key given twice keeps its last value, as every JSON parser but cigri's does.
- Document: top-level keys in upper case are lower-cased (CiGri's ``downcase``); a key cigri
  does not know is dropped (CiGri stored it in the campaign and did nothing with it), and so is
  a value of a key CiGri stored and never used (``output_gathering_method``,
  ``checkpointing_type``); a cluster the grid does not have is skipped while one it has
  remains; a ``type`` CiGri did not know runs best-effort, as CiGri's runner ran it;
  ``dimensional_grouping`` is ignored, as CiGri's runner ignored it.
- Shell words CiGri left to the job's shell: ``$HOME`` in ``exec_file`` and
  ``exec_directory``, a program given with arguments in ``exec_file``, ``\\$`` in prologue
  and epilogue lines (OAR 2.5's second shell read it as ``$``).
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from cigri.errors import InputError, shown

_JSON_ESCAPES = frozenset('"\\/bfnrtu')
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)
# $NAME or ${NAME}, possibly escaped for a second shell (\$NAME), as CiGri's files write them
_VARIABLE = re.compile(r"\\?\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
STORED_ONLY = {"output_gathering_method": ("None", "none"), "checkpointing_type": ("None", "none")}
BOM = b"\xef\xbb\xbf"
KNOWN_TYPES = ("best-effort", "besteffort", "normal", "semi-best-effort", "nightly")


@dataclass
class Warnings:
    """The warnings of one JDL (each ``<source>: <message>``); with ``strict``, the first
    leniency that cigri's own JDL would not refuse by itself is refused here."""

    source: str
    strict: bool = False
    lines: list[str] = field(default_factory=list)

    def add(self, message: str) -> None:
        if self.strict:
            raise InputError(f"{self.source}: {message} (refused with --strict)")
        if (line := f"{self.source}: {message}") not in self.lines:  # a global value, read for each cluster
            self.lines.append(line)


def loads(text: str, warnings: Warnings) -> Any:
    """The JSON value of ``text``, with Ruby's reading of unknown escapes and the last value of
    a key given twice, each said once (``json.JSONDecodeError`` as json raises it otherwise)."""
    duplicates: list[str] = []

    def last_wins(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        document = dict(pairs)
        if len(document) < len(pairs):
            seen: set[str] = set()
            duplicates.extend(k for k, _ in pairs if k in seen or seen.add(k))  # type: ignore[func-returns-value]
        return document

    try:
        value = json.loads(text, object_pairs_hook=last_wins)
    except json.JSONDecodeError as error:
        if not error.msg.startswith("Invalid \\escape"):
            raise
        unknown = sorted({m[1] for m in _ESCAPE.finditer(text) if m[1] not in _JSON_ESCAPES})
        value = json.loads(_ESCAPE.sub(lambda m: m[0] if m[1] in _JSON_ESCAPES else m[1], text),
                           object_pairs_hook=last_wins)
        warnings.add(f"{' '.join(chr(92) + c for c in unknown)} is not a JSON escape: read as "
                     f"{' '.join(unknown)}, as CiGri's Ruby parser did (write the character alone, "
                     "or \\\\ for a backslash)")
    for key in dict.fromkeys(duplicates):
        warnings.add(f"duplicate key {shown(key)}: its last value is used, as CiGri did (give it once)")
    return value


def normalize(document: Any, known_clusters: Mapping[str, str], schema: Mapping[str, Any],
              warnings: Warnings) -> None:
    """Rewrite a parsed JDL in place into cigri's own JDL, as CiGri 3.2 read it; anything
    that is not an object, or lacks a usable ``clusters`` object, is left to the schema."""
    if not isinstance(document, dict):
        return
    _lower_keys(document, warnings)
    global_keys = schema["properties"]
    cluster_keys = schema["$defs"]["cluster"]["properties"]
    _drop(document, "$", global_keys, warnings)
    clusters = document.get("clusters")
    if not isinstance(clusters, dict):
        return
    for name, settings in clusters.items():
        if isinstance(settings, dict):
            _drop(settings, f"$.clusters.{name}", cluster_keys, warnings)
    unknown = [name for name in clusters if name not in known_clusters]
    if unknown and len(unknown) < len(clusters):
        for name in unknown:
            del clusters[name]
        warnings.add(f"unknown cluster(s) {', '.join(unknown)} skipped, as CiGri skipped them "
                     f"(known: {', '.join(known_clusters)}; remove them)")
    for where, settings in (("$", document), *((f"$.clusters.{n}", s) for n, s in clusters.items())):
        if isinstance(settings, dict):
            _cigri_values(settings, where, warnings)


def _lower_keys(document: dict[str, Any], warnings: Warnings) -> None:
    """CiGri lower-cased the top-level keys (not a cluster's); the last of two spellings wins."""
    for key in [k for k in document if k != k.lower()]:
        value = document.pop(key)
        if key.lower() in document:
            warnings.add(f"key {shown(key)} replaces {shown(key.lower())}: CiGri read keys in any case, "
                         "the last one winning (give the key once, in lower case)")
        else:
            warnings.add(f"key {shown(key)} read as {shown(key.lower())}, as CiGri did (write it in lower case)")
        document[key.lower()] = value


def close_key(key: str, known: Iterable[str]) -> str | None:
    """The known key ``key`` is most likely a misspelling of (``wallltime``: ``walltime``)."""
    matches = difflib.get_close_matches(key, list(known), n=1, cutoff=0.8)
    return matches[0] if matches else None


def _drop(settings: dict[str, Any], where: str, known: Mapping[str, Any], warnings: Warnings) -> None:
    """Keys cigri does not know, and values CiGri stored without using: dropped, as CiGri
    ignored them (a cluster's key in upper case included: CiGri never lower-cased those). A key
    that is a misspelling of a known one is kept, for the schema to refuse: ignored, it would
    leave the campaign with the default it was meant to replace."""
    for key in [k for k in settings if k not in known]:
        if key.lower() in known:  # CiGri ignored a cluster's key in upper case: so does cigri, saying so
            del settings[key]
            warnings.add(f"{where}: key {shown(key)} ignored, as CiGri ignored a cluster's key in upper case "
                         f"(write it {shown(key.lower())})")
        elif close_key(key, known) is None:
            del settings[key]
            warnings.add(f"{where}: unknown key {shown(key)} ignored, as CiGri ignored it (remove it)")
        # else a misspelt key: the schema refuses it, saying which key it must have meant
    for key, meaningless in STORED_ONLY.items():
        if key in settings and settings[key] not in meaningless:
            value = settings.pop(key)
            warnings.add(f"{where}.{key}: {shown(value)} ignored: CiGri stored it and did nothing with it (remove it)")


def written_types(document: Any) -> dict[str, str]:
    """Each cluster's ``type`` as the JDL wrote it, its own else the campaign's (CiGri read the
    top-level keys in any case), before any leniency makes it cigri's: what CiGri's admission
    rule 1 judged."""
    if not isinstance(document, dict):
        return {}
    top = {key.lower(): value for key, value in document.items()}
    clusters = top.get("clusters")
    result: dict[str, str] = {}
    for name, settings in (clusters.items() if isinstance(clusters, dict) else ()):
        own = settings.get("type") if isinstance(settings, dict) else None
        value = own if isinstance(own, str) else top.get("type")
        if isinstance(value, str):
            result[name] = value
    return result


def _cigri_values(settings: dict[str, Any], where: str, warnings: Warnings) -> None:
    value = settings.get("type")
    if isinstance(value, str) and value not in KNOWN_TYPES:
        settings["type"] = "best-effort"
        warnings.add(f"{where}.type: {shown(value)} runs best-effort, as CiGri ran a type it did not know "
                     f"(write one of {', '.join(KNOWN_TYPES[1:])} or best-effort)")
    value = settings.get("dimensional_grouping")
    if value is True or isinstance(value, str) and value.lower() == "true":
        settings["dimensional_grouping"] = False
        warnings.add(f"{where}.dimensional_grouping: ignored, as CiGri ignored it: one task per job (remove it)")


def expand_path(value: str, where: str, home: str, warnings: Warnings) -> str:
    """``$HOME`` and ``${HOME}`` (CiGri's job shell expanded them) become ``home``,
    ``$CIGRI_CAMPAIGN_ID`` becomes the ``{CAMPAIGN_ID}`` macro; any other variable is left as
    it is, said once: no shell runs an ``exec_file`` here."""

    def one(match: re.Match[str]) -> str:
        name = match[1] or match[2]
        if name == "HOME":
            return home
        if name == "CIGRI_CAMPAIGN_ID":
            return "{CAMPAIGN_ID}"
        return match[0]

    found = [m[1] or m[2] for m in _VARIABLE.finditer(value)]
    if not found:
        return value
    expanded = _VARIABLE.sub(one, value)
    known = [n for n in dict.fromkeys(found) if n in ("HOME", "CIGRI_CAMPAIGN_ID")]
    if known:
        warnings.add(f"{where}: {', '.join('$' + n for n in known)} expanded as CiGri's shell did "
                     "(write {HOME} or {CAMPAIGN_ID})")
    if left := [n for n in dict.fromkeys(found) if n not in known]:
        warnings.add(f"{where}: {', '.join('$' + n for n in left)} left as written: no shell runs it here, "
                     "unlike CiGri (use a prologue or the program itself)")
    return expanded


def command_words(exec_file: str, where: str, warnings: Warnings) -> str | list[str]:
    """``exec_file`` as one program, or, when it holds blanks or quotes, the words CiGri's job
    shell split it into (program, then arguments before the parameters; no expansion)."""
    if not any(c.isspace() or c in "'\"\\" for c in exec_file):
        return exec_file
    try:
        words = shlex.split(exec_file)
    except ValueError as error:
        raise InputError(f"{warnings.source}: {where}: {error}") from None
    if len(words) == 1 and words[0] == exec_file:
        return exec_file
    if not words:
        raise InputError(f"{warnings.source}: {where}: no program")
    warnings.add(f"{where}: split into the program {shown(words[0])} and {len(words) - 1} argument(s), as "
                 "CiGri's shell did (put a program's arguments in a wrapper script, or in each parameter line)")
    return words




def script_macros(script: str, where: str, backend: str, warnings: Warnings) -> str:
    """CiGri's macros of a prologue or epilogue, for the shell that runs it: ``{HOME}`` is
    ``$HOME``, ``{OAR_JOB_ID}`` the cluster's job id variable (cigri's job id elsewhere), and a
    ``\\$`` CiGri's files wrote for OAR 2.5's second shell is ``$``. ``{CAMPAIGN_ID}`` stays,
    for the submission to replace."""
    from cigri.backends.registry import BACKENDS

    job_id = BACKENDS[backend].job_id_variable if backend in BACKENDS else "$CIGRI_JOB_ID"
    script = script.replace("{HOME}", "$HOME").replace("{OAR_JOB_ID}", job_id)
    if "\\$" in script:
        script = script.replace("\\$", "$")
        warnings.add(f"{where}: \\$ read as $, as OAR 2.5's second shell read it under CiGri (write $)")
    return script


def parameters_file(text: str) -> list[str] | None:
    """The parameters of ``gridsub -c N -F FILE`` when the file is CiGri's JSON array of
    strings (``["a 1", "b 2"]``); None when it is cigri's lines."""
    if not text.lstrip().startswith("["):
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return value
