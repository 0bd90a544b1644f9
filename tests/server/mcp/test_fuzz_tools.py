"""Every MCP tool fuzzed with hostile arguments through a real in-memory fastmcp client, on both stores.

Why: the README promises that a failing tool returns one clear sentence and writes
nothing. Hand-written cases cover the inputs someone thought of; hypothesis
(tests/support/fuzz_strategies.py) draws injections, query syntax, control characters, sizes
past each limit, huge numbers, deep nesting, other partitions' ids and unknown ids for
every argument of every tool. Each call must end one of two ways:

- refused: a ``ToolError`` of one line that is neither the masked "Error calling tool"
  nor "internal error", and the store's counts and every thread's digest are unchanged;
- answered: an answer that is right (see ``check_answer``: nothing of another partition
  in it, appended messages stored as sent, bounds kept), and read-only tools changed
  nothing.

The store is seeded with a compacted thread in the server's partition (``alpha``) and
one in another (``beta``), so ids of both are in play. Hypothesis runs in a worker
thread and hands each call to the event loop that owns the client, so one server and one
client serve every example.

Budget: ``PALIMPSEST_FUZZ_EXAMPLES`` examples per tool and store (default 20, about a
minute a store in `make test` on a busy 2-core machine); raise it by hand for a longer run, e.g.
``PALIMPSEST_FUZZ_EXAMPLES=2000``. What the strategies leave out on purpose is in
`fuzz_strategies.HARNESS_LIMITS`.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import mcp_types
import pytest
from fastmcp import Client
from fastmcp.exceptions import ToolError
from hypothesis import HealthCheck, given, settings

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.doctor import check_store
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.mcp.app import build_server
from palimpsest.server.settings import Settings
from tests.support.fuzz_strategies import Known, tool_arguments

T = TypeVar("T")

EXAMPLES = int(os.environ.get("PALIMPSEST_FUZZ_EXAMPLES", "20"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
OWN, FOREIGN = "alpha", "beta"
TOOLS = [
    "append_messages",
    "grep_memories",
    "describe_summary",
    "expand_summary",
    "get_summary_dag",
    "compact_thread",
    "memory_stats",
    "recall",
    "kg",
    "assemble_context",
]
#: Tools that may change the store when they answer.
WRITERS = {"append_messages", "compact_thread", "kg"}
#: What a client sees when the server masks an unexpected exception, and what
#: ``domain_errors`` says for a failure of Palimpsest's own query: both are defects.
MASKED = ("Error calling tool", "internal error")


async def fingerprint(store: MemoryStore) -> dict[str, Any]:
    """Counts and every thread's content digest, across every partition."""
    stats = await store.stats(None)
    threads: dict[tuple[str, str], str] = {}
    owners: dict[str, str] = {}
    for thread in await store.list_threads(None, limit=100_000):
        snapshot = await store.snapshot(thread.partition, thread.id)
        digest = hashlib.sha256()
        for message in sorted(snapshot.messages, key=lambda m: m.seq):
            digest.update(f"{message.id}:{message.seq}:{message.sha256}\n".encode())
            owners[message.id] = thread.partition
        for summary in sorted(snapshot.summaries, key=lambda s: s.id):
            digest.update(f"{summary.id}:{summary.digest}\n".encode())
            owners[summary.id] = thread.partition
        threads[(thread.partition, thread.id)] = digest.hexdigest()
    return {"stats": stats.model_dump(), "threads": threads, "owners": owners}


