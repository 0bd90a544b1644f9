"""The viewer in a real browser: Debian's headless Chromium, driven by selenium, on each store.

One browser for the module and one ``palimpsest serve --transport http`` per store,
started on a store filled and compacted beforehand (170 messages: five L1 summaries
under one L2, twenty messages not yet summarized) with a tokens file of two tokens,
``claude`` and ``windsurf``. Each test signs in through the login form, like a person,
and saves a screenshot under its own temporary directory. The browser resolves
``attacker.example`` to 127.0.0.1, as a page that rebinds its own name would, to show
that such a page gets nothing; and the viewer's pages run under their Content Security
Policy without a violation, and refuse to be framed.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.models import NewMessage
from palimpsest.scheduler import compaction
from palimpsest.scheduler.summarizers import make_summarizer
from palimpsest.server.settings import Settings
from tests.support.stores import BACKENDS, store_uri, wipe_neo4j
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

PALIMPSEST = str(Path(sys.executable).parent / "palimpsest")
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: A name the browser resolves to loopback: an attacker's page after DNS rebinding.
REBOUND = "attacker.example"
#: Flags for a headless Chromium that reaches nothing but the test's server.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
    f"--host-resolver-rules=MAP {REBOUND} 127.0.0.1",
]
#: Seconds a page or a server may take (guards on waits, never assertions).
WAIT_SECONDS = 60
PHRASE = "the orchid relay listens on port 4417"
MESSAGES = 170


#: The older hooked session's title: its two requests.
OLD_TITLE = "Add JWT auth to the billing API · Why does this screen fail? [image: image/png]"


def content(i: int) -> str:
    text = f"Turn {i}: we changed the retry logic in worker/queue.py once more and ran the tests. " * 2
    return text + (f"Remember: {PHRASE}." if i == 7 else "")


@dataclass
class Site:
    """A running server and what its store is known to hold."""

    base: str
    message_ids: list[str]
    nodes_per_level: dict[int, int]
    top_id: str
    top_text: str
    phrase_summary: str


async def fill(store_url: str) -> tuple[list[str], dict[int, int], str, str, str]:
    """Append and compact the claude thread, add a windsurf one; report what the DAG holds."""
    store = open_store(store_url, Neo4jCredentials())
    await store.initialize()
    try:
        messages = [
            NewMessage(role="user" if i % 2 == 0 else "assistant", content=content(i), message_id=f"m{i}")
            for i in range(MESSAGES)
        ]
        appended = await store.append_messages("claude", "t1", messages, project="demo")
        settings = Settings(store=store_url, summary_model=None)
        await compaction.compact_thread(store, "claude", "t1", settings.compaction, make_summarizer(settings.llm))
        await store.append_messages("windsurf", "w1", [NewMessage(role="user", content="windsurf notes")])
        dag = await store.summary_dag("claude", "t1")
        [top] = [node for node in dag.nodes if node.level == max(n.level for n in dag.nodes)]
        chain = (await store.covered_by([appended.message_ids[7]]))[appended.message_ids[7]]
        levels = dict(Counter(node.level for node in dag.nodes))
        return appended.message_ids, levels, top.id, top.text, chain[0]
    finally:
        await store.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module", params=[pytest.param(b, marks=[pytest.mark.neo4j] * (b == "neo4j")) for b in BACKENDS])
def site(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    """``palimpsest serve`` over HTTP with a tokens file, on a filled store of one backend."""
    root = tmp_path_factory.mktemp(f"site-{request.param}")
    store_url = store_uri(request.param, root)
    if request.param == "neo4j":
        asyncio.run(wipe_neo4j(store_url))
    message_ids, levels, top_id, top_text, phrase_summary = asyncio.run(fill(store_url))
    tokens = root / "tokens.json"
    tokens.write_text(json.dumps({"tok-claude": ["claude"], "tok-windsurf": ["windsurf"]}), encoding="utf-8")
    env = {key: value for key, value in os.environ.items() if not key.startswith("PALIMPSEST_")}
    env.update(PALIMPSEST_STORE=store_url, PALIMPSEST_TOKENS_FILE=str(tokens), PALIMPSEST_SCHEDULER="off")
    port = free_port()
    log = (root / "server.log").open("w")
    process = subprocess.Popen(
        [PALIMPSEST, "serve", "--transport", "http", "--port", str(port)], env=env, stdout=log, stderr=log
    )
    base = f"http://127.0.0.1:{port}"
    try:

        def healthy() -> bool | None:
            try:
                if httpx2.get(f"{base}/health", timeout=10).status_code == 200:
                    return True
            except httpx2.TransportError:
                pass
            assert process.poll() is None, (root / "server.log").read_text()
            return None

        wait_until(healthy, WAIT_SECONDS, "the server never reported itself healthy")
        yield Site(base, message_ids, levels, top_id, top_text, phrase_summary)
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    """One headless Chromium for the module, with a fresh profile."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    with tempfile.TemporaryDirectory(prefix="chromium-") as profile:
        options.add_argument(f"--user-data-dir={profile}")
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
        try:
            yield driver
        finally:
            driver.quit()


