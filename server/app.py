"""The FastMCP application: a factory that wires settings, store and tools, and how to run it.

`build_server` makes a fresh server for each caller (tests pass their own store), never a
module-global one. Its lifespan opens the store, initializes the schema, and closes the
store in ``finally``. `run_server` serves it over stdio (one IDE, the default) or
streamable HTTP (shared; bearer tokens bound to partitions, or loopback only).
"""

from __future__ import annotations

import ipaddress
import logging
import sys
from collections.abc import AsyncIterator
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from fastmcp import FastMCP
from fastmcp.server.lifespan import lifespan

from graph_schema.errors import InvalidInput
from graph_schema.store import MemoryStore
from scheduler.summarizers import make_summarizer
from server.partitions import PartitionTokenVerifier, load_token_grants
from server.settings import Settings
from server.tools import RUNTIME_KEY, ArgumentErrors, Runtime, register_tools

logger = logging.getLogger("palimpsest.server")

INSTRUCTIONS = (
    "Palimpsest keeps every message of your conversations and folds old ones into "
    "summaries that expand back byte for byte. append_messages stores messages; "
    "grep_memories finds words or a regex (each hit's covered_by names the summaries "
    "folding it); describe_summary and expand_summary open a summary; get_summary_dag "
    "shows a thread's summaries; compact_thread folds old messages now; memory_stats counts."
)


def _version() -> str:
    try:
        return version("palimpsest-memory")
    except PackageNotFoundError:
        return "0"


def build_server(settings: Settings, store: MemoryStore | None = None) -> FastMCP:
    """A ready-to-run MCP server over one store.

    Args:
        settings: Configuration (store URI, partition, compaction, LLM, tokens file).
        store: A store to serve instead of ``settings.open_store()``; the caller keeps
            ownership and closes it (the lifespan still calls its idempotent
            ``initialize``).

    Raises:
        InvalidInput: if the tokens file is unreadable or malformed.
    """
    grants = load_token_grants(settings.tokens_file) if settings.tokens_file is not None else None
    summarizer = make_summarizer(settings.llm)

    @lifespan
    async def store_lifespan(server: FastMCP) -> AsyncIterator[dict[str, Any]]:
        owned = store is None
        active = settings.open_store() if store is None else store
        try:
            await active.initialize()
            logger.info("serving the %s store", active.kind)
            yield {
                RUNTIME_KEY: Runtime(
                    store=active, settings=settings, summarizer=summarizer, tokens_required=grants is not None
                )
            }
        finally:
            if owned:
                await active.close()

    server = FastMCP(
        "palimpsest",
        instructions=INSTRUCTIONS,
        version=_version(),
        lifespan=store_lifespan,
        auth=PartitionTokenVerifier(grants) if grants is not None else None,
        middleware=[ArgumentErrors()],
        mask_error_details=True,
    )
    register_tools(server)
    return server


def is_loopback(host: str) -> bool:
    """Whether a bind address only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _log_to_stderr() -> None:
    """On stdio, stdout carries protocol bytes only: every log line goes to stderr."""
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.INFO)


def run_server(settings: Settings, *, transport: str = "stdio", host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve MCP until the client hangs up (stdio) or the process is stopped (HTTP).

    Over HTTP, a tokens file (``PALIMPSEST_TOKENS_FILE``) makes bearer tokens required,
    each bound to its partitions; without one the server is unauthenticated and so
    only listens on loopback.

    Raises:
        InvalidInput: for an unknown transport, a malformed tokens file, or an
            unauthenticated HTTP server asked to listen beyond loopback.
    """
    _log_to_stderr()
    if transport == "stdio":
        build_server(settings).run(transport="stdio", show_banner=False)
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
    server = build_server(settings)
    server.run(transport="http", host=host, port=port, show_banner=False)
