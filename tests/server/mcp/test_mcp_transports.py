"""The MCP server end to end, as IDEs run it: a real ``palimpsest serve`` subprocess.

Over stdio (what one IDE starts) the long scenario runs on both stores: 500 messages,
compaction, a phrase from an early message found by grep, its covering summary expanded
back to the phrase verbatim; and stdout is checked to carry protocol bytes only, stderr
nothing at all (background maintenance on or off). Over
streamable HTTP with a tokens file: a missing or wrong token is refused at the door, and
a windsurf token cannot read claude's partition.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import mcp_types
import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport, StreamableHttpTransport
from fastmcp.exceptions import ToolError
from mcp.shared.exceptions import MCPError

from tests.support.transports import PALIMPSEST, START_SECONDS, free_port, server_env
from tests.support.waiting import wait_until

pytestmark = pytest.mark.slow

PHRASE = "the orchid relay listens on port 4417"


def identity(name: str) -> mcp_types.Implementation:
    """The client info an IDE sends at initialize."""
    return mcp_types.Implementation(name=name, version="1.0")


async def call(session: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool and return its structured result."""
    result = await session.call_tool(tool, arguments)
    assert result.structured_content is not None
    return result.structured_content


def long_thread(count: int) -> list[dict[str, Any]]:
    """A conversation with one memorable phrase early on, wordy enough to summarize."""
    messages = []
    for i in range(count):
        text = f"Turn {i}: we went through the retry logic in worker/queue.py and its tests once more. " * 2
        if i == 7:
            text = f"Remember this: {PHRASE}, behind the second firewall. " + text
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": text, "message_id": f"m{i}"})
    return messages


