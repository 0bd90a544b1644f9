"""Read positions on SQLite: where a hook stopped reading each transcript file, in ``read_positions``.

Apart from the messages on purpose: a hook's bookkeeping (a local path, a byte offset)
is not the conversation, so it never lands in a message's metadata or in an export.
`move_legacy_positions` brings a file written when it did (metadata ``hook_cursor``)
over, once, when the table is first made.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence

from palimpsest.graph_schema.models import ReadPosition
from palimpsest.graph_schema.positions import move_positions
from palimpsest.graph_schema.sqlite import queries as q
from palimpsest.graph_schema.sqlite.base import SqliteBase, transaction

#: The table's statement in schema.sql, made by the migration in the same transaction as the move.
_TABLE = re.compile(r"CREATE TABLE IF NOT EXISTS read_positions \(.*?\)[^;]*;", re.S)


def _save(conn: sqlite3.Connection, partition: str, thread_id: str, positions: Sequence[ReadPosition]) -> None:
    conn.executemany(
        q.SAVE_READ_POSITION,
        [{"partition": partition, "thread_id": thread_id, **position.model_dump()} for position in positions],
    )


def move_legacy_positions(conn: sqlite3.Connection, schema: str) -> None:
    """Make ``read_positions`` and move every ``hook_cursor`` into it, in one transaction.

    Called for a file that has threads but no ``read_positions`` table yet: one scan of
    the messages, once. Two processes opening the file at once are serialized by the
    write lock; the second finds nothing left to move.
    """
    found = _TABLE.search(schema)
    assert found is not None, "schema.sql defines read_positions"
    with transaction(conn, "IMMEDIATE"):
        conn.execute(found.group(0))
        moved = move_positions(tuple(row) for row in conn.execute(q.CURSOR_MESSAGES))
        edits = [{"id": key, "metadata": text} for key, text in moved.metadata.items()]
        conn.executemany(q.SET_MESSAGE_METADATA, edits)
        for (partition, thread_id), positions in moved.positions.items():
            _save(conn, partition, thread_id, positions)


class SqlitePositions(SqliteBase):
    """Read positions, on the writer connection: a hook opens the store for one turn, one connection is cheaper."""

    async def read_positions(self, partition: str, thread_id: str) -> list[ReadPosition]:
        """The thread's positions in path order (see `MemoryStore`)."""
        params = {"partition": partition, "thread_id": thread_id}

        def read(conn: sqlite3.Connection) -> list[ReadPosition]:
            return [ReadPosition.model_validate(dict(row)) for row in conn.execute(q.READ_POSITIONS, params)]

        return await self._run(read)

    async def save_read_positions(self, partition: str, thread_id: str, positions: Sequence[ReadPosition]) -> None:
        """Upsert each file's position in one transaction (see `MemoryStore`)."""

        def save(conn: sqlite3.Connection) -> None:
            with transaction(conn, "IMMEDIATE"):
                _save(conn, partition, thread_id, positions)

        if positions:
            await self._run(save)
