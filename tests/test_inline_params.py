"""Inline ``params`` get every check a parameter file's lines get (issue 23): the 64 KiB line
limit, UTF-8, one line per string, and the checks of the words, with the same messages."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import Cigri

from cigri.errors import InputError
from cigri.jdl import iter_params
from cigri.jdl.params import MAX_LINE_BYTES
from cigri.jdl.parser import ParamSource

LONGEST = "ab " + "é" * ((MAX_LINE_BYTES - 4) // 2)  # 65,535 bytes: with its newline, the most a file's line holds


def refusal(source: ParamSource) -> str:
    with pytest.raises(InputError) as error:
        list(iter_params(source))
    assert error.value.exit_code == 2
    return str(error.value)


@pytest.mark.parametrize(("line", "reason"), [
    (LONGEST + "x", f"line longer than {MAX_LINE_BYTES} bytes"),
    ("b 'open", "No closing quotation"),
    ("b \x00", "contains a NUL byte"),
    ("'' x", "no task name"),
    ("'a\x1bb' x", "the task name contains the control character U+001B; a name is one line of text"),
])
def test_inline_and_file_lines_are_refused_alike(tmp_path: Path, line: str, reason: str) -> None:
    path = tmp_path / "params.txt"
    path.write_text(f"ok 1\n{line}\n", encoding="utf-8")
    assert refusal(ParamSource(file=path)) == f"{path}:2: {reason}"
    assert refusal(ParamSource(inline=("ok 1", line))) == f"$.params[1]: {reason}"


def test_the_longest_line_a_file_takes_is_taken_inline(tmp_path: Path) -> None:
    path = tmp_path / "params.txt"
    path.write_text(LONGEST + "\n", encoding="utf-8")
    assert len(LONGEST.encode()) + 1 == MAX_LINE_BYTES
    assert [n for _, n, _ in iter_params(ParamSource(file=path))] == \
        [n for _, n, _ in iter_params(ParamSource(inline=(LONGEST,)))] == ["ab"]


def test_an_inline_string_is_one_line_of_utf8() -> None:
    assert refusal(ParamSource(inline=("a 1", "b 2\nc 3"))) == \
        "$.params[1]: holds a line break; give one parameter line per string"
    assert refusal(ParamSource(inline=("a \ud800",))) == "$.params[0]: not valid UTF-8"  # a caller's own JSON


def test_gridsub_refuses_a_long_inline_line_in_one_line_and_writes_nothing(cigri: Cigri) -> None:
    cigri.run("cigri", "db", "init")
    counts = cigri.db_counts()
    jdl = cigri.jdl("long", exec_file="/bin/true", params=["a 1", "b " + "x" * MAX_LINE_BYTES])
    result = cigri.run("gridsub", "-f", str(jdl), expect=2)
    assert result.stderr == f"gridsub: $.params[1]: line longer than {MAX_LINE_BYTES} bytes\n"
    assert cigri.db_counts() == counts
