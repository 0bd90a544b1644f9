"""`doctor` on both stores: silent on a sound store, precise on a damaged one.

The damage is done behind the store's back, with raw SQL on the SQLite file and raw
Cypher on the test Neo4j, the way a bad migration, a manual fix or a bug in another
tool would do it. Test scaffolding only: product code never writes to a store this way.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Protocol

import neo4j
import pytest

from palimpsest.graph_schema.doctor import Breach, check_store
from palimpsest.graph_schema.errors import NotFound
from palimpsest.graph_schema.identity import summary_id
from palimpsest.graph_schema.models import Summary, ThreadSnapshot
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.compaction import compact_thread
from palimpsest.scheduler.config import CompactionSettings
from palimpsest.scheduler.extractive import ExtractiveSummarizer
from tests.support.transcripts import transcript

PARTITION = "codex"
THREAD = "t-doctor"
CONFIG = CompactionSettings(threshold=10, keep_recent=4, escalation_fanin=3)


class RawAccess(Protocol):
    """What a test may do to a store's data without going through the store."""

    async def set_message_content(self, message_id: str, content: str) -> None: ...
    async def delete_edge(self, parent_id: str, child_id: str) -> None: ...
    async def duplicate_summary(self, original_id: str, new_id: str) -> None: ...
    async def set_summary_level(self, summary_id: str, level: int) -> None: ...
    async def set_message_partition(self, message_id: str, partition: str) -> None: ...
    async def set_summary_tokens(self, summary_id: str, tokens: int) -> None: ...
    async def delete_message(self, message_id: str) -> None: ...
    async def add_edge(self, parent_id: str, child_id: str, position: int) -> None: ...


