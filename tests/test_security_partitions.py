"""Partitions never see or block each other (issue 12, defect 4, and issue 11's thread identity).

A token for one partition must learn nothing about another: not which thread ids it
uses (no "already used by another partition" oracle), not the hosts and pids of the
processes that maintain the store. Each test runs on both stores.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from fastmcp import FastMCP
from test_mcp_tools import call, client, make_settings

from palimpsest.graph_schema.models import MaintenanceCycle
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.mcp.app import build_server


@pytest.fixture
def server(store_url: str) -> FastMCP:
    return build_server(make_settings(store_url))


async def test_memory_stats_shows_cycles_without_host_pid_or_thread_names(server: FastMCP, store: MemoryStore) -> None:
    started = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    await store.record_cycle(
        MaintenanceCycle(
            id="cyc_1",
            job="compaction",
            holder="build-host-7:4242:ab12cd",
            started_at=started,
            finished_at=started,
            threads=2,
            summaries=5,
            errors=["thread beta-secret-session: store unavailable"],
        )
    )
    async with client(server, "windsurf") as session:
        stats = await call(session, "memory_stats")
    [shown] = stats["last_cycles"]
    assert (shown["job"], shown["threads"], shown["summaries"]) == ("compaction", 2, 5)
    assert shown["holder"].startswith("process-") and len(shown["holder"]) == len("process-") + 8
    assert "build-host-7" not in str(stats) and "4242" not in str(stats)
    assert "beta-secret-session" not in str(stats)
    assert shown["errors"] == ["1 error(s), named in the log of the process that ran it"]
