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
    MAX_EMBED_CHARS,
    AppendResult,
    DagEdge,
    EmbeddingTodo,
    ExpandPage,
    Fact,
    FactLayerState,
    FactStats,
    FrontierItem,
    MaintenanceCycle,
    Message,
    MessageRef,
    NewFact,
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
from graph_schema.prepare import (
    PreparedMessage,
    check_limit,
    check_supersession,
    decode_cursor,
    derive_facts,
    derive_summary,
    encode_cursor,
    fact_source_ids,
    lease_times,
    prepare_append,
    unique_ids,
)
from graph_schema.vectors import (
    SNIPPET_CHARS,
    MatrixRow,
    VectorMatrix,
    VectorSpace,
    check_index_args,
    check_kinds,
    head_snippet,
    microseconds,
    unit_vectors,
)

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
    """A caller's page size, checked, and clamped to what SQLite can bind."""
    return _int64(check_limit(limit))


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


# -- the fact layer: rows to models ------------------------------------------------------


def _facts(conn: sqlite3.Connection, partition: str | None, ids: Sequence[str]) -> list[Fact]:
    """The facts with these ids, in the order asked, unknown ones left out."""
    rows = {row["id"]: row for row in conn.execute(q.FACTS_BY_IDS, {"ids": _ids(ids), "partition": partition})}
    return _with_sources(conn, [rows[fact_id] for fact_id in dict.fromkeys(ids) if fact_id in rows])


def _with_sources(conn: sqlite3.Connection, rows: Sequence[sqlite3.Row]) -> list[Fact]:
    """Facts from their rows, each with its source message ids in thread order."""
    sources: dict[str, list[str]] = {}
    for fact_id, message_id in conn.execute(q.FACT_SOURCES, {"ids": _ids([row["id"] for row in rows])}):
        sources.setdefault(fact_id, []).append(message_id)
    return [Fact.model_validate({**dict(row), "source_message_ids": sources.get(row["id"], [])}) for row in rows]


def _layer(row: sqlite3.Row) -> FactLayerState:
    return FactLayerState(
        thread_id=row["thread_id"], partition=row["partition"], enabled=bool(row["enabled"]),
        extracted_seq=row["extracted_seq"],
    )  # fmt: skip


