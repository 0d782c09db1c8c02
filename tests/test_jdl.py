"""The JSON JDL: resolution per cluster, a table of invalid documents, parameter lines."""

from __future__ import annotations

import getpass
import json
import pwd
import tracemalloc
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from cigri.errors import InputError
from cigri.jdl import CampaignSpec, iter_params, parse_jdl, split_param
from cigri.jdl.params import MAX_LINE_BYTES
from cigri.jdl.parser import ParamSource, cluster_home, oar_job_types

USER = getpass.getuser()
HOME = pwd.getpwnam(USER).pw_dir
BASE = {"name": "c", "exec_file": "/bin/echo", "nb_jobs": 2, "clusters": {"local": {}}}


def parse(document: dict[str, Any] | str, base_dir: Path = Path("/base"), strict: bool = False) -> CampaignSpec:
    text = document if isinstance(document, str) else json.dumps(document)
    return parse_jdl(text, known_clusters={"local": "local", "other": "oar"}, user=USER, base_dir=base_dir,
                     default_walltime="00:02:00", default_resources="core=1", strict=strict)


def jdl(**changes: Any) -> dict[str, Any]:
    """BASE with keys changed; a value of None removes the key."""
    document = {**BASE, **changes}
    return {k: v for k, v in document.items() if v is not None}


# --- valid documents ----------------------------------------------------------------------

def test_precedence_cluster_over_global_over_default() -> None:
    spec = parse(jdl(walltime="300", project="p", clusters={
        "local": {}, "other": {"walltime": "00:10:00", "resources": "core=4"}}))
    local, other = spec.clusters["local"], spec.clusters["other"]
    assert (local["walltime"], other["walltime"]) == (300, 600)
    assert (local["resources"], other["resources"]) == ("core=1", "core=4")  # default, then cluster
    assert local["project"] == other["project"] == "p"
    assert local["type"] == "best-effort" and local["test_mode"] is False
    assert parse(jdl()).clusters["local"]["walltime"] == 120  # the configured default


@pytest.mark.parametrize(("memory", "mebibytes"), [("4G", 4096), ("512m", 512), ("2048", 2048), (300, 300),
                                                   ("1T", 1024**2), ("1500K", 2)])
def test_memory_forms_as_slurm_writes_them(memory: str | int, mebibytes: int) -> None:
    spec = parse(jdl(memory=memory, clusters={"local": {}, "other": {"memory": "1G"}}))
    assert (spec.clusters["local"]["memory"], spec.clusters["other"]["memory"]) == (mebibytes, 1024)
    assert "memory" not in parse(jdl()).clusters["local"]  # none asked: the cluster's default


@pytest.mark.parametrize(("walltime", "seconds"), [("300", 300), ("00:05:00", 300), ("05:00", 300), (90, 90)])
def test_walltime_forms(walltime: str | int, seconds: int) -> None:
    assert parse(jdl(walltime=walltime)).clusters["local"]["walltime"] == seconds


@pytest.mark.parametrize(("value", "expected"), [(True, True), ("true", True), ("True", True),
                                                 (False, False), ("false", False)])
def test_booleans(value: bool | str, expected: bool) -> None:
    spec = parse(jdl(clusters={"local": {"test_mode": value, "temporal_grouping": value}}))
    assert spec.clusters["local"]["test_mode"] is expected
    assert spec.clusters["local"]["temporal_grouping"] is expected


def test_counts_scripts_and_types() -> None:
    spec = parse(jdl(max_jobs="3", prologue=["set -e", "mkdir -p x"], epilogue="rm -rf x",
                     type="besteffort", prologue_walltime="60"))
    local = spec.clusters["local"]
    assert local["max_jobs"] == 3
    assert local["prologue"] == "set -e\nmkdir -p x"
    assert local["epilogue"] == "rm -rf x"
    assert local["type"] == "best-effort"
    assert local["prologue_walltime"] == 60
    assert spec.jobs_type == "normal"


def test_oar_job_types_as_cigri_string_or_list() -> None:
    spec = parse(jdl(clusters={"local": {}, "other": {"cluster_job_type": ["idempotent", "timesharing=user,*"]}}))
    assert oar_job_types(spec.clusters["other"]["cluster_job_type"]) == ("idempotent", "timesharing=user,*")
    assert oar_job_types(spec.clusters["local"]["cluster_job_type"]) == ()
    spec = parse(jdl(cluster_job_type="idempotent, token:licence=2", clusters={"other": {}}))
    assert oar_job_types(spec.clusters["other"]["cluster_job_type"]) == ("idempotent", "token:licence=2")
    assert oar_job_types("") == oar_job_types([]) == ()


