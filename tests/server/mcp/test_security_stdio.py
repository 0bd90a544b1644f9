"""The stdio server answers every line it cannot parse, and stays up (issue 12, defect 2).

A real ``palimpsest serve`` subprocess gets raw bytes on stdin: each hostile line must
get a JSON-RPC error with a null id (as the HTTP transport gives), invalid UTF-8 must
be refused rather than stored as U+FFFD, and a valid request afterwards must still be
served. The deadline only guards each wait for a reply.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from palimpsest.server.mcp.stdio import line_error
from tests.support.transports import PALIMPSEST, START_SECONDS, server_env

pytestmark = pytest.mark.slow


def tool_call(request_id: int, name: str, arguments: dict[str, Any]) -> bytes:
    request = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    return json.dumps(request).encode("utf-8")


def append_line(content: bytes) -> bytes:
    """An append whose content is spliced in raw, so it can hold what json.dumps never writes."""
    return tool_call(9, "append_messages", {"thread_id": "t", "messages": [{"role": "user", "content": "@@"}]}).replace(
        b'"@@"', b'"' + content + b'"'
    )


HOSTILE: list[tuple[str, bytes, int]] = [
    ("lone surrogate escape", append_line(b"bad \\ud800 half"), -32700),
    ("nesting 200 deep", tool_call(3, "append_messages", {}).replace(b"{}", b"[" * 200 + b"]" * 200), -32700),
    ("malformed JSON", b'{"jsonrpc": "2.0", "id": 4, "method"', -32700),
    ("a 5,000-digit integer", b'{"jsonrpc": "2.0", "id": ' + b"7" * 5000 + b', "method": "ping"}', -32700),
    ("invalid UTF-8", append_line(b"caf\xc3 \xff\xfe"), -32700),
    ("JSON but not JSON-RPC", b'{"hello": "world"}', -32600),
    ("not JSON at all", b"GET / HTTP/1.1", -32700),
]


@pytest.mark.parametrize(("name", "line", "code"), HOSTILE, ids=[name for name, _, _ in HOSTILE])
def test_each_hostile_line_has_its_error(name: str, line: bytes, code: int) -> None:
    error = line_error(line)
    assert error is not None and error.error.code == code, name


async def test_a_real_server_answers_every_unparsable_line_and_keeps_serving(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        PALIMPSEST,
        "serve",
        "--store",
        f"sqlite:///{tmp_path / 'stdio.db'}",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=server_env(),
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    async def send(line: bytes) -> dict[str, Any]:
        stdin.write(line + b"\n")
        await stdin.drain()
        async with asyncio.timeout(START_SECONDS):
            raw = await stdout.readline()
        assert raw, "the server closed stdout instead of answering"
        return json.loads(raw)

    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "codex", "version": "1"},
        },
    }
    assert (await send(json.dumps(initialize).encode()))["id"] == 1
    stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n\n')
    for name, line, code in HOSTILE:
        reply = await send(line)
        assert reply["jsonrpc"] == "2.0" and reply["id"] is None, name
        assert reply["error"]["code"] == code, (name, reply)
        assert reply["error"]["message"].startswith("Parse error" if code == -32700 else "Invalid Request"), reply
    stats = await send(tool_call(20, "memory_stats", {}))
    assert stats["id"] == 20
    assert stats["result"]["structuredContent"]["messages"] == 0
    appended = await send(append_line("still here, café".encode()))
    assert appended["id"] == 9 and appended["result"]["structuredContent"]["appended"] == 1
    stdin.close()
    async with asyncio.timeout(START_SECONDS):
        await process.wait()
    assert process.returncode == 0