def wait(browser: WebDriver) -> WebDriverWait[WebDriver]:
    return WebDriverWait(browser, WAIT_SECONDS)


def sign_in(browser: WebDriver, site: Site, token: str) -> None:
    """Sign out, then sign in through the login form as a person would."""
    browser.get(f"{site.base}/ui/logout")
    browser.get(f"{site.base}/ui/login")
    browser.find_element(By.ID, "token").send_keys(token)
    browser.find_element(By.ID, "sign-in").click()
    wait(browser).until(lambda b: b.current_url == f"{site.base}/ui")


def opened_summary(browser: WebDriver) -> str | None:
    """The id of the summary the side panel shows, if any."""
    found = browser.find_elements(By.CSS_SELECTOR, "#panel article.summary")
    return found[0].get_attribute("data-summary-id") if found else None


def message_seqs(browser: WebDriver) -> list[int]:
    return [int(item.get_attribute("data-seq") or -1) for item in browser.find_elements(By.CSS_SELECTOR, "li.message")]


def test_the_dag_page_draws_each_level_and_opens_a_summary_down_to_its_messages(
    site: Site, browser: WebDriver, tmp_path: Path
) -> None:
    sign_in(browser, site, "tok-claude")
    browser.get(f"{site.base}/ui/thread?p=claude&t=t1")
    drawn = Counter(
        int(node.get_attribute("data-level") or 0) for node in browser.find_elements(By.CSS_SELECTOR, "#dag a.node")
    )
    assert dict(drawn) == site.nodes_per_level
    assert site.nodes_per_level == {1: 5, 2: 1}
    assert len(browser.find_elements(By.CSS_SELECTOR, "#dag .uncovered")) == 1
    assert [cell.text for cell in browser.find_elements(By.CSS_SELECTOR, "table.summaries td.ok")] == ["✓ verifies"] * 6

    browser.find_element(By.ID, f"node-{site.top_id}").click()
    wait(browser).until(lambda b: opened_summary(b) == site.top_id)
    shown = browser.find_element(By.CSS_SELECTOR, "#panel .summary-text").text
    assert shown.split() == site.top_text.split()
    assert "digest verifies" in browser.find_element(By.CSS_SELECTOR, "#panel .meta").text
    assert len(browser.find_elements(By.CSS_SELECTOR, "#panel ul.children a[data-summary]")) == 4

    browser.find_element(By.CSS_SELECTOR, "#panel button.expand").click()
    wait(browser).until(lambda b: len(message_seqs(b)) == 50)
    assert message_seqs(browser) == list(range(50))
    first = browser.find_element(By.CSS_SELECTOR, "li.message pre").text
    assert first.split() == content(0).split()
    browser.find_element(By.CSS_SELECTOR, "#panel button.more").click()
    wait(browser).until(lambda b: len(message_seqs(b)) == 100)
    assert message_seqs(browser) == list(range(100))
    browser.save_screenshot(str(tmp_path / "dag.png"))
    assert (tmp_path / "dag.png").stat().st_size > 0


