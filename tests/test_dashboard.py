"""The dashboard in a real browser: Debian's headless chromium, driven by Selenium through
Debian's chromedriver, against a real ``cigri server`` (TCP on 127.0.0.1) run as a site runs
it, with real Unix users, over a database seeded with a month of the grid's past (a few hundred
ended campaigns, a month of usage samples) and one live campaign.

Users log in with their API tokens; every page's numbers are the API's for the same objects
and the same user; the owner's buttons pause, resume and cancel; another user's campaign is a
404 page; a POST without the form's CSRF token is refused; a session ends with logout and with
its token. Each page's screenshot goes to ``tests/artifacts/`` (not committed).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from harness import unavailable, wait_for
from service import Site
from unix_users import REPO, SERVICE

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("dashboard")]

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
ARTIFACTS = REPO / "tests" / "artifacts"
SIM_CLUSTERS = ("simA", "simB")


def _seed_module() -> Any:
    """bench/dashboard.py, whose :func:`seed` writes a grid's past (the benchmark's, smaller)."""
    spec = importlib.util.spec_from_file_location("bench_dashboard", REPO / "bench" / "dashboard.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    built = Site(front=True)  # a front on this host names the user, with its secret (tested last)
    built.config.write_text(built.config.read_text().replace(  # the failing campaign keeps its cluster
        "[cigri]\n", "[cigri]\nfailure_rate_min = 1000\n"))
    try:  # the server's database, written as root, its account, before it starts
        _seed_module().seed(built.home / "cigri.db", clusters=SIM_CLUSTERS, users=built.users, campaigns=300,
                            jobs=30_000, days=30, period=60, paused=4, big_share=0.1)
        built.start()
        yield built
    finally:
        built.close()


@pytest.fixture(scope="module")
def tokens(site: Site) -> dict[str, str]:
    """A token of each user and of the admin, made over the socket as each would."""
    u1, u2 = site.users
    return {user: site.json(user, "cigri", "token", "create", "--ttl", "1h", "--note", "dashboard test")["token"]
            for user in (u1, u2, SERVICE)}


@pytest.fixture(scope="module")
def live(site: Site) -> int:
    """A campaign of the first user with two tasks that run for ten minutes on the local cluster:
    steady (both running) once the fixture returns."""
    u1, _ = site.users
    program = site.script("long.sh", "sleep 600\n")
    campaign_id = site.submit(u1, site.jdl(u1, "live", exec_file=str(program), nb_jobs=2))
    wait_for(lambda: api(site, u1, f"/campaigns/{campaign_id}")["tasks"]["running"] == 2, 120,
             "the live campaign's two tasks to run", step=0.5)
    return campaign_id


FAILING = 60  # tasks of the failing campaign: more than a page of the tasks page


@pytest.fixture(scope="module")
def failing(site: Site) -> int:
    """A campaign of the first user whose tasks all fail on their own input, each saying which
    on its stderr (issue 36: ``error: input 9 is corrupt (checksum mismatch)``, ``… input 18
    …``), run to its end on the local cluster."""
    u1, _ = site.users
    program = site.script("corrupt.sh", 'echo "reading input $2"\n'
                                        'echo "error: input $2 is corrupt (checksum mismatch)" >&2\nexit 1\n')
    campaign_id = site.submit(u1, site.jdl(u1, "corrupt", exec_file=str(program),
                                           params=[f"t{i} {9 * (i + 1)}" for i in range(FAILING)]))
    assert site.drain(u1, campaign_id, timeout=300)["tasks"]["failed"] == FAILING
    return campaign_id


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists() or not CHROMEDRIVER.exists():
        unavailable("Debian's chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,1000", "--disable-background-networking", "--disable-component-update",
                     "--disable-default-apps", "--disable-sync", "--no-first-run", "--metrics-recording-only"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console: CSP violations land there
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(60)
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


# --- helpers ---------------------------------------------------------------------------------

def api(site: Site, user: str, path: str) -> Any:
    """GET ``path`` of the API as ``user``, over the socket (the kernel names them)."""
    [(status, body, _)] = site.http(user, [("GET", path, {})])
    assert status == 200, (path, status, body)
    return body


def login(site: Site, browser: Any, token: str, path: str = "/") -> None:
    browser.delete_all_cookies()
    browser.get(site.url + path)
    assert "/login" in browser.current_url
    browser.find_element(By.ID, "token").send_keys(token)
    follow(browser, "#login")


def follow(browser: Any, selector: str) -> None:
    """Click what ``selector`` names (a link or a form's button) and wait for the next page."""
    page = browser.find_element(By.TAG_NAME, "html")
    browser.find_element(By.CSS_SELECTOR, selector).click()
    WebDriverWait(browser, 60).until(lambda _: replaced(page))


def replaced(page: Any) -> bool:
    """Whether ``page`` (an element) left the document: stale, or, when chromedriver is asked in
    the middle of the swap, "does not belong to the document" (which staleness_of lets through)."""
    try:
        page.is_enabled()
    except StaleElementReferenceException:
        return True
    except WebDriverException as error:
        if "does not belong to the document" in str(error):
            return True
        raise
    return False


def shot(browser: Any, name: str) -> None:
    """The whole page as a PNG under tests/artifacts/."""
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1280, min(max(height + 120, 600), 4000))
    browser.save_screenshot(str(ARTIFACTS / f"dashboard-{name}.png"))
    browser.set_window_size(1280, 1000)


