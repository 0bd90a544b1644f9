"""``/health`` on a real HTTP server: healthy on each store, and following a real Neo4j outage.

The outage is staged with the TCP relay in front of the test Neo4j: cutting it drops
every connection as a crashed server would. The test records the sequence of states
``/health`` reports and asserts on that sequence; deadlines only guard the waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx2
import pytest

from palimpsest.graph_schema.models import MaintenanceCycle
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.mcp.app import build_server
from palimpsest.server.settings import Settings
from tests.support.asgi_server import serving
from tests.support.stores import neo4j_test_uri, wipe_neo4j
from tests.support.tcp_relay import TcpRelay

#: Seconds a state change may take to show (a guard on the wait, not an assertion).
DEADLINE_SECONDS = 60


def settings_for(store_url: str, **overrides: Any) -> Settings:
    """Settings of one test's server: its store, maintenance on, nothing from the environment."""
    values: dict[str, Any] = {"store": store_url, "partition": None, "tokens_file": None, "summary_model": None}
    values.update(overrides)
    return Settings(**values)


async def probe(http: httpx2.AsyncClient, base: str) -> tuple[int, dict[str, Any]]:
    response = await http.get(f"{base}/health")
    return response.status_code, response.json()


async def wait_for(http: httpx2.AsyncClient, base: str, wanted: str, seen: list[str]) -> dict[str, Any]:
    """Probe until ``/health`` reports ``wanted``, recording every state seen on the way."""
    async with asyncio.timeout(DEADLINE_SECONDS):
        while True:
            status, body = await probe(http, base)
            assert status == (200 if body["status"] == "healthy" else 503), body
            if not seen or seen[-1] != body["status"]:
                seen.append(body["status"])
            if body["status"] == wanted:
                return body
            await asyncio.sleep(0.2)


async def test_health_reports_the_store_and_the_scheduler(backend: str, store_url: str, store: MemoryStore) -> None:
    finished = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    await store.record_cycle(
        MaintenanceCycle(
            id="cycle-1", job="compaction", holder="h:1:x", started_at=finished, finished_at=finished, errors=["x"]
        )
    )
    server = build_server(settings_for(store_url), store=store)
    async with serving(server) as base, httpx2.AsyncClient(timeout=30) as http:
        # A loaded test machine may miss the probe's limit once; healthy must come.
        body = await wait_for(http, base, "healthy", [])
    assert (body["store"], body["store_kind"], body["store_error"]) == ("reachable", backend, None)
    assert body["scheduler"] == "running"
    assert body["last_cycle"] == {"job": "compaction", "finished_at": "2026-11-30T09:00:00Z", "errors": 1}


async def test_health_says_when_maintenance_is_off_on_purpose(tmp_path: Path) -> None:
    server = build_server(settings_for(f"sqlite:///{tmp_path / 'm.db'}", scheduler=False))
    async with serving(server) as base, httpx2.AsyncClient(timeout=30) as http:
        status, body = await probe(http, base)
    assert (status, body["status"], body["scheduler"]) == (200, "healthy", "off")


@pytest.fixture
async def relay() -> AsyncIterator[TcpRelay]:
    """A relay to a fresh test Neo4j."""
    uri = neo4j_test_uri()
    await wipe_neo4j(uri)
    host, port = uri.split("://", 1)[1].rsplit(":", 1)
    started = TcpRelay(host, int(port))
    await started.start()
    yield started
    await started.cut()


@pytest.mark.neo4j
async def test_health_follows_a_neo4j_stop_and_start(relay: TcpRelay) -> None:
    # The store the server opens itself, with the driver's default retry and connect times.
    server = build_server(settings_for(f"bolt://127.0.0.1:{relay.port}"))
    seen: list[str] = []
    async with serving(server) as base, httpx2.AsyncClient(timeout=30) as http:
        await wait_for(http, base, "healthy", [])
        seen.append("healthy")
        await relay.cut()
        # No cache: the very first probe after the outage sees it; the probe's own limit bounds its answer.
        status, down = await probe(http, base)
        assert (status, down["status"], down["store"]) == (503, "unhealthy", "unreachable"), down
        assert down["store_error"], down
        seen.append(down["status"])
        await relay.start()
        up = await wait_for(http, base, "healthy", seen)
    assert seen == ["healthy", "unhealthy", "healthy"]
    assert (up["store"], up["scheduler"]) == ("reachable", "running")
