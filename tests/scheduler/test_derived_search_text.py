"""Tool messages found by what they are about in text search too, on both stores, and old stores brought up.

Calls and results are shaped as the Claude Code feed stores them (`server/agents/claude/transcript.py`:
``Name {json input}`` with metadata ``kind: tool_use`` and ``tool_name``, and a ``tool`` message
with the call's ``tool_call_id``). The old store is made by the test's own SQL or Cypher: the
column or property, the index and the trigger as they were before the derived text existed, and
vectors made from the raw content as Palimpsest made them then.
"""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
from collections.abc import Sequence
from contextlib import closing
from pathlib import Path

import pytest
from typer.testing import CliRunner

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import MAX_EMBED_CHARS, NewMessage, Role
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.config import MaintenanceSettings
from palimpsest.scheduler.embedders import SentenceTransformerEmbedder
from palimpsest.scheduler.embedding import backfill_embeddings, ensure_vectors
from palimpsest.scheduler.extractive import ExtractiveSummarizer
from palimpsest.scheduler.maintenance import Maintenance, evolution_steps
from palimpsest.scheduler.search_text import call_text, fill_search_texts, result_text
from palimpsest.server.cli.main import app

P = "claude"
FORMAT_CALL = 'Bash {"command": "mix format --check-formatted", "description": "Check formatting"}'
COMMIT_CALL = 'Bash {"command": "git commit -m \\"Add the parser\\"", "description": "Commit the parser"}'
COMMIT_RESULT = "Exit code 1\nrustfmt: src/parser.rs is not formatted\npre-commit hook rejected the change"
TEST_CALL = 'Bash {"command": "pytest -x tests", "description": "Run the whole suite"}'
TEST_RESULT = "Exit code 1\nFAILED tests/test_api.py::test_login - AssertionError\n1 failed, 41 passed in 3.2s"


def _call(content: str, call_id: str, source: str) -> NewMessage:
    return NewMessage(
        role=Role.assistant, content=content, message_id=source, tool_call_id=call_id,
        metadata={"kind": "tool_use", "tool_name": "Bash"},
    )  # fmt: skip


def _result(content: str, call_id: str, source: str) -> NewMessage:
    return NewMessage(role=Role.tool, content=content, message_id=source, tool_call_id=call_id)


SESSION = [
    NewMessage(role=Role.user, content="tidy the code and ship it", message_id="u0"),
    _call(FORMAT_CALL, "toolu_1", "a1"),
    _result("Exit code 0", "toolu_1", "r1"),
    _call(COMMIT_CALL, "toolu_2", "a2"),
    _result(COMMIT_RESULT, "toolu_2", "r2"),
    _call(TEST_CALL, "toolu_3", "a3"),
    _result(TEST_RESULT, "toolu_3", "r3"),
]


async def _session(store: MemoryStore) -> dict[str, str]:
    """The session appended; its message ids by source id."""
    ids = (await store.append_messages(P, "s1", SESSION)).message_ids
    return {message.message_id or "": node_id for message, node_id in zip(SESSION, ids, strict=True)}


async def _text_ids(store: MemoryStore, query: str) -> list[str]:
    return [hit.id for hit in await store.search_text(query, partition=P)]


async def test_text_search_finds_tool_messages_by_their_derived_words_and_shows_their_content(
    store: MemoryStore,
) -> None:
    ids = await _session(store)
    # A search never writes: before any step, a result is found by its own words only.
    assert ids["r3"] not in await _text_ids(store, "whole suite")
    assert len(await store.missing_search_texts(P)) == 6

    assert await fill_search_texts(store) == 6
    assert await store.missing_search_texts(P) == []

    hits = await store.search_text("check formatting", partition=P)
    assert ids["a1"] in [hit.id for hit in hits]
    # "commit rejected": the call's purpose says commit, the output says rejected.
    hits = await store.search_text("commit rejected", partition=P)
    assert hits[0].id == ids["r2"]
    assert "rejected" in hits[0].snippet and "Exit code 1" in hits[0].snippet, "the snippet is the content"
    # Only the derived text says "whole suite" of the result: its snippet comes from there.
    hits = {hit.id: hit for hit in await store.search_text("whole suite", partition=P)}
    assert ids["r3"] in hits
    assert "Result of: Run the whole suite" in hits[ids["r3"]].snippet
    assert "pytest" in hits[ids["a3"]].snippet, "the call's content holds the words: it shows its content"

    stored = await store.get_messages(P, "s1")
    assert [message.content for message in stored] == [message.content for message in SESSION], "content unchanged"
    assert await fill_search_texts(store) == 0, "written once"