def text(browser: Any, selector: str) -> str:
    return str(browser.find_element(By.CSS_SELECTOR, selector).text)


def value(shown: str) -> float | None:
    """A number as a page prints it (thin-space thousands, a dash for none)."""
    shown = shown.replace("\u2009", "").replace("%", "").strip()
    return None if shown == "—" else float(shown)


def figure(number: float | None, digits: int = 1) -> float | None:
    return None if number is None else round(number, digits)


def fields(browser: Any, scope: str) -> dict[str, str]:
    """The ``data-field`` elements under ``scope``, by field."""
    return {element.get_attribute("data-field"): element.text
            for element in browser.find_elements(By.CSS_SELECTOR, f"{scope} [data-field]")}


def page_json(browser: Any, site: Site, path: str) -> Any:
    """A JSON answer as the browser shows it (with its session cookie)."""
    browser.get(site.url + path)
    return json.loads(browser.find_element(By.TAG_NAME, "pre").text)


def refresh_period(browser: Any) -> int | None:
    """The seconds of the page's ``meta`` refresh, None without one."""
    metas = browser.find_elements(By.CSS_SELECTOR, 'meta[http-equiv="refresh"]')
    return int(metas[0].get_attribute("content")) if metas else None


def plot_area(chart: Any) -> tuple[float, float, float, float]:
    """A chart's axes, in its viewBox's units: left, right, top (the highest gridline), bottom."""
    x_axis, y_axis = chart.find_elements(By.CSS_SELECTOR, "line.axis")[-2:]
    tops = [float(line.get_attribute("y1")) for line in chart.find_elements(By.CSS_SELECTOR, "line.gridline")]
    return (float(x_axis.get_attribute("x1")), float(x_axis.get_attribute("x2")), min(tops),
            float(x_axis.get_attribute("y1")))


def points(path: Any) -> list[tuple[float, float]]:
    """The points of a series' SVG path (``M x y L x y …``; a lone point's ``l0 0`` adds none)."""
    numbers = [float(n) for n in re.findall(r"(?<![a-z])-?\d+(?:\.\d+)?", path.get_attribute("d").replace("l0 0", ""))]
    return list(zip(numbers[::2], numbers[1::2]))


def assert_inside_axes(chart: Any) -> None:
    """Every line of the chart within its axes (they ran past the x axis, issue 36)."""
    left, right, top, bottom = plot_area(chart)
    for path in chart.find_elements(By.CSS_SELECTOR, "path.series"):
        for x, y in points(path):
            assert left - 0.05 <= x <= right + 0.05 and top - 0.05 <= y <= bottom + 0.05, \
                (path.get_attribute("data-series"), x, y, (left, right, top, bottom))


def assert_page_wide(browser: Any, chart: Any) -> None:
    """The chart takes the page's width (it was 600 px in a 1,400 px window)."""
    main = browser.find_element(By.TAG_NAME, "main")
    padding = browser.execute_script("const s = getComputedStyle(arguments[0]); "
                                     "return parseFloat(s.paddingLeft) + parseFloat(s.paddingRight)", main)
    assert chart.size["width"] >= main.size["width"] - padding - 2, (chart.size, main.size)


def session_client(site: Site, browser: Any) -> httpx.Client:
    """An HTTP client holding the browser's session cookie: what a forged request would carry."""
    cookie = browser.get_cookie("cigri_session")
    assert cookie is not None
    return httpx.Client(base_url=site.url, cookies={"cigri_session": cookie["value"]}, follow_redirects=False)


