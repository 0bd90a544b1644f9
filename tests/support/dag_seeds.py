"""Seeding a store with a summary DAG of known shape, shared by the DAG, frontier and cost tests."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from palimpsest.graph_schema.models import Message, NewMessage, NewSummary, Role, Summary
from palimpsest.graph_schema.store import MemoryStore

P = "ide-a"


T = "thread-1"


BASE = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


#: Content a store must give back byte for byte: CRLF, tabs, NUL, emoji, combining
#: marks, right-to-left text, trailing blanks, markup and query syntax.
TRICKY = [
    "plain words about the refresh token",
    "line one\r\nline two\ttabbed\x00nul  ",
    "emoji 😀👩‍💻 and combining e\u0301 and RTL שלום",
    '{"json": [1, 2, 3], "quote": "\\"", "path": "C:\\\\Users"}',
    "```python\nprint('hi')\n```\n",
    "   leading and trailing blanks   ",
    "AND OR NOT * ? : ( ) [ ] { } ~ ^ \\",
    "x" * 2000,
]


def content(index: int) -> str:
    """The content of message ``index`` of a seeded thread."""
    return f"{TRICKY[index % len(TRICKY)]} #{index}"


async def seed(store: MemoryStore, count: int, *, partition: str = P, thread_id: str = T) -> list[Message]:
    """A thread of ``count`` messages with distinct times, as stored."""
    roles = [Role.user, Role.assistant, Role.tool, Role.assistant]
    await store.append_messages(
        partition,
        thread_id,
        [
            NewMessage(
                role=roles[index % len(roles)],
                content=content(index),
                message_id=f"m{index}",
                created_at=BASE + timedelta(minutes=index, microseconds=index),
            )
            for index in range(count)
        ],
    )
    return await store.get_messages(partition, thread_id)


def proposal(
    children: Sequence[Message | Summary],
    level: int,
    *,
    tokens: int = 1,
    text: str = "a summary",
    partition: str = P,
    thread_id: str = T,
) -> NewSummary:
    """A summary over ``children`` as the compaction engine would propose it."""
    return NewSummary(
        thread_id=thread_id,
        partition=partition,
        level=level,
        text=text,
        tokens=tokens,
        summarizer="test",
        child_ids=[child.id for child in children],
    )


async def persist(store: MemoryStore, children: Sequence[Message | Summary], level: int) -> Summary:
    """Persist a summary over ``children`` and return it as stored."""
    return await store.persist_summary(proposal(children, level))
