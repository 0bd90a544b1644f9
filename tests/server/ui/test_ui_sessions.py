"""The viewer people open every day, over real HTTP, on sessions the real Claude Code hook stored.

Two sessions of one project go through ``palimpsest hook claude`` as transcripts: an
old one (July, months before the hook stored it) with thinking, a tool call and its
result, an image, an injected turn, a fenced code block and a ``<script>``; a newer
long one (181 messages) that is compacted. Checked on content: each session listed by
its request and dated by its messages' own times, sorted and filtered by links; the
conversation with the call folded over its result, paged by seq; a summary's messages
highlighted; facts linked to their source messages and the start memory to its
sessions and facts; search defaulting to hybrid once the store has vectors, its hits
leading to the message on its page; and markup in a message shown as text.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from html import unescape
from pathlib import Path
from typing import Any

import httpx2
import pytest

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.scheduler.embedders import make_embedder
from palimpsest.scheduler.embedding import backfill_embeddings
from palimpsest.server.mcp.app import build_server
from palimpsest.server.settings import Settings
from tests.support.asgi_server import serving
from tests.support.viewer_sessions import (
    BUILTIN,
    NEW,
    OLD,
    SCRIPT,
    fill,
)


def settings_for(store_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {"store": store_url, "partition": None, "tokens_file": None, "summary_model": None}
    values.update(scheduler=False, **overrides)
    return Settings(**values)


def rows(page: str) -> list[str]:
    """The thread ids of the sessions table, in order."""
    return re.findall(r'<tr data-thread="([^"]+)"', page)


def text_of(fragment: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def element(page: str, element_id: str) -> str:
    """The opening tag and text up to the next list item of the element with this id."""
    start = page.index(f'id="{element_id}"')
    end = page.find("\n<li class=", start)
    return page[page.rindex("<", 0, start) : end if end != -1 else len(page)]


@pytest.fixture
async def filled(store_url: str, tmp_path: Path) -> dict[str, Any]:
    known = await fill(store_url, tmp_path / "transcripts")
    known["url"] = store_url
    return known


async def test_sessions_are_listed_by_their_request_and_dated_by_their_messages(filled: dict[str, Any]) -> None:
    async with serving(build_server(settings_for(filled["url"]))) as base, httpx2.AsyncClient(base_url=base) as http:
        newest = (await http.get("/ui/partition?p=claude")).text
        oldest = (await http.get("/ui/partition?p=claude&sort=oldest")).text
        most = (await http.get("/ui/sessions?sort=messages&agent=claude")).text
        project = (await http.get("/ui/sessions?agent=claude&project=billing-api")).text
        other = (await http.get("/ui/sessions?project=elsewhere")).text
        bad = await http.get("/ui/sessions?sort=sideways")
    assert rows(newest) == [NEW, OLD] and rows(oldest) == [OLD, NEW] and rows(most) == [NEW, OLD]
    assert rows(project) == [NEW, OLD] and rows(other) == [] and 'id="empty">No session here.' in other
    old_row = text_of(newest[newest.index(f'<tr data-thread="{OLD}"') :].split("</tr>")[0])
    # Listed by every request it made, then how it really ended (the start memory's reading).
    assert old_row.startswith(
        "Add JWT auth to the billing API · Why does this screen fail? [image: image/png] Ended with: answered:"
    )
    # Dated by the messages' own times (July), not by when the hook stored them (today).
    assert "claude billing-api main 9 2026-07-14 09:30 → 09:32" in old_row
    assert datetime.now(UTC).strftime("%Y-%m-%d") not in old_row
    new_row = text_of(newest[newest.index(f'<tr data-thread="{NEW}"') :].split("</tr>")[0])
    assert new_row.startswith("Fix the flaky refresh test in tests/test_refresh.py")
    assert "181 2026-11-20 14:00 → 15:00" in new_row
    # The sort links keep the filters and lead to the first page.
    assert '<a href="/ui/partition?p=claude&amp;sort=oldest" data-sort="oldest">oldest first</a>' in newest
    assert '<a href="/ui/sessions?agent=claude&amp;project=billing-api&amp;sort=messages"' in project
    assert bad.status_code == 400 and "unknown sort &#39;sideways&#39;: use newest, oldest, messages" in bad.text


async def test_the_conversation_reads_with_calls_folded_over_their_results(filled: dict[str, Any]) -> None:
    old = filled["old"]
    async with serving(build_server(settings_for(filled["url"]))) as base, httpx2.AsyncClient(base_url=base) as http:
        page = (await http.get("/ui/thread", params={"p": "claude", "t": OLD})).text
    assert '<h1 id="session-title">Add JWT auth to the billing API · Why does this screen fail?' in page
    meta = text_of(page[page.index('<p class="stats" id="session-meta">') :].split("</p>")[0])
    assert meta.startswith("agent claude · project billing-api · branch main · 9 messages · 2026-07-14 09:30 → 09:32")
    assert "· ·" not in page and "· </p>" not in page
    assert page.index(f'id="msg-{old["o1"].id}"') < page.index(f'id="msg-{old["o2"].id}"')
    call = element(page, f"msg-{old['o2#2'].id}")
    assert '<details class="tool-call">' in call
    assert "<summary>tool call <code>Read</code> · 1 result</summary>" in call
    assert '<pre class="tool-input">{&#34;file_path&#34;: &#34;auth.py&#34;}</pre>' in call
    assert f'id="msg-{old["o3"].id}"' in call and "def login(): ..." in call  # the result, folded with its call
    thinking = element(page, f"msg-{old['o2'].id}")
    assert '<details class="folded">' in thinking and "<summary>thinking</summary>" in thinking
    assert "Look at auth.py before touching the routes." in thinking
    assert "<li>image (image/png)</li>" in element(page, f"msg-{old['o4'].id}")
    injected = element(page, f"msg-{old['o5'].id}")
    assert '<span class="mark">injected</span>' in injected and "<summary>injected turn</summary>" in injected
    answer = element(page, f"msg-{old['o6'].id}")
    assert "<pre><code class=\"language-python\">print('&lt;b&gt;ok&lt;/b&gt;')\n</code></pre>" in answer
    assert "Not markup: &lt;script&gt;alert('stolen')&lt;/script&gt;" in answer
    assert SCRIPT not in page
    assert 'id="no-summaries"' in page and 'class="uncovered"' in page


async def test_long_threads_are_paged_and_a_summary_highlights_its_messages(filled: dict[str, Any]) -> None:
    dag = filled["dag"]
    [summary] = [node for node in dag.nodes if node.level == 1 and node.first_seq <= 120 <= node.last_seq]
    async with serving(build_server(settings_for(filled["url"]))) as base, httpx2.AsyncClient(base_url=base) as http:
        first = (await http.get("/ui/thread", params={"p": "claude", "t": NEW})).text
        second = (await http.get("/ui/thread", params={"p": "claude", "t": NEW, "page": "2"})).text
        beyond = await http.get("/ui/thread", params={"p": "claude", "t": NEW, "page": "3"})
        opened = (await http.get("/ui/thread", params={"p": "claude", "t": NEW, "s": summary.id})).text
    seqs = [int(seq) for seq in re.findall(r'data-seq="(\d+)"', first)]
    assert seqs == list(range(100))
    assert [int(seq) for seq in re.findall(r'data-seq="(\d+)"', second)] == list(range(100, 181))
    assert 'rel="next">next</a>' in first and 'rel="prev"' not in first and 'rel="prev">previous</a>' in second
    assert beyond.status_code == 400 and "page must be a whole number from 1 to 2" in beyond.text
    # Opened at a summary: its page, its messages (and only them) highlighted, its checkpoint beside.
    highlighted = [
        int(seq) for seq in re.findall(r'<li class="turn [a-z_-]+ highlight" id="[^"]+" data-seq="(\d+)"', opened)
    ]
    shown = [int(seq) for seq in re.findall(r'<li class="turn [^"]*" id="[^"]+" data-seq="(\d+)"', opened)]
    assert highlighted == [seq for seq in shown if summary.first_seq <= seq <= summary.last_seq] and highlighted
    assert f'data-summary-id="{summary.id}"' in opened and unescape(summary.text.split("\n")[0]) in unescape(opened)
    assert re.search(rf'class="node selected" data-summary="{summary.id}"', opened)
    link = f'href="/ui/thread?p=claude&amp;t={NEW}&amp;page=2&amp;s={summary.id}#seq-{summary.first_seq}"'
    assert link in first  # the DAG's box leads there, from any page


async def test_facts_and_the_start_memory_lead_to_their_messages(filled: dict[str, Any]) -> None:
    old_fact, new_fact = filled["facts"]
    source = filled["old"]["o6"]
    async with serving(build_server(settings_for(filled["url"]))) as base, httpx2.AsyncClient(base_url=base) as http:
        page = (await http.get("/ui/project", params={"p": "claude", "project": "billing-api"})).text
        target = re.search(
            r'<a class="source" href="([^"]+)">message 1</a>', page[page.index(f'id="fact-{new_fact.id}"') :]
        )
        assert target is not None
        landed = (await http.get(unescape(target.group(1)).split("#")[0])).text
    current = page[page.index(f'id="fact-{new_fact.id}"') :].split("</tr>")[0]
    assert "Auth uses RS256 JWTs from the JWKS endpoint" in current and ">current<" in current
    assert unescape(target.group(1)).endswith(f"m={source.id}#msg-{source.id}")
    superseded = page[page.index(f'id="fact-{old_fact.id}"') :].split("</tr>")[0]
    assert (
        'class="fact superseded"' in superseded and f'by <a href="#fact-{new_fact.id}">the newer fact</a>' in superseded
    )
    assert "Facts (1 current, 1 superseded)" in page
    memory = page[page.index('<pre id="start-memory"') :].split("</pre>")[0]
    assert "Add JWT auth to the billing API" in unescape(memory)
    assert f'<a href="/ui/thread?p=claude&amp;t={OLD}">{OLD}</a>' in memory
    # A fact in the start memory names the message it came from, and links to it.
    fact_line = next(line for line in memory.splitlines() if "Auth uses RS256 JWTs" in line)
    assert f"m={source.id}#msg-{source.id}" in unescape(fact_line) and f">{source.id}</a>" in fact_line
    assert f'<li class="turn turn-text focus" id="msg-{source.id}"' in landed


async def test_search_is_hybrid_by_default_once_there_are_vectors(filled: dict[str, Any]) -> None:
    embedder = make_embedder(BUILTIN)
    assert embedder is not None
    plain = build_server(settings_for(filled["url"]))
    async with serving(plain) as base, httpx2.AsyncClient(base_url=base, timeout=60) as http:
        by_text = (await http.get("/ui/search", params={"p": "claude", "q": "login"})).text
        by_regex = (await http.get("/ui/search", params={"p": "claude", "q": r"JWT\s+auth", "mode": "regex"})).text
    assert "(text)</h1>" in by_text and "(regex)</h1>" in by_regex and "Add JWT auth" in by_regex
    store = open_store(filled["url"], Neo4jCredentials())
    await store.initialize()
    try:
        assert await backfill_embeddings(store, embedder) > 0
    finally:
        await store.close()
    semantic = build_server(settings_for(filled["url"], embedder=BUILTIN))
    async with serving(semantic) as base, httpx2.AsyncClient(base_url=base, timeout=120) as http:
        found = (await http.get("/ui/search", params={"p": "claude", "q": "what does the login function do"})).text
        hit = re.search(
            r'<li class="hit" data-kind="message" data-id="([^"]+)">\s*<a class="hit-link" href="([^"]+)"', found
        )
        assert hit is not None
        landed = (await http.get(unescape(hit.group(2)).split("#")[0])).text
        meaning = (await http.get("/ui/search", params={"p": "claude", "q": "token rotation", "mode": "semantic"})).text
    assert "(hybrid)</h1>" in found and "(semantic)</h1>" in meaning
    assert '<option value="" selected>default (hybrid where there are vectors, else text)</option>' in found
    assert unescape(hit.group(2)).endswith(f"#msg-{hit.group(1)}")
    assert f'id="msg-{hit.group(1)}"' in landed and "focus" in element(landed, f"msg-{hit.group(1)}")
