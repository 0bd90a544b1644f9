"""The MCP tools through a real ``fastmcp.Client`` in memory, on both stores.

Each test builds a server with `build_server` (its lifespan opens the store named by the
settings) and talks to it as an IDE would: happy paths with their content, the schema a
client sees, every kind of bad input (refused with a clear message, store unchanged),
partition isolation, and a Neo4j outage the server survives.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fastmcp import Client, FastMCP
from fastmcp.exceptions import ToolError

from palimpsest.graph_schema.backends import Neo4jCredentials
from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import MAX_BATCH, MAX_MESSAGE_BYTES
from palimpsest.graph_schema.neo4j.store import Neo4jStore
from palimpsest.server.mcp.app import build_server, is_loopback, run_server
from palimpsest.server.mcp.partitions import (
    PartitionDenied,
    PartitionTokenVerifier,
    load_token_grants,
    partition_for_client,
    resolve_partition,
)
from palimpsest.server.retrieval.grep import required_word
from tests.support.mcp_calls import call, client, make_settings, turn
from tests.support.stores import neo4j_test_uri, wipe_neo4j
from tests.support.tcp_relay import TcpRelay

TOOLS = {
    "append_messages",
    "grep_memories",
    "describe_summary",
    "expand_summary",
    "get_summary_dag",
    "compact_thread",
    "memory_stats",
}
READERS = {"grep_memories", "describe_summary", "expand_summary", "get_summary_dag", "memory_stats"}


@pytest.fixture
def server(store_url: str) -> FastMCP:
    """A server over a fresh store of the backend under test."""
    return build_server(make_settings(store_url))


async def test_tools_have_output_schemas_bounds_and_hints(tmp_path: Path) -> None:
    server = build_server(make_settings(f"sqlite:///{tmp_path / 'm.db'}"))
    async with client(server) as session:
        tools = {tool.name: tool for tool in await session.list_tools()}
        templates = {t.uri_template for t in await session.list_resource_templates()}
    assert TOOLS <= set(tools)
    for name in TOOLS:
        assert tools[name].output_schema is not None, name
        assert "partition" in tools[name].input_schema["properties"], name
        assert tools[name].annotations is not None
        assert tools[name].annotations.read_only_hint is (name in READERS), name
    limit = tools["grep_memories"].input_schema["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, 200, 20)
    mode = tools["grep_memories"].input_schema["properties"]["mode"]
    assert mode["default"] is None  # no mode: hybrid once vectors exist, else text
    assert [choice.get("enum") for choice in mode["anyOf"]] == [["text", "regex", "semantic", "hybrid"], None]
    assert set(tools["grep_memories"].output_schema["properties"]) >= {"hits", "mode"}
    assert templates == {"palimpsest://summaries/{summary_id}", "palimpsest://threads/{thread_id}/dag"}


async def test_append_grep_and_stats(server: FastMCP, backend: str) -> None:
    messages = [
        turn(0, "How do I rotate the signing key?"),
        turn(1, "Run rotate-keys with the zebra flag, then restart the gateway."),
        {"role": "tool", "content": "rotated 3 keys", "message_id": "m2", "tool_call_id": "call-1"},
    ]
    async with client(server) as session:
        first = await call(session, "append_messages", thread_id="t-1", messages=messages, project="api")
        again = await call(session, "append_messages", thread_id="t-1", messages=messages)
        words = await call(session, "grep_memories", query="zebra", mode="text")
        pattern = await call(session, "grep_memories", query=r"rotate-\w+ with", mode="regex")
        stats = await call(session, "memory_stats")
    assert first["partition"] == "claude"
    assert (first["appended"], first["duplicates"], first["uncompacted"]) == (3, 0, 3)
    assert len(set(first["message_ids"])) == 3
    assert (again["appended"], again["duplicates"], again["message_ids"]) == (0, 3, first["message_ids"])
    [hit] = words["hits"]
    assert hit["id"] == first["message_ids"][1]
    assert (hit["source_id"], hit["kind"], hit["role"]) == ("m1", "message", "assistant")
    assert (hit["thread_id"], hit["partition"], hit["covered_by"]) == ("t-1", "claude", [])
    [regex_hit] = pattern["hits"]
    assert regex_hit["id"] == first["message_ids"][1] and regex_hit["source_id"] == "m1"
    assert "rotate-keys with" in regex_hit["snippet"]
    assert (stats["store"], stats["threads"], stats["messages"], stats["partition"]) == (backend, 1, 3, "claude")


async def test_compact_then_describe_expand_and_dag(server: FastMCP) -> None:
    messages = [turn(i) for i in range(12)]
    messages[0]["content"] = "The staging password policy lives in ops/vault.hcl, said the first message. " * 3
    async with client(server) as session:
        appended = await call(session, "append_messages", thread_id="t-c", messages=messages)
        compacted = await call(session, "compact_thread", thread_id="t-c")
        again = await call(session, "compact_thread", thread_id="t-c")
        dag = await call(session, "get_summary_dag", thread_id="t-c")
        hits = (await call(session, "grep_memories", query="vault.hcl", kinds=["message"], mode="text"))["hits"]
        [hit] = hits
        lowest = hit["covered_by"][0]
        by_regex = await call(
            session, "grep_memories", query=r"staging password policy lives in ops/\w+\.hcl", mode="regex"
        )
        summary_hits = (await call(session, "grep_memories", query="vault.hcl", kinds=["summary"], mode="text"))["hits"]
        described = await call(session, "describe_summary", summary_id=lowest)
        top = hit["covered_by"][-1]
        expanded: list[dict[str, Any]] = []
        cursor = None
        while True:
            page = await call(session, "expand_summary", summary_id=top, limit=3, cursor=cursor)
            expanded.extend(page["items"])
            cursor = page["next_cursor"]
            if cursor is None:
                break
        children = await call(session, "expand_summary", summary_id=top, depth=1)
        summary_doc = json.loads((await session.read_resource(f"palimpsest://summaries/{lowest}"))[0].text)
        dag_doc = json.loads((await session.read_resource("palimpsest://threads/t-c/dag"))[0].text)
    assert compacted["status"] == "compacted" and compacted["summaries_created"] >= 1
    assert len(compacted["summary_ids"]) == compacted["summaries_created"]
    assert again["status"] == "nothing_to_do"
    assert {node["id"] for node in dag["nodes"]} == set(compacted["summary_ids"])
    frontier = dag["frontier"]
    assert frontier[0]["first_seq"] == 0 and frontier[-1]["last_seq"] == 11
    assert all(b["first_seq"] == a["last_seq"] + 1 for a, b in zip(frontier, frontier[1:], strict=False))
    assert hit["id"] == appended["message_ids"][0] and hit["source_id"] == "m0"
    assert (described["id"], described["level"], described["first_seq"]) == (lowest, 1, 0)
    [regex_hit] = [h for h in by_regex["hits"] if h["kind"] == "message"]
    assert (regex_hit["source_id"], regex_hit["covered_by"]) == ("m0", hit["covered_by"])
    assert "ops/vault.hcl" in regex_hit["snippet"]
    [summary_hit] = [h for h in summary_hits if h["id"] == lowest]
    assert summary_hit["level"] == 1 and summary_hit["covered_by"] == hit["covered_by"][1:]
    assert described["message_count"] == described["last_seq"] + 1 == len(described["child_ids"])
    assert described["preview"] and described["tokens"] < described["source_tokens"]
    assert described["parent_id"] == (hit["covered_by"][1] if len(hit["covered_by"]) > 1 else None)
    assert [item["content"] for item in expanded] == [m["content"] for m in messages[: len(expanded)]]
    assert [item["source_id"] for item in expanded] == [m["message_id"] for m in messages[: len(expanded)]]
    assert children["total"] == len(children["items"]) >= 1
    assert summary_doc["id"] == lowest and summary_doc["text"].startswith(described["preview"].rstrip("…"))
    assert dag_doc["thread_id"] == "t-c" and len(dag_doc["nodes"]) == len(dag["nodes"])


async def _counts(session: Client) -> tuple[int, int, dict[str, int]]:
    stats = await call(session, "memory_stats")
    return stats["threads"], stats["messages"], stats["summaries_by_level"]


BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    (
        "append_messages",
        {"thread_id": "t-b", "messages": [turn(50), {"role": "user", "content": "x" * (MAX_MESSAGE_BYTES + 1)}]},
        "over the limit",
    ),
    (
        "append_messages",
        {"thread_id": "t-b", "messages": [turn(51), {"role": "user", "content": "bad \ud800 half"}]},
        "not valid UTF-8",
    ),
    ("append_messages", {"thread_id": "t-b", "messages": [{**turn(52), "created_at": "next tuesday"}]}, "datetime"),
    ("append_messages", {"thread_id": "t-b", "messages": [{"role": "robot", "content": "beep"}]}, "role"),
    ("append_messages", {"thread_id": "t-b", "messages": []}, "at least 1 item"),
    (
        "append_messages",
        {"thread_id": "t-b", "messages": [{"role": "user", "content": "."}] * (MAX_BATCH + 1)},
        "at most",
    ),
    ("append_messages", {"thread_id": "", "messages": [turn(53)]}, "at least 1 character"),
    (
        "append_messages",
        {"thread_id": "t-b", "messages": [turn(54)], "partition": "   "},
        "partition must not be empty",
    ),
    ("describe_summary", {"summary_id": "sum_doesnotexist"}, "unknown summary id 'sum_doesnotexist'"),
    ("expand_summary", {"summary_id": "sum_doesnotexist"}, "unknown summary id"),
    ("get_summary_dag", {"thread_id": "no-such-thread"}, "unknown thread id 'no-such-thread'"),
    ("compact_thread", {"thread_id": "no-such-thread"}, "unknown thread id"),
    ("grep_memories", {"query": "token", "thread_id": "no-such-thread"}, "unknown thread id"),
    ("grep_memories", {"query": "(unclosed", "mode": "regex"}, "invalid regex"),
    ("grep_memories", {"query": "(a|aa)+$", "mode": "regex"}, "regex took too long"),
    ("grep_memories", {"query": "token", "mode": "fuzzy"}, "'semantic' or 'hybrid'"),
    ("grep_memories", {"query": "token", "limit": 0}, "greater than or equal to 1"),
    ("grep_memories", {"query": "token", "limit": 10_000}, "less than or equal to 200"),
    (
        "grep_memories",
        {"query": "token", "since": "2024-06-01T00:00:00Z", "until": "2024-01-01T00:00:00Z"},
        "since must not be after until",
    ),
    ("grep_memories", {"query": "token", "since": "the dawn of time"}, "datetime"),
    ("expand_summary", {"summary_id": "sum_x", "limit": 0}, "greater than or equal to 1"),
]


async def test_bad_input_is_refused_clearly_and_changes_nothing(server: FastMCP) -> None:
    seed = [turn(i) for i in range(8)] + [turn(8, "a" * 40 + "!")]
    async with client(server) as session:
        await call(session, "append_messages", thread_id="t-b", messages=seed)
        compacted = await call(session, "compact_thread", thread_id="t-b")
        assert compacted["status"] == "compacted"
        page = await call(session, "expand_summary", summary_id=compacted["summary_ids"][0], limit=1)
        assert page["next_cursor"] is not None
        before = await _counts(session)
        bad_cursor = ("expand_summary", {"summary_id": compacted["summary_ids"][0], "cursor": "zz"}, "invalid cursor")
        calls = [*BAD_CALLS, bad_cursor]
        for tool, arguments, expected in calls:
            with pytest.raises(ToolError) as refused:
                await session.call_tool(tool, arguments)
            message = str(refused.value)
            assert expected in message, (tool, message)
            assert "Traceback" not in message and 'File "' not in message
            assert await _counts(session) == before, tool


async def test_partitions_are_isolated_unless_a_call_names_another(server: FastMCP, store_url: str) -> None:
    async with client(server, "windsurf") as windsurf:
        written = await call(windsurf, "append_messages", thread_id="t-w", messages=[turn(0, "windsurf secret plan")])
        assert written["partition"] == "windsurf"
    async with client(server, "claude-code") as claude:
        assert (await call(claude, "grep_memories", query="secret"))["hits"] == []
        assert (await call(claude, "memory_stats"))["messages"] == 0
        with pytest.raises(ToolError, match="unknown thread id 't-w'"):
            await claude.call_tool("get_summary_dag", {"thread_id": "t-w"})
        # A thread is (partition, id): claude's own "t-w" neither sees nor touches windsurf's.
        own = await call(claude, "append_messages", thread_id="t-w", messages=[turn(1)])
        assert (own["partition"], own["appended"]) == ("claude", 1)
        crossed = await call(claude, "grep_memories", query="secret", partition="windsurf")
        assert [hit["partition"] for hit in crossed["hits"]] == ["windsurf"]
        assert (await call(claude, "memory_stats", partition="windsurf"))["messages"] == 1
        assert (await call(claude, "memory_stats"))["messages"] == 1
    async with client(server, "some-new-editor") as other:
        assert (await call(other, "append_messages", thread_id="t-o", messages=[turn(0)]))["partition"] == "default"
    pinned = build_server(make_settings(store_url, partition="codex"))
    async with client(pinned, "claude-code") as session:
        assert (await call(session, "append_messages", thread_id="t-p", messages=[turn(0)]))["partition"] == "codex"


def test_unauthenticated_http_stays_on_loopback(tmp_path: Path) -> None:
    settings = make_settings(f"sqlite:///{tmp_path / 'm.db'}")
    with pytest.raises(InvalidInput, match="refusing to serve HTTP on 0.0.0.0 without authentication"):
        run_server(settings, transport="http", host="0.0.0.0", port=8765)
    with pytest.raises(InvalidInput, match="unknown transport 'carrier-pigeon'"):
        run_server(settings, transport="carrier-pigeon", host="127.0.0.1", port=8765)


# -- partitions, tokens, prefilter: pure functions ----------------------------------------


def test_client_names_map_to_partitions() -> None:
    assert partition_for_client("claude-code") == "claude"
    assert partition_for_client("Claude") == "claude"
    assert partition_for_client("windsurf") == "windsurf"
    assert partition_for_client("codex-mcp-client") == "codex"
    assert partition_for_client("antigravity") == "antigravity"
    assert partition_for_client("gemini-cli-mcp-client") == "gemini"
    assert partition_for_client("cursor") == "default"
    assert partition_for_client(None) == "default"


def test_token_partitions_are_enforced() -> None:
    windsurf = frozenset({"windsurf"})
    assert resolve_partition(None, default="claude", allowed=None) == "claude"
    assert resolve_partition("codex", default="claude", allowed=None) == "codex"
    assert resolve_partition(None, default="default", allowed=windsurf) == "windsurf"
    assert resolve_partition("windsurf", default="default", allowed=windsurf) == "windsurf"
    with pytest.raises(PartitionDenied, match="may not touch partition 'claude'"):
        resolve_partition("claude", default="windsurf", allowed=windsurf)
    with pytest.raises(PartitionDenied, match="name a partition"):
        resolve_partition(None, default="default", allowed=frozenset({"claude", "codex"}))


async def test_tokens_files_in_json_and_toml(tmp_path: Path) -> None:
    as_json = tmp_path / "tokens.json"
    as_json.write_text(json.dumps({"tok-a": ["claude"], "tok-b": ["windsurf", "codex"]}))
    as_toml = tmp_path / "tokens.toml"
    as_toml.write_text('"tok-a" = ["claude"]\n"tok-b" = ["windsurf", "codex"]\n')
    expected = {"tok-a": frozenset({"claude"}), "tok-b": frozenset({"windsurf", "codex"})}
    assert load_token_grants(as_json) == expected == load_token_grants(as_toml)
    verifier = PartitionTokenVerifier(expected)
    token = await verifier.verify_token("tok-b")
    assert token is not None and token.claims["partitions"] == ["codex", "windsurf"]
    assert await verifier.verify_token("tok-c") is None
    malformed = [("bad.json", "{not json"), ("empty.toml", ""), ("shape.json", '{"tok": []}'), ("list.json", '["tok"]')]
    for name, text in malformed:
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(InvalidInput, match="tokens file"):
            load_token_grants(path)
    with pytest.raises(InvalidInput, match="cannot read tokens file"):
        load_token_grants(tmp_path / "missing.json")
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("example.com")


def test_regex_prefilter_only_takes_words_every_match_must_hold() -> None:
    assert required_word("deploy key [0-9]+") == "key"
    assert required_word(r"error\s+code\s+\d+") == "code"
    assert required_word("the quick brown fox") == "quick"
    for pattern in [
        "colou?r",
        "a|b key c",
        r"\bdeploy\b",
        "the key ?x",
        "x key* y",
        "(?i) quick brown ",
        "foo (bar baz) qux",
        "x stuff{2} y",
        r"[a ]quick brown",
    ]:
        assert required_word(pattern) is None, pattern


# -- outage -------------------------------------------------------------------------------


@pytest.fixture
async def relay() -> AsyncIterator[TcpRelay]:
    """A relay to a fresh test Neo4j (SQLite is embedded: it has no server to lose)."""
    uri = neo4j_test_uri()
    await wipe_neo4j(uri)
    host, port = uri.split("://", 1)[1].rsplit(":", 1)
    started = TcpRelay(host, int(port))
    await started.start()
    yield started
    await started.cut()


@pytest.mark.neo4j
async def test_the_server_survives_a_store_outage(relay: TcpRelay, tmp_path: Path) -> None:
    store = Neo4jStore(f"bolt://127.0.0.1:{relay.port}", Neo4jCredentials(), retry_seconds=0.5, connect_seconds=1.0)
    server = build_server(make_settings(f"bolt://127.0.0.1:{relay.port}"), store=store)
    try:
        async with client(server) as session:
            await call(session, "append_messages", thread_id="t-o", messages=[turn(0)])
            await relay.cut()
            with pytest.raises(ToolError, match="^store unavailable: "):
                await session.call_tool("append_messages", {"thread_id": "t-o", "messages": [turn(1)]})
            await relay.start()
            again = await call(session, "append_messages", thread_id="t-o", messages=[turn(1)])
            assert again["appended"] == 1 and again["uncompacted"] == 2
    finally:
        await store.close()
