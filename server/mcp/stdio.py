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

stdin is read by a daemon thread of its own, so a server stopped by SIGTERM or SIGINT
(`stop_on_signals`) while its client keeps stdin open neither waits for a line that may
never come nor keeps the process alive at exit: the serving ends, the lifespan stops
the background work and closes the store, and the process exits 0.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager, suppress
from typing import BinaryIO, cast

import anyio
import mcp_types
import pydantic_core
from anyio.lowlevel import EventLoopToken, current_token
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from fastmcp import FastMCP
from fastmcp.server.context import reset_transport, set_transport
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

logger = logging.getLogger("palimpsest.server")

#: The most one read of stdin takes; lines longer than this arrive in several reads.
READ_BYTES = 1 << 16
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
        """Read ``source`` (stdin's byte buffer) line by line in a daemon thread."""
        self._source = source
        self._replies: MemoryObjectSendStream[SessionMessage] | None = None
        self._ready = anyio.Event()

    def answer_with(self, replies: MemoryObjectSendStream[SessionMessage]) -> None:
        """Where error replies go, known once the SDK's streams are open."""
        self._replies = replies
        self._ready.set()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for line in stdin_lines(self._source):
            if not line.strip():
                continue
            error = line_error(line)
            if error is None:
                yield line.decode("utf-8")
                continue
            await self._ready.wait()
            assert self._replies is not None
            await self._replies.send(SessionMessage(error))


def stdin_lines(source: BinaryIO) -> MemoryObjectReceiveStream[bytes]:
    """The lines of ``source``, read from its file descriptor by a daemon thread, to its end.

    Why not anyio's worker threads: a read blocked on a stdin the client keeps open
    cannot be cancelled, and a worker thread would hold the process at exit. Why the
    descriptor and not the buffered file: a thread blocked inside the file's read
    holds its lock, which the interpreter takes again at exit.
    """
    send, receive = anyio.create_memory_object_stream[bytes](max_buffer_size=16)
    token = current_token()
    threading.Thread(target=_pump, args=(source.fileno(), send, token), name="palimpsest-stdin", daemon=True).start()
    return receive


def _pump(fd: int, send: MemoryObjectSendStream[bytes], token: EventLoopToken) -> None:
    """Hand each line to the event loop; stop at the end of input or once serving is over."""
    pending = bytearray()
    try:
        while chunk := os.read(fd, READ_BYTES):
            pending.extend(chunk)
            end = pending.rfind(b"\n") + 1
            if end:
                for line in bytes(pending[: end - 1]).split(b"\n"):
                    anyio.from_thread.run(send.send, line + b"\n", token=token)
                del pending[:end]
        if pending:
            anyio.from_thread.run(send.send, bytes(pending), token=token)
    except (OSError, anyio.RunFinishedError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        return
    with suppress(anyio.RunFinishedError):
        anyio.from_thread.run_sync(send.close, token=token)


@contextmanager
def stop_on_signals(scope: anyio.CancelScope) -> Iterator[None]:
    """Cancel ``scope`` on SIGTERM or SIGINT, so serving ends and the lifespan's cleanup runs.

    Python's defaults would end the process at once (SIGTERM) or raise
    KeyboardInterrupt wherever the loop happens to be (SIGINT), so background work was
    cut off with its leases held and its cycle unrecorded. A signal after the first
    changes nothing: the stop under way is what it asked for. Where the event loop
    cannot watch signals (outside the main thread, or on Windows) this does nothing.
    """
    loop = asyncio.get_running_loop()

    def stop(signum: signal.Signals) -> None:
        logger.info("%s received: stopping", signum.name)
        scope.cancel()

    watched: list[signal.Signals] = []
    try:
        for signum in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(signum, stop, signum)
            except (NotImplementedError, RuntimeError, ValueError):
                break
            watched.append(signum)
        yield
    finally:
        for signum in watched:
            loop.remove_signal_handler(signum)


async def run_stdio(server: FastMCP) -> None:
    """Serve ``server`` over stdin and stdout until the client closes stdin or a signal comes.

    What ``FastMCP.run_stdio_async`` does, with ``CheckedLines`` as the SDK reader's
    input; the server's lifespan and low-level server are FastMCP's own. A signal
    cancels the serving only, inside the lifespan, so the lifespan ends as it does when
    stdin closes.
    """
    token = set_transport("stdio")
    try:
        async with server._lifespan_manager():
            with anyio.CancelScope() as serving, stop_on_signals(serving):
                lines = CheckedLines(sys.stdin.buffer)
                async with stdio_server(stdin=cast(anyio.AsyncFile[str], lines)) as (read_stream, write_stream):
                    lines.answer_with(write_stream)
                    low_level = server._mcp_server
                    await low_level.run(read_stream, write_stream, low_level.create_initialization_options())
    finally:
        reset_transport(token)
