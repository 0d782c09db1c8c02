"""gridsub reports every problem of a JDL at once (a bad walltime and an unknown cluster took two
tries), and of every JDL of one submission; a document whose shapes are wrong still gets its
other problems reported, and never a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness import Cigri

from cigri.errors import InputError
from cigri.jdl import parse_jdl

CLUSTERS = {"local": "local", "slurm": "slurm"}


def problems(document: dict[str, Any] | list[Any], **options: Any) -> list[str]:
    with pytest.raises(InputError) as error:
        parse_jdl(json.dumps(document), known_clusters=CLUSTERS, user="root", base_dir=Path("/"),
                  default_walltime="01:00:00", default_resources="core=1", source="x.json", **options)
    return str(error.value).splitlines()


def test_a_bad_walltime_and_an_unknown_cluster_together() -> None:
    assert problems({"name": "x", "exec_file": "/bin/true", "nb_jobs": 2, "walltime": "1h",
                     "clusters": {"mars": {}}}, strict=True) == [
        "x.json: $.walltime: '1h' is not valid: HH:MM:SS, MM:SS, or seconds (integer or decimal string)",
        "x.json: $.clusters.mars: unknown cluster (known: local, slurm)"]


def test_every_kind_of_problem_in_one_answer() -> None:
    found = problems({"name": "x", "nb_jobs": 2, "params": ["a"], "priority": "high", "class": "gold",
                      "clusters": {"local": {"walltime": "zz", "memory": "lots", "resources": "core=-1"},
                                   "mars": {"exec_file": "/bin/true"}}}, strict=True)
    assert found == [
        "x.json: $.clusters.local.memory: 'lots' is not valid: memory per node of a task: MiB, or a number with K, "
        "M, G or T (Slurm's --mem)",
        "x.json: $.clusters.local.walltime: 'zz' is not valid: HH:MM:SS, MM:SS, or seconds (integer or decimal "
        "string)",
        "x.json: $.priority: 'high' is not of type 'integer'",
        "x.json: exactly one of param_file, nb_jobs, params is required (got nb_jobs, params)",
        "x.json: $.clusters.local: missing mandatory key 'exec_file' (here or global)",
        "x.json: $.clusters.local.resources: 'core=-1' is not a resource level (name=N with N >= 1, ALL or BEST; "
        "e.g. core=1 or /nodes=2/core=4; the walltime goes in walltime)",
        "x.json: $.clusters.mars: unknown cluster (known: local, slurm)",
        "x.json: $.class: unknown class 'gold' (known: default)"]


def test_a_global_value_is_reported_once_where_it_is() -> None:
    """A walltime the schema accepts but no clock reads, given globally for three clusters: one
    line naming the global key, not one per cluster naming keys the JDL does not have."""
    found = problems({"name": "x", "exec_file": "/bin/true", "nb_jobs": 1, "walltime": "00:00",
                      "clusters": {"local": {}, "slurm": {}}}, strict=True)
    assert len(found) == 1 and found[0].startswith("x.json: $.walltime: ")


@pytest.mark.parametrize("document", [
    {"name": ["not", "text"], "clusters": ["local"], "walltime": [1]},
    {"name": "x", "clusters": {"local": "yes", "mars": 3}, "exec_file": 5, "memory": {"a": 1}},
    {"name": "x", "clusters": {"local": {"walltime": None, "resources": 7, "cluster_job_type": [1, 2],
                                         "dimensional_grouping": []}}, "nb_jobs": 1, "exec_file": "/bin/true"},
    {"clusters": {"mars": {}}},
    [1, 2],
], ids=["wrong types everywhere", "clusters not objects", "values of the wrong type", "no name", "not an object"])
def test_wrong_shapes_are_problems_never_a_crash(document: dict[str, Any] | list[Any]) -> None:
    found = problems(document, strict=True)
    assert found and all(line.startswith("x.json: ") for line in found)


@pytest.mark.slow
def test_gridsub_reports_the_problems_of_every_file(cigri: Cigri) -> None:
    first = cigri.tmp / "first.json"
    first.write_text(json.dumps({"name": "a", "exec_file": "/bin/true", "nb_jobs": 2, "walltime": "1h",
                                 "clusters": {"mars": {}}}))
    second = cigri.tmp / "second.json"
    second.write_text(json.dumps({"name": "b", "exec_file": "/bin/true", "nb_jobs": 2,
                                  "clusters": {"local": {"memory": "lots"}}}))
    result = cigri.run("gridsub", "--strict", "-f", str(first), "-f", str(second), expect=2)
    assert result.stdout == ""
    assert [line.split(": $")[0] + ": $" + line.split(": $")[1].split(":")[0] for line in result.stderr.splitlines()] \
        == [f"gridsub: {first}: $.walltime", f"gridsub: {first}: $.clusters.mars",
            f"gridsub: {second}: $.clusters.local.memory"]
    assert cigri.db_counts()["campaigns"] == 0


def test_a_misspelt_key_is_refused_with_the_key_it_must_have_meant() -> None:
    """Ignored with a warning, ``wallltime`` left the campaign with the default walltime; a key
    far from any known one is still CiGri's unknown key, ignored with a warning."""
    assert problems({"name": "x", "exec_fle": "/bin/true", "nb_jobs": 1, "clusters": {"local": {"wallltime": 60}},
                     "exec_file": "/bin/true"}) == [
        "x.json: $: unknown key 'exec_fle' (did you mean 'exec_file'?)",
        "x.json: $.clusters.local: unknown key 'wallltime' (did you mean 'walltime'?)"]
    spec = parse_jdl(json.dumps({"name": "x", "exec_file": "/bin/true", "nb_jobs": 1, "clusters": {"local": {}},
                                 "submitted_by": "portal"}), known_clusters=CLUSTERS, user="root",
                     base_dir=Path("/"), default_walltime="01:00:00", default_resources="core=1", source="x.json")
    assert spec.warnings == ("x.json: $: unknown key 'submitted_by' ignored, as CiGri ignored it (remove it)",)


def test_a_param_file_that_cannot_be_opened_is_said_with_the_jdls_other_mistakes(cigri: Cigri) -> None:
    """Three mistakes, one try: the param_file no longer hides the rest (direct mode here; a
    client of the server sends why it could not open the file with the JDL)."""
    jdl = cigri.tmp / "three.json"
    jdl.write_text(json.dumps({"name": "x", "exec_file": "/bin/true", "param_file": "absent.txt",
                               "walltime": "1h", "clusters": {"mars": {}}}))
    refused = cigri.run("gridsub", "-f", str(jdl), expect=2)
    assert refused.stderr.splitlines() == [
        f"gridsub: {jdl}: $.walltime: '1h' is not valid: HH:MM:SS, MM:SS, or seconds (integer or decimal string)",
        f"gridsub: {jdl}: $.clusters.mars: unknown cluster (known: local)",
        f"gridsub: {jdl}: param_file {cigri.tmp / 'absent.txt'}: No such file or directory"]
    assert cigri.json("gridstat", "-a") == []
