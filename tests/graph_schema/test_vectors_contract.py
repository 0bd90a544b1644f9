"""The store contract for semantic search: vector index, embeddings, missing ones, search.

Runs on both backends through the ``store`` fixture with small hand-made vectors (no
model), so every score can be checked against a cosine computed here, and so SQLite's
vector files and Neo4j's vector index are held to one behaviour.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from palimpsest.graph_schema.backends import Neo4jCredentials, open_store
from palimpsest.graph_schema.errors import Conflict, InvalidInput
from palimpsest.graph_schema.identity import estimate_tokens
from palimpsest.graph_schema.models import MAX_EMBED_CHARS, REF_OPENING_CHARS, NewFact, NewMessage, NewSummary
from palimpsest.graph_schema.neo4j import base as neo4j_base
from palimpsest.graph_schema.store import MemoryStore

P = "ide-a"
OTHER = "ide-b"
DIMS = 4
MODEL = "test:axes"
T0 = datetime(2025, 1, 1, tzinfo=UTC)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


async def append(
    store: MemoryStore, contents: Sequence[str], *, partition: str = P, thread_id: str = "t1", start: int = 0
) -> list[str]:
    """Messages a minute apart from ``T0 + start`` minutes; their stored ids."""
    messages = [
        NewMessage(role="user" if i % 2 == 0 else "assistant", content=text, message_id=f"{thread_id}-{start + i}",
                   created_at=T0 + timedelta(minutes=start + i))
        for i, text in enumerate(contents)
    ]  # fmt: skip
    result = await store.append_messages(partition, thread_id, messages)
    return result.message_ids


async def test_verbs_need_the_index_first(store: MemoryStore) -> None:
    (message_id,) = await append(store, ["hello"])
    with pytest.raises(InvalidInput, match="ensure_vector_index"):
        await store.set_embeddings([(message_id, [1.0, 0.0, 0.0, 0.0])], MODEL)
    with pytest.raises(InvalidInput, match="ensure_vector_index"):
        await store.missing_embeddings(P)
    with pytest.raises(InvalidInput, match="ensure_vector_index"):
        await store.vector_search([1.0, 0.0, 0.0, 0.0], partition=P)


async def test_ensure_vector_index_checks_its_arguments(store: MemoryStore) -> None:
    with pytest.raises(InvalidInput, match="at least 1"):
        await store.ensure_vector_index(0, MODEL)
    with pytest.raises(InvalidInput, match="model"):
        await store.ensure_vector_index(DIMS, "  ")


async def test_ensure_vector_index_refuses_another_size_once_it_holds_vectors(
    store: MemoryStore, store_url: str
) -> None:
    await store.ensure_vector_index(DIMS, MODEL)
    await store.ensure_vector_index(DIMS, MODEL)
    # Empty, it may still change size (nothing to lose), and back.
    await store.ensure_vector_index(8, MODEL)
    await store.ensure_vector_index(DIMS, MODEL)
    (message_id,) = await append(store, ["the deploy key rotates weekly"])
    assert await store.set_embeddings([(message_id, [0.0, 1.0, 0.0, 0.0])], MODEL) == 1

    with pytest.raises(Conflict, match="4-number vectors"):
        await store.ensure_vector_index(8, "test:wider")
    other = open_store(store_url, Neo4jCredentials())
    await other.initialize()
    try:
        with pytest.raises(Conflict, match="fresh store"):
            await other.ensure_vector_index(8, "test:wider")
    finally:
        await other.close()
    # Nothing changed: the first size still searches.
    await store.ensure_vector_index(DIMS, MODEL)
    hits = await store.vector_search([0.0, 1.0, 0.0, 0.0], partition=P)
    assert [hit.id for hit in hits] == [message_id]


async def test_vector_search_ranks_by_exact_cosine_and_shows_the_node(store: MemoryStore) -> None:
    contents = ["tokens expire after fifteen minutes", "we deploy on fridays", "the cache is redis", "x" * 500]
    ids = await append(store, contents)
    vectors = [[1.0, 0.2, 0.0, 0.0], [0.0, 3.0, 0.0, 0.0], [0.5, 0.5, 0.5, 0.0], [-1.0, 0.0, 0.0, 0.1]]
    await store.ensure_vector_index(DIMS, MODEL)
    assert await store.set_embeddings(list(zip(ids, vectors, strict=True)), MODEL) == 4

    query = [2.0, 0.5, 0.1, 0.0]
    hits = await store.vector_search(query, partition=P, limit=10)

    expected = sorted(((cosine(query, v), node_id) for node_id, v in zip(ids, vectors, strict=True)), reverse=True)
    assert [hit.id for hit in hits] == [node_id for _, node_id in expected]
    for hit, (score, _) in zip(hits, expected, strict=True):
        assert hit.score == pytest.approx(score, abs=1e-5)
    top = hits[0]
    assert (top.kind, top.partition, top.thread_id, top.source_id, top.role) == ("message", P, "t1", "t1-0", "user")
    assert top.created_at == T0
    assert top.snippet == contents[0]
    long_hit = next(hit for hit in hits if hit.id == ids[3])
    assert long_hit.snippet.startswith("x" * 200) and long_hit.snippet.endswith("…")
    assert len(long_hit.snippet) < 300
    assert [hit.id for hit in await store.vector_search(query, partition=P, limit=2)] == [
        node_id for _, node_id in expected[:2]
    ]


async def test_set_embeddings_refuses_bad_vectors_and_writes_nothing(store: MemoryStore) -> None:
    ids = await append(store, ["one", "two"])
    await store.ensure_vector_index(DIMS, MODEL)
    good = [1.0, 0.0, 0.0, 0.0]
    bad_batches = {
        "3 numbers": [(ids[0], good), (ids[1], [1.0, 0.0, 0.0])],
        "not finite": [(ids[0], good), (ids[1], [math.nan, 0.0, 0.0, 0.0])],
        "infinite": [(ids[0], [math.inf, 0.0, 0.0, 0.0])],
        "all zeros": [(ids[0], good), (ids[1], [0.0, 0.0, 0.0, 0.0])],
    }
    for expected, batch in bad_batches.items():
        match = "not finite" if expected == "infinite" else expected
        with pytest.raises(InvalidInput, match=match):
            await store.set_embeddings(batch, MODEL)
    with pytest.raises(InvalidInput, match="set up for"):
        await store.set_embeddings([(ids[0], good)], "test:another-model")
    assert [todo.id for todo in await store.missing_embeddings(P)] == sorted(ids)
    assert await store.vector_search(good, partition=P) == []

    # Unknown ids are skipped, the rest written; an empty batch writes nothing.
    assert await store.set_embeddings([(ids[0], good), ("msg_no_such_node", good)], MODEL) == 1
    assert await store.set_embeddings([], MODEL) == 0
    assert [todo.id for todo in await store.missing_embeddings(P)] == [ids[1]]


async def test_vector_search_refuses_bad_queries(store: MemoryStore) -> None:
    await store.ensure_vector_index(DIMS, MODEL)
    with pytest.raises(InvalidInput, match="5 numbers"):
        await store.vector_search([1.0] * 5, partition=P)
    with pytest.raises(InvalidInput, match="all zeros"):
        await store.vector_search([0.0] * 4, partition=P)
    with pytest.raises(InvalidInput, match="not finite"):
        await store.vector_search([math.nan, 1.0, 0.0, 0.0], partition=P)
    with pytest.raises(InvalidInput, match="limit"):
        await store.vector_search([1.0, 0.0, 0.0, 0.0], partition=P, limit=0)
    with pytest.raises(InvalidInput, match="unknown search kinds"):
        await store.vector_search([1.0, 0.0, 0.0, 0.0], partition=P, kinds=["message", "image"])  # type: ignore[list-item]


async def test_missing_embeddings_walks_by_id_with_cursor_ids_kinds_and_partition(store: MemoryStore) -> None:
    long_text = "é" * (MAX_EMBED_CHARS + 100)
    ids = await append(store, ["alpha", "beta", "gamma", long_text, "delta"])
    other_ids = await append(store, ["elsewhere"], partition=OTHER, thread_id="t2")
    await store.ensure_vector_index(DIMS, MODEL)

    todo = await store.missing_embeddings(P, limit=100)
    assert [item.id for item in todo] == sorted(ids)
    assert {item.kind for item in todo} == {"message"}
    texts = {item.id: item.text for item in todo}
    assert texts[ids[0]] == "alpha"
    assert texts[ids[3]] == "é" * MAX_EMBED_CHARS
    assert {item.id for item in await store.missing_embeddings(None, limit=100)} == set(ids) | set(other_ids)

    walked: list[str] = []
    cursor: str | None = None
    while page := await store.missing_embeddings(P, limit=2, after=cursor):
        assert len(page) <= 2
        walked += [item.id for item in page]
        cursor = page[-1].id
    assert walked == sorted(ids)

    among = await store.missing_embeddings(P, ids=[ids[4], ids[1], other_ids[0], "msg_unknown"])
    assert [item.id for item in among] == sorted([ids[4], ids[1]])
    assert await store.missing_embeddings(P, ids=[]) == []
    assert await store.missing_embeddings(P, kinds=["summary", "fact"]) == []
    with pytest.raises(InvalidInput, match="limit"):
        await store.missing_embeddings(P, limit=0)
    with pytest.raises(InvalidInput, match="unknown search kinds"):
        await store.missing_embeddings(P, kinds=["message", "thread"])  # type: ignore[list-item]

    await store.set_embeddings([(ids[0], [1.0, 0.0, 0.0, 0.0]), (ids[2], [0.0, 1.0, 0.0, 0.0])], MODEL)
    assert [item.id for item in await store.missing_embeddings(P)] == sorted([ids[1], ids[3], ids[4]])


async def test_another_model_of_the_same_size_starts_over(store: MemoryStore) -> None:
    ids = await append(store, ["alpha", "beta"])
    await store.ensure_vector_index(DIMS, MODEL)
    await store.set_embeddings([(ids[0], [1.0, 0.0, 0.0, 0.0]), (ids[1], [0.0, 1.0, 0.0, 0.0])], MODEL)
    assert await store.missing_embeddings(P) == []

    await store.ensure_vector_index(DIMS, "test:rotated")
    assert [item.id for item in await store.missing_embeddings(P)] == sorted(ids)
    assert await store.vector_search([1.0, 0.0, 0.0, 0.0], partition=P) == []
    await store.set_embeddings([(ids[1], [1.0, 0.0, 0.0, 0.0])], "test:rotated")
    hits = await store.vector_search([1.0, 0.0, 0.0, 0.0], partition=P)
    assert [(hit.id, round(hit.score, 5)) for hit in hits] == [(ids[1], 1.0)]


async def test_vector_search_filters_partition_thread_kinds_and_time(store: MemoryStore) -> None:
    first = await append(store, ["m0", "m1", "m2", "m3"], thread_id="t1")
    second = await append(store, ["n0", "n1"], thread_id="t2", start=10)
    elsewhere = await append(store, ["o0"], partition=OTHER, thread_id="t3", start=20)
    children = await store.get_messages(P, "t1", first_seq=0, last_seq=1)
    summary = await store.persist_summary(
        NewSummary(thread_id="t1", partition=P, level=1, text="s", tokens=estimate_tokens("s"),
                   summarizer="test", child_ids=[m.id for m in children])
    )  # fmt: skip
    await store.ensure_vector_index(DIMS, MODEL)
    everything = [*first, *second, *elsewhere, summary.id]
    # Each node at a slightly different angle from the query, so the order is known.
    vectors = [[1.0, 0.1 * (index + 1), 0.0, 0.0] for index in range(len(everything))]
    assert await store.set_embeddings(list(zip(everything, vectors, strict=True)), MODEL) == len(everything)
    rank = {node_id: index for index, node_id in enumerate(everything)}
    query = [1.0, 0.0, 0.0, 0.0]

    async def found(**filters: object) -> list[str]:
        hits = await store.vector_search(query, **{"partition": P, "limit": 50, **filters})  # type: ignore[arg-type]
        return [hit.id for hit in hits]

    assert await found() == sorted([*first, *second, summary.id], key=rank.__getitem__)
    assert await found(partition=OTHER) == elsewhere
    assert await found(partition=None) == everything
    assert await found(thread_id="t2") == second
    assert await found(thread_id="t1", kinds=["summary"]) == [summary.id]
    assert await found(kinds=["message"]) == [*first, *second]
    assert await found(thread_id="no-such-thread") == []
    assert await found(since=T0 + timedelta(minutes=3), until=T0 + timedelta(minutes=10)) == [first[3], second[0]]
    assert await found(kinds=["fact"]) == []
    summary_hit = (await store.vector_search(query, partition=P, kinds=["summary"]))[0]
    assert (summary_hit.kind, summary_hit.level, summary_hit.role, summary_hit.source_id) == ("summary", 1, None, None)


async def test_vector_candidates_are_the_search_hits_with_their_messages_refs(store: MemoryStore) -> None:
    said = [NewMessage(role="user", content="y" * 1000, metadata={"speaker": "Caroline"}),
            NewMessage(role="assistant", content="short")]  # fmt: skip
    first = (await store.append_messages(P, "t1", said)).message_ids
    second = await append(store, ["n0"], thread_id="t2")
    elsewhere = await append(store, ["o0"], partition=OTHER, thread_id="t3")
    summary = await store.persist_summary(
        NewSummary(thread_id="t1", partition=P, level=1, text="s", tokens=estimate_tokens("s"),
                   summarizer="test", child_ids=first)
    )  # fmt: skip
    await store.ensure_vector_index(DIMS, MODEL)
    everything = [*first, *second, *elsewhere, summary.id]
    vectors = [[1.0, 0.1 * (index + 1), 0.0, 0.0] for index in range(len(everything))]
    await store.set_embeddings(list(zip(everything, vectors, strict=True)), MODEL)
    query = [1.0, 0.0, 0.0, 0.0]

    for filters in ({}, {"partition": None}, {"thread_id": "t1"}, {"kinds": ["message"]}, {"limit": 2}):
        asked: dict[str, Any] = {"partition": P, "limit": 50, **filters}
        hits, refs = await store.vector_candidates(query, **asked)
        assert hits == await store.vector_search(query, **asked)
        messages = [hit.id for hit in hits if hit.kind == "message"]
        assert sorted(refs, key=str) == sorted(await store.message_refs(None, messages), key=str)
        assert len(refs) == len(messages)
    _, refs = await store.vector_candidates(query, partition=P, kinds=["message"], limit=1)
    assert [(ref.id, ref.seq, ref.metadata, ref.opening) for ref in refs] == [
        (first[0], 0, {"speaker": "Caroline"}, "y" * REF_OPENING_CHARS)
    ]


async def test_a_partition_crowded_out_of_the_index_still_gets_its_hits(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    crowd = await append(store, [f"crowd {i}" for i in range(300)], partition=OTHER, thread_id="busy")
    own = await append(store, ["mine 0", "mine 1", "mine 2"], thread_id="quiet")
    await store.ensure_vector_index(DIMS, MODEL)
    near = [(node_id, [1.0, 0.001 * i, 0.0, 0.0]) for i, node_id in enumerate(crowd)]
    far = [(node_id, [0.1 * (3 - i), 1.0, 0.0, 0.0]) for i, node_id in enumerate(own)]
    await store.set_embeddings(near + far, MODEL)

    hits = await store.vector_search([1.0, 0.0, 0.0, 0.0], partition=P, limit=3)

    assert [hit.id for hit in hits] == own
    assert all(hit.partition == P for hit in hits)
    # Neo4j: when even the widest index query is crowded out, the partition is ranked exactly.
    monkeypatch.setattr(neo4j_base, "CANDIDATES_MAX", neo4j_base.CANDIDATES_MIN)
    assert [hit.id for hit in await store.vector_search([1.0, 0.0, 0.0, 0.0], partition=P, limit=3)] == own
    late = T0 + timedelta(minutes=250)
    hits = await store.vector_search([1.0, 0.0, 0.0, 0.0], partition=None, since=late, limit=2)
    assert [hit.id for hit in hits] == crowd[250:252]


async def test_a_search_asks_for_what_the_filters_kept_last_time_and_widens_when_that_went_stale(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Neo4j learns which share of the index's candidates the partition filter keeps and
    # asks for that many next time; a partition crowded out since must still get its hits.
    asked: list[int] = []
    real_query = neo4j_base.Neo4jBase._query

    async def recording(self: neo4j_base.Neo4jBase, query: Any, /, **params: Any) -> list[dict[str, Any]]:
        if "k" in params:
            asked.append(params["k"])
        return await real_query(self, query, **params)

    monkeypatch.setattr(neo4j_base.Neo4jBase, "_query", recording)
    own = await append(store, [f"mine {i}" for i in range(30)], thread_id="quiet")
    await store.ensure_vector_index(DIMS, MODEL)
    await store.set_embeddings([(node_id, [1.0, 0.01 * i, 0.0, 0.0]) for i, node_id in enumerate(own)], MODEL)

    for _ in range(2):
        assert [hit.id for hit in await store.vector_search([1.0, 0.0, 0.0, 0.0], partition=P, limit=20)] == own[:20]
    crowd = await append(store, [f"crowd {i}" for i in range(300)], partition=OTHER, thread_id="busy")
    nearer = [(node_id, [1.0, 0.0001 * i, 0.0, 0.0]) for i, node_id in enumerate(crowd)]
    await store.set_embeddings(nearer, MODEL)
    for _ in range(2):
        hits = await store.vector_search([1.0, 0.0, 0.0, 0.0], partition=P, limit=20)
        assert [(hit.id, hit.partition) for hit in hits] == [(node_id, P) for node_id in own[:20]]

    if store.kind == "neo4j":
        # 4 x 20 at first; then 20 / (30 of 30 kept) x 1.25, at least 64; after the crowd
        # came, 64 kept too few and 8 x 64 found every vector, then asked from 30 of 330.
        assert asked[:5] == [80, 64, 64, 512, math.ceil(20 / (30 / 330) * neo4j_base.SHARE_MARGIN)]


async def test_embedding_leaves_the_messages_exactly_as_they_were(store: MemoryStore) -> None:
    ids = await append(store, ["immutable one", "immutable two"])
    before = await store.snapshot(P, "t1")
    await store.ensure_vector_index(DIMS, MODEL)
    await store.set_embeddings([(ids[0], [1.0, 2.0, 3.0, 4.0]), (ids[1], [4.0, 3.0, 2.0, 1.0])], MODEL)
    await store.set_embeddings([(ids[0], [1.0, 0.0, 0.0, 0.0])], MODEL)
    after = await store.snapshot(P, "t1")
    assert after.model_dump() == before.model_dump()
    assert (await store.get_message(P, ids[0])).model_dump() == before.messages[0].model_dump()


async def test_writes_by_another_process_are_searched(store: MemoryStore, store_url: str) -> None:
    ids = await append(store, ["a", "b"])
    await store.ensure_vector_index(DIMS, MODEL)
    await store.set_embeddings([(ids[0], [1.0, 0.0, 0.0, 0.0]), (ids[1], [0.0, 1.0, 0.0, 0.0])], MODEL)
    query = [1.0, 0.0, 0.0, 0.0]
    assert [hit.id for hit in await store.vector_search(query, partition=P)][0] == ids[0]

    other = open_store(store_url, Neo4jCredentials())
    await other.initialize()
    try:
        await other.ensure_vector_index(DIMS, MODEL)
        (new_id,) = await append(other, ["c"], start=5)
        # An append (a new vector) then a replacement (b turns towards the query).
        await other.set_embeddings([(new_id, [1.0, 0.5, 0.0, 0.0])], MODEL)
        hits = await store.vector_search(query, partition=P)
        assert [hit.id for hit in hits] == [ids[0], new_id, ids[1]]
        await other.set_embeddings([(ids[1], [1.0, 0.01, 0.0, 0.0])], MODEL)
    finally:
        await other.close()
    hits = await store.vector_search(query, partition=P)
    assert [hit.id for hit in hits] == [ids[0], ids[1], new_id]
    assert hits[1].score == pytest.approx(cosine(query, [1.0, 0.01, 0.0, 0.0]), abs=1e-5)


async def test_facts_are_embedded_searched_and_forgotten_when_cleared(store: MemoryStore) -> None:
    ids = await append(store, ["user asks", "We use JWT access tokens with a 15 minute expiry for the API"])
    (fact,) = await store.add_facts(
        [NewFact(partition=P, text="the API uses JWT access tokens", kind="uses", subject="api auth",
                 source_message_ids=[ids[1]])]
    )  # fmt: skip
    await store.ensure_vector_index(DIMS, MODEL)
    todo = await store.missing_embeddings(P, kinds=["fact"])
    assert [(item.id, item.kind, item.text) for item in todo] == [(fact.id, "fact", fact.text)]
    await store.set_embeddings([(fact.id, [0.0, 0.0, 1.0, 0.0]), (ids[1], [0.0, 0.0, 0.9, 0.1])], MODEL)

    hits = await store.vector_search([0.0, 0.0, 1.0, 0.0], partition=P, kinds=["fact", "message"])
    assert [hit.id for hit in hits] == [fact.id, ids[1]]
    assert (hits[0].kind, hits[0].thread_id, hits[0].snippet) == ("fact", "t1", fact.text)
    assert [hit.id for hit in await store.vector_search([0.0, 0.0, 1.0, 0.0], partition=P, thread_id="t1",
                                                         kinds=["fact"])] == [fact.id]  # fmt: skip

    assert await store.clear_facts(P) == 1
    hits = await store.vector_search([0.0, 0.0, 1.0, 0.0], partition=P, kinds=["fact", "message"])
    assert [hit.id for hit in hits] == [ids[1]]


async def test_a_cleared_fact_takes_its_vector_with_it(store: MemoryStore) -> None:
    (message_id,) = await append(store, ["We use JWT access tokens with a 15 minute expiry for the API"])
    (fact,) = await store.add_facts(
        [NewFact(partition=P, text="the API uses JWT access tokens", kind="uses", subject="api auth",
                 source_message_ids=[message_id])]
    )  # fmt: skip
    await store.ensure_vector_index(DIMS, MODEL)
    await store.set_embeddings([(fact.id, [0.0, 0.0, 1.0, 0.0])], MODEL)
    with pytest.raises(Conflict):
        await store.ensure_vector_index(8, MODEL)
    assert await store.clear_facts(P) == 1
    # No vector is left anywhere, so the index may take another size again.
    await store.ensure_vector_index(8, MODEL)
