"""Pydantic models of what Palimpsest stores, shared by every backend and every caller.

They are the boundary: the MCP tools, the CLI and the scheduler only ever see these,
never a driver record or a sqlite row, which is what lets the two stores pass one
contract suite.
"""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal, NamedTuple

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
    """Naive datetimes are taken as UTC, aware ones converted, so ordering is total.

    A time whose UTC moment falls outside years 1 to 9999 (``9999-12-31T23:59:59-14:00``)
    is refused with one sentence here, at the boundary every tool, feed and CLI option
    parses through, rather than overflowing later in a store.
    """
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError(f"{value.isoformat()} is out of range: in UTC it falls outside the years 1 to 9999") from None


UtcDatetime = Annotated[datetime, AfterValidator(_as_utc)]
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS)]


class _Model(BaseModel):
    """Every model here builds its validator when first used, not when imported.

    A store imports all of them, but a hook (run after every turn, process start
    included) validates two or three: building the rest at import cost about a third
    of the modules' import time.
    """

    model_config = ConfigDict(defer_build=True)


class Role(StrEnum):
    """Who wrote a message; the four roles every agent transcript uses."""

    user = "user"
    assistant = "assistant"
    system = "system"
    tool = "tool"


class NewMessage(_Model):
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


class Thread(_Model):
    """One conversation, owned by exactly one partition (the IDE it came from)."""

    id: str
    partition: str
    project: str | None = None
    created_at: UtcDatetime
    updated_at: UtcDatetime
    message_count: int = 0


class Message(_Model):
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


class AppendResult(_Model):
    """What one append did: which messages are new, which were already there."""

    thread_id: str
    partition: str
    appended: int
    duplicates: int
    message_ids: list[str] = Field(description="Ids of every message of the call, in call order.")
    uncompacted: int = Field(description="Messages of the thread no summary covers yet.")


class NewSummary(_Model):
    """A summary as the compaction engine proposes it; the store derives the rest."""

    model_config = ConfigDict(extra="forbid")

    thread_id: str
    partition: str
    level: Annotated[int, Field(ge=1)]
    text: str
    tokens: Annotated[int, Field(ge=0)]
    summarizer: str
    child_ids: Annotated[list[str], Field(min_length=1)]


class Summary(_Model):
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


class Fact(_Model):
    """A short technical fact extracted from messages, recalled across sessions."""

    id: str
    partition: str
    project: str | None = None
    text: str
    kind: str
    created_at: UtcDatetime
    valid_until: UtcDatetime | None = None
    source_message_ids: list[str] = Field(default_factory=list)
    subject: str | None = Field(None, description="Topic key (lowercase) that supersession compares.")
    thread_id: str | None = Field(None, description="The thread of the messages it was extracted from.")
    superseded_by: str | None = Field(None, description="The newer fact that replaced it, if any.")


# -- the fact layer: facts as extraction proposes them, per-thread state, counts ------

#: Longest fact text accepted, in characters: a fact is a sentence, not a document.
MAX_FACT_CHARS = 2000


class NewFact(_Model):
    """A fact as extraction proposes it; the store derives id, thread, project and time.

    Its id is ``identity.fact_id(partition, text, source_message_ids[0])``, so proposing
    the same fact from the same message twice stores it once.
    """

    model_config = ConfigDict(extra="forbid")

    partition: Name
    text: Annotated[str, Field(min_length=1, max_length=MAX_FACT_CHARS)]
    kind: Name
    subject: Name
    source_message_ids: Annotated[list[Name], Field(min_length=1)]


class FactLayerState(_Model):
    """Whether a thread's fact layer is on, and how far extraction has read it."""

    thread_id: str
    partition: str
    enabled: bool = Field(description="On by default: facts are extracted unless `kg off` turned the thread off.")
    extracted_seq: int = Field(description="Seq of the last message extraction has read; -1 for none.")


class FactTopic(_Model):
    """How many facts one topic (subject) holds, current and superseded, by kind."""

    subject: str
    current: int
    superseded: int
    kinds: dict[str, int] = Field(description="Facts of the topic by kind, current and superseded.")


