"""Messages as a store hands them back, derived by the real `prepare_append`, for the planner and summarizer tests."""

from __future__ import annotations

from collections.abc import Sequence

from palimpsest.graph_schema.models import Message, NewMessage, Role
from palimpsest.graph_schema.prepare import prepare_append

PARTITION = "test-ide"


THREAD = "thread-1"


def stored(new: Sequence[NewMessage], *, tokens: Sequence[int] | None = None, first_seq: int = 1) -> list[Message]:
    """Messages as a store would hand them back, derived by the real `prepare_append`."""
    messages = []
    for index, prepared in enumerate(prepare_append(PARTITION, THREAD, new, None)):
        messages.append(
            Message(
                id=prepared.id,
                source_id=prepared.source_id,
                thread_id=THREAD,
                partition=PARTITION,
                seq=first_seq + index,
                role=Role(prepared.role),
                content=prepared.content,
                sha256=prepared.sha256,
                tokens=prepared.tokens if tokens is None else tokens[index],
                created_at=prepared.created_at,
                tool_call_id=prepared.tool_call_id,
            )
        )
    return messages
