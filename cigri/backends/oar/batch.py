"""What both OAR dialects send for one batch: an array job running one generated script.

One ``oarsub`` per batch: an array job with a parameter file of one line per job, ``<directory>
<key>`` (the directory shell-quoted), and the command ``sh cigri.<batch>.sh`` over SSH or OAR's
own copy of the same script over REST. OAR appends a job's line to the command and runs it
with the user's shell, so the script gets the job's directory as ``$1`` and its key as ``$2``,
and the job's OAR ``command`` ends with both: this is how a re-sent batch finds its jobs and
how an output tail finds its file, whatever the order of array indexes.

The script ``cd``\\ s into the directory, exports the job's environment, sends its output to
``cigri.<key>.stdout`` and ``cigri.<key>.stderr`` there and ``exec``\\ s the argv. Every value
goes through :func:`_word` (:func:`shlex.quote`, in ASCII) into the script or the parameter
file, and both reach the cluster as files (never through a command line OAR re-parses), so
every value arrives literally.

OAR itself cannot launch a job in just any directory (its launcher puts the path between single
quotes in a Perl script; its REST API pastes it unquoted into shell lines), so OAR launches the
job in the directory's longest plain ancestor (usually the directory itself), where the script
and parameter file are also written, and the script enters the real directory. Over REST the
jobs launch from their login's home instead (see :mod:`.rest`); OAR's own stderr file stays in
that ancestor.

A gang of N jobs is one OAR job on one host asking N times a task's resources
(``/host=1/core=4N`` for ``core=4``), its members started in the background by the script: OAR
grants the job whole or not at all. The gangs of a batch are alike.
"""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import dataclass

from cigri.backends import JobSpec
from cigri.backends import _grouping as grouping
from cigri.backends.oar import expressions
from cigri.errors import SubmissionRefused, shown
from cigri.jdl.walltime import format_walltime

# Keys and batch numbers name files: only characters that are safe everywhere.
_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}\Z")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PLAIN_COMPONENT = re.compile(r"[A-Za-z0-9_.+,@=-]+\Z")
# What OAR runs for a job: our script (SSH) or the API's copy of it (REST), then the job's line.
_COMMAND = re.compile(r"(?:sh cigri\.[A-Za-z0-9_.-]+\.sh|\./oarapi\.subscript\.\w+) (.+)\Z", re.DOTALL)


@dataclass(frozen=True)
class Batch:
    """One ``oarsub``: everything both dialects need, already checked."""

    number: str  # the specs' batch
    name: str  # -n
    launch_directory: str  # -d: where OAR starts the jobs and the script and parameters live
    resources: str  # -l
    properties: str  # -p ("" when none)
    project: str  # --project ("" when none)
    best_effort: bool  # -t besteffort
    job_types: tuple[str, ...]  # -t each, besides besteffort
    script: str
    parameters: tuple[str, ...]  # the lines of the array parameter file

    @property
    def types(self) -> tuple[str, ...]:
        """Every ``-t`` of the ``oarsub``."""
        return (*self.job_types, "besteffort") if self.best_effort else self.job_types

    @property
    def script_name(self) -> str:
        return f"cigri.{self.number}.sh"

    @property
    def parameters_name(self) -> str:
        return f"cigri.{self.number}.params"

    @property
    def parameter_file(self) -> str:
        return "".join(f"{line}\n" for line in self.parameters)

    @property
    def oar_stderr(self) -> str:
        """OAR's own stderr file (the script's errors before its redirections), one per batch."""
        return f"cigri.{self.number}.oar.stderr"