async def test_snippets_built_later_show_the_derived_text_where_the_search_would(store: MemoryStore) -> None:
    # Hybrid search builds the kept hits' snippets after fusion (MemoryStore.text_snippets):
    # a result matched only by its derived text must show that text then too.
    await _session(store)
    await fill_search_texts(store)
    for query in ("whole suite", "commit rejected", "check formatting"):
        eager = await store.search_text(query, partition=P)
        later = await store.text_snippets(query, await store.search_text(query, partition=P, snippets=False))
        assert later == eager and eager


async def test_set_search_texts_writes_once_and_refuses_bad_input(store: MemoryStore) -> None:
    ids = await _session(store)
    assert await store.set_search_texts([(ids["a1"], "Check formatting."), ("msg_nothing_here", "x")]) == 1
    assert await store.set_search_texts([(ids["a1"], "Something else entirely.")]) == 0
    assert await _text_ids(store, "entirely") == []
    with pytest.raises(InvalidInput):
        await store.set_search_texts([(ids["r1"], "word " * MAX_EMBED_CHARS)])
    with pytest.raises(InvalidInput):
        await store.set_search_texts([(ids["r1"], "lone \ud800 surrogate")])
    assert {message.id for message in await store.missing_search_texts(P)} == {
        ids[source] for source in ("r1", "a2", "r2", "a3", "r3")
    }, "nothing written by a refused batch"
    with pytest.raises(InvalidInput):
        await store.missing_search_texts(P, 0)


async def test_embedding_writes_the_derived_text_before_the_vector(
    store: MemoryStore, minilm: SentenceTransformerEmbedder
) -> None:
    ids = await _session(store)
    assert await backfill_embeddings(store, minilm) == 7
    assert await store.missing_search_texts(P) == [], "the embedder wrote what it derived"
    assert ids["r3"] in await _text_ids(store, "whole suite")
    # A vector made after its text is never dropped: the step has nothing to do.
    assert await fill_search_texts(store) == 0
    assert await store.missing_embeddings(P, ("message",), 10) == []


OLD_SQLITE = """
DROP INDEX messages_search_text_missing;
DROP TRIGGER messages_fts_insert;
DROP TRIGGER messages_fts_search_text;
DROP TABLE messages_fts;
ALTER TABLE messages DROP COLUMN search_text;
CREATE VIRTUAL TABLE messages_fts USING fts5 (
    content, content = 'messages', content_rowid = 'pk',
    tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, content) VALUES (new.pk, new.content);
END;
INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');
"""
OLD_NEO4J = [
    "MATCH (m:Message) REMOVE m.search_text",
    "DROP INDEX memory_text",
    "CREATE FULLTEXT INDEX memory_text FOR (n:Message|Summary|Fact) ON EACH [n.content, n.text] "
    "OPTIONS {indexConfig: {`fulltext.analyzer`: 'english'}}",
    "CALL db.awaitIndexes(60)",
    "MATCH (s:PalimpsestSchema) SET s.version = 'before-derived-text'",
]


async def _make_old(backend: str, store_url: str) -> None:
    """Turn the store into one written before tool messages had a derived text (test scaffolding)."""
    if backend == "sqlite":
        with closing(sqlite3.connect(store_url.removeprefix("sqlite:///"))) as conn:
            conn.executescript(OLD_SQLITE)
        return
    import neo4j

    async with neo4j.AsyncGraphDatabase.driver(store_url, auth=None) as driver:
        for statement in OLD_NEO4J:
            await driver.execute_query(statement, database_="neo4j")


