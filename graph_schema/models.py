"""Pydantic models of what Palimpsest stores, shared by every backend and every caller.

They are the boundary: the MCP tools, the CLI and the scheduler only ever see these,
never a driver record or a sqlite row, which is what lets the two stores pass one
contract suite.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

#: Largest message content accepted, in UTF-8 bytes. A 1 MB tool result must fit;
#: anything far beyond it is almost certainly a mistake (a binary pasted by accident).
MAX_MESSAGE_BYTES = 4 * 1024 * 1024
#: Largest number of messages one append may carry (one transaction each).
MAX_BATCH = 5000
#: Longest thread id, partition name, project name or source id.
MAX_NAME_CHARS = 512


def utcnow() -> datetime:
    """The current time, timezone-aware in UTC, as every stored timestamp is."""
    return datetime.now(UTC)


def _as_utc(value: datetime) -> datetime:
    """Naive datetimes are taken as UTC, aware ones converted, so ordering is total."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


UtcDatetime = Annotated[datetime, AfterValidator(_as_utc)]
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS)]


class Role(StrEnum):
    """Who wrote a message; the four roles every agent transcript uses."""

    user = "user"
    assistant = "assistant"
    system = "system"
    tool = "tool"


class NewMessage(BaseModel):
    """A message as a caller hands it in, before the store gives it an id and a seq."""

    model_config = ConfigDict(extra="forbid")

    role: Role
    content: str
    message_id: Name | None = Field(
        default=None,
        description="The caller's own id; appending the same one twice to a thread adds nothing.",
    )
    created_at: UtcDatetime | None = None
    tool_call_id: Name | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Thread(BaseModel):
    """One conversation, owned by exactly one partition (the IDE it came from)."""

    id: str
    partition: str
    project: str | None = None
    created_at: UtcDatetime
    updated_at: UtcDatetime
    message_count: int = 0


class Message(BaseModel):
    """A stored message: immutable once written, byte-exact forever."""

    id: str
    source_id: str
    thread_id: str
    partition: str
    project: str | None = None
    seq: int
    role: Role
    content: str
    sha256: str
    tokens: int
    created_at: UtcDatetime
    tool_call_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class AppendResult(BaseModel):
    """What one append did: which messages are new, which were already there."""

    thread_id: str
    partition: str
    appended: int
    duplicates: int
    message_ids: list[str] = Field(description="Ids of every message of the call, in call order.")
    uncompacted: int = Field(description="Messages of the thread no summary covers yet.")


class NewSummary(BaseModel):
    """A summary as the compaction engine proposes it; the store derives the rest."""

    model_config = ConfigDict(extra="forbid")

    thread_id: str
    partition: str
    level: Annotated[int, Field(ge=1)]
    text: str
    tokens: Annotated[int, Field(ge=0)]
    summarizer: str
    child_ids: Annotated[list[str], Field(min_length=1)]


class Summary(BaseModel):
    """A node of the summary DAG: level 1 covers messages, level n covers level n-1."""

    id: str
    thread_id: str
    partition: str
    level: int
    text: str
    tokens: int
    source_tokens: int
    first_seq: int
    last_seq: int
    earliest_at: UtcDatetime
    latest_at: UtcDatetime
    message_count: int
    digest: str
    summarizer: str
    created_at: UtcDatetime
    child_ids: list[str] = Field(default_factory=list)
    parent_id: str | None = None


class Fact(BaseModel):
    """A short technical fact extracted from messages, recalled across sessions."""

    id: str
    partition: str
    project: str | None = None
    text: str
    kind: str
    created_at: UtcDatetime
    valid_until: UtcDatetime | None = None
    source_message_ids: list[str] = Field(default_factory=list)


class ExpandPage(BaseModel):
    """One page of an expansion: messages or summaries, in thread order."""

    summary_id: str
    items: list[Message | Summary]
    total: int
    next_cursor: str | None = None


class FrontierItem(BaseModel):
    """One element of a thread's frontier: a top summary or an uncovered message."""

    kind: Literal["summary", "message"]
    id: str
    level: int = Field(description="0 for a message.")
    first_seq: int
    last_seq: int
    tokens: int


class DagEdge(BaseModel):
    """A SUMMARIZES edge between two summaries (edges to messages are given by seq ranges)."""

    parent_id: str
    child_id: str
    position: int


class SummaryDag(BaseModel):
    """Every summary of a thread and how they nest, small enough to draw."""

    thread_id: str
    partition: str
    nodes: list[Summary]
    edges: list[DagEdge]
    frontier: list[FrontierItem]


class ThreadSnapshot(BaseModel):
    """Everything of one thread, for checking invariants: messages and summaries with children."""

    thread: Thread
    messages: list[Message]
    summaries: list[Summary]


class ThreadBacklog(BaseModel):
    """A thread and how much of it is waiting for compaction."""

    thread_id: str
    partition: str
    uncovered: int


SearchKind = Literal["message", "summary", "fact"]


class SearchHit(BaseModel):
    """One ranked hit of a text search; higher score is better."""

    id: str
    kind: SearchKind
    thread_id: str | None
    partition: str
    score: float
    snippet: str
    created_at: UtcDatetime
    source_id: str | None = None
    level: int | None = None
    role: Role | None = None


class StoreStats(BaseModel):
    """Counts of what a store holds, for one partition or all of them."""

    store: str
    partition: str | None
    threads: int
    messages: int
    summaries_by_level: dict[int, int]
    facts: int
    tokens: int
