"""Semantic and hybrid search on Neo4j: embeddings, the vector index and message refs.

Vectors live on ``(:Embedding)-[:EMBEDS]->(node)`` nodes, one per piece of a long
text, indexed by the ``memory_embedding`` vector index; a node is found once, by its
best piece. The index gives approximate candidates before the
partition, kind and time filters apply, so `Neo4jVectors.vector_search` widens its
candidate count until enough pass, and ranks exactly past ``CANDIDATES_MAX``
(`Neo4jBase._top_hits`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from palimpsest.graph_schema.errors import Conflict
from palimpsest.graph_schema.models import (
    EMBED_PIECE_CHARS,
    MAX_EMBED_CHARS,
    MAX_EMBED_PIECES,
    REF_OPENING_CHARS,
    EmbeddingTodo,
    MessageRef,
    SearchHit,
    SearchKind,
    VectorCandidates,
)
from palimpsest.graph_schema.neo4j import queries as q
from palimpsest.graph_schema.neo4j.base import Neo4jBase, aware, epoch_us
from palimpsest.graph_schema.prepare import check_kinds, check_limit, unique_ids
from palimpsest.graph_schema.vectors import SNIPPET_CHARS, check_index_args, head_snippet, unit_pieces, unit_vectors


def _message_ref(row: dict[str, Any]) -> MessageRef:
    """A message hit's ref; its opening is the head of the hit's text, which reads more than a ref's."""
    return MessageRef(
        id=row["id"], thread_id=row["thread_id"], partition=row["partition"], seq=row["seq"], role=row["role"],
        metadata=json.loads(row["metadata"] or "{}"), opening=(row["text"] or "")[:REF_OPENING_CHARS],
    )  # fmt: skip


def _vector_hits(rows: list[dict[str, Any]]) -> list[SearchHit]:
    """Semantic hits from ranked rows, best first (ties by id, as the query orders them)."""
    hits = [
        SearchHit(
            id=row["id"],
            kind=row["kind"],
            thread_id=row["thread_id"],
            partition=row["partition"],
            score=min(1.0, max(-1.0, row["score"])),
            snippet=head_snippet(row["text"] or ""),
            created_at=epoch_us(row["created_at"]),
            source_id=row["source_id"],
            level=row["level"],
            role=row["role"],
        )
        for row in rows
    ]
    return sorted(hits, key=lambda hit: (-hit.score, hit.id))