def test_home_expanded_and_campaign_id_left_for_submission() -> None:
    spec = parse(jdl(exec_file="~/bin/run", exec_directory="{HOME}/work/{CAMPAIGN_ID}"))
    assert spec.clusters["local"]["exec_file"] == f"{HOME}/bin/run"
    assert spec.clusters["local"]["exec_directory"] == f"{HOME}/work/{{CAMPAIGN_ID}}"
    assert parse(jdl()).clusters["local"]["exec_directory"] == HOME  # default {HOME}


def test_home_is_the_home_of_the_account_that_runs_the_jobs_on_each_cluster(tmp_path: Path) -> None:
    """On Slurm and OAR, {HOME} and ~ are the cluster account's home (its ``home`` option, else
    /home/USER); the parameter file is read here, from the submitting user's home."""
    assert cluster_home("oar", {"user": "gridtest"}, USER) == "/home/gridtest"
    assert cluster_home("slurm", {"user": "gridtest", "home": "/users/g/gridtest"}, USER) == "/users/g/gridtest"
    assert cluster_home("local", {}, USER) == HOME
    document = jdl(exec_file="~/bin/run", exec_directory="{HOME}/work", param_file="~/p.txt", nb_jobs=None,
                   clusters={"local": {}, "other": {}})
    spec = parse_jdl(json.dumps(document), known_clusters={"local": "local", "other": "oar"}, user=USER,
                     base_dir=tmp_path, default_walltime="00:02:00", default_resources="core=1",
                     homes={"local": HOME, "other": "/home/gridtest"})
    assert [spec.clusters[c]["exec_file"] for c in ("local", "other")] == [f"{HOME}/bin/run", "/home/gridtest/bin/run"]
    assert spec.clusters["other"]["exec_directory"] == "/home/gridtest/work"
    assert spec.params.file == Path(HOME) / "p.txt"


def test_parameter_sources() -> None:
    assert parse(jdl(nb_jobs="5")).params == ParamSource(count=5)
    inline = parse(jdl(nb_jobs=None, params=["a 1", "b 2"]))
    assert inline.params == ParamSource(inline=("a 1", "b 2"))
    assert "params" not in inline.document
    relative = parse(jdl(nb_jobs=None, param_file="p.txt"), base_dir=Path("/jdl/dir"))
    assert relative.params == ParamSource(file=Path("/jdl/dir/p.txt"))
    assert parse(jdl(nb_jobs=None, param_file="~/p.txt")).params == ParamSource(file=Path(HOME, "p.txt"))


def test_shipped_demo_parses() -> None:
    text = resources.files("cigri.jdl").joinpath("examples/demo.json").read_text()
    spec = parse(text)
    assert spec.name == "demo" and spec.clusters["local"]["walltime"] == 300
    assert spec.clusters["local"]["exec_directory"] == f"{HOME}/cigri-demo/{{CAMPAIGN_ID}}"


# --- invalid documents: each is an InputError naming where the problem is ----------------

