"""OAR's resource filters, parsed: ``oarsub -p`` and the ``{…}`` groups of ``oarsub -l``.

OAR 2.5 pastes both into the WHERE clause of SQL on its resources table, run with its own
database account (``SELECT … FROM resources WHERE ('1' AND (<filter>)) …``), so a filter can be
any SQL. cigri sends a campaign's filter only if it parses in the part of SQL that OAR's
documentation uses to choose resources::

    expression  := conjunction (OR conjunction)*
    conjunction := negation (AND negation)*
    negation    := NOT negation | '(' expression ')' | predicate
    predicate   := value ( comparison value | [NOT] LIKE string | [NOT] IN '(' literal (',' literal)* ')'
                         | [NOT] BETWEEN value AND value | IS [NOT] NULL )
    comparison  := = | != | <> | < | > | <= | >=
    value       := name | literal
    literal     := number | string

Keywords in any case. A name is a resource property (letters, digits and ``_``, not starting
with a digit) and never one of SQL's reserved words: ``current_user`` or ``user`` would be a
value of OAR's database, not a column. A number is decimal digits, with a leading ``-`` and a
fraction if need be. A string is in single quotes, a quote inside it doubled, and holds neither
a backslash (MySQL reads it as an escape) nor a control character. Nothing else is a token: no
function call, subquery, operator (``||``, ``::``, arithmetic), comment, ``;``, double quote or
``$``. At most :data:`MAX_LENGTH` characters and :data:`MAX_DEPTH` nested parentheses or NOTs.

Property names are not checked against the cluster's: cigri does not know them, and OAR refuses
an unknown one itself ("Bad resource request"). The text is sent as written: the parse only
decides whether it is sent.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

from cigri.errors import shown

MAX_LENGTH = 2000  # characters of a property expression or a resource request
MAX_DEPTH = 20  # parentheses and NOTs inside one another

# PostgreSQL 15's reserved words (pg_get_keywords(), categories R and T: neither a column nor a
# type may be named so without quotes), SQL's value words PostgreSQL 16 and MySQL add (values
# without parentheses), and this grammar's own keywords.
RESERVED = frozenset("""
    all analyse analyze and any array as asc asymmetric both case cast check collate column constraint
    create current_catalog current_date current_role current_time current_timestamp current_user default
    deferrable desc distinct do else end except false fetch for foreign from grant group having in
    initially intersect into lateral leading limit localtime localtimestamp not null offset on only or
    order placing primary references returning select session_user some symmetric table then to
    trailing true union unique user using variadic when where window with
    authorization binary collation concurrently cross current_schema freeze full ilike inner is isnull
    join left like natural notnull outer overlaps right similar tablesample verbose
    system_user utc_date utc_time utc_timestamp
    between
""".split())
COMPARISONS = ("=", "!=", "<>", "<", ">", "<=", ">=")

_TOKEN = re.compile(r"""
    (?P<space>[ \t]+)
  | (?P<string>'(?:[^'\\\x00-\x1f\x7f-\x9f]|'')*')
  | (?P<number>-?[0-9]+(?:\.[0-9]+)?(?![A-Za-z0-9_.]))
  | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<symbol><>|!=|<=|>=|[=<>(),])
