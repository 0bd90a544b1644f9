"""The server answers ``initialize`` before its store is open, and tool calls wait for the store.

The store is made slow to open without mocks: another process holds an exclusive
transaction on the SQLite file, so the server's ``initialize()`` of the store waits on
the lock (SQLite's busy timeout) until that process lets go. Each test records the
order of what happened (the handshake answered, the call sent, the lock released, the
call answered) and asserts on that order and on the answers' content, never on how long
anything took. A store that cannot open at all (its folder is a file) gives every tool
call and resource read the same one line, logged once, while the process keeps answering.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from fastmcp import Client
from fastmcp.client.transports import StdioTransport
from fastmcp.exceptions import ToolError
from mcp.shared.exceptions import MCPError

from palimpsest.server.mcp.app import build_server
from palimpsest.server.settings import Settings
from tests.support.asgi_server import serving
from tests.support.transports import PALIMPSEST, server_env

#: A process that takes the SQLite file's exclusive lock, says so, and lets go when told.
LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
conn.execute("CREATE TABLE held (x)")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
conn.close()
print("released", flush=True)
"""

#: Seconds a reply may take (a guard on the wait, not a bound under test).
CALL_SECONDS = 120


class Locker:
    """The process holding the lock, and how to make it let go."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process

    async def release(self) -> None:
        """Let go of the lock and wait until it is gone."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        assert await asyncio.to_thread(self.process.stdout.readline) == "released\n"


@contextmanager
def locked(database: Path) -> Iterator[Locker]:
    """Hold an exclusive transaction on ``database`` in another process until released."""
    process = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(database)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "locked\n"
        yield Locker(process)
    finally:
        process.kill()
        process.wait()


async def first_call_waits_for_the_lock(session: Client, locker: Locker, events: list[str]) -> dict[str, Any]:
    """With the handshake done under the lock: list the tools, call one, release the lock, get its answer."""
    events.append("initialize answered")
    tools = {tool.name for tool in await session.list_tools()}
    assert {"append_messages", "memory_stats", "recall"} <= tools
    events.append("tools listed")
    call = asyncio.create_task(session.call_tool("memory_stats", {}))
    events.append("call sent")
    await asyncio.sleep(0.5)  # give the call every chance to answer early: it must not
    assert not call.done(), "the call answered while the store was still locked"
    await locker.release()
    events.append("lock released")
    result = await asyncio.wait_for(call, CALL_SECONDS)
    events.append("call answered")
    assert result.structured_content is not None
    return result.structured_content


async def test_stdio_initialize_answers_while_the_store_is_locked(tmp_path: Path) -> None:
    database = tmp_path / "memory.db"
    events: list[str] = []
    with locked(database) as locker:
        events.append("store locked")
        transport = StdioTransport(
            PALIMPSEST, ["serve", "--store", f"sqlite:///{database}"], env=server_env(), keep_alive=False
        )
        async with Client(transport, timeout=CALL_SECONDS) as session:
            stats = await first_call_waits_for_the_lock(session, locker, events)
    assert events == [
        "store locked",
        "initialize answered",
        "tools listed",
        "call sent",
        "lock released",
        "call answered",
    ]
    assert (stats["store"], stats["threads"], stats["messages"]) == ("sqlite", 0, 0)


async def test_in_memory_client_waits_for_a_locked_store_then_writes(tmp_path: Path) -> None:
    database = tmp_path / "memory.db"
    settings = Settings(store=f"sqlite:///{database}", partition="p", tokens_file=None, scheduler=True)
    events: list[str] = []
    with locked(database) as locker:
        async with Client(build_server(settings), timeout=CALL_SECONDS) as session:
            stats = await first_call_waits_for_the_lock(session, locker, events)
            appended = await session.call_tool(
                "append_messages", {"thread_id": "t", "messages": [{"role": "user", "content": "kept"}]}
            )
    assert events == ["initialize answered", "tools listed", "call sent", "lock released", "call answered"]
    assert (stats["partition"], stats["threads"]) == ("p", 0)
    assert appended.structured_content is not None and appended.structured_content["appended"] == 1


