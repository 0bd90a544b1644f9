"""Session readings on Neo4j: what a model made of a thread, one ``SessionReading`` node a thread."""

from __future__ import annotations

from palimpsest.graph_schema.models import SessionReadingRecord
from palimpsest.graph_schema.neo4j import queries as q
from palimpsest.graph_schema.neo4j.base import Neo4jBase, plain_props


class Neo4jReadings(Neo4jBase):
    """Session readings, apart from the messages: bookkeeping maintenance writes, a session start reads."""

    async def session_reading(self, partition: str, thread_id: str) -> SessionReadingRecord | None:
        """The thread's reading, if any (see `MemoryStore`)."""
        rows = await self._query(q.SESSION_READING, partition=partition, thread_id=thread_id)
        return SessionReadingRecord.model_validate(plain_props(rows[0]["props"])) if rows else None

    async def save_session_reading(self, record: SessionReadingRecord) -> None:
        """Merge the thread's node and set the reading on it, in one transaction (see `MemoryStore`)."""
        await self._query(q.SAVE_SESSION_READING, write=True, props=record.model_dump())
