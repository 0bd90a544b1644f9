"""Semantic and hybrid search on SQLite: embeddings, the vector files, message refs.

It exists so vector search lives apart from the rest of the backend: vectors are stored as
rows of the ``embeddings`` table (the source of truth), and searched from memory-mapped
files beside the database (``vector_file``), since SQLite has no vector index of its
own. Writers append to the files and maintenance lays them out (``maintain_vectors``);
a search only reads them, with what they lack read from the table by its version. Hybrid search's candidate metadata
(``message_refs``) is read here too.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import tempfile
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path

from palimpsest.graph_schema.errors import Conflict, StoreUnavailable
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
from palimpsest.graph_schema.prepare import check_kinds, unique_ids
from palimpsest.graph_schema.sqlite import queries as q
from palimpsest.graph_schema.sqlite.base import SqliteBase, ids_json, page_limit, transaction
from palimpsest.graph_schema.sqlite.vector_file import (
    CacheHeader,
    MappedVectors,
    SearchView,
    TableRow,
    VectorFiles,
    cache_directory,
    np,
    tail_vectors,
)
from palimpsest.graph_schema.vectors import (
    SNIPPET_CHARS,
    check_index_args,
    head_snippet,
    microseconds,
    unit_pieces,
    unit_vectors,
)

logger = logging.getLogger(__name__)

#: Stored vectors read per step when the vector files are filled from the table (about
#: 1.5 MB each thousand at 384 dimensions): large enough to amortise the fetch, small
#: beside the whole.
MATRIX_LOAD_ROWS = 50_000


class SqliteVectors(SqliteBase):
    """Embeddings and vector search, apart because they keep a cache of files beside the tables."""

    # -- semantic search: embeddings and the vector files ------------------------------

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
        """Replace each node's ``embeddings`` rows (deleted first, so logged) and bump the version, at once."""
        dimensions, _ = self._vectors.require()
        self._vectors.check_model(model)
        latest = unit_pieces(items, dimensions)
        blobs = {node_id: [row.tobytes() for row in pieces.astype("<f4")] for node_id, pieces in latest.items()}

        def write(conn: sqlite3.Connection) -> int:
            with transaction(conn, "IMMEDIATE"):
                nodes = conn.execute(q.EMBEDDED_NODES, {"ids": ids_json(list(latest))}).fetchall()
                conn.execute(q.DELETE_EMBEDDINGS, {"ids": ids_json([row["id"] for row in nodes])})
                conn.executemany(
                    q.SET_EMBEDDING,
                    [
                        (
                            row["id"], piece, len(blobs[row["id"]]), row["kind"], row["partition"], row["thread_id"],
                            microseconds(datetime.fromisoformat(row["created_at"])), model, blob,
                        )
                        for row in nodes
                        for piece, blob in enumerate(blobs[row["id"]])
                    ],
                )  # fmt: skip
                if nodes:
                    conn.execute(q.BUMP_VECTOR_VERSION, {"name": q.VECTOR_INDEX_NAME})
            if nodes:
                try:
                    self._files_caught_up(conn, model, dimensions, wait=False)
                except StoreUnavailable as exc:  # the vectors are stored: searches read them from the table
                    logger.warning("vectors stored, vector files left for upkeep: %s", exc)
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
            "piece_chars": EMBED_PIECE_CHARS,
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
        """Rank from the mapped files and the rows they lack (`SearchView`), then read the hits' rows (`_nearest`)."""
        candidates = await self._nearest(vector, partition, thread_id, kinds, since, until, limit)
        return candidates.hits

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
        """`vector_search` with the `MessageRef` of its messages, from the same read of their rows.

        Hybrid search asks for some 300 candidates: reading their rows a second time for
        the refs cost as much as the read of the hits itself.
        """
        return await self._nearest(vector, partition, thread_id, kinds, since, until, limit)

    async def _nearest(
        self,
        vector: Sequence[float],
        partition: str | None,
        thread_id: str | None,
        kinds: Sequence[SearchKind],
        since: datetime | None,
        until: datetime | None,
        limit: int,
    ) -> VectorCandidates:
        """The ``limit`` nearest nodes and their messages' refs, from one read of their rows.

        A node's pieces are ranked as rows of their own, so the ranking asks for twice
        ``limit`` rows (one pass even when a few long nodes have several pieces near the
        query), then four times more until it holds ``limit`` distinct nodes (or had no
        more to give): each node counts once, by its best piece.
        """
        dimensions, model = self._vectors.require()
        asked = check_kinds(kinds)
        limit = page_limit(limit)
        query = unit_vectors([vector], dimensions)[0]
        if not asked:
            return VectorCandidates([], [])
        view = await self._read(lambda conn: self._search_view(conn, model, dimensions))
        wanted = 2 * limit
        while True:
            ranked = await asyncio.to_thread(
                view.nearest,
                query,
                kinds=asked,
                partition=partition,
                thread_id=thread_id,
                since_us=None if since is None else microseconds(since),
                until_us=None if until is None else microseconds(until),
                limit=wanted,
            )
            if not ranked:
                return VectorCandidates([], [])
            scores = await self._best_pieces(ranked)
            if len(scores) >= limit or len(ranked) < wanted or wanted >= limit * MAX_EMBED_PIECES:
                break
            wanted = min(wanted * 4, limit * MAX_EMBED_PIECES)
        scores = dict(list(scores.items())[:limit])

        def read(conn: sqlite3.Connection) -> VectorCandidates:
            # Enough of the text for the hit's snippet and for a ref's opening (its first chars).
            params = {"ids": ids_json(list(scores)), "chars": max(SNIPPET_CHARS + 1, REF_OPENING_CHARS)}
            rows = {row[0]: (kind, row) for kind in asked for row in conn.execute(q.VECTOR_HITS[kind], params)}
            hits: list[SearchHit] = []
            refs: list[MessageRef] = []
            for node_id, score in scores.items():
                kind, row = rows.get(node_id, (None, None))
                # The files filter by hashes of the partition and thread: the table has the last word.
                if row is None or (partition is not None and row[3] != partition):
                    continue
                if thread_id is not None and row[2] != thread_id:
                    continue
                hits.append(
                    SearchHit(
                        id=row[0], kind=kind, source_id=row[1], thread_id=row[2], partition=row[3],
                        role=row[4], level=row[5], created_at=datetime.fromisoformat(row[6]),
                        snippet=head_snippet(row[7]), score=min(1.0, max(-1.0, score)),
                    )
                )  # fmt: skip
                if kind == "message":
                    refs.append(
                        MessageRef(
                            id=row[0], thread_id=row[2], partition=row[3], seq=row[8], role=row[4],
                            metadata=json.loads(row[9]), opening=row[7][:REF_OPENING_CHARS],
                        )
                    )  # fmt: skip
            return VectorCandidates(hits, refs)

        return await self._read(read)

    async def _best_pieces(self, ranked: list[tuple[int, float]]) -> dict[str, float]:
        """The nodes of ranked pks, best first, each with its best piece's score."""
        pks = json.dumps([pk for pk, _ in ranked])
        nodes = dict(await self._read(lambda conn: conn.execute(q.EMBEDDING_NODES, {"ids": pks}).fetchall()))
        scores: dict[str, float] = {}
        for pk, score in ranked:
            if pk in nodes:
                scores.setdefault(nodes[pk], score)
        return scores

    def _search_view(self, conn: sqlite3.Connection, model: str, dimensions: int) -> SearchView:
        """What a search reads at the table's current version; reads only, never writes a file.

        Unchanged version since this process last looked: the same view. A new header
        (maintenance or a writer caught the files up): its files are mapped afresh,
        once checked against the table, so a database file replaced under the same name
        is never searched through another one's vectors. Otherwise the view is carried
        forward: the deletions logged since and the rows past its last pk are read from
        the table (see `SearchView`). The header is read before the transaction starts,
        so the table it is checked against holds every row it counts (a writer commits
        the rows before it writes the header). Maintenance may switch the header to a
        new generation and remove the old files between the header's read and the
        mapping: the header is then read again, a few times, never waited for.
        """
        files = VectorFiles(self._vector_directory(), model, dimensions)
        with self._view_lock:
            for _ in range(3):
                header = files.header()
                with transaction(conn, "DEFERRED"):
                    index = conn.execute(q.VECTOR_INDEX, {"name": q.VECTOR_INDEX_NAME}).fetchone()
                    version = -1 if index is None else index["version"]
                    view = self._vector_view
                    if view is not None and (view.model, view.dimensions) != (model, dimensions):
                        view = None
                    if view is not None and view.version == version:
                        return view
                    if view is None or header != view.header:
                        try:
                            view = self._fresh_view(conn, files, header, version)
                        except FileNotFoundError:
                            continue
                    self._vector_view = view = self._carried_forward(conn, view, version)
                    return view
            with transaction(conn, "DEFERRED"):
                self._vector_view = view = self._carried_forward(
                    conn, self._fresh_view(conn, files, None, version), version
                )
                return view

    def _fresh_view(
        self, conn: sqlite3.Connection, files: VectorFiles, header: CacheHeader | None, version: int
    ) -> SearchView:
        """A view of these files, mapped, with nothing read past them yet; none if they are not this table's."""
        if header is not None and not self._same_table(conn, files, header):
            header = None
        try:
            mapped = None if header is None else files.map(header)
        except FileNotFoundError:
            raise
        except (OSError, ValueError) as exc:
            raise StoreUnavailable(f"the vector files in {files.directory} cannot be used: {exc}") from exc
        deletions = header.deletions if header is not None else conn.execute(q.LAST_DELETION).fetchone()[0]
        tail = tail_vectors(files.directory, files.model, files.dimensions, [])
        last_pk = header.max_pk if header is not None else 0
        return SearchView(version, files.model, files.dimensions, header, mapped, tail, last_pk, deletions)

    def _carried_forward(self, conn: sqlite3.Connection, view: SearchView, version: int) -> SearchView:
        """The view with the deletions logged and the rows written since it was taken."""
        deleted = conn.execute(q.DELETED_EMBEDDINGS, {"after": view.deletions}).fetchall()
        fresh = [row for chunk in self._table_rows(conn, view.model, view.last_pk) for row in chunk]
        files, tail = view.files, view.tail
        if fresh:
            old = tail.header.rows
            vectors, meta = VectorFiles(tail.directory, view.model, view.dimensions).block(fresh)
            tail = MappedVectors(
                tail.directory,
                tail.header.model_copy(update={"rows": old + len(fresh), "max_pk": fresh[-1].pk}),
                np.concatenate([tail.vectors[:old], vectors]),
                np.concatenate([tail.meta[:old], meta]),
                None,
            )
        if deleted:
            dead = np.array([row[1] for row in deleted], dtype=np.int64)
            if files is not None:
                gone = np.flatnonzero(np.isin(files.meta["pk"][: files.header.rows], dead))
                excluded = gone if files.excluded is None else np.union1d(files.excluded, gone)
                files = files.without(excluded)
            meta = np.array(tail.meta)
            meta["alive"][np.isin(meta["pk"], dead)] = 0
            tail = MappedVectors(tail.directory, tail.header, tail.vectors, meta, None)
        return SearchView(
            version, view.model, view.dimensions, view.header, files, tail,
            fresh[-1].pk if fresh else view.last_pk, deleted[-1][0] if deleted else view.deletions,
        )  # fmt: skip

    def _files_caught_up(self, conn: sqlite3.Connection, model: str, dimensions: int, *, wait: bool) -> int:
        """Append the table's new rows to the files and mark deleted ones dead (never re-sorting).

        So the files are laid out when vectors are written, not by the first search. A
        writer (``wait`` false) skips when another process holds the files' lock;
        searches read what the files lack from the table until the next write or
        upkeep. Files missing or another database's are written afresh. Returns the rows
        appended.
        """
        files = VectorFiles(self._vector_directory(), model, dimensions)
        try:
            with files.locked(wait=wait) as held:
                if not held:
                    return 0
                with transaction(conn, "DEFERRED"):
                    index = conn.execute(q.VECTOR_INDEX, {"name": q.VECTOR_INDEX_NAME}).fetchone()
                    version = -1 if index is None else index["version"]
                    header = files.header()
                    before = 0 if header is None else header.rows
                    if header is not None and header.version == version and self._same_table(conn, files, header):
                        return 0
                    header = self._catch_up(conn, files, header, version)
                    return max(0, header.rows - before)
        except OSError as exc:
            raise StoreUnavailable(f"the vector files in {files.directory} cannot be written: {exc}") from exc

    async def maintain_vectors(self) -> int:
        """Vector upkeep (see `MemoryStore`): catch the files up, then re-sort or reclaim when due."""
        models = dict(self._file_models())
        if self._vectors.model is not None and self._vectors.dimensions is not None:
            models[self._vectors.model] = self._vectors.dimensions

        def upkeep(conn: sqlite3.Connection) -> int:
            done = 0
            for model, dimensions in models.items():
                files = VectorFiles(self._vector_directory(), model, dimensions)
                done += self._files_caught_up(conn, model, dimensions, wait=True)
                try:
                    with files.locked(wait=True):
                        header = files.header()
                        if header is not None:
                            done += files.lay_out(header)[1]
                except OSError as exc:
                    raise StoreUnavailable(f"the vector files in {files.directory} cannot be written: {exc}") from exc
            return done

        return await self._run(upkeep)

    def _file_models(self) -> Iterator[tuple[str, int]]:
        """The model and size of every model's files beside the database."""
        directory = self._vector_directory()
        for path in directory.glob("*.json") if directory.is_dir() else ():
            try:
                header = CacheHeader.model_validate_json(path.read_bytes())
            except (OSError, ValueError):
                continue
            yield header.model, header.dimensions

    def _same_table(self, conn: sqlite3.Connection, files: VectorFiles, header: CacheHeader | None) -> bool:
        """Whether the files hold this table's rows, whatever the table gained or lost since.

        The files' last live row must be in the table with the same vector, or logged as
        deleted from it; files with no live row must not be missing any of the table's
        rows up to their last pk. Files written for another database that once had this
        name fail (its vectors differ). Reads one row and the files' pks, never counts
        the table (a count reads a million index entries, about a second).
        """
        if header is None:
            return False
        pk = files.last_live_pk(header)
        if pk == 0:
            return conn.execute(q.EMBEDDING_UP_TO, {"model": header.model, "pk": header.max_pk}).fetchone() is None
        row = conn.execute(q.EMBEDDING_VECTOR, {"pk": pk, "model": header.model}).fetchone()
        if row is None:
            return conn.execute(q.DELETED_PK, {"pk": pk}).fetchone() is not None
        return bytes(row[0]) == files.vector_of(header, pk)

    def _catch_up(
        self, conn: sqlite3.Connection, files: VectorFiles, header: CacheHeader | None, version: int
    ) -> CacheHeader:
        """Bring the files up to the table: mark deleted rows dead, append new ones, or rebuild.

        Deleted rows come from the ``embedding_deletions`` log past the last entry the
        files saw, new rows from the pk index past their last pk: neither counts the
        table. The files are rebuilt when missing or when their last row is in the table
        with other numbers (another database's files). Rows are read in chunks of
        `MATRIX_LOAD_ROWS`, so a million vectors never sit in memory at once.
        """
        model = files.model
        if header is not None and header.rows:
            last = conn.execute(q.EMBEDDING_VECTOR, {"pk": header.max_pk, "model": model}).fetchone()
            if last is not None and bytes(last[0]) != files.vector_of(header, header.max_pk):
                header = None
        if header is None:
            deletions = conn.execute(q.LAST_DELETION).fetchone()[0]
            return files.rebuild(self._table_rows(conn, model, 0), version, deletions)
        deleted = conn.execute(q.DELETED_EMBEDDINGS, {"after": header.deletions}).fetchall()
        if deleted:
            dead = np.array([row[1] for row in deleted], dtype=np.int64)
            header = files.mark_dead(header, dead).model_copy(update={"deletions": deleted[-1][0]})
        appended = False
        for chunk in self._table_rows(conn, model, header.max_pk):
            header = files.append(header, chunk, version)
            appended = True
        return header if appended else files.append(header, [], version)

    @staticmethod
    def _table_rows(conn: sqlite3.Connection, model: str, after: int) -> Iterator[list[TableRow]]:
        """The model's rows past ``after``, in pk order, `MATRIX_LOAD_ROWS` at a time."""
        rows = conn.execute(q.EMBEDDING_ROWS, {"model": model, "after": after})
        while chunk := rows.fetchmany(MATRIX_LOAD_ROWS):
            yield [TableRow(*row) for row in chunk]

    def _vector_directory(self) -> Path:
        """``<database>.vectors`` beside a file; a private temporary directory for ``:memory:``."""
        if self.path != ":memory:":
            return cache_directory(self.path)
        if self._vector_scratch is None:
            self._vector_scratch = tempfile.TemporaryDirectory(prefix="palimpsest-vectors-")
        return Path(self._vector_scratch.name)

    def _release_vectors(self) -> None:
        """Unmap the files (a closed store keeps no file open); remove a ``:memory:`` store's."""
        self._vector_view = None
        if self._vector_scratch is not None:
            self._vector_scratch.cleanup()
            self._vector_scratch = None

    # -- hybrid search: candidate positions and metadata -------------------------------

    async def message_refs(self, partition: str | None, message_ids: Sequence[str]) -> list[MessageRef]:
        """One ``IN`` read over the messages table, content left out (see `MemoryStore`)."""
        return await self._refs(partition, unique_ids("message", message_ids))

    async def _refs(self, partition: str | None, wanted: list[str]) -> list[MessageRef]:
        """The refs of distinct message ids, with no cap on how many: a vector search may return any number."""
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

        return await self._read(read)
