"""Read positions on Neo4j: where a hook stopped reading each transcript file, one ``ReadPosition`` node each.

Apart from the messages on purpose: a hook's bookkeeping (a local path, a byte offset)
is not the conversation, so it never lands in a message's metadata or in an export.
`move_legacy_positions` brings a store written when it did (metadata ``hook_cursor``)
over once, and records that in a ``StoreMigration`` node so later opens cost one lookup.
"""

from __future__ import annotations

from collections.abc import Sequence

from neo4j import AsyncManagedTransaction

from palimpsest.graph_schema.models import ReadPosition
from palimpsest.graph_schema.neo4j import queries as q
from palimpsest.graph_schema.neo4j.base import Neo4jBase
from palimpsest.graph_schema.positions import move_positions

#: The ``StoreMigration`` that moved read positions out of message metadata.
MIGRATION = "read_positions"


class Neo4jPositions(Neo4jBase):
    """Read positions, and the one-time move of those older hooks left in message metadata."""

    async def read_positions(self, partition: str, thread_id: str) -> list[ReadPosition]:
        """The thread's positions in path order (see `MemoryStore`)."""
        rows = await self._query(q.READ_POSITIONS, partition=partition, thread_id=thread_id)
        return [ReadPosition.model_validate(row) for row in rows]

    async def save_read_positions(self, partition: str, thread_id: str, positions: Sequence[ReadPosition]) -> None:
        """Merge each file's node and set its position, in one transaction (see `MemoryStore`)."""
        if positions:
            rows = [position.model_dump() for position in positions]
            params = {"partition": partition, "thread_id": thread_id, "positions": rows}
            await self._query(q.SAVE_READ_POSITIONS, write=True, **params)

    async def move_legacy_positions(self) -> None:
        """Move every ``hook_cursor`` into ``ReadPosition`` nodes, once per store, in one transaction."""
        (state,) = await self._query(q.MIGRATION_DONE, name=MIGRATION)
        if state["done"]:
            return

        async def work(tx: AsyncManagedTransaction) -> None:
            (lock,) = await self._run(tx, q.MIGRATION_LOCK, name=MIGRATION)
            if lock["done"]:
                return
            rows = await self._run(tx, q.CURSOR_MESSAGES)
            moved = move_positions((row["id"], row["partition"], row["thread_id"], row["metadata"]) for row in rows)
            edits = [{"id": key, "metadata": text} for key, text in moved.metadata.items()]
            await self._run(tx, q.SET_MESSAGE_METADATA, rows=edits)
            for (partition, thread_id), positions in moved.positions.items():
                saved = [position.model_dump() for position in positions]
                await self._run(tx, q.SAVE_READ_POSITIONS, partition=partition, thread_id=thread_id, positions=saved)
            await self._run(tx, q.MIGRATION_RECORD, name=MIGRATION)

        await self._transaction(work, write=True)
