"""``assemble_context``: a thread's working context under a token budget, on both stores.

The domain function is checked against what the store holds: recent messages verbatim
and in order, the frontier summaries of a compacted thread, current facts, recall from
other threads with a query, nothing cut and nothing over budget for a sweep of budgets
(and for random threads and budgets, with hypothesis), ``pruned`` naming exactly what
was left out, and a hash that changes only when the context does. Then the MCP tool
through a real in-memory ``fastmcp.Client`` and ``palimpsest context`` through typer.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.errors import InvalidInput, NotFound
from palimpsest.graph_schema.identity import estimate_tokens
from palimpsest.graph_schema.models import Message, NewMessage, Role
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.compaction import compact_thread
from palimpsest.scheduler.config import CompactionSettings
from palimpsest.scheduler.extractive import ExtractiveSummarizer
from palimpsest.server.cli.main import app
from palimpsest.server.mcp.app import build_server
from palimpsest.server.retrieval.context import MAX_BUDGET, MIN_BUDGET, TEXT_ORDER, AssembledContext, assemble_context
from palimpsest.server.settings import Settings
from tests.support.agent_sessions import claude_code_lines, parsed_messages
from tests.support.recall_seeds import COOKIES, JWT, NEXTAUTH
from tests.support.recall_seeds import seed as seed_recall
from tests.support.stores import store_uri, wipe_neo4j
from tests.support.transcripts import transcript

PARTITION = "claude-code"
T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
#: Small numbers, so a few dozen messages compact into a DAG with escalations.
SMALL = CompactionSettings(threshold=8, keep_recent=4, escalation_fanin=2)


def turn(index: int, content: str, role: Role | None = None) -> NewMessage:
    """A message with a stable id and time, alternating user and assistant unless told."""
    chosen = role or (Role.user if index % 2 == 0 else Role.assistant)
    return NewMessage(role=chosen, content=content, message_id=f"m{index}", created_at=T0 + timedelta(seconds=index))


async def compacted_thread(store: MemoryStore, thread_id: str = "t-long", count: int = 60) -> list[Message]:
    """A realistic thread, compacted with the extractive summarizer; returns its messages."""
    await store.append_messages(PARTITION, thread_id, transcript(count))
    result = await compact_thread(store, PARTITION, thread_id, SMALL, ExtractiveSummarizer(), force=True)
    assert result.status == "compacted" and result.escalations > 0
    return await store.get_messages(PARTITION, thread_id)


def message_block(text: str, message: Message) -> int:
    """Where the message's content starts in the text; asserts it is there whole, after its heading."""
    heading = f"### {message.role.value} · {message.id} (source {message.source_id}) · seq {message.seq} · "
    start = text.index(heading)
    body = text.index("\n", start) + 1
    assert text[body : body + len(message.content) + 1] == message.content + "\n", f"{message.id} was cut"
    return start


def check_invariants(result: AssembledContext, budget: int) -> None:
    """What holds for every result: within budget, honest counts, one hash, each id shown once."""
    assert result.budget_tokens == budget
    assert result.total_tokens == estimate_tokens(result.text) <= budget
    assert result.assembled_hash == hashlib.sha256(result.text.encode("utf-8")).hexdigest()
    names = [section.name for section in result.sections]
    assert names == [name for name in TEXT_ORDER if name in names]
    assert all(section.ids and 0 < section.tokens <= result.total_tokens for section in result.sections)
    shown = [node_id for section in result.sections for node_id in section.ids]
    assert len(shown) == len(set(shown))
    left_out = {node_id for pruned in result.pruned for node_id in pruned.ids}
    assert not left_out & set(shown)
    assert all(0 < len(pruned.ids) <= pruned.count for pruned in result.pruned)
    assert (result.text == "") == (result.sections == [])


def section(result: AssembledContext, name: str) -> list[str]:
    """The ids a section shows, or [] when the result has no such section."""
    return next((found.ids for found in result.sections if found.name == name), [])


