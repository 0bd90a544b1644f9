"""``palimpsest serve``: the MCP server, on its own so that an agent's start imports nothing else.

An agent starts a stdio server for every session and waits for its ``initialize``
answer; the full command line imports every command's module (the DAG viewer, search,
set-up, portability) before typer can parse a flag. The console script
(``launch.py``) runs `serve_app`, this one command, for ``palimpsest serve ...``; the
full app lists the same `serve` among its commands. Over stdio it imports only what the
handshake needs (``palimpsest.server.mcp.starting``); the tools follow in the background.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from palimpsest.graph_schema.errors import PalimpsestError
from palimpsest.server.cli.support import StoreOption, fail, settings_from_flags
from palimpsest.server.mcp.logs import LogFormat


class Transport(StrEnum):
    """How ``serve`` talks to MCP clients."""

    stdio = "stdio"
    http = "http"


def serve(
    transport: Annotated[
        Transport, typer.Option("--transport", help="stdio for an IDE, http for a network.")
    ] = Transport.stdio,
    host: Annotated[str, typer.Option("--host", help="Address the http transport listens on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=1, max=65535, help="Port of the http transport.")] = 8765,
    partition: Annotated[
        str | None,
        typer.Option("--partition", metavar="NAME", help="Partition to write to; else from the MCP client's name."),
    ] = None,
    store: StoreOption = None,
    log_format: Annotated[
        LogFormat, typer.Option("--log-format", help="Log lines on stderr: text, or json (one object a line).")
    ] = LogFormat.text,
) -> None:
    """Run the MCP server (stdio for one IDE, http to share one process; http also serves /ui and /health).

    Example: palimpsest serve --transport http --port 8765 --store bolt://127.0.0.1:7687
    """
    settings = settings_from_flags(store, partition)
    try:
        if transport is Transport.stdio:
            from palimpsest.server.mcp.starting import run_stdio_server

            run_stdio_server(settings, log_format)
            return
        from palimpsest.server.mcp.app import run_server

        run_server(settings, transport=transport.value, host=host, port=port, log_format=log_format)
    except PalimpsestError as exc:
        raise fail(str(exc)) from None


serve_app = typer.Typer(
    name="serve",
    add_completion=False,
    pretty_exceptions_show_locals=False,
)
serve_app.command()(serve)
