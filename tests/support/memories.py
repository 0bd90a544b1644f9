"""A memory with every kind of record in it, shared by the export, import and migrate tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from palimpsest.graph_schema.models import NewFact, NewMessage, NewSummary, Role
from palimpsest.graph_schema.store import MemoryStore

T0 = datetime(2024, 5, 1, 9, 0, 0, 123456, tzinfo=UTC)


MODEL = "test-model"


async def build_memory(store: MemoryStore) -> None:
    """Thread t1 (10 messages, two L1 summaries and an L2 over them), facts, vectors; thread t2 bare."""
    messages = [
        NewMessage(
            role=Role.user if i % 2 == 0 else Role.assistant,
            content=f"message {i}: " + "the deploy pipeline needs a cache " * 8,
            message_id=f"src-{i}",
            created_at=T0 + timedelta(minutes=i),
            metadata={"turn": i, "é": "ü"} if i % 3 == 0 else {},
            tool_call_id="call-1" if i == 4 else None,
        )
        for i in range(10)
    ]
    ids = (await store.append_messages("p", "t1", messages, project="api")).message_ids
    first = await store.persist_summary(summary("t1", 1, ids[0:4]))
    second = await store.persist_summary(summary("t1", 1, ids[4:8]))
    await store.persist_summary(summary("t1", 2, [first.id, second.id]))
    old, new = await store.add_facts(
        [
            NewFact(
                partition="p",
                text="The cache is Redis.",
                kind="technology",
                subject="cache",
                source_message_ids=[ids[1]],
            ),
            NewFact(
                partition="p",
                text="The cache is Valkey.",
                kind="technology",
                subject="cache",
                source_message_ids=[ids[7]],
            ),
        ]
    )
    await store.supersede_fact("p", old.id, new.id, at=new.created_at)
    await store.append_messages("q", "t2", [NewMessage(role=Role.user, content="hello", created_at=T0)])
    await store.ensure_vector_index(4, MODEL)
    await store.set_embeddings([(ids[0], [1.0, 2.0, 0.0, 0.0]), (first.id, [0.0, 0.0, 3.0, 4.0])], MODEL)


def summary(thread_id: str, level: int, child_ids: list[str]) -> NewSummary:
    return NewSummary(
        thread_id=thread_id, partition="p", level=level, text=f"level {level} summary", tokens=4, summarizer="test",
        child_ids=child_ids,
    )  # fmt: skip
