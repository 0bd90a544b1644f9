"""A tool call and its result as one hit, in every grep mode, in recall and through MCP, on both stores.

The session is stored the way the Claude Code feed stores one (`server/agents/claude/transcript.py`):
a call is an assistant message ``Name {json input}`` with the call id as ``tool_call_id``
and metadata ``kind: tool_use`` and ``tool_name``; its result is a ``tool`` message with
the same ``tool_call_id``; calls of one turn come before their results.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from palimpsest.graph_schema.models import NewMessage, Role
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.embedders import SentenceTransformerEmbedder
from palimpsest.scheduler.embedding import backfill_embeddings
from palimpsest.server.feeds.ingest import ingest_files
from palimpsest.server.mcp.app import build_server
from palimpsest.server.retrieval.grep import grep_memories
from palimpsest.server.retrieval.pairs import PAIRED_SNIPPET_END, paired_snippet
from palimpsest.server.retrieval.recall import recall
from tests.support.claude_transcripts import transcript as claude_transcript
from tests.support.claude_transcripts import write_lines
from tests.support.cli import run_cli, run_json
from tests.support.semantic import MINILM_SPEC, call, mcp_client, settings_for

P = "claude"
CALL = {"kind": "tool_use", "tool_name": "Bash"}
FORMAT_CALL = (
    'Bash {"command": "mix format --check-formatted", "description": "Check formatting without changing files"}'
)
FORMAT_RESULT = (
    "** (Mix) mix format failed due to --check-formatted.\nThe following files are not formatted:\n  lib/zebra.ex"
)
SESSION: list[dict[str, Any]] = [
    {"role": "user", "content": "check the formatting before the commit", "message_id": "u0"},
    {"role": "assistant", "content": FORMAT_CALL, "message_id": "a1", "tool_call_id": "toolu_1", "metadata": CALL},
    {
        "role": "assistant",
        "content": 'Bash {"command": "git status --short"}',
        "message_id": "a2",
        "tool_call_id": "toolu_2",
        "metadata": CALL,
    },
    {"role": "tool", "content": FORMAT_RESULT, "message_id": "r1", "tool_call_id": "toolu_1"},
    {"role": "tool", "content": " M lib/zebra.ex", "message_id": "r2", "tool_call_id": "toolu_2"},
    {"role": "assistant", "content": "The zebra module needs formatting; running mix format now.", "message_id": "a3"},
    {"role": "tool", "content": "an orphan result naming zebra", "message_id": "r9", "tool_call_id": "toolu_9"},
]


async def seed(store: MemoryStore) -> dict[str, str]:
    """The session in one thread; source id -> stored id."""
    messages = [NewMessage(**message) for message in SESSION]
    appended = await store.append_messages(P, "session-1", messages)
    return dict(zip([m["message_id"] for m in SESSION], appended.message_ids, strict=True))


def by_source(hits: list[Any]) -> dict[str, Any]:
    return {hit.source_id: hit for hit in hits}


async def test_a_result_hit_brings_its_call_and_the_call_is_not_listed_again(store: MemoryStore) -> None:
    ids = await seed(store)
    found = await grep_memories(store, "check-formatted", partition=P, mode="text")
    # the call and the result both hold "--check-formatted": one hit stands for both
    [hit] = [hit for hit in found.hits if hit.source_id in ("a1", "r1")]
    other = "r1" if hit.source_id == "a1" else "a1"
    assert (hit.paired_id, hit.paired_source_id) == (ids[other], other)
    assert hit.paired_snippet is not None and (
        "lib/zebra.ex" in hit.paired_snippet or "mix format" in hit.paired_snippet
    )


async def test_each_half_finds_the_other_across_parallel_calls(store: MemoryStore) -> None:
    ids = await seed(store)
    status = by_source((await grep_memories(store, "status", partition=P, mode="text")).hits)
    assert (status["a2"].paired_id, status["a2"].paired_source_id) == (ids["r2"], "r2")
    assert status["a2"].paired_snippet == " M lib/zebra.ex"
    failed = by_source((await grep_memories(store, "following files", partition=P, mode="text")).hits)
    assert failed["r1"].paired_source_id == "a1", "the result after another call's still finds its own"
    assert "Check formatting without changing files" in (failed["r1"].paired_snippet or "")


async def test_plain_turns_and_orphan_results_stay_unpaired_and_the_limit_holds(store: MemoryStore) -> None:
    await seed(store)
    hits = by_source((await grep_memories(store, "zebra", partition=P, mode="text", limit=10)).hits)
    assert hits["a3"].paired_id is None and hits["r9"].paired_id is None
    paired = {source: hit.paired_source_id for source, hit in hits.items() if hit.paired_id is not None}
    halves = set(paired) | set(paired.values())
    assert len(halves) == 2 * len(paired), "no pair listed twice"
    assert len((await grep_memories(store, "zebra", partition=P, mode="text", limit=2)).hits) == 2


async def test_regex_mode_pairs_too(store: MemoryStore) -> None:
    ids = await seed(store)
    [hit] = (await grep_memories(store, r"not format+ed", partition=P, mode="regex")).hits
    assert (hit.source_id, hit.paired_id) == ("r1", ids["a1"])


@pytest.mark.parametrize("mode", ["semantic", "hybrid", None])
async def test_meaning_modes_pair_a_call_found_by_its_purpose(
    store: MemoryStore, minilm: SentenceTransformerEmbedder, mode: Any
) -> None:
    ids = await seed(store)
    assert await backfill_embeddings(store, minilm) == len(SESSION)
    found = await grep_memories(
        store, "which command checked the formatting", partition=P, mode=mode, embedder=minilm, limit=7
    )
    assert found.mode == (mode or "hybrid")
    sources = [hit.source_id for hit in found.hits]
    assert not ({"a1", "r1"} <= set(sources)), "the pair is one hit"
    [pair] = [hit for hit in found.hits if hit.source_id in ("a1", "r1")]
    assert {pair.source_id, pair.paired_source_id} == {"a1", "r1"}
    assert pair.paired_id in (ids["a1"], ids["r1"])


async def test_recall_returns_the_pair_as_one_message(store: MemoryStore) -> None:
    ids = await seed(store)
    result = await recall(store, "mix format failed", partition=P)
    pairs = [message for message in result.messages if message.source_id in ("a1", "r1")]
    assert len(pairs) == 1
    assert {pairs[0].source_id, pairs[0].paired_source_id} == {"a1", "r1"}
    assert pairs[0].paired_id in (ids["a1"], ids["r1"])


async def test_mcp_grep_and_recall_carry_the_other_half(
    store: MemoryStore, store_url: str, minilm: SentenceTransformerEmbedder
) -> None:
    await minilm.dimensions()
    server = build_server(settings_for(store_url, embedder=MINILM_SPEC), store=store)
    async with mcp_client(server) as session:
        appended = await call(session, "append_messages", thread_id="session-1", messages=SESSION)
        ids = dict(zip([m["message_id"] for m in SESSION], appended["message_ids"], strict=True))
        hits = (await call(session, "grep_memories", query="following files", mode="text"))["hits"]
        recalled = (await call(session, "recall", query="git status"))["messages"]
    [result_hit] = [hit for hit in hits if hit["source_id"] == "r1"]
    assert (result_hit["paired_id"], result_hit["paired_source_id"]) == (ids["a1"], "a1")
    assert result_hit["role"] == Role.tool
    [status] = [message for message in recalled if "a2" in (message["source_id"], message["paired_source_id"])]
    assert {status["source_id"], status["paired_source_id"]} == {"a2", "r2"}


def test_a_long_other_half_shows_its_head_and_tail() -> None:
    long = "head line\n" + "x" * 1000 + "\n3 failed, 12 passed"
    snippet = paired_snippet(long)
    assert snippet.startswith("head line") and snippet.endswith("3 failed, 12 passed")
    assert len(snippet) == 2 * PAIRED_SNIPPET_END + 3
    assert paired_snippet("short") == "short"


async def test_a_half_further_than_the_first_read_is_still_found(store: MemoryStore) -> None:
    far = [
        NewMessage(role=Role.assistant, content='Bash {"command": "make wombat"}', message_id="c0",
                   tool_call_id="toolu_far", metadata=CALL),
        *[NewMessage(role=Role.assistant, content=f"still waiting {n}", message_id=f"w{n}") for n in range(6)],
        NewMessage(role=Role.tool, content="wombat built", message_id="c7", tool_call_id="toolu_far"),
    ]  # fmt: skip
    ids = (await store.append_messages(P, "session-far", far)).message_ids
    [call] = (await grep_memories(store, "make", partition=P, mode="text")).hits
    assert (call.source_id, call.paired_id) == ("c0", ids[-1])
    [built] = (await grep_memories(store, "built", partition=P, mode="text")).hits
    assert (built.source_id, built.paired_id) == ("c7", ids[0])


async def test_a_claude_code_transcript_ingested_by_the_real_parser_pairs_its_calls(
    store: MemoryStore, tmp_path: Path
) -> None:
    path = write_lines(tmp_path / "session.jsonl", claude_transcript())
    await ingest_files(store, [path], partition=P, format="claude")
    [hit] = (await grep_memories(store, "pytest", partition=P, mode="text")).hits
    assert (hit.source_id, hit.paired_source_id) == ("a-2", "u-3")
    assert "1 failed" in (hit.paired_snippet or "")


def test_cli_grep_shows_the_other_half_under_the_hit(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    path = write_lines(tmp_path / "session.jsonl", claude_transcript())
    assert run_cli("ingest", path, "--store", url, "--format", "claude").exit_code == 0
    shown = run_cli("grep", "pytest", "--store", url, "--partition", P, "--mode", "text")
    assert shown.exit_code == 0, shown.output
    [hit] = run_json("grep", "pytest", "--store", url, "--partition", P, "--mode", "text")["hits"]
    assert hit["source_id"] == "a-2", "the call is the hit; only its result says 1 failed"
    words = [word for word in shown.stdout.split() if word != "│"]  # the table's cell edges left out
    assert words[words.index("with") + 1].startswith(hit["paired_id"][:20])
    assert "1 failed" in shown.stdout