async def remember_compact_and_recall(session: Client) -> None:
    """The scenario: append 500, compact, grep an early phrase, expand its summary to find it."""
    messages = long_thread(500)
    appended = await call(session, "append_messages", thread_id="long", messages=messages)
    assert (appended["appended"], appended["partition"]) == (500, "claude")
    compacted = await call(session, "compact_thread", thread_id="long")
    assert compacted["status"] == "compacted" and compacted["escalations"] >= 1
    # Text mode: without one, the mode depends on how far the background embedding has come.
    found_by_words = await call(session, "grep_memories", query="orchid relay", kinds=["message"], mode="text")
    [hit] = found_by_words["hits"]
    assert (hit["source_id"], hit["id"]) == ("m7", appended["message_ids"][7])
    assert len(hit["covered_by"]) >= 2
    found: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = await call(session, "expand_summary", summary_id=hit["covered_by"][-1], cursor=cursor)
        found.extend(item for item in page["items"] if item["id"] == hit["id"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    [message] = found
    assert message["content"] == messages[7]["content"] and PHRASE in message["content"]


async def test_stdio_remembers_compacts_and_expands(store_url: str) -> None:
    transport = StdioTransport(PALIMPSEST, ["serve", "--store", store_url], env=server_env(), keep_alive=False)
    async with Client(transport, client_info=identity("claude-code"), timeout=120) as session:
        await remember_compact_and_recall(session)
        stats = await call(session, "memory_stats")
    assert (stats["partition"], stats["threads"], stats["messages"]) == ("claude", 1, 500)


@pytest.mark.parametrize("scheduler", ["on", "off"])
async def test_stdio_stdout_carries_protocol_bytes_only_and_stderr_nothing(tmp_path: Path, scheduler: str) -> None:
    # A client shows every stderr line as the server's error: a start where nothing is wrong prints none.
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "windsurf", "version": "1.0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "memory_stats", "arguments": {}}},
    ]
    process = await asyncio.create_subprocess_exec(
        PALIMPSEST,
        "serve",
        "--store",
        f"sqlite:///{tmp_path / 'raw.db'}",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=server_env(PALIMPSEST_SCHEDULER=scheduler),
    )
    assert process.stdin is not None
    process.stdin.write(b"".join(json.dumps(request).encode() + b"\n" for request in requests))
    await process.stdin.drain()
    lines: list[dict[str, Any]] = []
    async with asyncio.timeout(START_SECONDS):
        assert process.stdout is not None
        while not any(line.get("id") == 2 for line in lines):
            raw = await process.stdout.readline()
            assert raw, "the server closed stdout before answering"
            lines.append(json.loads(raw))
        process.stdin.close()
        rest, errors = await process.communicate()
    lines.extend(json.loads(raw) for raw in rest.splitlines() if raw.strip())
    assert errors.decode() == ""
    assert all(line["jsonrpc"] == "2.0" for line in lines)
    [answer] = [line for line in lines if line.get("id") == 2]
    assert answer["result"]["structuredContent"]["partition"] == "windsurf"
    assert process.returncode == 0


@pytest.fixture
def http_server(store_url: str, tmp_path: Path) -> Iterator[str]:
    """A ``palimpsest serve --transport http`` subprocess with a tokens file; yields its URL."""
    tokens = tmp_path / "tokens.toml"
    tokens.write_text('"tok-claude" = ["claude"]\n"tok-windsurf" = ["windsurf"]\n')
    port = free_port()
    log = (tmp_path / "server.log").open("w")
    process = subprocess.Popen(
        [PALIMPSEST, "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port), "--store", store_url],
        env=server_env(PALIMPSEST_TOKENS_FILE=str(tokens)),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:

        def listening() -> bool | None:
            assert process.poll() is None, (tmp_path / "server.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            except OSError:
                return None
            return True

        wait_until(listening, START_SECONDS, "the HTTP server did not start listening")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=20)
        log.close()


def http_client(url: str, token: str | None, name: str) -> Client:
    """A streamable-HTTP client presenting ``token`` as its bearer token."""
    return Client(StreamableHttpTransport(url, auth=token), client_info=identity(name), timeout=60)


async def test_http_tokens_are_required_and_bound_to_partitions(http_server: str) -> None:
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "claude-code", "version": "1"},
        },
    }
    async with httpx2.AsyncClient() as raw:
        for headers in ({}, {"Authorization": "Bearer tok-wrong"}):
            refused = await raw.post(
                http_server, json=initialize, headers={"Accept": "application/json, text/event-stream", **headers}
            )
            assert refused.status_code == 401, refused.text
            assert refused.headers["www-authenticate"].startswith("Bearer")
    for token in (None, "tok-wrong"):
        with pytest.raises(MCPError):
            async with http_client(http_server, token, "claude-code") as session:
                await session.list_tools()
    async with http_client(http_server, "tok-claude", "claude-code") as claude:
        secret = [{"role": "user", "content": "claude only: the vault key is 7"}]
        written = await call(claude, "append_messages", thread_id="t-h", messages=secret)
        assert written["partition"] == "claude"
        hits = (await call(claude, "grep_memories", query="vault"))["hits"]
        assert [hit["id"] for hit in hits] == written["message_ids"]
    async with http_client(http_server, "tok-windsurf", "windsurf") as windsurf:
        with pytest.raises(ToolError, match="may not touch partition 'claude'"):
            await windsurf.call_tool("grep_memories", {"query": "vault", "partition": "claude"})
        with pytest.raises(ToolError, match="may not touch partition 'claude'"):
            await windsurf.call_tool(
                "append_messages",
                {"thread_id": "t-x", "messages": [{"role": "user", "content": "x"}], "partition": "claude"},
            )
        assert (await call(windsurf, "grep_memories", query="vault"))["hits"] == []
        with pytest.raises(ToolError, match="unknown thread id 't-h'"):
            await windsurf.call_tool("get_summary_dag", {"thread_id": "t-h"})
        stats = await call(windsurf, "memory_stats")
    assert (stats["partition"], stats["messages"]) == ("windsurf", 0)
