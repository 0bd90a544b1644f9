"""A store and MCP client with a real embedder, shared by the semantic, hybrid and pairing tests."""

from __future__ import annotations

from typing import Any

import mcp_types
from fastmcp import Client

from palimpsest.graph_schema.models import NewMessage
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.settings import Settings

P = "claude"


MINILM_SPEC = "sentence-transformers:all-MiniLM-L6-v2"


STORED = "the login tokens expire after fifteen minutes"


QUERY = "how long until auth credentials time out"


DISTRACTORS = [
    "we deploy the frontend with vercel on every merge to main",
    "the database migrations live in alembic/versions",
    "remember to run the linter before committing",
    "the kitchen walls were painted blue last spring",
]


async def seed(store: MemoryStore, thread_id: str = "session-1", partition: str = P) -> list[str]:
    """Two distractors, the stored fact, two more distractors; their ids in that order."""
    contents = [*DISTRACTORS[:2], STORED, *DISTRACTORS[2:]]
    messages = [NewMessage(role="assistant", content=text, message_id=f"m{i}") for i, text in enumerate(contents)]
    return (await store.append_messages(partition, thread_id, messages)).message_ids


def settings_for(store_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "store": store_url,
        "partition": P,
        "scheduler": False,
        "compaction_threshold": 2,
        "keep_recent": 1,
        "summary_model": None,
        "tokens_file": None,
        "embedder": "none",
    }
    return Settings(**{**values, **overrides})


async def call(session: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert result.structured_content is not None
    return result.structured_content


def mcp_client(server: Any) -> Client:
    return Client(server, client_info=mcp_types.Implementation(name="claude-code", version="1.0"))
