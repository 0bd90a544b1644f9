"""The fact layer on SQLite: facts, their sources, supersession and per-thread layer state.

It exists so the optional fact layer (facts drawn from messages, kept with their source
message ids, superseded rather than overwritten, switched on per thread with an extraction
cursor) lives apart from the messages and the summary DAG it reads from.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime

from palimpsest.graph_schema.errors import InvalidInput, NotFound
from palimpsest.graph_schema.models import Fact, FactLayerState, FactStats, NewFact
from palimpsest.graph_schema.prepare import check_supersession, derive_facts, fact_source_ids
from palimpsest.graph_schema.sqlite import queries as q
from palimpsest.graph_schema.sqlite.base import (
    SqliteBase,
    clamp_int64,
    ids_json,
    message_from_row,
    page_limit,
    require_thread,
    stored_time,
    transaction,
)


def _facts(conn: sqlite3.Connection, partition: str | None, ids: Sequence[str]) -> list[Fact]:
    """The facts with these ids, in the order asked, unknown ones left out."""
    rows = {row["id"]: row for row in conn.execute(q.FACTS_BY_IDS, {"ids": ids_json(ids), "partition": partition})}
    return _with_sources(conn, [rows[fact_id] for fact_id in dict.fromkeys(ids) if fact_id in rows])


def _with_sources(conn: sqlite3.Connection, rows: Sequence[sqlite3.Row]) -> list[Fact]:
    """Facts from their rows, each with its source message ids in thread order."""
    sources: dict[str, list[str]] = {}
    for fact_id, message_id in conn.execute(q.FACT_SOURCES, {"ids": ids_json([row["id"] for row in rows])}):
        sources.setdefault(fact_id, []).append(message_id)
    return [Fact.model_validate({**dict(row), "source_message_ids": sources.get(row["id"], [])}) for row in rows]


def _layer(row: sqlite3.Row) -> FactLayerState:
    return FactLayerState(
        thread_id=row["thread_id"], partition=row["partition"], enabled=bool(row["enabled"]),
        extracted_seq=row["extracted_seq"],
    )  # fmt: skip


class SqliteFacts(SqliteBase):
    """The fact layer verbs, apart because facts are an optional layer with their own tables and cursors."""

    async def add_facts(self, facts: Sequence[NewFact]) -> list[Fact]:
        """Insert new facts and their sources under ``BEGIN IMMEDIATE``; stored ones stay as they are."""
        source_ids = fact_source_ids(facts)

        def write(conn: sqlite3.Connection) -> list[Fact]:
            with transaction(conn, "IMMEDIATE"):
                found = conn.execute(q.FACT_SOURCE_MESSAGES, {"ids": ids_json(source_ids)})
                derived = derive_facts(facts, {row["id"]: message_from_row(row) for row in found})
                for fact in derived:
                    row = (
                        fact.id, fact.partition, fact.project, fact.text, fact.kind, fact.subject,
                        fact.thread_id, stored_time(fact.created_at),
                    )  # fmt: skip
                    if conn.execute(q.INSERT_FACT, row).rowcount == 1:
                        conn.executemany(q.INSERT_FACT_SOURCE, [(fact.id, m) for m in fact.source_message_ids])
                return _facts(conn, None, [fact.id for fact in derived])

        return await self._run(write)

    async def get_facts(self, partition: str | None, fact_ids: Sequence[str]) -> list[Fact]:
        """Facts by id, in the order asked."""
        return await self._read(lambda conn: _facts(conn, partition, fact_ids))

    async def supersede_fact(self, partition: str, old_id: str, new_id: str, *, at: datetime) -> Fact:
        """Set ``valid_until`` and write the SUPERSEDES row in one ``BEGIN IMMEDIATE`` transaction."""

        def write(conn: sqlite3.Connection) -> Fact:
            with transaction(conn, "IMMEDIATE"):
                found = {fact.id: fact for fact in _facts(conn, partition, [old_id, new_id])}
                for fact_id in (old_id, new_id):
                    if fact_id not in found:
                        raise NotFound("fact", fact_id)
                if not check_supersession(found[old_id], found[new_id], at):
                    conn.execute(q.SUPERSEDE_FACT, {"at": stored_time(at), "old_id": old_id})
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
            "current_only": int(current_only), "limit": page_limit(limit),
        }  # fmt: skip

        def read(conn: sqlite3.Connection) -> list[Fact]:
            with transaction(conn, "DEFERRED"):
                return _with_sources(conn, conn.execute(q.LIST_FACTS, params).fetchall())

        return await self._read(read)

    async def fact_stats(self, partition: str | None, *, thread_id: str | None = None) -> FactStats:
        """One GROUP BY over (subject, kind, current)."""
        params = {"partition": partition, "thread_id": thread_id}

        def read(conn: sqlite3.Connection) -> FactStats:
            counts = [(row[0], row[1], bool(row[2]), row[3]) for row in conn.execute(q.FACT_STATS, params)]
            return FactStats.from_counts(partition, thread_id, counts)

        return await self._read(read)

    async def clear_facts(self, partition: str, thread_id: str | None = None) -> int:
        """Restore what cleared facts superseded, delete them (sources cascade), reset cursors."""
        params = {"partition": partition, "thread_id": thread_id}

        def write(conn: sqlite3.Connection) -> int:
            with transaction(conn, "IMMEDIATE"):
                if thread_id is not None:
                    require_thread(conn, partition, thread_id)
                conn.execute(q.RESTORE_SUPERSEDED, params)
                conn.execute(q.DELETE_SUPERSEDES, params)
                deleted = conn.execute(q.DELETE_FACTS, params).rowcount
                conn.execute(q.RESET_FACT_CURSORS, params)
            return int(deleted)

        return await self._run(write)

    async def fact_layer(self, partition: str | None, thread_id: str) -> FactLayerState:
        """The thread's layer row, or the defaults (off, nothing read) when it has none."""

        def read(conn: sqlite3.Connection) -> FactLayerState:
            rows = conn.execute(q.FACT_LAYER, {"thread_id": thread_id, "partition": partition}).fetchall()
            if not rows:
                raise NotFound("thread", thread_id)
            if len(rows) > 1:
                raise InvalidInput(f"thread id {thread_id!r} exists in several partitions: name the partition")
            return _layer(rows[0])

        return await self._read(read)

    async def set_fact_layer(self, partition: str, thread_id: str, enabled: bool) -> FactLayerState:
        """Upsert the thread's layer row with the new switch."""
        params = {"thread_id": thread_id, "partition": partition, "enabled": int(enabled)}

        def write(conn: sqlite3.Connection) -> FactLayerState:
            with transaction(conn, "IMMEDIATE"):
                require_thread(conn, partition, thread_id)
                conn.execute(q.SET_FACT_LAYER, params)
                return _layer(conn.execute(q.FACT_LAYER, params).fetchone())

        return await self._run(write)

    async def advance_fact_cursor(self, partition: str, thread_id: str, seq: int) -> FactLayerState:
        """Upsert the cursor as the larger of the stored one and ``seq``."""
        params = {"thread_id": thread_id, "partition": partition, "seq": clamp_int64(seq)}

        def write(conn: sqlite3.Connection) -> FactLayerState:
            with transaction(conn, "IMMEDIATE"):
                row = conn.execute(q.FACT_LAYER, params).fetchone()
                if row is None:
                    raise NotFound("thread", thread_id)
                if not -1 <= seq < row["message_count"]:
                    raise InvalidInput(
                        f"extraction cursor {seq} is outside thread {thread_id!r} (seq -1..{row['message_count'] - 1})"
                    )
                conn.execute(q.ADVANCE_FACT_CURSOR, params)
                return _layer(conn.execute(q.FACT_LAYER, params).fetchone())

        return await self._run(write)

    async def fact_layer_threads(self, partition: str | None, *, limit: int = 10_000) -> list[FactLayerState]:
        """Threads with a layer row switched on."""
        params = {"partition": partition, "limit": page_limit(limit)}
        return await self._run(lambda conn: [_layer(row) for row in conn.execute(q.FACT_LAYER_THREADS, params)])