def test_a_search_hit_leads_to_its_summary(site: Site, browser: WebDriver, tmp_path: Path) -> None:
    sign_in(browser, site, "tok-claude")
    browser.get(f"{site.base}/ui/partition?p=claude")
    row = browser.find_element(By.CSS_SELECTOR, 'tr[data-thread="t1"]')
    cells = [row.find_element(By.CSS_SELECTOR, f"td.{name}").text for name in ("agent", "project", "count")]
    assert cells == ["claude", "demo", "170"]
    browser.find_element(By.ID, "q").send_keys("orchid relay")
    browser.find_element(By.CSS_SELECTOR, "form.search button").click()
    hit = wait(browser).until(lambda b: b.find_element(By.CSS_SELECTOR, f'li.hit[data-id="{site.message_ids[7]}"]'))
    assert PHRASE in hit.find_element(By.CSS_SELECTOR, ".snippet").text
    hit.find_element(By.CSS_SELECTOR, "a.summary-link").click()
    wait(browser).until(lambda b: opened_summary(b) == site.phrase_summary)
    assert "selected" in (browser.find_element(By.ID, f"node-{site.phrase_summary}").get_attribute("class") or "")
    assert f"s={site.phrase_summary}#seq-" in browser.current_url
    browser.save_screenshot(str(tmp_path / "search-hit.png"))
    assert (tmp_path / "search-hit.png").stat().st_size > 0


def test_a_token_for_another_partition_sees_nothing_of_it(site: Site, browser: WebDriver, tmp_path: Path) -> None:
    sign_in(browser, site, "tok-windsurf")
    partitions = [
        row.get_attribute("data-partition")
        for row in browser.find_elements(By.CSS_SELECTOR, "#partitions tr[data-partition]")
    ]
    assert partitions == ["windsurf"]
    browser.get(f"{site.base}/ui/thread?p=claude&t=t1")
    assert browser.find_element(By.ID, "error").text == "unknown partition id 'claude'"
    assert not browser.find_elements(By.CSS_SELECTOR, "#dag") and "orchid" not in browser.page_source
    browser.get(f"{site.base}/ui/summary?p=windsurf&s={site.top_id}")
    assert browser.find_element(By.ID, "error").text == f"unknown summary id '{site.top_id}'"
    browser.get(f"{site.base}/ui/search?p=windsurf&q=orchid+relay")
    assert browser.find_element(By.ID, "no-hits").text == "Nothing found."
    browser.save_screenshot(str(tmp_path / "other-partition.png"))
    assert (tmp_path / "other-partition.png").stat().st_size > 0


def console(browser: WebDriver) -> list[str]:
    """What the pages logged to the console since the last call (Content Security Policy reports among it)."""
    return [entry["message"] for entry in browser.get_log("browser")]


def test_the_pages_run_under_their_policy_and_refuse_to_be_framed(
    site: Site, browser: WebDriver, tmp_path: Path
) -> None:
    sign_in(browser, site, "tok-claude")
    console(browser)
    browser.get(f"{site.base}/ui/thread?p=claude&t=t1")
    browser.find_element(By.ID, f"node-{site.top_id}").click()  # viewer.js fetches the panel
    wait(browser).until(lambda b: opened_summary(b) == site.top_id)
    browser.get(f"{site.base}/ui/search?p=claude&q=orchid+relay")
    assert browser.find_elements(By.CSS_SELECTOR, "li.hit")
    assert [line for line in console(browser) if "Content Security Policy" in line] == []

    browser.get(f"{site.base}/ui")
    browser.execute_script(
        "const frame = document.createElement('iframe');"
        "frame.id = 'framed'; frame.src = '/ui/partition?p=claude'; document.body.appendChild(frame);"
    )
    wait(browser).until(lambda b: any("frame-ancestors 'none'" in line for line in console(b)))
    browser.switch_to.frame(browser.find_element(By.ID, "framed"))
    assert not browser.find_elements(By.ID, "threads") and 'data-thread="t1"' not in browser.page_source
    browser.switch_to.default_content()
    browser.save_screenshot(str(tmp_path / "framed.png"))
    assert (tmp_path / "framed.png").stat().st_size > 0


def test_a_page_under_a_rebound_name_gets_nothing(site: Site, browser: WebDriver, tmp_path: Path) -> None:
    sign_in(browser, site, "tok-claude")
    port = site.base.rsplit(":", 1)[1]
    browser.get(f"http://{REBOUND}:{port}/ui/thread?p=claude&t=t1")
    assert browser.find_element(By.TAG_NAME, "body").text == "Misdirected Request"
    # Its own script, same-origin as far as the browser knows, reaches neither the viewer nor MCP.
    statuses = browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "const initialize = {jsonrpc: '2.0', id: 1, method: 'initialize', params: {protocolVersion: '2025-11-25',"
        " capabilities: {}, clientInfo: {name: 'page', version: '1'}}};"
        "Promise.all([fetch('/ui/partition?p=claude'), fetch('/health'), fetch('/mcp', {method: 'POST',"
        " headers: {'Content-Type': 'application/json', Accept: 'application/json, text/event-stream'},"
        " body: JSON.stringify(initialize)})]).then((answers) => done(answers.map((a) => a.status)));"
    )
    assert statuses == [421, 421, 421]
    assert "orchid" not in browser.page_source
    browser.save_screenshot(str(tmp_path / "rebound.png"))
    assert (tmp_path / "rebound.png").stat().st_size > 0


