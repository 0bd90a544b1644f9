"""The one seam between Palimpsest and a database: the `MemoryStore` protocol.

Its docstrings are the contract both backends (`sqlite.py`, `neo4j.py`) implement and
the contract suite (`tests/test_store_contract.py`) checks. The verbs are domain verbs;
no query string ever crosses this line.

Partitions: every read that takes ``partition`` only sees that partition. ``None``
means "every partition" and is only passed where crossing partitions is explicit (the
CLI's ``--all-partitions``, ``doctor``, ``migrate``). An id that exists in another
partition than the one asked is reported as unknown, so partitions never leak.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from graph_schema.errors import InvalidInput
from graph_schema.models import (
    AppendResult,
    ExpandPage,
    FrontierItem,
    Message,
    NewMessage,
    NewSummary,
    SearchHit,
    SearchKind,
    StoreStats,
    Summary,
    SummaryDag,
    Thread,
    ThreadBacklog,
    ThreadSnapshot,
)


@runtime_checkable
class MemoryStore(Protocol):
    """Where threads, messages and the summary DAG live."""

    #: ``"sqlite"`` or ``"neo4j"``; shown by ``stats``.
    kind: str

    async def initialize(self) -> None:
        """Connect and create the schema (tables or constraints and indexes) idempotently.

        Called once, explicitly, from the server's lifespan or a CLI command; never
        from ``__init__``.

        :raises StoreUnavailable: if the database cannot be reached.
        """
        ...

    async def close(self) -> None:
        """Release connections; the store is unusable afterwards. Safe to call twice."""
        ...

    # -- threads and messages -------------------------------------------------------

    async def append_messages(
        self,
        partition: str,
        thread_id: str,
        messages: Sequence[NewMessage],
        *,
        project: str | None = None,
    ) -> AppendResult:
        """Append messages to the end of a thread in one transaction, creating the thread.

        Each new message gets the next ``seq`` (0-based, no gap even under concurrent
        writers), a NEXT link from its predecessor, a ``sha256`` and a token estimate.
        A message whose ``message_id`` the thread already holds (or that repeats one
        earlier in the same call) is a duplicate: it is counted, its existing id
        returned, and nothing is written for it. A message without ``message_id`` gets
        a fresh random source id.

        :raises InvalidInput: if the batch is over ``MAX_BATCH``, a content is over
            ``MAX_MESSAGE_BYTES`` or not valid UTF-8 (lone surrogates), or a name is
            empty or too long; nothing is written.
        :raises Conflict: if the thread exists in another partition.
        """
        ...

    async def get_thread(self, partition: str | None, thread_id: str) -> Thread:
        """One thread with its message count.

        :raises NotFound: if the thread does not exist in the partition.
        """
        ...

    async def list_threads(self, partition: str | None, *, limit: int = 100) -> list[Thread]:
        """Threads, most recently updated first."""
        ...

    async def get_messages(
        self,
        partition: str | None,
        thread_id: str,
        *,
        first_seq: int = 0,
        last_seq: int | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        """Messages of a thread with ``first_seq <= seq <= last_seq``, in seq order.

        :raises NotFound: if the thread does not exist in the partition.
        """
        ...

    async def get_message(self, partition: str | None, message_id: str) -> Message:
        """One message by its stored id (``msg_...``).

        :raises NotFound: if no such message exists in the partition.
        """
        ...

    async def search_text(
        self,
        query: str,
        *,
        partition: str | None,
        thread_id: str | None = None,
        kinds: Sequence[SearchKind] = ("message", "summary"),
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 20,
    ) -> list[SearchHit]:
        """Ranked full-text search (BM25-like), best first.

        Any user string is safe: query-language syntax (quotes, ``*``, ``:``, ``AND``,
        unbalanced brackets) is treated as plain words, never an error. A query with no
        word characters returns no hits.
        """
        ...

    async def stats(self, partition: str | None) -> StoreStats:
        """Counts of threads, messages, summaries by level and facts."""
        ...

    # -- the summary DAG ------------------------------------------------------------

    async def count_uncovered(self, partition: str, thread_id: str) -> int:
        """How many messages of the thread no summary covers yet.

        :raises NotFound: if the thread does not exist in the partition.
        """
        ...

    async def uncovered_messages(
        self, partition: str, thread_id: str, *, limit: int | None = None
    ) -> list[Message]:
        """Messages no summary covers, oldest first.

        :raises NotFound: if the thread does not exist in the partition.
        """
        ...

    async def uncovered_summaries(self, partition: str, thread_id: str, level: int) -> list[Summary]:
        """Summaries of one level no higher summary covers, in thread order."""
        ...

    async def persist_summary(self, summary: NewSummary) -> Summary:
        """Write a summary, its SUMMARIZES edges and its digest in one transaction.

        Level 1 summarizes messages, level n summarizes summaries of level n-1. The
        store derives seq range, time range, message count, source tokens and the
        Merkle digest from the children. Either all of it is written or nothing.

        :raises NotFound: if a child does not exist in the summary's thread and partition.
        :raises Conflict: if a child is already covered by another summary (which also
            refuses a second run of the same compaction).
        :raises InvalidInput: if the children are of the wrong level, repeat, are not a
            contiguous run in thread order, or the summary is not shorter in tokens
            than its children together.
        """
        ...

    async def get_summary(self, partition: str | None, summary_id: str) -> Summary:
        """One summary with its ordered ``child_ids`` and its ``parent_id``.

        :raises NotFound: if no such summary exists in the partition.
        """
        ...

    async def expand(
        self,
        partition: str | None,
        summary_id: str,
        *,
        depth: int | None = None,
        limit: int = 200,
        cursor: str | None = None,
    ) -> ExpandPage:
        """What a summary covers, in thread order, a page at a time.

        ``depth=None`` gives the original messages, verbatim; ``depth=1`` the direct
        children; ``depth=d`` the descendants ``d`` levels down (messages once level 0
        is reached). ``cursor`` is the ``next_cursor`` of the previous page.

        :raises NotFound: if no such summary exists in the partition.
        :raises InvalidInput: if the cursor is not one this store handed out, or depth < 1.
        """
        ...

    async def covered_by(self, message_ids: Sequence[str]) -> dict[str, list[str]]:
        """For each message id, the chain of summaries above it, lowest level first.

        Unknown or uncovered ids map to an empty list.
        """
        ...

    async def frontier(self, partition: str, thread_id: str) -> list[FrontierItem]:
        """The top summaries and uncovered messages, which together partition the thread.

        :raises NotFound: if the thread does not exist in the partition.
        """
        ...

    async def summary_dag(self, partition: str, thread_id: str) -> SummaryDag:
        """Every summary of a thread, the edges between summaries, and the frontier.

        :raises NotFound: if the thread does not exist in the partition.
        """
        ...

    async def compaction_candidates(
        self, partition: str | None, *, min_uncovered: int, limit: int
    ) -> list[ThreadBacklog]:
        """Threads with at least ``min_uncovered`` uncovered messages, most first."""
        ...

    async def snapshot(self, partition: str | None, thread_id: str) -> ThreadSnapshot:
        """A whole thread, messages and summaries with their children, for ``doctor``.

        :raises NotFound: if the thread does not exist in the partition.
        """
        ...


@dataclass(frozen=True)
class Neo4jCredentials:
    """How to log in to a Neo4j server; the URI travels separately in the store URI."""

    user: str = "neo4j"
    password: str | None = None
    database: str = "neo4j"


SQLITE_PREFIX = "sqlite:///"
NEO4J_SCHEMES = ("neo4j://", "neo4j+s://", "neo4j+ssc://", "bolt://", "bolt+s://", "bolt+ssc://")


def open_store(uri: str, credentials: Neo4jCredentials | None = None) -> MemoryStore:
    """A store for a URI, not yet initialized (call ``await store.initialize()``).

    ``sqlite:///PATH`` (``sqlite:////abs/path`` for an absolute path, as in SQLAlchemy)
    or ``sqlite:///:memory:``; ``neo4j://``, ``bolt://`` and their ``+s`` forms.

    :raises InvalidInput: if the URI names no known store.
    """
    if uri.startswith(SQLITE_PREFIX):
        from graph_schema.sqlite import SqliteStore

        return SqliteStore(uri[len(SQLITE_PREFIX) :])
    if uri.startswith(NEO4J_SCHEMES):
        from graph_schema.neo4j import Neo4jStore

        return Neo4jStore(uri, credentials or Neo4jCredentials())
    raise InvalidInput(
        f"unknown store URI {uri!r}: use sqlite:///PATH, sqlite:///:memory:, "
        "neo4j://HOST:PORT or bolt://HOST:PORT"
    )