class RawSqlite:
    """Raw SQL on the store's database file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def _run(self, *statements: tuple[str, tuple[object, ...]]) -> None:
        connection = sqlite3.connect(self.path)
        try:
            with connection:
                for sql, parameters in statements:
                    connection.execute(sql, parameters)
        finally:
            connection.close()

    async def set_message_content(self, message_id: str, content: str) -> None:
        self._run(("UPDATE messages SET content = ? WHERE id = ?", (content, message_id)))

    async def delete_edge(self, parent_id: str, child_id: str) -> None:
        self._run(("DELETE FROM summarizes WHERE parent_id = ? AND child_id = ?", (parent_id, child_id)))

    async def duplicate_summary(self, original_id: str, new_id: str) -> None:
        columns = (
            "thread_id, partition, level, text, tokens, source_tokens, first_seq, last_seq, "
            "earliest_at, latest_at, message_count, digest, summarizer, created_at"
        )
        # The schema's UNIQUE(child_id) would refuse a second parent: drop it first, as an
        # older or hand-edited schema might have.
        self._run(
            ("CREATE TABLE loose_edges (parent_id TEXT, child_id TEXT, position INTEGER)", ()),
            ("INSERT INTO loose_edges SELECT parent_id, child_id, position FROM summarizes", ()),
            ("DROP TABLE summarizes", ()),
            ("ALTER TABLE loose_edges RENAME TO summarizes", ()),
            (
                f"INSERT INTO summaries (id, {columns}) SELECT ?, {columns} FROM summaries WHERE id = ?",
                (new_id, original_id),
            ),
            (
                "INSERT INTO summarizes SELECT ?, child_id, position FROM summarizes WHERE parent_id = ?",
                (new_id, original_id),
            ),
        )

    async def set_summary_level(self, summary_id: str, level: int) -> None:
        self._run(("UPDATE summaries SET level = ? WHERE id = ?", (level, summary_id)))

    async def set_message_partition(self, message_id: str, partition: str) -> None:
        self._run(("UPDATE messages SET partition = ? WHERE id = ?", (partition, message_id)))

    async def set_summary_tokens(self, summary_id: str, tokens: int) -> None:
        self._run(("UPDATE summaries SET tokens = ? WHERE id = ?", (tokens, summary_id)))

    async def delete_message(self, message_id: str) -> None:
        self._run(("DELETE FROM messages WHERE id = ?", (message_id,)))

    async def add_edge(self, parent_id: str, child_id: str, position: int) -> None:
        self._run(("INSERT INTO summarizes VALUES (?, ?, ?)", (parent_id, child_id, position)))


class RawNeo4j:
    """Raw Cypher on the test database."""

    def __init__(self, uri: str) -> None:
        self.uri = uri

    async def _run(self, query: str, **parameters: object) -> None:
        driver = neo4j.AsyncGraphDatabase.driver(self.uri, auth=None)
        try:
            await driver.execute_query(query, parameters, database_="neo4j")
        finally:
            await driver.close()

    async def set_message_content(self, message_id: str, content: str) -> None:
        await self._run("MATCH (m:Message {id: $id}) SET m.content = $content", id=message_id, content=content)

    async def delete_edge(self, parent_id: str, child_id: str) -> None:
        await self._run(
            "MATCH (:Summary {id: $parent})-[r:SUMMARIZES]->({id: $child}) DELETE r", parent=parent_id, child=child_id
        )

    async def duplicate_summary(self, original_id: str, new_id: str) -> None:
        await self._run(
            "MATCH (o:Summary {id: $original}) WITH o, properties(o) AS copied "
            "CREATE (s:Summary) SET s = copied {.*, id: $new} "
            "WITH o, s MATCH (o)-[r:SUMMARIZES]->(child) "
            "CREATE (s)-[:SUMMARIZES {position: r.position}]->(child)",
            original=original_id,
            new=new_id,
        )

    async def set_summary_level(self, summary_id: str, level: int) -> None:
        await self._run("MATCH (s:Summary {id: $id}) SET s.level = $level", id=summary_id, level=level)

    async def set_message_partition(self, message_id: str, partition: str) -> None:
        await self._run("MATCH (m:Message {id: $id}) SET m.partition = $partition", id=message_id, partition=partition)

    async def set_summary_tokens(self, summary_id: str, tokens: int) -> None:
        await self._run("MATCH (s:Summary {id: $id}) SET s.tokens = $tokens", id=summary_id, tokens=tokens)

    async def delete_message(self, message_id: str) -> None:
        await self._run("MATCH (m:Message {id: $id}) DETACH DELETE m", id=message_id)

    async def add_edge(self, parent_id: str, child_id: str, position: int) -> None:
        await self._run(
            "MATCH (p:Summary {id: $parent}), (c:Summary {id: $child}) "
            "CREATE (p)-[:SUMMARIZES {position: $position}]->(c)",
            parent=parent_id,
            child=child_id,
            position=position,
        )


@pytest.fixture
async def compacted(store: MemoryStore) -> AsyncIterator[ThreadSnapshot]:
    """A thread compacted three levels high, plus a second, untouched thread."""
    await store.append_messages(PARTITION, THREAD, transcript(160))
    await store.append_messages("windsurf", "t-bystander", transcript(50, seed=3))
    result = await compact_thread(store, PARTITION, THREAD, CONFIG, ExtractiveSummarizer())
    assert result.status == "compacted"
    await compact_thread(store, "windsurf", "t-bystander", CONFIG, ExtractiveSummarizer())
    snapshot = await store.snapshot(PARTITION, THREAD)
    assert max(summary.level for summary in snapshot.summaries) >= 3
    yield snapshot


@pytest.fixture
def raw(backend: str, store_url: str) -> RawAccess:
    """Direct access to the data under the store of the backend under test."""
    if backend == "sqlite":
        return RawSqlite(store_url.removeprefix("sqlite:///"))
    return RawNeo4j(store_url)


def first_of_level(snapshot: ThreadSnapshot, level: int) -> Summary:
    return min((s for s in snapshot.summaries if s.level == level), key=lambda s: s.first_seq)


def found(breaches: list[Breach], invariant: int, node_id: str) -> bool:
    return any(breach.invariant == invariant and breach.node_id == node_id for breach in breaches)


async def test_a_sound_store_has_no_breach(store: MemoryStore, compacted: ThreadSnapshot) -> None:
    assert await check_store(store) == []
    assert await check_store(store, partition=PARTITION) == []
    assert await check_store(store, thread_id=THREAD) == []


async def test_an_empty_store_has_no_breach(store: MemoryStore) -> None:
    assert await check_store(store) == []


async def test_an_unknown_thread_is_not_found(store: MemoryStore, compacted: ThreadSnapshot) -> None:
    with pytest.raises(NotFound):
        await check_store(store, thread_id="nope")
    with pytest.raises(NotFound):
        await check_store(store, partition="windsurf", thread_id=THREAD)


async def test_an_edited_message_is_caught(store: MemoryStore, compacted: ThreadSnapshot, raw: RawAccess) -> None:
    leaf = first_of_level(compacted, 1)
    victim = leaf.child_ids[2]
    await raw.set_message_content(victim, "rm -rf / # nothing to see here")

    breaches = await check_store(store)

    assert found(breaches, 1, victim)
    assert found(breaches, 4, leaf.id), "the L1 over the edited message must fail its digest"
    top = next(s for s in compacted.summaries if s.parent_id is None and s.first_seq <= leaf.first_seq)
    assert found(breaches, 4, top.id), "the digest breach must reach the top of the chain"
    assert {breach.thread_id for breach in breaches} == {THREAD}
    assert all(breach.message and "\n" not in breach.message for breach in breaches)


async def test_a_deleted_edge_is_caught(store: MemoryStore, compacted: ThreadSnapshot, raw: RawAccess) -> None:
    leaf = first_of_level(compacted, 1)
    await raw.delete_edge(leaf.id, leaf.child_ids[3])

    breaches = await check_store(store, partition=PARTITION)

    assert found(breaches, 3, leaf.id), breaches
    assert found(breaches, 4, leaf.id)
    assert found(breaches, 2, leaf.id), "the remaining children are no longer contiguous"


async def test_an_overlapping_summary_is_caught(store: MemoryStore, compacted: ThreadSnapshot, raw: RawAccess) -> None:
    leaf = first_of_level(compacted, 1)
    twin = summary_id(PARTITION, THREAD, 1, ["forged"])
    await raw.duplicate_summary(leaf.id, twin)

    breaches = await check_store(store)

    assert found(breaches, 2, leaf.child_ids[0]), "a message under two L1 summaries"
    overlaps = [b for b in breaches if b.invariant == 2 and "overlaps" in b.message]
    assert {b.node_id for b in overlaps} & {leaf.id, twin}
    assert any(breach.invariant == 5 for breach in breaches), "the frontier now covers seqs twice"


async def test_a_changed_level_is_caught(store: MemoryStore, compacted: ThreadSnapshot, raw: RawAccess) -> None:
    middle = first_of_level(compacted, 2)
    await raw.set_summary_level(middle.id, 3)

    breaches = await check_store(store)

    assert found(breaches, 2, middle.id), breaches
    assert found(breaches, 4, middle.id)


async def test_a_message_moved_to_another_partition_is_caught(
    store: MemoryStore, compacted: ThreadSnapshot, raw: RawAccess
) -> None:
    leaf = first_of_level(compacted, 1)
    victim = leaf.child_ids[1]
    await raw.set_message_partition(victim, "windsurf")

    breaches = await check_store(store)

    # A store may show the stray message in the thread (its partition is wrong) or leave
    # it out of the thread's partition (the summary's child is gone): both are invariant 7.
    assert found(breaches, 7, victim) or found(breaches, 7, leaf.id), breaches
    assert not [b for b in breaches if b.thread_id == "t-bystander"]


async def test_a_summary_as_long_as_its_sources_is_caught(
    store: MemoryStore, compacted: ThreadSnapshot, raw: RawAccess
) -> None:
    leaf = first_of_level(compacted, 1)
    await raw.set_summary_tokens(leaf.id, leaf.source_tokens)

    breaches = await check_store(store)

    # The summary itself, and its parent whose source tokens no longer add up.
    assert sorted((b.invariant, b.node_id) for b in breaches) == sorted([(6, leaf.id), (6, leaf.parent_id)])


async def test_a_deleted_message_is_caught(store: MemoryStore, compacted: ThreadSnapshot, raw: RawAccess) -> None:
    victim = compacted.messages[-3]
    assert victim.id not in {child for summary in compacted.summaries for child in summary.child_ids}
    await raw.delete_message(victim.id)

    breaches = await check_store(store, thread_id=THREAD)

    assert any(b.invariant == 5 and str(victim.seq) in b.message for b in breaches), breaches


async def test_a_cycle_is_caught(store: MemoryStore, compacted: ThreadSnapshot, raw: RawAccess) -> None:
    top = max(compacted.summaries, key=lambda summary: (summary.level, -summary.first_seq))
    leaf = next(s for s in compacted.summaries if s.level == 1 and top.first_seq <= s.first_seq <= top.last_seq)
    await raw.add_edge(leaf.id, top.id, len(leaf.child_ids))

    breaches = await check_store(store)

    on_cycle = {b.node_id for b in breaches if b.invariant == 2 and "cycle" in b.message}
    assert {top.id, leaf.id} <= on_cycle, breaches


async def test_every_breach_is_reported_once_per_node_and_cause(
    store: MemoryStore, compacted: ThreadSnapshot, raw: RawAccess
) -> None:
    corruptions: list[Callable[[], Awaitable[None]]] = [
        lambda: raw.set_message_content(compacted.messages[0].id, "changed"),
        lambda: raw.set_summary_level(first_of_level(compacted, 2).id, 5),
    ]
    for corrupt in corruptions:
        await corrupt()

    breaches = await check_store(store)

    keys = [(b.invariant, b.node_id, b.message) for b in breaches]
    assert len(keys) == len(set(keys))
    assert {1, 2, 4} <= {b.invariant for b in breaches}