# --- tests -----------------------------------------------------------------------------------

def test_a_token_logs_in_with_a_strict_httponly_session(site: Site, browser: Any, tokens: dict[str, str]) -> None:
    u1, _ = site.users
    browser.delete_all_cookies()
    browser.get(site.url + "/campaigns")
    assert browser.current_url.startswith(site.url + "/login?next=")
    browser.find_element(By.ID, "token").send_keys("cigri_not-a-token")
    follow(browser, "#login")
    assert "unknown, expired or revoked" in text(browser, "#error")
    assert browser.get_cookie("cigri_session") is None
    shot(browser, "login")
    login(site, browser, tokens[u1], "/campaigns")
    assert browser.current_url == site.url + "/campaigns"  # back where it was going
    assert text(browser, "#viewer") == u1
    cookie = browser.get_cookie("cigri_session")
    assert cookie["httpOnly"] is True and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
    assert browser.execute_script("return document.cookie") == ""  # no script reads it


def test_the_grid_page_shows_the_apis_clusters_and_usage(site: Site, browser: Any, tokens: dict[str, str],
                                                         live: int) -> None:
    u1, _ = site.users
    login(site, browser, tokens[u1])
    clusters = {c["name"]: c for c in api(site, u1, "/clusters")}
    open_events = Counter(e["cluster"] for e in api(site, u1, "/events") if e["cluster"])
    cards = browser.find_elements(By.CSS_SELECTOR, "[data-cluster]")
    assert sorted(card.get_attribute("data-cluster") for card in cards) == sorted(clusters) == ["local", "simA", "simB"]
    for name, cluster in clusters.items():
        shown = fields(browser, f'[data-cluster="{name}"]')
        for key in ("total_slots", "free_slots", "used_by_cigri", "queued_by_cigri"):
            assert value(shown[key]) == cluster[key], (name, key)
        assert value(shown["open_events"]) == open_events[name]
    assert value(fields(browser, '[data-cluster="local"]')["used_by_cigri"]) == 2  # the live campaign
    assert sum(open_events.values()) > 0
    charts = browser.find_elements(By.CSS_SELECTOR, "#usage figure.chart svg")
    assert len(charts) == 3
    for chart in charts:
        assert [p.get_attribute("data-series") for p in chart.find_elements(By.CSS_SELECTOR, "path.series")] == [
            "total slots", "used slots", "cigri running", "cigri waiting"]
        assert chart.find_elements(By.CSS_SELECTOR, "text.label")[0].text == "slots (cores)"
        assert_inside_axes(chart)
        assert_page_wide(browser, chart)
    # By default the window fits the grid's age: a month of samples here, so a day at most.
    assert text(browser, "#range-fit") == "its life, a day at most: 1d 00h"
    window = dict(pair.split("=") for pair in
                  browser.find_element(By.ID, "usage-json").get_attribute("href").split("?", 1)[1].split("&"))
    assert float(window["to"]) - float(window["from"]) == 86_400
    assert refresh_period(browser) == 30  # it refreshes by default...
    follow(browser, "#refresh")
    assert refresh_period(browser) is None and text(browser, "#refresh") == "turn on"  # ...until told not to
    follow(browser, "#refresh")
    assert refresh_period(browser) == 30
    browser.get(site.url + "/?refresh=5")
    assert refresh_period(browser) == 10  # never more often than every 10 s
    for bad in ("-1", "soon"):  # one clear answer, the page's own, not a traceback
        browser.get(site.url + f"/?refresh={bad}")
        assert browser.title.startswith("400") and text(browser, "#error").startswith("refresh: "), bad
    browser.get(site.url + "/")
    shot(browser, "grid")
    follow(browser, '.switch a[href="/?range=30d"]')
    assert browser.current_url.endswith("/?range=30d")
    assert browser.find_element(By.CSS_SELECTOR, '.switch [aria-current]').text == "30d"
    shot(browser, "grid-30d")
    window = browser.find_element(By.ID, "usage-json").get_attribute("href").split("?", 1)[1]
    csv_link = browser.find_element(By.ID, "usage-csv").get_attribute("href")
    downloaded = page_json(browser, site, "/grid/usage.json?" + window)
    expected = api(site, u1, "/gridusage?" + window)
    settled = downloaded["to"] - 10  # a sample a cycle was writing as the page was read may follow
    for document in (downloaded, expected):
        document["clusters"] = {name: [row for row in rows if row["at"] < settled]
                                for name, rows in document["clusters"].items()}
    assert downloaded == expected
    assert len(downloaded["clusters"]["simA"]) > 200  # a month of samples, in buckets
    with session_client(site, browser) as client:
        lines = client.get(csv_link).text.splitlines()
    assert lines[0] == "cluster,at,at_utc,total_slots,used_slots,free_slots,cigri_running,cigri_waiting,samples"
    rows = [line.split(",") for line in lines[1:] if line.startswith("simA,")]
    assert [float(row[6]) for row in rows if float(row[1]) < settled] == [
        bucket["cigri_running"] for bucket in expected["clusters"]["simA"]]


