"""The fact-layer verbs of `MemoryStore`, once, against both backends.

Facts are written with their EXTRACTED_FROM provenance, replaced by newer facts through
SUPERSEDES, listed, counted by topic and cleared; each thread's fact layer is a switch
(on by default) with an extraction cursor. Every promise of the protocol's docstrings
is checked here on SQLite and on Neo4j through the shared ``store`` fixture.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from palimpsest.graph_schema.errors import Conflict, InvalidInput, NotFound
from palimpsest.graph_schema.identity import fact_id
from palimpsest.graph_schema.models import Fact, NewFact, NewMessage, Role
from palimpsest.graph_schema.store import MemoryStore

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


async def thread(
    store: MemoryStore, thread_id: str, count: int, *, partition: str = "p", project: str | None = "api", start: int = 0
) -> list[str]:
    """A thread of ``count`` assistant messages a minute apart from T0 + ``start`` minutes; their ids."""
    messages = [
        NewMessage(
            role=Role.assistant,
            content=f"{thread_id} message {i}",
            message_id=f"{thread_id}-{i}",
            created_at=T0 + timedelta(minutes=start + i),
        )
        for i in range(count)
    ]
    result = await store.append_messages(partition, thread_id, messages, project=project)
    return result.message_ids


def new_fact(
    text: str, *sources: str, partition: str = "p", kind: str = "technology", subject: str = "auth"
) -> NewFact:
    """A proposed fact citing ``sources``."""
    return NewFact(partition=partition, text=text, kind=kind, subject=subject, source_message_ids=list(sources))


async def test_add_facts_derives_provenance_and_is_idempotent(store: MemoryStore) -> None:
    ids = await thread(store, "t1", 3)
    proposed = [
        new_fact("The API uses JWT bearer tokens for authentication.", ids[2], ids[0]),
        new_fact("The database layer uses SQLAlchemy 2 with asyncpg.", ids[1], subject="database"),
    ]
    first = await store.add_facts(proposed)
    jwt, orm = first
    assert jwt.id == fact_id("p", "The API uses JWT bearer tokens for authentication.", ids[2])
    assert (jwt.thread_id, jwt.project, jwt.partition) == ("t1", "api", "p")
    assert (jwt.kind, jwt.subject) == ("technology", "auth")
    assert jwt.source_message_ids == [ids[0], ids[2]]  # thread order
    assert jwt.created_at == T0 + timedelta(minutes=2)  # the latest source
    assert (jwt.valid_until, jwt.superseded_by) == (None, None)
    assert orm.source_message_ids == [ids[1]] and orm.subject == "database"

    again = await store.add_facts([*proposed, proposed[0]])
    assert again == first
    assert (await store.stats("p")).facts == 2
    assert await store.get_facts("p", [orm.id, "fact_missing", jwt.id]) == [orm, jwt]
    assert await store.get_facts("other", [jwt.id]) == []
    assert await store.add_facts([]) == []


async def test_add_facts_refuses_bad_sources_and_writes_nothing(store: MemoryStore) -> None:
    ids = await thread(store, "t1", 2)
    elsewhere = await thread(store, "t2", 1)
    foreign = await thread(store, "t3", 1, partition="q")
    good = new_fact("The API uses JWT bearer tokens for authentication.", ids[0])
    with pytest.raises(NotFound, match="msg_missing"):
        await store.add_facts([good, new_fact("Caching uses Redis with a five minute TTL.", "msg_missing")])
    with pytest.raises(NotFound):
        await store.add_facts([good, new_fact("Caching uses Redis with a five minute TTL.", foreign[0])])
    with pytest.raises(InvalidInput, match="several threads"):
        await store.add_facts([good, new_fact("Caching uses Redis with a five minute TTL.", ids[1], elsewhere[0])])
    with pytest.raises(InvalidInput, match="same source"):
        await store.add_facts([new_fact("Caching uses Redis with a five minute TTL.", ids[1], ids[1])])
    with pytest.raises(InvalidInput, match="blank"):
        await store.add_facts([good, new_fact("   ", ids[1])])
    assert await store.list_facts("p", current_only=False) == []
    assert (await store.stats(None)).facts == 0


async def test_supersede_marks_the_old_fact_and_hides_it_from_current_lists(store: MemoryStore) -> None:
    ids = await thread(store, "t1", 3)
    old, new, other = await store.add_facts(
        [
            new_fact("The API uses JWT bearer tokens for authentication.", ids[0]),
            new_fact("We switched auth to session cookies with SameSite=strict.", ids[2], kind="change"),
            new_fact("Sessions are stored server side in Redis for now.", ids[1]),
        ]
    )
    at = T0 + timedelta(minutes=2)
    replaced = await store.supersede_fact("p", old.id, new.id, at=at)
    assert (replaced.id, replaced.valid_until, replaced.superseded_by) == (old.id, at, new.id)
    assert await store.supersede_fact("p", old.id, new.id, at=at) == replaced  # again: nothing changes

    current = await store.list_facts("p")
    assert [fact.id for fact in current] == [new.id, other.id]  # newest first, superseded left out
    everything = await store.list_facts("p", current_only=False)
    assert [fact.id for fact in everything] == [new.id, other.id, old.id]
    assert everything[2] == replaced

    with pytest.raises(Conflict, match="already superseded"):
        await store.supersede_fact("p", old.id, other.id, at=at)
    with pytest.raises(Conflict, match="cannot supersede"):
        await store.supersede_fact("p", new.id, old.id, at=at)
    with pytest.raises(InvalidInput, match="itself"):
        await store.supersede_fact("p", other.id, other.id, at=at)
    with pytest.raises(InvalidInput, match="before it was made"):
        await store.supersede_fact("p", new.id, other.id, at=T0)
    with pytest.raises(NotFound, match="fact_missing"):
        await store.supersede_fact("p", other.id, "fact_missing", at=at)
    with pytest.raises(NotFound):
        await store.supersede_fact("q", other.id, new.id, at=at)
    assert (await store.get_facts("p", [other.id]))[0].valid_until is None


async def test_list_facts_filters_and_limits(store: MemoryStore) -> None:
    api = await thread(store, "t1", 2, project="api")
    web = await thread(store, "t2", 2, project="web", start=10)
    foreign = await thread(store, "t3", 1, partition="q")
    await store.add_facts(
        [
            new_fact("The API uses JWT bearer tokens for authentication.", api[0]),
            new_fact("The API database is PostgreSQL 16 behind pgbouncer.", api[1], subject="database"),
            new_fact("The web app uses NextAuth for authentication flows.", web[0]),
            new_fact("The web app is configured to build with Vite 5.", web[1], kind="configuration", subject="build"),
        ]
    )
    await store.add_facts([new_fact("The q partition also uses JWT for auth here.", foreign[0], partition="q")])
    texts = lambda facts: [fact.text.split()[1:3] for fact in facts]  # noqa: E731
    assert texts(await store.list_facts("p")) == [["web", "app"], ["web", "app"], ["API", "database"], ["API", "uses"]]
    assert [f.thread_id for f in await store.list_facts("p", project="api")] == ["t1", "t1"]
    assert [f.thread_id for f in await store.list_facts("p", subject="auth")] == ["t2", "t1"]
    assert [f.subject for f in await store.list_facts("p", thread_id="t2")] == ["build", "auth"]
    assert len(await store.list_facts("p", limit=1)) == 1
    assert len(await store.list_facts(None, subject="auth")) == 3
    assert [f.partition for f in await store.list_facts("q")] == ["q"]
    with pytest.raises(InvalidInput):
        await store.list_facts("p", limit=0)


async def test_fact_stats_groups_by_topic_and_kind(store: MemoryStore) -> None:
    ids = await thread(store, "t1", 4)
    other = await thread(store, "t2", 1)
    jwt, cookies, pg, _ = await store.add_facts(
        [
            new_fact("The API uses JWT bearer tokens for authentication.", ids[0]),
            new_fact("We switched auth to session cookies with SameSite=strict.", ids[2], kind="change"),
            new_fact("The API database is PostgreSQL 16 behind pgbouncer.", ids[1], subject="database"),
            new_fact("Decision: keep the auth middleware in one module only.", ids[3], kind="decision"),
        ]
    )
    await store.add_facts([new_fact("The second thread configured Redis for sessions.", other[0], subject="cache")])
    await store.supersede_fact("p", jwt.id, cookies.id, at=cookies.created_at)
    stats = await store.fact_stats("p")
    assert (stats.facts, stats.current, stats.superseded) == (5, 4, 1)
    assert stats.by_kind == {"change": 1, "decision": 1, "technology": 3}
    assert [(t.subject, t.current, t.superseded) for t in stats.topics] == [
        ("auth", 2, 1),
        ("cache", 1, 0),
        ("database", 1, 0),
    ]
    assert stats.topics[0].kinds == {"technology": 1, "change": 1, "decision": 1}
    one = await store.fact_stats("p", thread_id="t2")
    assert (one.thread_id, one.facts, [t.subject for t in one.topics]) == ("t2", 1, ["cache"])
    empty = await store.fact_stats("q")
    assert (empty.facts, empty.topics, empty.by_kind) == (0, [], {})
    assert pg.subject == "database"


async def test_clear_facts_restores_what_cleared_facts_superseded(store: MemoryStore) -> None:
    first = await thread(store, "t1", 2)
    second = await thread(store, "t2", 2, start=10)
    foreign = await thread(store, "t3", 1, partition="q")
    jwt, keep = await store.add_facts(
        [
            new_fact("The API uses JWT bearer tokens for authentication.", first[0]),
            new_fact("The API database is PostgreSQL 16 behind pgbouncer.", first[1], subject="database"),
        ]
    )
    (cookies,) = await store.add_facts([new_fact("We switched auth to session cookies.", second[0], kind="change")])
    (q_fact,) = await store.add_facts([new_fact("The q partition uses JWT for auth too.", foreign[0], partition="q")])
    await store.supersede_fact("p", jwt.id, cookies.id, at=cookies.created_at)
    await store.advance_fact_cursor("p", "t2", 1)
    await store.advance_fact_cursor("p", "t1", 1)

    assert await store.clear_facts("p", "t2") == 1
    assert await store.get_facts("p", [cookies.id]) == []
    restored = (await store.get_facts("p", [jwt.id]))[0]
    assert (restored.valid_until, restored.superseded_by) == (None, None)
    assert (await store.fact_layer("p", "t2")).extracted_seq == -1
    assert (await store.fact_layer("p", "t1")).extracted_seq == 1
    assert [hit.id for hit in await store.search_text("cookies", partition="p", kinds=("fact",))] == []

    with pytest.raises(NotFound):
        await store.clear_facts("p", "t3")  # a thread of another partition
    assert await store.clear_facts("p") == 2
    assert await store.list_facts("p", current_only=False) == []
    assert (await store.fact_layer("p", "t1")).extracted_seq == -1
    assert await store.get_facts("q", [q_fact.id]) == [q_fact]
    assert await store.clear_facts("p") == 0
    assert keep.subject == "database"


async def test_fact_search_hits_carry_their_thread(store: MemoryStore) -> None:
    ids = await thread(store, "t1", 1)
    await thread(store, "t2", 1)
    (fact,) = await store.add_facts([new_fact("Background jobs use Celery with a Redis broker.", ids[0])])
    hits = await store.search_text("celery broker", partition="p", kinds=("fact",))
    assert [(hit.id, hit.kind, hit.thread_id) for hit in hits] == [(fact.id, "fact", "t1")]
    assert await store.search_text("celery", partition="p", thread_id="t2", kinds=("fact",)) == []
    assert await store.search_text("celery", partition="q", kinds=("fact",)) == []


async def test_fact_layer_switch_and_cursor(store: MemoryStore) -> None:
    await thread(store, "t1", 3)
    await thread(store, "t2", 1)
    await thread(store, "t3", 1, partition="q")
    state = await store.fact_layer("p", "t1")
    # On by default: every thread is extracted unless turned off.
    assert (state.thread_id, state.partition, state.enabled, state.extracted_seq) == ("t1", "p", True, -1)
    assert sorted(s.thread_id for s in await store.fact_layer_threads("p")) == ["t1", "t2"]

    off = await store.set_fact_layer("p", "t2", False)
    assert (off.enabled, off.extracted_seq) == (False, -1)
    await store.set_fact_layer("q", "t3", False)
    assert [s.thread_id for s in await store.fact_layer_threads("p")] == ["t1"]
    assert [s.thread_id for s in await store.fact_layer_threads(None)] == ["t1"]
    assert (await store.set_fact_layer("q", "t3", True)).enabled is True
    assert sorted(s.thread_id for s in await store.fact_layer_threads(None)) == ["t1", "t3"]

    assert (await store.advance_fact_cursor("p", "t1", 1)).extracted_seq == 1
    assert (await store.advance_fact_cursor("p", "t1", 0)).extracted_seq == 1  # never back
    assert (await store.advance_fact_cursor("p", "t1", 2)).extracted_seq == 2
    with pytest.raises(InvalidInput, match="outside"):
        await store.advance_fact_cursor("p", "t1", 3)
    with pytest.raises(InvalidInput, match="outside"):
        await store.advance_fact_cursor("p", "t1", -2)

    off = await store.set_fact_layer("p", "t1", False)
    assert (off.enabled, off.extracted_seq) == (False, 2)
    assert await store.fact_layer_threads("p") == []
    assert (await store.fact_layer(None, "t1")).enabled is False

    # A cursor moved on a thread turned off leaves it off; on a thread never switched, on.
    await store.advance_fact_cursor("p", "t2", 0)
    assert (await store.fact_layer("p", "t2")).enabled is False
    await thread(store, "t4", 1)
    await store.advance_fact_cursor("p", "t4", 0)
    assert (await store.fact_layer("p", "t4")).enabled is True

    for call in (
        store.fact_layer("p", "missing"),
        store.fact_layer("p", "t3"),
        store.set_fact_layer("p", "t3", True),
        store.advance_fact_cursor("p", "t3", 0),
    ):
        with pytest.raises(NotFound):
            await call
    assert (await store.fact_layer("q", "t3")).enabled is True


async def test_new_fact_model_refuses_what_can_never_be_stored() -> None:
    with pytest.raises(ValueError):
        NewFact(partition="p", text="x" * 2001, kind="technology", subject="auth", source_message_ids=["m"])
    with pytest.raises(ValueError):
        NewFact(partition="p", text="The API uses JWT.", kind="technology", subject="auth", source_message_ids=[])
    assert Fact(id="fact_1", partition="p", text="t", kind="k", created_at=T0).subject is None
