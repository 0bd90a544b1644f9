"""The DAG half of the store contract: every summary verb of `MemoryStore`, on both backends.

Summaries are built directly with ``store.persist_summary`` so these tests judge the
store alone, not the compaction engine. Each test runs once per backend through the
``store`` fixture of ``conftest.py``; what one backend does, the other must do too.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.errors import Conflict, InvalidInput, NotFound
from palimpsest.graph_schema.identity import summary_digest, summary_id
from palimpsest.graph_schema.models import Message, NewMessage, Role, Summary, ThreadBacklog
from palimpsest.graph_schema.store import MemoryStore
from tests.support.dag_seeds import BASE, TRICKY, P, T, content, persist, proposal, seed


async def tree(store: MemoryStore) -> tuple[list[Message], list[Summary], list[Summary], Summary]:
    """Eight messages under four L1s (two each), two L2s and one L3; two messages left over."""
    messages = await seed(store, 10)
    l1 = [await persist(store, messages[i : i + 2], 1) for i in range(0, 8, 2)]
    l2 = [await persist(store, l1[i : i + 2], 2) for i in range(0, 4, 2)]
    l3 = await persist(store, l2, 3)
    return messages, l1, l2, l3


# -- persist_summary and get_summary --------------------------------------------------


async def test_level_one_derives_everything_from_its_messages(store: MemoryStore) -> None:
    messages = await seed(store, 6)
    children = messages[1:5]
    stored = await store.persist_summary(proposal(children, 1, tokens=3, text="what happened"))

    assert stored.id == summary_id(P, T, 1, [m.id for m in children])
    assert (stored.thread_id, stored.partition, stored.level) == (T, P, 1)
    assert (stored.text, stored.tokens, stored.summarizer) == ("what happened", 3, "test")
    assert (stored.first_seq, stored.last_seq) == (1, 4)
    assert stored.earliest_at == BASE + timedelta(minutes=1, microseconds=1)
    assert stored.latest_at == BASE + timedelta(minutes=4, microseconds=4)
    assert stored.message_count == 4
    assert stored.source_tokens == sum(m.tokens for m in children)
    assert stored.digest == summary_digest(1, [m.sha256 for m in children])
    assert stored.child_ids == [m.id for m in children]
    assert stored.parent_id is None
    assert await store.get_summary(P, stored.id) == stored


async def test_level_two_derives_from_level_one_children(store: MemoryStore) -> None:
    messages = await seed(store, 8)
    first = await persist(store, messages[:3], 1)
    second = await persist(store, messages[3:8], 1)
    top = await store.persist_summary(proposal([first, second], 2))

    assert (top.first_seq, top.last_seq, top.message_count) == (0, 7, 8)
    assert top.source_tokens == first.tokens + second.tokens
    assert top.digest == summary_digest(2, [first.digest, second.digest])
    assert top.earliest_at == messages[0].created_at
    assert top.latest_at == messages[7].created_at
    described = await store.get_summary(P, top.id)
    assert described.child_ids == [first.id, second.id]
    assert described.parent_id is None
    assert (await store.get_summary(P, first.id)).parent_id == top.id
    assert (await store.get_summary(None, second.id)).parent_id == top.id


async def test_a_covered_child_is_a_conflict_and_nothing_is_written(store: MemoryStore) -> None:
    messages = await seed(store, 8)
    await persist(store, messages[0:4], 1)
    before = await store.snapshot(P, T)

    with pytest.raises(Conflict):
        await persist(store, messages[3:6], 1)

    assert await store.snapshot(P, T) == before
    assert await store.count_uncovered(P, T) == 4
    assert (await store.stats(P)).summaries_by_level == {1: 1}


async def test_a_batch_of_summaries_is_written_whole_and_equals_one_at_a_time(store: MemoryStore) -> None:
    messages = await seed(store, 9)
    runs = [messages[0:3], messages[3:5], messages[5:8]]

    written = await store.persist_summaries([proposal(run, 1, text=f"part {i}") for i, run in enumerate(runs)])

    assert [s.id for s in written] == [summary_id(P, T, 1, [m.id for m in run]) for run in runs]
    assert [(s.first_seq, s.last_seq, s.text) for s in written] == [
        (0, 2, "part 0"),
        (3, 4, "part 1"),
        (5, 7, "part 2"),
    ]
    assert [s.digest for s in written] == [summary_digest(1, [m.sha256 for m in run]) for run in runs]
    assert [await store.get_summary(P, s.id) for s in written] == written
    assert await store.count_uncovered(P, T) == 1
    (top,) = await store.persist_summaries([proposal(written, 2)])
    assert (top.first_seq, top.last_seq, top.message_count) == (0, 7, 8)
    assert (await store.get_summary(P, written[1].id)).parent_id == top.id


async def test_a_batch_with_one_bad_summary_writes_nothing(store: MemoryStore) -> None:
    messages = await seed(store, 9)
    await persist(store, messages[6:8], 1)
    before = await store.snapshot(P, T)

    with pytest.raises(Conflict):
        await store.persist_summaries([proposal(messages[0:3], 1), proposal(messages[3:7], 1)])
    with pytest.raises(NotFound):
        await store.persist_summaries(
            [proposal(messages[0:3], 1), proposal(messages[3:4], 1).model_copy(update={"child_ids": ["msg_gone"]})]
        )

    assert await store.snapshot(P, T) == before
    assert await store.count_uncovered(P, T) == 7


@pytest.mark.parametrize("case", ["empty", "mixed levels", "other thread", "shared child"])
async def test_a_batch_that_is_not_one_step_is_refused(store: MemoryStore, case: str) -> None:
    messages = await seed(store, 6)
    await seed(store, 2, thread_id="thread-2")
    first = await persist(store, messages[0:2], 1)
    batches = {
        "empty": [],
        "mixed levels": [proposal(messages[2:4], 1), proposal([first], 2)],
        "other thread": [proposal(messages[2:4], 1), proposal(messages[4:6], 1, thread_id="thread-2")],
        "shared child": [proposal(messages[2:4], 1), proposal(messages[3:5], 1)],
    }
    before = await store.snapshot(P, T)

    with pytest.raises(InvalidInput):
        await store.persist_summaries(batches[case])

    assert await store.snapshot(P, T) == before


async def test_the_same_summary_twice_is_a_conflict(store: MemoryStore) -> None:
    messages = await seed(store, 4)
    first = await persist(store, messages[:3], 1)
    with pytest.raises(Conflict):
        await persist(store, messages[:3], 1)
    assert [s.id for s in (await store.snapshot(P, T)).summaries] == [first.id]


async def test_a_summary_over_a_covered_summary_is_a_conflict(store: MemoryStore) -> None:
    messages = await seed(store, 6)
    low = [await persist(store, messages[i : i + 2], 1) for i in (0, 2, 4)]
    await persist(store, low[:2], 2)
    before = await store.snapshot(P, T)
    with pytest.raises(Conflict):
        await persist(store, low[1:], 2)
    assert await store.snapshot(P, T) == before


@pytest.mark.parametrize(
    ("case", "error"),
    [
        ("gap in the run", InvalidInput),
        ("out of order", InvalidInput),
        ("level 2 over messages", InvalidInput),
        ("level 1 over a summary", InvalidInput),
        ("level 3 over level 1", InvalidInput),
        ("repeated child", InvalidInput),
        ("not shorter", InvalidInput),
        ("unknown child", NotFound),
        ("unknown thread", NotFound),
        ("thread of another partition", NotFound),
    ],
)
async def test_an_invalid_summary_is_refused_and_nothing_is_written(
    store: MemoryStore, case: str, error: type[Exception]
) -> None:
    messages = await seed(store, 8)
    low = await persist(store, messages[6:8], 1)
    proposals = {
        "gap in the run": proposal([messages[0], messages[1], messages[3]], 1),
        "out of order": proposal([messages[1], messages[0]], 1),
        "level 2 over messages": proposal(messages[0:2], 2),
        "level 1 over a summary": proposal([low], 1),
        "level 3 over level 1": proposal([low], 3),
        "repeated child": proposal([messages[0], messages[1], messages[1]], 1),
        "not shorter": proposal(messages[0:2], 1, tokens=messages[0].tokens + messages[1].tokens),
        "unknown child": proposal(messages[0:2], 1).model_copy(
            update={"child_ids": [messages[0].id, "msg_00000000000000000000000000000000"]}
        ),
        "unknown thread": proposal(messages[0:2], 1, thread_id="no-such-thread"),
        "thread of another partition": proposal(messages[0:2], 1, partition="ide-b"),
    }
    before = await store.snapshot(P, T)

    with pytest.raises(error):
        await store.persist_summary(proposals[case])

    assert await store.snapshot(P, T) == before
    assert await store.count_uncovered(P, T) == 6
    assert (await store.stats(None)).summaries_by_level == {1: 1}


async def test_children_of_another_thread_or_partition_are_refused(store: MemoryStore) -> None:
    messages = await seed(store, 4)
    elsewhere = await seed(store, 4, thread_id="thread-2")
    foreign = await seed(store, 4, partition="ide-b", thread_id="thread-3")
    before = await store.snapshot(P, T)

    for intruder in (elsewhere[2], foreign[2]):  # seq 2: only its thread gives it away
        with pytest.raises(NotFound):
            await persist(store, [messages[0], messages[1], intruder], 1)

    assert await store.snapshot(P, T) == before
    assert (await store.stats(None)).summaries_by_level == {}


async def test_concurrent_compactions_of_the_same_children_one_wins(store: MemoryStore, store_url: str) -> None:
    messages = await seed(store, 18)
    other = open_store(store_url, Neo4jCredentials())
    await other.initialize()
    winners: list[Summary] = []
    try:
        for start in (0, 6, 12):
            same = proposal(messages[start : start + 4], 1)
            overlapping = proposal(messages[start + 2 : start + 5], 1)
            results = await asyncio.gather(
                store.persist_summary(same),
                other.persist_summary(same),
                other.persist_summary(overlapping),
                store.persist_summary(overlapping),
                return_exceptions=True,
            )
            won = [result for result in results if isinstance(result, Summary)]
            assert len(won) == 1, results
            assert all(isinstance(result, Conflict) for result in results if result is not won[0]), results
            winners += won
    finally:
        await other.close()

    snapshot = await store.snapshot(P, T)
    assert sorted(s.id for s in snapshot.summaries) == sorted(s.id for s in winners)
    assert await store.count_uncovered(P, T) == 18 - sum(s.message_count for s in winners)


# -- expand ----------------------------------------------------------------------------


async def test_expand_gives_back_the_exact_messages_in_order(store: MemoryStore) -> None:
    messages = await seed(store, len(TRICKY) + 2)
    summary = await persist(store, messages[1 : len(TRICKY) + 1], 1)

    page = await store.expand(P, summary.id)

    assert page.summary_id == summary.id
    assert page.total == len(TRICKY)
    assert page.next_cursor is None
    assert page.items == messages[1 : len(TRICKY) + 1]
    for index, item in enumerate(page.items, start=1):
        assert isinstance(item, Message)
        assert item.content.encode("utf-8") == content(index).encode("utf-8")


async def test_expand_by_depth_walks_the_levels(store: MemoryStore) -> None:
    messages, l1, l2, l3 = await tree(store)

    assert (await store.expand(P, l3.id)).items == messages[:8]
    assert [s.id for s in (await store.expand(P, l3.id, depth=1)).items] == [s.id for s in l2]
    by_two = (await store.expand(P, l3.id, depth=2)).items
    assert [s.id for s in by_two] == [s.id for s in l1]
    assert all(isinstance(s, Summary) and s.level == 1 for s in by_two)
    assert (await store.expand(P, l3.id, depth=3)).items == messages[:8]
    assert (await store.expand(P, l3.id, depth=7)).items == messages[:8]
    assert (await store.expand(P, l2[1].id, depth=1)).items[0].id == l1[2].id
    assert (await store.expand(P, l1[3].id, depth=1)).items == messages[6:8]
    assert (await store.expand(None, l2[0].id, depth=2)).items == messages[:4]


async def test_expand_pages_visit_everything_exactly_once(store: MemoryStore) -> None:
    messages, l1, _, l3 = await tree(store)
    for depth, limit, expected in ((None, 3, [m.id for m in messages[:8]]), (2, 3, [s.id for s in l1])):
        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            page = await store.expand(P, l3.id, depth=depth, limit=limit, cursor=cursor)
            assert page.total == len(expected)
            assert len(page.items) <= limit
            seen += [item.id for item in page.items]
            pages += 1
            cursor = page.next_cursor
            if cursor is None:
                break
        assert seen == expected
        assert pages == -(-len(expected) // limit)


@pytest.mark.parametrize("cursor", ["garbage", "o-1", "5", "o", "o1x"])
async def test_expand_refuses_a_cursor_it_did_not_hand_out(store: MemoryStore, cursor: str) -> None:
    messages = await seed(store, 4)
    summary = await persist(store, messages, 1)
    with pytest.raises(InvalidInput):
        await store.expand(P, summary.id, cursor=cursor)


async def test_expand_refuses_depth_zero_and_unknown_ids(store: MemoryStore) -> None:
    messages = await seed(store, 4)
    summary = await persist(store, messages, 1)
    with pytest.raises(InvalidInput):
        await store.expand(P, summary.id, depth=0)
    with pytest.raises(NotFound):
        await store.expand(P, "sum_00000000000000000000000000000000")


# -- reading the DAG -----------------------------------------------------------------


async def test_covered_by_gives_the_chain_lowest_level_first(store: MemoryStore) -> None:
    messages, l1, l2, l3 = await tree(store)
    chains = await store.covered_by([messages[0].id, messages[5].id, messages[9].id, "msg_unknown"])
    assert chains == {
        messages[0].id: [l1[0].id, l2[0].id, l3.id],
        messages[5].id: [l1[2].id, l2[1].id, l3.id],
        messages[9].id: [],
        "msg_unknown": [],
    }
    assert await store.covered_by([]) == {}


async def test_covered_by_gives_a_summarys_parents_too(store: MemoryStore) -> None:
    messages, l1, l2, l3 = await tree(store)
    chains = await store.covered_by([l1[2].id, l2[0].id, l3.id, messages[1].id])
    assert chains == {
        l1[2].id: [l2[1].id, l3.id],
        l2[0].id: [l3.id],
        l3.id: [],
        messages[1].id: [l1[0].id, l2[0].id, l3.id],
    }


async def test_frontier_partitions_the_thread_in_order(store: MemoryStore) -> None:
    messages = await seed(store, 12)
    l1 = [await persist(store, messages[i : i + 2], 1) for i in (0, 2, 6)]
    l2 = await persist(store, l1[:2], 2)

    frontier = await store.frontier(P, T)

    assert [(f.kind, f.id, f.level) for f in frontier] == [
        ("summary", l2.id, 2),
        ("message", messages[4].id, 0),
        ("message", messages[5].id, 0),
        ("summary", l1[2].id, 1),
        *[("message", m.id, 0) for m in messages[8:]],
    ]
    assert frontier[0].tokens == l2.tokens and frontier[1].tokens == messages[4].tokens
    covered = [seq for item in frontier for seq in range(item.first_seq, item.last_seq + 1)]
    assert covered == list(range(12))


async def test_uncovered_messages_summaries_and_count(store: MemoryStore) -> None:
    messages = await seed(store, 12)
    l1 = [await persist(store, messages[i : i + 3], 1) for i in (0, 3, 6)]
    l2 = await persist(store, l1[:2], 2)

    assert await store.count_uncovered(P, T) == 3
    assert await store.uncovered_messages(P, T) == messages[9:]
    assert await store.uncovered_messages(P, T, limit=2) == messages[9:11]
    assert [s.id for s in await store.uncovered_summaries(P, T, 1)] == [l1[2].id]
    assert [s.id for s in await store.uncovered_summaries(P, T, 2)] == [l2.id]
    assert await store.uncovered_summaries(P, T, 3) == []
    await store.append_messages(P, T, [NewMessage(role=Role.user, content="one more")])
    assert await store.count_uncovered(P, T) == 4


async def test_compaction_candidates_order_by_backlog(store: MemoryStore) -> None:
    await seed(store, 10, thread_id="big")
    await seed(store, 5, thread_id="small")
    middle = await seed(store, 7, thread_id="middle")
    await store.persist_summary(proposal(middle[:3], 1, thread_id="middle"))
    await seed(store, 20, partition="ide-b", thread_id="other")

    def backlog(rows: list[ThreadBacklog]) -> list[tuple[str, int]]:
        return [(row.thread_id, row.uncovered) for row in rows]

    assert backlog(await store.compaction_candidates(P, min_uncovered=1, limit=10)) == [
        ("big", 10),
        ("small", 5),
        ("middle", 4),
    ]
    assert backlog(await store.compaction_candidates(P, min_uncovered=5, limit=10)) == [("big", 10), ("small", 5)]
    assert backlog(await store.compaction_candidates(P, min_uncovered=1, limit=1)) == [("big", 10)]
    assert backlog(await store.compaction_candidates("ide-b", min_uncovered=1, limit=10)) == [("other", 20)]
    everywhere = await store.compaction_candidates(None, min_uncovered=5, limit=10)
    assert [(row.thread_id, row.partition) for row in everywhere] == [
        ("other", "ide-b"),
        ("big", P),
        ("small", P),
    ]
    assert await store.compaction_candidates(P, min_uncovered=11, limit=10) == []


async def test_summary_dag_lists_nodes_edges_and_frontier(store: MemoryStore) -> None:
    messages, l1, l2, l3 = await tree(store)

    dag = await store.summary_dag(P, T)

    assert (dag.thread_id, dag.partition) == (T, P)
    assert {s.id for s in dag.nodes} == {s.id for s in [*l1, *l2, l3]}
    by_id = {s.id: s for s in dag.nodes}
    assert by_id[l3.id].child_ids == [s.id for s in l2]
    assert by_id[l1[0].id].parent_id == l2[0].id
    edges = {(e.parent_id, e.child_id, e.position) for e in dag.edges}
    assert edges == {
        (l3.id, l2[0].id, 0),
        (l3.id, l2[1].id, 1),
        (l2[0].id, l1[0].id, 0),
        (l2[0].id, l1[1].id, 1),
        (l2[1].id, l1[2].id, 0),
        (l2[1].id, l1[3].id, 1),
    }
    assert dag.frontier == await store.frontier(P, T)
    assert [f.id for f in dag.frontier] == [l3.id, messages[8].id, messages[9].id]


async def test_snapshot_holds_every_message_and_summary_with_children(store: MemoryStore) -> None:
    messages, l1, l2, l3 = await tree(store)

    snapshot = await store.snapshot(P, T)

    assert snapshot.thread.id == T and snapshot.thread.message_count == 10
    assert snapshot.messages == messages
    stored = {s.id: s for s in snapshot.summaries}
    assert set(stored) == {s.id for s in [*l1, *l2, l3]}
    assert stored[l1[1].id].child_ids == [messages[2].id, messages[3].id]
    assert stored[l2[1].id].child_ids == [l1[2].id, l1[3].id]
    assert stored[l3.id].parent_id is None
    assert await store.snapshot(None, T) == snapshot


async def test_every_dag_reader_respects_the_partition(store: MemoryStore) -> None:
    messages, l1, _, l3 = await tree(store)
    await seed(store, 3, partition="ide-b", thread_id="elsewhere")
    b = "ide-b"

    for summary in (l1[0], l3):
        with pytest.raises(NotFound):
            await store.get_summary(b, summary.id)
        with pytest.raises(NotFound):
            await store.expand(b, summary.id)
        with pytest.raises(NotFound):
            await store.expand(b, summary.id, depth=1)
    readers = (store.frontier, store.summary_dag, store.snapshot, store.count_uncovered, store.uncovered_messages)
    for read in readers:
        with pytest.raises(NotFound):
            await read(b, T)  # type: ignore[operator]
    assert await store.uncovered_summaries(b, T, 1) == []
    backlog = await store.compaction_candidates(b, min_uncovered=1, limit=10)
    assert [row.thread_id for row in backlog] == ["elsewhere"]
    assert (await store.get_summary(None, l3.id)).id == l3.id
    assert (await store.summary_dag(b, "elsewhere")).nodes == []
    with pytest.raises(NotFound):
        await store.frontier(P, "no-such-thread")