def test_the_campaigns_page_lists_the_viewers_newest_first_with_the_apis_figures(
        site: Site, browser: Any, tokens: dict[str, str], live: int) -> None:
    u1, _ = site.users
    login(site, browser, tokens[u1], "/campaigns")
    theirs = {c["id"]: c for c in api(site, u1, f"/campaigns?user={u1}&all=true")}
    rows = browser.find_elements(By.CSS_SELECTOR, "#campaigns tbody tr[data-campaign]")
    ids = [int(row.get_attribute("data-campaign")) for row in rows]
    assert ids == sorted(theirs, reverse=True)[:50] and ids[0] == live
    for campaign_id in ids:
        shown, expected = fields(browser, f'tr[data-campaign="{campaign_id}"]'), theirs[campaign_id]
        assert shown["user"] == u1 and shown["state"] == expected["state"]
        assert value(shown["progress"]) == figure(expected["progress"])
        for key in ("total", "running", "waiting", "pending", "failed"):
            assert value(shown[f"tasks.{key}"]) == expected["tasks"][key], (campaign_id, key)
        if expected["state"] != "in_treatment":  # a live campaign's throughput moves with the clock
            assert value(shown["throughput_per_hour"]) == figure(expected["throughput_per_hour"]), campaign_id
    shot(browser, "campaigns")
    follow(browser, "#next")
    second = [int(row.get_attribute("data-campaign"))
              for row in browser.find_elements(By.CSS_SELECTOR, "#campaigns tbody tr[data-campaign]")]
    assert second == sorted(theirs, reverse=True)[50:100]
    browser.get(site.url + "/campaigns?state=failed")
    failed = [int(row.get_attribute("data-campaign"))
              for row in browser.find_elements(By.CSS_SELECTOR, "#campaigns tbody tr[data-campaign]")]
    assert failed and failed == sorted((i for i, c in theirs.items() if c["state"] == "failed"), reverse=True)[:50]
    assert not browser.find_elements(By.CSS_SELECTOR, '[name="user"]')  # no one else's, for a user
    assert refresh_period(browser) == 30


