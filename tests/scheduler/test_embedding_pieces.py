"""Long texts embedded in pieces: a line deep in a long message is found by meaning, on both stores.

An embedder reads a text's first 256 word pieces; a long message is embedded as
overlapping windows (`palimpsest.scheduler.pieces`), each a vector of the message. What
is held here: a search meets the message through any piece, once, with its best
piece's score; a short message keeps its one vector; a store written before pieces
(one vector per node, of the text's head) opens and its long messages are embedded
again in pieces by the backfill, once; and a copy carries every piece.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import (
    EMBED_PIECE_CHARS,
    EMBED_PIECE_OVERLAP,
    MAX_EMBED_CHARS,
    MAX_EMBED_PIECES,
    NewMessage,
)
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.embedders import SentenceTransformerEmbedder
from palimpsest.scheduler.embedding import backfill_embeddings, embed_new
from palimpsest.scheduler.pieces import pieces
from palimpsest.scheduler.portability.export import export_memory, import_archive
from palimpsest.server.retrieval.grep import grep_memories
from tests.support.cypher import run_cypher

P = "claude"
DIMS = 4
MODEL = "test:axes"
#: A build log of some 6,000 characters about nothing a question asks, ending with the one line that matters.
FILLER = "".join(f"compiling module widget_{i:03d} from src/widgets/widget_{i:03d}.c ... ok\n" for i in range(90))
DEEP = "The staging database password rotates every ninety days and lives in the vault."
LONG = FILLER + DEEP
QUERY = "how often is the staging db password changed"
SHORT = [
    "we deploy the frontend with vercel on every merge to main",
    "the kitchen walls were painted blue last spring",
    "remember to run the linter before committing",
]


async def seed(store: MemoryStore) -> list[str]:
    """The short messages and the long one last; their ids."""
    messages = [NewMessage(role="user", content=text, message_id=f"m{i}") for i, text in enumerate([*SHORT, LONG])]
    return (await store.append_messages(P, "session-1", messages)).message_ids


def test_a_short_text_is_one_piece_and_a_long_one_is_covered_to_its_end() -> None:
    assert pieces("the login tokens expire after fifteen minutes") == ["the login tokens expire after fifteen minutes"]
    assert pieces("x" * EMBED_PIECE_CHARS) == ["x" * EMBED_PIECE_CHARS]
    text = "".join(f"{i:06d}" for i in range(MAX_EMBED_CHARS))  # no window of it appears twice
    for length in (EMBED_PIECE_CHARS + 1, 4000, MAX_EMBED_CHARS, len(text)):
        cut = pieces(text[:length])
        assert 1 < len(cut) <= MAX_EMBED_PIECES
        assert all(len(piece) == EMBED_PIECE_CHARS for piece in cut)
        assert cut[0] == text[:EMBED_PIECE_CHARS]
        end = min(length, MAX_EMBED_CHARS)
        assert cut[-1] == text[end - EMBED_PIECE_CHARS : end]
        # Each window but the last starts inside the one before, overlapping it.
        starts = [text.index(piece) for piece in cut[:-1]]
        assert all(b - a == EMBED_PIECE_CHARS - EMBED_PIECE_OVERLAP for a, b in zip(starts, starts[1:], strict=False))
    assert len(pieces(text[:4000])) == 11  # covered whole: windows at 0, 384, ... 3456, and 3488
    assert len(pieces(text)) == MAX_EMBED_PIECES


async def test_a_node_is_found_once_by_its_best_piece(store: MemoryStore) -> None:
    ids = await seed(store)
    await store.ensure_vector_index(DIMS, MODEL)
    long_id = ids[-1]
    long_pieces = [[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0], [0.9, 0.1, 0.0, 0.0], [0.8, 0.2, 0.0, 0.0]]
    items = [(ids[0], [1.0, 0.5, 0.0, 0.0]), (ids[1], [0.0, 1.0, 0.0, 0.0]), (ids[2], [0.0, 0.0, 0.0, -1.0])]
    assert await store.set_embeddings([*items, *((long_id, v) for v in long_pieces)], MODEL) == 4

    hits = await store.vector_search([1.0, 0.0, 0.0, 0.0], partition=P, limit=2)
    # The long message's best piece (0.9, 0.1) beats every short one, and it counts once.
    assert [hit.id for hit in hits] == [long_id, ids[0]]
    assert hits[0].score == pytest.approx(0.9 / (0.9**2 + 0.1**2) ** 0.5, abs=1e-5)
    assert hits[0].snippet.startswith(FILLER[:100])
    everything = await store.vector_candidates([1.0, 0.0, 0.0, 0.0], partition=P, limit=10)
    assert sorted(hit.id for hit in everything.hits) == sorted(ids)
    assert sorted(ref.id for ref in everything.refs) == sorted(ids)

    stored = await store.read_embeddings([long_id, ids[0]])
    assert [v.node_id for v in stored] == [long_id] * 4 + [ids[0]]
    assert [max(range(DIMS), key=lambda i, v=v: v.vector[i]) for v in stored[:4]] == [2, 3, 0, 0]
    # Written again, a node's pieces are replaced, not added to.
    assert await store.set_embeddings([(long_id, [0.0, 0.0, 1.0, 0.0])], MODEL) == 1
    assert len(await store.read_embeddings([long_id])) == 1
    assert [hit.id for hit in await store.vector_search([1.0, 0.0, 0.0, 0.0], partition=P, limit=1)] == [ids[0]]


async def test_more_pieces_than_a_node_may_have_are_refused_and_nothing_is_written(store: MemoryStore) -> None:
    ids = await seed(store)
    await store.ensure_vector_index(DIMS, MODEL)
    too_many = [(ids[-1], [1.0, float(i), 0.0, 0.0]) for i in range(MAX_EMBED_PIECES + 1)]
    with pytest.raises(InvalidInput, match=f"at most {MAX_EMBED_PIECES}"):
        await store.set_embeddings([(ids[0], [1.0, 0.0, 0.0, 0.0]), *too_many], MODEL)
    assert await store.read_embeddings(ids) == []


async def test_a_phrase_only_at_the_end_of_a_long_message_is_found_by_meaning(
    store: MemoryStore, minilm: SentenceTransformerEmbedder
) -> None:
    ids = await seed(store)
    assert await backfill_embeddings(store, minilm) == len(ids)
    assert [len(await store.read_embeddings([node_id])) for node_id in ids] == [1, 1, 1, len(pieces(LONG))]
    assert len(pieces(LONG)) > 1

    found = await grep_memories(store, QUERY, partition=P, mode="semantic", embedder=minilm, limit=4)
    assert found.hits[0].id == ids[-1]
    assert [hit.id for hit in found.hits].count(ids[-1]) == 1
    assert sorted(hit.id for hit in found.hits) == sorted(ids)
    hybrid = await grep_memories(store, QUERY, partition=P, mode="hybrid", embedder=minilm, limit=4)
    assert hybrid.hits[0].id == ids[-1]
    assert len({hit.id for hit in hybrid.hits}) == len(hybrid.hits)

    # The head alone, as before pieces, does not find it: the tail's piece is what does.
    head = await minilm.embed([LONG])
    await store.set_embeddings([(ids[-1], head[0])], minilm.name)
    before = await grep_memories(store, QUERY, partition=P, mode="semantic", embedder=minilm, limit=4)
    assert before.hits[0].id != ids[-1]


async def make_old(store_url: str, backend: str, path: Path) -> None:
    """Turn the store's vectors into what a store written before pieces holds: one per node, no count.

    SQLite: ``embeddings`` as that schema made it (node_id unique, no piece columns),
    rows and pks kept. Neo4j: the Embedding nodes without ``piece``/``pieces``, the old
    unique constraint on node_id, and an older schema version recorded.
    """
    if backend == "sqlite":
        with sqlite3.connect(path) as conn:
            conn.executescript(
                """
                DROP TRIGGER embeddings_log_delete;
                DROP TRIGGER embeddings_fact_delete;
                DROP INDEX embeddings_by_model;
                ALTER TABLE embeddings RENAME TO current_embeddings;
                CREATE TABLE embeddings (
                    pk INTEGER PRIMARY KEY AUTOINCREMENT, node_id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL,
                    partition TEXT NOT NULL, thread_id TEXT, created_us INTEGER NOT NULL, model TEXT NOT NULL,
                    vector BLOB NOT NULL
                );
                INSERT INTO embeddings SELECT pk, node_id, kind, partition, thread_id, created_us, model, vector
                FROM current_embeddings;
                DROP TABLE current_embeddings;
                CREATE INDEX embeddings_by_model ON embeddings (model, pk);
                CREATE TRIGGER embeddings_log_delete AFTER DELETE ON embeddings BEGIN
                    INSERT INTO embedding_deletions (pk) VALUES (old.pk);
                END;
                CREATE TRIGGER embeddings_fact_delete AFTER DELETE ON facts BEGIN
                    DELETE FROM embeddings WHERE node_id = old.id;
                    UPDATE vector_index SET version = version + 1;
                END;
                UPDATE sqlite_sequence SET seq = 1000 WHERE name = 'embeddings';
                """
            )
        return
    await run_cypher(store_url, "MATCH (e:Embedding) REMOVE e.piece, e.pieces")
    await run_cypher(store_url, "DROP CONSTRAINT embedding_piece")
    await run_cypher(store_url, "DROP INDEX embedding_node_id")
    await run_cypher(store_url, "CREATE CONSTRAINT embedding_node FOR (e:Embedding) REQUIRE e.node_id IS UNIQUE")
    await run_cypher(store_url, "MATCH (s:PalimpsestSchema) SET s.version = 'older'")


async def test_a_store_written_before_pieces_opens_and_its_long_messages_are_embedded_again_once(
    store: MemoryStore, store_url: str, backend: str, tmp_path: Path, minilm: SentenceTransformerEmbedder
) -> None:
    ids = await seed(store)
    await store.ensure_vector_index(await minilm.dimensions(), minilm.name)
    heads = await minilm.embed([*SHORT, LONG])
    await store.set_embeddings(list(zip(ids, heads, strict=True)), minilm.name)
    await store.close()
    path = Path(store_url.removeprefix("sqlite:///")) if backend == "sqlite" else tmp_path
    await make_old(store_url, backend, path)

    old = open_store(store_url, Neo4jCredentials())
    await old.initialize()
    try:
        await old.ensure_vector_index(await minilm.dimensions(), minilm.name)
        # Opened unchanged: every vector is there and searched, the long one by its head.
        assert [v.node_id for v in await old.read_embeddings(ids)] == ids
        assert [hit.id for hit in await old.vector_search(heads[1], partition=P, limit=1)] == [ids[1]]
        if backend == "sqlite":
            with sqlite3.connect(path) as conn:
                # Short texts are marked complete once, on open: the backfill's walk never measures them again.
                counts = dict(conn.execute("SELECT node_id, pieces FROM embeddings").fetchall())
            assert counts == {**dict.fromkeys(ids[:-1], 1), ids[-1]: None}
        # Only the long message is due again; the backfill embeds it in pieces, once.
        assert [todo.id for todo in await old.missing_embeddings(None)] == [ids[-1]]
        assert await backfill_embeddings(old, minilm) == 1
        assert await old.missing_embeddings(None) == []
        assert await backfill_embeddings(old, minilm) == 0
        assert await embed_new(old, minilm, ids) == 0
        assert len(await old.read_embeddings([ids[-1]])) == len(pieces(LONG))
        found = await grep_memories(old, QUERY, partition=P, mode="semantic", embedder=minilm, limit=4)
        assert found.hits[0].id == ids[-1]
        if backend == "sqlite":
            await old.maintain_vectors()
            with sqlite3.connect(path) as conn:
                # The AUTOINCREMENT counter came through: no pk is ever reused.
                assert conn.execute("SELECT min(pk) FROM embeddings WHERE piece > 0").fetchone()[0] > 1000
    finally:
        await old.close()
    # Opened again, nothing is redone.
    again = open_store(store_url, Neo4jCredentials())
    await again.initialize()
    try:
        await again.ensure_vector_index(await minilm.dimensions(), minilm.name)
        assert await again.missing_embeddings(None) == []
        assert len(await again.read_embeddings([ids[-1]])) == len(pieces(LONG))
    finally:
        await again.close()


async def test_export_and_import_carry_every_piece(store: MemoryStore, tmp_path: Path) -> None:
    ids = await seed(store)
    await store.ensure_vector_index(DIMS, MODEL)
    long_pieces = [[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0], [0.9, 0.1, 0.0, 0.0]]
    await store.set_embeddings([(ids[0], [1.0, 0.5, 0.0, 0.0]), *((ids[-1], v) for v in long_pieces)], MODEL)
    archive = tmp_path / "memory.jsonl.gz"
    exported = await export_memory(store, archive, with_vectors=True)
    assert exported.vectors == 1 + len(long_pieces)

    copy = open_store(f"sqlite:///{tmp_path / 'copy.db'}")
    await copy.initialize()
    try:
        imported = await import_archive(copy, archive)
        assert imported.written["vectors"] == 2  # nodes
        original, copied = await store.read_embeddings(ids), await copy.read_embeddings(ids)
        assert [v.node_id for v in copied] == [v.node_id for v in original] == [ids[0]] + [ids[-1]] * 3
        for mine, theirs in zip(copied, original, strict=True):
            assert mine.vector == pytest.approx(theirs.vector, abs=1e-6)
        await copy.ensure_vector_index(DIMS, MODEL)
        hits = await copy.vector_search([0.0, 0.0, 0.0, 1.0], partition=P, limit=5)
        assert [hit.id for hit in hits] == [ids[-1], ids[0]]
        assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    finally:
        await copy.close()
