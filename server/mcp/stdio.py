"""The stdio transport, answering every line it cannot parse instead of dropping it.

The MCP SDK's stdio reader decodes stdin with ``errors="replace"`` (so invalid UTF-8
became U+FFFD and was stored, where HTTP and ``ingest`` refuse it) and hands a line it
cannot parse to the session as an exception, which logs it and answers nothing: a
client that sent a lone surrogate escape, JSON nested past the parser's limit, a
5,000-digit number or a cut-off line waited forever. Over HTTP the same bodies get a
JSON-RPC ``-32700 Parse error``.

So stdin is read here as bytes, one line at a time, and checked the way the HTTP
transport checks a body (``pydantic_core.from_json``, then the JSON-RPC message
model): a line that fails is answered on stdout with a JSON-RPC error whose id is
null (``-32700`` when it is not JSON or not UTF-8, ``-32600`` when it is JSON but no
JSON-RPC message), and the server goes on serving. Lines that pass go to the SDK's own
reader unchanged; stdout stays the SDK's, which keeps handlers' stray output off the
wire.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import BinaryIO, cast

import anyio
import mcp_types
import pydantic_core
from anyio.streams.memory import MemoryObjectSendStream
from fastmcp import FastMCP
from fastmcp.server.context import reset_transport, set_transport
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def line_error(line: bytes) -> mcp_types.JSONRPCError | None:
    """The JSON-RPC error a stdin line deserves, or None when it is a JSON-RPC message."""
    try:
        raw = pydantic_core.from_json(line)
    except ValueError as exc:
        return _error(PARSE_ERROR, f"Parse error: {exc}")
    try:
        mcp_types.jsonrpc_message_adapter.validate_python(raw, by_name=False)
    except ValidationError:
        return _error(INVALID_REQUEST, "Invalid Request: the line is JSON but not a JSON-RPC 2.0 message")
    return None


def _error(code: int, message: str) -> mcp_types.JSONRPCError:
    return mcp_types.JSONRPCError(jsonrpc="2.0", id=None, error=mcp_types.ErrorData(code=code, message=message))


class CheckedLines:
    """stdin's lines as the SDK's reader iterates them: only those that parse.

    Every other non-blank line is answered through ``answer_with``'s stream, the one the
    SDK writes its own replies from, so replies never interleave on stdout.
    """

    def __init__(self, source: BinaryIO) -> None:
        """Read ``source`` (stdin's byte buffer) line by line in a worker thread."""
        self._source = anyio.wrap_file(source)
        self._replies: MemoryObjectSendStream[SessionMessage] | None = None
        self._ready = anyio.Event()

    def answer_with(self, replies: MemoryObjectSendStream[SessionMessage]) -> None:
        """Where error replies go, known once the SDK's streams are open."""
        self._replies = replies
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for line in self._source:
            if not line.strip():
                continue
            error = line_error(line)
            if error is None:
                yield line.decode("utf-8")
                continue
            await self._ready.wait()
            assert self._replies is not None
            await self._replies.send(SessionMessage(error))


async def run_stdio(server: FastMCP) -> None:
    """Serve ``server`` over stdin and stdout until the client closes stdin.

    What ``FastMCP.run_stdio_async`` does, with ``CheckedLines`` as the SDK reader's
    input; the server's lifespan and low-level server are FastMCP's own.
    """
    token = set_transport("stdio")
    try:
        async with server._lifespan_manager():
            lines = CheckedLines(sys.stdin.buffer)
            async with stdio_server(stdin=cast(anyio.AsyncFile[str], lines)) as (read_stream, write_stream):
                lines.answer_with(write_stream)
                low_level = server._mcp_server
                await low_level.run(read_stream, write_stream, low_level.create_initialization_options())
    finally:
        reset_transport(token)
