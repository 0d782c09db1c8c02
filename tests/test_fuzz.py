"""Property-based fuzzing of everything a user or an admin writes: JDLs, parameter files, configuration.

The property is always the same: the input is accepted whole or refused with an
:class:`InputError` whose every line names where the problem is; nothing else escapes (no
traceback), and a refused submission writes nothing. A few generated JDLs also go through the
real ``gridsub`` to check the exit status 2 and the stderr lines. ``CASES`` counts the
examples tried; ``pytest -s tests/test_fuzz.py`` prints the total.
"""

from __future__ import annotations

import collections
import json
import math
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cigri.jdl import iter_params, parse_jdl
from cigri.jdl.params import MAX_LINE_BYTES
from cigri.jdl.parser import ParamSource, cluster_keys
from harness import BIN
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cigri import api, config
from cigri.errors import InputError
from cigri.grid import Grid, open_grid
from cigri.users import acting_user

CASES: collections.Counter[str] = collections.Counter()
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                         HealthCheck.function_scoped_fixture])
CLUSTERS = {"local": "local", "other": "oar"}

# --- strategies ------------------------------------------------------------------------------

nasty_text = st.one_of(
    st.text(),
    st.text(alphabet=st.characters(codec="utf-8")),
    st.sampled_from(["", " ", "\x00", "a\x00b", "\n", "\r\n", "~", "{HOME}", "{CAMPAIGN_ID}", "$(id)", "`id`",
                     "'", '"', "\\", "-", "--help", "00:00:00", "0", "-1", "1e9", "true", "TRUE", "None",
                     "9" * 40, "x" * 70_000, "\ud800", "é日本", "\u202e"]),
)
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True),
                         nasty_text)
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(nasty_text, inner, max_size=4)), max_leaves=12)
jdl_keys = st.sampled_from([*cluster_keys(), "name", "clusters", "param_file", "nb_jobs", "params", "jobs_type"])
small_counts = st.one_of(st.integers(min_value=-3, max_value=50), st.sampled_from(["3", "03", "0", "", "1.0", 2.0]))


PLAUSIBLE = [True, False, "true", "false", "yes", 1, 5, "3", "0", 0, -1, "00:01:00", "10:00", 600, "1:2:3:4",
             "normal", "best-effort", "besteffort", "nightly", "None", "core=1", "/tmp", "~/x", "{HOME}/{CAMPAIGN_ID}",
             "", ["echo hi"], "echo hi", "desktop_computing"]
field_values = st.one_of(st.sampled_from(PLAUSIBLE), json_values)
param_words = st.text(alphabet="ab1 '\"\\$;*\t\x00é", min_size=1, max_size=8)


@st.composite
def jdl_documents(draw: st.DrawFn) -> Any:
    """A valid JDL with a few keys changed to plausible or random values; sometimes any JSON at all."""
    if draw(st.integers(0, 19)) == 0:
        return draw(json_values)
    document: dict[str, Any] = {"name": "fuzz", "exec_file": "/bin/true", "clusters": {"local": {}}}
    source = draw(st.sampled_from(["params", "params", "nb_jobs", "none", "both"]))
    if source in ("params", "both"):
        line = param_words.map(lambda w: f"t{w}")
        document["params"] = draw(st.lists(st.one_of(line, line, line, nasty_text), max_size=6))
    if source in ("nb_jobs", "both"):
        document["nb_jobs"] = draw(small_counts)
    for _ in range(draw(st.integers(0, 3))):
        key = draw(jdl_keys)
        if key in ("nb_jobs", "params"):  # a huge count is a valid, endless campaign
            continue
        clusters = document["clusters"]
        if key in ("name", "clusters") or not isinstance(clusters, dict) or draw(st.booleans()):
            document[key] = draw(field_values)
        else:
            clusters.setdefault(draw(st.sampled_from([*CLUSTERS, "nowhere"])), {})[key] = draw(field_values)
    return document


