"""CiGri 3.2's client options (``../shared/cigri-v3.md`` §1, its ``bin/*.rb`` and
``lib/cigri-clientlib.rb.in``), one test each, through the real commands. What scripts written
around CiGri's clients parse is compared byte for byte with what CiGri's clients printed:
gridsub's ``CAMPAIGN_ID=`` lines, ``gridstat -d``'s JSON (its API's documents, as Ruby's
``JSON.generate`` wrote them), gridstat's listing, ``-e``'s events, ``gridclusters -i/-u/-b``,
``gridnotify -l`` and ``gridtoken -l``; the other options are checked for CiGri's meaning.
Direct mode, and at the end a few through a real ``cigri server`` with real Unix users."""

from __future__ import annotations

import getpass
import json
import re
import subprocess
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from harness import BIN, Cigri, wait_for
from service import Site, started
from test_notify import Mailbox, smtp  # noqa: F401 (the fixture)
from unix_users import SERVICE

ME = getpass.getuser()
SEPARATOR = "-" * 78
PROGRAM = 'echo "out $1"; echo "err $1" >&2; [ "$1" != bad ]\n'
RED, YELLOW, WHITE, GREEN = ("\033[41m \033[0m", "\033[43m \033[0m", "\033[47m \033[0m", "\033[42m \033[0m")


def iso(epoch: float) -> str:
    """CiGri's dates in its API: local time, ISO 8601 with the offset (its README's events)."""
    return datetime.fromtimestamp(epoch).astimezone().isoformat(timespec="seconds")


def campaign_json(c: dict[str, Any], clusters: str = "") -> str:
    """api/cigri-api.rb's format_campaign, written out as JSON.generate wrote it."""
    i = c["id"]
    return (f'{{"id":{i},"name":"{c["name"]}","user":"{c["user"]}","state":"{c["state"]}",'
            f'"has_events":{"true" if c["open_events"] else "false"},"submission_time":{int(c["submitted_at"])},'
            f'"total_jobs":{c["tasks"]["total"]},"finished_jobs":{c["tasks"]["terminated"]},'
            f'"links":[{{"rel":"self","href":"/campaigns/{i}"}},{{"rel":"parent","href":"/campaigns"}},'
            f'{{"rel":"collection","href":"/campaigns/{i}/jobs","title":"jobs"}},'
            f'{{"rel":"collection","href":"/campaigns/{i}/events","title":"events"}},'
            f'{{"rel":"item","href":"/campaigns/{i}/jdl","title":"jdl"}}]{clusters}}}')


