"""Session readings on SQLite: what a model made of a thread, one ``session_readings`` row a thread."""

from __future__ import annotations

import sqlite3

from palimpsest.graph_schema.models import SessionReadingRecord
from palimpsest.graph_schema.sqlite import queries as q
from palimpsest.graph_schema.sqlite.base import SqliteBase, stored_time


class SqliteReadings(SqliteBase):
    """Session readings, apart from the messages: bookkeeping maintenance writes, a session start reads."""

    async def session_reading(self, partition: str, thread_id: str) -> SessionReadingRecord | None:
        """The thread's reading, if any (see `MemoryStore`)."""
        params = {"partition": partition, "thread_id": thread_id}

        def read(conn: sqlite3.Connection) -> SessionReadingRecord | None:
            row = conn.execute(q.SESSION_READING, params).fetchone()
            return SessionReadingRecord.model_validate(dict(row)) if row is not None else None

        return await self._read(read)

    async def save_session_reading(self, record: SessionReadingRecord) -> None:
        """Upsert the thread's one row (see `MemoryStore`)."""
        params = record.model_dump() | {"read_at": stored_time(record.read_at)}

        def save(conn: sqlite3.Connection) -> None:
            conn.execute(q.SAVE_SESSION_READING, params)

        await self._run(save)
