"""OAR property expressions and resource filters (issue #33): OAR 2.5 runs a campaign's
``properties`` (``oarsub -p``) and the ``{…}`` of its ``resources`` as SQL in its database, so
cigri sends only what parses in the grammar of :mod:`cigri.backends.oar.expressions`.

The grammar on OAR's and CiGri's own examples and on SQL of an attacker's kind; gridsub, in
direct mode and through a real server, refusing with one line and writing nothing; the OAR
dialect refusing a stored hostile value before anything is sent; and, on the real OAR cluster
over SSH and REST, a campaign with such expressions running while hostile ones never reach OAR.
"""

from __future__ import annotations

import getpass
import json
import secrets
import shlex
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from harness import Cigri, front_end, marker_exec_dir, runs_per_task, wait_for
from service import started
from test_multi_cluster import use_clusters
from test_oar_dialect import spec
from test_startup import loaded

from cigri.backends.oar import OARBackend
from cigri.backends.oar.batch import build
from cigri.backends.oar.expressions import MAX_DEPTH, MAX_LENGTH, check_properties, check_resource_filters
from cigri.errors import InputError, SubmissionRefused
from cigri.jdl import compat, parse_jdl

CORPUS = Path(__file__).parent / "compat" / "jdl"
EXAMPLES = Path(__file__).parent.parent / "jdl" / "examples"
# An OAR cluster that answers nothing: what gridsub checks needs no cluster.
UNREACHABLE_OAR = '[clusters.oar]\nbackend = "oar"\ntransport = "ssh"\nhost = "127.0.0.1"\nport = 1\nuser = "nobody"\n'

# From OAR 2.5's documentation (oarsub(1), its use cases, its FAQ) and cigri's.
DOCUMENTED_PROPERTIES = [
    "switch = 'sw1'", "not host like 'nodename.%'", "switch = 'sw3' or switch = 'sw5'", "cluster='azur'",
    "memnode=4096 and ib10g='YES'", "not host like 'gdx-45.%'", "mem > 64", "mem < 48", "nbcore=2",
    "gpu='YES'", "a='1' OR b='2'", "host = 'localhost' AND cpu='0'", "(core = '1')", "core > 3",
    "network_address IN ('node-1', 'node-2')", "host NOT IN ('a','b')", "gpu_model IS NOT NULL",
    "gpu_model is null", "mem BETWEEN 2048 AND 8192 AND ib <> 'NO'", "NOT (cluster = 'a' OR cluster = 'b')",
    "cputype != 'it''s'", "temperature >= -10.5", "Cluster = 'Dahu' And Not Host Like 'dahu-3%'",
    "\tposition = 3", "label = 'é €'", "host NOT IN ('node-3', 'node-7') AND (gpu = 'YES' OR mem >= 65536)",
]
DOCUMENTED_RESOURCES = [
    "{mem > 64}/host=1+{mem < 48}/host=3", "{memnode=4096 and ib10g='YES'}/cluster=1/nodes=2/core=1+{nbcore=2}"
    "/switch=1/nodes=2/cpu=1", "{cluster = 'dahu'}/host=1/core=4", "/nodes=10/cpu=3", "/cluster=1/nodes=15/core=1", "core=1", "{x = '{'}/core=1",
]
# SQL of an attacker's kind, and what the refusal says of it.
HOSTILE_PROPERTIES = [
    ("1=1) OR (SELECT 1 FROM pg_sleep(5))", "')' at character 4 where AND, OR or the end was expected"),
    ("host = 'a') OR ('m' = 'm'", "')' at character 11"),
    ("1=1 -- the rest", "'-' at character 5 is not allowed"),
    ("1=1 /* the rest */", "'/' at character 5 is not allowed"),
    ("1=1; DROP TABLE jobs", "';' at character 4 is not allowed"),
    ("host = (SELECT 'x')", "'(' at character 8 where a property name, a number or a quoted string"),
    ("host IN (SELECT host FROM resources)", "'SELECT' at character 10 where a number or a quoted string"),
    ("EXISTS (SELECT 1)", "'(' at character 8 where a comparison"),
    ("host = pg_sleep(5)", "'(' at character 16 where AND, OR or the end"),
    ("host = current_user", "'current_user' at character 8 is a reserved word of SQL"),
    ("user = 'root'", "'user' at character 1 is a reserved word of SQL"),
    ("(host = 'a'", "the end where AND, OR or ')' was expected"),
    ("host = 'a')", "')' at character 11"),
    ("host = 'a", "the string at character 8 has no closing quote"),
    ("host = 'a\\' OR 1=1 -- '", "the string at character 8 has no closing quote, or holds a backslash"),
    ("host = 'a' || 'b'", "'|' at character 12 is not allowed"),
    ("mem = '1'::int", "':' at character 10 is not allowed"),
    ("host = E'\\x41'", "the string at character 9 has no closing quote, or holds a backslash"),
    ("host = E'A'", "\"'A'\" at character 9 where AND, OR or the end was expected"),
    ('host = "a"', "'\"' at character 8 is not allowed"),
    ("host = $$a$$", "'$' at character 8 is not allowed"),
    ("host = `id`", "'`' at character 8 is not allowed"),
    ("mem = 1e9", "the number at character 7 is not digits"),
    ("mem = 1and host = 'a'", "the number at character 7"),
    ("mem = 1 - 1", "'-' at character 9 is not allowed"),
    ("resources.host = 'a'", "'.' at character 10 is not allowed"),
    ("host ~ 'a'", "'~' at character 6 is not allowed"),
    ("host = 'a'\nOR 1=1", "'\\n' at character 11 is not allowed"),
    ("host", "the end where a comparison"),
    ("host IN ()", "')' at character 10 where a number or a quoted string"),
    ("mem = 1 XOR 1=1", "'XOR' at character 9"),
    ("NOT " * (MAX_DEPTH + 1) + "mem = 1", f"more than {MAX_DEPTH} parentheses or NOTs"),
    ("(" * (MAX_DEPTH + 1) + "mem = 1" + ")" * (MAX_DEPTH + 1), f"more than {MAX_DEPTH} parentheses"),
    ("host IN (" + ", ".join(f"'node-{i:04d}'" for i in range(300)) + ")", f"longer than {MAX_LENGTH:,} characters"),
]
HOSTILE_RESOURCES = [
    ("{1=1) OR (SELECT 1 FROM pg_sleep(5))}/core=1", "the filter at character 1: not an OAR property expression: "
                                                     "')' at character 4"),
    ("{host = '}'}/core=1", "the filter at character 1: not an OAR property expression: the string at character 8"),
    ("core=1+{mem > 1 OR pg_sleep(5) IS NULL}/host=1", "the filter at character 8: not an OAR property expression: "
                                                       "'(' at character 20"),
    ("{mem > 1/core=1", "the filter at character 1 has no closing '}'"),
    ("{}/core=1", "the filter at character 1: not an OAR property expression: the end"),
    ("core={1=1}1", "'{' at character 6: a filter {…} comes first in a group"),
    ("{mem > 1}/core=1/{1=1}", "'{' at character 18: a filter {…} comes first in a group"),
]


