"""What is stored and how: models, the MemoryStore protocol, and its two backends."""

from graph_schema.errors import Conflict, InvalidInput, NotFound, PalimpsestError, StoreUnavailable
from graph_schema.store import MemoryStore, Neo4jCredentials, open_store

__all__ = [
    "Conflict",
    "InvalidInput",
    "MemoryStore",
    "Neo4jCredentials",
    "NotFound",
    "PalimpsestError",
    "StoreUnavailable",
    "open_store",
]
