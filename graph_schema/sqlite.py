"""The embedded SQLite backend: one file, zero setup, the default store.

It exists so that Palimpsest runs anywhere Python does, with nothing to install, and
still keeps DESIGN's guarantees: WAL and ``BEGIN IMMEDIATE`` let every IDE's own stdio
server share one file without a gap or a duplicate ``seq``; ``UNIQUE(child_id)`` on the
SUMMARIZES table holds invariant 2 in the database itself; FTS5 serves text search.

All ``sqlite3`` work runs in a worker thread (``asyncio.to_thread``) on one connection
guarded by a thread lock, so the event loop never blocks and a cancelled caller never
leaves the connection half-used. Validation and derivation come from ``prepare.py``.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from graph_schema import sqlite_queries as q
from graph_schema.errors import Conflict, InvalidInput, NotFound, StoreUnavailable
from graph_schema.models import (
    AppendResult,
    DagEdge,
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
    utcnow,
)
from graph_schema.prepare import PreparedMessage, decode_cursor, derive_summary, encode_cursor, prepare_append

T = TypeVar("T")

#: How long a writer waits for another process's write transaction before giving up.
BUSY_TIMEOUT_S = 30.0
_INT64_MAX = 2**63 - 1


def _time(value: datetime) -> str:
    """A timestamp as stored: UTC ISO 8601 with microseconds, fixed width (text order = time order)."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def _int64(value: int) -> int:
    """Clamp a caller's integer to what SQLite can bind, so a huge bound is not an error."""
    return max(-_INT64_MAX, min(_INT64_MAX, value))


def _limit(limit: int) -> int:
    """A caller's page size: at least 1 (SQLite would read a negative one as "no limit")."""
    if limit < 1:
        raise InvalidInput(f"limit must be at least 1, got {limit}")
    return _int64(limit)


def _ids(ids: Sequence[str]) -> str:
    return json.dumps(list(ids))


def _translate(exc: sqlite3.Error, path: str) -> Exception:
    """The domain error for a sqlite3 error, so no driver exception leaves this module."""
    text = str(exc)
    if isinstance(exc, sqlite3.IntegrityError):
        if "summarizes.child_id" in text:
            return Conflict("a child is already covered by another summary")
        return Conflict(f"write refused by a store constraint ({text})")
    if isinstance(exc, sqlite3.DataError):
        return InvalidInput(f"value refused by SQLite ({text})")
    if "locked" in text or "busy" in text:
        return StoreUnavailable(f"the SQLite database {path} is locked by another process; try again")
    return StoreUnavailable(f"the SQLite database {path} cannot be used: {text}")


@contextmanager
def _transaction(conn: sqlite3.Connection, mode: str) -> Iterator[None]:
    """One transaction: ``IMMEDIATE`` takes the write lock at once, ``DEFERRED`` gives reads a snapshot."""
    conn.execute(f"BEGIN {mode}")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _message_rows(partition: str, thread_id: str, prepared: Sequence[PreparedMessage]) -> list[tuple[Any, ...]]:
    """Each message's row but for project and seq, which are only known under the lock.

    The columns are those of ``q.INSERT_MESSAGE`` without the 5th and 6th (project, seq);
    metadata is JSON text, ``{}`` without encoding in the common case.
    """
    rows: list[tuple[Any, ...]] = []
    times: dict[datetime, str] = {}
    for index, message in enumerate(prepared):
        try:
            metadata = json.dumps(message.metadata) if message.metadata else "{}"
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"message {index} metadata is not JSON: {exc}") from None
        created_at = times.get(message.created_at)
        if created_at is None:
            created_at = times[message.created_at] = _time(message.created_at)
        rows.append(
            (
                message.id, message.source_id, thread_id, partition, message.role, message.content,
                message.sha256, message.tokens, created_at, message.tool_call_id, metadata,
            )
        )  # fmt: skip
    return rows


