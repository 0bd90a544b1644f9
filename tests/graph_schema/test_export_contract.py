"""The transfer verbs of `MemoryStore` (what export, import and migrate write with), on both backends.

A memory is built on a SQLite source through the ordinary verbs (appends, compaction's
``persist_summary``, facts and a supersession, vectors), then copied into the store
under test with ``restore_thread``, ``restore_summaries`` and ``restore_facts``: the
copy must read back field for field as the source does, pass ``doctor``, and a second
copy must add nothing. Bad batches are refused whole. A message copied under an id its
fields do not give is written (the verbs copy, they do not judge) and ``doctor`` names it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from palimpsest.graph_schema.backends import open_store
from palimpsest.graph_schema.doctor import check_store
from palimpsest.graph_schema.errors import Conflict, InvalidInput, NotFound
from palimpsest.graph_schema.identity import message_id
from palimpsest.graph_schema.models import Message, NewMessage, Role, Summary
from palimpsest.graph_schema.store import MemoryStore
from tests.support.memories import MODEL, build_memory


@pytest.fixture
async def source(tmp_path: Path) -> AsyncIterator[MemoryStore]:
    """A SQLite store holding one compacted thread with facts, a supersession and vectors."""
    opened = open_store(f"sqlite:///{tmp_path / 'source.db'}")
    await opened.initialize()
    try:
        await build_memory(opened)
        yield opened
    finally:
        await opened.close()


async def copy(source: MemoryStore, target: MemoryStore) -> tuple[int, int, int]:
    """Copy every thread, summary and fact of ``source`` into ``target``; what each verb wrote."""
    messages = summaries = 0
    for thread in sorted(await source.list_threads(None), key=lambda t: t.id):
        snapshot = await source.snapshot(None, thread.id)
        messages += await target.restore_thread(snapshot.thread, snapshot.messages)
        ordered = sorted(snapshot.summaries, key=lambda s: (s.level, s.first_seq))
        summaries += await target.restore_summaries(ordered)
    facts = await target.restore_facts(await source.list_facts(None, current_only=False))
    return messages, summaries, facts


async def test_a_restored_memory_reads_back_exactly_and_again_adds_nothing(
    source: MemoryStore, store: MemoryStore
) -> None:
    assert await copy(source, store) == (11, 3, 2)
    for thread_id in ("t1", "t2"):
        assert await store.snapshot(None, thread_id) == await source.snapshot(None, thread_id)
    assert await store.get_thread(None, "t1") == await source.get_thread(None, "t1")
    facts = await store.list_facts(None, current_only=False)
    assert facts == await source.list_facts(None, current_only=False)
    assert [fact.superseded_by is not None for fact in facts] == [False, True]
    counts = {"store", "bytes_on_disk", "bytes_reclaimable", "archive_bytes"}
    assert (await store.stats(None)).model_dump(exclude=counts) == (await source.stats(None)).model_dump(exclude=counts)
    assert await check_store(store) == []
    assert await copy(source, store) == (0, 0, 0)
    assert await store.snapshot(None, "t1") == await source.snapshot(None, "t1")
    # The copy is a live store: appending continues the thread and doctor still holds.
    more = await store.append_messages("p", "t1", [NewMessage(role=Role.user, content="after the copy")])
    assert (await store.get_message(None, more.message_ids[0])).seq == 10
    assert await check_store(store) == []


async def test_restore_adds_only_the_missing_tail(source: MemoryStore, store: MemoryStore) -> None:
    snapshot = await source.snapshot(None, "t1")
    assert await store.restore_thread(snapshot.thread, snapshot.messages[:6]) == 6
    assert await store.restore_thread(snapshot.thread, snapshot.messages) == 4
    assert await store.get_messages(None, "t1") == snapshot.messages


async def test_restore_refuses_a_gap_or_another_thread_and_keeps_partitions_apart(
    source: MemoryStore, store: MemoryStore
) -> None:
    snapshot = await source.snapshot(None, "t1")
    with pytest.raises(InvalidInput, match="needs seq 0 next"):
        await store.restore_thread(snapshot.thread, snapshot.messages[2:])
    with pytest.raises(NotFound):
        await store.get_thread(None, "t1")  # nothing written, not even the thread
    stray = snapshot.messages[0].model_copy(update={"thread_id": "other"})
    with pytest.raises(InvalidInput, match="belongs to thread 'other'"):
        await store.restore_thread(snapshot.thread, [stray])
    await store.append_messages("elsewhere", "t1", [NewMessage(role=Role.user, content="x")])
    # A thread is (partition, id): another partition's t1 is another thread, left as it is.
    assert await store.restore_thread(snapshot.thread, snapshot.messages) == len(snapshot.messages)
    assert (await store.get_thread("elsewhere", "t1")).message_count == 1


async def test_restore_summaries_needs_uncovered_children(source: MemoryStore, store: MemoryStore) -> None:
    snapshot = await source.snapshot(None, "t1")
    level_one = sorted((s for s in snapshot.summaries if s.level == 1), key=lambda s: s.first_seq)
    with pytest.raises(NotFound):
        await store.restore_summaries(level_one)  # no thread, no messages yet
    await store.restore_thread(snapshot.thread, snapshot.messages)
    top = next(s for s in snapshot.summaries if s.level == 2)
    with pytest.raises(NotFound):
        await store.restore_summaries([*level_one[:1], top])  # the second child is missing: all refused
    assert (await store.summary_dag("p", "t1")).nodes == []
    rival: Summary = level_one[0].model_copy(update={"id": "sum_rival"})
    assert await store.restore_summaries(level_one) == 2
    with pytest.raises(Conflict):
        await store.restore_summaries([rival])


async def test_restore_facts_needs_their_sources(source: MemoryStore, store: MemoryStore) -> None:
    facts = await source.list_facts(None, current_only=False)
    with pytest.raises(NotFound):
        await store.restore_facts(facts)
    assert await store.list_facts(None, current_only=False) == []


async def test_read_embeddings_returns_stored_vectors_for_set_embeddings(
    source: MemoryStore, store: MemoryStore
) -> None:
    first: Message = (await source.get_messages(None, "t1", limit=1))[0]
    top = (await source.summary_dag("p", "t1")).nodes
    level_one = min((s for s in top if s.level == 1), key=lambda s: s.first_seq)
    vectors = await source.read_embeddings([level_one.id, "unknown", first.id])
    assert [(v.node_id, v.model) for v in vectors] == [(level_one.id, MODEL), (first.id, MODEL)]
    assert vectors[1].vector == pytest.approx([0.4472136, 0.8944272, 0.0, 0.0])
    await copy(source, store)
    await store.ensure_vector_index(4, MODEL)
    assert await store.set_embeddings([(v.node_id, v.vector) for v in vectors], MODEL) == 2
    copied = await store.read_embeddings([first.id, level_one.id])
    assert [(v.node_id, v.model) for v in copied] == [(first.id, MODEL), (level_one.id, MODEL)]
    assert copied[0].vector == pytest.approx(vectors[1].vector)
    assert copied[1].vector == pytest.approx([0.0, 0.0, 0.6, 0.8])


async def test_doctor_names_a_message_whose_id_its_fields_do_not_give(source: MemoryStore, store: MemoryStore) -> None:
    snapshot = await source.snapshot("q", "t2")
    planted = snapshot.messages[0].model_copy(update={"id": message_id("victim", "t2", "v-0")})
    assert await store.restore_thread(snapshot.thread, [planted]) == 1
    (breach,) = await check_store(store)
    assert (breach.invariant, breach.thread_id, breach.node_id) == (1, "t2", planted.id)
    assert "partition, thread and source id do not give" in breach.message
