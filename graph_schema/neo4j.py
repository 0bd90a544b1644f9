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
from datetime import UTC, datetime, timedelta
from typing import Any, LiteralString, TypeVar, cast

import neo4j
from neo4j import AsyncDriver, AsyncGraphDatabase, AsyncManagedTransaction, RoutingControl
from neo4j import exceptions as neo4j_errors
from neo4j.time import DateTime as Neo4jDateTime

from graph_schema import identity
from graph_schema import neo4j_queries as q
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
from graph_schema.store import MemoryStore, Neo4jCredentials
from graph_schema.vectors import SNIPPET_CHARS, VectorSpace, check_index_args, check_kinds, head_snippet, unit_vectors

T = TypeVar("T")

#: Stands for "no upper bound" where Cypher needs a number (LIMIT, a seq bound).
_UNBOUNDED = sys.maxsize
_WORD = re.compile(r"\w+")
#: Schema-rule races between processes initializing at once are harmless.
_SCHEMA_ALREADY_THERE = "AlreadyExists"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)
#: The timestamps message and summary queries return as epoch microseconds.
_EPOCH_US_KEYS = ("created_at", "earliest_at", "latest_at")
#: Vector-index candidates asked per hit wanted, and at least this many: filters
#: (partition, kind, time) drop some, and asking again costs a round trip.
VECTOR_OVERSAMPLE = 4
VECTOR_CANDIDATES_MIN = 64
#: Past this many candidates the partition's vectors are ranked exactly instead.
VECTOR_CANDIDATES_MAX = 4096


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


def _epoch_us(value: datetime) -> int:
    """Microseconds since the epoch, exact, for bulk writes.

    The driver packs an int natively but a datetime in pure Python (~0.1 ms a row), so
    appends send this and Cypher rebuilds the UTC DateTime (see ``APPEND_WRITE``).
    """
    return (cast(datetime, _aware(value)) - _EPOCH) // _MICROSECOND


def _from_epoch_us(data: dict[str, Any]) -> dict[str, Any]:
    """Turn timestamps sent as epoch microseconds back into aware UTC datetimes.

    Message and summary queries return ints (see ``_MESSAGE_PROPS`` in the queries):
    the driver hydrates each DateTime in pure Python, most of a read's time.
    """
    for key in _EPOCH_US_KEYS:
        value = data.get(key)
        if isinstance(value, int):
            data[key] = _EPOCH + timedelta(microseconds=value)
    return data


def _props(raw: dict[str, Any]) -> dict[str, Any]:
    return {key: _native(value) for key, value in raw.items()}


def _message(raw: dict[str, Any]) -> Message:
    data = _from_epoch_us(_props(raw))
    data["metadata"] = json.loads(data.get("metadata") or "{}")
    return Message.model_validate(data)


def _summary(record: dict[str, Any]) -> Summary:
    parents = record["parent_ids"]
    return Summary.model_validate(
        {
            **_from_epoch_us(_props(record["props"])),
            "child_ids": record["child_ids"],
            "parent_id": parents[0] if parents else None,
        }
    )


def _thread(raw: dict[str, Any]) -> Thread:
    return Thread.model_validate(_props(raw))


def _frontier(items: list[dict[str, Any]]) -> list[FrontierItem]:
    return sorted((FrontierItem.model_validate(item) for item in items), key=lambda item: item.first_seq)


def _vector_hits(rows: list[dict[str, Any]]) -> list[SearchHit]:
    """Semantic hits from ranked rows, best first (ties by id, as the query orders them)."""
    hits = [
        SearchHit(
            id=row["id"],
            kind=row["kind"],
            thread_id=row["thread_id"],
            partition=row["partition"],
            score=min(1.0, max(-1.0, row["score"])),
            snippet=head_snippet(row["text"] or ""),
            created_at=_native(row["created_at"]),
            source_id=row["source_id"],
            level=row["level"],
            role=row["role"],
        )
        for row in rows
    ]
    return sorted(hits, key=lambda hit: (-hit.score, hit.id))


def _fact(record: dict[str, Any]) -> Fact:
    """A fact from ``_FACT_MAP``: properties, ordered sources, superseder."""
    superseders = record["superseded_by"]
    return Fact.model_validate(
        {
            **_props(record["props"]),
            "source_message_ids": record["sources"],
            "superseded_by": superseders[0] if superseders else None,
        }
    )