def build(specs: list[JobSpec], cluster_properties: str = "", cluster_project: str = "") -> Batch:
    """Check the batch and prepare its ``oarsub``; raise :class:`SubmissionRefused` naming what
    OAR cannot carry. The jobs of a batch share one OAR request (resources, walltime, type,
    properties, project, directory): the runner's batches, per campaign, cluster and kind, do."""
    first = specs[0]
    if not _SAFE_NAME.match(first.batch):
        raise SubmissionRefused(f"batch {first.batch!r} cannot name an OAR job")
    directory = first.directory
    if not directory.startswith("/") or any(c in directory for c in "\0\n#"):
        raise SubmissionRefused(f"directory {directory!r}: OAR needs an absolute path without newline or '#'")
    keys = set()
    grouped = any(spec.group for spec in specs)
    for spec in specs:
        if not _SAFE_NAME.match(spec.key) or (spec.group and not _SAFE_NAME.match(spec.group)):
            raise SubmissionRefused(f"job key {spec.key!r} (group {spec.group!r}) cannot name a file")
        if grouped and not spec.group:
            raise SubmissionRefused(f"batch {first.batch}: one oarsub cannot mix grouped and lone jobs")
        if spec.key in keys:
            raise SubmissionRefused(f"job key {spec.key!r} twice in one batch")
        keys.add(spec.key)
        for field in ("batch", "directory", "walltime_seconds", "resources", "properties", "project",
                      "best_effort", "job_types", "group_walltime_seconds"):
            if getattr(spec, field) != getattr(first, field):
                raise SubmissionRefused(f"batch {first.batch}: jobs differ in {field}; one oarsub cannot carry them")
        if not spec.argv:
            raise SubmissionRefused(f"job {spec.key}: empty argv")
        for name in spec.environment:
            if not _ENV_NAME.match(name):
                raise SubmissionRefused(f"job {spec.key}: {name!r} is not an environment variable name")
        if any("\0" in word for word in (*spec.argv, *spec.environment.values())):
            raise SubmissionRefused(f"job {spec.key}: a NUL byte cannot be passed to a program")
    check_filters(first.properties, first.resources)
    resources = first.resources
    if first.gang:
        resources = gang_request(first.batch, resources, grouping.split(specs))
    script_text = script(specs)
    parameters = tuple(f"{_word(directory)} {key}" for key in job_keys(specs))
    digest = hashlib.sha256("\0".join((script_text, *parameters)).encode()).hexdigest()[:12]
    plain = [p for p in (cluster_properties.strip(), first.properties.strip()) if p]
    return Batch(
        number=first.batch,
        # a re-sent batch has the same name; another cigri's reusing the number (same user) has not
        name=f"cigri.{first.batch}.{digest}",
        launch_directory=launch_directory(directory),
        resources=resource_request(resources, first.group_walltime_seconds if grouped else first.walltime_seconds),
        properties=" AND ".join(f"({p})" for p in plain) if len(plain) > 1 else "".join(plain),
        project=first.project or cluster_project,
        best_effort=first.best_effort,
        job_types=first.job_types,
        script=script_text,
        parameters=parameters,
    )


def check_filters(properties: str, resources: str) -> None:
    """Refuse a campaign's properties or resource filters that are not OAR property expressions
    (:mod:`.expressions`): OAR would run them as SQL. gridsub refuses them already; this keeps
    one stored before (an older cigri's campaign) from ever reaching OAR. The cluster's own
    ``properties`` are the administrator's, sent as written."""
    try:
        if properties.strip():
            expressions.check_properties(properties)
    except ValueError as error:
        raise SubmissionRefused(f"properties {shown(properties)}: {error}") from None
    try:
        expressions.check_resource_filters(resources)
    except ValueError as error:
        raise SubmissionRefused(f"resources {shown(resources)}: {error}") from None


def gang_request(batch: str, resources: str, jobs: list[list[JobSpec]]) -> str:
    """The resources of one gang: one host, its outermost level times the gang's size."""
    levels = resources.strip().removeprefix("/").split("/")
    name, _, count = levels[0].partition("=")
    if not grouping.same_size(jobs) or not count.strip().isdigit() or name.strip() in ("nodes", "host",
                                                                                      "network_address"):
        raise SubmissionRefused(f"batch {batch}: an oarsub of gangs needs gangs of one size, each task asking "
                                f"for cores of one host, not {resources!r}")
    return "/".join(("/host=1", f"{name.strip()}={int(count) * len(jobs[0])}", *levels[1:]))


def launch_directory(directory: str) -> str:
    """The longest ancestor-or-self of ``directory`` made of plain path components."""
    plain = []
    for part in directory.strip("/").split("/"):
        if not _PLAIN_COMPONENT.match(part) or part in (".", ".."):
            break
        plain.append(part)
    return "/" + "/".join(plain)


def _word(value: str) -> str:
    """One shell word for ``value``, in ASCII and without the text ``/~/``.

    OAR's REST API replaces ``/~/`` anywhere in a submitted script by the user's home; a
    quoted ``~`` is written as ``'"~"'`` (leave the single quotes, a double-quoted tilde,
    back in), which the shell reads as the same literal ``~``. It also writes the script
    without encoding it (Perl): a character from U+0080 to U+00FF arrived as its Latin-1 byte,
    unless another in the batch was beyond U+00FF. So a value that is not ASCII becomes the
    octal escapes of its UTF-8 bytes, which the job's shell turns back with ``printf`` (cigri's
    own code, all escapes: nothing of the value is read as shell syntax; a trailing newline
    would be lost, but a value here is a parameter word, a name or a path, from one line).
    """
    if not value.isascii():
        return "\"$(printf '" + "".join(f"\\{byte:03o}" for byte in value.encode()) + "')\""
    return shlex.quote(value).replace("~", "'\"~\"'")