# --- the grammar ---------------------------------------------------------------------------

@pytest.mark.parametrize("expression", DOCUMENTED_PROPERTIES)
def test_documented_property_expressions_are_accepted(expression: str) -> None:
    check_properties(expression)


@pytest.mark.parametrize("request_text", DOCUMENTED_RESOURCES)
def test_documented_resource_requests_are_accepted(request_text: str) -> None:
    check_resource_filters(request_text)


@pytest.mark.parametrize(("expression", "said"), HOSTILE_PROPERTIES, ids=[h[0][:40] for h in HOSTILE_PROPERTIES])
def test_hostile_property_expressions_are_refused_saying_where(expression: str, said: str) -> None:
    with pytest.raises(ValueError) as refused:
        check_properties(expression)
    assert str(refused.value).startswith("not an OAR property expression: ") and said in str(refused.value)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(("request_text", "said"), HOSTILE_RESOURCES, ids=[h[0] for h in HOSTILE_RESOURCES])
def test_hostile_resource_filters_are_refused_saying_where(request_text: str, said: str) -> None:
    with pytest.raises(ValueError) as refused:
        check_resource_filters(request_text)
    assert said in str(refused.value)


def test_limits_are_what_the_module_says() -> None:
    check_properties("(" * MAX_DEPTH + "mem = 1" + ")" * MAX_DEPTH)
    check_properties("NOT " * MAX_DEPTH + "mem = 1")
    check_properties("host = '" + "a" * (MAX_LENGTH - 10) + "'")
    with pytest.raises(ValueError, match="longer than"):
        check_resource_filters("{host = '" + "a" * MAX_LENGTH + "'}/core=1")


# --- gridsub: the JDL's per-cluster check ----------------------------------------------------

def parse(document: dict[str, Any], clusters: dict[str, str]) -> None:
    parse_jdl(json.dumps(document), known_clusters=clusters, user=getpass.getuser(), base_dir=Path("/"),
              default_walltime="01:00:00", default_resources="core=1")


