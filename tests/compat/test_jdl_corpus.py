"""CiGri 3.2's JDLs through the real gridsub, each with the behaviour CiGri had for it.

``jdl/upstream/`` holds CiGri's own files verbatim (its README's example, its documentation's
``example.json``, its ``tmp/test1.json``); ``jdl/*.json`` the same shapes made runnable here (no
iRODS, no ``module``). Everything runs as a dedicated Unix user, so that ``{HOME}``, ``~`` and
``$HOME`` are that user's home, with a grid of local clusters named as CiGri's sites named
theirs: accepted files run to completion, and what the program, its environment and the
prologue saw is checked. Files CiGri refused are refused, and ``--strict`` refuses every
leniency.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from unix_users import ensure_users, run_as, shared_install

HERE = Path(__file__).parent / "jdl"
USER = "cigri-compat"
pytestmark = pytest.mark.xdist_group(USER)  # one worker: the tests share the user's home
CLUSTERS = ("luke", "froggy", "tchernobyl", "fukushima", "dahu")
RECORDER = """#!/bin/sh
# records what a task saw: its arguments, CiGri's variables, its directory
printf '%s\\n' "$@" > "out.$CIGRI_TASK_NAME.args"
env | grep '^CIGRI_' | sort > "out.$CIGRI_TASK_NAME.env"
pwd > "out.$CIGRI_TASK_NAME.pwd"
"""


@dataclass
class Site:
    """A CiGri site moved to cigri: its user, the user's home, and the grid's commands."""

    home: Path
    bin: Path
    env: dict[str, str]
    work: Path

    def run(self, command: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return run_as(USER, [str(self.bin / command), *args], env=self.env, cwd=self.work, stdin=stdin)

    def gridsub(self, *args: str, expect: int = 0) -> subprocess.CompletedProcess[str]:
        result = self.run("gridsub", *args)
        assert result.returncode == expect, f"gridsub {args}: exit {result.returncode}\n{result.stderr}"
        return result

    def submit(self, name: str, *args: str) -> tuple[int, list[str]]:
        """The campaign id and the warning lines of submitting ``jdl/<name>`` (without the hint
        that no cycle runs: the test runs them itself)."""
        result = self.gridsub("-f", str(self.jdl(name)), "--json", *args)
        return json.loads(result.stdout)["campaign_id"], [line for line in result.stderr.splitlines()
                                                          if "nothing moves until" not in line]

    def jdl(self, name: str) -> Path:
        """A corpus file, copied where the user can read it (the checkout may be under /root)."""
        path = self.work / Path(name).name
        text = (HERE / name).read_text().replace("PARAM_FILE", str(self.home / "povray_params.txt"))
        path.write_text(text)
        return path

    def drain(self, campaign_id: int, timeout: float = 180) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            cycle = self.run("cigri", "cycle")
            assert cycle.returncode == 0, cycle.stderr
            summary = json.loads(self.run("gridstat", "-c", str(campaign_id), "--json").stdout)
            if summary["state"] in ("terminated", "failed", "cancelled"):
                return summary
            assert time.monotonic() < deadline, f"campaign {campaign_id} still {summary['state']}"
            time.sleep(0.2)

    def properties(self, campaign_id: int) -> dict[str, dict[str, Any]]:
        conn = sqlite3.connect(Path(self.env["CIGRI_HOME"]) / "cigri.db")
        try:
            rows = conn.execute("SELECT c.name, p.name, p.value FROM campaign_properties p "
                                "JOIN clusters c ON c.id = p.cluster_id WHERE campaign_id = ?", [campaign_id])
            result: dict[str, dict[str, Any]] = {}
            for cluster, key, value in rows:
                result.setdefault(cluster, {})[key] = json.loads(value)
            return result
        finally:
            conn.close()

    def campaigns(self) -> int:
        conn = sqlite3.connect(Path(self.env["CIGRI_HOME"]) / "cigri.db")
        try:
            return conn.execute("SELECT count(*) FROM campaigns").fetchone()[0]
        finally:
            conn.close()


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    entry = ensure_users((USER,))[0]
    home = Path(entry.pw_dir)
    _empty(home)
    root = Path(tempfile.mkdtemp(prefix="cigri-compat-"))  # pytest's own is private to root
    root.chmod(0o755)
    cigri_home, work = root / "cigri", root / "work"
    for path in (cigri_home, work):
        path.mkdir()
        shutil.chown(path, entry.pw_uid, entry.pw_gid)
    config = root / "cigri.toml"
    config.write_text("".join(f'[clusters.{name}]\nbackend = "local"\nslots = 2\n' for name in CLUSTERS))
    for program in (home / "povray" / "start.bash", home / "cigri-3" / "tmp" / "test1.sh"):
        program.parent.mkdir(parents=True, exist_ok=True)
        program.write_text(RECORDER)
        program.chmod(0o755)
    (home / "povray_params2.txt").write_text("scene1 a\nscene2 b\n")
    (home / "povray_params.txt").write_text("frame1\nframe2\n")
    subprocess.run(["chown", "-R", f"{entry.pw_uid}:{entry.pw_gid}", str(home)], check=True)
    env = {"CIGRI_HOME": str(cigri_home), "CIGRI_CONFIG": str(config), "XDG_CONFIG_HOME": str(root / "xdg")}
    built = Site(home, shared_install(), env, work)
    try:
        yield built
    finally:
        run_as(USER, ["/bin/sh", "-c", 'kill $(cat "$0"/spool/*/pool.lock) 2>/dev/null; true', str(cigri_home)])
        _empty(home)
        shutil.rmtree(root, ignore_errors=True)


def _empty(home: Path) -> None:
    for path in home.iterdir():
        if not path.name.startswith("."):
            shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def variables(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in lines(path))


# --- accepted, with CiGri's meaning, and run to completion ----------------------------------

def test_documentation_example_runs_with_its_macros(site: Site) -> None:
    """doc/documentation/example.json's shape: {HOME}, ~, {CAMPAIGN_ID} and {OAR_JOB_ID} where
    CiGri put them; ceciccluster is gone from the site, so it is skipped."""
    campaign_id, warnings = site.submit("povray.json")
    assert warnings == ["gridsub: warning: " + str(site.work / "povray.json") + ": unknown cluster(s) ceciccluster "
                        "skipped, as CiGri skipped them (known: dahu, froggy, fukushima, luke, tchernobyl; remove them)"]
    summary = site.drain(campaign_id)
    assert summary["state"] == "terminated" and summary["tasks"]["terminated"] == 2
    directory = site.home / "povray" / str(campaign_id)
    assert lines(directory / "out.scene1.args") == ["scene1", "a"]
    assert lines(directory / "out.scene2.pwd") == [str(directory)]
    seen = variables(directory / "out.scene2.env")
    assert seen["CIGRI_CAMPAIGN_ID"] == str(campaign_id) and seen["CIGRI_TASK_NAME"] == "scene2"
    assert seen["CIGRI_WORKING_DIRECTORY"] == str(directory) and seen["CIGRI_JOB_ID"] == seen["CIGRI_JOBID"]
    assert lines(directory / "prologue.job_id")[0].isdigit()  # {OAR_JOB_ID}: the job id the cluster gave
    assert lines(directory / "prologue.pwd") == [str(site.home)]  # cd {HOME}
    assert (directory / "epilogue.done").exists()
    extend_with_cigri_json_array(site, campaign_id, directory)


def extend_with_cigri_json_array(site: Site, campaign_id: int, directory: Path) -> None:
    """gridsub -c N -F reads CiGri's JSON array, not a task named '[scene3'."""
    array = site.work / "more.json"
    array.write_text('["scene3 c", "scene4 d"]\n')
    refused = site.gridsub("-c", str(campaign_id), "-F", str(array), "--strict", expect=2)
    assert "read as CiGri's JSON array of parameters" in refused.stderr
    added = site.gridsub("-c", str(campaign_id), "-F", str(array))
    assert added.stdout == f"Jobs successfully added to campaign {campaign_id} (2 tasks)\n"
    assert added.stderr.splitlines()[0] == f"gridsub: warning: {array}: read as CiGri's JSON array of parameters " \
                                           "(cigri's form: one parameter per line)"
    assert site.drain(campaign_id)["tasks"]["terminated"] == 4
    assert lines(directory / "out.scene4.args") == ["scene4", "d"]


def test_readme_example_runs_with_rubys_escapes(site: Site) -> None:
    """CiGri's README: \\$HOME in JSON (Ruby's reading), \\\\$ in prologue lines (OAR 2.5's second
    shell), test mode, and three of its four clusters gone."""
    campaign_id, warnings = site.submit("readme.json")
    source = f"gridsub: warning: {site.work / 'readme.json'}: "
    assert warnings == [source + line for line in (
        "\\$ is not a JSON escape: read as $, as CiGri's Ruby parser did (write the character alone, or \\\\ for "
        "a backslash)",
        "unknown cluster(s) gofree, fontaine, fostino skipped, as CiGri skipped them (known: dahu, froggy, "
        "fukushima, luke, tchernobyl; remove them)",
        "prologue: \\$ read as $, as OAR 2.5's second shell read it under CiGri (write $)",
        "exec_file: $HOME expanded as CiGri's shell did (write {HOME} or {CAMPAIGN_ID})",
        "exec_directory: $HOME expanded as CiGri's shell did (write {HOME} or {CAMPAIGN_ID})")]
    assert site.properties(campaign_id)["froggy"]["exec_file"] == f"{site.home}/povray/start.bash"
    summary = site.drain(campaign_id)
    assert summary["state"] == "terminated" and summary["tasks"]["terminated"] == 2
    assert lines(site.home / "povray" / "out.frame2.args") == ["frame2"]
    assert (site.home / "povray_results" / str(campaign_id)).is_dir()  # $CIGRI_CAMPAIGN_ID in the prologue


def test_cigris_test_file_runs_with_upper_case_keys_on_two_clusters(site: Site) -> None:
    """tmp/test1.json's shape: $HOME in exec_file, a cluster's own prologue over the global one,
    max_jobs as a string, keys in upper case, output_gathering_method stored and ignored."""
    campaign_id, warnings = site.submit("test1.json")
    source = f"gridsub: warning: {site.work / 'test1.json'}: "
    assert warnings == [source + line for line in (
        "key 'NAME' read as 'name', as CiGri did (write it in lower case)",
        "key 'Resources' read as 'resources', as CiGri did (write it in lower case)",
        "$.output_gathering_method: 'scp' ignored: CiGri stored it and did nothing with it (remove it)",
        "exec_file: $HOME expanded as CiGri's shell did (write {HOME} or {CAMPAIGN_ID})")]
    stored = site.properties(campaign_id)
    assert stored["fukushima"]["max_jobs"] == 3 and stored["tchernobyl"]["walltime"] == 300
    summary = site.drain(campaign_id)
    assert summary["state"] == "terminated" and summary["tasks"]["terminated"] == 5
    assert lines(site.home / "out.param3.args") == ["param3", "3"]
    workdir = site.home / "workdir"
    for name in (f"tchernobyl_prologue_{campaign_id}_campaign_works", "epilogue_tchernobyl_works", "prologue_works"):
        assert (workdir / name).exists(), name


def test_exec_file_with_arguments_and_stored_only_keys(site: Site) -> None:
    """A program with arguments in exec_file, as CiGri's shell split it; keys CiGri ignored."""
    campaign_id, warnings = site.submit("arguments.json")
    assert [w.split(": ", 3)[-1] for w in warnings] == [
        "$.checkpointing_type: 'BLCR' ignored: CiGri stored it and did nothing with it (remove it)",
        "$.clusters.luke: key 'Walltime' ignored, as CiGri ignored a cluster's key in upper case (write it 'walltime')",
        "$.dimensional_grouping: ignored, as CiGri ignored it: one task per job (remove it)",
        "exec_file: split into the program '" + f"{site.home}/povray/start.bash' and 2 argument(s), as CiGri's shell did (put "
        "a program's arguments in a wrapper script, or in each parameter line)"]
    summary = site.drain(campaign_id)
    assert summary["state"] == "terminated" and summary["tasks"]["terminated"] == 3
    assert lines(site.home / "povray" / f"args-{campaign_id}" / "out.2.args") == ["--campaign", str(campaign_id), "2"]


# --- CiGri's own files, verbatim ---------------------------------------------------------------

def test_upstream_files_are_accepted_as_cigri_read_them(site: Site) -> None:
    example, warnings = site.submit("upstream/example.json")
    assert len(warnings) == 1 and "unknown cluster(s) ceciccluster skipped" in warnings[0]
    luke = site.properties(example)["luke"]
    assert luke["exec_file"] == f"{site.home}/povray/start.bash"
    assert luke["exec_directory"] == f"{site.home}/povray/{example}"
    assert luke["prologue"].splitlines()[3:6] == [f"mkdir -p $HOME/povray/{example}",
                                                  f"secure_imkdir -p povray_results/{example}", "cd $HOME"]
    assert luke["walltime"] == 300 and luke["properties"] == "host != 'luke20'" and luke["project"] == "test"
    test1, warnings = site.submit("upstream/tmp-test1.json")
    assert [w.split(": ", 3)[-1] for w in warnings] == [
        "\\$ is not a JSON escape: read as $, as CiGri's Ruby parser did (write the character alone, or \\\\ for "
        "a backslash)",
        "exec_file: $HOME expanded as CiGri's shell did (write {HOME} or {CAMPAIGN_ID})"]
    stored = site.properties(test1)
    assert stored["tchernobyl"]["prologue"].splitlines()[-1] == "touch tchernobyl_prologue_$1_campaign_works"
    assert stored["fukushima"]["prologue"] == "mkdir $HOME/workdir\ncd $HOME/workdir\ntouch prologue_works"
    site.run("griddel", str(example))  # their programs need CiGri's site (iRODS, modules): not run here
    site.run("griddel", str(test1))


def test_readme_verbatim_is_refused_for_its_parameter_file_as_cigri_refused_it(site: Site) -> None:
    refused = site.gridsub("-f", str(site.jdl("upstream/README.json")), expect=2)
    assert "/home/deamon/povray_params.txt: No such file or directory" in refused.stderr


# --- refused, as CiGri refused them -----------------------------------------------------------

REFUSED = [  # from CiGri's spec/3_jdl-parser and its parser's checks
    ('{"nb_jobs":1,"clusters":{"luke":{"exec_file":"e"}}}', "missing mandatory key 'name'"),
    ('{"name":"n", "nb_jobs":1}', "missing mandatory key 'clusters'"),
    ('{"name":"n", "nb_jobs":1, "clusters":{"luke":{}}}', "missing mandatory key 'exec_file'"),
    ('{"name":"n", "nb_jobs":1, "clusters":{}}', "$.clusters"),
    ('{"name":"n","clusters":{"luke":{"exec_file":"e"}}}', "exactly one of param_file, nb_jobs, params"),
    ('{"name":"n","jobs_type":"desktop_computing","clusters":{"luke":{"exec_file":"e"}}}', "desktop_computing"),
    ('{"name":"n","nb_jobs":1,"clusters":{"mars":{"exec_file":"e"}}}', "$.clusters.mars: unknown cluster"),
    ('{"name":"n","param_file":"~/nowhere.txt","clusters":{"luke":{"exec_file":"e"}}}', "No such file"),
    ('{"name": "n", ', "not valid JSON"),
]


@pytest.mark.parametrize(("text", "said"), REFUSED, ids=[said for _, said in REFUSED])
def test_what_cigri_refused_stays_refused(site: Site, text: str, said: str) -> None:
    before = site.campaigns()
    result = site.run("gridsub", "-f", "-", stdin=text)
    assert result.returncode == 2 and said in result.stderr and "warning" not in result.stderr, result.stderr
    assert site.campaigns() == before


@pytest.mark.parametrize("name", ["povray.json", "readme.json", "test1.json", "arguments.json",
                                  "upstream/example.json"])
def test_strict_refuses_every_leniency(site: Site, name: str) -> None:
    before = site.campaigns()
    result = site.gridsub("-f", str(site.jdl(name)), "--strict", expect=2)
    assert result.stderr.startswith("gridsub: ") and "warning" not in result.stderr
    assert site.campaigns() == before