INVALID: list[tuple[str, dict[str, Any] | str, str]] = [
    ("not JSON", '{"name": ', "not valid JSON"),
    ("nested too deep", "[" * 100_000 + "]" * 100_000, "not valid JSON"),
    ("not an object", "[1, 2]", "$: "),
    ("missing name", jdl(name=None), "'name'"),
    ("missing clusters", jdl(clusters=None), "'clusters'"),
    ("empty clusters", jdl(clusters={}), "$.clusters"),
    ("clusters not an object", jdl(clusters=["local"]), "$.clusters"),
    ("cluster not an object", jdl(clusters={"local": "yes"}), "$.clusters.local"),
    ("unknown cluster", jdl(clusters={"mars": {}}), "$.clusters.mars"),
    ("missing exec_file", jdl(exec_file=None), "$.clusters.local: missing mandatory key 'exec_file'"),
    ("empty exec_file", jdl(exec_file=""), "$.exec_file"),
    ("two param sources", jdl(params=["a"]), "nb_jobs, params"),
    ("no param source", jdl(nb_jobs=None), "param_file, nb_jobs, params"),
    ("bad walltime", jdl(walltime="1:2:3:4"), "$.walltime"),
    ("bad cluster walltime", jdl(clusters={"local": {"walltime": "1:2:3:4"}}), "$.clusters.local.walltime"),
    ("walltime 0", jdl(walltime=0), "$.walltime"),
    ("walltime '00:00'", jdl(clusters={"local": {"walltime": "00:00"}}), "$.clusters.local.walltime"),
    ("walltime float", jdl(walltime=1.5), "$.walltime"),
    ("bad prologue_walltime", jdl(clusters={"local": {"prologue_walltime": "soon"}}),
     "$.clusters.local.prologue_walltime"),
    ("memory with a space", jdl(memory="4 GB"), "$.memory"),
    ("negative core count", jdl(resources="core=-1"), "$.clusters.local.resources: 'core=-1' is not a resource level"),
    ("core count not a number", jdl(resources="/nodes=1/core=abc"), "'core=abc' is not a resource level"),
    ("resources without a count", jdl(clusters={"local": {"resources": "foo"}}), "$.clusters.local.resources: 'foo'"),
    ("zero cores", jdl(resources="core=0"), "'core=0' is not a resource level"),
    ("walltime in resources", jdl(resources="core=1,walltime=1:00:00"), "the walltime goes in walltime"),
    ("memory 0", jdl(clusters={"local": {"memory": "0G"}}), "$.clusters.local.memory"),
    ("memory negative", jdl(memory=-1), "$.memory"),
    ("memory float", jdl(memory=1.5), "$.memory"),
    ("name not a string", jdl(name=3), "$.name"),
    ("empty name", jdl(name=""), "$.name"),
    ("test_mode not a boolean", jdl(test_mode="yes"), "$.test_mode"),
    ("max_jobs negative", jdl(clusters={"local": {"max_jobs": -1}}), "$.clusters.local.max_jobs"),
    ("max_jobs '0'", jdl(clusters={"local": {"max_jobs": "0"}}), "$.clusters.local.max_jobs"),
    ("nb_jobs 0", jdl(nb_jobs=0), "$.nb_jobs"),
    ("nb_jobs '0'", jdl(nb_jobs="0"), "$.nb_jobs"),
    ("nb_jobs float", jdl(nb_jobs=1.5), "$.nb_jobs"),
    ("nb_jobs boolean", jdl(nb_jobs=True), "$.nb_jobs"),
    ("desktop_computing", jdl(jobs_type="desktop_computing"), "$.jobs_type"),
    ("unknown jobs_type", jdl(jobs_type="batch"), "$.jobs_type"),
    ("params not strings", jdl(nb_jobs=None, params=["a", 1]), "$.params[1]"),
    ("params not a list", jdl(nb_jobs=None, params="a b"), "$.params"),
    ("param_file not a string", jdl(nb_jobs=None, param_file=3), "$.param_file"),
    ("prologue not strings", jdl(prologue=["ok", 2]), "$.prologue"),
    ("job types on a non-OAR cluster", jdl(cluster_job_type="idempotent"),
     "$.clusters.local.cluster_job_type: OAR job types, but local is a local cluster"),
    ("job type with a space", jdl(clusters={"other": {"cluster_job_type": ["time sharing"]}}),
     "$.clusters.other.cluster_job_type: 'time sharing' is not an OAR job type"),
    ("job type with a dollar", jdl(clusters={"other": {"cluster_job_type": "idempotent,$(id)"}}),
     "'$(id)' is not an OAR job type"),
    ("besteffort as a job type", jdl(clusters={"other": {"cluster_job_type": "besteffort"}}),
     "besteffort comes from the campaign's type"),
    ("job types not strings", jdl(clusters={"other": {"cluster_job_type": [1]}}), "$.clusters.other.cluster_job_type"),
]