class Neo4jVectors(Neo4jBase):
    """The embedding and vector search verbs, apart because they need an embedder the other features do not."""

    async def ensure_vector_index(self, dimensions: int, model: str) -> None:
        """Create ``memory_embedding`` for this size; rebuild it only while it holds no vector."""
        check_index_args(dimensions, model)
        if (self._vectors.dimensions, self._vectors.model) == (dimensions, model):
            return
        rows = await self._query(q.VECTOR_INDEX_SIZE, name=q.VECTOR_INDEX_NAME)
        existing = rows[0]["dimensions"] if rows else None
        if existing is not None and existing != dimensions:
            (row,) = await self._query(q.ANY_EMBEDDING)
            if row["any"]:
                raise Conflict(
                    f"the store's vector index holds {existing}-number vectors; model {model!r} makes "
                    f"{dimensions}: keep the embedder that filled it, or use a fresh store"
                )
            await self._query(q.DROP_VECTOR_INDEX, write=True)
        if existing != dimensions:
            await self._query(q.CREATE_VECTOR_INDEX, write=True, dimensions=dimensions)
        await self._query(q.AWAIT_VECTOR_INDEX)
        self._vectors.settle(dimensions, model)

    async def set_embeddings(self, items: Sequence[tuple[str, Sequence[float]]], model: str) -> int:
        """Replace each node's Embeddings by one per piece, in one transaction (see `MemoryStore`)."""
        dimensions, _ = self._vectors.require()
        self._vectors.check_model(model)
        latest = unit_pieces(items, dimensions)
        if not latest:
            return 0
        rows = [{"id": node_id, "vectors": pieces.tolist()} for node_id, pieces in latest.items()]
        (written,) = await self._query(q.SET_EMBEDDINGS, write=True, rows=rows, model=model)
        return int(written["written"])

    async def missing_embeddings(
        self,
        partition: str | None,
        kinds: Sequence[SearchKind] = ("message", "summary", "fact"),
        limit: int = 256,
        *,
        ids: Sequence[str] | None = None,
        after: str | None = None,
    ) -> list[EmbeddingTodo]:
        """Per label, nodes without an Embedding of the model, by id from ``after`` (see `MemoryStore`)."""
        _, model = self._vectors.require()
        asked = check_kinds(kinds)
        check_limit(limit)
        if ids is not None and not ids:
            return []
        queries = q.MISSING_EMBEDDINGS if ids is None else q.MISSING_EMBEDDINGS_AMONG
        params: dict[str, Any] = {
            "partition": partition,
            "model": model,
            "after": after or "",
            "limit": limit,
            "chars": MAX_EMBED_CHARS,
            "piece_chars": EMBED_PIECE_CHARS,
            "ids": list(ids or []),
        }
        todo: list[EmbeddingTodo] = []
        for kind in asked:
            todo += [EmbeddingTodo(row["id"], kind, row["text"]) for row in await self._query(queries[kind], **params)]
        return sorted(todo)[:limit]

    async def maintain_vectors(self) -> int:
        """Nothing to do (see `MemoryStore`): Neo4j keeps its vector index up as vectors are written."""
        return 0

    async def vector_search(
        self,
        vector: Sequence[float],
        *,
        partition: str | None,
        thread_id: str | None = None,
        kinds: Sequence[SearchKind] = ("message", "summary"),
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 20,
    ) -> list[SearchHit]:
        """`vector_candidates` without its refs (see `MemoryStore`)."""
        found = await self.vector_candidates(
            vector, partition=partition, thread_id=thread_id, kinds=kinds, since=since, until=until, limit=limit
        )
        return found.hits

    async def vector_candidates(
        self,
        vector: Sequence[float],
        *,
        partition: str | None,
        thread_id: str | None = None,
        kinds: Sequence[SearchKind] = ("message", "summary"),
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 20,
    ) -> VectorCandidates:
        """Index candidates widened until enough pass the filters; exact scores (see `MemoryStore`).

        A thread is ranked exactly from its own vectors. Otherwise the vector index gives
        ``k`` candidates, ``k`` grows while too few pass the filters and the index had
        more, and past ``CANDIDATES_MAX`` the partition is ranked exactly (`Neo4jBase._top_hits`).
        Each hit's row carries its seq and metadata too, so its refs cost no second read.
        """
        dimensions, model = self._vectors.require()
        asked = check_kinds(kinds)
        check_limit(limit)
        query = unit_vectors([vector], dimensions)[0].tolist()
        if not asked:
            return VectorCandidates([], [])
        params: dict[str, Any] = {
            "vector": query,
            "model": model,
            "kinds": asked,
            "partition": partition,
            "thread_id": thread_id,
            "since": aware(since),
            "until": aware(until),
            "limit": limit,
            "chars": SNIPPET_CHARS + 1,
            "max_pieces": MAX_EMBED_PIECES,
        }
        if thread_id is not None:
            rows = [row["hit"] for row in await self._query(q.VECTOR_SEARCH_THREAD, **params)]
        else:
            exact = q.VECTOR_SEARCH_ALL if partition is None else q.VECTOR_SEARCH_PARTITION
            rows = await self._top_hits(q.VECTOR_SEARCH, exact, **params)
        return VectorCandidates(_vector_hits(rows), [_message_ref(row) for row in rows if row["kind"] == "message"])

    # -- hybrid search: candidate positions and metadata -------------------------------

    async def message_refs(self, partition: str | None, message_ids: Sequence[str]) -> list[MessageRef]:
        """One UNWIND over the id index, content left out (see `MemoryStore`)."""
        wanted = unique_ids("message", message_ids)
        if not wanted:
            return []
        (row,) = await self._query(q.MESSAGE_REFS, ids=wanted, partition=partition, opening=REF_OPENING_CHARS)
        found = {
            node_id: MessageRef(
                id=node_id, thread_id=thread_id, partition=where, seq=seq, role=role,
                metadata=json.loads(metadata or "{}"), opening=opening or "",
            )
            for node_id, thread_id, where, seq, role, metadata, opening in row["refs"]
        }  # fmt: skip
        return [found[message_id] for message_id in wanted if message_id in found]