def test_a_campaigns_page_shows_the_apis_figures_events_failed_tasks_and_history(
        site: Site, browser: Any, tokens: dict[str, str]) -> None:
    u1, _ = site.users
    failed_id = api(site, u1, f"/campaigns?user={u1}&state=failed")[0]["id"]
    login(site, browser, tokens[u1], f"/campaigns/{failed_id}")
    expected = api(site, u1, f"/campaigns/{failed_id}")
    shown = fields(browser, "#figures")
    assert text(browser, "#state") == expected["state"] == "failed"
    assert value(shown["progress"]) == figure(expected["progress"])
    for key in ("total", "pending", "waiting", "running", "terminated", "failed", "cancelled"):
        assert value(shown[f"tasks.{key}"]) == expected["tasks"][key], key
    assert value(shown["throughput_per_hour"]) == figure(expected["throughput_per_hour"])
    assert value(shown["open_events"]) == expected["open_events"] == 1
    for cluster in expected["clusters"]:
        row = fields(browser, f'#clusters tr[data-cluster="{cluster["cluster"]}"]')
        assert value(row["jobs.terminated"]) == cluster["jobs"]["terminated"]
        assert value(row["jobs.ended_otherwise"]) == cluster["jobs"]["ended_otherwise"]
        assert value(row["throughput_per_hour"]) == figure(cluster["throughput_per_hour"])
    events = api(site, u1, f"/campaigns/{failed_id}/events")
    assert [int(e.get_attribute("data-event")) for e in browser.find_elements(By.CSS_SELECTOR, "#events .event")] == [
        e["id"] for e in events]
    assert text(browser, "#events pre.stderr") == ""  # collapsed: the group's line only
    assert text(browser, "#events summary .what") == events[0]["summary"]
    browser.find_element(By.CSS_SELECTOR, "#events summary").click()
    assert "ValueError: bad input t0" in text(browser, "#events pre.stderr") == events[0]["stderr_tail"].strip()
    assert refresh_period(browser) is None  # an ended campaign's figures no longer move
    failed_tasks = api(site, u1, f"/campaigns/{failed_id}/tasks?state=failed")
    assert [int(t.get_attribute("data-task")) for t in browser.find_elements(By.CSS_SELECTOR, "#failed-tasks tr[data-task]")] \
        == [t["id"] for t in failed_tasks] and len(failed_tasks) == 1
    assert not browser.find_elements(By.ID, "actions")  # an ended campaign has no button
    throughput = browser.find_element(By.CSS_SELECTOR, "#throughput svg")
    names = [p.get_attribute("data-series") for p in throughput.find_elements(By.CSS_SELECTOR, "path.series")]
    assert names[:len(expected["clusters"])] == sorted(c["cluster"] for c in expected["clusters"])
    for chart in (throughput, browser.find_element(By.CSS_SELECTOR, "#progress svg")):
        assert_inside_axes(chart)
        assert_page_wide(browser, chart)
    assert_progress_ends_at(browser, expected["progress"])
    shot(browser, "campaign")
    window = browser.find_element(By.ID, "history-json").get_attribute("href").split("?", 1)[1]
    history = page_json(browser, site, f"/campaigns/{failed_id}/history.json?{window}")
    assert history == api(site, u1, f"/campaigns/{failed_id}/history?{window}")
    assert history["progress"][-1]["cumulative"] == expected["tasks"]["terminated"]


def assert_progress_ends_at(browser: Any, progress: float) -> None:
    """The progress plot's line of ended tasks ends at the right axis, at the page's figure (it
    ended at 89 % where the figure said 100 %: failed tasks were left out)."""
    chart = browser.find_element(By.CSS_SELECTOR, "#progress svg")
    left, right, top, bottom = plot_area(chart)
    ended = chart.find_element(By.CSS_SELECTOR, 'path.series[data-series="tasks ended (terminated or failed)"]')
    x, y = points(ended)[-1]
    assert abs(x - right) <= 0.1 and abs(100 * (bottom - y) / (bottom - top) - progress) <= 0.1, (x, y, progress)