@pytest.mark.parametrize("strict", [False, True], ids=["lenient", "strict"])
@pytest.mark.parametrize(("document", "named"), [case[1:] for case in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_jdl(document: dict[str, Any] | str, named: str, strict: bool) -> None:
    with pytest.raises(InputError) as error:
        parse(document, strict=strict)
    assert error.value.exit_code == 2
    assert named in str(error.value)


# What CiGri 3.2 accepted and cigri's own JDL does not: accepted with one warning, refused with
# strict (tests/compat/ runs CiGri's own files through gridsub).
LENIENT: list[tuple[str, dict[str, Any] | str, str, str]] = [
    ("unknown top-level key", jdl(colour="blue"), "$: unknown key 'colour' ignored", "colour"),
    ("unknown per-cluster key", jdl(clusters={"local": {"speed": 1}}), "$.clusters.local: unknown key 'speed' ignored",
     "$.clusters.local: unknown key 'speed'"),
    ("dimensional_grouping true", jdl(dimensional_grouping=True), "$.dimensional_grouping: ignored",
     "$.clusters.local.dimensional_grouping"),
    ("type CiGri did not know", jdl(type="fast"), "$.type: 'fast' runs best-effort", "$.type"),
    ("output gathering", jdl(clusters={"local": {"output_gathering_method": "scp"}}),
     "$.clusters.local.output_gathering_method: 'scp' ignored", "$.clusters.local.output_gathering_method"),
    ("upper-case key", jdl(NB_JOBS=3, nb_jobs=None), "key 'NB_JOBS' read as 'nb_jobs'", "'NB_JOBS'"),
    ("Ruby escape", '{"name": "c\\$", "exec_file": "/x", "nb_jobs": 1, "clusters": {"local": {}}}',
     "\\$ is not a JSON escape: read as $", "Invalid \\escape"),
    ("duplicate key", '{"name": "a", "name": "b", "exec_file": "/x", "nb_jobs": 1, "clusters": {"local": {}}}',
     "duplicate key 'name': its last value is used", "duplicate key 'name'"),
    ("one unknown cluster of two", jdl(clusters={"local": {}, "mars": {}}), "unknown cluster(s) mars skipped",
     "$.clusters.mars: unknown cluster"),
    ("$HOME in exec_file", jdl(exec_file="$HOME/bin/x"), "exec_file: $HOME expanded", "(refused with --strict)"),
    ("exec_file with arguments", jdl(exec_file="/bin/echo -n"), "exec_file: split into the program '/bin/echo'",
     "(refused with --strict)"),
    (r"\$ in a prologue", jdl(prologue=["cd \\$HOME"]), "prologue: \\$ read as $", "(refused with --strict)"),
]


@pytest.mark.parametrize(("document", "warned", "refused"), [c[1:] for c in LENIENT], ids=[c[0] for c in LENIENT])
def test_cigri_forms_warn_and_strict_refuses_them(document: dict[str, Any] | str, warned: str, refused: str) -> None:
    spec = parse(document)
    assert len(spec.warnings) == 1 and spec.warnings[0].startswith("JDL: ") and warned in spec.warnings[0], \
        spec.warnings
    with pytest.raises(InputError) as error:
        parse(document, strict=True)
    assert refused in str(error.value) and error.value.exit_code == 2


def test_cigri_forms_keep_cigri_meaning() -> None:
    spec = parse('{"NAME": "c", "Exec_File": "\\$HOME/bin/run {CAMPAIGN_ID}", "nb_jobs": 1, "Type": "normal", '
                 '"output_gathering_method": "scp", "prologue": ["cd {HOME}", "echo {OAR_JOB_ID} \\\\$X"], '
                 '"clusters": {"local": {"Walltime": "9"}, "other": {}, "luke": {}}}')
    local, other = spec.clusters["local"], spec.clusters["other"]
    assert spec.name == "c" and set(spec.clusters) == {"local", "other"}
    assert local["exec_file"] == [f"{HOME}/bin/run", "{CAMPAIGN_ID}"] and local["type"] == "normal"
    assert local["walltime"] == 120  # a cluster's key in upper case is ignored, as CiGri ignored it
    assert "output_gathering_method" not in local
    assert local["prologue"] == "cd $HOME\necho $CIGRI_JOB_ID $X" and other["prologue"] == "cd $HOME\necho $OAR_JOB_ID $X"
    assert len(spec.warnings) == 10, spec.warnings  # one per form: the escape and $HOME said once for both clusters


def test_every_problem_is_reported_on_its_own_line() -> None:
    with pytest.raises(InputError) as error:
        parse(jdl(walltime="x", clusters={"local": {"speed": 1}}), strict=True)
    lines = str(error.value).splitlines()
    assert len(lines) == 2
    assert any("$.walltime" in line for line in lines) and any("speed" in line for line in lines)


# --- parameter lines ------------------------------------------------------------------------

@pytest.mark.parametrize(("line", "words"), [
    ("a b  c", ["a", "b", "c"]),
    ("""a "b c" 'd e' f\\ g""", ["a", "b c", "d e", "f g"]),
    ("x $(rm -rf /)", ["x", "$(rm", "-rf", "/)"]),
    ("x `id` $HOME", ["x", "`id`", "$HOME"]),
    ("x a;b ; c", ["x", "a;b", ";", "c"]),
    ("x *.txt ? [ab]", ["x", "*.txt", "?", "[ab]"]),
    ("x #not-a-comment", ["x", "#not-a-comment"]),
    ("x 'it''s' \"$(no)\"", ["x", "its", "$(no)"]),
    ("x\u00a0y z", ["x\u00a0y", "z"]),  # split like a shell, with or without quotes on the line
    ("x\u00a0y 'z'", ["x\u00a0y", "z"]),
])
def test_split_param_is_literal(line: str, words: list[str]) -> None:
    assert split_param(line) == words


def write(tmp_path: Path, content: bytes) -> Path:
    path = tmp_path / "params.txt"
    path.write_bytes(content)
    return path


def names_and_lines(source: ParamSource) -> list[tuple[str, str]]:
    return [(name, line) for _, name, line in iter_params(source)]


def test_file_skips_blank_and_comment_lines(tmp_path: Path) -> None:
    path = write(tmp_path, b"a 1\n\n   \n# comment\n  b  'two words'  \r\nc\n")
    assert names_and_lines(ParamSource(file=path)) == [("a", "a 1"), ("b", "b  'two words'"), ("c", "c")]
    path.write_bytes(b"a 1\n\n# comment\nb 'open\n")  # skipped lines still count
    with pytest.raises(InputError, match=f"{path}:4:"):
        list(iter_params(ParamSource(file=path)))


@pytest.mark.parametrize(("content", "line", "reason"), [
    (b"a 1\nb 2\nc 'unbalanced\n", 3, "No closing quotation"),
    (b"a 1\nb \"x\n", 2, "No closing quotation"),
    (b"a 1\nb \x00\n", 2, "NUL"),
    (b"a 1\nb \xff\xfe\n", 2, "UTF-8"),
    (b"a 1\n" + b"b" * (MAX_LINE_BYTES + 1) + b"\n", 2, "longer than"),
    (b"a 1\n'' x\n", 2, "no task name"),
])
def test_bad_line_names_file_and_line(tmp_path: Path, content: bytes, line: int, reason: str) -> None:
    path = write(tmp_path, content)
    with pytest.raises(InputError, match=reason) as error:
        list(iter_params(ParamSource(file=path)))
    assert f"{path}:{line}:" in str(error.value)
    assert error.value.exit_code == 2


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="absent.txt"):
        list(iter_params(ParamSource(file=tmp_path / "absent.txt")))


def test_inline_params_and_counts() -> None:
    assert names_and_lines(ParamSource(inline=("a 1", "", "# no", " b "))) == [("a", "a 1"), ("b", "b")]
    with pytest.raises(InputError, match=r"\$\.params\[1\]"):
        list(iter_params(ParamSource(inline=("a", "b 'open"))))
    assert names_and_lines(ParamSource(count=3)) == [("0", "0"), ("1", "1"), ("2", "2")]


def peak_while_consuming(path: Path) -> tuple[int, int]:
    """Consume the file's parameters under tracemalloc; return (parameters, peak bytes)."""
    tracemalloc.start()
    try:
        count = sum(1 for _ in iter_params(ParamSource(file=path)))
        return count, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_large_file_is_streamed(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    with path.open("w") as handle:  # about 20 MB: holding it would blow the bound
        for index in range(200_000):
            handle.write(f"task{index:06d} --frame {index} {'x' * 80}\n")
    count, peak = peak_while_consuming(path)
    assert count == 200_000
    assert peak < 20 * 2**20


def test_huge_line_is_rejected_without_reading_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "one-line.txt"
    path.write_bytes(b"x" * (40 * 2**20))
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match=f"{path}:1: line longer"):
            list(iter_params(ParamSource(file=path)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20


def test_resources_in_oar_syntax_and_in_the_shapes_slurm_can_run() -> None:
    """Any OAR request is read on OAR (filters, levels a site defines, ALL, BEST, groups); on
    Slurm only what sbatch can express, refused at gridsub rather than at every submission."""
    clusters = {"local": "local", "oar": "oar", "slurm": "slurm"}
    request = "{gpu='YES'}/host=1/gpu=2+/nodes=1/core=ALL"

    def parse_on(cluster: str, resources: str) -> CampaignSpec:
        return parse_jdl(json.dumps(jdl(resources=resources, clusters={cluster: {}})), known_clusters=clusters,
                         user=USER, base_dir=Path("/base"), default_walltime="00:02:00", default_resources="core=1")

    assert parse_on("oar", request).clusters["oar"]["resources"] == request
    assert parse_on("slurm", "/nodes=2/core=4").clusters["slurm"]["resources"] == "/nodes=2/core=4"
    with pytest.raises(InputError, match=r"\$\.clusters\.slurm\.resources: resources .*Slurm cannot run 'gpu=2'"):
        parse_on("slurm", "/host=1/gpu=2")
