"""Semantic and hybrid search on SQLite: embeddings, the in-memory vector matrix, message refs.

It exists so vector search lives apart from the rest of the backend: vectors are stored as
rows of the ``embeddings`` table, and each partition's matrix is held in memory and caught
up with the table by its version, since SQLite has no vector index of its own. Hybrid
search's candidate metadata (``message_refs``) is read here too.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime

from palimpsest.graph_schema.errors import Conflict
from palimpsest.graph_schema.models import (
    MAX_EMBED_CHARS,
    REF_OPENING_CHARS,
    EmbeddingTodo,
    MessageRef,
    SearchHit,
    SearchKind,
)
from palimpsest.graph_schema.prepare import check_kinds, unique_ids
from palimpsest.graph_schema.sqlite import queries as q
from palimpsest.graph_schema.sqlite.base import SqliteBase, ids_json, page_limit, transaction
from palimpsest.graph_schema.vectors import (
    SNIPPET_CHARS,
    MatrixRow,
    VectorMatrix,
    check_index_args,
    head_snippet,
    microseconds,
    unit_vectors,
)

#: Stored vectors read per step when a partition's matrix is loaded (about 1.5 MB each
#: thousand at 384 dimensions): large enough to amortise the fetch, small beside the matrix.
MATRIX_LOAD_ROWS = 50_000


class SqliteVectors(SqliteBase):
    """Embeddings and vector search, apart because they keep an in-memory matrix cache beside the tables."""

    # -- semantic search: embeddings and the in-memory vector matrix -------------------

    async def ensure_vector_index(self, dimensions: int, model: str) -> None:
        """Record the vector size (``vector_index``); another size only while no vector is stored."""
        check_index_args(dimensions, model)
        if (self._vectors.dimensions, self._vectors.model) == (dimensions, model):
            return

        def settle(conn: sqlite3.Connection) -> None:
            params = {"name": q.VECTOR_INDEX_NAME, "dimensions": dimensions}
            with transaction(conn, "IMMEDIATE"):
                row = conn.execute(q.VECTOR_INDEX, params).fetchone()
                if row is None:
                    conn.execute(q.CREATE_VECTOR_INDEX, params)
                elif row["dimensions"] != dimensions and conn.execute(q.ANY_EMBEDDING).fetchone() is None:
                    conn.execute(q.RESIZE_VECTOR_INDEX, params)
                elif row["dimensions"] != dimensions:
                    raise Conflict(
                        f"the store's vector index holds {row['dimensions']}-number vectors; model {model!r} "
                        f"makes {dimensions}: keep the embedder that filled it, or use a fresh store"
                    )
            self._vectors.settle(dimensions, model)

        await self._run(settle)

    async def set_embeddings(self, items: Sequence[tuple[str, Sequence[float]]], model: str) -> int:
        """Replace each node's ``embeddings`` row and bump the version, in one transaction."""
        dimensions, _ = self._vectors.require()
        self._vectors.check_model(model)
        latest = dict(items)
        matrix = unit_vectors(list(latest.values()), dimensions)
        blobs = {node_id: matrix[index].astype("<f4").tobytes() for index, node_id in enumerate(latest)}

        def write(conn: sqlite3.Connection) -> int:
            with transaction(conn, "IMMEDIATE"):
                nodes = conn.execute(q.EMBEDDED_NODES, {"ids": ids_json(list(latest))}).fetchall()
                conn.executemany(
                    q.SET_EMBEDDING,
                    [
                        (
                            row["id"], row["kind"], row["partition"], row["thread_id"],
                            microseconds(datetime.fromisoformat(row["created_at"])), model, blobs[row["id"]],
                        )
                        for row in nodes
                    ],
                )  # fmt: skip
                if nodes:
                    conn.execute(q.BUMP_VECTOR_VERSION, {"name": q.VECTOR_INDEX_NAME})
            return len(nodes)

        return await self._run(write) if latest else 0

    async def missing_embeddings(
        self,
        partition: str | None,
        kinds: Sequence[SearchKind] = ("message", "summary", "fact"),
        limit: int = 256,
        *,
        ids: Sequence[str] | None = None,
        after: str | None = None,
    ) -> list[EmbeddingTodo]:
        """Per kind, the id index walked from ``after``; merged in id order."""
        _, model = self._vectors.require()
        asked = check_kinds(kinds)
        limit = page_limit(limit)
        if ids is not None and not ids:
            return []
        params = {
            "partition": partition,
            "model": model,
            "after": after or "",
            "limit": limit,
            "chars": MAX_EMBED_CHARS,
            "ids": None if ids is None else ids_json(ids),
        }
        queries = q.MISSING_EMBEDDINGS if ids is None else q.MISSING_EMBEDDINGS_AMONG

        def read(conn: sqlite3.Connection) -> list[EmbeddingTodo]:
            todo = [
                EmbeddingTodo(row[0], kind, row[1]) for kind in asked for row in conn.execute(queries[kind], params)
            ]
            return sorted(todo)[:limit]

        return await self._run(read)

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
        """Catch the partition's matrix up with the table, rank in memory, read the hits' rows."""
        dimensions, model = self._vectors.require()
        asked = check_kinds(kinds)
        limit = page_limit(limit)
        query = unit_vectors([vector], dimensions)[0]
        if not asked:
            return []
        matrix = await self._run(lambda conn: self._matrix(conn, partition, model, dimensions))
        ranked = await asyncio.to_thread(
            matrix.nearest,
            query,
            kinds=asked,
            thread_id=thread_id,
            since_us=None if since is None else microseconds(since),
            until_us=None if until is None else microseconds(until),
            limit=limit,
        )
        if not ranked:
            return []

        def read(conn: sqlite3.Connection) -> list[SearchHit]:
            params = {"ids": ids_json([node_id for node_id, _ in ranked]), "chars": SNIPPET_CHARS + 1}
            rows = {row[0]: (kind, row) for kind in asked for row in conn.execute(q.VECTOR_HITS[kind], params)}
            hits: list[SearchHit] = []
            for node_id, score in ranked:
                if node_id in rows:
                    kind, row = rows[node_id]
                    hits.append(
                        SearchHit(
                            id=row[0], kind=kind, source_id=row[1], thread_id=row[2], partition=row[3],
                            role=row[4], level=row[5], created_at=datetime.fromisoformat(row[6]),
                            snippet=head_snippet(row[7]), score=min(1.0, max(-1.0, score)),
                        )
                    )  # fmt: skip
            return hits

        return await self._run(read)

    def _matrix(self, conn: sqlite3.Connection, partition: str | None, model: str, dimensions: int) -> VectorMatrix:
        """The partition's matrix, caught up with every write any process made since it was read.

        Unchanged version: nothing to read. Rows only appended since (the count grew by
        exactly the rows past the last pk seen): read those. Anything else (a vector
        replaced, a fact cleared): read the partition again. Rows are read in chunks of
        `MATRIX_LOAD_ROWS` into buffers sized first, so a million vectors never sit in
        memory twice.
        """
        with transaction(conn, "DEFERRED"):
            index = conn.execute(q.VECTOR_INDEX, {"name": q.VECTOR_INDEX_NAME}).fetchone()
            version = -1 if index is None else index["version"]
            matrix = self._vectors.matrices.get(partition)
            if matrix is not None and matrix.version == version:
                return matrix
            scope = {"partition": partition, "model": model}
            scoped = partition is not None
            after = 0 if matrix is None else matrix.max_pk
            count, max_pk, new = conn.execute(q.EMBEDDING_EXTENT[scoped], {**scope, "after": after}).fetchone()
            if matrix is None or max_pk < matrix.max_pk or matrix.size + new != count:
                matrix = VectorMatrix(dimensions)
                new = count
            matrix.reserve(new)
            rows = conn.execute(q.EMBEDDING_ROWS[scoped], {**scope, "after": matrix.max_pk})
            while chunk := rows.fetchmany(MATRIX_LOAD_ROWS):
                matrix.extend([MatrixRow(*row) for row in chunk])
            matrix.version = version
            self._vectors.matrices[partition] = matrix
            return matrix

    # -- hybrid search: candidate positions and metadata -------------------------------

    async def message_refs(self, partition: str | None, message_ids: Sequence[str]) -> list[MessageRef]:
        """One ``IN`` read over the messages table, content left out (see `MemoryStore`)."""
        wanted = unique_ids("message", message_ids)
        if not wanted:
            return []

        def read(conn: sqlite3.Connection) -> list[MessageRef]:
            asked = {"ids": ids_json(wanted), "partition": partition, "opening": REF_OPENING_CHARS}
            rows = conn.execute(q.MESSAGE_REFS, asked)
            found = {
                row["id"]: MessageRef(
                    id=row["id"], thread_id=row["thread_id"], partition=row["partition"], seq=row["seq"],
                    role=row["role"], metadata=json.loads(row["metadata"]), opening=row["opening"],
                )
                for row in rows
            }  # fmt: skip
            return [found[message_id] for message_id in wanted if message_id in found]

        return await self._run(read)
