"""The commands explain themselves: usage errors in one line, help that shows flags as flags and
arguments as NAME, the state letters explained, shell completion of every command from one
install (campaign numbers for ``-c``), manual pages with examples that the commands accept,
and the short options that mean different things per command listed in the user guide."""

from __future__ import annotations

import re
import shlex
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
import typer
from harness import BIN, Cigri

from cigri.cli import admin, griddel, gridclusters, gridevents, gridnotify, gridstat, gridsub, gridtoken

ROOT = Path(__file__).resolve().parent.parent
APPS = {"gridsub": gridsub.app, "gridstat": gridstat.app, "griddel": griddel.app, "gridevents": gridevents.app,
        "gridnotify": gridnotify.app, "gridclusters": gridclusters.app, "gridtoken": gridtoken.app,
        "cigri": admin.app}


def command_paths(command: typer.core.TyperCommand | typer.core.TyperGroup, path: str) -> list[list[str]]:
    """Every command and sub-command, as the words that run it."""
    found = [path.split()]
    for name, sub in getattr(command, "commands", {}).items():
        found += command_paths(sub, f"{path} {name}")
    return found


EVERY_COMMAND = [words for name, app in APPS.items() for words in command_paths(typer.main.get_command(app), name)]


@pytest.mark.parametrize(("argv", "path"), [
    (["gridstat", "--bogus"], "gridstat"),
    (["gridstat", "-c", "x"], "gridstat"),
    (["gridsub", "-f"], "gridsub"),
    (["griddel", "12", "x"], "griddel"),
    (["cigri", "cluster", "add"], "cigri cluster add"),
    (["gridnotify", "subscribe", "--severity"], "gridnotify"),  # Click names the group for a parser error
    (["gridevents", "extra"], "gridevents"),
], ids=lambda value: " ".join(value) if isinstance(value, list) else "")
def test_a_usage_error_is_one_line_naming_the_command_and_its_help(cigri: Cigri, argv: list[str], path: str) -> None:
    """typer drew a five-line box; the promise is one line on stderr, exit 2, nothing on stdout."""
    result = cigri.run(*argv, expect=2)
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{argv[0]}: ") and line.endswith(f"; see {path} --help"), line
    assert line[len(argv[0]) + 2].islower(), line  # as every other error line


@pytest.mark.parametrize("words", EVERY_COMMAND, ids=" ".join)
def test_flags_read_as_flags_and_arguments_as_names(cigri: Cigri, words: list[str]) -> None:
    """``--wait -w <bool>`` read as if the flag took a value; ``[[CAMPAIGN]]`` and ``{name}``
    are not how usage lines write an optional or a required argument."""
    cigri.env["COLUMNS"] = "200"
    text = cigri.run(*words, "--help").stdout
    assert "<bool>" not in text
    usage = next(line for line in text.splitlines() if "Usage:" in line)
    assert "[[" not in usage and "{" not in usage, usage


def test_the_usage_lines_name_their_arguments(cigri: Cigri) -> None:
    cigri.env["COLUMNS"] = "200"
    usages = {" ".join(words): next(line.strip() for line in cigri.run(*words, "--help").stdout.splitlines()
                                    if "Usage:" in line)
              for words in (["gridstat"], ["griddel"], ["cigri", "cluster", "add"], ["gridnotify", "unsubscribe"])}
    assert usages == {"gridstat": "Usage: gridstat [OPTIONS] [CAMPAIGN]",
                      "griddel": "Usage: griddel [OPTIONS] [CAMPAIGN]...",
                      "cigri cluster add": "Usage: cigri cluster add [OPTIONS] NAME",
                      "gridnotify unsubscribe": "Usage: gridnotify unsubscribe [OPTIONS] SUBSCRIPTION"}


def test_the_help_explains_the_state_letters_and_ended_otherwise(cigri: Cigri) -> None:
    """``gridstat``'s S column and its ``ended_otherwise`` jobs were explained nowhere a user looks."""
    cigri.env["COLUMNS"] = "200"
    for text in (cigri.run("gridstat", "--help").stdout, (ROOT / "man" / "gridstat.1").read_text()):
        flat = " ".join(text.replace("\\-", "-").split())
        for letter, meaning in (("R", "in treatment"), ("P", "paused"), ("T", "terminated"), ("F", "failed"),
                                ("C", "cancelled")):
            assert f"{letter} {meaning}" in flat
        assert '"ended otherwise" counts the jobs that ended there in any way but success' in flat


# --- completion -----------------------------------------------------------------------------

