"""A loopback TCP relay in front of the test Neo4j, to stage a real outage.

Cutting it drops every connection and stops listening, as a crashed server would;
starting it again listens on the same port, as a restarted server would.
"""

from __future__ import annotations

import asyncio
import contextlib


class TcpRelay:
    """A loopback TCP relay to the test Neo4j that a test can cut and restore."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    async def start(self) -> None:
        """Listen (again, on the same port once one was chosen) and relay every connection."""
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def cut(self) -> None:
        """Stop listening and drop every open connection, as a crashed server would."""
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        await self._server.wait_closed()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.transport.abort()
            return
        self._writers.update({writer, upstream_writer})

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.transport.abort()

        await asyncio.gather(pump(reader, upstream_writer), pump(upstream_reader, writer))
        self._writers.difference_update({writer, upstream_writer})
