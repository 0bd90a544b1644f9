"""The FastMCP application: a factory that wires settings, store and tools, and how to run it.

`build_server` makes a fresh server for each caller (tests pass their own store), never a
module-global one. Its lifespan opens the store and initializes the schema in a background
task, so the server answers before the store is ready (tool calls wait for it), and
closes the store in ``finally``; composed after it, the maintenance lifespan runs the
background jobs once the store is open (unless ``PALIMPSEST_SCHEDULER=off``) and stops
them first on the way out. Over stdio, `equip_for_stdio` adds the same tools and
lifespans to the bare server ``starting.py`` answered ``initialize`` with. Every
tool call holds the foreground gate, so background work yields to it, and is counted
and timed (``metrics.py``). `run_server` serves it over stdio (one IDE, the default) or
streamable HTTP (shared; bearer tokens bound to partitions, or loopback only), where
the same app also answers ``/health`` (``health.py``) and serves the viewer at ``/ui``
(``server/ui/``), every route behind the Host/Origin guard and security headers of
``http_app.py``; ``palimpsest ui`` serves that app without ``/mcp``.
"""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import logging
import signal
import socket
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import mcp_types
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from fastmcp import FastMCP
from fastmcp.resources.base import ResourceResult
from fastmcp.server.lifespan import Lifespan, lifespan
from fastmcp.server.middleware import CallNext, Middleware, MiddlewareContext
from fastmcp.tools.base import ToolResult

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.embedders import make_embedder
from palimpsest.scheduler.embedding import EmbeddingQueue
from palimpsest.scheduler.foreground import ForegroundGate
from palimpsest.scheduler.maintenance import Maintenance, evolution_steps
from palimpsest.scheduler.summarizers import make_summarizer
from palimpsest.server.cli.hook_drain import spool_step
from palimpsest.server.mcp.health import LiveServer, register_health
from palimpsest.server.mcp.http_app import GuardedFastMCP, is_wildcard
from palimpsest.server.mcp.logs import LogFormat, log_to_stderr
from palimpsest.server.mcp.metrics import CallMetrics, ToolMetrics
from palimpsest.server.mcp.partitions import PartitionTokenVerifier, load_token_grants
from palimpsest.server.mcp.starting import (
    GIL_SWITCH_SECONDS,
    INSTRUCTIONS,
    RUNTIME_KEY,
    RuntimeHolder,
    one_line,
    run_stdio_server,
    server_version,
)
from palimpsest.server.mcp.tools import ArgumentErrors, Runtime, register_tools
from palimpsest.server.settings import Settings
from palimpsest.server.ui.routes import register_ui

logger = logging.getLogger("palimpsest.server")


