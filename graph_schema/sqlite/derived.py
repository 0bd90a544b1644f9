"""Tool messages' derived search text on SQLite: ``messages.search_text``, indexed by ``messages_fts``.

The text (``scheduler/search_text.py``) is a second column of the message's row and of
its full-text row (schema.sql), never a change to its content; a trigger re-indexes the
row when it is written. A vector made before the text existed goes in the same
transaction, so the embedding backfill makes it again from the text.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from palimpsest.graph_schema.models import Message
from palimpsest.graph_schema.prepare import check_page, check_search_texts
from palimpsest.graph_schema.sqlite import queries as q
from palimpsest.graph_schema.sqlite.base import SqliteBase, ids_json, message_from_row, transaction


class SqliteDerived(SqliteBase):
    """The two verbs of the derived search text, apart so the vector storage stays its own module."""

    async def missing_search_texts(
        self, partition: str | None, limit: int = 256, *, after: str | None = None
    ) -> list[Message]:
        """The partial index ``messages_search_text_missing`` walked from ``after`` (see `MemoryStore`)."""
        params = {"partition": partition, "after": after or "", "limit": check_page(limit)}

        def read(conn: sqlite3.Connection) -> list[Message]:
            return [message_from_row(row) for row in conn.execute(q.MISSING_SEARCH_TEXTS, params)]

        return await self._read(read)

    async def set_search_texts(self, items: Sequence[tuple[str, str]]) -> int:
        """Write the texts where none is, and drop those messages' older vectors, in one transaction."""
        check_search_texts(items)
        if not items:
            return 0

        def write(conn: sqlite3.Connection) -> int:
            written: list[str] = []
            with transaction(conn, "IMMEDIATE"):
                for message_id, text in items:
                    if conn.execute(q.SET_SEARCH_TEXT, {"id": message_id, "text": text}).rowcount:
                        written.append(message_id)
                if written and conn.execute(q.DELETE_EMBEDDINGS, {"ids": ids_json(written)}).rowcount:
                    conn.execute(q.BUMP_ANY_VECTOR_VERSION)
            return len(written)

        return await self._run(write)