def pruned(result: AssembledContext, name: str) -> tuple[int, list[str]]:
    """How many of a section were left out, and the ids listed."""
    found = next((item for item in result.pruned if item.name == name), None)
    return (found.count, found.ids) if found else (0, [])


# -- the domain function on both stores --------------------------------------------------


async def test_recent_messages_come_verbatim_in_thread_order(store: MemoryStore) -> None:
    contents = [
        "Please fix the flaky refresh test in tests/test_refresh.py.",
        "Looking at it now.\r\nThe fixture reuses a revoked token 🙂 — [bold]not markup[/bold]",
        "  leading spaces, trailing newline\n",
    ]
    appended = await store.append_messages(PARTITION, "t1", [turn(i, text) for i, text in enumerate(contents)])
    result = await assemble_context(store, "t1", partition=PARTITION)
    check_invariants(result, 16_000)
    assert [found.name for found in result.sections] == ["recent"]
    assert section(result, "recent") == appended.message_ids
    assert result.pruned == []
    assert result.text.startswith("# Context of thread t1: 3 recent messages\n")
    messages = await store.get_messages(PARTITION, "t1")
    positions = [message_block(result.text, message) for message in messages]
    assert positions == sorted(positions)
    assert "### user · " in result.text and "### assistant · " in result.text
    assert (result.thread_id, result.partition, result.query) == ("t1", PARTITION, None)


async def test_a_compacted_thread_reads_summaries_first_then_the_fresh_tail(store: MemoryStore) -> None:
    messages = await compacted_thread(store)
    frontier = await store.frontier(PARTITION, "t-long")
    tops = [item.id for item in frontier if item.kind == "summary"]
    uncovered = [item.id for item in frontier if item.kind == "message"]
    assert len(tops) >= 2 and uncovered

    result = await assemble_context(store, "t-long", partition=PARTITION, budget_tokens=50_000)
    check_invariants(result, 50_000)
    assert [found.name for found in result.sections] == ["summaries", "recent"]
    assert section(result, "summaries") == tops  # thread order
    assert section(result, "recent") == uncovered
    assert result.pruned == []
    assert "expand_summary(id) returns the original messages" in result.text
    for summary_id in tops:
        summary = await store.get_summary(PARTITION, summary_id)
        heading = f"### {summary.id} · level {summary.level} · seq {summary.first_seq}–{summary.last_seq}"
        assert heading in result.text and summary.text in result.text
    first_recent = min(result.text.index(message_id) for message_id in uncovered)
    assert max(result.text.index(summary_id) for summary_id in tops) < first_recent
    by_id = {message.id: message for message in messages}
    for message_id in uncovered:
        message_block(result.text, by_id[message_id])
    # Messages under the summaries are represented by them, not repeated.
    covered = [message for message in messages if message.id not in uncovered]
    assert all(f"({message.source_id})" not in result.text for message in covered)


async def test_every_budget_is_respected_and_pruned_names_the_rest(store: MemoryStore) -> None:
    messages = await compacted_thread(store)
    by_id = {message.id: message for message in messages}
    frontier = await store.frontier(PARTITION, "t-long")
    tops = [item.id for item in frontier if item.kind == "summary"]
    uncovered = [item.id for item in frontier if item.kind == "message"]
    recent_counts = []
    for budget in (MIN_BUDGET, 300, 401, 555, 800, 1024, 1500, 2222, 4000, 9000):
        result = await assemble_context(store, "t-long", partition=PARTITION, budget_tokens=budget)
        check_invariants(result, budget)
        shown_recent, shown_summaries = section(result, "recent"), section(result, "summaries")
        # Every candidate is shown or counted as left out, and the recent ones form the newest tail.
        assert len(shown_recent) + pruned(result, "recent")[0] == len(uncovered)
        assert len(shown_summaries) + pruned(result, "summaries")[0] == len(tops)
        assert shown_recent == uncovered[len(uncovered) - len(shown_recent) :]
        assert pruned(result, "recent")[1] == list(reversed(uncovered[: len(uncovered) - len(shown_recent)]))
        assert set(shown_summaries) <= set(tops)
        for message_id in shown_recent:
            message_block(result.text, by_id[message_id])
        recent_counts.append(len(shown_recent))
    assert recent_counts[0] >= 1, "the newest message fits even the smallest budget"
    assert recent_counts[-1] == len(uncovered)
    # The fresh tail is served first: with a small budget summaries give way to it.
    small = await assemble_context(store, "t-long", partition=PARTITION, budget_tokens=MIN_BUDGET)
    assert pruned(small, "summaries")[0] > 0 and section(small, "recent")