class ServerParts:
    """What one server's lifespans and tools share, and the lifespans themselves.

    The store lifespan opens the store in a background task and yields at once, so the
    server answers ``initialize`` while the store is being opened, created or migrated;
    tool calls wait for it in the `RuntimeHolder` (the HTTP app waits for it before it
    serves: ``http_app.py``). The
    maintenance lifespan, composed after it, starts the scheduler once the store is
    open and stops it first on the way out; the store lifespan then stops the
    embedding queue and closes the store, in ``finally``.
    """

    def __init__(
        self,
        settings: Settings,
        store: MemoryStore | None,
        *,
        grants: dict[str, frozenset[str]] | None,
        holder: RuntimeHolder[Runtime] | None = None,
    ) -> None:
        """``holder``: the one the tools read (the stdio shell's); else each serving makes its own."""
        self.settings = settings
        self.store = store
        self.grants = grants
        self.holder = holder
        self.summarizer = make_summarizer(settings.llm)
        # One embedder per process; a local model loads on first use, in the background.
        self.embedder = make_embedder(settings.embedder, settings.llm)
        self.gate = ForegroundGate(background_share=settings.background_share)
        self.metrics = ToolMetrics()
        self.live = LiveServer(scheduler_wanted=settings.scheduler)

    def middleware(self) -> list[Middleware]:
        """Each tool call counted and timed, holding the foreground gate, its argument errors in one line."""
        return [CallMetrics(self.metrics), ForegroundFirst(self.gate), ArgumentErrors()]

    def lifespans(self) -> Lifespan:
        """The store lifespan, then the maintenance lifespan."""
        return lifespan(self._store_lifespan) | lifespan(self._maintenance_lifespan)

    async def _store_lifespan(self, server: FastMCP) -> AsyncIterator[dict[str, Any]]:
        holder: RuntimeHolder[Runtime] = self.holder or RuntimeHolder()
        self.live.holder = holder
        owned = self.store is None
        opened: list[MemoryStore] = []
        queues: list[EmbeddingQueue] = []
        task = asyncio.create_task(self._open(holder, opened, queues))
        try:
            yield {RUNTIME_KEY: holder}
        finally:
            self.live.runtime = None
            task.cancel()
            await asyncio.wait([task])
            for queue in queues:
                await queue.stop()
            if owned:
                for active in opened:
                    await active.close()

    async def _open(
        self, holder: RuntimeHolder[Runtime], opened: list[MemoryStore], queues: list[EmbeddingQueue]
    ) -> None:
        """Open and initialize the store, start the embedding queue, then release the waiting calls."""
        try:
            active = self.settings.open_store() if self.store is None else self.store
            opened.append(active)
            await active.initialize()
        except Exception as exc:
            # Logged once here; every tool call then answers this line.
            reason = f"could not open the store: {one_line(exc)}"
            logger.error("%s", reason)
            holder.fail(reason)
            return
        logger.info("serving the %s store", active.kind)
        embedding: EmbeddingQueue | None = None
        if self.embedder is not None:
            embedding = EmbeddingQueue(active, self.embedder, pause=self.gate.wait_idle)
            queues.append(embedding)
            embedding.start()
            logger.info("semantic search on with %s", self.embedder.name)
        runtime = Runtime(
            store=active,
            settings=self.settings,
            summarizer=self.summarizer,
            tokens_required=self.grants is not None,
            embedder=self.embedder,
            embedding=embedding,
            metrics=self.metrics,
        )
        self.live.runtime = runtime
        holder.ready(runtime)

    # -- maintenance: the background loop, started once the store is open, stopped before it --

    async def _maintenance_lifespan(self, server: FastMCP) -> AsyncIterator[dict[str, Any]]:
        if not self.settings.scheduler:
            logger.info("background maintenance is off in this process")
            yield {}
            return
        holder = self.live.holder
        assert holder is not None  # set by the store lifespan, entered first
        started: list[tuple[Maintenance, AsyncIOScheduler]] = []
        task = asyncio.create_task(self._start_maintenance(holder, started))
        try:
            yield {}
        finally:
            self.live.scheduler = None
            task.cancel()
            await asyncio.wait([task])
            for maintenance, scheduler in started:
                await maintenance.shutdown(scheduler)

    async def _start_maintenance(
        self, holder: RuntimeHolder[Runtime], started: list[tuple[Maintenance, AsyncIOScheduler]]
    ) -> None:
        runtime = await holder.settled()
        if runtime is None:
            logger.info("background maintenance is off: the store did not open")
            return
        settings = self.settings
        maintenance = Maintenance(
            runtime.store,
            settings.maintenance,
            self.summarizer,
            gate=self.gate,
            steps=[
                # A detached drainer stores queued hook turns: run here, the payloads' own
                # environment and working directory would be seen by every other coroutine.
                spool_step(runtime.store, settings.store, in_process=False),
                *evolution_steps(
                    runtime.store, self.embedder, settings.store_budget, facts=settings.facts, llm=settings.llm
                ),
            ],
        )
        scheduler = AsyncIOScheduler()
        maintenance.start(scheduler)
        scheduler.start()
        started.append((maintenance, scheduler))
        self.live.scheduler = scheduler
        logger.info(
            "background maintenance on as %s: compaction every %ds, evolution every %ds",
            maintenance.holder,
            settings.compaction_interval,
            settings.evolution_interval,
        )


def build_server(settings: Settings, store: MemoryStore | None = None, *, serves_mcp: bool = True) -> FastMCP:
    """A ready-to-run MCP server over one store.

    Args:
        settings: Configuration (store URI, partition, compaction, LLM, tokens file,
            allowed hosts).
        store: A store to serve instead of ``settings.open_store()``; the caller keeps
            ownership and closes it (the lifespan still calls its idempotent
            ``initialize``).
        serves_mcp: False for the read-only viewer: its HTTP app has no ``/mcp``.

    Raises:
        InvalidInput: if the tokens file is unreadable or malformed, or
            ``PALIMPSEST_EMBEDDER`` names no embedder.
    """
    grants = load_token_grants(settings.tokens_file) if settings.tokens_file is not None else None
    parts = ServerParts(settings, store, grants=grants)
    server = GuardedFastMCP(
        "palimpsest",
        allowed_hosts=settings.allowed_hosts,
        serves_mcp=serves_mcp,
        store_settled=parts.live.settled,
        instructions=INSTRUCTIONS,
        version=server_version(),
        lifespan=parts.lifespans(),
        auth=PartitionTokenVerifier(grants) if grants is not None else None,
        middleware=parts.middleware(),
        mask_error_details=True,
    )
    register_tools(server)
    register_health(server, parts.live)
    register_ui(server, parts.live, grants)
    return server


