"""Semantic search end to end, with the real all-MiniLM-L6-v2, on both stores.

What a user gets: a paraphrase that shares no word with the stored message is found by
meaning where text search finds nothing; the backfill embeds whatever is missing, once;
an append never waits for embedding (the server embeds in the background); and the
mode works through MCP and the CLI.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastmcp.exceptions import ToolError
from typer.testing import CliRunner

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.identity import estimate_tokens
from palimpsest.graph_schema.models import NewSummary
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.embedders import SentenceTransformerEmbedder
from palimpsest.scheduler.embedding import backfill_embeddings, embed_new
from palimpsest.server.cli.main import app
from palimpsest.server.mcp.app import build_server
from palimpsest.server.retrieval.grep import grep_memories
from tests.support.embeddings_endpoint import DIMENSIONS, EmbeddingsEndpoint, serve_embeddings
from tests.support.jsonl import line, write_jsonl
from tests.support.semantic import DISTRACTORS, MINILM_SPEC, QUERY, STORED, P, call, mcp_client, seed, settings_for
from tests.support.waiting import eventually


async def cover(store: MemoryStore, message_ids: list[str], thread_id: str = "session-1") -> str:
    """Fold messages into a level-1 summary (text about something else); its id."""
    text = "notes on frontend deploys"
    summary = await store.persist_summary(
        NewSummary(thread_id=thread_id, partition=P, level=1, text=text, tokens=estimate_tokens(text),
                   summarizer="test", child_ids=message_ids)
    )  # fmt: skip
    return summary.id


async def test_semantic_search_finds_a_paraphrase_text_search_misses(
    store: MemoryStore, minilm: SentenceTransformerEmbedder
) -> None:
    ids = await seed(store)
    summary_id = await cover(store, ids[:3])
    assert await backfill_embeddings(store, minilm) == len(ids) + 1

    text = await grep_memories(store, QUERY, partition=P, mode="text")
    assert ids[2] not in [hit.id for hit in text.hits]

    found = await grep_memories(store, QUERY, partition=P, mode="semantic", embedder=minilm, limit=3)
    top = found.hits[0]
    assert (top.id, top.source_id, top.kind, top.thread_id) == (ids[2], "m2", "message", "session-1")
    assert top.snippet == STORED
    assert top.covered_by == [summary_id]
    assert 0.3 < top.score <= 1.0
    assert [hit.score for hit in found.hits] == sorted((hit.score for hit in found.hits), reverse=True)
    assert len(found.hits) == 3

    only_summaries = await grep_memories(
        store, "frontend deployment notes", partition=P, mode="semantic", embedder=minilm, kinds=("summary",)
    )
    assert [hit.id for hit in only_summaries.hits] == [summary_id]
    assert await grep_memories(store, QUERY, partition="windsurf", mode="semantic", embedder=minilm) == type(found)(
        mode="semantic", hits=[]
    )


async def test_backfill_embeds_everything_missing_once(store: MemoryStore, minilm: SentenceTransformerEmbedder) -> None:
    ids = await seed(store)
    other = await seed(store, thread_id="session-2", partition="windsurf")
    summary_id = await cover(store, ids[:2])
    assert await embed_new(store, minilm, [ids[0], ids[0], "msg_unknown"]) == 1

    assert await backfill_embeddings(store, minilm, partition="windsurf", batch=2) == len(other)
    assert {todo.id for todo in await store.missing_embeddings(None)} == {*ids[1:], summary_id}
    assert await backfill_embeddings(store, minilm, batch=2) == len(ids)
    assert await store.missing_embeddings(None) == []
    assert await backfill_embeddings(store, minilm) == 0
    assert await embed_new(store, minilm, ids) == 0


async def test_backfill_pauses_between_batches(store: MemoryStore, minilm: SentenceTransformerEmbedder) -> None:
    await seed(store)
    pauses: list[int] = []

    async def pause() -> None:
        pauses.append(len(await store.missing_embeddings(P)))

    assert await backfill_embeddings(store, minilm, batch=2, pause=pause) == 5
    assert pauses == [3, 1, 0]


async def test_semantic_mode_without_an_embedder_says_how_to_configure_one(store: MemoryStore) -> None:
    await seed(store)
    with pytest.raises(InvalidInput, match="PALIMPSEST_EMBEDDER=none: unset it"):
        await grep_memories(store, QUERY, partition=P, mode="semantic")


# -- through MCP ------------------------------------------------------------------------


async def test_mcp_embeds_appends_and_summaries_in_the_background_and_greps_by_meaning(
    store: MemoryStore, store_url: str, minilm: SentenceTransformerEmbedder
) -> None:
    await minilm.dimensions()
    server = build_server(settings_for(store_url, embedder=MINILM_SPEC), store=store)
    contents = [*DISTRACTORS[:2], STORED, *DISTRACTORS[2:]]
    messages = [{"role": "assistant", "content": text, "message_id": f"m{i}"} for i, text in enumerate(contents)]
    async with mcp_client(server) as session:
        appended = await call(session, "append_messages", thread_id="session-1", messages=messages)
        await eventually(lambda: _all_embedded(store), 60, "the background work did not embed everything")
        hits = (await call(session, "grep_memories", query=QUERY, mode="semantic", limit=2))["hits"]
        assert hits[0]["id"] == appended["message_ids"][2]
        assert (hits[0]["source_id"], hits[0]["covered_by"]) == ("m2", [])

        compacted = await call(session, "compact_thread", thread_id="session-1", force=True)
        assert compacted["summary_ids"]
        await eventually(lambda: _all_embedded(store), 60, "the background work did not embed everything")
        hits = (await call(session, "grep_memories", query=QUERY, mode="semantic", kinds=["message"]))["hits"]
        assert hits[0]["id"] == appended["message_ids"][2]
        assert hits[0]["covered_by"][0] in compacted["summary_ids"]


async def _all_embedded(store: MemoryStore) -> bool:
    try:
        return await store.missing_embeddings(None) == []
    except InvalidInput:  # the queue has not set the vector index up yet
        return False


async def test_mcp_semantic_mode_without_an_embedder_is_a_clear_tool_error(tmp_path: Path) -> None:
    server = build_server(settings_for(f"sqlite:///{tmp_path / 'm.db'}"))
    async with mcp_client(server) as session:
        with pytest.raises(ToolError, match="PALIMPSEST_EMBEDDER"):
            await session.call_tool("grep_memories", {"query": QUERY, "mode": "semantic"})


@pytest.fixture
def gated_endpoint() -> Iterator[EmbeddingsEndpoint]:
    """A local embeddings endpoint that holds every request until the test opens its gate."""
    with serve_embeddings() as endpoint:
        endpoint.gate.clear()
        yield endpoint


async def test_append_returns_while_the_embedder_is_still_busy(
    store: MemoryStore, store_url: str, gated_endpoint: EmbeddingsEndpoint
) -> None:
    settings = settings_for(store_url, embedder="openai:nomic-embed-text", openai_base_url=gated_endpoint.base_url)
    server = build_server(settings, store=store)
    await store.ensure_vector_index(DIMENSIONS, "openai:nomic-embed-text")
    messages = [{"role": "user", "content": text, "message_id": f"m{i}"} for i, text in enumerate(DISTRACTORS)]
    async with mcp_client(server) as session:
        # The gate stays shut until after the append answers: had the append waited for
        # its embeddings, it would never answer (the deadline only guards that wait).
        appended = await asyncio.wait_for(
            call(session, "append_messages", thread_id="session-1", messages=messages), timeout=60
        )
        assert appended["appended"] == len(DISTRACTORS) and not gated_endpoint.gate.is_set()
        # The embedder has been asked but has not answered: nothing is embedded yet.
        await eventually(lambda: _asked(gated_endpoint), 10, "the embeddings endpoint was never asked")
        assert len(await store.missing_embeddings(P)) == len(DISTRACTORS)

        gated_endpoint.gate.set()
        await eventually(lambda: _all_embedded(store), 30, "the background work did not embed everything")
        hits = (await call(session, "grep_memories", query="alembic database migrations", mode="semantic"))["hits"]
        assert hits[0]["id"] == appended["message_ids"][1]


async def _asked(endpoint: EmbeddingsEndpoint) -> bool:
    return bool(endpoint.requests)


# -- through the CLI --------------------------------------------------------------------


def test_cli_ingest_embeds_and_grep_searches_by_meaning(tmp_path: Path, minilm: SentenceTransformerEmbedder) -> None:
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    records = [
        line("session-1", "assistant", text, message_id=f"m{i}") for i, text in enumerate([*DISTRACTORS, STORED])
    ]
    path = write_jsonl(tmp_path / "chat.jsonl", records)
    env = {"PALIMPSEST_STORE": url, "PALIMPSEST_PARTITION": None, "PALIMPSEST_EMBEDDER": MINILM_SPEC}
    runner = CliRunner()

    ingested = runner.invoke(app, ["ingest", str(path), "--embed"], env=env)
    assert ingested.exit_code == 0, ingested.output
    assert f"embedded 5 nodes for semantic search ({MINILM_SPEC})" in ingested.stderr

    found = runner.invoke(app, ["grep", QUERY, "--mode", "semantic", "--json", "--limit", "1"], env=env)
    assert found.exit_code == 0, found.output
    (hit,) = json.loads(found.stdout)["hits"]
    assert (hit["source_id"], hit["snippet"]) == ("m4", STORED)

    bare = runner.invoke(app, ["grep", QUERY, "--mode", "semantic"], env={**env, "PALIMPSEST_EMBEDDER": "none"})
    assert bare.exit_code == 1
    assert "PALIMPSEST_EMBEDDER" in bare.stderr
    bad = runner.invoke(app, ["grep", QUERY, "--mode", "semantic"], env={**env, "PALIMPSEST_EMBEDDER": "cohere:x"})
    assert bad.exit_code == 1
    assert "invalid embedder 'cohere:x'" in bad.stderr