# -- the viewer people open every day (issue 35): sessions the Claude Code hook stored -------


@dataclass
class HookedSite:
    """A server without tokens (this machine only) on the sessions of tests/test_ui_sessions.py."""

    base: str
    known: dict[str, Any]


@pytest.fixture(scope="module")
def hooked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HookedSite]:
    """``palimpsest serve`` over HTTP on a SQLite store the real hook filled."""
    from tests.support.viewer_sessions import fill as fill_hooked

    root = tmp_path_factory.mktemp("hooked")
    store_url = f"sqlite:///{root / 'memory.db'}"
    known = asyncio.run(fill_hooked(store_url, root / "transcripts"))
    env = {key: value for key, value in os.environ.items() if not key.startswith("PALIMPSEST_")}
    env.update(PALIMPSEST_STORE=store_url, PALIMPSEST_SCHEDULER="off", PALIMPSEST_EMBEDDER="none")
    port = free_port()
    log = (root / "server.log").open("w")
    process = subprocess.Popen(
        [PALIMPSEST, "serve", "--transport", "http", "--port", str(port)], env=env, stdout=log, stderr=log
    )
    base = f"http://127.0.0.1:{port}"
    try:

        def healthy() -> bool | None:
            try:
                if httpx2.get(f"{base}/health", timeout=10).status_code == 200:
                    return True
            except httpx2.TransportError:
                pass
            assert process.poll() is None, (root / "server.log").read_text()
            return None

        wait_until(healthy, WAIT_SECONDS, "the server never reported itself healthy")
        yield HookedSite(base, known)
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def titles(browser: WebDriver) -> list[str]:
    return [link.text for link in browser.find_elements(By.CSS_SELECTOR, "#sessions a.session-title")]


def test_sessions_are_named_sorted_and_reached_by_keyboard(
    hooked: HookedSite, browser: WebDriver, tmp_path: Path
) -> None:
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    console(browser)
    browser.get(f"{hooked.base}/ui/sessions")
    # Each session titled by its requests, in order.
    assert titles(browser) == ["Fix the flaky refresh test in tests/test_refresh.py", OLD_TITLE]
    assert browser.find_element(By.TAG_NAME, "html").get_attribute("lang") == "en"
    browser.find_element(By.CSS_SELECTOR, 'a[data-sort="oldest"]').click()
    wait(browser).until(lambda b: titles(b)[0] == OLD_TITLE)
    Select(browser.find_element(By.ID, "project")).select_by_visible_text("billing-api")
    Select(browser.find_element(By.ID, "sort")).select_by_value("messages")
    browser.find_element(By.ID, "filter").click()  # a plain GET form: no script involved
    wait(browser).until(lambda b: "project=billing-api" in b.current_url and "sort=messages" in b.current_url)
    assert titles(browser)[0] == "Fix the flaky refresh test in tests/test_refresh.py"
    # The first Tab reaches the skip link, which moves focus to the page's main landmark.
    browser.find_element(By.TAG_NAME, "body").send_keys(Keys.TAB)
    skip = browser.switch_to.active_element
    assert (skip.text, skip.get_attribute("href") or "") == (
        "Skip to content",
        f"{browser.current_url.split('#')[0]}#main",
    )
    assert skip.value_of_css_property("outline-style") == "solid"  # the focus is visible
    skip.send_keys(Keys.ENTER)
    wait(browser).until(lambda b: b.switch_to.active_element.get_attribute("id") == "main")
    browser.switch_to.active_element.send_keys(Keys.TAB)
    assert browser.switch_to.active_element.get_attribute("id") == "agent"  # the filters' first field
    assert [line for line in console(browser) if "Content Security Policy" in line] == []
    browser.save_screenshot(str(tmp_path / "sessions.png"))
    assert (tmp_path / "sessions.png").stat().st_size > 0