def render(document: Any) -> str:
    return json.dumps(document, allow_nan=True)


# --- fixtures --------------------------------------------------------------------------------

@pytest.fixture(scope="module", autouse=True)
def report_cases() -> Iterator[None]:
    """After the module: how many generated cases were tried (shown with ``-s``)."""
    yield
    tried = sum(v for k, v in CASES.items() if k not in ("accepted", "refused"))
    print(f"\nfuzz cases tried: {tried} ({dict(CASES)})")


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grid]:
    home = tmp_path_factory.mktemp("fuzz-home")
    conf = home / "cigri.toml"
    conf.write_text('[clusters.local]\nbackend = "local"\nslots = 1\n[clusters.other]\nbackend = "local"\n')
    opened = open_grid(config.load(environ={"CIGRI_HOME": str(home), "CIGRI_CONFIG": str(conf)}))
    yield opened
    opened.close()


def _counts(grid: Grid) -> tuple[int, ...]:
    return tuple(grid.db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                 for t in ("campaigns", "campaign_properties", "tasks", "jobs", "events"))


def _assert_named(error: InputError, prefixes: tuple[str, ...]) -> None:
    lines = str(error).split("\n")
    assert lines and all(line.startswith(prefixes) and line.strip() for line in lines), str(error)[:500]


def _submit(grid: Grid, text: str, base: Path, source: str = "fuzz.json") -> None:
    """Submit; on refusal, check the message and that the database did not change."""
    before = _counts(grid)
    try:
        campaign_id, count = api.submit(grid, text, base_dir=base, user=acting_user(), source=source)
    except InputError as error:
        _assert_named(error, (f"{source}:", f"{source}: ", str(base), "$", "nb_jobs", "param_file"))
        assert _counts(grid) == before
        CASES["refused"] += 1
        return
    tasks = grid.db.execute("SELECT count(*) FROM tasks WHERE campaign_id = ?", [campaign_id]).fetchone()[0]
    assert count == tasks > 0
    CASES["accepted"] += 1


# --- the JDL -------------------------------------------------------------------------------

@FUZZ
@given(document=jdl_documents())
@example(document={"name": "x", "clusters": {"local": {}}, "exec_file": "/bin/true", "nb_jobs": 3, "walltime": 1.0})
@example(document={"name": "x", "clusters": {"local": {}}, "exec_file": "/bin/true", "nb_jobs": 1e300})
@example(document={"name": "x", "clusters": {"local": {}}, "exec_file": "/bin/true", "nb_jobs": 2.0,
                   "max_jobs": 1.5})
@example(document={"name": "x", "clusters": {"local": {"walltime": "99999999:99:99"}}, "exec_file": "/bin/true",
                   "params": ["a", "b\x00c"]})
def test_any_jdl_is_a_campaign_or_named_errors(grid: Grid, tmp_path_factory: pytest.TempPathFactory,
                                               document: Any) -> None:
    CASES["jdl"] += 1
    _submit(grid, render(document), tmp_path_factory.getbasetemp())


@FUZZ
@given(text=st.one_of(st.text(), st.binary().map(lambda b: b.decode("utf-8", "surrogateescape")),
                      st.sampled_from(["[" * 100_000, "{" * 5000 + "}" * 5000, "1" * 5000, '{"name": ' + "9" * 5000 + "}",
                                       "\x00", "", "null", "[]", "NaN", '{"name": "x"}{"name": "y"}'])))
def test_any_text_as_a_jdl_is_refused_in_named_lines(text: str) -> None:
    CASES["jdl-text"] += 1
    try:
        parse_jdl(text, known_clusters=CLUSTERS, user=acting_user(), base_dir=Path("/nonexistent"),
                  default_walltime="01:00:00", default_resources="core=1", source="text.json")
    except InputError as error:
        _assert_named(error, ("text.json: ",))


# --- parameter files ------------------------------------------------------------------------

