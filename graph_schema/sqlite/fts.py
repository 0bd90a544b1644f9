"""Full-text indexes that follow their definition in schema.sql, also in stores made before.

``CREATE VIRTUAL TABLE IF NOT EXISTS`` leaves an existing index as it was made, so a
store made before a tokenizer changed (``unicode61`` became ``porter unicode61``, which
finds "researching" for "research") would keep the old one, and its queries, tokenized
the new way, would miss. `upgrade_indexes` compares each FTS5 table's stored definition
with the schema's and rebuilds the index of any that differs from the rows it indexes
(external content: the text itself is never copied or touched).
"""

from __future__ import annotations

import re
import sqlite3

from palimpsest.graph_schema.sqlite import queries as q
from palimpsest.graph_schema.sqlite.base import transaction

#: An FTS5 table's statement in schema.sql: its name and its column and option list.
_FTS_TABLE = re.compile(r"CREATE VIRTUAL TABLE IF NOT EXISTS (\w+) USING fts5 (\(.*?\));", re.S)


def _squashed(sql: str) -> str:
    return " ".join(sql.split())


def stale_indexes(conn: sqlite3.Connection, schema: str) -> dict[str, str]:
    """The FTS5 tables that exist with another definition than ``schema``'s, and their new statement."""
    stale: dict[str, str] = {}
    for name, body in _FTS_TABLE.findall(schema):
        row = conn.execute(q.TABLE_DEFINITION, {"name": name}).fetchone()
        # SQLite stores the statement as written, less IF NOT EXISTS and the semicolon.
        wanted = f"CREATE VIRTUAL TABLE {name} USING fts5 {body}"
        if row is not None and _squashed(row[0]) != _squashed(wanted):
            stale[name] = wanted
    return stale


def upgrade_indexes(conn: sqlite3.Connection, schema: str) -> list[str]:
    """Rebuild, in one transaction, every FTS5 index whose definition changed; their names.

    One transaction, so a store is never left with a new, empty index: a crash midway
    leaves the old one, and the next open tries again. Rebuilding reads every indexed
    row (about a minute at a million messages), once.
    """
    stale = stale_indexes(conn, schema)
    if stale:
        with transaction(conn, "IMMEDIATE"):
            for name, statement in stale.items():
                conn.execute(q.DROP_TABLE.format(table=name))
                conn.execute(statement)
                conn.execute(q.REBUILD_FTS.format(table=name))
    return list(stale)