def test_the_conversation_folds_calls_and_highlights_a_summary(
    hooked: HookedSite, browser: WebDriver, tmp_path: Path
) -> None:
    from tests.support.viewer_sessions import NEW, OLD

    console(browser)
    browser.get(f"{hooked.base}/ui/thread?p=claude&t={OLD}")
    assert browser.find_element(By.ID, "session-title").text == OLD_TITLE
    call = browser.find_element(By.CSS_SELECTOR, "details.tool-call")
    result = call.find_element(By.CSS_SELECTOR, ".tool-result pre")
    assert call.get_attribute("open") is None and not result.is_displayed()
    call.find_element(By.TAG_NAME, "summary").click()
    wait(browser).until(lambda b: result.is_displayed())
    assert result.text == "def login(): ..."
    thinking = browser.find_element(By.CSS_SELECTOR, "li.turn-thinking details.folded")
    assert thinking.find_element(By.TAG_NAME, "summary").text == "thinking" and thinking.get_attribute("open") is None
    answer = browser.find_elements(By.CSS_SELECTOR, "li.turn-text .text")[-2]
    assert "Not markup: <script>alert('stolen')</script>" in answer.text
    assert answer.find_element(By.CSS_SELECTOR, "pre code.language-python").text == "print('<b>ok</b>')"

    dag = hooked.known["dag"]
    nodes = [node for node in dag.nodes if node.level == 1]
    node = nodes[1]
    browser.get(f"{hooked.base}/ui/thread?p=claude&t={NEW}")
    browser.find_element(By.ID, f"node-{node.id}").click()
    wait(browser).until(lambda b: opened_summary(b) == node.id)
    lit = browser.find_elements(By.CSS_SELECTOR, "li.turn.highlight")
    assert [int(item.get_attribute("data-seq") or -1) for item in lit] == [
        int(item.get_attribute("data-seq") or -1)
        for item in browser.find_elements(By.CSS_SELECTOR, "li.turn")
        if node.first_seq <= int(item.get_attribute("data-seq") or -1) <= node.last_seq
    ]
    plain = browser.find_element(By.CSS_SELECTOR, "li.turn:not(.highlight)")
    assert lit[0].value_of_css_property("background-color") != plain.value_of_css_property("background-color")
    assert browser.current_url.endswith(f"#seq-{node.first_seq}")
    assert browser.execute_script("return document.querySelector(':target').id") == f"seq-{node.first_seq}"
    assert [line for line in console(browser) if "Content Security Policy" in line] == []
    browser.save_screenshot(str(tmp_path / "conversation.png"))
    assert (tmp_path / "conversation.png").stat().st_size > 0


def test_a_search_hit_and_a_fact_open_the_message_and_dark_mode_follows_the_system(
    hooked: HookedSite, browser: WebDriver, tmp_path: Path
) -> None:
    browser.get(f"{hooked.base}/ui/search?p=claude&q=login")
    assert browser.find_element(By.TAG_NAME, "h1").text.endswith("(text)")
    hit = browser.find_element(By.CSS_SELECTOR, 'li.hit[data-kind="message"] a.hit-link')
    target = (hit.get_attribute("href") or "").split("#msg-")[1]
    hit.click()
    landed = wait(browser).until(lambda b: b.find_element(By.ID, f"msg-{target}"))
    assert landed.is_displayed() and "def login(): ..." in landed.text  # its call unfolded to show it

    browser.get(f"{hooked.base}/ui/project?p=claude&project=billing-api")
    current = browser.find_element(By.CSS_SELECTOR, "#facts tr.fact:not(.superseded)")
    assert current.find_element(By.TAG_NAME, "td").text == "Auth uses RS256 JWTs from the JWKS endpoint"
    current.find_element(By.CSS_SELECTOR, "a.source").click()
    focused = wait(browser).until(lambda b: b.find_element(By.CSS_SELECTOR, "li.turn.focus"))
    assert "The token expired. The fix:" in focused.text

    light = browser.find_element(By.TAG_NAME, "body").value_of_css_property("background-color")
    browser.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
    )
    try:
        dark = browser.find_element(By.TAG_NAME, "body").value_of_css_property("background-color")
        browser.save_screenshot(str(tmp_path / "dark.png"))
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    assert (light, dark) == ("rgba(247, 247, 245, 1)", "rgba(21, 25, 30, 1)")
