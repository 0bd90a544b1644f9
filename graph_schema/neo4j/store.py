"""The Neo4j backend of `MemoryStore`: the same contract as SQLite, for teams and scale.

Why it looks the way it does:

- `Neo4jStore` is assembled from one class per feature, each in its own module over
  the shared plumbing of `base`: the summary DAG (`dag`), facts (`facts`), vectors
  (`vectors`), maintenance (`maintenance`), transfer (`transfer`), archiving
  (`archive`), hooks' read positions (`positions`) and session readings
  (`readings`). This module adds the lifecycle, threads and messages, text search
  and stats.
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
- Validation and derivation come from `palimpsest.graph_schema.prepare`, ids and hashes from
  `palimpsest.graph_schema.identity`, so both backends agree byte for byte.
- Driver exceptions never leave the backend: `base` turns them into
  `StoreUnavailable`, `Conflict` or `InvalidInput` with one sentence naming the server.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, LiteralString, cast

import neo4j
from neo4j import AsyncDriver, AsyncGraphDatabase
from neo4j import exceptions as neo4j_errors

from palimpsest.graph_schema import identity
from palimpsest.graph_schema.errors import InvalidInput, NotFound
from palimpsest.graph_schema.models import (
    AppendResult,
    Message,
    NewMessage,
    SearchHit,
    SearchKind,
    StoreStats,
    Thread,
    utcnow,
)
from palimpsest.graph_schema.neo4j import queries as q
from palimpsest.graph_schema.neo4j.archive import Neo4jArchive
from palimpsest.graph_schema.neo4j.base import (
    EPOCH,
    UNBOUNDED,
    aware,
    epoch_us,
    message_from_record,
    one_thread,
    thread_from_record,
)
from palimpsest.graph_schema.neo4j.dag import Neo4jDag
from palimpsest.graph_schema.neo4j.derived import Neo4jDerived
from palimpsest.graph_schema.neo4j.facts import Neo4jFacts
from palimpsest.graph_schema.neo4j.maintenance import Neo4jMaintenance
from palimpsest.graph_schema.neo4j.positions import Neo4jPositions
from palimpsest.graph_schema.neo4j.readings import Neo4jReadings
from palimpsest.graph_schema.neo4j.transfer import Neo4jTransfer
from palimpsest.graph_schema.neo4j.vectors import Neo4jVectors
from palimpsest.graph_schema.prepare import check_kinds, check_limit, prepare_append
from palimpsest.graph_schema.store import MemoryStore

__all__ = ["Neo4jStore", "snippet"]

#: Schema-rule races between processes initializing at once are harmless.
_SCHEMA_ALREADY_THERE = "AlreadyExists"
_MICROSECOND = timedelta(microseconds=1)


def snippet(text: str, query: str, width: int = 240, derived: str | None = None) -> str:
    """A window of ``text`` around the first word of ``query`` it contains.

    ``derived``, a tool message's search text, is shown instead when it holds a word of
    the query and ``text``, the content, holds none: the hit was found by what the
    message is about.
    """
    words = sorted(set(identity.words(query)), key=len, reverse=True)[: q.MAX_QUERY_TERMS]
    pattern = re.compile("|".join(map(re.escape, words)), re.IGNORECASE) if words else None
    found = pattern.search(text) if pattern else None
    if found is None and derived and pattern and pattern.search(derived):
        text = derived
        found = pattern.search(text)
    start = max(0, (found.start() if found else 0) - width // 3)
    end = min(len(text), start + width)
    return ("…" if start else "") + text[start:end] + ("…" if end < len(text) else "")


def _epoch_us(value: datetime) -> int:
    """Microseconds since the epoch, exact, for bulk writes.

    The driver packs an int natively but a datetime in pure Python (~0.1 ms a row), so
    appends send this and Cypher rebuilds the UTC DateTime (see ``APPEND_WRITE``).
    """
    return (cast(datetime, aware(value)) - EPOCH) // _MICROSECOND


class Neo4jStore(
    Neo4jDag,
    Neo4jFacts,
    Neo4jVectors,
    Neo4jMaintenance,
    Neo4jTransfer,
    Neo4jArchive,
    Neo4jPositions,
    Neo4jReadings,
    Neo4jDerived,
    MemoryStore,
):
    """`MemoryStore` on a Neo4j 5 server (or cluster, or Aura) over Bolt.

    Args:
        uri: ``neo4j://``, ``bolt://`` or their ``+s``/``+ssc`` forms.
        credentials: User, password (None: no authentication) and database.
        retry_seconds: How long a transaction is retried on transient errors and
            outages before `StoreUnavailable` is raised.
        connect_seconds: How long to wait for a connection to open.
    """

    kind = "neo4j"

    # -- lifecycle ----------------------------------------------------------------

    async def initialize(self) -> None:
        """Connect; unless the database holds this schema's version, apply ``schema.cypher``.

        Why a version: the schema is about 25 statements, each a round trip and a
        notification, and every CLI command, hook and server opens the store; with the
        version checked, an open is one query. Applying is idempotent, so processes
        opening a new database at once do no harm; the version is recorded only once
        every index is online and the one-time data migrations have run (they come with
        a new schema version).
        """
        if self._driver is None:
            password = self._credentials.password
            try:
                self._driver = AsyncGraphDatabase.driver(
                    self._uri,
                    auth=neo4j.basic_auth(self._credentials.user, password) if password is not None else None,
                    max_transaction_retry_time=self._retry_seconds,
                    connection_timeout=self._connect_seconds,
                    user_agent="palimpsest",
                    # Queries name labels and relationship types an empty or young store
                    # does not hold yet (EXTRACTED_FROM before the first fact): the server's
                    # "does not exist" warnings say nothing wrong, yet each one logs a
                    # multi-KB record on every such query.
                    notifications_disabled_classifications=[neo4j.NotificationDisabledClassification.UNRECOGNIZED],
                )
            except (ValueError, neo4j_errors.ConfigurationError) as exc:
                raise InvalidInput(f"cannot use Neo4j URI {self._uri!r}: {exc}") from exc
        driver = self._driver
        async with self._translated():
            try:
                await driver.verify_connectivity()
            except ValueError as exc:  # an address the driver can only resolve now
                raise InvalidInput(f"cannot use Neo4j URI {self._uri!r}: {exc}") from exc
            version = q.schema_version()
            found, _, _ = await driver.execute_query(q.SCHEMA_VERSION, database_=self._credentials.database)
            if found and found[0]["version"] == version:
                return
            await self._drop_stale_text_index(driver)
            for statement in q.schema_statements():
                try:
                    # Trusted package data, not user input: the one non-literal query.
                    ddl: LiteralString = statement
                    await driver.execute_query(ddl, database_=self._credentials.database)
                except neo4j_errors.ClientError as exc:
                    if _SCHEMA_ALREADY_THERE not in (exc.code or ""):
                        raise
        await self._query(q.AWAIT_INDEXES)
        await self.move_legacy_positions()
        await self._query(q.MARK_SCHEMA_VERSION, write=True, version=version, now=utcnow())

    async def _drop_stale_text_index(self, driver: AsyncDriver) -> None:
        """Drop ``memory_text`` when it was made with another analyzer or properties than the schema's.

        ``CREATE ... IF NOT EXISTS`` would keep the old index, whose words then differ
        from the stemmed query's, or which leaves out tool messages' ``search_text``;
        the schema statement that follows makes it anew.
        """
        found, _, _ = await driver.execute_query(q.TEXT_INDEX_ANALYZER, database_=self._credentials.database)
        if found and (
            found[0]["analyzer"] != q.text_analyzer() or sorted(found[0]["properties"]) != q.text_properties()
        ):
            await driver.execute_query(q.DROP_TEXT_INDEX, database_=self._credentials.database)

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
        """Append in one statement under the thread's lock (see `MemoryStore` and ``q.APPEND``)."""
        prepared = prepare_append(partition, thread_id, messages, project)
        try:
            metadata = [json.dumps(message.metadata) if message.metadata else "{}" for message in prepared]
        except (TypeError, ValueError) as exc:
            raise InvalidInput(f"message metadata must be JSON: {exc}") from exc
        # The first of a caller id in the batch is the one stored, a repeat a duplicate.
        batch: dict[str, dict[str, Any]] = {}
        for message, meta in zip(prepared, metadata, strict=True):
            batch.setdefault(
                message.source_id,
                vars(message)
                | {
                    "metadata": meta,
                    "thread_id": thread_id,
                    "partition": partition,
                    "created_at": _epoch_us(message.created_at),
                },
            )
        (written,) = await self._query(
            q.APPEND,
            write=True,
            thread_id=thread_id,
            partition=partition,
            project=project,
            now=utcnow(),
            source_ids=list(batch),
            rows=list(batch.values()),
        )
        stored_ids: dict[str, str] = dict(written["existing"])
        appended = sum(1 for source_id in batch if source_id not in stored_ids)
        return AppendResult(
            thread_id=thread_id,
            partition=partition,
            appended=appended,
            duplicates=len(prepared) - appended,
            message_ids=[stored_ids.get(message.source_id, message.id) for message in prepared],
            uncompacted=written["uncovered"],
        )

    async def get_thread(self, partition: str | None, thread_id: str) -> Thread:
        """One thread with its message count (see `MemoryStore`)."""
        return thread_from_record((await self._thread_record(partition, thread_id))["props"])

    async def list_threads(self, partition: str | None, *, limit: int = 100) -> list[Thread]:
        """Threads, most recently updated first (see `MemoryStore`)."""
        check_limit(limit)
        rows = await self._query(q.LIST_THREADS, partition=partition, limit=limit)
        return [thread_from_record(row["props"]) for row in rows]

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
            last_seq=UNBOUNDED if last_seq is None else last_seq,
            limit=UNBOUNDED if limit is None else limit,
        )
        one_thread(rows, thread_id)
        return [message_from_record(raw) for raw in rows[0]["messages"]]

    async def get_message(self, partition: str | None, message_id: str) -> Message:
        """One message by id (see `MemoryStore`)."""
        rows = await self._query(q.GET_MESSAGE, partition=partition, id=message_id)
        if not rows:
            raise NotFound("message", message_id)
        return message_from_record(rows[0]["props"])

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
        snippets: bool = True,
    ) -> list[SearchHit]:
        """Lucene full-text search over the ``memory_text`` index (see `MemoryStore`).

        Lucene is asked for its top candidates, not every match (`Neo4jBase._top_hits`):
        at a million messages a question holding "the" matches them all. Snippets are
        built whatever ``snippets`` says: `snippet` is a few string scans over text the
        query returns anyway, where deferring it would cost a second round trip.
        """
        check_limit(limit)
        asked = check_kinds(kinds)
        lucene = q.text_index_query(query)
        if lucene is None or not asked:
            return []
        rows = await self._top_hits(
            q.SEARCH_TEXT,
            q.SEARCH_TEXT_ALL,
            query=lucene,
            partition=partition,
            thread_id=thread_id,
            kinds=asked,
            since=aware(since),
            until=aware(until),
            limit=limit,
        )
        return [
            SearchHit(
                id=row["id"],
                kind=row["kind"],
                thread_id=row["thread_id"],
                partition=row["partition"],
                score=row["score"],
                snippet=snippet(row["text"] or "", query, derived=row["derived"]),
                created_at=epoch_us(row["created_at"]),
                source_id=row["source_id"],
                level=row["level"],
                role=row["role"],
            )
            for row in rows
        ]

    async def partitions(self) -> dict[str, int]:
        """Threads counted by partition (see `MemoryStore`)."""
        return {row["partition"]: row["threads"] for row in await self._query(q.PARTITIONS)}

    async def text_snippets(self, query: str, hits: Sequence[SearchHit]) -> list[SearchHit]:
        """The hits as they are: `search_text` built their snippets already (see `MemoryStore`)."""
        return list(hits)

    async def stats(self, partition: str | None) -> StoreStats:
        """Counts from the thread counters, summaries by level and facts (see `MemoryStore`)."""
        (row,) = await self._query(q.STATS, partition=partition)
        (archived,) = await self._query(q.ARCHIVED_TOTALS, partition=partition)
        return StoreStats(
            store=self.kind,
            partition=partition,
            threads=row["threads"],
            messages=row["messages"] or 0,
            summaries_by_level={level: count for level, count in sorted(row["levels"])},
            facts=row["facts"],
            tokens=row["tokens"] or 0,
            secrets_redacted=row["secrets"] or 0,
            archived_messages=archived["messages"],
            archived_runs=archived["runs"],
        )