def _cosine(left: Sequence[float], right: Sequence[float]) -> float:
    dot = sum(a * b for a, b in zip(left, right, strict=True))
    return dot / (math.sqrt(sum(a * a for a in left)) * math.sqrt(sum(b * b for b in right)))


async def test_an_old_store_gets_its_derived_text_and_is_re_embedded_once(
    backend: str, store_url: str, minilm: SentenceTransformerEmbedder
) -> None:
    store = open_store(store_url, Neo4jCredentials())
    await store.initialize()
    ids = await _session(store)
    # Vectors as Palimpsest made them before: every message's raw content.
    await ensure_vectors(store, minilm)
    raw = await minilm.embed([message.content for message in SESSION])
    await store.set_embeddings(list(zip(ids.values(), raw, strict=True)), minilm.name)
    digests = [message.sha256 for message in await store.get_messages(P, "s1")]
    await store.close()
    await _make_old(backend, store_url)

    reopened = open_store(store_url, Neo4jCredentials())
    await reopened.initialize()
    try:
        assert ids["r3"] not in await _text_ids(reopened, "whole suite")
        heard: list[tuple[str, int, int]] = []
        worker = Maintenance(
            reopened, MaintenanceSettings(), ExtractiveSummarizer(), holder="alpha",
            steps=evolution_steps(reopened, minilm, facts=False, progress=lambda *report: heard.append(report)),
        )  # fmt: skip
        cycle = await worker.evolution_tick()
        assert cycle is not None and cycle.errors == []
        assert cycle.steps["search_text"] == 6
        assert cycle.steps["embeddings"] == 6, "the tool messages' raw-content vectors are made again"
        assert ("search_text", 6, 6) in heard and ("embeddings", 6, 6) in heard

        assert ids["r3"] in await _text_ids(reopened, "whole suite")
        hits = await reopened.search_text("commit rejected", partition=P)
        assert hits[0].id == ids["r2"]
        vectors = {vector.node_id: vector.vector for vector in await reopened.read_embeddings(list(ids.values()))}
        assert len(vectors) == 7, "nothing lost"
        derived = result_text(TEST_RESULT, TEST_CALL, tool_name="Bash")
        (expected,) = await minilm.embed([derived])
        assert math.isclose(_cosine(vectors[ids["r3"]], expected), 1.0, abs_tol=1e-4)
        (call,) = await minilm.embed([call_text(TEST_CALL, "Bash") or ""])
        assert math.isclose(_cosine(vectors[ids["a3"]], call), 1.0, abs_tol=1e-4)
        assert math.isclose(_cosine(vectors[ids["u0"]], raw[0]), 1.0, abs_tol=1e-4), "a user message keeps its own"
        stored = await reopened.get_messages(P, "s1")
        assert [message.sha256 for message in stored] == digests
        assert [message.content for message in stored] == [message.content for message in SESSION]

        again = await worker.evolution_tick()
        assert again is not None and again.steps["search_text"] == 0 and again.steps["embeddings"] == 0, "once"
    finally:
        await reopened.close()


def test_maintain_once_brings_an_old_sqlite_file_up(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"

    async def seed() -> dict[str, str]:
        store = open_store(url, Neo4jCredentials())
        await store.initialize()
        try:
            return await _session(store)
        finally:
            await store.close()

    async def found(query: str) -> list[str]:
        store = open_store(url, Neo4jCredentials())
        await store.initialize()
        try:
            return await _text_ids(store, query)
        finally:
            await store.close()

    ids = asyncio.run(seed())
    asyncio.run(_make_old("sqlite", url))
    assert ids["r3"] not in asyncio.run(found("whole suite"))
    runner = CliRunner()
    env = {"PALIMPSEST_STORE": url, "PALIMPSEST_PARTITION": P}
    maintained = runner.invoke(app, ["maintain", "--once", "--json"], env=env)
    assert maintained.exit_code == 0, maintained.output
    assert json.loads(maintained.stdout)["evolution"]["steps"]["search_text"] == 6
    assert ids["r3"] in asyncio.run(found("whole suite"))
    again = runner.invoke(app, ["maintain", "--once", "--json"], env=env)
    assert json.loads(again.stdout)["evolution"]["steps"]["search_text"] == 0