_PRINTED = re.compile(r"\$\(printf '((?:\\[0-7]{3})+)'\)\Z")


def _value(word: str) -> str:
    """The value a word of :func:`_word` stands for, once the shell has removed its quotes."""
    printed = _PRINTED.match(word)
    if printed is None:
        return word
    return bytes(int(octal, 8) for octal in printed[1].split("\\")[1:]).decode(errors="replace")


def script(specs: list[JobSpec]) -> str:
    """The POSIX sh script of a batch: one ``case`` branch per job key, or per group key for a
    group of jobs run one after another (see :mod:`cigri.backends._grouping`)."""
    jobs = grouping.split(specs)
    lines = ["#!/bin/sh",
             f"# cigri batch {specs[0].batch}: OAR runs this once per job, with its directory and key.",
             grouping.SAVE_UMASK]
    if any(members[0].group for members in jobs):
        lines.append(grouping.FUNCTION)
    lines += ['cd "$1" || exit',
              # OAR's node file, under the 2009 design's names (CiGri's jobs saw OAR's own)
              'export CIGRI_NODE_FILE="$OAR_NODEFILE" CIGRI_NODEFILE="$OAR_NODEFILE"', 'case "$2" in']
    for members in jobs:
        spec = members[0]
        if spec.group:
            lines.append(f"{_word(spec.group)})")
            lines += grouping.branch(members, _word(f"cigri.{spec.group}"), _word)
            lines.append("  ;;")
            continue
        lines.append(f"{_word(spec.key)})")
        lines += [f"  export {name}={_word(value)}" for name, value in spec.environment.items()]
        lines += grouping.private_outputs(_word(output_name(spec.key, 'stdout')), _word(output_name(spec.key, 'stderr')))
        # bash reads a first word starting with '-' as an option of exec; env takes it as the program
        argv = spec.argv if not spec.argv[0].startswith("-") else ("env", "--", *spec.argv)
        lines.append("  exec " + " ".join(_word(word) for word in argv))
        lines.append("  ;;")
    lines += ["*)", '  echo "cigri: no job $2 in this batch" >&2', "  exit 1", "  ;;", "esac", ""]
    return "\n".join(lines)


def job_keys(specs: list[JobSpec]) -> list[str]:
    """The key of each OAR job of the batch, in order: a lone job's own, or its group's."""
    return [members[0].group or members[0].key for members in grouping.split(specs)]


def output_name(key: str, stream: str) -> str:
    """The file a job's ``stdout`` or ``stderr`` goes to, in its directory."""
    if stream not in ("stdout", "stderr"):
        raise ValueError(f"unknown stream {stream!r}")
    return f"cigri.{key}.{stream}"


def resource_request(resources: str, walltime_seconds: int) -> str:
    """``-l`` value: the resources with the walltime (OAR syntax, ``HH:MM:SS``)."""
    resources = resources.strip()
    if "walltime" in resources:
        raise SubmissionRefused(f"resources {resources!r}: the walltime is given separately")
    walltime = f"walltime={format_walltime(walltime_seconds)}"
    return f"{resources},{walltime}" if resources else walltime


def job_of(command: str) -> tuple[str, str] | None:
    """``(directory, key)`` of a job from its OAR command; None if it is not one of a batch's."""
    match = _COMMAND.match(command)
    if not match:
        return None
    try:
        words = shlex.split(match[1])
    except ValueError:
        return None
    if len(words) != 2 or not _value(words[0]).startswith("/") or not _SAFE_NAME.match(words[1]):
        return None
    return _value(words[0]), words[1]


def output_path(command: str, stream: str, member: int | None = None) -> str | None:
    """Where the job running ``command`` (or its ``member``-th grouped job) writes ``stream``;
    None if it is not one of a batch's."""
    job = job_of(command)
    if job is None:
        return None
    key = job[1] if member is None else grouping.member_id(job[1], member)
    return f"{job[0].rstrip('/')}/{output_name(key, stream)}"


def file_prefix(command: str) -> str | None:
    """Where the job running ``command`` writes (``<prefix>.stdout``, a group's
    ``<prefix>.status``...: :mod:`cigri.backends._commands`); None if it is not one of a batch's."""
    job = job_of(command)
    return None if job is None else f"{job[0].rstrip('/')}/cigri.{job[1]}"


def submitted_ids(output: str) -> list[str]:
    """Job ids in ``oarsub``'s output (one ``OAR_JOB_ID=`` line per array job, in index order)."""
    return re.findall(r"^OAR_JOB_ID=(\d+)\s*$", output, re.MULTILINE)