param_lines = st.one_of(
    st.text(max_size=80),
    st.sampled_from(["# comment", "", "   ", "a 'unclosed", 'b "x', "c \\", "dup", "dup", "\x00x", "x" * MAX_LINE_BYTES,
                     "e $(id) `id` ; && | *", "-n", "'' empty name", "\r", "\x0c", "\u2028 line sep"]),
)


@st.composite
def param_files(draw: st.DrawFn) -> bytes:
    lines = [line.encode("utf-8", "surrogatepass") for line in draw(st.lists(param_lines, max_size=12))]
    lines += draw(st.lists(st.binary(max_size=20), max_size=2))  # invalid UTF-8, lone bytes
    lines = draw(st.permutations(lines))
    ending = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    return ending.join(lines) + draw(st.sampled_from([b"", ending]))


@FUZZ
@given(content=param_files())
@example(content=b"a\n" + b"b" * (MAX_LINE_BYTES + 10) + b"\n")
@example(content=b"a\xff\xfe\n")
@example(content=b"x" * (MAX_LINE_BYTES * 3))
def test_any_param_file_is_tasks_or_a_named_error(grid: Grid, tmp_path_factory: pytest.TempPathFactory,
                                                  content: bytes) -> None:
    CASES["params"] += 1
    directory = tmp_path_factory.mktemp("params", numbered=True)
    path = directory / "params.txt"
    path.write_bytes(content)
    try:
        tasks = list(iter_params(ParamSource(file=path)))
    except InputError as error:
        _assert_named(error, (f"{path}:",))
        tasks = None
    if tasks is not None:
        for _, name, line in tasks:
            assert name and "\x00" not in line and line == line.strip()
    jdl = json.dumps({"name": "p", "clusters": {"local": {}}, "exec_file": "/bin/true", "param_file": str(path)})
    _submit(grid, jdl, directory)


@pytest.mark.slow
def test_a_million_lines_one_of_them_bad_write_nothing(grid: Grid, tmp_path: Path) -> None:
    path = tmp_path / "million.txt"
    with path.open("w") as out:
        out.write("".join(f"p{i} {i}\n" for i in range(999_999)))
        out.write("p5 duplicate\n")
    before = _counts(grid)
    with pytest.raises(InputError) as refused:
        api.submit(grid, json.dumps({"name": "m", "clusters": {"local": {}}, "exec_file": "/bin/true",
                                     "param_file": str(path)}), base_dir=tmp_path, user=acting_user())
    assert str(refused.value) == (f"{path}:1000000: duplicate task name 'p5' (first at {path}:6; "
                                  "the first word of a line names its task)")
    assert _counts(grid) == before
    CASES["params"] += 1


# --- the configuration --------------------------------------------------------------------

