"""Opening a store from its URI: which backend a URI names.

Kept apart from the protocol (`store.py`) so that the protocol imports no backend and
each backend imports the protocol without a cycle. Backends are imported only when a
URI asks for them, so a SQLite user never loads the Neo4j driver.
"""

from __future__ import annotations

from palimpsest.graph_schema.credentials import Neo4jCredentials
from palimpsest.graph_schema.errors import InvalidInput
from palimpsest.graph_schema.store import MemoryStore

__all__ = ["NEO4J_SCHEMES", "SQLITE_PREFIX", "Neo4jCredentials", "open_store"]


SQLITE_PREFIX = "sqlite:///"
NEO4J_SCHEMES = ("neo4j://", "neo4j+s://", "neo4j+ssc://", "bolt://", "bolt+s://", "bolt+ssc://")


def open_store(uri: str, credentials: Neo4jCredentials | None = None) -> MemoryStore:
    """A store for a URI, not yet initialized (call ``await store.initialize()``).

    ``sqlite:///PATH`` (``sqlite:////abs/path`` for an absolute path, as in SQLAlchemy)
    or ``sqlite:///:memory:``; ``neo4j://``, ``bolt://`` and their ``+s`` forms.

    :raises InvalidInput: if the URI names no known store.
    """
    if uri.startswith(SQLITE_PREFIX):
        from palimpsest.graph_schema.sqlite.store import SqliteStore

        return SqliteStore(uri[len(SQLITE_PREFIX) :])
    if uri.startswith(NEO4J_SCHEMES):
        from palimpsest.graph_schema.neo4j.store import Neo4jStore

        return Neo4jStore(uri, credentials or Neo4jCredentials())
    raise InvalidInput(
        f"unknown store URI {uri!r}: use sqlite:///PATH, sqlite:///:memory:, neo4j://HOST:PORT or bolt://HOST:PORT"
    )