async def test_a_budget_too_small_for_anything_gives_an_empty_valid_result(store: MemoryStore) -> None:
    appended = await store.append_messages(PARTITION, "t-big", [turn(0, "a very long tool output line\n" * 200)])
    result = await assemble_context(store, "t-big", partition=PARTITION, budget_tokens=MIN_BUDGET)
    check_invariants(result, MIN_BUDGET)
    assert (result.text, result.sections, result.total_tokens) == ("", [], 0)
    assert result.assembled_hash == hashlib.sha256(b"").hexdigest()
    assert [item.model_dump() for item in result.pruned] == [
        {"name": "recent", "count": 1, "ids": appended.message_ids}
    ]


async def test_a_huge_tool_output_does_not_crowd_out_the_conversation(store: MemoryStore) -> None:
    thread = [turn(i, f"Step {i}: we looked at the token refresh flow once more.") for i in range(6)]
    thread.append(NewMessage(role=Role.tool, content="x" * 40_000, message_id="dump", tool_call_id="c1"))
    thread += [turn(i, f"Step {i}: the dump shows the failing assertion in jwt.py.") for i in range(7, 10)]
    appended = await store.append_messages(PARTITION, "t-dump", thread)
    dump = appended.message_ids[6]

    result = await assemble_context(store, "t-dump", partition=PARTITION, budget_tokens=2000)
    check_invariants(result, 2000)
    assert section(result, "recent") == appended.message_ids[:6] + appended.message_ids[7:]
    assert pruned(result, "recent") == (1, [dump])
    assert "xxxx" not in result.text

    whole = await assemble_context(store, "t-dump", partition=PARTITION, budget_tokens=20_000)
    assert section(whole, "recent") == appended.message_ids and whole.pruned == []


async def test_recent_stays_one_contiguous_tail(store: MemoryStore) -> None:
    """A message that does not fit stops the walk: short older ones are not picked out past it."""
    thread = [turn(i, f"ok {i}") for i in range(10)]
    thread.append(turn(10, "A long explanation of the refresh flow. " * 45))  # ~450 tokens: under recent's share
    thread += [turn(i, f"Turn {i}: " + "the rotation test passes now. " * 20) for i in range(11, 14)]  # ~150 each
    appended = await store.append_messages(PARTITION, "t-tail", thread)

    result = await assemble_context(store, "t-tail", partition=PARTITION, budget_tokens=1000)
    check_invariants(result, 1000)
    assert section(result, "recent") == appended.message_ids[11:]
    assert pruned(result, "recent") == (11, list(reversed(appended.message_ids[:11])))


async def test_same_inputs_same_context_and_an_append_changes_the_hash(store: MemoryStore) -> None:
    await compacted_thread(store, count=40)
    first = await assemble_context(store, "t-long", partition=PARTITION, budget_tokens=3000, query="refresh token")
    again = await assemble_context(store, "t-long", partition=PARTITION, budget_tokens=3000, query="refresh token")
    assert again == first
    appended = await store.append_messages(PARTITION, "t-long", [turn(999, "Newest: the refresh fix is merged.")])
    after = await assemble_context(store, "t-long", partition=PARTITION, budget_tokens=3000, query="refresh token")
    assert after.assembled_hash != first.assembled_hash
    assert section(after, "recent")[-1] == appended.message_ids[0]
    assert after.text.rstrip().endswith("Newest: the refresh fix is merged.")


