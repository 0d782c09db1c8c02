"""Every command, sub-command and option is documented: in README.md and in its man page,
and every configuration key in conf/cigri.toml or conf/clusters.example.toml."""

from __future__ import annotations

import re
import tomllib
from dataclasses import fields
from pathlib import Path

import click
import pytest
import typer

from cigri import config
from cigri.cli import admin, griddel, gridclusters, gridevents, gridnotify, gridstat, gridsub

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
COMMANDS = {"gridsub": gridsub.app, "gridstat": gridstat.app, "griddel": griddel.app,
            "gridevents": gridevents.app, "gridnotify": gridnotify.app, "gridclusters": gridclusters.app,
            "cigri": admin.app}
GENERATED = {"--install-completion", "--show-completion", "--help", "--version"}


def options(command: click.Command, prefix: str) -> list[tuple[str, str]]:
    """(command path, option) for a command and all its sub-commands."""
    found = [(prefix, opt) for param in command.params for opt in param.opts
             if opt.startswith("--") and opt not in GENERATED]
    if isinstance(command, click.Group):
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
    if isinstance(command, click.Group):
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