def test_a_campaign_failing_on_its_inputs_shows_them_first_grouped_with_their_outputs(
        site: Site, browser: Any, tokens: dict[str, str], failing: int) -> None:
    """Issue 36's campaign: every task failed on its own input. One collapsed group of them, the
    failed tasks first, each linked to its job's stdout and stderr; a page as long with 60
    failures as with a few, the rest a page at a time on the tasks page, found by name."""
    u1, u2 = site.users
    login(site, browser, tokens[u1], f"/campaigns/{failing}")
    expected = api(site, u1, f"/campaigns/{failing}")
    assert [section.get_attribute("id") for section in browser.find_elements(By.CSS_SELECTOR, "main > section")] == [
        "figures", "failed", "events", "per-cluster", "history"]
    [event] = [e for e in api(site, u1, f"/campaigns/{failing}/events") if e["code"] == "EXIT_ERROR"]
    [group] = browser.find_elements(By.CSS_SELECTOR, f'#events .event[data-event="{event["id"]}"] details')
    assert group.get_attribute("open") is None  # collapsed
    assert text(browser, "#events summary .what") == "error: input <n> is corrupt (checksum mismatch)"
    assert text(browser, "#events summary .count") == f"×{FAILING}"
    rows = browser.find_elements(By.CSS_SELECTOR, "#failed-tasks tr[data-task]")
    assert len(rows) == 10 and text(browser, "#all-failed") == f"All {FAILING} failed tasks, a page at a time"
    height = browser.execute_script("return document.documentElement.scrollHeight")
    assert height < 2400, height  # 3,906 px with 16 failures before
    assert_progress_ends_at(browser, expected["progress"])
    assert expected["progress"] == 100
    shot(browser, "campaign-failures")

    browser.find_element(By.CSS_SELECTOR, "#events summary").click()
    examples = browser.find_elements(By.CSS_SELECTOR, "#events ul.examples li[data-job]")
    assert len(examples) == 2 and "and 58 more" in text(browser, "#events ul.examples")
    for example in examples:
        name = re.match(r"task (t\d+), ", example.text)[1]
        assert example.text.endswith(f": error: input {9 * (int(name[1:]) + 1)} is corrupt (checksum mismatch)")
    shot(browser, "campaign-failures-open")

    first = rows[0].get_attribute("data-task")
    name = rows[0].find_element(By.CSS_SELECTOR, '[data-field="name"]').text
    follow(browser, f'#failed-tasks tr[data-task="{first}"] a.stderr')
    number = 9 * (int(name[1:]) + 1)
    assert text(browser, "#output") == f"error: input {number} is corrupt (checksum mismatch)"
    assert text(browser, "#task") == name
    job_page = browser.current_url
    follow(browser, "#other-stream")
    assert text(browser, "#output") == f"reading input {number}"
    shot(browser, "job-output")

    browser.get(site.url + f"/campaigns/{failing}")
    follow(browser, "#find-task")
    assert refresh_period(browser) is None  # one types into it: it does not refresh
    browser.find_element(By.ID, "name").send_keys("t1")
    follow(browser, "#find")
    found = [row.find_element(By.CSS_SELECTOR, '[data-field="name"]').text
             for row in browser.find_elements(By.CSS_SELECTOR, "#tasks tr[data-task]")]
    assert found == ["t1"] + [f"t1{i}" for i in range(10)]
    name_field = browser.find_element(By.ID, "name")
    name_field.clear()
    name_field.send_keys("t?")
    follow(browser, "#find")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#tasks tr[data-task]")) == 10
    shot(browser, "tasks")
    browser.get(site.url + f"/campaigns/{failing}/tasks?state=failed")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#tasks tr[data-task]")) == 50
    follow(browser, "#next")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#tasks tr[data-task]")) == FAILING - 50
    assert not browser.find_elements(By.ID, "next")
    browser.get(site.url + f"/campaigns/{failing}/tasks?page={10**18}")  # past what SQLite binds: no 500
    assert browser.title.startswith("400") and "offset: must be" in text(browser, "#error")

    login(site, browser, tokens[u2], f"/campaigns/{failing}")
    assert browser.title.startswith("404")
    browser.get(job_page)  # another user's job: its output is not theirs to read
    assert browser.title.startswith("404") and "no such job" in text(browser, "#error")


def test_the_events_page_lists_the_apis_events_and_fixes_the_viewers(site: Site, browser: Any,
                                                                       tokens: dict[str, str]) -> None:
    u1, _ = site.users
    login(site, browser, tokens[u1], "/events")
    events = api(site, u1, "/events")
    shown = [int(e.get_attribute("data-event")) for e in browser.find_elements(By.CSS_SELECTOR, ".event")]
    assert sorted(shown) == sorted(e["id"] for e in events)
    cluster_event = next(e for e in events if e["campaign_id"] is None)
    assert not browser.find_elements(By.CSS_SELECTOR, f'.event[data-event="{cluster_event["id"]}"] form')  # admins'
    shot(browser, "events")
    mine = next(e for e in events if e["campaign_id"] is not None)
    follow(browser, f'.event[data-event="{mine["id"]}"] button[value="no"]')
    assert text(browser, "#done") == "Closed 1 event(s), resubmitted 0 task(s)."
    [(status, closed, _)] = site.http(u1, [("GET", f"/events/{mine['id']}", {})])
    assert status == 200 and closed["state"] == "closed"


