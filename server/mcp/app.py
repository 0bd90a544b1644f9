"""The FastMCP application: a factory that wires settings, store and tools, and how to run it.

`build_server` makes a fresh server for each caller (tests pass their own store), never a
module-global one. Its lifespan opens the store, initializes the schema, and closes the
store in ``finally``; composed after it, the maintenance lifespan runs the background
jobs (unless ``PALIMPSEST_SCHEDULER=off``) and stops them first on the way out. Every
tool call holds the foreground gate, so background work yields to it, and is counted
and timed (``metrics.py``). `run_server` serves it over stdio (one IDE, the default) or
streamable HTTP (shared; bearer tokens bound to partitions, or loopback only), where
the same app also answers ``/health`` (``health.py``) and serves the viewer at ``/ui``
(``server/ui/``), every route behind the Host/Origin guard and security headers of
``http_app.py``; ``palimpsest ui`` serves that app without ``/mcp``.
"""

from __future__ import annotations

import gc
import ipaddress
import logging
import signal
import socket
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from types import FrameType
from typing import Any

import anyio
import mcp_types
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from fastmcp import FastMCP
from fastmcp.resources.base import ResourceResult
from fastmcp.server.lifespan import lifespan
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
from palimpsest.server.mcp.stdio import run_stdio
from palimpsest.server.mcp.tools import RUNTIME_KEY, ArgumentErrors, Runtime, register_tools
from palimpsest.server.settings import Settings
from palimpsest.server.ui.routes import register_ui

logger = logging.getLogger("palimpsest.server")

#: How long the event loop's thread may keep the GIL while a store thread waits for it.
#: SQLite work runs in worker threads that give the GIL up around every step of a query
#: (every row) and must then wait for it; Python's default of 5 ms per handover made a
#: read of a few hundred rows wait most of a second behind a busy event loop. At 0.5 ms,
#: ``bench/load.py`` (32 HTTP clients, SQLite) answered about a quarter more calls a
#: second, with lower p99s, for a few percent more CPU per call.
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


def _version() -> str:
    try:
        return version("palimpsest-memory")
    except PackageNotFoundError:
        return "0"


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
    summarizer = make_summarizer(settings.llm)
    # One embedder per process; a local model loads on first use, in the background.
    embedder = make_embedder(settings.embedder, settings.llm)
    gate = ForegroundGate(background_share=settings.background_share)
    metrics = ToolMetrics()
    live = LiveServer(scheduler_wanted=settings.scheduler)

    @lifespan
    async def store_lifespan(server: FastMCP) -> AsyncIterator[dict[str, Any]]:
        owned = store is None
        active = settings.open_store() if store is None else store
        embedding: EmbeddingQueue | None = None
        try:
            await active.initialize()
            logger.info("serving the %s store", active.kind)
            if embedder is not None:
                embedding = EmbeddingQueue(active, embedder, pause=gate.wait_idle)
                embedding.start()
                logger.info("semantic search on with %s", embedder.name)
            live.runtime = Runtime(
                store=active,
                settings=settings,
                summarizer=summarizer,
                tokens_required=grants is not None,
                embedder=embedder,
                embedding=embedding,
                metrics=metrics,
            )
            yield {RUNTIME_KEY: live.runtime}
        finally:
            live.runtime = None
            if embedding is not None:
                await embedding.stop()
            if owned:
                await active.close()

    # -- maintenance: the background loop, composed after the store, stopped before it --

    @lifespan
    async def maintenance_lifespan(server: FastMCP) -> AsyncIterator[dict[str, Any]]:
        if not settings.scheduler or live.runtime is None:
            logger.info("background maintenance is off in this process")
            yield {}
            return
        maintenance = Maintenance(
            live.runtime.store,
            settings.maintenance,
            summarizer,
            gate=gate,
            steps=[
                spool_step(live.runtime.store, settings.store),
                *evolution_steps(live.runtime.store, embedder, settings.store_budget, facts=settings.facts),
            ],
        )
        scheduler = AsyncIOScheduler()
        maintenance.start(scheduler)
        scheduler.start()
        live.scheduler = scheduler
        logger.info(
            "background maintenance on as %s: compaction every %ds, evolution every %ds",
            maintenance.holder,
            settings.compaction_interval,
            settings.evolution_interval,
        )
        try:
            yield {}
        finally:
            live.scheduler = None
            await maintenance.shutdown(scheduler)

    server = GuardedFastMCP(
        "palimpsest",
        allowed_hosts=settings.allowed_hosts,
        serves_mcp=serves_mcp,
        instructions=INSTRUCTIONS,
        version=_version(),
        lifespan=store_lifespan | maintenance_lifespan,
        auth=PartitionTokenVerifier(grants) if grants is not None else None,
        middleware=[CallMetrics(metrics), ForegroundFirst(gate), ArgumentErrors()],
        mask_error_details=True,
    )
    register_tools(server)
    register_health(server, live)
    register_ui(server, live, grants)
    return server


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
    log_to_stderr(log_format, logging.WARNING if transport == "stdio" else logging.INFO)
    sys.setswitchinterval(GIL_SWITCH_SECONDS)
    if transport == "stdio":
        server = build_server(settings)
        gc.enable()  # off while the console script imported and built the server
        anyio.run(run_stdio, server)
        return
    if transport != "http":
        raise InvalidInput(f"unknown transport {transport!r}: use stdio or http")
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
