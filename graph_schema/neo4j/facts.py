"""The fact layer on Neo4j: facts, supersession and per-thread layer state.

A fact is a node with ``EXTRACTED_FROM`` edges to the messages it came from and a
``SUPERSEDES`` edge from the fact that replaced it; whether a thread's facts are kept,
and how far extraction has read, live on the thread node (``facts_enabled``,
``facts_seq``). Validation and derivation come from `palimpsest.graph_schema.prepare`, so both
backends derive the same fact ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from neo4j import AsyncManagedTransaction

from palimpsest.graph_schema.errors import InvalidInput, NotFound
from palimpsest.graph_schema.models import Fact, FactLayerState, FactStats, NewFact
from palimpsest.graph_schema.neo4j import queries as q
from palimpsest.graph_schema.neo4j.base import Neo4jBase, aware, message_from_record, one_thread, plain_props
from palimpsest.graph_schema.prepare import check_limit, check_supersession, derive_facts, fact_source_ids


def _fact(record: dict[str, Any]) -> Fact:
    """A fact from ``_FACT_MAP``: properties, ordered sources, superseder."""
    superseders = record["superseded_by"]
    return Fact.model_validate(
        {
            **plain_props(record["props"]),
            "source_message_ids": record["sources"],
            "superseded_by": superseders[0] if superseders else None,
        }
    )


def _layer(row: dict[str, Any]) -> FactLayerState:
    return FactLayerState.model_validate(row)


class Neo4jFacts(Neo4jBase):
    """The fact layer verbs, apart because facts are an optional layer beside the lossless record."""

    async def add_facts(self, facts: Sequence[NewFact]) -> list[Fact]:
        """Read the sources, derive, create the missing facts with their edges: one transaction."""
        source_ids = fact_source_ids(facts)

        async def work(tx: AsyncManagedTransaction) -> list[Fact]:
            found = await self._run(tx, q.FACT_SOURCE_MESSAGES, ids=source_ids)
            derived = derive_facts(facts, {row["props"]["id"]: message_from_record(row["props"]) for row in found})
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
            await self._run(tx, q.SUPERSEDE_WRITE, old_id=old_id, new_id=new_id, at=aware(at))
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
                one_thread(await self._run(tx, q.FACT_LAYER, partition=partition, thread_id=thread_id), thread_id)
            await self._run(tx, q.RESTORE_SUPERSEDED, partition=partition, thread_id=thread_id)
            (deleted,) = await self._run(tx, q.CLEAR_FACTS, partition=partition, thread_id=thread_id)
            await self._run(tx, q.RESET_FACT_CURSORS, partition=partition, thread_id=thread_id)
            return int(deleted["deleted"])

        return await self._transaction(work, write=True)

    async def fact_layer(self, partition: str | None, thread_id: str) -> FactLayerState:
        """From the thread node's ``facts_enabled`` and ``facts_seq`` (see `MemoryStore`)."""
        rows = await self._query(q.FACT_LAYER, partition=partition, thread_id=thread_id)
        one_thread(rows, thread_id)
        return _layer(rows[0])

    async def set_fact_layer(self, partition: str, thread_id: str, enabled: bool) -> FactLayerState:
        """Set the thread node's ``facts_enabled`` (see `MemoryStore`)."""
        rows = await self._query(
            q.SET_FACT_LAYER, write=True, partition=partition, thread_id=thread_id, enabled=enabled
        )
        one_thread(rows, thread_id)
        return _layer(rows[0])

    async def advance_fact_cursor(self, partition: str, thread_id: str, seq: int) -> FactLayerState:
        """Check the seq against the thread, then move ``facts_seq`` forward only (see `MemoryStore`)."""

        async def work(tx: AsyncManagedTransaction) -> FactLayerState:
            rows = await self._run(tx, q.FACT_LAYER, partition=partition, thread_id=thread_id)
            one_thread(rows, thread_id)
            count = rows[0]["message_count"]
            if not -1 <= seq < count:
                raise InvalidInput(f"extraction cursor {seq} is outside thread {thread_id!r} (seq -1..{count - 1})")
            (row,) = await self._run(tx, q.ADVANCE_FACT_CURSOR, partition=partition, thread_id=thread_id, seq=seq)
            return _layer(row)

        return await self._transaction(work, write=True)

    async def fact_layer_threads(self, partition: str | None, *, limit: int = 10_000) -> list[FactLayerState]:
        """Thread nodes whose ``facts_enabled`` is not false (see `MemoryStore`)."""
        check_limit(limit)
        rows = await self._query(q.FACT_LAYER_THREADS, partition=partition, limit=limit)
        return [_layer(row) for row in rows]