def test_the_admin_pages_show_the_apis_shares_users_classes_and_tokens(site: Site, browser: Any,
                                                                       tokens: dict[str, str], live: int) -> None:
    u1, _ = site.users
    login(site, browser, tokens[u1], "/shares")
    assert "needs the admin role" in text(browser, "#error")
    login(site, browser, tokens[SERVICE], "/shares")
    shares = api(site, SERVICE, "/shares")
    for group, key in (("classes", "data-class"), ("users", "data-user")):
        for entry in shares[group]:
            shown = fields(browser, f'#{group} tr[{key}="{entry["name"]}"]')
            for name in ("campaigns", "demand", "running", "queued", "target", "start", "preempt"):
                assert value(shown[name]) == entry[name], (group, entry["name"], name)
    [campaign] = [c for c in shares["campaigns"] if c["id"] == live]
    row = fields(browser, f'#share-campaigns tr[data-campaign="{live}"]')
    assert row["running"] == "local: 2" == ", ".join(f"{k}: {v}" for k, v in sorted(campaign["running"].items()))
    assert row["reason"] == campaign["reason"]
    for cluster in shares["clusters"]:
        shown = fields(browser, f'#share-clusters tr[data-cluster="{cluster["name"]}"]')
        names = ("cores", "running_cores", "target_cores", "running", "queued", "target")
        assert [value(shown[name]) for name in names] == [cluster[name] for name in names]
    assert len(browser.find_elements(By.CSS_SELECTOR, "figure.chart svg")) == 3  # classes, users, campaigns
    shot(browser, "shares")
    browser.get(site.url + "/admin")
    users = api(site, SERVICE, "/users")["users"]
    assert [r.get_attribute("data-user") for r in browser.find_elements(By.CSS_SELECTOR, "#users tr[data-user]")] == [
        u["name"] for u in users]
    for user in users:
        shown = fields(browser, f'#users tr[data-user="{user["name"]}"]')
        for name in ("campaigns", "pending", "waiting", "running"):
            assert value(shown[name]) == user[name], (user["name"], name)
    classes = api(site, SERVICE, "/classes")
    assert [r.get_attribute("data-class") for r in browser.find_elements(By.CSS_SELECTOR, "#classes tr")[1:]] == [
        c["name"] for c in classes]
    all_tokens = api(site, SERVICE, "/tokens?all=true")
    assert sorted(int(r.get_attribute("data-token")) for r in browser.find_elements(By.CSS_SELECTOR, "tr[data-token]")) \
        == sorted(t["id"] for t in all_tokens)
    assert not any(secret in browser.page_source for secret in tokens.values())  # never a secret
    shot(browser, "admin")


def test_another_users_campaign_page_is_a_404(site: Site, browser: Any, tokens: dict[str, str], live: int) -> None:
    _, u2 = site.users
    login(site, browser, tokens[u2], f"/campaigns/{live}")
    assert browser.title.startswith("404")
    assert text(browser, "#error") == f"campaign {live}: no such campaign"
    job_id = api(site, site.users[0], f"/campaigns/{live}/jobs")[0]["id"]
    with session_client(site, browser) as client:
        for path in (f"/campaigns/{live}", f"/campaigns/{live}/history.json", f"/campaigns/{live}/history.csv",
                     f"/campaigns/{live}/tasks", f"/campaigns/{live}/tasks?name=t*&state=running",
                     f"/jobs/{job_id}/stdout", f"/jobs/{job_id}/stderr"):
            assert client.get(path).status_code == 404, path
        missing = client.get("/campaigns/987654")
        assert missing.status_code == 404 and "campaign 987654: no such campaign" in missing.text
    shot(browser, "not-found")


def test_a_post_without_the_forms_csrf_token_is_refused(site: Site, browser: Any, tokens: dict[str, str],
                                                        live: int) -> None:
    u1, _ = site.users
    login(site, browser, tokens[u1], f"/campaigns/{live}")
    csrf = browser.find_element(By.CSS_SELECTOR, "#actions input[name=csrf]").get_attribute("value")
    with session_client(site, browser) as client:
        for path, form in ((f"/campaigns/{live}/pause", {}), (f"/campaigns/{live}/pause", {"csrf": "0" * 64}),
                           (f"/campaigns/{live}/cancel", {"confirm": "yes"}), ("/events/fix", {"campaign": str(live)}),
                           ("/logout", {})):
            refused = client.post(path, data=form)
            assert refused.status_code == 403 and "CSRF" in refused.text, path
        # The same session with the page's token is heard (a cancel still wants its box ticked):
        unconfirmed = client.post(f"/campaigns/{live}/cancel", data={"csrf": csrf})
        assert unconfirmed.status_code == 400 and "tick the box" in unconfirmed.text
    assert api(site, u1, f"/campaigns/{live}")["state"] == "in_treatment"


