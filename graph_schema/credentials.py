"""Neo4j's login, apart from `backends` so that a backend never imports the module that imports it.

`backends.open_store` imports the Neo4j store on demand, and the Neo4j store needs the
credentials' type: both import them from here, so there is no import circle.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Neo4jCredentials:
    """How to log in to a Neo4j server; the URI travels separately in the store URI."""

    user: str = "neo4j"
    password: str | None = None
    database: str = "neo4j"
