"""Task names (a parameter line's first word) are one line of text, as campaign names are: a
control character (C0, DEL, C1, U+2028, U+2029) is refused with one line naming the line, and
what is already stored, or what a program wrote to its stderr, is never printed raw by
``gridstat -f`` or ``gridevents`` (issue 23)."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
from harness import Cigri

from cigri.errors import InputError
from cigri.jdl import iter_params
from cigri.jdl.parser import ParamSource

RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]")  # what a listing must never hold (newlines aside)
BAD_NAMES = [("'a\x1b[2Jb' x", "U+001B"), ("'cr\rhere' x", "U+000D"),  # LF: tests/test_inline_params.py
             ("vertical\x0btab x", "U+000B"), ("del\x7f x", "U+007F"), ("next\x85line x", "U+0085"),
             ("csi\x9b31m x", "U+009B"), ("line\u2028sep x", "U+2028"), ("para\u2029sep", "U+2029")]


@pytest.mark.parametrize(("line", "code"), BAD_NAMES)
def test_a_control_character_in_a_task_name_is_refused_inline_and_in_files(tmp_path: Path, line: str,
                                                                           code: str) -> None:
    with pytest.raises(InputError, match=rf"^\$\.params\[1\]: the task name contains the control character "
                                         rf"{re.escape(code)}; a name is one line of text$") as inline:
        list(iter_params(ParamSource(inline=("fine 1", line))))
    assert inline.value.exit_code == 2
    path = tmp_path / "params.txt"
    path.write_text(f"fine 1\n# comment\n{line}\n", encoding="utf-8", newline="")
    with pytest.raises(InputError, match=rf"^{re.escape(str(path))}:3: the task name contains the control "
                                         rf"character {re.escape(code)}"):
        list(iter_params(ParamSource(file=path)))


def test_control_characters_after_the_name_are_arguments(tmp_path: Path) -> None:
    """Only the name is shown in listings; the program's arguments are its own business."""
    assert [name for _, name, _ in iter_params(ParamSource(inline=("ok '\x1b[1m' \u2028",)))] == ["ok"]


def test_gridsub_refuses_it_in_one_line_and_writes_nothing(cigri: Cigri) -> None:
    cigri.run("cigri", "db", "init")
    counts = cigri.db_counts()
    params = cigri.tmp / "params.txt"
    params.write_text("a 1\n'b\x1b]0;owned\x07' 2\n")
    for jdl, where in ((cigri.jdl("inline", exec_file="/bin/true", params=["a 1", "'b\u2028' 2"]), "$.params[1]"),
                       (cigri.jdl("file", exec_file="/bin/true", param_file=str(params)), f"{params}:2")):
        result = cigri.run("gridsub", "-f", str(jdl), expect=2)
        assert result.stderr.count("\n") == 1 and f"{where}: the task name contains the control character" \
            in result.stderr
    assert cigri.db_counts() == counts


def test_gridstat_and_gridevents_escape_what_is_already_stored(cigri: Cigri) -> None:
    """A name stored before names were checked, and a program's stderr with escape sequences."""
    failing = cigri.script("fail.sh", "printf 'boom\\033[2J\\033]0;owned\\007 \\302\\205 \\342\\200\\250 end\\n' >&2\n"
                                      "exit 1\n")
    campaign_id = cigri.submit(cigri.jdl("raw", exec_file=str(failing), params=["a 1"]))
    with sqlite3.connect(cigri.home / "cigri.db") as conn:
        conn.execute("UPDATE tasks SET name = ? WHERE campaign_id = ?", ["t\x1b[31m\u2028x", campaign_id])
    assert cigri.drain(campaign_id)["state"] == "failed"
    [event] = [e for e in cigri.events(campaign_id) if e["code"] == "EXIT_ERROR"]
    assert "\x1b" in event["stderr_tail"] and "\x1b" in event["message"]  # stored as it came, shown escaped
    outputs = {"gridstat -f": cigri.run("gridstat", "-c", str(campaign_id), "-f").stdout,
               "gridstat -c": cigri.run("gridstat", "-c", str(campaign_id)).stdout,
               "gridevents": cigri.run("gridevents", "-c", str(campaign_id)).stdout,
               "gridevents -e": cigri.run("gridevents", "-e", str(event["id"])).stdout}
    for command, output in outputs.items():
        assert not RAW.search(output), f"{command} printed a control character raw: {output!r}"
    assert r"t\x1b[31m\u2028x" in outputs["gridstat -f"]
    assert r"boom\x1b[2J\x1b]0;owned\x07 \x85 \u2028 end" in outputs["gridevents -e"]
    assert r"t\x1b[31m\u2028x" in outputs["gridevents"]  # the group's example
    assert r"task t\x1b[31m\u2028x exited" in outputs["gridevents -e"]
    assert json.loads(cigri.run("gridstat", "-c", str(campaign_id), "-f", "--json").stdout)[0]["name"] == \
        "t\x1b[31m\u2028x"  # JSON escapes them itself
