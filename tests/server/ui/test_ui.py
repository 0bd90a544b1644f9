"""The viewer over real HTTP, without a browser: who may see what, tool metrics, ``palimpsest ui``.

The browser tests (tests/server/ui/test_ui_browser.py) drive the pages; these pin the rules
underneath them: without a token the viewer serves only this machine, with a tokens
file a caller sees only its token's partitions (another partition looks exactly like
one that does not exist), and the tool counters reach both ``memory_stats`` and the
index page.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastmcp import Client
from fastmcp.client.transports import StreamableHttpTransport
from fastmcp.exceptions import ToolError
from starlette.requests import Request

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.models import NewMessage
from palimpsest.server.mcp.app import build_server
from palimpsest.server.settings import Settings
from palimpsest.server.ui.access import Refused, identify
from tests.support.asgi_server import serving
from tests.support.waiting import wait_until

PALIMPSEST = str(Path(sys.executable).parent / "palimpsest")
SECRET = "the heron gate opens at dawn"


def settings_for(store_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "store": store_url,
        "partition": None,
        "tokens_file": None,
        "summary_model": None,
        "scheduler": False,
    }
    values.update(overrides)
    return Settings(**values)


async def fill(store_url: str) -> None:
    """One claude thread holding the secret, one windsurf thread."""
    store = open_store(store_url, Neo4jCredentials())
    await store.initialize()
    try:
        await store.append_messages("claude", "c1", [NewMessage(role="user", content=SECRET, message_id="m0")])
        await store.append_messages("windsurf", "w1", [NewMessage(role="user", content="plain text")])
    finally:
        await store.close()


async def test_tool_calls_are_counted_in_memory_stats_and_on_the_viewer(tmp_path: Path) -> None:
    server = build_server(settings_for(f"sqlite:///{tmp_path / 'm.db'}"))
    async with serving(server) as base:
        async with Client(StreamableHttpTransport(f"{base}/mcp")) as session:
            for i in range(2):
                await session.call_tool(
                    "append_messages", {"thread_id": "t", "messages": [{"role": "user", "content": f"hello {i}"}]}
                )
            with pytest.raises(ToolError, match="unknown summary"):
                await session.call_tool("describe_summary", {"summary_id": "sum_nope"})
            stats = (await session.call_tool("memory_stats", {})).structured_content
        async with httpx2.AsyncClient(timeout=30) as http:
            page = (await http.get(f"{base}/ui")).text
    assert stats is not None
    tools = {metric["tool"]: metric for metric in stats["tools"]}
    assert set(tools) == {"append_messages", "describe_summary"}  # memory_stats was still running
    assert (tools["append_messages"]["calls"], tools["append_messages"]["errors"]) == (2, 0)
    assert (tools["describe_summary"]["calls"], tools["describe_summary"]["errors"]) == (1, 1)
    for metric in tools.values():
        assert 0 < metric["p50_ms"] <= metric["p95_ms"]
    assert stats["messages"] == 2  # the old fields are all still there
    # The whole store's size, vector files included (measured in tests/scheduler/test_costs.py), on both.
    assert stats["bytes_on_disk"] > 0 and stats["archive_bytes"] == 0
    assert re.search(r'<p id="size">[0-9.]+ MB on disk, vector files included', page)
    for tool, calls, errors in [("append_messages", 2, 0), ("describe_summary", 1, 1), ("memory_stats", 1, 0)]:
        assert f'<tr data-tool="{tool}"><td>{tool}</td><td>{calls}</td><td>{errors}</td>' in page


async def test_with_tokens_a_caller_sees_only_its_partitions(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 'm.db'}"
    await fill(store_url)
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tok-claude": ["claude"], "tok-windsurf": ["windsurf"]}), encoding="utf-8")
    server = build_server(settings_for(store_url, tokens_file=tokens))
    async with serving(server) as base, httpx2.AsyncClient(base_url=base, timeout=30) as http:
        refused = await http.get("/ui/thread?p=claude&t=c1")
        assert refused.status_code == 303
        assert refused.headers["location"] == "/ui/login?next=%2Fui%2Fthread%3Fp%3Dclaude%26t%3Dc1"
        wrong = await http.post("/ui/login", data={"token": "tok-nobody"})
        assert wrong.status_code == 401 and "unknown token" in wrong.text
        signed = await http.post("/ui/login?next=/ui", data={"token": "tok-windsurf"})
        assert (signed.status_code, signed.headers["location"]) == (303, "/ui")
        cookie = signed.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
        index = await http.get("/ui", headers={"Cookie": "palimpsest_token=tok-windsurf"})
        assert 'data-partition="windsurf"' in index.text and "claude" not in index.text
        assert 'id="size"' not in index.text  # the store's size is not one partition's
        as_windsurf = {"Authorization": "Bearer tok-windsurf"}
        foreign = await http.get("/ui/thread?p=claude&t=c1", headers=as_windsurf)
        missing = await http.get("/ui/thread?p=nowhere&t=c1", headers=as_windsurf)
        assert (foreign.status_code, missing.status_code) == (404, 404)
        assert foreign.text.replace("claude", "nowhere") == missing.text
        searched = await http.get("/ui/search?p=claude&q=heron", headers=as_windsurf)
        assert searched.status_code == 404 and "heron gate" not in searched.text
        own = await http.get("/ui/search?p=windsurf&q=heron", headers=as_windsurf)
        assert own.status_code == 200 and 'id="no-hits"' in own.text
        allowed = await http.get("/ui/search?p=claude&q=heron", headers={"Authorization": "Bearer tok-claude"})
        assert allowed.status_code == 200 and "heron gate" in allowed.text


async def test_without_tokens_the_viewer_serves_only_this_machine() -> None:
    def request_from(host: str) -> Request:
        return Request({"type": "http", "method": "GET", "path": "/ui", "headers": [], "client": (host, 50000)})

    assert (await identify(request_from("127.0.0.1"), None)).allowed is None
    with pytest.raises(Refused, match="only this machine"):
        await identify(request_from("10.1.2.3"), None)


async def test_bad_viewer_input_is_one_sentence(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 'm.db'}"
    await fill(store_url)
    server = build_server(settings_for(store_url))
    async with serving(server) as base, httpx2.AsyncClient(base_url=base, timeout=30) as http:
        no_thread = await http.get("/ui/thread?p=claude")
        bad_mode = await http.get("/ui/search?p=claude&q=x&mode=fuzzy")
        unknown = await http.get("/ui/summary?p=claude&s=sum_nope")
        static = await http.get("/ui/static/../routes.py")
    assert (no_thread.status_code, bad_mode.status_code, unknown.status_code) == (400, 400, 404)
    assert "name a thread with ?t=" in no_thread.text
    assert "unknown search mode &#39;fuzzy&#39;: use text, regex, semantic, hybrid, or none" in bad_mode.text
    assert "unknown summary id &#39;sum_nope&#39;" in unknown.text
    assert static.status_code == 404


def test_palimpsest_ui_prints_its_address_and_serves_the_viewer(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if not key.startswith("PALIMPSEST_")}
    process = subprocess.Popen(
        [PALIMPSEST, "ui", "--store", f"sqlite:///{tmp_path / 'm.db'}", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    try:
        assert process.stdout is not None
        address = json.loads(process.stdout.readline())["url"]
        assert address.startswith("http://127.0.0.1:") and address.endswith("/ui")
        page = wait_for_page(address)
        assert "<h1>Partitions <small>(sqlite store)</small></h1>" in page
        health = httpx2.get(address.removesuffix("/ui") + "/health", timeout=30).json()
        assert health["scheduler"] == "off"
    finally:
        process.terminate()
        process.wait(timeout=30)


def wait_for_page(address: str) -> str:
    """GET ``address`` once the server listens (its start is guarded by a deadline, not timed)."""

    def page() -> str | None:
        try:
            return httpx2.get(address, timeout=30).raise_for_status().text
        except httpx2.TransportError:
            return None

    return wait_until(page, 60, f"nothing answered at {address}")


async def test_search_offers_hybrid_only_with_an_embedder(tmp_path: Path) -> None:
    store_url = f"sqlite:///{tmp_path / 'm.db'}"
    await fill(store_url)
    plain = build_server(settings_for(store_url))
    async with serving(plain) as base, httpx2.AsyncClient(base_url=base, timeout=60) as http:
        form = await http.get("/ui/search?p=claude")
        refused = await http.get("/ui/search?p=claude&q=heron&mode=hybrid")
    assert 'value="hybrid"' not in form.text
    assert refused.status_code == 400 and "PALIMPSEST_EMBEDDER" in refused.text
    semantic = build_server(settings_for(store_url, embedder="sentence-transformers:all-MiniLM-L6-v2"))
    async with serving(semantic) as base, httpx2.AsyncClient(base_url=base, timeout=120) as http:
        found = await http.get("/ui/search?p=claude&q=heron+gate&mode=hybrid")
    assert found.status_code == 200, found.text
    assert '<option value="hybrid" selected>hybrid</option>' in found.text
    assert "(hybrid)</h1>" in found.text and SECRET in found.text
