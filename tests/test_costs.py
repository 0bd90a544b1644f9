"""Costs that stay flat as memory grows: covered floors, and the size that is the whole size.

- Covered floors (``graph_schema/floors.py``): each store keeps, per thread, the seq
  below which every message is under a level-1 summary, raised as level-1 summaries
  are written, in order or not, by compaction or a copy, so the frontier and the
  per-turn reads scan only the uncovered tail. Checked on both stores: the floor's
  value after each write, and a frontier that is still the whole frontier.
- The size (``graph_schema/sqlite/footprint.py``): ``stats`` counts the vector files
  beside a SQLite database, shows archives apart and what upkeep can reclaim, and
  ``PALIMPSEST_MAX_STORE_MB`` is measured against what stays after upkeep.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from test_dag_contract import P, T, persist, seed

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.floors import raised_floor
from palimpsest.graph_schema.models import NewMessage
from palimpsest.graph_schema.sqlite.footprint import measure
from palimpsest.graph_schema.sqlite.vector_file import ROW_BYTES, cache_directory, row_dtype
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.portability.copying import copy_thread
from palimpsest.server.agents.status import sqlite_size


async def floor_of(store: MemoryStore, thread_id: str = T) -> int:
    """The covered floor the store keeps for a thread (0 where none is kept yet)."""
    if store.kind == "sqlite":
        with sqlite3.connect(store.path) as conn:  # type: ignore[attr-defined]
            row = conn.execute(
                "SELECT floor FROM covered_floors WHERE partition = ? AND thread_id = ?", (P, thread_id)
            ).fetchone()
        return 0 if row is None else int(row[0])
    rows = await store._query(  # type: ignore[attr-defined]
        "MATCH (t:Thread {partition: $partition, id: $thread_id}) RETURN coalesce(t.covered_floor, 0) AS floor",
        partition=P,
        thread_id=thread_id,
    )
    return int(rows[0]["floor"])


def test_a_floor_rises_over_runs_that_start_at_or_under_it() -> None:
    assert raised_floor(0, []) == 0
    assert raised_floor(0, [(0, 3)]) == 4
    assert raised_floor(0, [(4, 7), (0, 3)]) == 8  # any order
    assert raised_floor(0, [(1, 3)]) == 0  # seq 0 uncovered: the floor stays
    assert raised_floor(4, [(4, 5), (8, 9)]) == 6  # stops at the gap 6-7
    assert raised_floor(10, [(0, 3), (4, 9), (10, 10)]) == 11  # runs wholly below are passed over


async def test_the_floor_follows_level_one_runs_written_out_of_order(store: MemoryStore) -> None:
    messages = await seed(store, 12)
    assert await floor_of(store) == 0
    await persist(store, messages[4:8], 1)
    assert await floor_of(store) == 0  # 0-3 still uncovered
    await persist(store, messages[0:4], 1)
    assert await floor_of(store) == 8  # both runs now, contiguous from 0
    await persist(store, messages[8:10], 1)
    assert await floor_of(store) == 10
    frontier = await store.frontier(P, T)
    assert [(item.kind, item.first_seq, item.last_seq) for item in frontier] == [
        ("summary", 0, 3), ("summary", 4, 7), ("summary", 8, 9), ("message", 10, 10), ("message", 11, 11)
    ]  # fmt: skip
    assert [message.seq for message in await store.uncovered_messages(P, T)] == [10, 11]
    view = await store.context_frontier(P, T, budget_tokens=10**6, limit=50)
    assert [message.seq for message in view.newest] == [10, 11]
    # Messages appended later start uncovered above the floor.
    await store.append_messages(P, T, [NewMessage(role="user", content="one more")])
    assert [item.first_seq for item in await store.frontier(P, T)][-3:] == [10, 11, 12]
    assert await floor_of(store) == 10


async def test_a_copied_thread_gets_its_floor(store: MemoryStore, tmp_path: Path) -> None:
    source = open_store(f"sqlite:///{tmp_path / 'source.db'}")
    await source.initialize()
    try:
        messages = await seed(source, 6)
        await persist(source, messages[0:3], 1)
        await persist(source, messages[3:5], 1)
        await copy_thread(store, await source.snapshot(P, T))
    finally:
        await source.close()
    assert await floor_of(store) == 5
    assert [item.kind for item in await store.frontier(P, T)] == ["summary", "summary", "message"]


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