def _message(row: sqlite3.Row) -> Message:
    return Message.model_validate({**dict(row), "metadata": json.loads(row["metadata"])})


def _summary(row: sqlite3.Row, child_ids: list[str], parent_id: str | None) -> Summary:
    return Summary.model_validate({**dict(row), "child_ids": child_ids, "parent_id": parent_id})


def _thread(row: sqlite3.Row) -> Thread:
    return Thread.model_validate(dict(row))


def _require_thread(conn: sqlite3.Connection, partition: str | None, thread_id: str) -> sqlite3.Row:
    row = conn.execute(q.THREAD, {"thread_id": thread_id, "partition": partition}).fetchone()
    if row is None:
        raise NotFound("thread", thread_id)
    return row


def _summaries(conn: sqlite3.Connection, rows: Sequence[sqlite3.Row]) -> list[Summary]:
    """Summaries with their ordered child ids and their parent, two queries for any number."""
    ids = _ids([row["id"] for row in rows])
    children: dict[str, list[str]] = {}
    for parent_id, child_id in conn.execute(q.CHILDREN, {"ids": ids}):
        children.setdefault(parent_id, []).append(child_id)
    parents = dict(conn.execute(q.PARENTS, {"ids": ids}).fetchall())
    return [_summary(row, children.get(row["id"], []), parents.get(row["id"])) for row in rows]


def _frontier(conn: sqlite3.Connection, thread_id: str) -> list[FrontierItem]:
    items = [
        FrontierItem(kind="summary", id=r[0], level=r[1], first_seq=r[2], last_seq=r[3], tokens=r[4])
        for r in conn.execute(q.TOP_SUMMARIES, {"thread_id": thread_id})
    ]
    items += [
        FrontierItem(kind="message", id=r[0], level=0, first_seq=r[1], last_seq=r[1], tokens=r[2])
        for r in conn.execute(q.UNCOVERED_SPANS, {"thread_id": thread_id})
    ]
    items.sort(key=lambda item: item.first_seq)
    return items