async def test_facts_of_the_thread_and_recall_from_other_threads(store: MemoryStore) -> None:
    ids = await seed_recall(store)
    [nextauth] = await store.list_facts("p", thread_id="t-web")
    current = {fact.text: fact.id for fact in await store.list_facts("p", thread_id="t-api")}
    assert COOKIES in current and JWT not in current

    plain = await assemble_context(store, "t-api", partition="p")
    check_invariants(plain, 16_000)
    assert [found.name for found in plain.sections] == ["summaries", "facts", "recent"]
    assert section(plain, "summaries") == [ids["summary"]]
    assert sorted(section(plain, "facts")) == sorted(current.values())
    assert f"- {COOKIES} (change, {current[COOKIES]})" in plain.text
    assert f"{JWT} (" not in plain.text  # superseded: stale, left out
    assert NEXTAUTH not in plain.text  # another thread's fact needs a query
    assert section(plain, "recent") == [ids["a2"], (await store.get_messages("p", "t-api"))[3].id]

    asked = await assemble_context(store, "t-api", partition="p", query="NextAuth GitHub OAuth authentication")
    check_invariants(asked, 16_000)
    assert [found.name for found in asked.sections] == ["summaries", "facts", "recall", "recent"]
    recalled = section(asked, "recall")
    assert nextauth.id in recalled and ids["w1"] in recalled
    assert f"fact {nextauth.id} ({nextauth.kind}, thread t-web): {NEXTAUTH}" in asked.text
    # What the thread's own sections show is never repeated by recall.
    assert not set(recalled) & (set(section(asked, "facts")) | {ids["summary"], ids["a2"]})
    assert "q partition" not in asked.text  # recall stays in the partition
    assert asked.query == "NextAuth GitHub OAuth authentication"
    recall_at = asked.text.index("## Recalled about the query")
    assert asked.text.index("## Facts of this thread") < recall_at < asked.text.index("## Recent messages")


async def test_unknown_threads_and_bad_arguments_are_refused(store: MemoryStore) -> None:
    await store.append_messages(PARTITION, "t1", [turn(0, "hello there, this is a thread")])
    with pytest.raises(NotFound, match="unknown thread id 'nope'"):
        await assemble_context(store, "nope", partition=PARTITION)
    with pytest.raises(NotFound):
        await assemble_context(store, "t1", partition="another-ide")  # partitions never leak
    for budget in (MIN_BUDGET - 1, 0, MAX_BUDGET + 1):
        with pytest.raises(InvalidInput, match="budget_tokens must be between"):
            await assemble_context(store, "t1", partition=PARTITION, budget_tokens=budget)
    with pytest.raises(InvalidInput, match="query must not be empty"):
        await assemble_context(store, "t1", partition=PARTITION, query="   ")
    await store.append_messages(PARTITION, "t-empty", [])
    empty = await assemble_context(store, "t-empty", partition=PARTITION, query="anything")
    assert (empty.text, empty.sections, empty.pruned, empty.total_tokens) == ("", [], [], 0)


# -- random threads and budgets ------------------------------------------------------------

