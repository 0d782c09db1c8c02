"""Every command, sub-command and option is documented: in README.md (commands at a glance),
in the section of README.md or docs/*.md whose heading names the command (options too), and in
its man page. Every configuration key is in conf/cigri.toml or conf/clusters.example.toml, in
man/cigri.toml.5 and named in the guides; every JDL key in the user guide's JDL section; the
event table is the catalogue; every link between the Markdown files resolves; the guides'
TOML and JSON examples are accepted by cigri. The file formats' pages (man/*.5) have an entry
for every key of the JDL, the configuration and both scenario formats, render without
warnings, and their examples are valid."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import pytest
import typer

from cigri import config
from cigri.cli import admin, griddel, gridclusters, gridevents, gridnotify, gridstat, gridsub, gridtoken

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
MARKDOWN = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
GUIDES = [path for path in MARKDOWN if path.name != "CHANGELOG.md"]  # what cigri does now
COMMANDS = {"gridsub": gridsub.app, "gridstat": gridstat.app, "griddel": griddel.app,
            "gridevents": gridevents.app, "gridnotify": gridnotify.app, "gridclusters": gridclusters.app,
            "gridtoken": gridtoken.app, "cigri": admin.app}
GENERATED = {"--install-completion", "--show-completion", "--help", "--version"}
# Pages other branches are writing at the time of this one; links to them are checked once they exist.
PENDING_PAGES: set[str] = set()


def options(command: typer.core.TyperCommand | typer.core.TyperGroup, prefix: str) -> list[tuple[str, str]]:
    """(command path, option) for a command and all its sub-commands, short options included."""
    found = [(prefix, opt) for param in command.params for opt in param.opts
             if opt.startswith("-") and opt not in GENERATED]
    if isinstance(command, typer.core.TyperGroup):
        for name, sub in command.commands.items():
            found += [(f"{prefix} {name}", "")] + options(sub, f"{prefix} {name}")
    return found


@pytest.mark.parametrize("name", COMMANDS)
def test_command_documented_in_readme_and_man(name: str) -> None:
    command = typer.main.get_command(COMMANDS[name])
    assert f"`{name}" in README, f"{name} missing from README"
    man = (ROOT / "man" / f"{name}.1").read_text()
    for path, option in options(command, name):
        if option:
            assert option.replace("-", r"\-") in man or option in man, f"{path} {option} missing from man/{name}.1"
    if isinstance(command, typer.core.TyperGroup):
        for sub in command.commands:
            assert re.search(rf"{name} {sub}\b", README), f"{name} {sub} missing from README"


# --- the Markdown guides: sections, anchors, links ---------------------------------------------

@dataclass(frozen=True)
class Section:
    path: Path
    level: int
    title: str
    text: str  # the heading and its body, subsections included


def _outside_code(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line) of a Markdown file, fenced code blocks left out."""
    fenced = False
    for number, line in enumerate(path.read_text().splitlines()):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced:
            yield number, line


def sections(path: Path) -> list[Section]:
    lines = path.read_text().splitlines()
    headings = [(number, len(match[1]), match[2]) for number, line in _outside_code(path)
                if (match := re.match(r"(#{1,6}) +(.+?) *#*$", line))]
    found = []
    for k, (start, level, title) in enumerate(headings):
        end = next((n for n, lvl, _ in headings[k + 1:] if lvl <= level), len(lines))
        found.append(Section(path, level, title, "\n".join(lines[start:end])))
    return found


