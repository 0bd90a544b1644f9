"""SQLite's vector files: mapped by a fresh process, kept in step with the table, never wrong.

The ``embeddings`` table is the source of truth and ``<database>.vectors/`` a cache of
it (``graph_schema/sqlite/vector_file.py``). These tests hold the cache to that: a
second store object (another process's view) finds the files current and maps them
without rebuilding; appends, replaced vectors and a database replaced under the same
name all show in the next search, which reads what the files lack from the table and
never writes a file; upkeep (`maintain_vectors`) catches the files up, drops dead rows
and sorts them by cell; rows a crashed writer left past the header are cut off; and
the coarse partition used above `IVF_MIN_ROWS` returns what an exact scan
returns for narrow searches and the true nearest vectors for broad ones. SQLite only:
Neo4j keeps its vectors in its own index.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.errors import StoreUnavailable
from palimpsest.graph_schema.models import NewFact, NewMessage
from palimpsest.graph_schema.sqlite import vector_file
from palimpsest.graph_schema.sqlite.vector_file import CacheHeader, VectorFiles, cache_directory
from palimpsest.graph_schema.store import MemoryStore

P = "ide-a"
MODEL = "test:axes"
DIMS = 4
T0 = datetime(2025, 1, 1, tzinfo=UTC)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


async def opened(path: Path | str, dimensions: int = DIMS) -> MemoryStore:
    store = open_store(f"sqlite:///{path}", Neo4jCredentials())
    await store.initialize()
    await store.ensure_vector_index(dimensions, MODEL)
    return store


@pytest.fixture
async def store(db_path: Path) -> AsyncIterator[MemoryStore]:
    first = await opened(db_path)
    try:
        yield first
    finally:
        await first.close()


async def embed(
    store: MemoryStore, vectors: Sequence[Sequence[float]], *, thread_id: str = "t1", start: int = 0
) -> list[str]:
    """One message per vector (a minute apart from ``T0 + start``), embedded; their ids."""
    messages = [
        NewMessage(role="user", content=f"message {start + i}", message_id=f"{thread_id}-{start + i}",
                   created_at=T0 + timedelta(minutes=start + i))
        for i in range(len(vectors))
    ]  # fmt: skip
    ids = (await store.append_messages(P, thread_id, messages)).message_ids
    await store.set_embeddings(list(zip(ids, vectors, strict=True)), MODEL)
    return ids


async def nearest_ids(store: MemoryStore, vector: Sequence[float], **filters: object) -> list[str]:
    return [hit.id for hit in await store.vector_search(vector, partition=P, limit=50, **filters)]  # type: ignore[arg-type]


def header(db_path: Path, dimensions: int = DIMS) -> CacheHeader:
    found = VectorFiles(cache_directory(str(db_path)), MODEL, dimensions).header()
    assert found is not None
    return found


async def test_a_second_process_maps_the_files_the_first_wrote(store: MemoryStore, db_path: Path) -> None:
    ids = await embed(store, [[1, 0, 0, 0], [0, 1, 0, 0], [0.9, 0.1, 0, 0]])
    assert await nearest_ids(store, [1, 0, 0, 0]) == [ids[0], ids[2], ids[1]]
    written = header(db_path)
    assert (written.rows, written.alive, written.generation) == (3, 3, 0)

    second = await opened(db_path)
    try:
        assert await nearest_ids(second, [0, 1, 0, 0]) == [ids[1], ids[2], ids[0]]
    finally:
        await second.close()
    # Current files are mapped as they are: not rebuilt, not appended to.
    assert header(db_path) == written


async def test_appends_by_another_process_show_in_the_next_search(store: MemoryStore, db_path: Path) -> None:
    first = await embed(store, [[1, 0, 0, 0]])
    assert await nearest_ids(store, [0, 0, 1, 0]) == first
    second = await opened(db_path)
    try:
        added = await embed(second, [[0, 0, 1, 0]], thread_id="t2")
    finally:
        await second.close()
    assert await nearest_ids(store, [0, 0, 1, 0]) == [added[0], first[0]]
    assert (header(db_path).rows, header(db_path).generation) == (2, 0)


async def test_a_replaced_vector_is_marked_dead_not_searched(store: MemoryStore, db_path: Path) -> None:
    ids = await embed(store, [[1, 0, 0, 0], [0, 1, 0, 0]])
    assert await nearest_ids(store, [1, 0, 0, 0]) == [ids[0], ids[1]]
    # A replaced vector gets a new pk; the old row stays in the file, marked dead.
    await store.set_embeddings([(ids[0], [0, 0, 0, 1])], MODEL)
    hits = await store.vector_search([0, 0, 0, 1], partition=P, limit=50)
    assert [(hit.id, round(hit.score, 3)) for hit in hits] == [(ids[0], 1.0), (ids[1], 0.0)]
    written = header(db_path)
    assert (written.rows, written.alive, written.generation) == (3, 2, 0)


async def test_a_cleared_fact_is_marked_dead_from_the_deletion_log(store: MemoryStore, db_path: Path) -> None:
    ids = await embed(store, [[1, 0, 0, 0]])
    (fact,) = await store.add_facts(
        [NewFact(partition=P, text="the API uses JWT", kind="uses", subject="api", source_message_ids=ids)]
    )
    await store.set_embeddings([(fact.id, [0.9, 0.1, 0, 0])], MODEL)
    assert await nearest_ids(store, [1, 0, 0, 0], kinds=["message", "fact"]) == [ids[0], fact.id]
    before = header(db_path)
    # The fact's trigger deletes its vector; the log's trigger records the pk. A search
    # leaves the row out from the log, and writes nothing.
    assert await store.clear_facts(P) == 1
    assert await nearest_ids(store, [1, 0, 0, 0], kinds=["message", "fact"]) == [ids[0]]
    assert header(db_path) == before
    # Upkeep marks it dead, then drops it: half the rows were dead.
    assert await store.maintain_vectors() == 1
    after = header(db_path)
    assert (after.rows, after.alive, after.generation) == (1, 1, before.generation + 1)
    assert after.deletions == before.deletions + 1
    assert await nearest_ids(store, [1, 0, 0, 0], kinds=["message", "fact"]) == [ids[0]]


def file_bytes(db_path: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in cache_directory(str(db_path)).iterdir() if path.is_file()}


async def test_a_search_reads_what_the_files_lack_and_never_writes_them(store: MemoryStore, db_path: Path) -> None:
    ids = await embed(store, [[1, 0, 0, 0], [0, 1, 0, 0]])
    written = header(db_path)
    files = VectorFiles(cache_directory(str(db_path)), MODEL, DIMS)
    # Another writer holds the files: this one's rows reach the table only (as after a
    # crash between the table and the files).
    with files.locked() as held:
        assert held
        added = await embed(store, [[0, 0, 1, 0]], thread_id="t2")
        await store.set_embeddings([(ids[0], [0, 0, 0, 1])], MODEL)
    assert header(db_path) == written
    before = file_bytes(db_path)
    hits = await store.vector_search([0, 0, 0.6, 0.8], partition=P, limit=50)
    assert [(hit.id, round(hit.score, 3)) for hit in hits] == [(ids[0], 0.8), (added[0], 0.6), (ids[1], 0.0)]
    # The files, behind the table, are still searched: only the two rows they lack were read.
    view = store._vector_view  # type: ignore[attr-defined]
    assert view.files is not None and view.files.excluded.tolist() == [0]
    assert view.tail.header.rows == 2
    second = await opened(db_path)
    try:
        assert [hit.id for hit in await second.vector_search([0, 0, 1, 0], partition=P, limit=1)] == added
    finally:
        await second.close()
    assert file_bytes(db_path) == before
    # Upkeep folds both in: two rows appended, the replaced one dropped (a third dead).
    assert await store.maintain_vectors() == 2 + 3
    after = header(db_path)
    assert (after.rows, after.alive, after.max_pk) == (3, 3, written.max_pk + 2)
    assert [hit.id for hit in await store.vector_search([0, 0, 0.6, 0.8], partition=P, limit=50)] == [
        ids[0], added[0], ids[1]
    ]  # fmt: skip


async def test_a_database_replaced_under_the_same_name_is_not_searched_through_old_files(db_path: Path) -> None:
    old = await opened(db_path)
    await embed(old, [[1, 0, 0, 0], [0, 1, 0, 0]])
    await nearest_ids(old, [1, 0, 0, 0])
    await old.close()
    for path in db_path.parent.glob("memory.db*"):
        if path.is_file():
            path.unlink()
    # Same ids, same count, same version: only the numbers differ.
    new = await opened(db_path)
    try:
        ids = await embed(new, [[0, 0, 1, 0], [0, 0, 0, 1]])
        hits = await new.vector_search([0, 0, 0, 1], partition=P, limit=50)
        assert [(hit.id, round(hit.score, 3)) for hit in hits] == [(ids[1], 1.0), (ids[0], 0.0)]
    finally:
        await new.close()
    assert header(db_path).generation == 1


async def test_rows_a_crashed_writer_left_uncounted_are_cut_off(store: MemoryStore, db_path: Path) -> None:
    ids = await embed(store, [[1, 0, 0, 0]])
    await nearest_ids(store, [1, 0, 0, 0])
    written = header(db_path)
    stem = cache_directory(str(db_path)) / f"{vector_file.model_key(MODEL)}-{written.generation}"
    # A writer died after appending half a row and before renaming a new header.
    with open(stem.with_name(stem.name + ".f32"), "ab") as torn:
        torn.write(b"\x7f" * 10)
    with open(stem.with_name(stem.name + ".rows"), "ab") as torn:
        torn.write(b"\x01" * 17)
    added = await embed(store, [[0, 1, 0, 0]], thread_id="t2")
    hits = await store.vector_search([0, 1, 0, 0], partition=P, limit=50)
    assert [(hit.id, round(hit.score, 3)) for hit in hits] == [(added[0], 1.0), (ids[0], 0.0)]
    files = stem.parent
    assert (files / f"{stem.name}.f32").stat().st_size == 2 * DIMS * 4
    assert (files / f"{stem.name}.rows").stat().st_size == 2 * vector_file.row_dtype().itemsize


async def test_a_memory_store_keeps_its_files_in_a_directory_removed_on_close() -> None:
    store = await opened(":memory:")
    ids = await embed(store, [[1, 0, 0, 0], [0, 1, 0, 0]])
    assert await nearest_ids(store, [0, 1, 0, 0]) == [ids[1], ids[0]]
    scratch = Path(store._vector_scratch.name)  # type: ignore[attr-defined]
    assert any(scratch.iterdir())
    await store.close()
    assert not scratch.exists()


async def test_cells_keep_narrow_searches_exact_and_find_the_nearest_in_broad_ones(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(vector_file, "IVF_MIN_ROWS", 390)
    monkeypatch.setattr(vector_file, "CELLS", 8)
    monkeypatch.setattr(vector_file, "TRAIN_PER_CELL", 16)
    monkeypatch.setattr(vector_file, "PROBES", 2)
    monkeypatch.setattr(vector_file, "EXACT_ROWS", 40)
    monkeypatch.setattr(vector_file, "TAIL_ROWS", 10)
    dims = 16
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(8, dims))
    vectors = centres[rng.integers(0, 8, 460)] + rng.normal(0, 0.1, (460, dims))
    store = await opened(db_path, dims)
    try:
        ids = [
            *await embed(store, vectors[:200].tolist(), thread_id="t1"),
            *await embed(store, vectors[200:380].tolist(), thread_id="t2", start=200),
        ]
        await nearest_ids(store, vectors[0].tolist())
        assert await store.maintain_vectors() == 0
        assert header(db_path, dims).cells == 0
        # Past IVF_MIN_ROWS, upkeep (not a write, not a search) files every row into
        # cells, written in cell order.
        ids += await embed(store, vectors[380:400].tolist(), thread_id="t2", start=380)
        assert header(db_path, dims).cells == 0
        assert await store.maintain_vectors() == 400
        for index in (0, 150, 250, 399):
            assert (await nearest_ids(store, vectors[index].tolist()))[0] == ids[index]
        assert (header(db_path, dims).cells, header(db_path, dims).sorted_rows) == (8, 400)
        # Later rows join the unsorted tail, and are found there...
        ids += await embed(store, vectors[400:420].tolist(), thread_id="t3", start=400)
        assert (await nearest_ids(store, vectors[410].tolist()))[0] == ids[410]
        assert await store.maintain_vectors() == 0
        assert (header(db_path, dims).rows, header(db_path, dims).sorted_rows) == (420, 400)
        # ...until the tail outgrows an eighth of the sorted rows: searches still only
        # read; upkeep sorts them again.
        ids += await embed(store, vectors[420:].tolist(), thread_id="t3", start=420)
        assert (await nearest_ids(store, vectors[455].tolist()))[0] == ids[455]
        assert (header(db_path, dims).rows, header(db_path, dims).sorted_rows) == (460, 400)
        assert await store.maintain_vectors() == 460
        assert (header(db_path, dims).rows, header(db_path, dims).sorted_rows) == (460, 460)

        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        # A broad search scores two cells of eight, and still finds the exact top ten.
        for index in (7, 222):
            exact = np.argsort(-(unit @ unit[index]), kind="stable")[:10]
            assert (await nearest_ids(store, vectors[index].tolist()))[:10] == [ids[i] for i in exact]
        # Deleted rows stay in the sorted files, marked dead, never returned.
        await store.set_embeddings([(ids[7], (-vectors[7]).tolist())], MODEL)
        assert ids[7] not in (await nearest_ids(store, vectors[7].tolist()))[:40]
        unit[7] = -unit[7]
        # A narrow search (one thread's last 30 minutes: under EXACT_ROWS) is exact.
        since = T0 + timedelta(minutes=170)
        found = await nearest_ids(store, vectors[5].tolist(), thread_id="t1", since=since)
        in_range = np.arange(170, 200)
        exact = in_range[np.argsort(-(unit[in_range] @ unit[5]), kind="stable")]
        assert found == [ids[index] for index in exact]
    finally:
        await store.close()


async def test_vectors_whose_files_cannot_be_written_are_stored_and_found(db_path: Path) -> None:
    cache_directory(str(db_path)).write_text("not a directory")  # the files' place is taken
    store = await opened(db_path)
    try:
        ids = await embed(store, [[1, 0, 0, 0], [0, 1, 0, 0]])
        assert await nearest_ids(store, [0, 1, 0, 0]) == [ids[1], ids[0]]
        with pytest.raises(StoreUnavailable, match="vector files"):
            await store.maintain_vectors()
    finally:
        await store.close()