def unopenable(tmp_path: Path) -> str:
    """A SQLite URI whose folder is a regular file, so the store can never be created."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    return f"sqlite:///{blocker / 'memory.db'}"


def rpc(method: str, request_id: int | None = None, **params: Any) -> str:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if request_id is not None:
        message["id"] = request_id
    if params or method == "initialize":
        message["params"] = params
    return json.dumps(message) + "\n"


def serve_and_ask(store: str, env: dict[str, str]) -> tuple[dict[int, dict[str, Any]], str]:
    """Over stdio: initialize, ping, two tool calls, tools/list; every reply by id, and stderr."""
    requests = (
        rpc(
            "initialize",
            1,
            protocolVersion="2025-06-18",
            capabilities={},
            clientInfo={"name": "claude-code", "version": "1"},
        )
        + rpc("notifications/initialized")
        + rpc("ping", 5)
        + rpc("tools/call", 2, name="memory_stats", arguments={})
        + rpc("tools/call", 3, name="grep_memories", arguments={"query": "anything"})
        + rpc("tools/list", 4)
    )
    process = subprocess.Popen(
        [PALIMPSEST, "serve", "--store", store],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(requests)
    process.stdin.flush()
    # Every reply is read before stdin closes: a call still waiting then would be cut off.
    replies: dict[int, dict[str, Any]] = {}
    while len(replies) < 5:
        line = process.stdout.readline()
        assert line, "the server closed stdout before answering every request"
        reply = json.loads(line)
        replies[reply["id"]] = reply
    process.stdin.close()
    process.stdin = None
    _, stderr = process.communicate(timeout=CALL_SECONDS)
    assert process.returncode == 0, stderr
    assert replies[1]["result"]["serverInfo"]["name"] == "palimpsest"
    assert replies[5]["result"] == {}
    assert len(replies[4]["result"]["tools"]) >= 10
    return replies, stderr


def call_errors(replies: dict[int, dict[str, Any]]) -> list[str]:
    """The one error line of each of the two tool calls."""
    errors = []
    for call in (2, 3):
        result = replies[call]["result"]
        assert result["isError"] is True
        [content] = result["content"]
        assert "\n" not in content["text"]
        errors.append(content["text"])
    return errors


def test_stdio_store_that_cannot_open_fails_every_call_in_one_line(tmp_path: Path) -> None:
    replies, stderr = serve_and_ask(unopenable(tmp_path), server_env())
    errors = call_errors(replies)
    assert errors[0] == errors[1]
    assert errors[0].startswith("store unavailable: could not open the store: cannot create the SQLite database ")
    logged = [line for line in stderr.splitlines() if "could not open the store" in line]
    assert len(logged) == 1, stderr


def test_stdio_unknown_embedder_fails_every_call_in_one_line(tmp_path: Path) -> None:
    replies, stderr = serve_and_ask(f"sqlite:///{tmp_path / 'm.db'}", server_env(PALIMPSEST_EMBEDDER="nonesuch"))
    errors = call_errors(replies)
    assert errors[0] == errors[1]
    assert errors[0].startswith("store unavailable: the server cannot serve its tools: ")
    assert "nonesuch" in errors[0]
    logged = [line for line in stderr.splitlines() if "cannot serve its tools" in line]
    assert len(logged) == 1, stderr


async def test_in_memory_store_that_cannot_open_fails_every_call(tmp_path: Path) -> None:
    settings = Settings(store=unopenable(tmp_path), partition="p", tokens_file=None, scheduler=True)
    async with Client(build_server(settings), timeout=CALL_SECONDS) as session:
        messages: list[str] = []
        for tool, arguments in (("memory_stats", {}), ("memory_stats", {}), ("recall", {"query": "x"})):
            with pytest.raises(ToolError) as raised:
                await session.call_tool(tool, arguments)
            messages.append(str(raised.value))
        with pytest.raises(MCPError) as unread:
            await session.read_resource("palimpsest://threads/t/dag")
        listed = await session.list_tools()
    assert len(listed) >= 10
    assert len(set(messages)) == 1
    assert messages[0].startswith("store unavailable: could not open the store: ")
    assert str(unread.value) == messages[0]


async def test_health_names_why_the_store_did_not_open(tmp_path: Path) -> None:
    settings = Settings(store=unopenable(tmp_path), partition=None, tokens_file=None, scheduler=True)
    async with serving(build_server(settings)) as base, httpx2.AsyncClient(timeout=30) as http:
        response = await http.get(f"{base}/health")
    body = response.json()
    assert (response.status_code, body["status"], body["store"], body["scheduler"]) == (
        503,
        "unhealthy",
        "not open",
        "stopped",
    )
    assert body["store_error"].startswith("could not open the store: cannot create the SQLite database ")