def anchor(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but - and _ dropped, spaces as -."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    result = set()
    for section in sections(path):
        base = anchor(section.title)
        result.add(f"{base}-{seen[base]}" if base in seen else base)
        seen[base] = seen.get(base, 0) + 1
    return result


def links(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, target) of every link and image of a Markdown file, code left out."""
    for number, line in _outside_code(path):
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", re.sub(r"`[^`]*`", "", line)):
            yield number + 1, target


def code_words(paths: list[Path]) -> set[str]:
    """The words inside the inline code spans of ``paths`` (`cigri.max_resubmit` gives cigri,
    max_resubmit): what a reader finds by searching for a key."""
    return {word for path in paths for span in re.findall(r"`([^`\n]+)`", path.read_text())
            for word in re.findall(r"\w+", span)}


SECTIONS = [section for path in GUIDES for section in sections(path)]


def test_the_guides_have_sections() -> None:
    """The checks below would pass on empty files: make sure they read the real guides."""
    names = {path.name for path in GUIDES}
    assert {"README.md", "user-guide.md", "admin-guide.md", "scheduling.md", "performance.md",
            "development.md"} <= names
    assert len(SECTIONS) > 50 and anchor("Why isn't my campaign running?") == "why-isnt-my-campaign-running"
    assert anchor("The `cigri` command") == "the-cigri-command"


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_internal_link_resolves(path: Path) -> None:
    broken = []
    for number, target in links(path):
        if re.match(r"[a-z]+:", target):  # https:, mailto:: not ours to check
            continue
        file, _, fragment = target.partition("#")
        resolved = (path.parent / file).resolve() if file else path
        where = f"{path.relative_to(ROOT)}:{number}: {target}"
        if not resolved.exists():
            pending = resolved.relative_to(ROOT).as_posix() if resolved.is_relative_to(ROOT) else ""
            if pending not in PENDING_PAGES:
                broken.append(f"{where}: no such file")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            broken.append(f"{where}: no heading with that anchor in {resolved.relative_to(ROOT)}")
    assert not broken, "\n".join(broken)


def test_pending_pages_are_still_pending() -> None:
    """Once a page of PENDING_PAGES is merged, its links are checked like any other: drop it."""
    merged = sorted(page for page in PENDING_PAGES if (ROOT / page).exists())
    assert not merged, f"remove {merged} from PENDING_PAGES in tests/test_docs.py"


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_documented_where_its_command_is(name: str) -> None:
    """Each sub-command is named, and each option appears, in a section of the guides whose
    heading names the command or a command above it (`gridsub`; `cigri` for `cigri cluster add`)."""
    missing = []
    for path, option in options(typer.main.get_command(COMMANDS[name]), name):
        words = path.split()
        prefixes = [" ".join(words[:n]) for n in range(len(words), 0, -1)]
        found = [s for s in SECTIONS if any(f"`{prefix}`" in s.title for prefix in prefixes)]
        if not found:
            missing.append(f"{path}: no heading of README.md or docs/*.md names `{name}`")
        elif not option and not any(path in s.text for s in found):
            missing.append(f"{path}: not named under {[s.title for s in found]}")
        elif option and not any(re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", s.text) for s in found):
            missing.append(f"{path} {option}: not under {[s.title for s in found]}")
    assert not missing, "\n".join(missing)


def test_every_test_the_policy_tables_name_exists() -> None:
    """README's Fair share tables name, for each seed policy, the test that holds it: each named
    file and test function exists (``test_x.py::test_y``, ``::test_z`` in the same file)."""
    section = README[README.index("## Fair share"):README.index("## Running cigri for a site")]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| policy")]
    assert len(rows) >= 30
    for row in rows:
        named, current = 0, ""
        for match in re.finditer(r"`(test_\w+\.py)?(?:::(\w+))?`", row.rstrip(" |").rsplit(" | ", 1)[-1]):
            current = match.group(1) or current
            source = (ROOT / "tests" / current).read_text()
            assert not match.group(2) or f"def {match.group(2)}(" in source, f"{current}::{match.group(2)}: {row[:60]}"
            named += 1
        assert named, f"no test named: {row[:60]}"


def test_every_configuration_key_named_in_the_guides() -> None:
    keys = {f.name for cls in config.SECTIONS.values() for f in fields(cls)} | set(config.CLASS_KEYS) \
        | set(config.USER_KEYS) | {"backend", *(key for keys in config.CLUSTER_KEYS.values() for key in keys)}
    missing = sorted(keys - code_words(GUIDES))
    assert not missing, f"configuration keys no guide names (in `code`): {missing}"


def test_every_jdl_key_in_the_user_guide() -> None:
    from cigri.jdl.parser import cluster_keys, schema

    (jdl,) = [s for s in SECTIONS if s.path.name == "user-guide.md" and s.title == "The JDL"]
    documented = set(re.findall(r"`(\w+)`", jdl.text))
    missing = sorted((set(schema()["properties"]) | set(cluster_keys())) - documented)
    assert not missing, f"JDL keys missing from the user guide's JDL section: {missing}"


def test_event_table_is_the_catalogue() -> None:
    from cigri.events import CATALOGUE

    text = (ROOT / "docs" / "user-guide.md").read_text()
    rows = {match[1]: tuple(cell.strip() for cell in match[2].split(" | "))
            for match in re.finditer(r"^\| `([A-Z_]+)` \| (.+) \|$", text, flags=re.MULTILINE)}
    expected = {code: (entry.kind, entry.severity.value, "open" if entry.opens else "closed", entry.action)
                for code, entry in CATALOGUE.items()}
    assert rows == expected


def test_every_configuration_key_documented() -> None:
    documented = tomllib.loads((ROOT / "conf" / "cigri.toml").read_text())
    for section, cls in config.SECTIONS.items():
        assert {f.name for f in fields(cls)} == set(documented[section]), section
    remote = tomllib.loads((ROOT / "conf" / "clusters.example.toml").read_text())
    tables = [*documented["clusters"].values(), *remote["clusters"].values()]
    for backend, keys in config.CLUSTER_KEYS.items():
        described = set().union(*(t for t in tables if t["backend"] == backend))
        assert set(keys) <= described, f"cluster keys of {backend} not documented: {set(keys) - described}"


def test_documented_configuration_loads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CIGRI_CONFIG", str(ROOT / "conf" / "cigri.toml"))
    loaded = config.load()
    assert loaded.settings.default_walltime == config.Settings().default_walltime


def test_the_guides_examples_are_valid(tmp_path: Path) -> None:
    """Each TOML block of the guides loads as a configuration, each JSON block is a JDL, a
    fair-share scenario or a simulation scenario that cigri accepts."""
    from cigri import simulate
    from cigri.jdl.parser import parse_jdl
    from cigri.metascheduler import fairshare

    checked = 0
    for path in GUIDES:
        for language, block in re.findall(r"^```(toml|json)\n(.*?)^```$", path.read_text(), re.MULTILINE | re.DOTALL):
            try:
                if language == "toml":
                    (tmp_path / "cigri.toml").write_text(block)
                    config.load(environ={"CIGRI_CONFIG": str(tmp_path / "cigri.toml")}, system_files=False)
                elif "seed" in (document := json.loads(block)):
                    simulate.parse_scenario(document)
                elif isinstance(document["clusters"], list):
                    fairshare.allocate(fairshare.scenario_from_json(document))
                else:
                    (tmp_path / str(document.get("param_file", "none"))).write_text("t1 1\n")
                    parse_jdl(block, known_clusters=dict.fromkeys(document["clusters"], "local"), user="nobody",
                              base_dir=tmp_path, default_walltime="01:00:00", default_resources="core=1")
            except Exception as error:
                pytest.fail(f"{path.relative_to(ROOT)}: the example {block[:40]!r}…: {error}")
            checked += 1
    assert checked >= 6  # the admin guide's two configurations, scheduling's three examples, two JDLs


# --- the hand-written section-5 pages: file formats -------------------------------------------

PAGES = ("cigri-jdl.5", "cigri.toml.5", "cigri-scenario.5")
_ROFF = {r"\-": "-", r"\(ti": "~", r"\(dq": '"', r"\(aq": "'", r"\e": "\\", r"\&": ""}


def _plain(roff: str) -> str:
    for escape, text in _ROFF.items():
        roff = roff.replace(escape, text)
    return roff


def _heading(line: str) -> str:
    return _plain(line.split(None, 1)[1] if " " in line else "").strip().strip('"')


def man_entries(page: str) -> dict[tuple[str, str], list[set[str]]]:
    """A page's entries: per (.SH, .SS) heading ("" before the first .SS), the bold words of
    each ``.TP`` tag line, one set per entry (``\\fBprologue\\fR, \\fBepilogue\\fR``: both)."""
    lines = (ROOT / "man" / page).read_text().splitlines()
    section = subsection = ""
    entries: dict[tuple[str, str], list[set[str]]] = {}
    for line, following in zip(lines, [*lines[1:], ""]):
        if line.startswith(".SH"):
            section, subsection = _heading(line), ""
        elif line.startswith(".SS"):
            subsection = _heading(line)
        elif line.startswith(".TP"):
            words = {_plain(w) for w in re.findall(r"\\fB(.+?)\\fR", following)}
            entries.setdefault((section, subsection), []).append(words)
    return entries


def documented(entries: dict[tuple[str, str], list[set[str]]], section: str, subsection: str | None = None) -> set[str]:
    """Every word with an entry under the section (and subsection, if given)."""
    return {word for (sh, ss), tags in entries.items() if sh == section and subsection in (None, ss)
            for tag in tags for word in tag}


def test_jdl_page_documents_every_key() -> None:
    from cigri.jdl.parser import GLOBAL_ONLY, cluster_keys, schema

    entries = man_entries("cigri-jdl.5")
    global_keys, cluster = documented(entries, "GLOBAL KEYS"), documented(entries, "PER-CLUSTER KEYS")
    assert set(GLOBAL_ONLY) <= set(schema()["properties"])
    missing = [key for key in schema()["properties"] if key not in (global_keys if key in GLOBAL_ONLY else cluster)]
    missing += [f"clusters.NAME.{key}" for key in cluster_keys() if key not in cluster]
    assert not missing, f"JDL keys without an entry in man/cigri-jdl.5: {missing}"


def test_configuration_page_documents_every_key() -> None:
    entries = man_entries("cigri.toml.5")
    missing = [f"{section}.{f.name}" for section, cls in config.SECTIONS.items() for f in fields(cls)
               if f.name not in documented(entries, f"[{section}]")]
    missing += [f"classes.NAME.{key}" for key in config.CLASS_KEYS
                if key not in documented(entries, "[classes.NAME]")]
    missing += [f"users.{key}" for key in config.USER_KEYS
                if key not in documented(entries, "[users] and [users.NAME]")]
    common = documented(entries, "[clusters.NAME]", "")
    for backend, keys in config.CLUSTER_KEYS.items():
        # the keys of every backend, then the subsections that name this one ("slurm and oar backends")
        described = common | {word for (sh, ss), tags in entries.items() if sh == "[clusters.NAME]"
                              and backend in ss.split() for tag in tags for word in tag}
        missing += [f"clusters.NAME.{key} ({backend})" for key in ["backend", *keys] if key not in described]
    assert not missing, f"configuration keys without an entry in man/cigri.toml.5: {missing}"


def _schema_objects(schema: dict[str, Any], where: str, found: dict[str, set[str]]) -> dict[str, set[str]]:
    """The keys of every object of a JSON schema, by where the page documents them: an array's
    items under the array's key, an object inside a property (``anyOf``) with its parent."""
    if "properties" in schema:
        found.setdefault(where, set()).update(schema["properties"])
        for key, sub in schema["properties"].items():
            if "properties" in sub.get("items", {}):
                _schema_objects(sub["items"], key, found)
            for alternative in sub.get("anyOf", []):
                _schema_objects(alternative, where, found)
    return found


def test_scenario_page_documents_every_fair_share_key() -> None:
    from cigri.metascheduler import fairshare

    entries = man_entries("cigri-scenario.5")
    objects = _schema_objects(fairshare._SCHEMA, "top level", {})
    assert {"top level", "clusters", "classes", "users", "campaigns"} <= set(objects)
    missing = [f"{where}: {key}" for where, keys in objects.items() for key in sorted(keys)
               if key not in documented(entries, "FAIR-SHARE SCENARIO", where)]
    assert not missing, f"fair-share scenario keys without an entry in man/cigri-scenario.5: {missing}"


def _gricad_keys() -> set[str]:
    """The keys ``scenario.gricad`` accepts, as its unknown-key error lists them."""
    from cigri import simulate
    from cigri.errors import InputError

    with pytest.raises(InputError) as error:
        simulate.parse_scenario({"clusters": {"c": {"cores": 1}}, "gricad": {"?": 0}})
    known = re.search(r"known: ([^)]*)", str(error.value))
    assert known, str(error.value)
    return set(known[1].split(", "))


def _law_parameters(law: str) -> set[str]:
    """The parameters a duration law requires, found by adding each one it asks for."""
    import random

    from cigri import simulate
    from cigri.errors import InputError

    given: dict[str, Any] = {"law": law}
    for _ in range(10):
        try:
            simulate.draw_durations("d", given, 1, random.Random(0))
            return set(given) - {"law"}
        except InputError as error:
            asked = re.match(r"d\.(\w+): required by law", str(error))
            assert asked, str(error)
            given[asked[1]] = 1
    raise AssertionError(f"law {law} keeps asking for parameters: {given}")


def test_scenario_page_documents_every_simulation_key() -> None:
    from cigri import simulate

    entries = man_entries("cigri-scenario.5")
    expected = {"top level": simulate.SCENARIO_KEYS, "campaigns": simulate.CAMPAIGN_KEYS,
                "clusters.NAME": set(config.CLUSTER_KEYS["sim"]), "gricad": _gricad_keys()}
    missing = [f"{where}: {key}" for where, keys in expected.items() for key in sorted(keys)
               if key not in documented(entries, "SIMULATION SCENARIO", where)]
    laws = entries.get(("SIMULATION SCENARIO", "duration"), [])
    missing += [f"duration: {law} with {sorted(_law_parameters(law))}" for law in simulate.LAWS
                if not any({law, *_law_parameters(law)} <= tag for tag in laws)]
    assert not missing, f"simulation scenario keys without an entry in man/cigri-scenario.5: {missing}"


@pytest.mark.parametrize("page", PAGES)
def test_page_renders_without_warnings(page: str) -> None:
    if shutil.which("groff") is None:
        pytest.skip("groff is not installed (Debian: groff-base)")
    result = subprocess.run(["groff", "-man", "-ww", "-z", "-Tutf8", str(ROOT / "man" / page)],
                            check=False, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr


def _examples(page: str, start: str) -> list[str]:
    """The ``.nf`` blocks of a page whose first line starts with ``start``, as plain text."""
    blocks = re.findall(r"^\.nf\n(.*?)^\.fi$", (ROOT / "man" / page).read_text(), flags=re.MULTILINE | re.DOTALL)
    return [_plain(block) for block in blocks if block.startswith(start)]


def test_page_examples_are_valid(tmp_path: Path) -> None:
    from cigri import simulate
    from cigri.jdl.parser import parse_jdl
    from cigri.metascheduler import fairshare

    jdls = _examples("cigri-jdl.5", "{")
    assert len(jdls) == 2
    for text in jdls:
        parse_jdl(text, known_clusters=dict.fromkeys(json.loads(text)["clusters"], "oar"), user="nobody",
                  base_dir=tmp_path, default_walltime="01:00:00", default_resources="core=1")
    (toml,) = _examples("cigri.toml.5", "[")
    (tmp_path / "cigri.toml").write_text(toml)
    loaded = config.load(environ={"CIGRI_CONFIG": str(tmp_path / "cigri.toml")}, system_files=False)
    assert {c.backend for c in loaded.clusters} == {"slurm", "oar"}
    (shares,) = _examples("cigri-scenario.5", '{"clusters"')
    fairshare.allocate(fairshare.scenario_from_json(json.loads(shares)))
    (simulation,) = _examples("cigri-scenario.5", '{"seed"')
    simulate.parse_scenario(json.loads(simulation))


def test_the_readmes_test_command_leaves_its_first_install_whole() -> None:
    """The quick start's regular install puts the man pages where ``man`` finds them; the test
    command's editable install has none, and once made over it took them away (``man gridsub``
    gone): it has an environment of its own, which .ci/run uses too."""
    first, test = re.findall(r"^python3 -m venv (\S+) && \1/bin/pip install -q (\S+)", README, re.MULTILINE)
    assert first[1] == "." and test[1] == "-e" and test[0] != first[0], (first, test)
    assert f"python3 -m venv {test[0]} && {test[0]}/bin/pip install -q -e '.[test]'" in (ROOT / ".ci" / "run").read_text()
