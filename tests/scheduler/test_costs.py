"""Costs that stay flat as memory grows: covered floors, and the size that is the whole size.

- Covered floors (docs/architecture.md, "Covered floors"): each store keeps, per
  thread and level, the seq below which every node of the level has a parent, kept as
  summaries are written, in order or not, by compaction or a copy, so the frontier and
  the per-turn reads scan only the uncovered tail and the top summaries. Checked on
  both stores: the floors after each write, and a frontier that is still the whole
  frontier, for a thread whose floors were never kept too.
- The size (``graph_schema/sqlite/footprint.py``): ``stats`` counts the vector files
  beside a SQLite database, shows archives apart and what upkeep can reclaim, and
  ``PALIMPSEST_MAX_STORE_MB`` is measured against what stays after upkeep.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.models import FrontierItem, NewMessage
from palimpsest.graph_schema.sqlite.footprint import measure
from palimpsest.graph_schema.sqlite.vector_file import ROW_BYTES, cache_directory, row_dtype
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.portability.copying import copy_thread
from palimpsest.server.agents.status import sqlite_size
from tests.support.dag_seeds import P, T, persist, seed


async def floors_of(store: MemoryStore, thread_id: str = T) -> list[int]:
    """The covered floors the store keeps for a thread, by level ([] where none is kept)."""
    if store.kind == "sqlite":
        with sqlite3.connect(store.path) as conn:  # type: ignore[attr-defined]
            rows = conn.execute(
                "SELECT level, floor FROM covered_floors WHERE partition = ? AND thread_id = ? ORDER BY level",
                (P, thread_id),
            ).fetchall()
        kept = dict(rows)
        return [kept.get(level, 0) for level in range(max(kept, default=-1) + 1)]
    rows = await store._query(  # type: ignore[attr-defined]
        "MATCH (t:Thread {partition: $partition, id: $thread_id}) RETURN coalesce(t.covered_floors, []) AS floors",
        partition=P,
        thread_id=thread_id,
    )
    return list(rows[0]["floors"])


async def forget_floors(store: MemoryStore) -> None:
    """Make the thread look written before floors were kept."""
    if store.kind == "sqlite":
        with sqlite3.connect(store.path) as conn:  # type: ignore[attr-defined]
            conn.execute("DELETE FROM covered_floors")
    else:
        await store._query("MATCH (t:Thread) REMOVE t.covered_floors", write=True)  # type: ignore[attr-defined]


def shape(frontier: list[FrontierItem]) -> list[tuple[str, int, int, int]]:
    return [(item.kind, item.level, item.first_seq, item.last_seq) for item in frontier]


async def test_floors_follow_summaries_written_in_any_order(store: MemoryStore) -> None:
    messages = await seed(store, 14)
    middle = await persist(store, messages[4:8], 1)
    assert (await floors_of(store))[:1] in ([], [0])  # 0-3 still uncovered
    first = await persist(store, messages[0:4], 1)
    assert (await floors_of(store))[0] == 8  # both runs, contiguous from 0
    await persist(store, messages[8:10], 1)
    assert (await floors_of(store))[0] == 10
    # One level up: an L2 over the first two L1s leaves the third without a parent.
    await persist(store, [first, middle], 2)
    assert (await floors_of(store))[:2] == [10, 8]
    frontier = await store.frontier(P, T)
    expected = [("summary", 2, 0, 7), ("summary", 1, 8, 9), ("message", 0, 10, 10), ("message", 0, 11, 11),
                ("message", 0, 12, 12), ("message", 0, 13, 13)]  # fmt: skip
    assert shape(frontier) == expected
    assert [message.seq for message in await store.uncovered_messages(P, T)] == [10, 11, 12, 13]
    assert [(summary.first_seq, summary.last_seq) for summary in await store.uncovered_summaries(P, T, 1)] == [(8, 9)]
    view = await store.context_frontier(P, T, budget_tokens=10**6, limit=50)
    assert [message.seq for message in view.newest] == [10, 11, 12, 13]
    assert [summary.level for summary in view.summaries] == [2, 1]
    # Messages appended later start uncovered, above the floor.
    await store.append_messages(P, T, [NewMessage(role="user", content="one more")])
    assert [item.first_seq for item in await store.frontier(P, T)][-2:] == [13, 14]
    # A thread whose floors were never kept (an older store) reads the same frontier.
    await forget_floors(store)
    assert shape(await store.frontier(P, T)) == [*expected, ("message", 0, 14, 14)]
    # Its next summary keeps floors again, from the bottom, for every level it has.
    await persist(store, messages[10:12], 1)
    assert (await floors_of(store))[0] == 12
    assert shape(await store.frontier(P, T)) == [
        ("summary", 2, 0, 7), ("summary", 1, 8, 9), ("summary", 1, 10, 11), ("message", 0, 12, 12),
        ("message", 0, 13, 13), ("message", 0, 14, 14),
    ]  # fmt: skip


async def test_a_copied_thread_gets_its_floors(store: MemoryStore, tmp_path: Path) -> None:
    source = open_store(f"sqlite:///{tmp_path / 'source.db'}")
    await source.initialize()
    try:
        messages = await seed(source, 6)
        l1 = [await persist(source, messages[0:3], 1), await persist(source, messages[3:5], 1)]
        await persist(source, l1, 2)
        await copy_thread(store, await source.snapshot(P, T))
    finally:
        await source.close()
    assert (await floors_of(store))[:2] == [5, 5]
    assert shape(await store.frontier(P, T)) == [("summary", 2, 0, 4), ("message", 0, 5, 5)]


async def test_stats_count_the_vector_files_and_show_archives_apart(tmp_path: Path) -> None:
    path = tmp_path / "memory.db"
    store = open_store(f"sqlite:///{path}")
    await store.initialize()
    try:
        await store.ensure_vector_index(64, "test:size")
        ids = (
            await store.append_messages(P, T, [NewMessage(role="user", content=f"message {i}") for i in range(300)])
        ).message_ids
        vectors = [[1.0 + (i % 7)] + [float((i * j) % 5) for j in range(63)] for i in range(300)]
        assert await store.set_embeddings(list(zip(ids, vectors, strict=True)), "test:size") == 300
        archive = path.with_name(path.name + ".archive")
        archive.mkdir()
        (archive / "old-run.jsonl.gz").write_bytes(b"x" * 12_345)

        stats = await store.stats(None)
        files = cache_directory(str(path))
        vector_bytes = sum(item.stat().st_size for item in files.iterdir())
        assert vector_bytes >= 300 * (64 * 4 + ROW_BYTES)
        database = sum(p.stat().st_size for p in tmp_path.iterdir() if p.name.startswith("memory.db") and p.is_file())
        assert stats.bytes_on_disk == database + vector_bytes
        assert stats.archive_bytes == 12_345
        assert sqlite_size(path) == stats.bytes_on_disk

        # A replaced vector leaves a dead row: reclaimable until upkeep drops it.
        await store.set_embeddings([(ids[0], vectors[1])], "test:size")
        dead = (await store.stats(None)).bytes_reclaimable or 0
        assert dead >= 64 * 4 + ROW_BYTES
        assert await store.maintain_vectors() == 0  # one dead row in 301: not yet worth a rewrite
        await store.set_embeddings(list(zip(ids[:40], vectors[40:80], strict=True)), "test:size")
        before = sum(item.stat().st_size for item in files.iterdir())
        assert await store.maintain_vectors() == 300  # 41 of 341 dead: rewritten without them
        assert measure(path).reclaimable_bytes == 0  # no dead vector row left, no free page counted
        assert before - sum(item.stat().st_size for item in files.iterdir()) == 41 * (64 * 4 + ROW_BYTES)
    finally:
        await store.close()
    assert row_dtype().itemsize == ROW_BYTES