class FactStats(_Model):
    """Facts of a partition (or one thread) grouped by topic and by kind."""

    partition: str | None
    thread_id: str | None
    facts: int
    current: int
    superseded: int
    by_kind: dict[str, int]
    topics: list[FactTopic] = Field(description="Topics with the most facts first.")

    @classmethod
    def from_counts(
        cls, partition: str | None, thread_id: str | None, counts: list[tuple[str, str, bool, int]]
    ) -> FactStats:
        """Assemble the stats from ``(subject, kind, current, count)`` rows, as both stores read them."""
        topics: dict[str, FactTopic] = {}
        by_kind: dict[str, int] = {}
        for subject, kind, is_current, count in counts:
            topic = topics.setdefault(subject, FactTopic(subject=subject, current=0, superseded=0, kinds={}))
            if is_current:
                topic.current += count
            else:
                topic.superseded += count
            topic.kinds[kind] = topic.kinds.get(kind, 0) + count
            by_kind[kind] = by_kind.get(kind, 0) + count
        ordered = sorted(topics.values(), key=lambda t: (-(t.current + t.superseded), t.subject))
        current = sum(topic.current for topic in ordered)
        superseded = sum(topic.superseded for topic in ordered)
        return cls(
            partition=partition,
            thread_id=thread_id,
            facts=current + superseded,
            current=current,
            superseded=superseded,
            by_kind=dict(sorted(by_kind.items())),
            topics=ordered,
        )


class ExpandPage(_Model):
    """One page of an expansion: messages or summaries, in thread order."""

    summary_id: str
    items: list[Message | Summary]
    total: int
    next_cursor: str | None = None


class FrontierItem(_Model):
    """One element of a thread's frontier: a top summary or an uncovered message."""

    kind: Literal["summary", "message"]
    id: str
    level: int = Field(description="0 for a message.")
    first_seq: int
    last_seq: int
    tokens: int


class DagEdge(_Model):
    """A SUMMARIZES edge between two summaries (edges to messages are given by seq ranges)."""

    parent_id: str
    child_id: str
    position: int


class SummaryDag(_Model):
    """Every summary of a thread and how they nest, small enough to draw."""

    thread_id: str
    partition: str
    nodes: list[Summary]
    edges: list[DagEdge]
    frontier: list[FrontierItem]


class ContextFrontier(_Model):
    """A thread's frontier with what context assembly reads of it first, from one read.

    Why one read: under load every sequential read of a call waits its turn for the
    store, and assembling a context used to need the frontier before it knew which
    summaries and messages to read.
    """

    items: list[FrontierItem] = Field(description="The whole frontier, in thread order.")
    summaries: list[Summary] = Field(description="The frontier's summaries whole, in thread order.")
    newest: list[Message] = Field(
        description="The newest uncovered messages, oldest first: the run `newest_page` picks (see its docstring)."
    )


class ArchivedRange(_Model):
    """A run of a thread's messages moved out of the live store into an archive file.

    The summaries over them, and this record, stay; the file (the export format) holds
    the whole thread as it was, and ``digest`` is that thread's digest in the file's
    header, so ``doctor`` can prove the file still holds exactly what left the store.
    """

    thread_id: str
    partition: str
    first_seq: int
    last_seq: int
    path: str = Field(description="The archive file holding the originals.")
    digest: str = Field(description="The thread's digest in the archive's header.")
    archived_at: UtcDatetime


class ThreadSnapshot(_Model):
    """Everything of one thread, for checking invariants: messages and summaries with children."""

    thread: Thread
    messages: list[Message]
    summaries: list[Summary]
    archived: list[ArchivedRange] = Field(
        default_factory=list, description="Runs of messages moved to archive files (not in ``messages``)."
    )


class ThreadBacklog(_Model):
    """A thread and how much of it is waiting for compaction."""

    thread_id: str
    partition: str
    uncovered: int


SearchKind = Literal["message", "summary", "fact"]


class SearchHit(_Model):
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


class StoreStats(_Model):
    """Counts of what a store holds, for one partition or all of them."""

    store: str
    partition: str | None
    threads: int
    messages: int
    summaries_by_level: dict[int, int]
    facts: int
    tokens: int
    secrets_redacted: int = Field(
        0, description="Credentials replaced by [secret:KIND:HASH8] before storage (graph_schema/redact.py)."
    )
    archived_messages: int = Field(0, description="Messages moved to archive files (counted in messages too).")
    archived_runs: int = Field(0, description="Runs of messages archived, one archive file each.")
    bytes_on_disk: int | None = Field(
        None,
        description="What the whole store takes on disk: the database, its journal and the vector files beside "
        "it (archives apart); None where the store cannot tell (a Neo4j server).",
    )
    bytes_reclaimable: int | None = Field(
        None,
        description="Of bytes_on_disk, what upkeep gives back without losing anything: free database pages "
        "(reused before the file grows) and dead vector rows (dropped by maintenance's vector_upkeep).",
    )
    archive_bytes: int | None = Field(
        None, description="Archive files beside the store (moved out of it: not in bytes_on_disk)."
    )


# -- maintenance: the background loop's record of what it did ------------------------


