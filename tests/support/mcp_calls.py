"""Calling the MCP tools through a real in-memory fastmcp client, shared by the tool-level tests."""

from __future__ import annotations

from typing import Any

import mcp_types
from fastmcp import Client, FastMCP

from palimpsest.server.settings import Settings


def make_settings(store_url: str, **overrides: Any) -> Settings:
    """Settings for one test: small compaction numbers so a dozen messages compact."""
    values: dict[str, Any] = {
        "store": store_url,
        "partition": None,
        "compaction_threshold": 4,
        "keep_recent": 2,
        "escalation_fanin": 2,
        "summary_model": None,
        "tokens_file": None,
    }
    values.update(overrides)
    return Settings(**values)


def client(server: FastMCP, name: str = "claude-code") -> Client:
    """An in-memory client that introduces itself as ``name`` (which picks the partition)."""
    return Client(server, client_info=mcp_types.Implementation(name=name, version="1.0"))


async def call(session: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool and return its structured result."""
    result = await session.call_tool(tool, arguments)
    assert result.structured_content is not None
    return result.structured_content


def turn(i: int, text: str | None = None) -> dict[str, Any]:
    """A wordy message (so summaries can be shorter than their sources) with a stable id."""
    return {
        "role": "user" if i % 2 == 0 else "assistant",
        "content": text or f"Step {i}: we reworked the token refresh flow in auth/service.py and ran the suite. " * 3,
        "message_id": f"m{i}",
        "created_at": f"2024-05-01T10:00:{i:02d}Z",
    }