def _layer(row: dict[str, Any]) -> FactLayerState:
    return FactLayerState.model_validate(row)


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
        self._vectors = VectorSpace()

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
            metadata = [json.dumps(message.metadata) if message.metadata else "{}" for message in prepared]
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
                       "project": message_project, "created_at": _epoch_us(message.created_at)}
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
        check_limit(limit)
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
            check_limit(limit)
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
        check_limit(limit)
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
            check_limit(limit)
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
        check_limit(limit)
        offset = decode_cursor(cursor)
        top = await self.get_summary(partition, summary_id)
        target = 0 if depth is None else top.level - depth
        items: list[Message | Summary]
        if target <= 0:
            total = top.message_count
            items = []
            if offset < total:  # past the end there is nothing to read (and no seq to compute)
                (row,) = await self._query(
                    q.MESSAGES_IN_RANGE,
                    partition=top.partition,
                    thread_id=top.thread_id,
                    first_seq=top.first_seq + offset,
                    last_seq=top.last_seq,
                    limit=min(limit, total - offset),
                )
                items = [_message(raw) for raw in row["messages"]]
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
        check_limit(limit)
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

    # -- maintenance: leases and cycle records ------------------------------------

    async def acquire_lease(
        self, name: str, holder: str, ttl_seconds: float, *, now: datetime | None = None
    ) -> bool:
        """Lock the lease node, then take it if free, expired or ours (see `MemoryStore`)."""
        moment, expires_at = lease_times(name, holder, ttl_seconds, now)

        async def work(tx: AsyncManagedTransaction) -> bool:
            (lease,) = await self._run(tx, q.LEASE_LOCK, name=name, holder=holder, expires_at=expires_at)
            if lease["holder"] != holder and _native(lease["expires_at"]) > moment:
                return False
            await self._run(tx, q.LEASE_TAKE, name=name, holder=holder, expires_at=expires_at)
            return True

        return await self._transaction(work, write=True)

    async def release_lease(self, name: str, holder: str) -> None:
        """Expire the lease node, only when ``holder`` holds it (see `MemoryStore`)."""
        await self._query(q.LEASE_RELEASE, write=True, name=name, holder=holder)

    async def record_cycle(self, cycle: MaintenanceCycle) -> None:
        """Create the cycle's node once; an id already recorded is left as it was."""
        props = cycle.model_dump(exclude={"steps"}) | {"steps": json.dumps(cycle.steps)}
        await self._query(q.RECORD_CYCLE, write=True, props=props)

    async def recent_cycles(self, limit: int) -> list[MaintenanceCycle]:
        """The latest cycles by start time, from the ``started_at`` index (see `MemoryStore`)."""
        check_limit(limit)
        cycles: list[MaintenanceCycle] = []
        for row in await self._query(q.RECENT_CYCLES, limit=limit):
            props = _props(row["props"])
            props["steps"] = json.loads(props.get("steps") or "{}")
            props["errors"] = list(props.get("errors") or [])
            cycles.append(MaintenanceCycle.model_validate(props))
        return cycles

    # -- the fact layer: facts, supersession and per-thread layer state ------------

    async def add_facts(self, facts: Sequence[NewFact]) -> list[Fact]:
        """Read the sources, derive, create the missing facts with their edges: one transaction."""
        source_ids = fact_source_ids(facts)

        async def work(tx: AsyncManagedTransaction) -> list[Fact]:
            found = await self._run(tx, q.FACT_SOURCE_MESSAGES, ids=source_ids)
            derived = derive_facts(facts, {row["props"]["id"]: _message(row["props"]) for row in found})
            rows = [
                {
                    "props": fact.model_dump(exclude={"valid_until", "superseded_by", "source_message_ids"}),
                    "sources": fact.source_message_ids,
                }
                for fact in derived
            ]
            await self._run(tx, q.WRITE_FACTS, facts=rows)
            stored = await self._run(tx, q.GET_FACTS, ids=[fact.id for fact in derived], partition=None)
            by_id = {fact.id: fact for fact in (_fact(row["fact"]) for row in stored)}
            return [by_id[fact.id] for fact in derived]

        return await self._transaction(work, write=True)

    async def get_facts(self, partition: str | None, fact_ids: Sequence[str]) -> list[Fact]:
        """Facts by id, in the order asked (see `MemoryStore`)."""
        ids = list(dict.fromkeys(fact_ids))
        rows = await self._query(q.GET_FACTS, ids=ids, partition=partition)
        by_id = {fact.id: fact for fact in (_fact(row["fact"]) for row in rows)}
        return [by_id[fact_id] for fact_id in ids if fact_id in by_id]

    async def supersede_fact(self, partition: str, old_id: str, new_id: str, *, at: datetime) -> Fact:
        """Lock the old fact, check, then set ``valid_until`` and SUPERSEDES (see `MemoryStore`)."""

        async def work(tx: AsyncManagedTransaction) -> Fact:
            await self._run(tx, q.SUPERSEDE_LOCK, old_id=old_id, partition=partition)
            rows = await self._run(tx, q.GET_FACTS, ids=[old_id, new_id], partition=partition)
            found = {fact.id: fact for fact in (_fact(row["fact"]) for row in rows)}
            for fact_id in (old_id, new_id):
                if fact_id not in found:
                    raise NotFound("fact", fact_id)
            if check_supersession(found[old_id], found[new_id], at):
                return found[old_id]
            await self._run(tx, q.SUPERSEDE_WRITE, old_id=old_id, new_id=new_id, at=_aware(at))
            (row,) = await self._run(tx, q.GET_FACTS, ids=[old_id], partition=partition)
            return _fact(row["fact"])

        return await self._transaction(work, write=True)

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
        """Facts by the filters given, newest first (see `MemoryStore`)."""
        check_limit(limit)
        rows = await self._query(
            q.LIST_FACTS,
            partition=partition,
            project=project,
            subject=subject,
            thread_id=thread_id,
            current_only=current_only,
            limit=limit,
        )
        return [_fact(row["fact"]) for row in rows]

    async def fact_stats(self, partition: str | None, *, thread_id: str | None = None) -> FactStats:
        """Counts by (subject, kind, current) in one aggregation (see `MemoryStore`)."""
        rows = await self._query(q.FACT_STATS, partition=partition, thread_id=thread_id)
        counts = [(row["subject"], row["kind"], row["current"], row["n"]) for row in rows]
        return FactStats.from_counts(partition, thread_id, counts)

    async def clear_facts(self, partition: str, thread_id: str | None = None) -> int:
        """Restore, delete and reset cursors in one transaction (see `MemoryStore`)."""

        async def work(tx: AsyncManagedTransaction) -> int:
            if thread_id is not None:
                if not await self._run(tx, q.FACT_LAYER, partition=partition, thread_id=thread_id):
                    raise NotFound("thread", thread_id)
            await self._run(tx, q.RESTORE_SUPERSEDED, partition=partition, thread_id=thread_id)
            (deleted,) = await self._run(tx, q.CLEAR_FACTS, partition=partition, thread_id=thread_id)
            await self._run(tx, q.RESET_FACT_CURSORS, partition=partition, thread_id=thread_id)
            return int(deleted["deleted"])

        return await self._transaction(work, write=True)

    async def fact_layer(self, partition: str | None, thread_id: str) -> FactLayerState:
        """From the thread node's ``facts_enabled`` and ``facts_seq`` (see `MemoryStore`)."""
        rows = await self._query(q.FACT_LAYER, partition=partition, thread_id=thread_id)
        if not rows:
            raise NotFound("thread", thread_id)
        return _layer(rows[0])

    async def set_fact_layer(self, partition: str, thread_id: str, enabled: bool) -> FactLayerState:
        """Set the thread node's ``facts_enabled`` (see `MemoryStore`)."""
        rows = await self._query(
            q.SET_FACT_LAYER, write=True, partition=partition, thread_id=thread_id, enabled=enabled
        )
        if not rows:
            raise NotFound("thread", thread_id)
        return _layer(rows[0])

    async def advance_fact_cursor(self, partition: str, thread_id: str, seq: int) -> FactLayerState:
        """Check the seq against the thread, then move ``facts_seq`` forward only (see `MemoryStore`)."""

        async def work(tx: AsyncManagedTransaction) -> FactLayerState:
            rows = await self._run(tx, q.FACT_LAYER, partition=partition, thread_id=thread_id)
            if not rows:
                raise NotFound("thread", thread_id)
            count = rows[0]["message_count"]
            if not -1 <= seq < count:
                raise InvalidInput(
                    f"extraction cursor {seq} is outside thread {thread_id!r} (seq -1..{count - 1})"
                )
            (row,) = await self._run(tx, q.ADVANCE_FACT_CURSOR, partition=partition, thread_id=thread_id, seq=seq)
            return _layer(row)

        return await self._transaction(work, write=True)

    async def fact_layer_threads(self, partition: str | None, *, limit: int = 10_000) -> list[FactLayerState]:
        """Thread nodes with ``facts_enabled`` set (see `MemoryStore`)."""
        check_limit(limit)
        rows = await self._query(q.FACT_LAYER_THREADS, partition=partition, limit=limit)
        return [_layer(row) for row in rows]

    # -- semantic search: (:Embedding)-[:EMBEDS]->(node) and the vector index -----------

    async def ensure_vector_index(self, dimensions: int, model: str) -> None:
        """Create ``memory_embedding`` for this size; rebuild it only while it holds no vector."""
        check_index_args(dimensions, model)
        if (self._vectors.dimensions, self._vectors.model) == (dimensions, model):
            return
        rows = await self._query(q.VECTOR_INDEX_SIZE, name=q.VECTOR_INDEX_NAME)
        existing = rows[0]["dimensions"] if rows else None
        if existing is not None and existing != dimensions:
            (row,) = await self._query(q.ANY_EMBEDDING)
            if row["any"]:
                raise Conflict(
                    f"the store's vector index holds {existing}-number vectors; model {model!r} makes "
                    f"{dimensions}: keep the embedder that filled it, or use a fresh store"
                )
            await self._query(q.DROP_VECTOR_INDEX, write=True)
        if existing != dimensions:
            await self._query(q.CREATE_VECTOR_INDEX, write=True, dimensions=dimensions)
        await self._query(q.AWAIT_VECTOR_INDEX)
        self._vectors.settle(dimensions, model)

    async def set_embeddings(self, items: Sequence[tuple[str, Sequence[float]]], model: str) -> int:
        """MERGE each node's Embedding and set its vector, in one transaction (see `MemoryStore`)."""
        dimensions, _ = self._vectors.require()
        self._vectors.check_model(model)
        latest = dict(items)
        if not latest:
            return 0
        matrix = unit_vectors(list(latest.values()), dimensions)
        rows = [{"id": node_id, "vector": matrix[index].tolist()} for index, node_id in enumerate(latest)]
        (written,) = await self._query(q.SET_EMBEDDINGS, write=True, rows=rows, model=model)
        return int(written["written"])

    async def missing_embeddings(
        self,
        partition: str | None,
        kinds: Sequence[SearchKind] = ("message", "summary", "fact"),
        limit: int = 256,
        *,
        ids: Sequence[str] | None = None,
        after: str | None = None,
    ) -> list[EmbeddingTodo]:
        """Per label, nodes without an Embedding of the model, by id from ``after`` (see `MemoryStore`)."""
        _, model = self._vectors.require()
        asked = check_kinds(kinds)
        check_limit(limit)
        if ids is not None and not ids:
            return []
        queries = q.MISSING_EMBEDDINGS if ids is None else q.MISSING_EMBEDDINGS_AMONG
        params = {
            "partition": partition,
            "model": model,
            "after": after or "",
            "limit": limit,
            "chars": MAX_EMBED_CHARS,
            "ids": list(ids or []),
        }
        todo: list[EmbeddingTodo] = []
        for kind in asked:
            todo += [EmbeddingTodo(row["id"], kind, row["text"]) for row in await self._query(queries[kind], **params)]
        return sorted(todo)[:limit]

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
        """Index candidates widened until enough pass the filters; exact scores (see `MemoryStore`).

        A thread is ranked exactly from its own vectors. Otherwise the vector index gives
        ``k`` candidates, ``k`` grows while too few pass the filters and the index had
        more, and past `VECTOR_CANDIDATES_MAX` the partition is ranked exactly.
        """
        dimensions, model = self._vectors.require()
        asked = check_kinds(kinds)
        check_limit(limit)
        query = unit_vectors([vector], dimensions)[0].tolist()
        if not asked:
            return []
        params: dict[str, Any] = {
            "vector": query,
            "model": model,
            "kinds": asked,
            "partition": partition,
            "thread_id": thread_id,
            "since": _aware(since),
            "until": _aware(until),
            "limit": limit,
            "chars": SNIPPET_CHARS + 1,
        }
        if thread_id is not None:
            found = [row["hit"] for row in await self._query(q.VECTOR_SEARCH_THREAD, **params)]
            return _vector_hits(found)
        k = max(limit * VECTOR_OVERSAMPLE, VECTOR_CANDIDATES_MIN)
        while True:
            (row,) = await self._query(q.VECTOR_SEARCH, k=k, **params)
            if len(row["hits"]) >= limit or row["candidates"] < k:
                return _vector_hits(row["hits"])
            if k >= VECTOR_CANDIDATES_MAX:
                break
            k = min(k * 8, VECTOR_CANDIDATES_MAX)
        exact = q.VECTOR_SEARCH_ALL if partition is None else q.VECTOR_SEARCH_PARTITION
        return _vector_hits([row["hit"] for row in await self._query(exact, **params)])

    # -- hybrid search: candidate positions and metadata -------------------------------

    async def message_refs(self, partition: str | None, message_ids: Sequence[str]) -> list[MessageRef]:
        """One UNWIND over the id index, content left out (see `MemoryStore`)."""
        wanted = unique_ids("message", message_ids)
        if not wanted:
            return []
        (row,) = await self._query(q.MESSAGE_REFS, ids=wanted, partition=partition)
        found = {
            node_id: MessageRef(
                id=node_id, thread_id=thread_id, partition=where, seq=seq, role=role,
                metadata=json.loads(metadata or "{}"),
            )
            for node_id, thread_id, where, seq, role, metadata in row["refs"]
        }  # fmt: skip
        return [found[message_id] for message_id in wanted if message_id in found]
