"""What a submission carries from the submitting process to the grid, and what comes back:
JDL texts, parameter lines, and the campaigns made. The submitting user's own process (the
command, in direct mode or as a client of the server) reads these files, with that user's
rights; cigri itself never opens a path that a JDL names. Light on purpose: a client imports
this and nothing of the grid."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, NamedTuple

from cigri.errors import shown


@dataclass(frozen=True)
class Lines:
    """Parameter lines on their way in (a file opened by the submitting process, stdin, an
    upload), with the name errors give them (``params.txt:12: ...``)."""

    stream: BinaryIO
    name: str


class Submitted(NamedTuple):
    """A campaign created or extended: its id, the tasks added, and the warning lines of the
    CiGri forms its JDL or parameter file used (:mod:`cigri.jdl.compat`), for the caller to show."""

    campaign_id: int
    tasks: int
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class JDLText:
    """A JDL as read, with the name its errors give it (``source``), the directory a relative
    ``param_file`` is named against, and that file's lines (``params``) when it names one."""

    text: str
    base_dir: Path
    source: str = "JDL"
    params: Lines | None = None
    params_error: str | None = None  # why its param_file could not be opened: one of the JDL's mistakes


def local_jdl(text: str, *, base_dir: Path, user: str, source: str = "JDL") -> JDLText:
    """A JDL read by the submitting user's own process, its ``param_file`` opened here (in
    that process, with that user's rights). A file that cannot be opened is one line, said
    with the JDL's other mistakes (the submission checks them all)."""
    from cigri.jdl.parser import param_file_path  # the JDL's own reading of its key and macros

    path = param_file_path(text, base_dir=base_dir, user=user)
    if path is None:
        return JDLText(text, base_dir, source)
    try:
        return JDLText(text, base_dir, source, Lines(path.open("rb"), str(path)))
    except OSError as error:
        return JDLText(text, base_dir, source, params_error=f"param_file {path}: {error.strerror}")
    except ValueError:  # a NUL byte: no file has that name
        return JDLText(text, base_dir, source, params_error=f"param_file {shown(str(path))}: not a file name")