def strings_in(value: Any) -> set[str]:
    """Every string anywhere in a JSON value."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(strings_in(item) for item in value.values()), set(value))
    if isinstance(value, list):
        return set().union(*(strings_in(item) for item in value)) if value else set()
    return set()


class Harness:
    """One server and client over one store, driven from hypothesis's thread through the loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, session: Client, store: MemoryStore, known: Known) -> None:
        self.loop = loop
        self.session = session
        self.store = store
        self.known = known
        self.calls: dict[str, int] = {"refused": 0, "answered": 0}

    def wait(self, work: Callable[[], Awaitable[T]]) -> T:
        return asyncio.run_coroutine_threadsafe(_call(work), self.loop).result(timeout=300)

    def check_call(self, tool: str, arguments: dict[str, Any]) -> None:
        before = self.wait(lambda: fingerprint(self.store))
        try:
            result = self.wait(lambda: self.session.call_tool(tool, arguments))
        except ToolError as exc:
            self.calls["refused"] += 1
            message = str(exc)
            assert message and "\n" not in message, f"{tool}: not one line: {message!r}"
            assert not message.startswith(MASKED), f"{tool}{arguments!r:.300}: {message}"
            after = self.wait(lambda: fingerprint(self.store))
            assert after == before, f"{tool} refused ({message}) but changed the store"
            return
        self.calls["answered"] += 1
        answer = result.structured_content
        assert answer is not None, tool
        after = self.wait(lambda: fingerprint(self.store))
        if tool not in WRITERS:
            assert after == before, f"read-only {tool} changed the store"
        self.check_answer(tool, arguments, answer, after)

    def check_answer(self, tool: str, arguments: dict[str, Any], answer: dict[str, Any], after: dict[str, Any]) -> None:
        """What makes an answer right, beyond its schema (which fastmcp's client checks)."""
        partition = arguments.get("partition") or OWN
        if "partition" in answer:
            assert answer["partition"] == partition, f"{tool} answered for {answer['partition']!r}"
        echoed = strings_in(arguments)
        leaked = {s for s in strings_in(answer) - echoed if after["owners"].get(s, partition) != partition}
        assert not leaked, f"{tool} in {partition!r} returned ids of another partition: {sorted(leaked)[:3]}"
        if tool == "append_messages":
            messages = arguments["messages"]
            assert answer["appended"] + answer["duplicates"] == len(messages)
            assert len(answer["message_ids"]) == len(messages)
            for sent, stored_id in zip(messages, answer["message_ids"], strict=True):
                stored = self.wait(lambda stored_id=stored_id: self.store.get_message(partition, stored_id))
                assert stored.thread_id == arguments["thread_id"], "an append was filed under another thread"
                if sent.get("message_id") is not None:
                    assert stored.source_id == sent["message_id"]
                else:
                    assert stored.content == sent["content"] and stored.role.value == sent["role"]
        elif tool == "grep_memories":
            # The tool takes a limit as JSON gives it, "12" or 12.0 too (pydantic's lax mode): compare the number.
            assert len(answer["hits"]) <= int(float(arguments.get("limit", 20)))
            for hit in answer["hits"]:
                if arguments.get("thread_id") is not None:
                    assert hit["thread_id"] == arguments["thread_id"]
                if arguments.get("kinds"):
                    assert hit["kind"] in arguments["kinds"]
        elif tool == "expand_summary":
            assert len(answer["items"]) <= int(float(arguments.get("limit", 200)))
        elif tool == "assemble_context":
            assert answer["total_tokens"] <= answer["budget_tokens"]
        if tool in ("compact_thread", "kg"):
            breaches = self.wait(lambda: check_store(self.store))
            assert not breaches, f"{tool} broke an invariant: {breaches[0].message}"


async def _call(work: Callable[[], Awaitable[T]]) -> T:
    return await work()


def turn(i: int, thread: str) -> dict[str, Any]:
    return {
        "role": "user" if i % 2 == 0 else "assistant",
        "content": f"{thread} step {i}: we reworked the token refresh flow in auth/service.py and ran the suite. " * 3,
        "message_id": f"{thread}-m{i}",
        "created_at": f"2024-05-01T10:00:{i:02d}Z",
    }


async def seed(session: Client, store: MemoryStore) -> Known:
    """A compacted thread in each of two partitions; their ids are what the fuzzing aims at."""
    ids: dict[str, tuple[list[str], list[str]]] = {}
    for partition, thread in ((OWN, "t-a"), (FOREIGN, "t-b")):
        appended = await session.call_tool(
            "append_messages",
            {"thread_id": thread, "messages": [turn(i, thread) for i in range(12)], "partition": partition},
        )
        await session.call_tool("compact_thread", {"thread_id": thread, "force": True, "partition": partition})
        dag = await store.summary_dag(partition, thread)
        assert dag.nodes, "seeding compacted nothing"
        assert appended.structured_content is not None
        ids[partition] = ([node.id for node in dag.nodes], appended.structured_content["message_ids"])
    return Known(
        own_threads=["t-a"],
        own_summaries=ids[OWN][0],
        own_messages=["t-a-m0", "t-a-m11", *ids[OWN][1][:2]],
        foreign_threads=["t-b"],
        foreign_summaries=ids[FOREIGN][0],
        foreign_messages=ids[FOREIGN][1][:2],
        foreign_partition=FOREIGN,
        own_partition=OWN,
    )


@pytest.mark.parametrize("tool", TOOLS)
async def test_hostile_arguments_get_a_clear_error_or_a_right_answer(store_url: str, tool: str, tmp_path: Path) -> None:
    settings_ = Settings(
        store=store_url,
        partition=OWN,
        compaction_threshold=4,
        keep_recent=2,
        escalation_fanin=2,
        summary_model=None,
        tokens_file=None,
        scheduler=False,
    )
    store = open_store(store_url, Neo4jCredentials())
    await store.initialize()
    server = build_server(settings_, store=store)
    try:
        async with Client(server, client_info=mcp_types.Implementation(name="fuzzer", version="1")) as session:
            known = await seed(session, store)
            harness = Harness(asyncio.get_running_loop(), session, store, known)

            @FUZZ
            @given(arguments=tool_arguments(tool, known))
            def fuzz(arguments: dict[str, Any]) -> None:
                harness.check_call(tool, arguments)

            await asyncio.to_thread(fuzz)
            assert not await check_store(store)
    finally:
        await store.close()
    # The strategies must reach past the schema, or the fuzzing tests nothing.
    assert harness.calls["refused"] > 0, harness.calls


def test_every_tool_is_fuzzed() -> None:
    """A new tool without a strategy fails here rather than going unfuzzed."""
    server = build_server(Settings(store="sqlite:///:memory:", scheduler=False, summary_model=None, tokens_file=None))
    names = {tool.name for tool in asyncio.run(server.list_tools())}
    assert names == set(TOOLS)
    for name in names:
        tool_arguments(name, Known(["t"], ["s"], ["m"], ["t2"], ["s2"], ["m2"], FOREIGN, OWN))
