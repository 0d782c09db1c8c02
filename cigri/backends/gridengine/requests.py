"""What a JDL asks of a Grid Engine cluster, parsed: ``properties`` as ``qsub -l`` resource
requests and ``-q`` queues, ``resources`` as slots of one node.

``properties`` is a comma-separated list of requests, each ``name=value``::

    properties := request ("," request)*
    request    := name "=" value
    value      := term ("|" term)*
    term       := factor ("&" factor)*
    factor     := "!" factor | "(" value ")" | word

A name is a complex (``arch``, ``hostname``, ``mem_free``, a site's ``gpu``...: letters, digits
and ``_``, not starting with a digit) and becomes one ``-l name=value``; the name ``queue`` selects
queues instead (``-q value``, a queue list's wildcard expression such as ``all.q@node*``). A word
is letters, digits and ``_ . : + - / @`` with Grid Engine's wildcards ``* ?`` and bracket sets
``[...]``: a number, a size (``2G``), a host, a pattern. Nothing else is a character of it: no
space, quote, ``$``, backquote, backslash, ``;``, ``=`` or ``,`` inside a value, so what Grid
Engine receives is exactly the requests written, one argument each, and nothing reaches a shell.
``h_rt`` and ``s_rt`` are refused (the walltime is given separately), as are more than
:data:`MAX_LENGTH` characters or :data:`MAX_DEPTH` nested parentheses or ``!``. Names are not
checked against the cluster's complexes: ``qsub -w e`` refuses an unknown one itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cigri.backends import _arrays as arrays
from cigri.errors import SubmissionRefused, shown

MAX_LENGTH = 2000
MAX_DEPTH = 20
WALLTIMES = ("h_rt", "s_rt")  # cigri gives the walltime itself
QUEUE = "queue"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_WORD = re.compile(r"(?:[A-Za-z0-9_.:+\-/@*?]|\[[A-Za-z0-9_.:+\-/@!^]+\])+")


@dataclass(frozen=True)
class Requests:
    resources: tuple[str, ...] = ()  # "name=value", each one -l
    queues: tuple[str, ...] = ()  # each one -q

    def __add__(self, other: Requests) -> Requests:
        return Requests(self.resources + other.resources, self.queues + other.queues)


def parse(text: str) -> Requests:
    """The requests of a ``properties`` text; :class:`ValueError` saying why it is not one."""
    if len(text) > MAX_LENGTH:
        raise ValueError(f"not Grid Engine requests: longer than {MAX_LENGTH:,} characters")
    if not text.strip():
        return Requests()
    resources, queues = [], []
    for at, request in _items(text):
        name, equals, value = request.partition("=")
        name, value = name.strip(), value.strip()
        if not equals or not _NAME.match(name):
            raise ValueError(f"not Grid Engine requests: {shown(request)} at character {at + 1} is not name=value "
                             "(e.g. arch=lx-amd64,queue=all.q)")
        if name in WALLTIMES:
            raise ValueError(f"not Grid Engine requests: {name} is cigri's (the JDL's walltime)")
        try:
            _check_value(value)
        except ValueError as error:
            raise ValueError(f"not Grid Engine requests: the value of {name}: {error}") from None
        if name == QUEUE:
            queues.append(value)
        else:
            resources.append(f"{name}={value}")
    return Requests(tuple(resources), tuple(queues))


def _items(text: str) -> list[tuple[int, str]]:
    """The comma-separated requests with where each starts."""
    items, at = [], 0
    for part in text.split(","):
        items.append((at, part))
        at += len(part) + 1
    return items


def _check_value(text: str) -> None:
    """Raise :class:`ValueError` unless ``text`` is a value of the grammar: read token by token,
    expecting an operand (a word, ``!``, ``(``) or an operator (``|``, ``&``, ``)``) in turn."""
    if not text:
        raise ValueError("empty")
    at, depth, nested, operand = 0, 0, 0, True
    while at < len(text):
        word = _WORD.match(text, at) if operand else None
        symbol = text[at]
        if word is not None:
            at, operand, nested = word.end(), False, depth
            continue
        if operand and symbol in "!(":
            nested += 1
            depth += symbol == "("
        elif not operand and symbol in "|&":
            operand = True
        elif not operand and symbol == ")" and depth:
            depth -= 1
        else:
            expected = "a word (letters, digits, _ . : + - / @, wildcards * ? [...]), '!' or '('" if operand \
                else "'|', '&', ')' or the end"
            raise ValueError(f"{shown(symbol)} at character {at + 1} where {expected} was expected")
        if nested > MAX_DEPTH:
            raise ValueError(f"more than {MAX_DEPTH} parentheses or '!' inside one another")
        at += 1
    if operand or depth:
        raise ValueError(f"the end where {'a word' if operand else repr(')')} was expected")


def slots(resources: str) -> int:
    """The slots of one task from an OAR resource request: ``core=4``, ``/nodes=1/core=4``,
    ``cpu=2/core=4`` (8); a task runs on one node (its parallel environment's)."""
    counts = arrays.levels(resources, "Grid Engine", "[/nodes=1][/cpu=N][/core=N], a task's slots on one node")
    if counts.get(arrays.NODE, 1) != 1:
        raise SubmissionRefused(f"resources {shown(resources)}: Grid Engine runs a task's slots on one node; "
                                "expected [/nodes=1][/cpu=N][/core=N]")
    return counts.get(arrays.CPU, 1) * counts.get(arrays.CORE, 1)
