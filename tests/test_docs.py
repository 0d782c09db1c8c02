"""Every command, sub-command and option is documented: in README.md and in its man page,
and every configuration key in conf/cigri.toml or conf/clusters.example.toml. The file formats'
pages (man/*.5) have an entry for every key of the JDL, the configuration and both scenario
formats, render without warnings, and their examples are valid."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import typer

from cigri import config
from cigri.cli import admin, griddel, gridclusters, gridevents, gridnotify, gridstat, gridsub, gridtoken

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
COMMANDS = {"gridsub": gridsub.app, "gridstat": gridstat.app, "griddel": griddel.app,
            "gridevents": gridevents.app, "gridnotify": gridnotify.app, "gridclusters": gridclusters.app,
            "gridtoken": gridtoken.app, "cigri": admin.app}
GENERATED = {"--install-completion", "--show-completion", "--help", "--version"}


def options(command: typer.core.TyperCommand | typer.core.TyperGroup, prefix: str) -> list[tuple[str, str]]:
    """(command path, option) for a command and all its sub-commands."""
    found = [(prefix, opt) for param in command.params for opt in param.opts
             if opt.startswith("--") and opt not in GENERATED]
    if isinstance(command, typer.core.TyperGroup):
        for name, sub in command.commands.items():
            found += options(sub, f"{prefix} {name}")
    return found


@pytest.mark.parametrize("name", COMMANDS)
def test_command_documented_in_readme_and_man(name: str) -> None:
    command = typer.main.get_command(COMMANDS[name])
    assert f"`{name}" in README, f"{name} missing from README"
    man = (ROOT / "man" / f"{name}.1").read_text()
    for path, option in options(command, name):
        assert option.replace("-", r"\-") in man or option in man, f"{path} {option} missing from man/{name}.1"
    if isinstance(command, typer.core.TyperGroup):
        for sub in command.commands:
            assert re.search(rf"{name} {sub}\b", README), f"{name} {sub} missing from README"


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
