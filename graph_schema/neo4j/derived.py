"""Tool messages' derived search text on Neo4j: the ``search_text`` property, in the ``memory_text`` index.

The text (``scheduler/search_text.py``) is a property beside the message's content,
which never changes; the full-text index covers it (schema.cypher), so Lucene finds a
call by its purpose. A vector made before the text existed goes in the same
transaction, so the embedding backfill makes it again from the text.
"""

from __future__ import annotations

from collections.abc import Sequence

from palimpsest.graph_schema.models import Message
from palimpsest.graph_schema.neo4j import queries as q
from palimpsest.graph_schema.neo4j.base import Neo4jBase, message_from_record
from palimpsest.graph_schema.prepare import check_page, check_search_texts


class Neo4jDerived(Neo4jBase):
    """The two verbs of the derived search text, apart so the vector storage stays its own module."""

    async def missing_search_texts(
        self, partition: str | None, limit: int = 256, *, after: str | None = None
    ) -> list[Message]:
        """Tool messages without ``search_text``, by id from ``after`` (see `MemoryStore`)."""
        rows = await self._query(
            q.MISSING_SEARCH_TEXTS, partition=partition, after=after or "", limit=check_page(limit)
        )
        return [message_from_record(row["message"]) for row in rows]

    async def set_search_texts(self, items: Sequence[tuple[str, str]]) -> int:
        """Set ``search_text`` where none is and drop those messages' older vectors, in one transaction."""
        check_search_texts(items)
        if not items:
            return 0
        rows = await self._query(
            q.SET_SEARCH_TEXTS, write=True, items=[{"id": message_id, "text": text} for message_id, text in items]
        )
        return int(rows[0]["written"]) if rows else 0