def test_the_cigri_jdl_corpus_is_refused_for_nothing_more_on_oar() -> None:
    """Every JDL of CiGri's corpus (and cigri's example), its clusters made OAR's: refused for
    what it was refused on local clusters, never for its properties or resources."""
    seen = Counter[str]()
    for path in sorted([*CORPUS.rglob("*.json"), *EXAMPLES.glob("*.json")]):
        document = compat.loads(path.read_text(), compat.Warnings(path.name))
        for settings in [document, *document.get("clusters", {}).values()]:
            seen.update(key.lower() for key, value in settings.items()
                        if key.lower() in ("properties", "resources") and value.strip())
        outcomes = []
        for backend in ("local", "oar"):
            try:
                parse(document, {name: backend for name in document["clusters"]})
                outcomes.append("accepted")
            except InputError as error:
                outcomes.append(str(error))
        assert outcomes[1] == outcomes[0], path
    assert seen["properties"] >= 2 and seen["resources"] >= 5  # the corpus still holds what this test is about


@pytest.mark.parametrize(("where", "document"), [
    ("$.clusters.oar.properties", {"clusters": {"oar": {"properties": HOSTILE_PROPERTIES[0][0]}}}),
    ("$.clusters.oar.properties", {"properties": HOSTILE_PROPERTIES[1][0], "clusters": {"oar": {}}}),
    ("$.clusters.oar.resources", {"clusters": {"oar": {"resources": HOSTILE_RESOURCES[0][0]}}}),
    ("$.clusters.oar.resources", {"resources": HOSTILE_RESOURCES[2][0], "clusters": {"oar": {}}}),
])
def test_gridsub_refuses_each_in_one_line_naming_the_key_and_cluster(cigri: Cigri, where: str,
                                                                     document: dict[str, Any]) -> None:
    """Direct mode: exit 2, one line naming the key and the cluster, no campaign written."""
    cigri.config.write_text(UNREACHABLE_OAR)
    jdl = cigri.tmp / "hostile.json"
    jdl.write_text(json.dumps({"name": "hostile", "exec_file": "/bin/true", "nb_jobs": 1, **document}))
    refused = cigri.run("gridsub", "-f", str(jdl), expect=2)
    assert refused.stderr.count("\n") == 1 and f"{where}: " in refused.stderr, refused.stderr
    assert "not an OAR property expression" in refused.stderr
    assert not (cigri.home / "cigri.db").exists() or cigri.db_counts()["campaigns"] == 0


def test_gridsub_checks_them_without_loading_the_transports(cigri: Cigri) -> None:
    """The OAR dialect's checks come without its transports (httpx, paramiko): a start is most
    of what a submission costs."""
    cigri.config.write_text(UNREACHABLE_OAR)
    jdl = cigri.jdl("light", exec_file="/bin/true", params=["a"], clusters={"oar": {"properties": "gpu = 'YES'"}})
    modules = loaded(cigri, "gridsub", "-f", str(jdl))
    assert "cigri.backends.oar.expressions" in modules and not modules & {"httpx", "paramiko"}


def test_slurm_properties_that_are_no_feature_expression_are_refused_at_gridsub() -> None:
    """Slurm reads properties as features (``--constraint``, one argv word or JSON field: no
    SQL, no shell), which its dialect checked only when sending; gridsub now says it at once."""
    document = {"name": "x", "exec_file": "/bin/true", "nb_jobs": 1, "properties": "avx2 & ib; true",
                "clusters": {"slurm": {}}}
    with pytest.raises(InputError, match=r"\$\.clusters\.slurm\.properties: .*not a Slurm feature expression"):
        parse(document, {"slurm": "slurm"})
    parse({**document, "properties": "avx2&(ib|opa)"}, {"slurm": "slurm"})


@pytest.mark.slow
def test_the_api_refuses_them_too(tmp_path: Path) -> None:
    """Through a real server: the user's gridsub over its socket gets the same line, and the
    server stores nothing."""
    with started(UNREACHABLE_OAR) as site:
        user = site.users[0]
        jdl = site.jdl(user, "hostile", exec_file="/bin/true", nb_jobs=1, clusters={"oar": {}},
                       properties=HOSTILE_PROPERTIES[0][0])
        refused = site.run(user, "gridsub", "-f", str(jdl), expect=2)
        assert "$.clusters.oar.properties: not an OAR property expression" in refused.stderr, refused.stderr
        assert site.json(user, "gridstat") == []


# --- the OAR dialect: a stored hostile value is never sent -----------------------------------