class SqliteStore:
    """A `MemoryStore` in one SQLite file (or ``:memory:``), shared safely by several processes."""

    kind = "sqlite"

    def __init__(self, path: str) -> None:
        """Remember where the database lives; nothing is opened until ``initialize()``."""
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    # -- plumbing -------------------------------------------------------------------

    async def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` on the connection in a worker thread, translating every sqlite3 error."""
        return await asyncio.to_thread(self._locked, work)

    def _locked(self, work: Callable[[sqlite3.Connection], T]) -> T:
        with self._lock:
            if self._conn is None:
                raise StoreUnavailable("the SQLite store is not open: call initialize() first")
            try:
                return work(self._conn)
            except sqlite3.Error as exc:
                raise _translate(exc, self.path) from exc
            except UnicodeEncodeError as exc:
                raise InvalidInput(f"an argument is not valid UTF-8 (position {exc.start})") from exc

    async def initialize(self) -> None:
        """Open the file (creating its directory), set WAL and timeouts, apply the schema."""
        schema = resources.files("graph_schema").joinpath("sql/schema.sql").read_text("utf-8")
        await asyncio.to_thread(self._open, schema)

    def _open(self, schema: str) -> None:
        with self._lock:
            conn = self._conn
            try:
                if conn is None:
                    target: str | Path = self.path
                    if self.path != ":memory:":
                        target = Path(self.path).expanduser()
                        target.parent.mkdir(parents=True, exist_ok=True)
                    conn = sqlite3.connect(
                        target, timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False
                    )
                    conn.row_factory = sqlite3.Row
                conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                conn.execute("PRAGMA foreign_keys = ON")
                conn.executescript(schema)
            except (sqlite3.Error, OSError) as exc:
                if conn is not None and self._conn is None:
                    conn.close()
                if isinstance(exc, OSError):
                    raise StoreUnavailable(f"cannot create the SQLite database {self.path}: {exc}") from exc
                raise _translate(exc, self.path) from exc
            self._conn = conn

    async def close(self) -> None:
        """Close the connection; safe to call twice."""
        await asyncio.to_thread(self._close)

    def _close(self) -> None:
        with self._lock:
            if self._conn is not None:
                conn, self._conn = self._conn, None
                try:
                    conn.close()
                except sqlite3.Error as exc:
                    raise _translate(exc, self.path) from exc

    # -- threads and messages -------------------------------------------------------

    async def append_messages(
        self,
        partition: str,
        thread_id: str,
        messages: Sequence[NewMessage],
        *,
        project: str | None = None,
    ) -> AppendResult:
        """Append in one ``BEGIN IMMEDIATE`` transaction: seq is taken under the write lock.

        Validation and hashing run in the worker thread too, before the lock is taken,
        so a large batch never stalls the event loop.
        """

        def prepare_and_append() -> AppendResult:
            prepared = prepare_append(partition, thread_id, messages, project)
            rows = _message_rows(partition, thread_id, prepared)
            return self._locked(lambda conn: self._append(conn, partition, thread_id, prepared, rows, project))

        return await asyncio.to_thread(prepare_and_append)

    def _append(
        self,
        conn: sqlite3.Connection,
        partition: str,
        thread_id: str,
        prepared: list[PreparedMessage],
        rows: list[tuple[Any, ...]],
        project: str | None,
    ) -> AppendResult:
        with _transaction(conn, "IMMEDIATE"):
            now = _time(utcnow())
            thread = conn.execute(q.THREAD, {"thread_id": thread_id, "partition": None}).fetchone()
            existing: set[str] = set()
            if thread is None:
                conn.execute(
                    q.INSERT_THREAD, {"thread_id": thread_id, "partition": partition, "project": project, "now": now}
                )
                next_seq, covered, thread_project = 0, 0, project
            elif thread["partition"] != partition:
                raise Conflict(f"thread id {thread_id!r} is already used by another partition")
            else:
                next_seq, covered, thread_project = thread["message_count"], thread["covered_count"], thread["project"]
                if next_seq and prepared:
                    ids = _ids([message.id for message in prepared])
                    existing = {row[0] for row in conn.execute(q.EXISTING_MESSAGE_IDS, {"ids": ids})}
            message_project = project if project is not None else thread_project
            seen = set(existing)
            new_rows: list[tuple[Any, ...]] = []
            tokens = 0
            for message, row in zip(prepared, rows, strict=True):
                if message.id in seen:
                    continue
                seen.add(message.id)
                tokens += message.tokens
                new_rows.append((*row[:4], message_project, next_seq + len(new_rows), *row[4:]))
            if new_rows:
                conn.executemany(q.INSERT_MESSAGE, new_rows)
                conn.execute(
                    q.GROW_THREAD,
                    {"added": len(new_rows), "tokens": tokens, "now": now, "project": project, "thread_id": thread_id},
                )
        return AppendResult(
            thread_id=thread_id,
            partition=partition,
            appended=len(new_rows),
            duplicates=len(prepared) - len(new_rows),
            message_ids=[message.id for message in prepared],
            uncompacted=next_seq + len(new_rows) - covered,
        )

    async def get_thread(self, partition: str | None, thread_id: str) -> Thread:
        """One thread with its message count; ``NotFound`` outside its partition."""
        return await self._run(lambda conn: _thread(_require_thread(conn, partition, thread_id)))

    async def list_threads(self, partition: str | None, *, limit: int = 100) -> list[Thread]:
        """Threads, most recently updated first."""
        params = {"partition": partition, "limit": _limit(limit)}
        return await self._run(lambda conn: [_thread(row) for row in conn.execute(q.LIST_THREADS, params)])

    async def get_messages(
        self,
        partition: str | None,
        thread_id: str,
        *,
        first_seq: int = 0,
        last_seq: int | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        """Messages of a thread in a seq range, read by the (thread_id, seq) index."""
        params = {
            "thread_id": thread_id,
            "first_seq": _int64(first_seq),
            "last_seq": _INT64_MAX if last_seq is None else _int64(last_seq),
            "limit": -1 if limit is None else _limit(limit),
        }

        def read(conn: sqlite3.Connection) -> list[Message]:
            with _transaction(conn, "DEFERRED"):
                _require_thread(conn, partition, thread_id)
                return [_message(row) for row in conn.execute(q.MESSAGES_IN_RANGE, params)]

        return await self._run(read)

    async def get_message(self, partition: str | None, message_id: str) -> Message:
        """One message by its stored id."""

        def read(conn: sqlite3.Connection) -> Message:
            row = conn.execute(q.MESSAGE_BY_ID, {"id": message_id, "partition": partition}).fetchone()
            if row is None:
                raise NotFound("message", message_id)
            return _message(row)

        return await self._run(read)

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
        """BM25-ranked FTS5 search over each kind, merged best first (score = -bm25)."""
        unknown = set(kinds) - set(q.SEARCHES)
        if unknown:
            raise InvalidInput(f"unknown search kinds {sorted(unknown)}: use message, summary or fact")
        limit = _limit(limit)
        match = q.fts_query(query)
        if match is None:
            return []
        params = {
            "query": match,
            "partition": partition,
            "thread_id": thread_id,
            "since": None if since is None else _time(since),
            "until": None if until is None else _time(until),
            "limit": limit,
        }

        def read(conn: sqlite3.Connection) -> list[SearchHit]:
            hits: list[SearchHit] = []
            for kind in dict.fromkeys(kinds):
                for row in conn.execute(q.SEARCHES[kind], params):
                    hits.append(
                        SearchHit(
                            id=row[0], kind=kind, source_id=row[1], thread_id=row[2], partition=row[3],
                            role=row[4], level=row[5], created_at=datetime.fromisoformat(row[6]),
                            snippet=row[7], score=row[8],
                        )
                    )  # fmt: skip
            hits.sort(key=lambda hit: -hit.score)
            return hits[:limit]

        return await self._run(read)

    async def stats(self, partition: str | None) -> StoreStats:
        """Counts from the per-thread totals and one GROUP BY over summaries."""

        def read(conn: sqlite3.Connection) -> StoreStats:
            params = {"partition": partition}
            with _transaction(conn, "DEFERRED"):
                threads, messages, tokens = conn.execute(q.THREAD_TOTALS, params).fetchone()
                levels = {level: count for level, count in conn.execute(q.SUMMARY_LEVELS, params)}
                (facts,) = conn.execute(q.FACT_COUNT, params).fetchone()
            return StoreStats(
                store=self.kind,
                partition=partition,
                threads=threads,
                messages=messages,
                summaries_by_level=levels,
                facts=facts,
                tokens=tokens,
            )

        return await self._run(read)

    # -- the summary DAG ------------------------------------------------------------

    async def count_uncovered(self, partition: str, thread_id: str) -> int:
        """O(1): the thread row keeps how many messages level-1 summaries cover."""

        def read(conn: sqlite3.Connection) -> int:
            row = _require_thread(conn, partition, thread_id)
            return int(row["message_count"] - row["covered_count"])

        return await self._run(read)

    async def uncovered_messages(
        self, partition: str, thread_id: str, *, limit: int | None = None
    ) -> list[Message]:
        """Messages no SUMMARIZES edge points at, oldest first."""
        params = {"thread_id": thread_id, "limit": -1 if limit is None else _limit(limit)}

        def read(conn: sqlite3.Connection) -> list[Message]:
            with _transaction(conn, "DEFERRED"):
                _require_thread(conn, partition, thread_id)
                return [_message(row) for row in conn.execute(q.UNCOVERED_MESSAGES, params)]

        return await self._run(read)

    async def uncovered_summaries(self, partition: str, thread_id: str, level: int) -> list[Summary]:
        """Summaries of one level with no parent, in thread order."""
        params = {"thread_id": thread_id, "partition": partition, "level": _int64(level)}

        def read(conn: sqlite3.Connection) -> list[Summary]:
            with _transaction(conn, "DEFERRED"):
                return _summaries(conn, conn.execute(q.UNCOVERED_SUMMARIES, params).fetchall())

        return await self._run(read)

    async def persist_summary(self, summary: NewSummary) -> Summary:
        """Write the summary, its edges and the thread's covered count in one transaction."""
        return await self._run(lambda conn: self._persist(conn, summary))

    def _persist(self, conn: sqlite3.Connection, new: NewSummary) -> Summary:
        scope = {"ids": _ids(new.child_ids), "thread_id": new.thread_id, "partition": new.partition}
        with _transaction(conn, "IMMEDIATE"):
            _require_thread(conn, new.partition, new.thread_id)
            found: dict[str, Message | Summary] = {
                row["id"]: _message(row) for row in conn.execute(q.CHILD_MESSAGES, scope)
            }
            found.update((row["id"], _summary(row, [], None)) for row in conn.execute(q.CHILD_SUMMARIES, scope))
            for child_id in new.child_ids:
                if child_id not in found:
                    raise NotFound("message" if new.level == 1 else "summary", child_id)
            covered = conn.execute(q.ALREADY_COVERED, scope).fetchone()
            if covered is not None:
                raise Conflict(f"{covered[0]} is already covered by summary {covered[1]}")
            summary = derive_summary(new, [found[child_id] for child_id in new.child_ids], utcnow())
            conn.execute(
                q.INSERT_SUMMARY,
                (
                    summary.id, summary.thread_id, summary.partition, summary.level, summary.text,
                    summary.tokens, summary.source_tokens, summary.first_seq, summary.last_seq,
                    _time(summary.earliest_at), _time(summary.latest_at), summary.message_count,
                    summary.digest, summary.summarizer, _time(summary.created_at),
                ),
            )  # fmt: skip
            conn.executemany(
                q.INSERT_EDGE, [(summary.id, child_id, position) for position, child_id in enumerate(new.child_ids)]
            )
            if summary.level == 1:
                conn.execute(q.COVER_MESSAGES, {"covered": len(new.child_ids), "thread_id": new.thread_id})
        return summary

    async def get_summary(self, partition: str | None, summary_id: str) -> Summary:
        """One summary with its ordered children and its parent."""

        def read(conn: sqlite3.Connection) -> Summary:
            with _transaction(conn, "DEFERRED"):
                row = conn.execute(q.SUMMARY_BY_ID, {"id": summary_id, "partition": partition}).fetchone()
                if row is None:
                    raise NotFound("summary", summary_id)
                return _summaries(conn, [row])[0]

        return await self._run(read)

    async def expand(
        self,
        partition: str | None,
        summary_id: str,
        *,
        depth: int | None = None,
        limit: int = 200,
        cursor: str | None = None,
    ) -> ExpandPage:
        """Messages by the summary's seq range (contiguous by invariant 2), or summaries by edges.

        ``depth`` at or past the summary's level reaches the messages; a smaller depth
        walks SUMMARIZES edges down with a recursive query.
        """
        offset = decode_cursor(cursor)
        if depth is not None and depth < 1:
            raise InvalidInput(f"depth must be at least 1, got {depth}")
        limit = _limit(limit)

        def read(conn: sqlite3.Connection) -> ExpandPage:
            with _transaction(conn, "DEFERRED"):
                row = conn.execute(q.SUMMARY_BY_ID, {"id": summary_id, "partition": partition}).fetchone()
                if row is None:
                    raise NotFound("summary", summary_id)
                items: list[Message | Summary]
                if depth is None or depth >= row["level"]:
                    total = row["message_count"]
                    params = {
                        "thread_id": row["thread_id"],
                        "first_seq": _int64(row["first_seq"] + offset),
                        "last_seq": row["last_seq"],
                        "limit": limit,
                    }
                    items = [_message(r) for r in conn.execute(q.MESSAGES_IN_RANGE, params)]
                else:
                    ids = [r[0] for r in conn.execute(q.DESCENDANTS, {"id": summary_id, "depth": depth})]
                    total = len(ids)
                    page = ids[offset : offset + limit]
                    by_id = {r["id"]: r for r in conn.execute(q.SUMMARIES_BY_IDS, {"ids": _ids(page)})}
                    items = list(_summaries(conn, [by_id[i] for i in page]))
            end = offset + len(items)
            return ExpandPage(
                summary_id=summary_id,
                items=items,
                total=total,
                next_cursor=encode_cursor(end) if items and end < total else None,
            )

        return await self._run(read)

    async def covered_by(self, message_ids: Sequence[str]) -> dict[str, list[str]]:
        """Walk SUMMARIZES edges up from every id at once, lowest level first."""

        def read(conn: sqlite3.Connection) -> dict[str, list[str]]:
            chains: dict[str, list[str]] = {message_id: [] for message_id in message_ids}
            for origin, summary_id in conn.execute(q.ANCESTORS, {"ids": _ids(list(chains))}):
                chains[origin].append(summary_id)
            return chains

        return await self._run(read)

    async def frontier(self, partition: str, thread_id: str) -> list[FrontierItem]:
        """Top summaries and uncovered messages, ordered by first seq."""

        def read(conn: sqlite3.Connection) -> list[FrontierItem]:
            with _transaction(conn, "DEFERRED"):
                _require_thread(conn, partition, thread_id)
                return _frontier(conn, thread_id)

        return await self._run(read)

    async def summary_dag(self, partition: str, thread_id: str) -> SummaryDag:
        """All summaries of the thread, the summary-to-summary edges and the frontier."""

        def read(conn: sqlite3.Connection) -> SummaryDag:
            params = {"thread_id": thread_id}
            with _transaction(conn, "DEFERRED"):
                _require_thread(conn, partition, thread_id)
                nodes = _summaries(conn, conn.execute(q.THREAD_SUMMARIES, params).fetchall())
                edges = [
                    DagEdge(parent_id=r[0], child_id=r[1], position=r[2])
                    for r in conn.execute(q.SUMMARY_EDGES, params)
                ]
                frontier = _frontier(conn, thread_id)
            return SummaryDag(thread_id=thread_id, partition=partition, nodes=nodes, edges=edges, frontier=frontier)

        return await self._run(read)

    async def compaction_candidates(
        self, partition: str | None, *, min_uncovered: int, limit: int
    ) -> list[ThreadBacklog]:
        """Threads by backlog, largest first, straight from the per-thread counters."""
        params = {"partition": partition, "minimum": _int64(min_uncovered), "limit": _limit(limit)}

        def read(conn: sqlite3.Connection) -> list[ThreadBacklog]:
            return [
                ThreadBacklog(thread_id=r[0], partition=r[1], uncovered=r[2])
                for r in conn.execute(q.CANDIDATES, params)
            ]

        return await self._run(read)

    async def snapshot(self, partition: str | None, thread_id: str) -> ThreadSnapshot:
        """The whole thread in one read transaction, so ``doctor`` checks a consistent state."""
        params = {"thread_id": thread_id, "first_seq": 0, "last_seq": _INT64_MAX, "limit": -1}

        def read(conn: sqlite3.Connection) -> ThreadSnapshot:
            with _transaction(conn, "DEFERRED"):
                thread = _thread(_require_thread(conn, partition, thread_id))
                messages = [_message(row) for row in conn.execute(q.MESSAGES_IN_RANGE, params)]
                summaries = _summaries(conn, conn.execute(q.THREAD_SUMMARIES, params).fetchall())
            return ThreadSnapshot(thread=thread, messages=messages, summaries=summaries)

        return await self._run(read)
