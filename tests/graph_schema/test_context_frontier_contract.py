"""``context_frontier``: the one read context assembly starts from, on both backends.

It must hand back exactly what three separate reads would: the frontier (``frontier``),
its summaries whole (``get_summary``) and the newest page of uncovered messages,
read whole (``get_messages``). Neo4j picks that page in Cypher, so each edge of the
rule (`graph_schema.prepare.page_end`) is checked by seq on both stores: the message
that takes the page over the budget is read and the next is not, the page limit, a gap
in seq (a summary between uncovered messages), a newest message over the whole budget,
and a thread with nothing uncovered. Then ``assemble_context`` is checked to read a
thread whose tail fits through this one read and ``list_facts`` alone.
"""

from __future__ import annotations

from typing import Any

import pytest

from palimpsest.graph_schema.errors import InvalidInput, NotFound
from palimpsest.graph_schema.models import ContextFrontier, Message, Summary
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.server.retrieval.context import MESSAGE_PAGE, assemble_context
from tests.support.dag_seeds import P, T, persist, seed

BIG = 1_000_000


async def gapped_thread(store: MemoryStore) -> tuple[list[Message], list[Summary]]:
    """16 messages: 0-3 under an L2 (over two L1s), 4-5 uncovered, 6-7 under an L1, 8-15 uncovered.

    Message 15, the newest, is the long one of the seeded contents.
    """
    messages = await seed(store, 16)
    l1 = [await persist(store, messages[i : i + 2], 1) for i in (0, 2, 6)]
    l2 = await persist(store, l1[:2], 2)
    return messages, [l2, l1[2]]


async def seqs_read(store: MemoryStore, budget_tokens: int, limit: int = MESSAGE_PAGE) -> list[int]:
    view = await store.context_frontier(P, T, budget_tokens=budget_tokens, limit=limit)
    return [message.seq for message in view.newest]


async def test_it_holds_the_frontier_its_summaries_and_the_newest_run(store: MemoryStore) -> None:
    messages, tops = await gapped_thread(store)

    view = await store.context_frontier(P, T, budget_tokens=BIG, limit=MESSAGE_PAGE)

    assert view == ContextFrontier(
        items=await store.frontier(P, T),
        summaries=[await store.get_summary(P, top.id) for top in tops],
        newest=messages[8:],
    )
    assert [summary.id for summary in view.summaries] == [top.id for top in tops]
    assert view.summaries[0].child_ids == tops[0].child_ids and view.summaries[0].text == tops[0].text
    # The run stops at the gap: 4 and 5 are uncovered too, but behind the L1 over 6-7.
    assert [m.content for m in view.newest] == [m.content for m in messages[8:]]


async def test_the_page_ends_just_past_the_budget_and_at_the_limit(store: MemoryStore) -> None:
    messages, _ = await gapped_thread(store)
    tokens = {message.seq: message.tokens for message in messages}

    # 15 and 14 fit exactly, so 13 is read too: the one that takes the page over.
    assert await seqs_read(store, tokens[15] + tokens[14]) == [13, 14, 15]
    # One token less: 14 takes the page over, and nothing past it is read.
    assert await seqs_read(store, tokens[15] + tokens[14] - 1) == [14, 15]
    assert await seqs_read(store, tokens[15]) == [14, 15]
    assert await seqs_read(store, BIG, limit=3) == [13, 14, 15]
    assert await seqs_read(store, BIG, limit=1) == [15]
    # The newest message alone is over the budget: nothing is read.
    assert await seqs_read(store, tokens[15] - 1) == []


async def test_a_thread_with_nothing_uncovered_reads_no_message(store: MemoryStore) -> None:
    messages = await seed(store, 4)
    l1 = [await persist(store, messages[i : i + 2], 1) for i in (0, 2)]

    view = await store.context_frontier(P, T, budget_tokens=BIG, limit=MESSAGE_PAGE)

    assert view.newest == []
    assert [item.id for item in view.items] == [summary.id for summary in l1]
    assert view.summaries == l1


async def test_unknown_threads_and_bad_limits_are_refused(store: MemoryStore) -> None:
    await seed(store, 3)
    with pytest.raises(NotFound):
        await store.context_frontier(P, "no-such-thread", budget_tokens=BIG, limit=10)
    with pytest.raises(NotFound):
        await store.context_frontier("another-partition", T, budget_tokens=BIG, limit=10)
    with pytest.raises(InvalidInput):
        await store.context_frontier(P, T, budget_tokens=BIG, limit=0)


def count_reads(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the store's thread reads, in the order they are called."""
    reads: list[str] = []
    for name in ("context_frontier", "list_facts", "frontier", "get_summary", "get_messages"):
        original = getattr(store, name)

        async def counted(*args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            reads.append(_name)
            return await _original(*args, **kwargs)

        monkeypatch.setattr(store, name, counted)
    return reads


async def test_assemble_context_reads_a_fitting_thread_in_one_round(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The frontier, its summaries and the recent tail come from one read, beside the facts."""
    messages = await seed(store, 12)
    l1 = [await persist(store, messages[i : i + 2], 1) for i in (0, 2)]
    l2 = await persist(store, l1, 2)
    reads = count_reads(store, monkeypatch)

    result = await assemble_context(store, T, partition=P, budget_tokens=BIG)

    assert sorted(reads) == ["context_frontier", "list_facts"]
    shown = {section.name: section.ids for section in result.sections}
    assert shown == {"summaries": [l2.id], "recent": [message.id for message in messages[4:]]}
    assert result.pruned == [] and (result.first_seq, result.last_seq) == (0, 11)
    assert result.text.index(messages[4].content) < result.text.index(messages[11].content)


async def test_messages_behind_a_gap_are_read_as_the_walk_reaches_them(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages, tops = await gapped_thread(store)
    reads = count_reads(store, monkeypatch)

    result = await assemble_context(store, T, partition=P, budget_tokens=BIG)

    assert sorted(reads) == ["context_frontier", "get_messages", "list_facts"]
    shown = {section.name: section.ids for section in result.sections}
    assert shown["summaries"] == [top.id for top in tops]
    assert shown["recent"] == [message.id for message in [*messages[4:6], *messages[8:]]]
    assert result.pruned == []