class SqliteStore:
    """A `MemoryStore` in one SQLite file (or ``:memory:``), shared safely by several processes."""

    kind = "sqlite"

    def __init__(self, path: str) -> None:
        """Remember where the database lives; nothing is opened until ``initialize()``."""
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._vectors = VectorSpace()

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
        """BM25-ranked FTS5 search over each kind, merged best first (score = -bm25).

        All words first: each kind is searched for rows holding every query word, and
        only when those are fewer than ``limit`` for rows holding any word, whose new
        hits follow. Rows holding every word are the better answers. The merge keeps
        that order: every kind's all-words hits by score, then the rest by score.

        Each of those queries ranks at most the newest ``MATCH_CANDIDATES`` rows that
        match and pass the filters (see ``sqlite_queries``): exact below that, and at a
        million messages a common word costs milliseconds, not the second it takes to
        score every row holding it. Past it the newest matches win, as in a memory the
        recent past usually should.
        """
        unknown = set(kinds) - set(q.SEARCHES)
        if unknown:
            raise InvalidInput(f"unknown search kinds {sorted(unknown)}: use message, summary or fact")
        limit = _limit(limit)
        if q.fts_query(query) is None:
            return []
        params = {
            "partition": partition,
            "thread_id": thread_id,
            "since": None if since is None else _time(since),
            "until": None if until is None else _time(until),
        }

        def read(conn: sqlite3.Connection) -> list[SearchHit]:
            ranked: list[tuple[int, SearchHit]] = []
            for kind in dict.fromkeys(kinds):
                words = _ranking_words(conn, query) if kind == "message" else query
                found: set[str] = set()
                for tier, require_all in enumerate((True, False)):
                    if tier and (len(found) == limit or len(q.query_words(words)) == 1):
                        break
                    asked = {
                        **params,
                        "query": q.fts_query(words, require_all=require_all),
                        "limit": limit + len(found),
                        "candidates": q.MATCH_CANDIDATES,
                    }
                    for row in conn.execute(q.SEARCHES[kind], asked):
                        if row[0] in found:
                            continue
                        found.add(row[0])
                        ranked.append(
                            (tier, SearchHit(
                                id=row[0], kind=kind, source_id=row[1], thread_id=row[2], partition=row[3],
                                role=row[4], level=row[5], created_at=datetime.fromisoformat(row[6]),
                                snippet=row[7], score=row[8],
                            ))
                        )  # fmt: skip
            ranked.sort(key=lambda entry: (entry[0], -entry[1].score))
            return [hit for _, hit in ranked[:limit]]

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

    # -- maintenance: leases and cycle records --------------------------------------

    async def acquire_lease(
        self, name: str, holder: str, ttl_seconds: float, *, now: datetime | None = None
    ) -> bool:
        """One upsert under ``BEGIN IMMEDIATE``: free, expired or our own lease is (re)taken."""
        moment, expires_at = lease_times(name, holder, ttl_seconds, now)
        params = {"name": name, "holder": holder, "now": _time(moment), "expires_at": _time(expires_at)}

        def take(conn: sqlite3.Connection) -> bool:
            with _transaction(conn, "IMMEDIATE"):
                return conn.execute(q.ACQUIRE_LEASE, params).rowcount == 1

        return await self._run(take)

    async def release_lease(self, name: str, holder: str) -> None:
        """Delete the lease row only when ``holder`` holds it."""
        params = {"name": name, "holder": holder}

        def release(conn: sqlite3.Connection) -> None:
            conn.execute(q.RELEASE_LEASE, params)

        await self._run(release)

    async def record_cycle(self, cycle: MaintenanceCycle) -> None:
        """Insert the cycle's row; an id already recorded is left as it was."""
        params = {
            **cycle.model_dump(include={"id", "job", "holder", "threads", "summaries", "facts"}),
            "started_at": _time(cycle.started_at),
            "finished_at": _time(cycle.finished_at),
            "steps": json.dumps(cycle.steps),
            "errors": json.dumps(cycle.errors),
        }

        def record(conn: sqlite3.Connection) -> None:
            conn.execute(q.INSERT_CYCLE, params)

        await self._run(record)

    async def recent_cycles(self, limit: int) -> list[MaintenanceCycle]:
        """The latest cycles by start time, read from the ``started_at`` index."""
        params = {"limit": _limit(limit)}

        def read(conn: sqlite3.Connection) -> list[MaintenanceCycle]:
            return [
                MaintenanceCycle.model_validate(
                    {**dict(row), "steps": json.loads(row["steps"]), "errors": json.loads(row["errors"])}
                )
                for row in conn.execute(q.RECENT_CYCLES, params)
            ]

        return await self._run(read)

    # -- the fact layer: facts, supersession and per-thread layer state ----------------

    async def add_facts(self, facts: Sequence[NewFact]) -> list[Fact]:
        """Insert new facts and their sources under ``BEGIN IMMEDIATE``; stored ones stay as they are."""
        source_ids = fact_source_ids(facts)

        def write(conn: sqlite3.Connection) -> list[Fact]:
            with _transaction(conn, "IMMEDIATE"):
                found = conn.execute(q.FACT_SOURCE_MESSAGES, {"ids": _ids(source_ids)})
                derived = derive_facts(facts, {row["id"]: _message(row) for row in found})
                for fact in derived:
                    row = (
                        fact.id, fact.partition, fact.project, fact.text, fact.kind, fact.subject,
                        fact.thread_id, _time(fact.created_at),
                    )  # fmt: skip
                    if conn.execute(q.INSERT_FACT, row).rowcount == 1:
                        conn.executemany(q.INSERT_FACT_SOURCE, [(fact.id, m) for m in fact.source_message_ids])
                return _facts(conn, None, [fact.id for fact in derived])

        return await self._run(write)

    async def get_facts(self, partition: str | None, fact_ids: Sequence[str]) -> list[Fact]:
        """Facts by id, in the order asked."""
        return await self._run(lambda conn: _facts(conn, partition, fact_ids))

    async def supersede_fact(self, partition: str, old_id: str, new_id: str, *, at: datetime) -> Fact:
        """Set ``valid_until`` and write the SUPERSEDES row in one ``BEGIN IMMEDIATE`` transaction."""

        def write(conn: sqlite3.Connection) -> Fact:
            with _transaction(conn, "IMMEDIATE"):
                found = {fact.id: fact for fact in _facts(conn, partition, [old_id, new_id])}
                for fact_id in (old_id, new_id):
                    if fact_id not in found:
                        raise NotFound("fact", fact_id)
                if not check_supersession(found[old_id], found[new_id], at):
                    conn.execute(q.SUPERSEDE_FACT, {"at": _time(at), "old_id": old_id})
                    conn.execute(q.INSERT_SUPERSEDES, {"new_id": new_id, "old_id": old_id})
                return _facts(conn, partition, [old_id])[0]

        return await self._run(write)

    async def list_facts(
        self,
        partition: str | None,
        *,
        project: str | None = None,
        subject: str | None = None,
        thread_id: str | None = None,
        current_only: bool = True,
        limit: int = 100,
    ) -> list[Fact]:
        """Facts by the filters given, newest first."""
        params = {
            "partition": partition, "project": project, "subject": subject, "thread_id": thread_id,
            "current_only": int(current_only), "limit": _limit(limit),
        }  # fmt: skip

        def read(conn: sqlite3.Connection) -> list[Fact]:
            with _transaction(conn, "DEFERRED"):
                return _with_sources(conn, conn.execute(q.LIST_FACTS, params).fetchall())

        return await self._run(read)

    async def fact_stats(self, partition: str | None, *, thread_id: str | None = None) -> FactStats:
        """One GROUP BY over (subject, kind, current)."""
        params = {"partition": partition, "thread_id": thread_id}

        def read(conn: sqlite3.Connection) -> FactStats:
            counts = [(row[0], row[1], bool(row[2]), row[3]) for row in conn.execute(q.FACT_STATS, params)]
            return FactStats.from_counts(partition, thread_id, counts)

        return await self._run(read)

    async def clear_facts(self, partition: str, thread_id: str | None = None) -> int:
        """Restore what cleared facts superseded, delete them (sources cascade), reset cursors."""
        params = {"partition": partition, "thread_id": thread_id}

        def write(conn: sqlite3.Connection) -> int:
            with _transaction(conn, "IMMEDIATE"):
                if thread_id is not None:
                    _require_thread(conn, partition, thread_id)
                conn.execute(q.RESTORE_SUPERSEDED, params)
                conn.execute(q.DELETE_SUPERSEDES, params)
                deleted = conn.execute(q.DELETE_FACTS, params).rowcount
                conn.execute(q.RESET_FACT_CURSORS, params)
            return int(deleted)

        return await self._run(write)

    async def fact_layer(self, partition: str | None, thread_id: str) -> FactLayerState:
        """The thread's layer row, or the defaults (off, nothing read) when it has none."""

        def read(conn: sqlite3.Connection) -> FactLayerState:
            row = conn.execute(q.FACT_LAYER, {"thread_id": thread_id, "partition": partition}).fetchone()
            if row is None:
                raise NotFound("thread", thread_id)
            return _layer(row)

        return await self._run(read)

    async def set_fact_layer(self, partition: str, thread_id: str, enabled: bool) -> FactLayerState:
        """Upsert the thread's layer row with the new switch."""
        params = {"thread_id": thread_id, "partition": partition, "enabled": int(enabled)}

        def write(conn: sqlite3.Connection) -> FactLayerState:
            with _transaction(conn, "IMMEDIATE"):
                _require_thread(conn, partition, thread_id)
                conn.execute(q.SET_FACT_LAYER, params)
                return _layer(conn.execute(q.FACT_LAYER, params).fetchone())

        return await self._run(write)

    async def advance_fact_cursor(self, partition: str, thread_id: str, seq: int) -> FactLayerState:
        """Upsert the cursor as the larger of the stored one and ``seq``."""
        params = {"thread_id": thread_id, "partition": partition, "seq": _int64(seq)}

        def write(conn: sqlite3.Connection) -> FactLayerState:
            with _transaction(conn, "IMMEDIATE"):
                row = conn.execute(q.FACT_LAYER, params).fetchone()
                if row is None:
                    raise NotFound("thread", thread_id)
                if not -1 <= seq < row["message_count"]:
                    raise InvalidInput(
                        f"extraction cursor {seq} is outside thread {thread_id!r} "
                        f"(seq -1..{row['message_count'] - 1})"
                    )
                conn.execute(q.ADVANCE_FACT_CURSOR, params)
                return _layer(conn.execute(q.FACT_LAYER, params).fetchone())

        return await self._run(write)

    async def fact_layer_threads(self, partition: str | None, *, limit: int = 10_000) -> list[FactLayerState]:
        """Threads with a layer row switched on."""
        params = {"partition": partition, "limit": _limit(limit)}
        return await self._run(lambda conn: [_layer(row) for row in conn.execute(q.FACT_LAYER_THREADS, params)])

    # -- semantic search: embeddings and the in-memory vector matrix -------------------

    async def ensure_vector_index(self, dimensions: int, model: str) -> None:
        """Record the vector size (``vector_index``); another size only while no vector is stored."""
        check_index_args(dimensions, model)
        if (self._vectors.dimensions, self._vectors.model) == (dimensions, model):
            return

        def settle(conn: sqlite3.Connection) -> None:
            params = {"name": q.VECTOR_INDEX_NAME, "dimensions": dimensions}
            with _transaction(conn, "IMMEDIATE"):
                row = conn.execute(q.VECTOR_INDEX, params).fetchone()
                if row is None:
                    conn.execute(q.CREATE_VECTOR_INDEX, params)
                elif row["dimensions"] != dimensions and conn.execute(q.ANY_EMBEDDING).fetchone() is None:
                    conn.execute(q.RESIZE_VECTOR_INDEX, params)
                elif row["dimensions"] != dimensions:
                    raise Conflict(
                        f"the store's vector index holds {row['dimensions']}-number vectors; model {model!r} "
                        f"makes {dimensions}: keep the embedder that filled it, or use a fresh store"
                    )
            self._vectors.settle(dimensions, model)

        await self._run(settle)

    async def set_embeddings(self, items: Sequence[tuple[str, Sequence[float]]], model: str) -> int:
        """Replace each node's ``embeddings`` row and bump the version, in one transaction."""
        dimensions, _ = self._vectors.require()
        self._vectors.check_model(model)
        latest = dict(items)
        matrix = unit_vectors(list(latest.values()), dimensions)
        blobs = {node_id: matrix[index].astype("<f4").tobytes() for index, node_id in enumerate(latest)}

        def write(conn: sqlite3.Connection) -> int:
            with _transaction(conn, "IMMEDIATE"):
                nodes = conn.execute(q.EMBEDDED_NODES, {"ids": _ids(list(latest))}).fetchall()
                conn.executemany(
                    q.SET_EMBEDDING,
                    [
                        (
                            row["id"], row["kind"], row["partition"], row["thread_id"],
                            microseconds(datetime.fromisoformat(row["created_at"])), model, blobs[row["id"]],
                        )
                        for row in nodes
                    ],
                )  # fmt: skip
                if nodes:
                    conn.execute(q.BUMP_VECTOR_VERSION, {"name": q.VECTOR_INDEX_NAME})
            return len(nodes)

        return await self._run(write) if latest else 0

    async def missing_embeddings(
        self,
        partition: str | None,
        kinds: Sequence[SearchKind] = ("message", "summary", "fact"),
        limit: int = 256,
        *,
        ids: Sequence[str] | None = None,
        after: str | None = None,
    ) -> list[EmbeddingTodo]:
        """Per kind, the id index walked from ``after``; merged in id order."""
        _, model = self._vectors.require()
        asked = check_kinds(kinds)
        limit = _limit(limit)
        if ids is not None and not ids:
            return []
        params = {
            "partition": partition,
            "model": model,
            "after": after or "",
            "limit": limit,
            "chars": MAX_EMBED_CHARS,
            "ids": None if ids is None else _ids(ids),
        }
        queries = q.MISSING_EMBEDDINGS if ids is None else q.MISSING_EMBEDDINGS_AMONG

        def read(conn: sqlite3.Connection) -> list[EmbeddingTodo]:
            todo = [
                EmbeddingTodo(row[0], kind, row[1]) for kind in asked for row in conn.execute(queries[kind], params)
            ]
            return sorted(todo)[:limit]

        return await self._run(read)

    async def vector_search(
        self,
        vector: Sequence[float],
        *,
        partition: str | None,
        thread_id: str | None = None,
        kinds: Sequence[SearchKind] = ("message", "summary"),
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 20,
    ) -> list[SearchHit]:
        """Catch the partition's matrix up with the table, rank in memory, read the hits' rows."""
        dimensions, model = self._vectors.require()
        asked = check_kinds(kinds)
        limit = _limit(limit)
        query = unit_vectors([vector], dimensions)[0]
        if not asked:
            return []
        matrix = await self._run(lambda conn: self._matrix(conn, partition, model, dimensions))
        ranked = await asyncio.to_thread(
            matrix.nearest,
            query,
            kinds=asked,
            thread_id=thread_id,
            since_us=None if since is None else microseconds(since),
            until_us=None if until is None else microseconds(until),
            limit=limit,
        )
        if not ranked:
            return []

        def read(conn: sqlite3.Connection) -> list[SearchHit]:
            params = {"ids": _ids([node_id for node_id, _ in ranked]), "chars": SNIPPET_CHARS + 1}
            rows = {row[0]: (kind, row) for kind in asked for row in conn.execute(q.VECTOR_HITS[kind], params)}
            hits: list[SearchHit] = []
            for node_id, score in ranked:
                if node_id in rows:
                    kind, row = rows[node_id]
                    hits.append(
                        SearchHit(
                            id=row[0], kind=kind, source_id=row[1], thread_id=row[2], partition=row[3],
                            role=row[4], level=row[5], created_at=datetime.fromisoformat(row[6]),
                            snippet=head_snippet(row[7]), score=min(1.0, max(-1.0, score)),
                        )
                    )  # fmt: skip
            return hits

        return await self._run(read)

    def _matrix(self, conn: sqlite3.Connection, partition: str | None, model: str, dimensions: int) -> VectorMatrix:
        """The partition's matrix, caught up with every write any process made since it was read.

        Unchanged version: nothing to read. Rows only appended since (the count grew by
        exactly the rows past the last pk seen): read those. Anything else (a vector
        replaced, a fact cleared): read the partition again.
        """
        with _transaction(conn, "DEFERRED"):
            index = conn.execute(q.VECTOR_INDEX, {"name": q.VECTOR_INDEX_NAME}).fetchone()
            version = -1 if index is None else index["version"]
            matrix = self._vectors.matrices.get(partition)
            if matrix is not None and matrix.version == version:
                return matrix
            scope = {"partition": partition, "model": model}
            scoped = partition is not None
            count, max_pk = conn.execute(q.EMBEDDING_EXTENT[scoped], scope).fetchone()
            if matrix is None or max_pk < matrix.max_pk:
                matrix = VectorMatrix(dimensions)
            after = matrix.max_pk
            rows = [MatrixRow(*row) for row in conn.execute(q.EMBEDDING_ROWS[scoped], {**scope, "after": after})]
            if matrix.size + len(rows) != count:
                matrix = VectorMatrix(dimensions)
                if after:
                    rows = [MatrixRow(*row) for row in conn.execute(q.EMBEDDING_ROWS[scoped], {**scope, "after": 0})]
            matrix.extend(rows)
            matrix.version = version
            self._vectors.matrices[partition] = matrix
            return matrix

    # -- hybrid search: candidate positions and metadata -------------------------------

    async def message_refs(self, partition: str | None, message_ids: Sequence[str]) -> list[MessageRef]:
        """One ``IN`` read over the messages table, content left out (see `MemoryStore`)."""
        wanted = unique_ids("message", message_ids)
        if not wanted:
            return []

        def read(conn: sqlite3.Connection) -> list[MessageRef]:
            rows = conn.execute(q.MESSAGE_REFS, {"ids": _ids(wanted), "partition": partition})
            found = {
                row["id"]: MessageRef(
                    id=row["id"], thread_id=row["thread_id"], partition=row["partition"], seq=row["seq"],
                    role=row["role"], metadata=json.loads(row["metadata"]),
                )
                for row in rows
            }  # fmt: skip
            return [found[message_id] for message_id in wanted if message_id in found]

        return await self._run(read)