def _toml(value: Any) -> str:
    """A TOML rendering of a scalar or an array (json's string escapes are TOML's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)


config_keys = st.sampled_from(["home", "cycle_period", "default_walltime", "max_attempts", "max_resubmit",
                               "stderr_tail_lines", "log_level", "log_format", "tap_initial", "tap_factor",
                               "tap_max", "backend", "slots", "max_waiting", "transport", "host", "port",
                               "timeout", "base_url", "api_chunk_size", "unknown"])
toml_values = st.one_of(st.booleans(), st.integers(), st.floats(), st.text(max_size=20),
                        st.sampled_from(["local", "slurm", "oar", "ssh", "rest", "json", "text", "debug", "01:00:00"]),
                        st.lists(st.integers(), max_size=2))
sections = st.one_of(st.sampled_from(["cigri", "runner", "clusters.local", "clusters.x", "clusters", "notify",
                                      'clusters."a b"', "clusters.../up", "metascheduler", "bogus"]),
                     st.text(alphabet="abcxyz.", min_size=1, max_size=8))


@st.composite
def toml_files(draw: st.DrawFn) -> str:
    if draw(st.integers(0, 9)) == 0:
        return draw(st.text())
    parts = []
    for section in draw(st.lists(sections, max_size=4)):
        parts.append(f"[{section}]")
        for key, value in draw(st.dictionaries(config_keys, toml_values, max_size=4)).items():
            parts.append(f"{key} = {_toml(value)}")
    return "\n".join(parts) + "\n"


@FUZZ
@given(text=toml_files(), variables=st.dictionaries(
    st.sampled_from(["CIGRI_CYCLE_PERIOD", "CIGRI_MAX_ATTEMPTS", "CIGRI_RUNNER_TAP_MAX", "CIGRI_LOG_LEVEL",
                     "CIGRI_DEFAULT_WALLTIME", "CIGRI_RUNNER_TAP_FACTOR"]),
    st.one_of(st.text(alphabet=st.characters(exclude_characters="\x00"), max_size=10),
              st.sampled_from(["nan", "inf", "-inf", "1e400", "0", "-1", "5", "1.5"])), max_size=2))
@example(text="[cigri]\ncycle_period = inf\n", variables={})
@example(text="[clusters.x]\nbackend = \"local\"\nslots = nan\n", variables={})
@example(text="[clusters.x]\nbackend = \"slurm\"\ntransport = \"rest\"\nbase_url = \"http://h\"\ntimeout = nan\n",
         variables={})
@example(text="[clusters.\"../../up\"]\nbackend = \"local\"\n", variables={})
@example(text="", variables={"CIGRI_CYCLE_PERIOD": "inf"})
def test_any_configuration_loads_or_names_its_key(tmp_path_factory: pytest.TempPathFactory, text: str,
                                                  variables: dict[str, str]) -> None:
    CASES["config"] += 1
    path = tmp_path_factory.mktemp("conf", numbered=True) / "cigri.toml"
    path.write_text(text, errors="surrogatepass")
    environ = {"CIGRI_CONFIG": str(path), "CIGRI_HOME": str(path.parent / "home"), **variables}
    try:
        loaded = config.load(environ=environ)
    except InputError as error:
        assert "\n" not in str(error) and str(error).strip(), str(error)
        return
    assert math.isfinite(loaded.settings.cycle_period) and loaded.settings.cycle_period > 0
    for cluster in loaded.clusters:
        assert "/" not in cluster.name and cluster.name not in (".", ".."), cluster.name
        for value in cluster.options.values():
            assert not isinstance(value, float) or math.isfinite(value), cluster.options


# --- through the real command -------------------------------------------------------------

@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=jdl_documents())
def test_gridsub_exits_2_with_one_line_per_problem(tmp_path_factory: pytest.TempPathFactory, document: Any) -> None:
    CASES["gridsub"] += 1
    directory = tmp_path_factory.mktemp("gridsub", numbered=True)
    (directory / "cigri.toml").write_text('[clusters.local]\nbackend = "local"\n[clusters.other]\nbackend = "local"\n')
    jdl = directory / "fuzz.json"
    jdl.write_text(render(document), errors="surrogatepass")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CIGRI_")}
    env.update(CIGRI_HOME=str(directory / "home"), CIGRI_CONFIG=str(directory / "cigri.toml"), NO_COLOR="1")
    result = subprocess.run([str(BIN / "gridsub"), "-f", str(jdl), "--json"], env=env, cwd=directory,
                            capture_output=True, text=True, timeout=60, check=False)
    assert "Traceback" not in result.stderr
    if result.returncode == 0:
        assert json.loads(result.stdout)["tasks"] > 0
        return
    assert result.returncode == 2 and result.stdout == "", (result.returncode, result.stderr)
    assert result.stderr and all(line.startswith("gridsub: ") for line in result.stderr.splitlines())
    database = directory / "home" / "cigri.db"
    if database.exists():  # refused before the grid was opened: nothing written at all
        conn = sqlite3.connect(database)
        assert conn.execute("SELECT count(*) FROM campaigns").fetchone() == (0,)
        conn.close()