def equip_for_stdio(server: FastMCP, settings: Settings, holder: RuntimeHolder[Runtime]) -> Lifespan:
    """Register the tools and their middleware on the running stdio shell; return the lifespans to enter.

    Over stdio no bearer token is ever asked for, and no HTTP route (``/health``,
    ``/ui``) is served, so neither is set up. The middleware go after the shell's own
    `UntilEquipped`, in `build_server`'s order.

    Raises:
        InvalidInput: if ``PALIMPSEST_EMBEDDER`` names no embedder.
    """
    # The tools first: should the settings fail here, every call answers why.
    register_tools(server)
    parts = ServerParts(settings, None, grants=None, holder=holder)
    server.middleware[1:1] = parts.middleware()
    return parts.lifespans()


class ForegroundFirst(Middleware):
    """Holds the foreground gate for each tool call and resource read, so maintenance yields."""

    def __init__(self, gate: ForegroundGate) -> None:
        self.gate = gate

    async def on_call_tool(
        self,
        context: MiddlewareContext[mcp_types.CallToolRequestParams],
        call_next: CallNext[mcp_types.CallToolRequestParams, ToolResult],
    ) -> ToolResult:
        """Run the call with the gate held."""
        async with self.gate.foreground():
            return await call_next(context)

    async def on_read_resource(
        self,
        context: MiddlewareContext[mcp_types.ReadResourceRequestParams],
        call_next: CallNext[mcp_types.ReadResourceRequestParams, ResourceResult],
    ) -> ResourceResult:
        """Run the read with the gate held."""
        async with self.gate.foreground():
            return await call_next(context)


def is_loopback(host: str) -> bool:
    """Whether a bind address only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def run_server(
    settings: Settings,
    *,
    transport: str = "stdio",
    host: str = "127.0.0.1",
    port: int = 8765,
    log_format: LogFormat = LogFormat.text,
    listening: socket.socket | None = None,
    serves_mcp: bool = True,
) -> None:
    """Serve MCP until the client hangs up (stdio) or the process is stopped (HTTP).

    Over HTTP, a tokens file (``PALIMPSEST_TOKENS_FILE``) makes bearer tokens required,
    each bound to its partitions; without one the server is unauthenticated and so
    only listens on loopback. Either way only requests naming an allowed host are
    answered (``http_app.py``): ``host`` is one of them unless it is a wildcard.

    ``log_format`` ``json`` writes structured log lines on stderr. ``listening`` is a
    socket already bound to ``host:port`` (``palimpsest ui`` binds port 0 first, so it
    can print the address it got before serving). ``serves_mcp`` False serves the
    viewer and ``/health`` only (``palimpsest ui``).

    Raises:
        InvalidInput: for an unknown transport, a malformed tokens file, or an
            unauthenticated HTTP server asked to listen beyond loopback.
    """
    if transport == "stdio":
        run_stdio_server(settings, log_format)
        return
    if transport != "http":
        raise InvalidInput(f"unknown transport {transport!r}: use stdio or http")
    log_to_stderr(log_format, logging.INFO)
    sys.setswitchinterval(GIL_SWITCH_SECONDS)
    if settings.tokens_file is None:
        if not is_loopback(host):
            raise InvalidInput(
                f"refusing to serve HTTP on {host} without authentication: set "
                "PALIMPSEST_TOKENS_FILE to require bearer tokens, or bind to 127.0.0.1"
            )
        logger.warning(
            "serving MCP over HTTP without authentication on %s:%d (loopback only); "
            "set PALIMPSEST_TOKENS_FILE to require bearer tokens",
            host,
            port,
        )
    if is_wildcard(host) and not settings.allowed_hosts:
        logger.warning(
            "listening on every interface (%s): requests are answered only when their Host names loopback or "
            "the address they arrived on; set PALIMPSEST_ALLOWED_HOSTS to the names clients use",
            host,
        )
    server = build_server(settings, serves_mcp=serves_mcp)
    gc.enable()
    # uvicorn without its own logging config hands its lines to the root handler above.
    uvicorn_config = {"log_config": None} if log_format is LogFormat.json else None
    sockets = [listening] if listening is not None else None
    with signals_end_serving():
        server.run(
            transport="http",
            host=host,
            port=port,
            show_banner=False,
            uvicorn_config=uvicorn_config,
            sockets=sockets,
            allowed_hosts=[host],
        )


@contextmanager
def signals_end_serving() -> Iterator[None]:
    """Let SIGTERM and SIGINT stop an HTTP server cleanly, background work included.

    uvicorn catches both, stops serving gracefully, then raises the signal again to
    the handler it found. FastMCP exits the server's lifespan (which stops maintenance
    and closes the store) only after uvicorn returns, so Python's own handlers there
    would end the process first (SIGTERM) or raise KeyboardInterrupt through the
    lifespan (SIGINT): leases were left held and the cycle unrecorded. Handlers that
    only log take their place while serving; the stop already under way is the answer.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def noted(signum: int, _frame: FrameType | None) -> None:
        logger.info("%s received: stopping", signal.Signals(signum).name)

    previous = {signum: signal.signal(signum, noted) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