def test_the_owner_pauses_resumes_and_cancels_by_clicking(site: Site, browser: Any, tokens: dict[str, str],
                                                          live: int) -> None:
    u1, _ = site.users
    login(site, browser, tokens[u1], f"/campaigns/{live}")
    assert refresh_period(browser) == 30  # a campaign under way refreshes by default
    shot(browser, "campaign-live")
    follow(browser, "#pause")
    assert text(browser, "#done") == f"Campaign {live}: paused."
    assert api(site, u1, f"/campaigns/{live}")["state"] == "paused" == text(browser, "#state")
    follow(browser, "#resume")
    assert api(site, u1, f"/campaigns/{live}")["state"] == "in_treatment"
    browser.find_element(By.ID, "cancel").click()  # the box is not ticked: the browser does not send the form
    assert browser.execute_script("return document.getElementById('confirm-cancel').validity.valueMissing")
    assert api(site, u1, f"/campaigns/{live}")["state"] == "in_treatment"
    browser.find_element(By.ID, "confirm-cancel").click()
    follow(browser, "#cancel")
    assert text(browser, "#done") == f"Campaign {live}: cancelled."
    assert api(site, u1, f"/campaigns/{live}")["state"] == "cancelled"


def test_a_session_ends_with_logout_and_with_its_token(site: Site, browser: Any, tokens: dict[str, str]) -> None:
    u1, _ = site.users
    login(site, browser, tokens[u1])
    old = browser.get_cookie("cigri_session")["value"]
    follow(browser, "form[action='/logout'] button")
    assert browser.current_url == site.url + "/login" and browser.get_cookie("cigri_session") is None
    with httpx.Client(base_url=site.url, cookies={"cigri_session": old}) as client:
        assert client.get("/", follow_redirects=False).headers["location"].startswith("/login?next=%2F&ended=1")
    short = site.json(u1, "cigri", "token", "create", "--ttl", "1h")
    login(site, browser, short["token"])
    assert text(browser, "#viewer") == u1
    site.run(u1, "cigri", "token", "revoke", str(short["id"]))
    browser.get(site.url + "/")
    assert "/login" in browser.current_url  # the next page asked for the token again
    assert "revoked" in text(browser, "p.notice")


def test_the_api_docs_come_from_the_server_under_its_policy(site: Site, browser: Any) -> None:
    """``/api/v1/docs`` loads Swagger UI from the server itself, under the dashboard's
    Content-Security-Policy (no CDN, no inline script), and it renders the contract."""
    page = httpx.get(site.url + "/api/v1/docs")
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert not re.search(r"(src|href)=\"(https?:)?//", page.text), "an asset from elsewhere"
    assert "<script>" not in page.text, "an inline script"
    for asset in re.findall(r'(?:src|href)="(/[^"]+)"', page.text):
        assert httpx.get(site.url + asset).status_code == 200, asset
    browser.get_log("browser")  # what earlier pages logged
    browser.get(site.url + "/api/v1/docs")
    WebDriverWait(browser, 60).until(lambda b: b.find_elements(By.CSS_SELECTOR, ".swagger-ui .info .title"))
    assert text(browser, ".swagger-ui .info .title").startswith("cigri")
    assert browser.find_elements(By.CSS_SELECTOR, ".opblock-summary-path[data-path='/api/v1/campaigns']")
    shot(browser, "api-docs")
    refused = [entry["message"] for entry in browser.get_log("browser") if "Content Security Policy" in entry["message"]]
    assert not refused, refused


def test_a_trusted_front_names_the_user_of_the_pages_too(site: Site, live: int) -> None:
    """From a ``server.trusted_proxies`` address, with the front's secret, the ``X-CIGRI-USER``
    header identifies the viewer without a login, as for the API; its forms still need the
    page's CSRF token."""
    u1, u2 = site.users
    secret = {"X-CIGRI-FRONT-SECRET": site.front_secret}
    with httpx.Client(base_url=site.url, headers={"X-CIGRI-USER": u2, **secret}, follow_redirects=False) as front:
        page = front.get("/campaigns")
        assert page.status_code == 200 and f'<span id="viewer">{u2}</span>' in page.text
        assert front.get(f"/campaigns/{live}").status_code == 404
    with httpx.Client(base_url=site.url, headers={"X-CIGRI-USER": u1, **secret}, follow_redirects=False) as front:
        paused = next(c["id"] for c in api(site, u1, f"/campaigns?user={u1}&state=paused"))
        page = front.get(f"/campaigns/{paused}").text
        csrf = re.search(r'name="csrf" value="([0-9a-f]{64})"', page)[1]
        assert front.post(f"/campaigns/{paused}/resume").status_code == 403
        assert front.post(f"/campaigns/{paused}/pause", data={"csrf": csrf}).status_code == 409  # paused already
    assert api(site, u1, f"/campaigns/{paused}")["state"] == "paused"