class MaintenanceCycle(_Model):
    """One run of a background job (compaction or evolution), kept in the store.

    Recorded by whichever server process held the job's lease, so ``memory_stats`` shows
    what maintenance did lately across every process sharing the store.
    """

    id: str
    job: Name = Field(description="`compaction` or `evolution`.")
    holder: Name = Field(description="The process that ran it: host:pid:random.")
    started_at: UtcDatetime
    finished_at: UtcDatetime
    threads: int = Field(0, ge=0, description="Threads compacted.")
    summaries: int = Field(0, ge=0, description="Summaries written, every level.")
    facts: int = Field(0, ge=0, description="Facts extracted or superseded.")
    steps: dict[str, int] = Field(default_factory=dict, description="What each evolution step counted, by name.")
    errors: list[str] = Field(default_factory=list, description="What went wrong, one sentence each.")


# -- semantic search: what is waiting for a vector --------------------------------------

#: Characters of a node's text handed to an embedder, in `EMBED_PIECE_CHARS` windows.
MAX_EMBED_CHARS = 8192
#: Characters of one window of a long text embedded as its own vector (a piece): what
#: all-MiniLM-L6-v2's 256 word pieces read of the densest text (logs, paths, code: about
#: 2 characters a word piece; prose gives 4), so a window's end is read too. A text this
#: long or shorter (every LoCoMo turn: 474 characters at most) gets exactly one vector.
EMBED_PIECE_CHARS = 512
#: Characters each window shares with the one before, so a sentence cut by a window's
#: end is whole in the next one.
EMBED_PIECE_OVERLAP = 128
#: Vectors of one node at most: bounds what a long node costs to embed, store and search
#: to what 16 short messages cost. 15 windows cover a text's first 6,272 characters and
#: the 16th its last 512 (where a long output ends: the error, the count of failures).
MAX_EMBED_PIECES = 16


class EmbeddingTodo(NamedTuple):
    """A node that has no vector of the current model yet, and the text to embed."""

    id: str
    kind: SearchKind
    text: str


# -- hybrid search: what ranking needs to know about a candidate message ----------------


#: Characters of a message's content a `MessageRef` carries.
REF_OPENING_CHARS = 200


class MessageRef(_Model):
    """Where a message sits in its thread and what its metadata says, without its content
    (bar its opening words).

    Hybrid search reads these for a few hundred candidates per query: enough to see
    which candidates are neighbours and whose metadata (a speaker, a tool) the query
    names, without carrying megabytes of tool output along.
    """

    id: str
    thread_id: str
    partition: str
    seq: int
    role: Role
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: The content's first ``REF_OPENING_CHARS`` characters: where a transcript written
    #: as ``Speaker: text`` names who speaks, which hybrid ranking reads like metadata,
    #: and where it looks for a time written down ("yesterday", "last May").
    opening: str = ""


class VectorCandidates(NamedTuple):
    """A vector search's hits and the `MessageRef` of each message among them.

    Hybrid search needs both, and on a server reading them apart is a second round trip
    on its slowest path (embedding, then the vector index, then the refs).
    """

    hits: list[SearchHit]
    refs: list[MessageRef]


# -- transfer: a stored vector as export and migrate copy it ----------------------------


class StoredVector(NamedTuple):
    """A node's vector as a store holds it, with the model that made it."""

    node_id: str
    model: str
    vector: list[float]


# -- hooks: where reading a transcript stopped ------------------------------------------


class ReadPosition(_Model):
    """Where a hook stopped reading one transcript file of a thread, kept apart from the messages.

    Bookkeeping of this machine (``path`` is a local file), not the conversation: it
    is never exported or migrated with the thread.
    """

    path: str = Field(min_length=1, description="The transcript file, as the agent named it.")
    offset: int = Field(ge=0, description="Byte offset just after the last whole line read.")
    line: int = Field(ge=1, description="Number of the line that starts at `offset`.")
    fingerprint: str = Field(
        "", description="What the file looked like when read (the hook's own format); empty when unknown."
    )


# -- session readings: a model's reading of a session, kept for the start-of-session memory


class SessionReadingRecord(_Model):
    """What a model made of one session, as of its message ``last_seq``: derived, kept apart from the messages.

    Written by maintenance (`scheduler/model_reading.py`), read when a session starts
    (`server/retrieval/standing.py`). The store keeps the sections as the JSON text the
    scheduler validated, so this layer needs no knowledge of them; a reading whose
    answer was unusable is kept too (``sections`` None, ``note`` saying why), so the
    same messages are not sent to the model again. Derived from the messages, so never
    exported: another store makes its own.
    """

    partition: Name
    thread_id: Name
    last_seq: int = Field(ge=0, description="The seq of the thread's last message when it was read.")
    reader: Name = Field(description="Who read it: ``llm:MODEL``.")
    sections: str | None = Field(None, description="The validated reading as JSON; None when the answer was unusable.")
    note: str = Field("", max_length=500, description="Why the answer was unusable; empty when it was used.")
    read_at: UtcDatetime
