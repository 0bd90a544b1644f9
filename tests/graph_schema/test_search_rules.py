"""The text-search rules both stores keep, stated once and asserted on each.

The rules (docs/architecture.md, "Search rules both stores keep"):

1. Words are what ``identity.words`` splits out; matching ignores case.
2. Query-language syntax is plain words, never an error (``test_store_contract``).
3. ``kinds`` names node kinds from message, summary and fact; any other kind is
   ``InvalidInput``, on every search, before anything is read.
4. A query without words returns no hits.
5. Hits respect partition, thread, kind and time filters (``test_store_contract``).
6. A word matches its other English forms ("researched" finds "researching"): both
   stores stem (FTS5 ``porter``, Lucene's English analyzer), and a store made before
   is re-indexed when opened.

And where the stores meet their own limits: a statement of Palimpsest's own that the
database refuses is an ``InternalError`` (logged with its detail), never the caller's
``InvalidInput``.
"""

from __future__ import annotations

import logging
import sqlite3
from contextlib import closing

import pytest

from palimpsest.graph_schema import identity
from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.errors import InternalError, InvalidInput
from palimpsest.graph_schema.models import NewMessage
from palimpsest.graph_schema.store import MemoryStore

P = "ide-a"


async def fill(store: MemoryStore) -> list[str]:
    result = await store.append_messages(
        P,
        "t",
        [
            NewMessage(role="user", content="The Refresh-Token rotates hourly", message_id="a"),
            NewMessage(role="assistant", content="nothing to see here", message_id="b"),
        ],
    )
    return result.message_ids


def test_the_one_tokenizer_splits_on_everything_but_letters_digits_and_underscore() -> None:
    assert identity.words("Refresh-Token, rotate_keys() x2 é!") == ["Refresh", "Token", "rotate_keys", "x2", "é"]
    assert identity.words(" *:()[] ") == []


async def test_matching_ignores_case_and_splits_words_the_same_way(store: MemoryStore) -> None:
    first, _ = await fill(store)
    for query in ("refresh", "TOKEN", "token ROTATES", "refresh-token"):
        hits = await store.search_text(query, partition=P)
        assert [hit.id for hit in hits] == [first], query


@pytest.mark.parametrize("kinds", [["memo"], ["message", "thread"], ["MESSAGE"]])
async def test_unknown_kinds_are_refused_on_every_search(store: MemoryStore, kinds: list[str]) -> None:
    await fill(store)
    await store.ensure_vector_index(2, "m")
    with pytest.raises(InvalidInput, match="unknown search kinds"):
        await store.search_text("refresh", partition=P, kinds=kinds)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="unknown search kinds"):
        await store.vector_search([1.0, 0.0], partition=P, kinds=kinds)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="unknown search kinds"):
        await store.missing_embeddings(P, kinds)  # type: ignore[arg-type]


async def test_no_kinds_and_no_words_find_nothing(store: MemoryStore) -> None:
    await fill(store)
    assert await store.search_text("refresh", partition=P, kinds=[]) == []
    assert await store.search_text("-- () **", partition=P) == []


async def test_our_own_broken_statement_is_an_internal_error_and_logged(
    store: MemoryStore, backend: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    await fill(store)
    if backend == "sqlite":
        monkeypatch.setattr("palimpsest.graph_schema.sqlite.queries.THREAD_TOTALS", "SELECT nonsense FROM nowhere")
    else:
        monkeypatch.setattr("palimpsest.graph_schema.neo4j.queries.STATS", "MATCH (n RETURN n")
    with caplog.at_level(logging.ERROR), pytest.raises(InternalError) as raised:
        await store.stats(P)
    assert not isinstance(raised.value, InvalidInput)
    assert "own" in str(raised.value)
    logged = " ".join(record.getMessage() for record in caplog.records)
    assert ("nowhere" in logged) if backend == "sqlite" else ("SyntaxError" in logged)


async def test_a_word_finds_its_other_forms_and_keeps_its_own(store: MemoryStore) -> None:
    result = await store.append_messages(
        P,
        "t",
        [
            NewMessage(role="user", content="She was researching adoption agencies", message_id="a"),
            NewMessage(role="assistant", content="The research paper is done", message_id="b"),
            NewMessage(role="assistant", content="nothing to see here", message_id="c"),
        ],
    )
    researching, research, _ = result.message_ids
    assert {hit.id for hit in await store.search_text("researched", partition=P)} == {researching, research}
    assert {hit.id for hit in await store.search_text("agency", partition=P)} == {researching}


OLD_SQLITE_INDEX = """
DROP TABLE messages_fts;
CREATE VIRTUAL TABLE messages_fts USING fts5 (
    content, content = 'messages', content_rowid = 'pk', tokenize = 'unicode61 remove_diacritics 2'
);
INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');
"""
OLD_NEO4J_INDEX = [
    "DROP INDEX memory_text",
    "CREATE FULLTEXT INDEX memory_text FOR (n:Message|Summary|Fact) ON EACH [n.content, n.text] "
    "OPTIONS {indexConfig: {`fulltext.analyzer`: 'standard-no-stop-words'}}",
    "CALL db.awaitIndexes(60)",
    # A store made then had no schema version: the next open applies the schema.
    "MATCH (s:PalimpsestSchema) DELETE s",
]


async def make_text_index_unstemmed(backend: str, store_url: str) -> None:
    """Turn the store's text index into what it was before stemming (test scaffolding)."""
    if backend == "sqlite":
        with closing(sqlite3.connect(store_url.removeprefix("sqlite:///"))) as conn:
            conn.executescript(OLD_SQLITE_INDEX)
        return
    import neo4j

    async with neo4j.AsyncGraphDatabase.driver(store_url, auth=None) as driver:
        for statement in OLD_NEO4J_INDEX:
            await driver.execute_query(statement, database_="neo4j")


async def test_a_store_made_before_stemming_is_reindexed_when_opened(backend: str, store_url: str) -> None:
    store = open_store(store_url, Neo4jCredentials())
    await store.initialize()
    first, _ = await fill(store)
    await store.close()
    await make_text_index_unstemmed(backend, store_url)
    reopened = open_store(store_url, Neo4jCredentials())
    await reopened.initialize()
    try:
        # Unstemmed, neither "rotating" nor "tokens" is a word of "The Refresh-Token rotates hourly".
        assert [hit.id for hit in await reopened.search_text("rotating tokens", partition=P)] == [first]
        later = [NewMessage(role="user", content="rotated again", message_id="c")]
        more = await reopened.append_messages(P, "t", later)
        found = await reopened.search_text("rotate", partition=P)
        assert {hit.id for hit in found} == {first, *more.message_ids}
    finally:
        await reopened.close()
