"""``recall``: facts, summaries and messages about a query, ranked together, on both stores.

A small partition is seeded with two projects, a superseded fact, a summary over the
first messages and a second partition that must never leak in; then the domain function,
the MCP tool (a real in-memory ``fastmcp.Client``) and ``palimpsest recall`` are asked.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError
from typer.testing import CliRunner

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import SearchKind
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.facts import extract_facts
from palimpsest.server.cli.main import app
from palimpsest.server.mcp.app import build_server
from palimpsest.server.retrieval.grep import GrepHit
from palimpsest.server.retrieval.recall import RecallResult, recall, text_search
from palimpsest.server.settings import Settings
from tests.support.recall_seeds import COOKIES, JWT, NEXTAUTH, T0, seed, turn


def ranks(result: RecallResult) -> list[int]:
    return sorted(item.rank for group in (result.facts, result.summaries, result.messages) for item in group)


async def test_recall_ranks_facts_summaries_and_messages_together(store: MemoryStore) -> None:
    ids = await seed(store)
    result = await recall(store, "JWT authentication", partition="p")
    assert ranks(result) == list(range(1, len(ranks(result)) + 1))
    assert {fact.text for fact in result.facts} == {COOKIES, NEXTAUTH}  # the superseded JWT fact is left out
    assert min(fact.rank for fact in result.facts) == 1
    assert all(fact.valid_until is None for fact in result.facts)
    cookies = next(fact for fact in result.facts if fact.text == COOKIES)
    assert (cookies.kind, cookies.subject, cookies.project, cookies.thread_id) == ("change", "auth", "api", "t-api")
    assert cookies.source_message_ids == [ids["a2"]]

    [summary] = result.summaries
    assert (summary.id, summary.level, summary.thread_id, summary.covered_by) == (ids["summary"], 1, "t-api", [])
    messages = {message.source_id: message for message in result.messages}
    assert set(messages) >= {"a1", "a2", "w1"} and "q1" not in messages
    first = messages["a1"]
    assert (first.id, first.covered_by, first.role) == (ids["a1"], [ids["summary"]], "assistant")
    assert messages["a2"].covered_by == []
    assert all(message.thread_id in ("t-api", "t-web") for message in result.messages)
    scores = sorted(
        (item.rank, item.score) for group in (result.facts, result.summaries, result.messages) for item in group
    )
    assert [score for _, score in scores] == sorted((score for _, score in scores), reverse=True)


async def test_superseded_facts_on_request_rank_after_every_current_one(store: MemoryStore) -> None:
    await seed(store)
    result = await recall(store, "JWT bearer tokens authentication", partition="p", include_superseded=True)
    by_text = {fact.text: fact for fact in result.facts}
    assert set(by_text) == {JWT, COOKIES, NEXTAUTH}
    old = by_text[JWT]
    assert old.valid_until == T0 + timedelta(minutes=5) and old.superseded_by == by_text[COOKIES].id
    # JWT matches the query best, yet ranks after both current facts.
    assert old.rank > max(by_text[COOKIES].rank, by_text[NEXTAUTH].rank)


async def test_recall_filters_by_project_and_respects_limit(store: MemoryStore) -> None:
    ids = await seed(store)
    api = await recall(store, "JWT authentication", partition="p", project="api")
    assert {fact.text for fact in api.facts} == {COOKIES}
    assert {message.thread_id for message in api.messages} == {"t-api"}
    assert api.project == "api"
    web = await recall(store, "authentication", partition="p", project="web")
    assert [fact.text for fact in web.facts] == [NEXTAUTH]
    assert [message.id for message in web.messages] == [ids["w1"]] and web.summaries == []
    assert (await recall(store, "authentication", partition="p", project="none")).model_dump(
        include={"facts", "summaries", "messages"}
    ) == {"facts": [], "summaries": [], "messages": []}
    top = await recall(store, "JWT authentication", partition="p", limit=2)
    assert ranks(top) == [1, 2] and top.facts[0].rank == 1
    other = await recall(store, "JWT authentication", partition="q")
    assert [m.source_id for m in other.messages] == ["q1"] and [f.thread_id for f in other.facts] == ["t-q"]


async def test_recall_uses_the_search_it_is_given(store: MemoryStore) -> None:
    await seed(store)
    asked: list[SearchKind] = []
    default = text_search(store, "p")

    async def facts_only(query: str, kind: SearchKind, limit: int) -> list[GrepHit]:
        asked.append(kind)
        return await default(query, kind, limit) if kind == "fact" else []

    result = await recall(store, "JWT authentication", partition="p", search=facts_only)
    assert sorted(asked) == ["fact", "message", "summary"]
    assert (len(result.facts), result.summaries, result.messages) == (2, [], [])


async def test_recall_refuses_bad_arguments(store: MemoryStore) -> None:
    for query, limit in (("   ", 10), ("x" * 2001, 10), ("auth", 0), ("auth", 101)):
        with pytest.raises(InvalidInput):
            await recall(store, query, partition="p", limit=limit)
    assert (await recall(store, "?!", partition="p")).facts == []


async def test_recall_tool_through_mcp(store_url: str) -> None:
    server = build_server(Settings(store=store_url, partition=None, scheduler=False, tokens_file=None))
    messages = [
        {"role": "user", "content": "Which token format do we sign for the API?", "message_id": "u0"},
        {"role": "assistant", "content": JWT, "message_id": "a1"},
        {"role": "assistant", "content": COOKIES, "message_id": "a2"},
    ]
    info = mcp_types.Implementation(name="windsurf", version="1.0")
    async with Client(server, client_info=info) as session:
        await session.call_tool("append_messages", {"thread_id": "t1", "messages": messages, "project": "api"})
        await session.call_tool("kg", {"action": "on", "thread_id": "t1"})
        found = (await session.call_tool("recall", {"query": "JWT", "limit": 5})).structured_content
        tools = {tool.name: tool for tool in await session.list_tools()}
        with pytest.raises(ToolError, match="invalid arguments: limit"):
            await session.call_tool("recall", {"query": "JWT", "limit": 500})
        with pytest.raises(ToolError, match="query must not be empty"):
            await session.call_tool("recall", {"query": "   "})
    assert found is not None and found["partition"] == "windsurf"
    assert [fact["text"] for fact in found["facts"]] == [COOKIES]
    assert found["facts"][0]["rank"] == 1
    assert {(m["source_id"], m["role"]) for m in found["messages"]} == {("a1", "assistant"), ("a2", "assistant")}
    schema = tools["recall"]
    limit = schema.input_schema["properties"]["limit"]
    assert (limit["minimum"], limit["maximum"], limit["default"]) == (1, 100, 10)
    assert {"query", "project", "limit", "partition"} <= set(schema.input_schema["properties"])
    assert schema.output_schema is not None
    assert {"facts", "summaries", "messages"} <= set(schema.output_schema["properties"])
    assert schema.annotations is not None and schema.annotations.read_only_hint is True


async def _seed_file(url: str) -> None:
    store = open_store(url)
    await store.initialize()
    try:
        await store.append_messages("default", "s1", [turn("a1", JWT, 1), turn("a2", COOKIES, 2)], project="api")
        await extract_facts(store, "default", "s1")
    finally:
        await store.close()


def test_recall_command_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    asyncio.run(_seed_file(url))
    env: dict[str, Any] = {"PALIMPSEST_STORE": None, "PALIMPSEST_PARTITION": None}
    runner = CliRunner()
    as_json = runner.invoke(app, ["recall", "JWT", "--store", url, "--json"], env=env)
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.stdout)
    assert [fact["text"] for fact in data["facts"]] == [COOKIES]
    everything = runner.invoke(app, ["recall", "JWT", "--include-superseded", "--store", url, "--json"], env=env)
    assert [fact["text"] for fact in json.loads(everything.stdout)["facts"]] == [COOKIES, JWT]
    table = runner.invoke(app, ["recall", "JWT", "--store", url], env=env)
    assert table.exit_code == 0, table.output
    assert "fact: change" in table.stdout and "message (assistant)" in table.stdout
    elsewhere = runner.invoke(app, ["recall", "JWT", "--project", "web", "--store", url], env=env)
    assert elsewhere.exit_code == 0 and "0 recalled for 'JWT'" in elsewhere.stdout
    bad = runner.invoke(app, ["recall", "JWT", "--limit", "0", "--store", url], env=env)
    assert bad.exit_code == 2