""", re.VERBOSE)


class _Token(NamedTuple):
    kind: str  # string, number, word, symbol, or end
    text: str
    at: int  # offset in the expression

    def described(self) -> str:
        return "the end" if self.kind == "end" else f"{shown(self.text)} at character {self.at + 1}"


def check_properties(text: str) -> None:
    """Raise :class:`ValueError` saying why ``text`` is not a property expression cigri sends
    to OAR (``oarsub -p``)."""
    if len(text) > MAX_LENGTH:
        raise ValueError(f"not an OAR property expression: longer than {MAX_LENGTH:,} characters")
    try:
        _Parser(text).expression_only()
    except ValueError as error:
        raise ValueError(f"not an OAR property expression: {error}") from None


def check_resource_filters(text: str) -> None:
    """Raise :class:`ValueError` unless every ``{…}`` of a resource request (``oarsub -l``) opens
    a group (the request's start, or after a ``+``) and holds a property expression. OAR ends a
    filter at its first ``}``, so that is where it ends here; the levels are the JDL parser's
    business (and OAR's): not SQL."""
    if len(text) > MAX_LENGTH:
        raise ValueError(f"longer than {MAX_LENGTH:,} characters")
    at = 0
    while True:
        opening = len(text) - len(text[at:].lstrip())
        if text.startswith("{", opening):
            closing = text.find("}", opening)
            if closing < 0:
                raise ValueError(f"the filter at character {opening + 1} has no closing '}}'")
            try:
                check_properties(text[opening + 1:closing])
            except ValueError as error:
                raise ValueError(f"the filter at character {opening + 1}: {error}") from None
            at = closing + 1
        end = text.find("+", at)
        levels = text[at:] if end < 0 else text[at:end]
        if brace := re.search(r"[{}]", levels):
            raise ValueError(f"{shown(brace[0])} at character {at + brace.start() + 1}: a filter {{…}} comes "
                             "first in a group, before its levels")
        if end < 0:
            return
        at = end + 1


def _tokens(text: str) -> list[_Token]:
    tokens, at = [], 0
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            if text[at] == "'":
                raise ValueError(f"the string at character {at + 1} has no closing quote, or holds a backslash "
                                 "or a control character")
            if re.match(r"-?[0-9]", text[at:at + 2]):
                raise ValueError(f"the number at character {at + 1} is not digits with a leading '-' and a "
                                 "fraction if need be")
            raise ValueError(f"{shown(text[at])} at character {at + 1} is not allowed")
        if match.lastgroup != "space":
            tokens.append(_Token(str(match.lastgroup), match[0], at))
        at = match.end()
    return [*tokens, _Token("end", "", len(text))]


class _Parser:
    """Recursive descent over the tokens of one expression, one method per rule."""

    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.next = 0
        self.depth = 0

    def expression_only(self) -> None:
        self.expression()
        if self.tokens[self.next].kind != "end":
            raise self._unexpected("AND, OR or the end")

    def expression(self) -> None:
        self.conjunction()
        while self._keyword("or"):
            self.conjunction()

    def conjunction(self) -> None:
        self.negation()
        while self._keyword("and"):
            self.negation()

    def negation(self) -> None:
        if self._keyword("not"):
            with self._deeper():
                self.negation()
        elif self._symbol("("):
            with self._deeper():
                self.expression()
            if not self._symbol(")"):
                raise self._unexpected("AND, OR or ')'")
        else:
            self.predicate()

    def predicate(self) -> None:
        self.value()
        if self._symbol(*COMPARISONS):
            self.value()
        elif self._keyword("is"):
            self._keyword("not")
            if not self._keyword("null"):
                raise self._unexpected("NULL or NOT NULL")
        else:
            self._keyword("not")
            if self._keyword("like"):
                self._literal("string")
            elif self._keyword("in"):
                self._list()
            elif self._keyword("between"):
                self.value()
                if not self._keyword("and"):
                    raise self._unexpected("AND")
                self.value()
            else:
                raise self._unexpected("a comparison (= != <> < > <= >=, LIKE, IN, BETWEEN or IS NULL)")

    def value(self) -> None:
        token = self.tokens[self.next]
        if token.kind == "word" and token.text.lower() in RESERVED:
            raise ValueError(f"{token.described()} is a reserved word of SQL, not a property name")
        if token.kind not in ("word", "number", "string"):
            raise self._unexpected("a property name, a number or a quoted string")
        self.next += 1

    def _list(self) -> None:
        if not self._symbol("("):
            raise self._unexpected("'('")
        self._literal("number", "string")
        while self._symbol(","):
            self._literal("number", "string")
        if not self._symbol(")"):
            raise self._unexpected("',' or ')'")

    def _literal(self, *kinds: str) -> None:
        if self.tokens[self.next].kind not in kinds:
            raise self._unexpected("a quoted string" if kinds == ("string",) else "a number or a quoted string")
        self.next += 1

    def _keyword(self, word: str) -> bool:
        token = self.tokens[self.next]
        if token.kind == "word" and token.text.lower() == word:
            self.next += 1
            return True
        return False

    def _symbol(self, *symbols: str) -> bool:
        token = self.tokens[self.next]
        if token.kind == "symbol" and token.text in symbols:
            self.next += 1
            return True
        return False

    def _unexpected(self, expected: str) -> ValueError:
        return ValueError(f"{self.tokens[self.next].described()} where {expected} was expected")

    @contextmanager
    def _deeper(self) -> Iterator[None]:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ValueError(f"more than {MAX_DEPTH} parentheses or NOTs inside one another")
        yield
        self.depth -= 1
