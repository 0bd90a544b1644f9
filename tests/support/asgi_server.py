"""A Palimpsest HTTP server run by uvicorn inside the test's own event loop, on a free loopback port.

In process rather than a subprocess when a test must share its loop with something
else it drives (the TCP relay that stages a Neo4j outage), and cheap to start.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import uvicorn
from fastmcp import FastMCP

#: Seconds the server may take to start listening (a guard, not a bound).
START_SECONDS = 30


@asynccontextmanager
async def serving(server: FastMCP) -> AsyncIterator[str]:
    """Serve ``server``'s HTTP app (MCP, /ui, /health) until the block ends; yields its base URL."""
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    http = uvicorn.Server(uvicorn.Config(server.http_app(), log_level="warning", lifespan="on"))
    task = asyncio.create_task(http.serve(sockets=[listening]))
    try:
        async with asyncio.timeout(START_SECONDS):
            while not http.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        http.should_exit = True
        await task
        listening.close()