def test_one_install_completes_every_command(cigri: Cigri) -> None:
    """``--install-completion`` covered only the command it was run from."""
    cigri.env.update(HOME=str(cigri.tmp), _TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1")
    cigri.run("gridstat", "--install-completion", "bash")
    commands = ["cigri", "gridclusters", "griddel", "gridevents", "gridnotify", "gridstat", "gridsub", "gridtoken"]
    for name in commands:
        script = (cigri.tmp / ".bash_completions" / f"{name}.sh").read_text()
        assert f"complete -o default -F _{name}_completion {name}" in script
        assert f"source '{cigri.tmp}/.bash_completions/{name}.sh'" in (cigri.tmp / ".bashrc").read_text()
    shown = cigri.run("gridsub", "--show-completion", "bash").stdout
    assert re.findall(r"^complete -o default -F _(\w+)_completion", shown, re.MULTILINE) == commands


def test_gridstat_c_completes_the_users_campaign_numbers(cigri: Cigri) -> None:
    """``gridstat -c <TAB>`` completed file names; it completes the user's campaigns, through
    the client, in a real bash with the script the commands install."""
    first = cigri.submit(cigri.jdl("first", exec_file="/bin/true", nb_jobs=1))
    second = cigri.submit(cigri.jdl("second", exec_file="/bin/true", nb_jobs=1))
    (cigri.tmp / "not-a-campaign.txt").write_text("")
    cigri.env["_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION"] = "1"
    script = cigri.run("gridstat", "--show-completion", "bash").stdout

    def complete(line: str) -> list[str]:
        words = line.split(" ")
        program = (f"{script}\nCOMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); COMP_CWORD={len(words) - 1}; "
                   f"_{words[0]}_completion {words[0]}; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
        result = subprocess.run(["bash", "-c", program], env={**cigri.env, "PATH": f"{BIN}:/usr/bin:/bin"},
                                cwd=cigri.tmp, capture_output=True, text=True, timeout=60)
        assert result.returncode == 0, result.stderr
        return sorted(filter(None, result.stdout.splitlines()))

    assert complete("gridstat -c ") == sorted([str(first), str(second)])
    assert complete(f"gridstat {second}") == [str(second)]
    assert complete("griddel ") == sorted([str(first), str(second)])
    assert complete("gridevents -c ") == sorted([str(first), str(second)])


# --- manual pages -----------------------------------------------------------------------------

def test_cigri_man_shows_a_page_wherever_cigri_is_installed(cigri: Cigri) -> None:
    """``man gridsub`` found nothing after pip install: the wheel now puts the pages in
    share/man (tests/test_packaging.py), and ``cigri man`` finds them, or a checkout's."""
    cigri.env.update(MANPAGER="cat", MANWIDTH="100")
    page = cigri.run("cigri", "man", "gridstat").stdout
    assert "gridstat - show cigri campaigns, tasks and jobs" in page and "EXAMPLES" in page
    assert "cigri.toml - " in cigri.run("cigri", "man", "cigri.toml").stdout
    refused = cigri.run("cigri", "man", "nothing", expect=2)
    assert refused.stderr.startswith("cigri: nothing: no such manual page")


def _examples(page: Path) -> list[str]:
    """The command lines of a section-1 page's EXAMPLES."""
    text = page.read_text()
    assert ".SH EXAMPLES" in text, f"{page.name} has no EXAMPLES"
    section = text.split(".SH EXAMPLES", 1)[1].split(".SH ", 1)[0]
    return [line[3:].replace("\\-", "-") for line in section.splitlines() if line.startswith(".B ")]


@pytest.mark.parametrize("name", APPS)
def test_each_page_has_examples_the_command_accepts(name: str) -> None:
    """Every example parses: its options exist and take the values it gives them."""
    examples = _examples(ROOT / "man" / f"{name}.1")
    assert len(examples) >= 2
    for example in examples:
        words = shlex.split(example.split("|")[-1])
        assert words[0] == name, example
        command, args = typer.main.get_command(APPS[name]), words[1:]
        while isinstance(command, typer.core.TyperGroup):
            command = command.commands[args.pop(0)]
        context = command.make_context(name, args)
        assert not context.args, (example, context.args)


# --- short options that mean different things ---------------------------------------------------

def test_short_options_that_differ_between_commands_are_documented() -> None:
    """``-f`` is gridsub's --file, gridstat's --full and gridevents' --fix, as in CiGri, whose
    scripts use them: every short option with several meanings has a row in the user guide's
    table that names each command's long option."""
    meanings: dict[str, set[tuple[str, str]]] = defaultdict(set)

    def walk(command: typer.core.TyperCommand | typer.core.TyperGroup, path: str) -> None:
        for param in command.params:
            long = next((opt for opt in param.opts if opt.startswith("--")), None)
            for opt in param.opts:
                if re.fullmatch(r"-\w", opt) and long:
                    meanings[opt].add((path, long))
        for sub_name, sub in getattr(command, "commands", {}).items():
            walk(sub, f"{path} {sub_name}")

    for name, app in APPS.items():
        walk(typer.main.get_command(app), name)
    guide = (ROOT / "docs" / "user-guide.md").read_text()
    table = guide.split("### Short options across commands", 1)[1].split("\n#", 1)[0]
    rows = {line.split("|")[1].strip(): line for line in table.splitlines() if line.startswith("| `-")}
    several = {opt: uses for opt, uses in meanings.items() if len({long for _, long in uses}) > 1}
    assert {"-f", "-r"} <= set(several)
    for opt, uses in several.items():
        row = rows.get(f"`{opt}`")
        assert row is not None, f"{opt} has several meanings ({sorted(uses)}) and no row in the user guide"
        for path, long in uses:
            assert f"`{path}`" in row and f"`{long}`" in row, (opt, path, long, row)