EXAMPLES = {"sqlite": 30, "neo4j": 8}
CONTENT = st.one_of(
    st.text(max_size=300),
    st.integers(1_000, 30_000).map(lambda size: "tool output line\n" * (size // 17)),
)


async def play(uri: str, contents: list[str], compact: bool, budget: int, query: str | None) -> None:
    """Append, maybe compact, assemble, and check the result against the store."""
    store = open_store(uri, Neo4jCredentials())
    await store.initialize()
    thread_id = f"prop-{uuid.uuid4().hex[:12]}"
    try:
        await store.append_messages(PARTITION, thread_id, [turn(i, text) for i, text in enumerate(contents)])
        if compact:
            config = CompactionSettings(threshold=2, keep_recent=2, escalation_fanin=2)
            await compact_thread(store, PARTITION, thread_id, config, ExtractiveSummarizer(), force=True)
        result = await assemble_context(store, thread_id, partition=PARTITION, budget_tokens=budget, query=query)
        check_invariants(result, budget)
        frontier = await store.frontier(PARTITION, thread_id)
        uncovered = [item.id for item in frontier if item.kind == "message"]
        tops = [item.id for item in frontier if item.kind == "summary"]
        assert len(section(result, "recent")) + pruned(result, "recent")[0] == len(uncovered)
        assert len(section(result, "summaries")) + pruned(result, "summaries")[0] == len(tops)
        by_id = {message.id: message for message in await store.get_messages(PARTITION, thread_id)}
        positions = [message_block(result.text, by_id[message_id]) for message_id in section(result, "recent")]
        assert positions == sorted(positions)
        newest = by_id[uncovered[-1]] if uncovered else None
        if newest is not None and newest.tokens + 80 <= budget // 2:
            assert section(result, "recent")[-1] == newest.id, "the newest message must come first"
    finally:
        await store.close()


def test_random_threads_and_budgets(backend: str, tmp_path: Path) -> None:
    """Any thread, any budget: within budget, nothing cut, every candidate shown or pruned."""
    uri = "sqlite:///:memory:" if backend == "sqlite" else store_uri(backend, tmp_path)
    if backend == "neo4j":
        asyncio.run(wipe_neo4j(uri))

    @settings(
        max_examples=EXAMPLES[backend],
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        contents=st.lists(CONTENT, min_size=1, max_size=16),
        compact=st.booleans(),
        budget=st.integers(MIN_BUDGET, 8_000),
        query=st.sampled_from([None, "tool output", "refresh"]),
    )
    def scenario(contents: list[str], compact: bool, budget: int, query: str | None) -> None:
        asyncio.run(play(uri, contents, compact, budget, query))

    scenario()


# -- the MCP tool and the command line ---------------------------------------------------


# -- pruning before dropping ---------------------------------------------------------------


async def coding_session(store: MemoryStore, tmp_path: Path, thread_id: str = "t-coding", count: int = 600) -> None:
    """About ``count`` messages of a Claude Code session through the real parser, compacted with the defaults."""
    lines, _ = claude_code_lines(count // 9, seed=14, session=thread_id)
    messages = parsed_messages(lines, tmp_path / "session.jsonl", "claude")[:count]
    assert len(messages) == count
    for offset in range(0, count, 200):
        await store.append_messages(PARTITION, thread_id, messages[offset : offset + 200])
    result = await compact_thread(store, PARTITION, thread_id, CompactionSettings(), ExtractiveSummarizer())
    assert result.status == "compacted" and result.escalations > 0


def accounted(result: AssembledContext, frontier_ids: list[str]) -> None:
    """Every frontier item is shown or named in ``pruned`` by id."""
    shown = {node_id for found in result.sections for node_id in found.ids}
    named = {node_id for found in result.pruned if found.name in ("recent", "summaries") for node_id in found.ids}
    assert set(frontier_ids) <= shown | named
    assert all(found.count == len(found.ids) for found in result.pruned if found.name in ("recent", "summaries"))


async def test_a_long_session_keeps_its_start_within_a_small_budget(store: MemoryStore, tmp_path: Path) -> None:
    await coding_session(store, tmp_path)
    frontier = await store.frontier(PARTITION, "t-coding")
    first_seq, last_seq = min(item.first_seq for item in frontier), max(item.last_seq for item in frontier)
    result = await assemble_context(store, "t-coding", partition=PARTITION, budget_tokens=2500)
    check_invariants(result, 2500)
    summaries = [await store.get_summary(PARTITION, summary_id) for summary_id in section(result, "summaries")]
    assert summaries and summaries[0].first_seq == first_seq, "the start of the session is summarized"
    assert (result.first_seq, result.last_seq) == (first_seq, last_seq)
    assert section(result, "recent")[-1] == frontier[-1].id
    for summary in summaries:
        assert '{"' not in summary.text and "TODO: Add description" not in summary.text
        assert "## Objective" in summary.text
    accounted(result, [item.id for item in frontier])
    for budget in (2000, 3000, 6000, 12_000):
        wider = await assemble_context(store, "t-coding", partition=PARTITION, budget_tokens=budget)
        check_invariants(wider, budget)
        assert (wider.first_seq, wider.last_seq) == (first_seq, last_seq)
        accounted(wider, [item.id for item in frontier])


async def test_old_tool_outputs_shrink_to_a_line_before_anything_is_dropped(store: MemoryStore) -> None:
    thread = [turn(0, "Please find why the refresh test fails.", Role.user)]
    for index in range(1, 25, 2):
        thread.append(
            NewMessage(
                role=Role.assistant,
                content='Bash {"command": "pytest -q"}',
                message_id=f"m{index}",
                tool_call_id=f"c{index}",
                metadata={"kind": "tool_use", "tool_name": "Bash"},
            )
        )
        output = f"FAILED tests/test_refresh.py::test_{index} - AssertionError\n" + "trace line\n" * 80
        thread.append(NewMessage(role=Role.tool, content=output, message_id=f"m{index + 1}", tool_call_id=f"c{index}"))
    appended = await store.append_messages(PARTITION, "t-tools", thread)
    ids = appended.message_ids

    whole = await assemble_context(store, "t-tools", partition=PARTITION, budget_tokens=50_000)
    assert whole.shortened == [] and whole.pruned == []
    result = await assemble_context(store, "t-tools", partition=PARTITION, budget_tokens=2000)
    check_invariants(result, 2000)
    assert section(result, "recent") == ids and result.pruned == []  # nothing dropped: shortened instead
    assert result.shortened and set(result.shortened) <= set(ids[: len(ids) - 6])
    messages = {message.id: message for message in await store.get_messages(PARTITION, "t-tools")}
    for message_id in ids[len(ids) - 6 :]:
        message_block(result.text, messages[message_id])  # the newest stay whole
    first_output = result.shortened[1]
    assert f'expand_summary("{first_output}") returns the whole message' in result.text
    assert messages[first_output].content.splitlines()[0] in result.text
    assert (result.first_seq, result.last_seq) == (0, len(ids) - 1)


def conversation() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "Why does the refresh endpoint return 401?", "message_id": "u0"},
        {"role": "assistant", "content": "The clock skew check uses naive datetimes.", "message_id": "a1"},
        {"role": "tool", "content": "1 failed, 41 passed", "message_id": "r2", "tool_call_id": "c1"},
    ]


async def test_assemble_context_through_mcp(store_url: str) -> None:
    server = build_server(Settings(store=store_url, partition=None, scheduler=False, tokens_file=None))
    info = mcp_types.Implementation(name="windsurf", version="1.0")
    async with Client(server, client_info=info) as session:
        appended = await session.call_tool("append_messages", {"thread_id": "t1", "messages": conversation()})
        result = await session.call_tool("assemble_context", {"thread_id": "t1", "budget_tokens": 1000})
        tools = {tool.name: tool for tool in await session.list_tools()}
        whole = await session.call_tool("expand_summary", {"summary_id": appended.structured_content["message_ids"][2]})
        with pytest.raises(ToolError, match="unknown thread id 'nope'"):
            await session.call_tool("assemble_context", {"thread_id": "nope"})
        with pytest.raises(ToolError, match="invalid arguments: budget_tokens"):
            await session.call_tool("assemble_context", {"thread_id": "t1", "budget_tokens": 10})
        with pytest.raises(ToolError, match="query must not be empty"):
            await session.call_tool("assemble_context", {"thread_id": "t1", "query": "  "})
    data = result.structured_content
    assert data is not None and appended.structured_content is not None
    assert (data["thread_id"], data["partition"], data["budget_tokens"]) == ("t1", "windsurf", 1000)
    assert data["sections"] == [
        {"name": "recent", "tokens": data["sections"][0]["tokens"], "ids": appended.structured_content["message_ids"]}
    ]
    assert "The clock skew check uses naive datetimes." in data["text"]
    assert data["total_tokens"] == estimate_tokens(data["text"]) <= 1000
    assert data["assembled_hash"] == hashlib.sha256(data["text"].encode()).hexdigest()
    assert data["pruned"] == [] and data["shortened"] == []
    assert (data["first_seq"], data["last_seq"]) == (0, 2)
    assert whole.structured_content is not None
    assert [item["content"] for item in whole.structured_content["items"]] == ["1 failed, 41 passed"]
    tool = tools["assemble_context"]
    budget = tool.input_schema["properties"]["budget_tokens"]
    assert (budget["minimum"], budget["maximum"], budget["default"]) == (MIN_BUDGET, MAX_BUDGET, 16_000)
    assert {"thread_id", "budget_tokens", "query", "partition"} <= set(tool.input_schema["properties"])
    assert tool.output_schema is not None
    assert {"text", "sections", "total_tokens", "budget_tokens", "assembled_hash", "pruned"} <= set(
        tool.output_schema["properties"]
    )
    assert tool.annotations is not None and tool.annotations.read_only_hint is True


async def _seed_file(url: str) -> list[str]:
    store = open_store(url)
    await store.initialize()
    try:
        messages = [NewMessage(**item) for item in conversation()]
        return (await store.append_messages("default", "s1", messages)).message_ids
    finally:
        await store.close()


def test_context_command_line(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    ids = asyncio.run(_seed_file(url))
    env: dict[str, Any] = {"PALIMPSEST_STORE": None, "PALIMPSEST_PARTITION": None}
    runner = CliRunner()

    as_json = runner.invoke(app, ["context", "s1", "--budget", "2000", "--store", url, "--json"], env=env)
    assert as_json.exit_code == 0, as_json.output
    data = json.loads(as_json.stdout)
    assert data["budget_tokens"] == 2000 and data["sections"][0]["ids"] == ids
    assert data["total_tokens"] == estimate_tokens(data["text"])

    human = runner.invoke(app, ["context", "s1", "--budget", "2000", "--store", url], env=env)
    assert human.exit_code == 0, human.output
    assert "context of s1" in human.stdout and "recent" in human.stdout
    assert f"{data['total_tokens']} / 2000" in human.stdout
    assert human.stdout.endswith(data["text"])  # the table, then the text exactly as an agent gets it
    asked = runner.invoke(app, ["context", "s1", "--query", "refresh", "--store", url, "--json"], env=env)
    assert asked.exit_code == 0, asked.output
    assert json.loads(asked.stdout)["query"] == "refresh"

    whole = runner.invoke(app, ["expand", ids[2], "--store", url, "--json"], env=env)
    assert whole.exit_code == 0, whole.output
    assert [item["content"] for item in json.loads(whole.stdout)["items"]] == ["1 failed, 41 passed"]

    unknown = runner.invoke(app, ["context", "nope", "--store", url], env=env)
    assert unknown.exit_code == 1
    assert unknown.stderr.strip() == "error: unknown thread id 'nope'"
    too_small = runner.invoke(app, ["context", "s1", "--budget", "10", "--store", url], env=env)
    assert too_small.exit_code == 2