@pytest.fixture(scope="module")
def ended(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One installation with one ended campaign: tasks a, b and bad, the last failing (an
    EXIT_ERROR event); read by the tests that only look."""
    cigri = Cigri(tmp_path_factory.mktemp("ended"))
    try:
        program = cigri.script("task.sh", PROGRAM)
        campaign_id = cigri.submit(cigri.jdl("squares", exec_file=str(program), params=["a", "b", "bad"]))
        cigri.drain(campaign_id)
        tasks = cigri.tasks(campaign_id)
        yield {"cigri": cigri, "id": campaign_id, "summary": cigri.stat(campaign_id), "tasks": tasks,
               "jobs": {t["name"]: t["jobs"][0]["id"] for t in tasks}, "events": cigri.events(campaign_id)}
    finally:
        cigri.cleanup()


def lines(cigri: Cigri, command: str, *args: str) -> list[str]:
    return cigri.run(command, *args).stdout.splitlines()


# --- every command ----------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["gridsub", "gridstat", "griddel", "gridevents", "gridnotify", "gridclusters",
                                     "gridtoken"])
def test_dash_h_is_help(cigri: Cigri, command: str) -> None:
    """CiGri's -h, --help: the help, exit 0."""
    assert cigri.run(command, "-h").stdout == cigri.run(command, "--help").stdout
    assert "Usage:" in cigri.run(command, "-h").stdout


# --- gridsub ------------------------------------------------------------------------------------

def test_gridsub_f_prints_cigris_lines_that_scripts_read(cigri: Cigri) -> None:
    """gridsub -f: 'Campaign successfully submitted' then CAMPAIGN_ID=<id>, per campaign."""
    first, second = (cigri.jdl(name, exec_file="/bin/true", nb_jobs=1) for name in ("one", "two"))
    out = cigri.run("gridsub", "-f", str(first), "-f", str(second)).stdout
    assert out == "Campaign successfully submitted\nCAMPAIGN_ID=1\nCampaign successfully submitted\nCAMPAIGN_ID=2\n"
    script = cigri.script("submit.sh", f'ID=$({BIN}/gridsub -f "$1" | grep ^CAMPAIGN_ID= | cut -d= -f2)\n'
                                       'echo "submitted $ID"\n')  # as CiGri users' scripts read it
    got = subprocess.run([str(script), str(first)], env=cigri.env, text=True, capture_output=True, timeout=60)
    assert got.stdout == "submitted 3\n", got.stderr


def test_gridsub_j_submits_an_inline_jdl(cigri: Cigri) -> None:
    """gridsub -j '<JDL>': the JDL given inline, with -f too."""
    inline = json.dumps({"name": "inline", "exec_file": "/bin/true", "params": ["x", "y"], "clusters": {"local": {}}})
    out = cigri.run("gridsub", "-j", inline, "-f", str(cigri.jdl("file", exec_file="/bin/true", nb_jobs=1))).stdout
    assert out.count("CAMPAIGN_ID=") == 2
    assert {c["name"]: c["tasks"]["total"] for c in cigri.json("gridstat")} == {"file": 1, "inline": 2}


def test_gridsub_d_prints_the_campaign_as_cigris_api_answered(cigri: Cigri) -> None:
    """gridsub -d: the campaign JSON between the two lines, one line, as CiGri's POST answered."""
    out = cigri.run("gridsub", "-d", "-f", str(cigri.jdl("detailed", exec_file="/bin/true", nb_jobs=2))).stdout
    summary = cigri.stat(1)
    assert out == f"Campaign successfully submitted\n{campaign_json(summary)}\nCAMPAIGN_ID=1\n"


def test_gridsub_F_reads_cigris_json_array_or_lines(cigri: Cigri) -> None:
    """gridsub -c N -F FILE (and CiGri's --jobfile): CiGri's JSON array, or lines; repeatable."""
    campaign_id = cigri.submit(cigri.jdl("grow", exec_file="/bin/true", nb_jobs=1))
    array, plain = cigri.tmp / "array.json", cigri.tmp / "plain.txt"
    array.write_text('["a 1", "b 2"]')
    plain.write_text("c 3\n")
    added = cigri.run("gridsub", "-c", str(campaign_id), "--jobfile", str(array), "-F", str(plain))
    assert added.stdout == (f"Jobs successfully added to campaign {campaign_id} (2 tasks)\n"
                            f"Jobs successfully added to campaign {campaign_id} (1 tasks)\n")
    assert added.stderr.splitlines()[0] == f"gridsub: warning: {array}: read as CiGri's JSON array of parameters " \
                                           "(cigri's form: one parameter per line)"
    assert [t["name"] for t in cigri.tasks(campaign_id)] == ["0", "a", "b", "c"]


def test_gridsub_J_adds_an_inline_json_array(cigri: Cigri) -> None:
    """gridsub -c N -J '["a", "b"]': the parameters inline; -d prints the campaign after."""
    campaign_id = cigri.submit(cigri.jdl("grow", exec_file="/bin/true", nb_jobs=1))
    out = cigri.run("gridsub", "-c", str(campaign_id), "-J", '["p 1", "q 2"]', "-d").stdout
    assert out == f"Jobs successfully added to campaign {campaign_id} (2 tasks)\n" \
                  f"{campaign_json(cigri.stat(campaign_id))}\n"
    refused = cigri.run("gridsub", "-c", str(campaign_id), "-J", "p 1", expect=2)
    assert refused.stderr.startswith("gridsub: -J: expected CiGri's JSON array")
    assert cigri.stat(campaign_id)["tasks"]["total"] == 3


def test_gridsub_c_alone_is_bad_usage(cigri: Cigri) -> None:
    """CiGri only warned when -F had no -c, and went on; cigri refuses, exit 2, nothing written."""
    assert cigri.run("gridsub", "-J", '["a"]', expect=2).stderr == \
        "gridsub: -c goes with -F or -J, without -f or -j (or -c N --wait follows campaign N)\n"
    assert cigri.run("gridsub", expect=2).stderr.startswith("gridsub: nothing to submit")


# --- gridstat -------------------------------------------------------------------------------------

def test_gridstat_lists_with_cigris_columns_and_H_drops_them(cigri: Cigri) -> None:
    """gridstat: CiGri's columns (id, name, user, submission time, S, progress) first; -H: the
    same rows without the titles."""
    cigri.submit(cigri.jdl("listed", exec_file="/bin/true", nb_jobs=2))
    titled = lines(cigri, "gridstat")
    assert titled[0].split()[:7] == ["Campaign", "id", "Name", "User", "Submission", "time", "S"]
    fields = titled[1].split()
    assert fields[:3] == ["1", "listed", ME] and fields[5:7] == ["R", "0/2"]
    bare = lines(cigri, "gridstat", "-H")
    assert [line.split() for line in bare] == [fields]


def test_gridstat_state_letter_has_cigris_e_for_open_events(ended: dict[str, Any]) -> None:
    """S: CiGri's letter, with its 'e' while the campaign has open events (its README's 'Re')."""
    cigri = ended["cigri"]
    row = next(line for line in lines(cigri, "gridstat", "-a", "-H") if line.split()[0] == str(ended["id"]))
    assert row.split()[5] == "Fe"


def test_gridstat_username_filters_by_owner(cigri: Cigri) -> None:
    """gridstat -u USER, --username USER (CiGri's long name)."""
    cigri.submit(cigri.jdl("mine", exec_file="/bin/true", nb_jobs=1))
    assert [c["name"] for c in cigri.json("gridstat", "--username", ME)] == ["mine"]
    assert cigri.json("gridstat", "-u", "nobody-at-all") == []


def test_gridstat_d_dumps_cigris_campaign_list(cigri: Cigri) -> None:
    """gridstat -d: GET /campaigns, byte for byte; -p: indented."""
    cigri.submit(cigri.jdl("dumped", exec_file="/bin/true", nb_jobs=2))
    summary = cigri.stat(1)
    expected = (f'{{"items":[{campaign_json(summary)}],"total":1,'
                '"links":[{"rel":"self","href":"/campaigns"},{"rel":"parent","href":"/"}]}\n')
    assert cigri.run("gridstat", "-d").stdout == expected
    pretty = cigri.run("gridstat", "-d", "-p").stdout
    assert pretty == json.dumps(json.loads(expected), indent=2) + "\n"
    assert pretty.startswith('{\n  "items": [\n    {\n      "id": 1,\n')
    assert cigri.run("gridstat", "-p", expect=2).stderr == "gridstat: -p goes with -d\n"


def test_gridstat_c_d_dumps_the_campaign_with_its_clusters(ended: dict[str, Any]) -> None:
    """gridstat -c N -d: GET /campaigns/N with its clusters map, byte for byte."""
    cigri, summary = ended["cigri"], ended["summary"]
    clusters = (',"clusters":{"1":{"cluster_name":"local","active_jobs":0,"queued_jobs":0,"prologue_ok":true,'
                '"epilogue_ok":true}}')
    assert cigri.run("gridstat", "-c", str(ended["id"]), "-d").stdout == campaign_json(summary, clusters) + "\n"
    assert cigri.run("gridstat", str(ended["id"]), "-d").stdout == campaign_json(summary, clusters) + "\n"


def test_gridstat_f_d_dumps_cigris_job_list(ended: dict[str, Any]) -> None:
    """gridstat -c N -f -d: GET /campaigns/N/jobs, a row per job, byte for byte."""
    cigri, campaign_id = ended["cigri"], ended["id"]
    rows = ",".join(f'{{"id":{t["id"]},"name":"{t["name"]}","parameters":"{t["param"]}","cluster":"local",'
                    f'"cigri_job_id":{t["jobs"][0]["id"]},"remote_id":{int(t["jobs"][0]["remote_id"])},'
                    f'"state":"{t["jobs"][0]["state"]}","href":"/campaigns/{campaign_id}/jobs/{t["id"]}"}}'
                    for t in ended["tasks"])
    assert cigri.run("gridstat", "-c", str(campaign_id), "-f", "-d").stdout == (
        f'{{"items":[{rows}],"total":3,"offset":0,"limit":100,"links":[{{"rel":"self",'
        f'"href":"/campaigns/{campaign_id}/jobs"}},{{"rel":"parent","href":"/campaigns/{campaign_id}"}}]}}\n')
    assert [t["state"] for t in ended["tasks"]] == ["terminated", "terminated", "failed"]


def test_gridstat_o_starts_the_task_list_at_an_offset(ended: dict[str, Any]) -> None:
    """gridstat -c N -f -o OFFSET: from the OFFSET-th task (with -d too)."""
    cigri, campaign_id = ended["cigri"], ended["id"]
    assert [t["name"] for t in cigri.json("gridstat", "-c", str(campaign_id), "-f", "-o", "1")] == ["b", "bad"]
    page = json.loads(cigri.run("gridstat", "-c", str(campaign_id), "-f", "-d", "-o", "2").stdout)
    assert [row["name"] for row in page["items"]] == ["bad"] and page["offset"] == 2
    assert [line.split()[1] for line in lines(cigri, "gridstat", "-c", str(campaign_id), "-f", "-H", "-o", "1")] == \
        ["b", "bad"]
    assert cigri.run("gridstat", "-c", str(campaign_id), "-o", "1", expect=2).stderr == \
        "gridstat: --offset N (CiGri's -o N) goes with -f, N >= 0\n"


def test_gridstat_e_lists_events_as_cigri_did(ended: dict[str, Any]) -> None:
    """gridstat -c N -e: CiGri's print_events (a 78-dash line around each event); -d: its JSON."""
    cigri, campaign_id = ended["cigri"], ended["id"]
    [event] = ended["events"]
    job = ended["jobs"]["bad"]
    tail = event["stderr_tail"].rstrip("\n").split("\n")
    assert lines(cigri, "gridstat", "-c", str(campaign_id), "-e") == [
        SEPARATOR, f"{event['id']}: (open) EXIT_ERROR of job {job} at {iso(event['created_at'])} on local",
        event["message"], *tail, SEPARATOR]
    assert "err bad" in tail
    message = json.dumps(event["message"] + "\n" + event["stderr_tail"].rstrip("\n"))
    assert cigri.run("gridstat", "-c", str(campaign_id), "-e", "-d").stdout == (
        f'{{"items":[{{"id":{event["id"]},"class":"job","code":"EXIT_ERROR","job_id":{job},"cluster_id":1,'
        f'"cluster_name":"local","date_open":"{iso(event["created_at"])}","message":{message},"parent":null,'
        f'"state":"open"}}],"total":1,"offset":0}}\n')
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d", iso(event["created_at"]))


def test_gridstat_j_d_dumps_cigris_job(ended: dict[str, Any]) -> None:
    """gridstat -j J -d: GET /jobs/J, CiGri's job columns, byte for byte."""
    cigri = ended["cigri"]
    job = cigri.json("gridstat", "-j", str(ended["jobs"]["a"]))
    assert cigri.run("gridstat", "-j", str(job["id"]), "-d").stdout == (
        f'{{"id":{job["id"]},"param":"a","grid_user":"{ME}","campaign_id":{ended["id"]},"param_id":{job["task_id"]},'
        f'"batch_id":{job["batch"]},"cluster_id":1,"collect_id":null,"state":"terminated","return_code":0,'
        f'"submission_time":"{iso(job["submitted_at"])}","start_time":"{iso(job["started_at"])}",'
        f'"stop_time":"{iso(job["finished_at"])}","node_name":"{job["node"]}","resources_used":null,'
        f'"remote_id":{job["remote_id"]},"tag":null,"runner_options":null,'
        f'"links":[{{"rel":"self","href":"/jobs/{job["id"]}"}},{{"rel":"parent","href":"/jobs"}}],'
        f'"cluster_name":"local"}}\n')


def test_gridstat_O_and_E_with_d_dump_cigris_output_document(ended: dict[str, Any]) -> None:
    """gridstat -j J -O / -E: the output; with -d, CiGri's {"output": ...}."""
    cigri, job = ended["cigri"], str(ended["jobs"]["bad"])
    assert cigri.run("gridstat", "-j", job, "-O").stdout == "out bad\n"
    assert cigri.run("gridstat", "-j", job, "-E").stdout == "err bad\n"
    assert cigri.run("gridstat", "-j", job, "-O", "-d").stdout == '{"output":"out bad\\n"}\n'
    assert cigri.run("gridstat", "-O", expect=2).stderr == "gridstat: -O, -E and -C need -j JOB\n"


def test_gridstat_C_asks_the_cluster_about_the_job(ended: dict[str, Any]) -> None:
    """gridstat -j J -C: the job as its cluster sees it now (CiGri printed OAR's details)."""
    cigri = ended["cigri"]
    out = cigri.run("gridstat", "-j", str(ended["jobs"]["bad"]), "-C").stdout
    seen = json.loads(out)
    assert out == json.dumps(seen, indent=2) + "\n"  # indented, as CiGri's ?pretty=true
    assert (seen["cluster"], seen["state"], seen["exit_code"]) == ("local", "completed", 1)
    assert cigri.run("gridstat", "-C", expect=2).returncode == 2


def test_gridstat_J_prints_the_jdl(ended: dict[str, Any]) -> None:
    """gridstat -c N -J: the JDL the campaign was submitted with, indented (-d changes nothing)."""
    cigri = ended["cigri"]
    out = cigri.run("gridstat", "-c", str(ended["id"]), "-J").stdout
    jdl = json.loads(out)
    assert out == json.dumps(jdl, indent=2) + "\n"
    assert jdl["name"] == "squares" and jdl["clusters"] == {"local": {}}
    assert cigri.run("gridstat", "-J", expect=2).stderr == "gridstat: -e, -J and --plot need -c CAMPAIGN\n"


def test_gridstat_plot_draws_the_throughput(ended: dict[str, Any]) -> None:
    """gridstat -c N --plot: a sparkline of the tasks terminated per hour over its life."""
    cigri = ended["cigri"]
    series = cigri.json("gridstat", "-c", str(ended["id"]), "--plot")
    assert sum(series["terminated"]) == 2 and len(series["terminated"]) == 60
    title, spark, scale = lines(cigri, "gridstat", "-c", str(ended["id"]), "--plot")
    assert title.startswith(f"Campaign {ended['id']}: tasks terminated per hour, ")
    assert len(spark) == 60 and set(spark) <= set("▁▂▃▄▅▆▇█") and "█" in spark
    assert re.fullmatch(r"peak \S+/h, mean \S+/h", scale)


# --- griddel ---------------------------------------------------------------------------------------

def test_griddel_c_takes_cigris_comma_list(cigri: Cigri) -> None:
    """griddel -c 1,2 (--campaign_ids): every campaign listed; -v accepted."""
    for name in ("x", "y", "z"):
        cigri.submit(cigri.jdl(name, exec_file="/bin/true", nb_jobs=1))
    assert cigri.run("griddel", "-c", "1,2", "-v").stdout == "Campaign 1: cancelled\nCampaign 2: cancelled\n"
    assert cigri.run("griddel", "-p", "--campaign_ids", "3").stdout == "Campaign 3: paused\n"
    assert cigri.run("griddel", "-r", "-c", "3").stdout == "Campaign 3: resumed\n"
    assert [c["state"] for c in cigri.json("gridstat", "-a")] == ["cancelled", "cancelled", "in_treatment"]
    assert cigri.run("griddel", "-c", "1,x", expect=2).stderr == \
        "griddel: -c: 'x' is not a campaign number (N, or v3:N for CiGri's number)\n"


def test_griddel_purge_deletes_ended_campaigns(cigri: Cigri) -> None:
    """griddel --purge N (refused for a running campaign, as CiGri meant; its 3.2 refused every one)."""
    ended = cigri.submit(cigri.jdl("ended", exec_file="/bin/true", nb_jobs=2))
    cigri.drain(ended)
    running = cigri.submit(cigri.jdl("running", exec_file="/bin/true", nb_jobs=1))
    out = cigri.run("griddel", "--purge", str(ended), str(running), expect=1)
    assert out.stdout == f"Campaign {ended}: purged\n"
    assert out.stderr == f"griddel: campaign {running} is in_treatment: only an ended campaign is purged " \
                         "(griddel it first)\n"
    assert cigri.run("gridstat", "-c", str(ended), expect=1).stderr == f"gridstat: campaign {ended}: no such campaign\n"
    assert cigri.db_counts()["jobs"] == 0


def test_griddel_j_kills_one_job(cigri: Cigri) -> None:
    """griddel -j J: that job only (its task cancelled)."""
    program = cigri.script("sleepy.sh", "sleep 60\n")
    campaign_id = cigri.submit(cigri.jdl("long", exec_file=str(program), nb_jobs=2))
    cigri.cycle()
    job = cigri.tasks(campaign_id)[0]["jobs"][0]["id"]
    assert cigri.run("griddel", "-j", str(job)).stdout == f"Job {job}: kill requested\n"
    wait_for(lambda: cigri.cycle() or cigri.tasks(campaign_id)[0]["state"] == "cancelled", 30, "the task cancelled")
    assert cigri.tasks(campaign_id)[1]["state"] != "cancelled"
    cigri.run("griddel", str(campaign_id))
    cigri.cycle()


# --- gridevents --------------------------------------------------------------------------------------

def test_gridevents_takes_the_campaign_as_an_argument(ended: dict[str, Any]) -> None:
    """gridevents N: the same as gridevents -c N."""
    cigri = ended["cigri"]
    assert cigri.json("gridevents", str(ended["id"])) == cigri.json("gridevents", "-c", str(ended["id"]))
    assert {"EXIT_ERROR", "CAMPAIGN_FAILED"} <= {e["code"] for e in cigri.json("gridevents", str(ended["id"]), "-a")}


def test_gridevents_fix_resubmit_and_verbose(cigri: Cigri) -> None:
    """gridevents -e E -f -r -v: closed, its failed task back in the bag; -r alone is exit 2."""
    campaign_id = cigri.submit(cigri.jdl("fails", exec_file="/bin/false", nb_jobs=1))
    cigri.drain(campaign_id)
    [event] = cigri.events(campaign_id)
    assert cigri.run("gridevents", "-r", expect=2).stderr == "gridevents: --resubmit needs --fix\n"
    out = cigri.run("gridevents", "-e", str(event["id"]), "-f", "-r", "-v").stdout
    assert out == "1 event(s) closed, 1 task(s) resubmitted\n"
    assert cigri.stat(campaign_id)["tasks"]["pending"] == 1
    assert cigri.json("gridevents", "-g") == []


def test_gridevents_mark_job_event(ended: dict[str, Any]) -> None:
    """gridevents --mark-job-event J (root only in CiGri, admins here): an open MANUAL_EVENT."""
    cigri = ended["cigri"]
    job = ended["jobs"]["a"]
    out = cigri.run("gridevents", "--mark-job-event", str(job)).stdout
    marked = re.fullmatch(rf"Event (\d+): MANUAL_EVENT on job {job}\n", out)
    assert marked is not None, out
    event_id = int(marked[1])
    event = cigri.json("gridevents", "-e", str(event_id))
    assert (event["code"], event["state"], event["job_id"]) == ("MANUAL_EVENT", "open", job)
    assert event["message"] == "The job has been marked in the event state by the administrator."
    cigri.run("gridevents", "-e", str(event_id), "-f")


def test_gridevents_blacklist_cluster(cigri: Cigri) -> None:
    """gridevents --blacklist-cluster ID (root only in CiGri, admins here): by number or name."""
    assert cigri.run("gridevents", "--blacklist-cluster", "1").stdout == "Cluster local: blacklisted\n"
    [local] = cigri.json("gridclusters")
    assert local["blacklisted"]
    assert local["blacklist_reason"] == "Cluster 1 disabled by the administrator of the grid. Please, be patient."
    assert cigri.run("gridclusters", "-i").stdout == "1: local , localhost (stress:0.0/1.0, BLACKLISTED)\n"
    assert cigri.run("gridevents", "--blacklist-cluster", "9", expect=1).stderr == \
        "gridevents: cluster #9: no such cluster\n"
    assert cigri.run("gridevents", "--blacklist-cluster", "local", "-c", "1", expect=2).returncode == 2


# --- gridnotify --------------------------------------------------------------------------------------

def test_gridnotify_m_s_l_u(cigri: Cigri, smtp: tuple[Mailbox, int]) -> None:
    """gridnotify -m ADDRESS -s LEVEL, -l (CiGri's lines), -m ADDRESS -u, -v accepted."""
    me = f"{ME}@example.org"  # the user's own address: no code to type
    cigri.config.write_text(cigri.config.read_text() + f'[notify]\nsmtp_host = "127.0.0.1"\nsmtp_port = {smtp[1]}\n'
                                                       'user_address = "{user}@example.org"\n')
    assert cigri.run("gridnotify", "-l").stdout == ""  # nothing: not even the title, as CiGri
    assert cigri.run("gridnotify", "-m", me, "-s", "high", "-v").stdout == \
        f"Subscription 1: mail {me}, severity high and above\n"
    cigri.run("gridnotify", "-m", "other@example.org")  # CiGri required -s; its default here
    assert cigri.run("gridnotify", "-l").stdout == ("You have the following notification subscriptions:\n"
                                                    f" - mail on {me} with severity high\n"
                                                    " - mail on other@example.org with severity medium"
                                                    " (unconfirmed: gridnotify confirm)\n")
    assert cigri.run("gridnotify", "-m", me, "-u").stdout == "Subscription 1: removed\n"
    assert cigri.run("gridnotify", "-m", me, "-u", expect=1).stderr == \
        f"gridnotify: mail {me}: you have no subscription to it\n"
    assert [s["target"] for s in cigri.json("gridnotify", "list")] == ["other@example.org"]


def test_gridnotify_j_jabber_is_refused_naming_mail_and_webhooks(cigri: Cigri) -> None:
    refused = cigri.run("gridnotify", "-j", "me@jabber.example.org", "-s", "low", expect=2)
    assert refused.stderr == ("gridnotify: -j: Jabber is not supported; subscribe a mail address (-m ADDRESS) or a "
                              "webhook (gridnotify subscribe --webhook URL) instead\n")
    assert cigri.json("gridnotify", "list") == []
    assert cigri.run("gridnotify", "-v").stdout == cigri.run("gridnotify", "--help").stdout  # as CiGri: the help


# --- gridclusters ------------------------------------------------------------------------------------

def test_gridclusters_i_I_u(cigri: Cigri) -> None:
    """gridclusters -i (CiGri's line), -I (every field), -u (CiGri's usage lines)."""
    assert cigri.run("gridclusters", "-i").stdout == "1: local , localhost (stress:0.0/1.0)\n"
    more = lines(cigri, "gridclusters", "-I")
    assert more[0] == "1: local" and {"    backend: local", "    blacklisted: false", "    total_slots: 4",
                                      "    slots: 4"} <= set(more[1:])
    assert cigri.run("gridclusters", "-u").stdout == ("1: local , localhost (stress:0.0/1.0)\n    max_resources: 4\n"
                                                      "    used_resources: 0\n    used_by_cigri: 0\n"
                                                      "    unavailable_resources: 0\n")
    assert cigri.run("gridclusters", "-i", "--json", expect=2).returncode == 2


def test_gridclusters_b_draws_cigris_bars(cigri: Cigri) -> None:
    """gridclusters -b: CiGri's 80-column bar and legend, byte for byte on a terminal (here
    FORCE_COLOR); letters when piped or with NO_COLOR."""
    program = cigri.script("sleepy.sh", "sleep 60\n")
    campaign_id = cigri.submit(cigri.jdl("half", exec_file=str(program), nb_jobs=2))
    cigri.cycle()
    wait_for(lambda: cigri.cycle() or cigri.json("gridclusters")[0]["used_by_cigri"] == 2, 30, "two jobs running")
    legend = f"{RED}=unavailable {YELLOW}=used {WHITE}=used_by_cigri {GREEN}=free\n"
    cigri.env["FORCE_COLOR"] = "1"
    try:
        coloured = cigri.run("gridclusters", "-b").stdout
    finally:
        del cigri.env["FORCE_COLOR"]
    assert coloured == f"1: local , localhost (stress:0.0/1.0) (4 resources)\n{WHITE * 40}{GREEN * 40}\n\n{legend}"
    assert cigri.run("gridclusters", "-b").stdout == ("1: local , localhost (stress:0.0/1.0) (4 resources)\n"
                                                      f"{'#' * 40}{'.' * 40}\n\n"
                                                      "x=unavailable o=used #=used_by_cigri .=free\n")
    cigri.run("griddel", str(campaign_id))
    cigri.cycle()


# --- gridtoken -----------------------------------------------------------------------------------------

TOKENS_CLUSTER = ('[clusters.dahu]\nbackend = "slurm"\ntransport = "rest"\nbase_url = "http://127.0.0.1:9"\n'
                  'user = "cigri"\ntoken_file = "/nonexistent"\nidentity = "tokens"\n')


def test_gridtoken_l_i_t_r(cigri: Cigri) -> None:
    """gridtoken -i ID -t TOKEN, -l (CiGri's lines, never the token), -i ID -r."""
    cigri.config.write_text(TOKENS_CLUSTER + cigri.config.read_text())
    dahu = next(c["id"] for c in cigri.json("cigri", "cluster", "list") if c["name"] == "dahu")
    added = cigri.run("gridtoken", "-i", str(dahu), "-t", "eyJ.secret.sig")
    assert added.stdout == f"Token registered for dahu: your jobs there run as {ME}\n"
    assert added.stderr.startswith("gridtoken: warning: -t TOKEN was visible to every user")
    listed = cigri.run("gridtoken", "-l").stdout
    assert re.fullmatch(rf"You have the following tokens:\n - Cluster #{dahu} : dahu, registered "
                        r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\n", listed) and "secret" not in listed
    assert cigri.run("gridtoken", "-i", "dahu", "-t", "-", stdin="eyJ.other.sig\n").stderr == ""
    assert cigri.run("gridtoken", "-i", str(dahu), "-r").stdout == "Token for dahu: removed\n"
    assert cigri.run("gridtoken", "-l").stdout == ""
    assert cigri.run("gridtoken", "-i", str(dahu), expect=2).stderr == \
        "gridtoken: give -i CLUSTER with -t TOKEN (register) or -r (remove), or -l\n"


# --- through a real cigri server -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    with started() as built:
        yield built


@pytest.mark.slow
def test_through_the_server_gridsub_and_gridstat_print_cigris_bytes(site: Site) -> None:
    """CAMPAIGN_ID=, gridstat -d/-f -d/-J/-C/--plot as a user of a site's server."""
    u1, u2 = site.users
    program = site.script("options.sh", PROGRAM)
    out = site.run(u1, "gridsub", "-f", str(site.jdl(u1, "served", exec_file=str(program), params=["a", "b"]))).stdout
    submitted = re.fullmatch(r"Campaign successfully submitted\nCAMPAIGN_ID=(\d+)\n", out)
    assert submitted is not None, out
    campaign_id = int(submitted[1])
    summary = site.drain(u1, campaign_id)
    clusters = (',"clusters":{"1":{"cluster_name":"local","active_jobs":0,"queued_jobs":0,"prologue_ok":true,'
                '"epilogue_ok":true}}')
    assert site.run(u1, "gridstat", "-c", str(campaign_id), "-d").stdout == campaign_json(summary, clusters) + "\n"
    page = json.loads(site.run(u1, "gridstat", "-c", str(campaign_id), "-f", "-d", "-o", "1").stdout)
    assert [row["name"] for row in page["items"]] == ["b"] and page["total"] == 2
    assert json.loads(site.run(u1, "gridstat", "-c", str(campaign_id), "-J").stdout)["name"] == "served"
    job = site.json(u1, "gridstat", "-c", str(campaign_id), "-f")[0]["jobs"][0]["id"]
    assert json.loads(site.run(u1, "gridstat", "-j", str(job), "-C").stdout)["state"] == "completed"
    assert sum(site.json(u1, "gridstat", "-c", str(campaign_id), "--plot")["terminated"]) == 2
    for args in (("-c", str(campaign_id), "-d"), ("-c", str(campaign_id), "-J"), ("-j", str(job), "-C"),
                 ("-c", str(campaign_id), "--plot")):
        assert site.run(u2, "gridstat", *args, expect=1).stderr.endswith(("no such campaign\n", "no such job\n"))


@pytest.mark.slow
def test_through_the_server_purge_and_mark_are_the_owners_and_the_admins(site: Site) -> None:
    """griddel --purge: the owner's; gridevents --mark-job-event: an admin's (root's in CiGri)."""
    u1, u2 = site.users
    campaign_id = site.submit(u1, site.jdl(u1, "purged", exec_file="/bin/true", nb_jobs=1))
    site.drain(u1, campaign_id)
    job = site.json(u1, "gridstat", "-c", str(campaign_id), "-f")[0]["jobs"][0]["id"]
    assert site.run(u1, "gridevents", "--mark-job-event", str(job), expect=1).stderr == \
        f"gridevents: marking a job with an event: needs the admin role, and {u1} is not an admin\n"
    assert site.run(u2, "gridevents", "--mark-job-event", str(job), expect=1).stderr == \
        f"gridevents: job {job}: no such job\n"
    assert site.run(SERVICE, "gridevents", "--mark-job-event", str(job)).stdout.startswith("Event ")
    assert site.run(u2, "griddel", "--purge", str(campaign_id), expect=1).stderr == \
        f"griddel: campaign {campaign_id}: no such campaign\n"
    assert site.run(u1, "griddel", "--purge", str(campaign_id)).stdout == f"Campaign {campaign_id}: purged\n"
    assert site.run(u1, "gridstat", "-c", str(campaign_id), expect=1).returncode == 1
    assert site.run(u1, "gridclusters", "-i").stdout == "1: local , localhost (stress:0.0/1.0)\n"
