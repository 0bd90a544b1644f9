"""``migrate``: a memory copied between stores, proven equal by counts and thread digests.

SQLite to the store under test (SQLite or Neo4j) and back to a fresh SQLite must give
every thread the same digest; a migration interrupted after its first batch, run
again, must finish without a duplicate; a target that differs (an extra thread, a
message changed behind the store's back) must be named, and the command exit 1.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.doctor import check_store
from palimpsest.graph_schema.models import NewMessage, Role
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.portability import copying
from palimpsest.scheduler.portability.format import thread_digest
from palimpsest.scheduler.portability.migrate import migrate_memory
from palimpsest.server.cli.main import app
from tests.support.memories import build_memory

CLEAN_ENV: dict[str, str | None] = {"PALIMPSEST_STORE": None, "PALIMPSEST_PARTITION": None}


async def opened(uri: str) -> MemoryStore:
    store = open_store(uri)
    await store.initialize()
    return store


@pytest.fixture
async def source(tmp_path: Path) -> AsyncIterator[MemoryStore]:
    store = await opened(f"sqlite:///{tmp_path / 'source.db'}")
    try:
        await build_memory(store)
        await store.set_fact_layer("p", "t1", True)
        yield store
    finally:
        await store.close()


async def digests(store: MemoryStore) -> dict[str, str]:
    found = {}
    for thread in await store.list_threads(None):
        snapshot = await store.snapshot(None, thread.id)
        found[thread.id] = thread_digest(snapshot.messages, snapshot.summaries)
    return found


async def test_sqlite_to_the_store_and_back_keeps_every_digest(
    source: MemoryStore, store: MemoryStore, tmp_path: Path
) -> None:
    there = await migrate_memory(source, store)
    assert there.mismatches == []
    assert there.written == {"messages": 11, "summaries": 3, "facts": 2, "vectors": 2}
    assert await check_store(store) == []
    assert await store.fact_layer("p", "t1") == await source.fact_layer("p", "t1")
    back = await opened(f"sqlite:///{tmp_path / 'back.db'}")
    try:
        assert (await migrate_memory(store, back)).mismatches == []
        assert await digests(back) == await digests(source)
        assert await back.list_facts(None, current_only=False) == await source.list_facts(None, current_only=False)
        assert await back.snapshot(None, "t1") == await source.snapshot(None, "t1")
    finally:
        await back.close()


class Interrupted(Exception):
    """Stands for the process being killed between two batches."""


async def test_an_interrupted_migration_run_again_finishes_without_duplicates(
    source: MemoryStore, store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(copying, "BATCH", 3)
    copied: list[int] = []

    def kill_after_two_batches(count: int) -> None:
        copied.append(count)
        if len(copied) == 2:
            raise Interrupted

    with pytest.raises(Interrupted):
        await migrate_memory(source, store, advance=kill_after_two_batches)
    assert (await store.get_thread(None, "t1")).message_count == 6
    assert (await store.summary_dag("p", "t1")).nodes == []
    finished = await migrate_memory(source, store)
    assert finished.mismatches == []
    assert finished.written["messages"] == 11 - 6
    assert (await store.stats(None)).messages == 11
    assert await digests(store) == await digests(source)
    assert await check_store(store) == []


async def test_a_changed_message_is_named_by_its_thread(source: MemoryStore, tmp_path: Path) -> None:
    target_path = tmp_path / "target.db"
    target = await opened(f"sqlite:///{target_path}")
    try:
        assert (await migrate_memory(source, target)).mismatches == []
        with sqlite3.connect(target_path) as conn:
            conn.execute("UPDATE messages SET content = 'changed' WHERE seq = 3 AND thread_id = 't1'")
        again = await migrate_memory(source, target)
        assert again.mismatches == ["thread 't1' of partition 'p' has another digest in the target"]
    finally:
        await target.close()


async def _with_extra_thread(uri: str) -> None:
    store = await opened(uri)
    try:
        await store.append_messages("p", "extra", [NewMessage(role=Role.user, content="only in the target")])
    finally:
        await store.close()


def test_cli_migrate_exits_1_naming_each_mismatch(source: MemoryStore, tmp_path: Path) -> None:
    target_uri = f"sqlite:///{tmp_path / 'target.db'}"
    asyncio.run(_with_extra_thread(target_uri))
    args = ["migrate", "--store", f"sqlite:///{tmp_path / 'source.db'}", "--to", target_uri]
    result = CliRunner().invoke(app, args, env=CLEAN_ENV)
    assert result.exit_code == 1, result.output
    assert "mismatch: threads: the source holds 2, the target 3" in result.stderr
    assert "mismatch: messages: the source holds 11, the target 12" in result.stderr
    same = CliRunner().invoke(app, ["migrate", "--store", target_uri, "--to", target_uri], env=CLEAN_ENV)
    assert same.exit_code == 1 and "names the store being migrated from" in same.stderr
