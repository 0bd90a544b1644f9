"""The stdio server's start: answer ``initialize`` first, import and open everything else after.

An agent starts ``palimpsest serve`` for every session and waits for its ``initialize``
answer. That answer needs only a FastMCP server with a name, a version and the
instructions; the tools need Palimpsest's domain modules (half a second of imports on
top of the MCP SDK's), their schemas built, and an open store (a new SQLite file is
created and migrated, a Neo4j one may be a network away). So `run_stdio_server` serves
a bare FastMCP server at once, and its lifespan starts one background task that imports
``palimpsest.server.mcp.app`` in a worker thread, registers the tools and middleware on
the running server (`app.equip_for_stdio`), and enters the store and maintenance
lifespans, which open the store in the background in turn.

Until the tools are registered, every request but ``initialize`` and ``ping`` waits
(`UntilEquipped`), so ``tools/list`` never answers an empty list; a tool call then
waits for the store in `RuntimeHolder`, and a store that cannot open makes every call
fail with the same one line. Only light modules are imported here: this module is what
``serve`` imports before answering.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import logging
import sys
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio
from fastmcp import FastMCP
from fastmcp.server.lifespan import lifespan
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext

from palimpsest.graph_schema.errors import PalimpsestError, StoreUnavailable
from palimpsest.server.mcp.logs import LogFormat, log_to_stderr

if TYPE_CHECKING:
    from palimpsest.server.settings import Settings

logger = logging.getLogger("palimpsest.server")

#: What the tools need (``tools.Runtime``), a type parameter so this module need not import it.
RuntimeT = TypeVar("RuntimeT")

#: Key of the lifespan context entry holding the `RuntimeHolder`.
RUNTIME_KEY = "palimpsest"

#: How long the event loop's thread may keep the GIL while a store thread waits for it.
#: SQLite work runs in worker threads that give the GIL up around every step of a query
#: (every row) and must then wait for it; Python's default of 5 ms per handover made a
#: read of a few hundred rows wait most of a second behind a busy event loop. At 0.5 ms,
#: ``bench/load.py`` (32 HTTP clients, SQLite) answered about a quarter more calls a
#: second, with lower p99s, for a few percent more CPU per call. It also lets the event
#: loop answer ``initialize`` while the background import holds the GIL.
GIL_SWITCH_SECONDS = 0.0005

INSTRUCTIONS = (
    "Palimpsest keeps every message of your conversations and folds old ones into "
    "summaries that expand back byte for byte. append_messages stores messages; "
    "grep_memories finds words, a regex or (semantic mode) meaning (each hit's covered_by names the summaries "
    "folding it); describe_summary and expand_summary open a summary; get_summary_dag "
    "shows a thread's summaries; compact_thread folds old messages now; memory_stats counts. "
    "recall answers what memory knows about a topic across threads (facts, summaries, messages); "
    "kg turns a thread's fact layer on or off and shows its facts by topic."
)

#: Requests answered before the tools exist: the handshake and liveness, nothing else.
_ANSWERED_AT_ONCE = frozenset({"initialize", "ping"})


def server_version() -> str:
    """The installed distribution's version, which ``initialize`` reports."""
    try:
        return version("palimpsest-memory")
    except PackageNotFoundError:
        return "0"


class RuntimeHolder(Generic[RuntimeT]):
    """The `Runtime` once the store is open, or why it could not open; tool calls wait on it.

    Settled once per serving: `ready` or `fail`. Every caller of `runtime` before then
    waits; after a failure every caller gets the same `StoreUnavailable`, which the
    tools turn into one line (``store unavailable: ...``).
    """

    def __init__(self) -> None:
        self._settled = asyncio.Event()
        self._runtime: RuntimeT | None = None
        self.error: str | None = None

    def ready(self, runtime: RuntimeT) -> None:
        """The store is open: release every waiting call with ``runtime``."""
        self._runtime = runtime
        self._settled.set()

    def fail(self, reason: str) -> None:
        """The store will not open in this process: fail every call, now and later, with ``reason``."""
        self.error = reason
        self._settled.set()

    async def settled(self) -> RuntimeT | None:
        """Wait until the store opened (its `Runtime`) or failed to (None)."""
        await self._settled.wait()
        return self._runtime

    async def runtime(self) -> RuntimeT:
        """The `Runtime`, once the store is open.

        Raises:
            StoreUnavailable: the store could not be opened (the reason, in one line).
        """
        runtime = await self.settled()
        if runtime is None:
            raise StoreUnavailable(self.error or "the store is not open")
        return runtime


def one_line(exc: BaseException) -> str:
    """An exception as one line for a client: its message's lines joined, else its type."""
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


class UntilEquipped(Middleware):
    """Holds every request but the handshake until the tools and their middleware are registered."""

    def __init__(self) -> None:
        self.equipped = asyncio.Event()

    async def on_request(self, context: MiddlewareContext[Any], call_next: CallNext[Any, Any]) -> Any:
        """Wait for the tools unless this is ``initialize`` or ``ping``, then go on."""
        if context.method not in _ANSWERED_AT_ONCE:
            await self.equipped.wait()
        return await call_next(context)


def stdio_server(settings: Settings) -> FastMCP:
    """A FastMCP server that can answer ``initialize`` now and equips itself in the background."""
    until_equipped = UntilEquipped()

    @lifespan
    async def deferred(server: FastMCP) -> AsyncIterator[dict[str, Any]]:
        holder: RuntimeHolder[Any] = RuntimeHolder()
        async with AsyncExitStack() as opened:
            task = asyncio.create_task(equip(server, settings, holder, until_equipped, opened))
            try:
                yield {RUNTIME_KEY: holder}
            finally:
                task.cancel()
                await asyncio.wait([task])
        # Leaving ``opened`` exited the store and maintenance lifespans, the latter first.

    return FastMCP(
        "palimpsest",
        instructions=INSTRUCTIONS,
        version=server_version(),
        lifespan=deferred,
        middleware=[until_equipped],
        mask_error_details=True,
    )


async def equip(
    server: FastMCP,
    settings: Settings,
    holder: RuntimeHolder[Any],
    until_equipped: UntilEquipped,
    opened: AsyncExitStack,
) -> None:
    """Import the app, register its tools, then enter its lifespans on ``opened`` (which exits them)."""
    try:
        # In a worker thread: the imports hold the GIL, but give it to the event loop
        # every switch interval, so the handshake is answered meanwhile.
        app = await asyncio.to_thread(importlib.import_module, "palimpsest.server.mcp.app")
        lifespans = app.equip_for_stdio(server, settings, holder)
    except PalimpsestError as exc:
        # A setting the tools cannot work with (an unknown embedder, say): one line, once.
        reason = f"the server cannot serve its tools: {one_line(exc)}"
        logger.error("%s", reason)
        holder.fail(reason)
        return
    except Exception as exc:
        logger.exception("the server could not load its tools")
        holder.fail(f"the server could not load its tools: {one_line(exc)}")
        return
    finally:
        until_equipped.equipped.set()
        gc.enable()  # off while the console script imported and built the server
    await opened.enter_async_context(lifespans(server))


def run_stdio_server(settings: Settings, log_format: LogFormat = LogFormat.text) -> None:
    """Serve MCP over stdin and stdout until the client hangs up or a signal comes."""
    from palimpsest.server.mcp.stdio import run_stdio

    log_to_stderr(log_format, logging.WARNING)
    sys.setswitchinterval(GIL_SWITCH_SECONDS)
    anyio.run(run_stdio, stdio_server(settings))
