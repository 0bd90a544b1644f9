"""The Neo4j backend of `MemoryStore`: the same contract as SQLite, for teams and scale.

Why it looks the way it does:

- Every query is a module constant with parameters only (the driver types queries as
  ``LiteralString`` to push exactly this), run in managed transactions so the driver
  retries transient failures (deadlocks, leader switches) on its own.
- Writes that must serialize per thread (appends, summaries) take the thread node's
  write lock first (``SET t._lock = true REMOVE t._lock``: the lock is held until
  commit, the node is left unchanged), so any number of processes can append to one
  thread with no gap and no duplicate ``seq``, and two compactions of the same
  children cannot both win.
- Counters on the Thread node (``last_seq``, ``message_count``, ``covered_count``,
  ``tokens``) keep appends and backlog questions O(1).
- Validation and derivation come from `graph_schema.prepare`, ids and hashes from
  `graph_schema.identity`, so both backends agree byte for byte.
- Driver exceptions never leave this module: they become `StoreUnavailable`,
  `Conflict` or `InvalidInput` with one sentence naming the server.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any, LiteralString, TypeVar, cast

import neo4j
from neo4j import AsyncDriver, AsyncGraphDatabase, AsyncManagedTransaction, RoutingControl
from neo4j import exceptions as neo4j_errors
from neo4j.time import DateTime as Neo4jDateTime

from graph_schema import identity
from graph_schema import neo4j_queries as q
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
from graph_schema.prepare import decode_cursor, derive_summary, encode_cursor, prepare_append
from graph_schema.store import MemoryStore, Neo4jCredentials

T = TypeVar("T")

#: Stands for "no upper bound" where Cypher needs a number (LIMIT, a seq bound).
_UNBOUNDED = sys.maxsize
_WORD = re.compile(r"\w+")
#: Schema-rule races between processes initializing at once are harmless.
_SCHEMA_ALREADY_THERE = "AlreadyExists"


def snippet(text: str, query: str, width: int = 240) -> str:
    """A window of ``text`` around the first word of ``query`` it contains."""
    words = sorted(set(_WORD.findall(query)), key=len, reverse=True)[: q.MAX_QUERY_TERMS]
    found = re.search("|".join(map(re.escape, words)), text, re.IGNORECASE) if words else None
    start = max(0, (found.start() if found else 0) - width // 3)
    end = min(len(text), start + width)
    return ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")


def _native(value: Any) -> Any:
    return value.to_native() if isinstance(value, Neo4jDateTime) else value


def _aware(value: datetime | None) -> datetime | None:
    """Naive times are taken as UTC, as stored ones are; Cypher never compares the two kinds."""
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def _props(raw: dict[str, Any]) -> dict[str, Any]:
    return {key: _native(value) for key, value in raw.items()}


def _message(raw: dict[str, Any]) -> Message:
    data = _props(raw)
    data["metadata"] = json.loads(data.get("metadata") or "{}")
    return Message.model_validate(data)


def _summary(record: dict[str, Any]) -> Summary:
    parents = record["parent_ids"]
    return Summary.model_validate(
        {**_props(record["props"]), "child_ids": record["child_ids"], "parent_id": parents[0] if parents else None}
    )


def _thread(raw: dict[str, Any]) -> Thread:
    return Thread.model_validate(_props(raw))


def _frontier(items: list[dict[str, Any]]) -> list[FrontierItem]:
    return sorted((FrontierItem.model_validate(item) for item in items), key=lambda item: item.first_seq)


def _check_limit(limit: int) -> None:
    if limit < 1:
        raise InvalidInput(f"limit must be at least 1, got {limit}")


class Neo4jStore(MemoryStore):
    """`MemoryStore` on a Neo4j 5 server (or cluster, or Aura) over Bolt.

    Args:
        uri: ``neo4j://``, ``bolt://`` or their ``+s``/``+ssc`` forms.
        credentials: User, password (None: no authentication) and database.
        retry_seconds: How long a transaction is retried on transient errors and
            outages before `StoreUnavailable` is raised.
        connect_seconds: How long to wait for a connection to open.
    """

    kind = "neo4j"

    def __init__(
        self,
        uri: str,
        credentials: Neo4jCredentials,
        *,
        retry_seconds: float = 5.0,
        connect_seconds: float = 5.0,
    ) -> None:
        self._uri = uri
        self._credentials = credentials
        self._retry_seconds = retry_seconds
        self._connect_seconds = connect_seconds
        self._driver: AsyncDriver | None = None

    # -- plumbing -----------------------------------------------------------------

    @asynccontextmanager
    async def _translated(self) -> AsyncIterator[None]:
        """Turn every driver exception into a domain error naming the server."""
        where = f"Neo4j at {self._uri}"
        try:
            yield
        except neo4j_errors.ConstraintError as exc:
            raise Conflict(f"{where} refused a write that breaks a uniqueness constraint: {exc.message}") from exc
        except neo4j_errors.AuthError as exc:
            raise StoreUnavailable(
                f"{where} refused the credentials of user {self._credentials.user!r}: {exc.message}"
            ) from exc
        except neo4j_errors.ClientError as exc:
            if "DatabaseNotFound" in (exc.code or ""):
                raise StoreUnavailable(
                    f"{where} has no database {self._credentials.database!r}: {exc.message}"
                ) from exc
            raise InvalidInput(f"{where} rejected the request: {exc.message}") from exc
        except (neo4j_errors.ServiceUnavailable, neo4j_errors.SessionExpired) as exc:
            raise StoreUnavailable(
                f"{where} cannot be reached ({exc}); check that the server is running and reachable"
            ) from exc
        except (neo4j_errors.Neo4jError, neo4j_errors.DriverError) as exc:
            raise StoreUnavailable(f"{where} failed: {exc}") from exc

    def _ready(self) -> AsyncDriver:
        if self._driver is None:
            raise StoreUnavailable(f"the store for Neo4j at {self._uri} is not open: call initialize() first")
        return self._driver

    async def _query(self, query: LiteralString, /, *, write: bool = False, **params: Any) -> list[dict[str, Any]]:
        """One query in one managed transaction; its records as dicts."""
        driver = self._ready()
        async with self._translated():
            result = await driver.execute_query(
                query,
                params,
                routing_=RoutingControl.WRITE if write else RoutingControl.READ,
                database_=self._credentials.database,
            )
        return [record.data() for record in result.records]

    async def _transaction(self, work: Callable[[AsyncManagedTransaction], Awaitable[T]], *, write: bool) -> T:
        """Several queries (and Python between them) in one managed transaction."""
        driver = self._ready()
        async with self._translated():
            async with driver.session(
                database=self._credentials.database,
                bookmark_manager=driver.execute_query_bookmark_manager,
            ) as session:
                if write:
                    return await session.execute_write(work)
                return await session.execute_read(work)

    @staticmethod
    async def _run(tx: AsyncManagedTransaction, query: LiteralString, /, **params: Any) -> list[dict[str, Any]]:
        result = await tx.run(query, params)
        return [record.data() async for record in result]

    # -- lifecycle ----------------------------------------------------------------

    async def initialize(self) -> None:
        """Connect, apply ``cypher/schema.cypher`` idempotently and wait for the indexes."""
        if self._driver is None:
            password = self._credentials.password
            try:
                self._driver = AsyncGraphDatabase.driver(
                    self._uri,
                    auth=neo4j.basic_auth(self._credentials.user, password) if password is not None else None,
                    max_transaction_retry_time=self._retry_seconds,
                    connection_timeout=self._connect_seconds,
                    user_agent="palimpsest",
                )
            except (ValueError, neo4j_errors.ConfigurationError) as exc:
                raise InvalidInput(f"cannot use Neo4j URI {self._uri!r}: {exc}") from exc
        driver = self._driver
        async with self._translated():
            try:
                await driver.verify_connectivity()
            except ValueError as exc:  # an address the driver can only resolve now
                raise InvalidInput(f"cannot use Neo4j URI {self._uri!r}: {exc}") from exc
            for statement in q.schema_statements():
                try:
                    # Trusted package data, not user input: the one non-literal query.
                    ddl = cast(LiteralString, statement)
                    await driver.execute_query(ddl, database_=self._credentials.database)
                except neo4j_errors.ClientError as exc:
                    if _SCHEMA_ALREADY_THERE not in (exc.code or ""):
                        raise
        await self._query(q.AWAIT_INDEXES)

    async def close(self) -> None:
        """Close the driver and its connections; a second call does nothing."""
        driver, self._driver = self._driver, None
        if driver is not None:
            async with self._translated():
                await driver.close()

    # -- threads and messages -----------------------------------------------------

    async def append_messages(
        self,
        partition: str,
        thread_id: str,
        messages: Sequence[NewMessage],
        *,
        project: str | None = None,
    ) -> AppendResult:
        """Append in one transaction under the thread's lock (see `MemoryStore`)."""
        prepared = prepare_append(partition, thread_id, messages, project)
        try:
            metadata = [json.dumps(message.metadata) for message in prepared]
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"message metadata must be JSON: {exc}") from exc
        now = utcnow()
        ids = [message.id for message in prepared]

        async def work(tx: AsyncManagedTransaction) -> AppendResult:
            (head,) = await self._run(
                tx, q.APPEND_LOCK, thread_id=thread_id, partition=partition, project=project, now=now, ids=ids
            )
            if head["partition"] != partition:
                raise Conflict(f"thread {thread_id!r} belongs to another partition than {partition!r}")
            seen = set(head["existing"])
            rows: list[dict[str, Any]] = []
            last_seq = head["last_seq"]
            message_project = project if project is not None else head["project"]
            for message, meta in zip(prepared, metadata, strict=True):
                if message.id in seen:
                    continue
                seen.add(message.id)
                last_seq += 1
                rows.append(
                    vars(message)
                    | {"metadata": meta, "seq": last_seq, "thread_id": thread_id, "partition": partition,
                       "project": message_project}
                )
            uncovered = head["uncovered"]
            if rows:
                (written,) = await self._run(
                    tx,
                    q.APPEND_WRITE,
                    thread_id=thread_id,
                    partition=partition,
                    project=project,
                    now=now,
                    rows=rows,
                    last_seq=last_seq,
                    prev_seq=head["last_seq"],
                    tokens=sum(row["tokens"] for row in rows),
                )
                uncovered = written["uncovered"]
            return AppendResult(
                thread_id=thread_id,
                partition=partition,
                appended=len(rows),
                duplicates=len(prepared) - len(rows),
                message_ids=ids,
                uncompacted=uncovered,
            )

        return await self._transaction(work, write=True)

    async def _thread_record(self, partition: str | None, thread_id: str) -> dict[str, Any]:
        rows = await self._query(q.GET_THREAD, partition=partition, thread_id=thread_id)
        if not rows:
            raise NotFound("thread", thread_id)
        return rows[0]

    async def get_thread(self, partition: str | None, thread_id: str) -> Thread:
        """One thread with its message count (see `MemoryStore`)."""
        return _thread((await self._thread_record(partition, thread_id))["props"])

    async def list_threads(self, partition: str | None, *, limit: int = 100) -> list[Thread]:
        """Threads, most recently updated first (see `MemoryStore`)."""
        _check_limit(limit)
        rows = await self._query(q.LIST_THREADS, partition=partition, limit=limit)
        return [_thread(row["props"]) for row in rows]

    async def get_messages(
        self,
        partition: str | None,
        thread_id: str,
        *,
        first_seq: int = 0,
        last_seq: int | None = None,
        limit: int | None = None,
    ) -> list[Message]:
        """Messages of a seq range, in order (see `MemoryStore`)."""
        if limit is not None:
            _check_limit(limit)
        rows = await self._query(
            q.GET_MESSAGES,
            partition=partition,
            thread_id=thread_id,
            first_seq=first_seq,
            last_seq=_UNBOUNDED if last_seq is None else last_seq,
            limit=_UNBOUNDED if limit is None else limit,
        )
        if not rows:
            raise NotFound("thread", thread_id)
        return [_message(raw) for raw in rows[0]["messages"]]

    async def get_message(self, partition: str | None, message_id: str) -> Message:
        """One message by id (see `MemoryStore`)."""
        rows = await self._query(q.GET_MESSAGE, partition=partition, id=message_id)
        if not rows:
            raise NotFound("message", message_id)
        return _message(rows[0]["props"])

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
        """Lucene full-text search over the ``memory_text`` index (see `MemoryStore`)."""
        _check_limit(limit)
        lucene = q.lucene_query(query)
        if lucene is None or not kinds:
            return []
        rows = await self._query(
            q.SEARCH_TEXT,
            query=lucene,
            partition=partition,
            thread_id=thread_id,
            kinds=list(kinds),
            since=_aware(since),
            until=_aware(until),
            limit=limit,
        )
        return [
            SearchHit(
                id=row["id"],
                kind=row["kind"],
                thread_id=row["thread_id"],
                partition=row["partition"],
                score=row["score"],
                snippet=snippet(row["text"] or "", query),
                created_at=_native(row["created_at"]),
                source_id=row["source_id"],
                level=row["level"],
                role=row["role"],
            )
            for row in rows
        ]

    async def stats(self, partition: str | None) -> StoreStats:
        """Counts from the thread counters, summaries by level and facts (see `MemoryStore`)."""
        (row,) = await self._query(q.STATS, partition=partition)
        return StoreStats(
            store=self.kind,
            partition=partition,
            threads=row["threads"],
            messages=row["messages"] or 0,
            summaries_by_level={level: count for level, count in sorted(row["levels"])},
            facts=row["facts"],
            tokens=row["tokens"] or 0,
        )

    # -- the summary DAG ----------------------------------------------------------

    async def count_uncovered(self, partition: str, thread_id: str) -> int:
        """From the thread counters, O(1) (see `MemoryStore`)."""
        return int((await self._thread_record(partition, thread_id))["uncovered"])

    async def uncovered_messages(
        self, partition: str, thread_id: str, *, limit: int | None = None
    ) -> list[Message]:
        """Messages no summary covers, oldest first (see `MemoryStore`)."""
        if limit is not None:
            _check_limit(limit)
        rows = await self._query(
            q.UNCOVERED_MESSAGES,
            partition=partition,
            thread_id=thread_id,
            limit=_UNBOUNDED if limit is None else limit,
        )
        if not rows:
            raise NotFound("thread", thread_id)
        return [_message(raw) for raw in rows[0]["messages"]]

    async def uncovered_summaries(self, partition: str, thread_id: str, level: int) -> list[Summary]:
        """Summaries of one level without a parent, in thread order (see `MemoryStore`)."""
        rows = await self._query(q.UNCOVERED_SUMMARIES, partition=partition, thread_id=thread_id, level=level)
        return [_summary(row["summary"]) for row in rows]

    async def persist_summary(self, summary: NewSummary) -> Summary:
        """Write a summary and its edges in one transaction under the thread's lock.

        The children are read, checked and found uncovered inside the same transaction
        that writes the summary, after the lock is taken, so of two compactions of the
        same children exactly one succeeds and the other gets `Conflict`.
        """
        created_at = utcnow()

        async def work(tx: AsyncManagedTransaction) -> Summary:
            rows = await self._run(
                tx,
                q.SUMMARY_LOCK,
                thread_id=summary.thread_id,
                partition=summary.partition,
                child_ids=summary.child_ids,
                summary_id=identity.summary_id(summary.partition, summary.thread_id, summary.level, summary.child_ids),
            )
            if not rows:
                raise NotFound("thread", summary.thread_id)
            found: dict[str, tuple[Message | Summary, bool]] = {}
            for child in rows[0]["messages"]:
                found[child["props"]["id"]] = (_message(child["props"]), child["covered"])
            for child in rows[0]["summaries"]:
                node = _summary(child)
                found[node.id] = (node, node.parent_id is not None)
            for child_id in summary.child_ids:
                if child_id not in found:
                    raise NotFound("message" if summary.level == 1 else "summary", child_id)
            derived = derive_summary(summary, [found[child_id][0] for child_id in summary.child_ids], created_at)
            if rows[0]["exists"]:
                raise Conflict(f"summary {derived.id} already exists")
            covered = [child_id for child_id in summary.child_ids if found[child_id][1]]
            if covered:
                raise Conflict(f"{covered[0]} is already covered by another summary")
            props = derived.model_dump(exclude={"child_ids", "parent_id"})
            children = [{"id": child_id, "position": index} for index, child_id in enumerate(summary.child_ids)]
            await self._run(
                tx,
                q.SUMMARY_WRITE_OVER_MESSAGES if summary.level == 1 else q.SUMMARY_WRITE_OVER_SUMMARIES,
                thread_id=summary.thread_id,
                props=props,
                children=children,
            )
            return derived

        return await self._transaction(work, write=True)

    async def get_summary(self, partition: str | None, summary_id: str) -> Summary:
        """One summary with ordered children and parent (see `MemoryStore`)."""
        rows = await self._query(q.GET_SUMMARY, partition=partition, id=summary_id)
        if not rows:
            raise NotFound("summary", summary_id)
        return _summary(rows[0]["summary"])

    async def expand(
        self,
        partition: str | None,
        summary_id: str,
        *,
        depth: int | None = None,
        limit: int = 200,
        cursor: str | None = None,
    ) -> ExpandPage:
        """A page of what a summary covers, in thread order (see `MemoryStore`).

        ``depth=None`` (or a depth reaching level 0) reads messages by the summary's seq
        range through the range index; a smaller depth walks SUMMARIZES edges down.
        """
        if depth is not None and depth < 1:
            raise InvalidInput(f"depth must be at least 1, got {depth}")
        _check_limit(limit)
        offset = decode_cursor(cursor)
        top = await self.get_summary(partition, summary_id)
        target = 0 if depth is None else top.level - depth
        items: list[Message | Summary]
        if target <= 0:
            total = top.message_count
            rows = await self._query(
                q.MESSAGES_IN_RANGE,
                partition=top.partition,
                thread_id=top.thread_id,
                first_seq=top.first_seq,
                last_seq=top.last_seq,
                offset=offset,
                limit=limit,
            )
            items = [_message(row["props"]) for row in rows]
        else:
            rows = await self._query(q.DESCENDANTS, id=top.id, level=target, offset=offset, limit=limit)
            total = rows[0]["total"]
            items = sorted((_summary(raw) for raw in rows[0]["page"]), key=lambda node: node.first_seq)
        end = offset + len(items)
        return ExpandPage(
            summary_id=top.id,
            items=items,
            total=total,
            next_cursor=encode_cursor(end) if items and end < total else None,
        )

    async def covered_by(self, message_ids: Sequence[str]) -> dict[str, list[str]]:
        """The summary chain above each message, lowest level first (see `MemoryStore`)."""
        chains: dict[str, list[str]] = {message_id: [] for message_id in message_ids}
        if chains:
            for row in await self._query(q.COVERED_BY, ids=list(chains)):
                chains[row["id"]] = row["chain"]
        return chains

    async def frontier(self, partition: str, thread_id: str) -> list[FrontierItem]:
        """Top summaries and uncovered messages in thread order (see `MemoryStore`)."""
        rows = await self._query(q.FRONTIER, partition=partition, thread_id=thread_id)
        if not rows:
            raise NotFound("thread", thread_id)
        return _frontier(rows[0]["items"])

    async def summary_dag(self, partition: str, thread_id: str) -> SummaryDag:
        """Every summary, the summary-to-summary edges and the frontier, read at once."""

        async def work(tx: AsyncManagedTransaction) -> SummaryDag:
            rows = await self._run(tx, q.THREAD_SUMMARIES, partition=partition, thread_id=thread_id)
            if not rows:
                raise NotFound("thread", thread_id)
            (frontier,) = await self._run(tx, q.FRONTIER, partition=partition, thread_id=thread_id)
            nodes = [_summary(row) for row in rows[0]["summaries"]]
            return SummaryDag(
                thread_id=thread_id,
                partition=partition,
                nodes=nodes,
                edges=[
                    DagEdge(parent_id=node.id, child_id=child_id, position=position)
                    for node in nodes
                    if node.level > 1
                    for position, child_id in enumerate(node.child_ids)
                ],
                frontier=_frontier(frontier["items"]),
            )

        return await self._transaction(work, write=False)

    async def compaction_candidates(
        self, partition: str | None, *, min_uncovered: int, limit: int
    ) -> list[ThreadBacklog]:
        """Threads by uncovered count from the thread counters (see `MemoryStore`)."""
        _check_limit(limit)
        rows = await self._query(
            q.COMPACTION_CANDIDATES, partition=partition, min_uncovered=min_uncovered, limit=limit
        )
        return [ThreadBacklog.model_validate(row) for row in rows]

    async def snapshot(self, partition: str | None, thread_id: str) -> ThreadSnapshot:
        """The whole thread, in one read transaction (see `MemoryStore`)."""

        async def work(tx: AsyncManagedTransaction) -> ThreadSnapshot:
            rows = await self._run(tx, q.THREAD_SUMMARIES, partition=partition, thread_id=thread_id)
            if not rows:
                raise NotFound("thread", thread_id)
            thread = _thread(rows[0]["props"])
            (messages,) = await self._run(
                tx,
                q.GET_MESSAGES,
                partition=thread.partition,
                thread_id=thread_id,
                first_seq=0,
                last_seq=_UNBOUNDED,
                limit=_UNBOUNDED,
            )
            return ThreadSnapshot(
                thread=thread,
                messages=[_message(raw) for raw in messages["messages"]],
                summaries=[_summary(row) for row in rows[0]["summaries"]],
            )

        return await self._transaction(work, write=False)