def _ranking_words(conn: sqlite3.Connection, query: str) -> str:
    """The query's words that can rank a message: those in some but not most messages.

    A word in no message matches nothing and adds nothing to any score, yet would make
    every row fail the all-words query. FTS5's bm25 gives a term found in over half the
    messages an IDF of zero (it clamps it at 1e-6), so it changes no ranking, yet
    requiring it drops good rows that lack it. How common a word is comes from the
    newest ``COMMON_TERM_SAMPLE`` messages: counting all of a common word's rows would
    cost tens of milliseconds at a million. Common terms are kept when the store is small
    (below ``COMMON_TERM_MIN_ROWS``); the query is kept as is when no word is left.
    """
    (rows,) = conn.execute(q.MESSAGE_ROWS).fetchone()
    sample = {"after": rows - q.COMMON_TERM_SAMPLE}
    kept = []
    for word in q.query_words(query):
        word_query = q.fts_query(word)
        (recent,) = conn.execute(q.RECENT_MATCHES, {**sample, "query": word_query}).fetchone()
        if not recent and conn.execute(q.ANY_MESSAGE_MATCH, {"query": word_query}).fetchone() is None:
            continue
        if rows < q.COMMON_TERM_MIN_ROWS or 2 * recent <= min(rows, q.COMMON_TERM_SAMPLE):
            kept.append(word)
    return " ".join(kept) if kept else query