@pytest.mark.parametrize(("field", "hostile", "fine"), [
    ("properties", HOSTILE_PROPERTIES[0][0], DOCUMENTED_PROPERTIES[0]),
    ("resources", HOSTILE_RESOURCES[0][0], DOCUMENTED_RESOURCES[0]),
])
def test_a_stored_hostile_value_is_refused_before_anything_is_sent(field: str, hostile: str, fine: str) -> None:
    """A campaign stored before gridsub checked (an older cigri's, an import): its batch is
    refused with the reason, by both transports, before any connection (the cluster's address
    here answers nothing: a connection attempt would fail otherwise)."""
    job = spec("1", **{field: hostile})
    with pytest.raises(SubmissionRefused, match=f"^{field} .*not an OAR property expression"):
        build([job])
    for options in ({"transport": "ssh", "host": "127.0.0.1", "port": 1},
                    {"transport": "rest", "base_url": "http://127.0.0.1:1/oarapi"}):
        backend = OARBackend("oar", {**options, "user": "nobody", "timeout": 5})
        try:
            with pytest.raises(SubmissionRefused, match="not an OAR property expression"):
                backend.submit([job])
        finally:
            backend.close()
    build([spec("1", **{field: fine})])


# --- the real OAR cluster ----------------------------------------------------------------------

def oar_jobs_whose_request_holds(text: str) -> dict[str, Any]:
    """OAR's jobs whose ``oarsub`` line (OAR's ``initial_request``: ``-p`` and ``-l`` as given)
    holds ``text``, asked of OAR on its front-end."""
    return json.loads(front_end("oar", shlex.join(["oarstat", "-J", "--sql", f"initial_request LIKE '%{text}%'"]))
                      or "{}")


@pytest.mark.slow
@pytest.mark.parametrize("cluster", ["oar-ssh", "oar-rest"])
def test_expressions_run_on_oar_and_hostile_ones_never_reach_it(cigri: Cigri, cluster: str) -> None:
    """A campaign with a property expression and a resource filter on the test cluster's own
    properties runs, each expression reaching OAR as written; the same hostile expressions are
    refused by gridsub, and once planted in stored campaigns (as an older cigri or an import
    would have left them) refused by the runner: OAR never sees them."""
    use_clusters(cigri, (cluster,), "[runner]\ntap_initial = 10\n")
    exec_dir = marker_exec_dir("oar-expressions")
    sent, never = f"sent-{secrets.token_hex(4)}", f"never-{secrets.token_hex(4)}"
    properties = f"host = 'localhost' AND type != '{sent}' AND core IN (0, 1, 2, 3, 4, 5, 6, 7)"
    resources = "{cpu = 0 AND besteffort = 'YES'}/host=1/core=1"
    injected = f"host = 'localhost') OR ('{never}' = '{never}'"  # valid SQL once OAR wraps it: ((…) AND …)

    def campaign(name: str, tasks: int, **settings: str) -> int:
        jdl = cigri.jdl(name, exec_file=str(exec_dir / "task.sh"), exec_directory=str(exec_dir), walltime="00:01:00",
                        type="normal", params=[f"{name}{i}" for i in range(tasks)], clusters={cluster: settings})
        return cigri.submit(jdl)

    runs = campaign("good", 3, properties=properties, resources=resources)
    planted = {field: campaign(f"planted{field}", 1) for field in ("properties", "resources")}
    before = cigri.db_counts()
    for field, hostile in (("properties", injected), ("resources", f"{{{injected}}}/core=1")):
        jdl = cigri.jdl(f"hostile{field}", exec_file="/bin/true", nb_jobs=1, clusters={cluster: {field: hostile}})
        refused = cigri.run("gridsub", "-f", str(jdl), expect=2)
        assert refused.stderr.count("\n") == 1 and f"$.clusters.{cluster}.{field}: " in refused.stderr
    assert cigri.db_counts() == before
    with sqlite3.connect(cigri.home / "cigri.db") as db:
        for field, campaign_id in planted.items():
            db.execute("INSERT OR REPLACE INTO campaign_properties(campaign_id, cluster_id, name, value) "
                       "SELECT ?, id, ?, ? FROM clusters WHERE name = ?",
                       [campaign_id, field, json.dumps(injected if field == "properties" else f"{{{injected}}}/core=1"),
                        cluster])

    def refusals() -> dict[int, list[str]]:
        return {campaign_id: [e["message"] for e in cigri.events(campaign_id)
                              if "not an OAR property expression" in e["message"]] for campaign_id in planted.values()}

    cigri.start_daemon(period=0.2)
    wait_for(lambda: cigri.campaign_state(runs) == "terminated" and all(refusals().values()), 240,
             "the good campaign to end and the planted ones to be refused", step=0.5,
             seen=lambda: (cigri.stat(runs)["tasks"], refusals()))
    assert runs_per_task(exec_dir) == Counter({f"good{i}": 1 for i in range(3)})
    requests = list(oar_jobs_whose_request_holds(sent).values())
    assert len(requests) == 3 and all(properties in job["properties"] for job in requests), requests
    assert not oar_jobs_whose_request_holds(never)
