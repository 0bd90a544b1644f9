"""Sessions named and dated: each thread by what it was about, when its own messages were written, sortable.

A thread id says nothing, and a thread's ``updated_at`` is when a hook stored it, not
when the session happened. So a session is listed by the "where things stand" reading
of it (`server/retrieval/standing.py`: its first request, how it ended, its branch) and
dated by its own messages' ``created_at``: the first message and the last.

Why a cache: reading where a session stands reads up to its last 800 messages, and a
list of fifty sessions would read tens of thousands of messages on every view. Stored
messages never change and a thread only grows, so what was read of a thread stays
true as long as its message count does: rows are kept per (partition, thread, message
count), and a thread that grew is read again. Sorting needs only the dates, which cost
two one-message reads a thread; the standing is read only for the rows on the page.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.models import Thread
from palimpsest.graph_schema.store import MemoryStore
from palimpsest.scheduler.session_facts import clip
from palimpsest.server.retrieval.session_blocks import ASK_SHORT, ENDING_WORDS
from palimpsest.server.retrieval.standing import Standing, read_standing

#: Threads of a partition listed, most recently stored first.
THREADS_LISTED = 500
#: Sessions on one page of the list.
SESSIONS_PAGE = 50
#: Threads whose dates and standing are remembered.
CACHED = 5_000

#: A thread's place in the cache: partition, thread id, message count.
Key = tuple[str, str, int]
SessionSort = Literal["newest", "oldest", "messages"]
SORTS: dict[str, str] = {"newest": "newest first", "oldest": "oldest first", "messages": "most messages"}


@dataclass
class Span:
    """When a session's own messages were written: its first and last message's ``created_at``."""

    first_at: datetime | None
    last_at: datetime | None


@dataclass
class About:
    """What a session was about and how it ended (`read_standing`)."""

    goal: str | None
    ended: str | None
    branch: str | None
    is_work: bool


#: Requests named in a session's title before "and N more".
TITLE_ASKS = 3


def about(standing: Standing) -> About:
    """A session's title from its distinct requests, and its ending as the start memory words it."""
    asks = [clip(ask.text, ASK_SHORT) for ask in standing.asks]
    goal = " · ".join(asks[:TITLE_ASKS]) if asks else None
    if goal and len(asks) > TITLE_ASKS:
        goal += f" · and {len(asks) - TITLE_ASKS} more"
    ending = standing.ending
    ended = f"{ENDING_WORDS[ending.kind]}: {ending.brief or ending.conclusion}" if ending else None
    return About(goal, ended, standing.branch, standing.is_work)


@dataclass
class SessionRow:
    """One session as listed."""

    thread: Thread
    span: Span
    about: About | None = None

    @property
    def partition(self) -> str:
        """The agent it came from."""
        return self.thread.partition

    def details(self) -> list[str]:
        """Agent, project, branch, message count: only those known (no empty separators)."""
        parts = [f"agent {self.thread.partition}"]
        if self.thread.project:
            parts.append(f"project {self.thread.project}")
        if self.about is not None and self.about.branch:
            parts.append(f"branch {self.about.branch}")
        parts.append(f"{self.thread.message_count} message{'s' if self.thread.message_count != 1 else ''}")
        return parts


class SessionCache:
    """Dates and standings of threads, per (partition, thread, message count): see the module docstring."""

    def __init__(self, size: int = CACHED) -> None:
        self.size = size
        self._spans: OrderedDict[Key, Span] = OrderedDict()
        self._about: OrderedDict[Key, About] = OrderedDict()

    @staticmethod
    def _key(thread: Thread) -> Key:
        return (thread.partition, thread.id, thread.message_count)

    def _keep(self, table: OrderedDict[Key, Any], key: Key) -> None:
        table.move_to_end(key)
        while len(table) > self.size:
            table.popitem(last=False)

    async def span(self, store: MemoryStore, thread: Thread) -> Span:
        """The first and last message's times (None for a thread with no message to read)."""
        key = self._key(thread)
        if key not in self._spans:
            first = await store.get_messages(thread.partition, thread.id, limit=1)
            last = await store.get_messages(thread.partition, thread.id, first_seq=max(thread.message_count - 1, 0))
            self._spans[key] = Span(first[0].created_at if first else None, last[-1].created_at if last else None)
        self._keep(self._spans, key)
        return self._spans[key]

    async def about(self, store: MemoryStore, thread: Thread) -> About:
        """Where the session stands, read by `read_standing`."""
        key = self._key(thread)
        if key not in self._about:
            standing = await read_standing(store, thread.partition, thread)
            self._about[key] = about(standing)
        self._keep(self._about, key)
        return self._about[key]

    async def row(self, store: MemoryStore, thread: Thread) -> SessionRow:
        """One session, dated and named."""
        return SessionRow(thread, await self.span(store, thread), await self.about(store, thread))


@dataclass
class SessionList:
    """One page of sessions, and what the filters can choose from."""

    rows: list[SessionRow]
    total: int
    page: int
    pages: int
    sort: str
    project: str | None
    projects: list[str]


def parse_sort(raw: str | None) -> SessionSort:
    """The sort a query names (newest by default).

    Raises:
        InvalidInput: for any other name.
    """
    if raw in (None, "", "newest"):
        return "newest"
    if raw == "oldest":
        return "oldest"
    if raw == "messages":
        return "messages"
    raise InvalidInput(f"unknown sort {raw!r}: use {', '.join(SORTS)}")


def parse_list_page(raw: str | None) -> int:
    """A page number from a query (1 when none); checked against the list's length later.

    Raises:
        InvalidInput: for anything but a whole number from 1.
    """
    if raw in (None, ""):
        return 1
    if raw is None or not raw.isdigit() or int(raw) < 1:
        raise InvalidInput("page must be a whole number from 1")
    return int(raw)


def _sort_key(sort: SessionSort, row: SessionRow) -> tuple[float, str]:
    if sort == "messages":
        return (-row.thread.message_count, row.thread.id)
    when = row.span.first_at if sort == "oldest" else row.span.last_at
    stamp = when.timestamp() if when is not None else float("-inf")
    return (stamp if sort == "oldest" else -stamp, row.thread.id)


async def list_sessions(
    store: MemoryStore,
    cache: SessionCache,
    partitions: Sequence[str],
    *,
    project: str | None,
    sort: SessionSort,
    page: int,
) -> SessionList:
    """The sessions of ``partitions`` (of ``project`` only, when given), sorted, one page of them named.

    Raises:
        InvalidInput: if ``page`` is past the last page.
    """
    threads = [
        thread
        for partition in partitions
        for thread in await store.list_threads(partition, limit=THREADS_LISTED)
        if thread.message_count
    ]
    projects = sorted({thread.project for thread in threads if thread.project})
    chosen = [thread for thread in threads if project is None or thread.project == project]
    rows = [SessionRow(thread, await cache.span(store, thread)) for thread in chosen]
    rows.sort(key=lambda row: _sort_key(sort, row))
    pages = max(1, -(-len(rows) // SESSIONS_PAGE))
    if page > pages:
        raise InvalidInput(f"page must be a whole number from 1 to {pages}")
    shown = rows[(page - 1) * SESSIONS_PAGE : page * SESSIONS_PAGE]
    for row in shown:
        row.about = await cache.about(store, row.thread)
    return SessionList(shown, len(rows), page, pages, sort, project, projects)
