"""Dates out of range get one clear sentence, from every tool and the CLI (issue 12, defect 3).

``9999-12-31T23:59:59-14:00`` is a valid ISO 8601 time whose UTC moment is in the year
10000, which Python cannot hold: converting it used to raise ``OverflowError`` deep in
a tool, and the caller saw only "Error calling tool". The model boundary
(``UtcDatetime``) refuses it now, so every tool, feed and CLI command agree.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError

from palimpsest.server.mcp.app import build_server
from tests.support.cli import run_cli
from tests.support.jsonl import line, write_jsonl
from tests.support.mcp_calls import call, client, make_settings

TOO_LATE = "9999-12-31T23:59:59-14:00"
TOO_EARLY = "0001-01-01T00:00:00+14:00"
OUT_OF_RANGE = "is out of range: in UTC it falls outside the years 1 to 9999"


@pytest.fixture
def server(store_url: str) -> FastMCP:
    return build_server(make_settings(store_url))


async def test_tools_refuse_out_of_range_dates_in_one_sentence(server: FastMCP) -> None:
    async with client(server) as session:
        await call(session, "append_messages", thread_id="t", messages=[{"role": "user", "content": "kept"}])
        before = await call(session, "memory_stats")
        for arguments in (
            {"query": "kept", "since": TOO_LATE},
            {"query": "kept", "until": TOO_EARLY},
        ):
            with pytest.raises(ToolError) as refused:
                await session.call_tool("grep_memories", arguments)
            assert OUT_OF_RANGE in str(refused.value)
            assert "Error calling tool" not in str(refused.value)
        with pytest.raises(ToolError) as refused:
            await session.call_tool(
                "append_messages",
                {"thread_id": "t", "messages": [{"role": "user", "content": "x", "created_at": TOO_EARLY}]},
            )
        assert f"0001-01-01T00:00:00+14:00 {OUT_OF_RANGE}" in str(refused.value)
        after = await call(session, "memory_stats")
        assert (after["threads"], after["messages"]) == (before["threads"], before["messages"])
        # The extremes that do fit are answered, not refused.
        found = await call(
            session, "grep_memories", query="kept", since="0001-01-01T00:00:00Z", until="9999-12-31T23:59:59Z"
        )
        assert [hit["snippet"] for hit in found["hits"]] == ["kept"]


def test_cli_ingest_refuses_an_out_of_range_date(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "late.jsonl", [line(created_at=TOO_LATE)])
    result = run_cli("ingest", path, "--store", f"sqlite:///{tmp_path / 'm.db'}")
    assert result.exit_code != 0
    assert OUT_OF_RANGE in result.output
    assert "Traceback" not in result.output
